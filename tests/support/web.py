"""``fetch``: one HTTP GET as the tests make it, an error status answered like any other."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from typing import NamedTuple


class Response(NamedTuple):
    """What a GET got: ``status, headers, body = fetch(...)``; ``text`` is the body decoded."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def fetch(url: str, *, context: ssl.SSLContext | None = None, auth: tuple[str, str] | None = None,
          timeout: float = 10.0) -> Response:
    """GET ``url``; a 4xx/5xx answer is returned with its body, not raised.

    ``context``: TLS settings (a test CA to trust); ``auth``: (user, password) for basic auth.
    A server that does not answer (connection refused, TLS failure, timeout) raises OSError
    (urllib.error.URLError is one): a caller waiting for a server to come up ignores it."""
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return Response(resp.status, dict(resp.headers), resp.read())
    except urllib.error.HTTPError as exc:
        return Response(exc.code, dict(exc.headers), exc.read())
