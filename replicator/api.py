"""The replicator's control API, on its metrics port: inspect, pause and resume flows, reload the file.

- ``GET /api/flows``: each flow's state (data path, running / paused / failed / waiting,
  records and bytes copied, where its copy is, its last error);
- ``POST /api/flows/{flow}/pause`` and ``/resume`` (``{flow}`` as in mm2.properties, ``A->B``,
  percent-encoded or not);
- ``POST /api/reload``: read mm2.properties again (SIGHUP does the same).

It sits behind the same ``--web-config-file`` as ``/metrics`` (``replicator.metrics``): with
users configured every request needs credentials (401). A state-changing request must also
say ``Content-Type: application/json``, which an HTML form cannot send to another origin
without a CORS preflight this server never grants; and it is refused (403) when the port
listens beyond loopback without basic auth, or with basic auth but without TLS (the password
would cross the network in clear), or, without basic auth, when its ``Host`` is not a
loopback name with this port (DNS rebinding). Every control request is logged: who (the
basic auth user the credentials check let through, else "anonymous": never a name the
client merely claims), from which address, what, and the answer.

``controller`` is the running ``ReplicatorService``: ``flows_state()``, ``pause(name, who)``,
``resume(name, who)``, ``reload(who)``.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import logging
from urllib.parse import unquote

log = logging.getLogger("sparkmirror.control")

_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 413: "Payload Too Large", 415: "Unsupported Media Type",
            500: "Internal Server Error", 503: "Service Unavailable"}
_MAX_BODY = 64 * 1024


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _user(header: str | None) -> str:
    """The basic auth user name of a request the credentials check let through, else 'anonymous'."""
    if not header or not header[:6].lower() == "basic ":
        return "anonymous"
    try:
        name = base64.b64decode(header[6:].strip(), validate=True).split(b":", 1)[0]
        return name.decode("utf-8", "replace")[:100] or "anonymous"
    except (binascii.Error, ValueError):
        return "anonymous"


class ControlApp:
    """The WSGI app of ``/api/``; ``host``, ``live``: the listener's address and live web config
    (None: plain HTTP without auth), read at each request (the file may change while we run)."""

    def __init__(self, controller, host: str, live) -> None:
        self.controller = controller
        self.host, self.live = host, live

    def __call__(self, environ, start_response):
        status, body = self._answer(environ)
        data = json.dumps(body).encode()
        start_response(f"{status} {_REASONS.get(status, '')}".strip(),
                       [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                        ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")])
        return [data]

    def _answer(self, environ) -> tuple[int, dict]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = unquote(environ.get("PATH_INFO", ""))
        parts = [p for p in path.split("/") if p]  # ["api", ...]
        if parts == ["api", "flows"]:
            if method not in ("GET", "HEAD"):
                return 405, {"error": "GET /api/flows"}
            return 200, {"flows": self.controller.flows_state()}
        action = None
        if len(parts) == 4 and parts[:2] == ["api", "flows"] and parts[3] in ("pause", "resume"):
            action = parts[3]
        elif parts == ["api", "reload"]:
            action = "reload"
        if action is None:
            return 404, {"error": f"no such endpoint: {path[:200]}",
                         "endpoints": ["GET /api/flows", "POST /api/flows/{flow}/pause",
                                       "POST /api/flows/{flow}/resume", "POST /api/reload"]}
        # a name only the credentials check vouched for: without users, any client could claim one
        who = _user(environ.get("HTTP_AUTHORIZATION")) if self._authenticated() else "anonymous"
        remote = environ.get("REMOTE_ADDR", "?")
        what = f"{action} {parts[2]}" if action != "reload" else "reload"
        status, body = self._act(environ, method, action, parts, who)
        log.info("control: %s from %s: %s: %d %s", who, remote, what, status,
                 body.get("error") or body.get("result", ""))
        return status, body

    def _authenticated(self) -> bool:
        """Users are configured: the credentials check in front of this app let only them through."""
        return self.live is not None and self.live.auth is not None

    def _act(self, environ, method: str, action: str, parts: list[str], who: str) -> tuple[int, dict]:
        if method != "POST":
            return 405, {"error": f"{action} takes POST"}
        refusal = transport_refusal(self.host, self.live) or (
            None if self._authenticated() else host_refusal(environ.get("HTTP_HOST"), environ.get("SERVER_PORT")))
        if refusal:
            return 403, {"error": refusal}
        ctype = environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return 415, {"error": "state-changing requests need Content-Type: application/json"}
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > _MAX_BODY:
            return 413, {"error": f"the body must be a JSON object of at most {_MAX_BODY} bytes"}
        raw = environ["wsgi.input"].read(length) if length else b"{}"
        try:
            if not isinstance(json.loads(raw or b"{}"), dict):
                raise ValueError
        except ValueError:
            return 400, {"error": "the body must be a JSON object (or empty)"}
        if action == "reload":
            result = dict(self.controller.reload(who))
            # 400: the file is refused; 500: applied, but a flow did not start; 503: stopping
            return result.pop("http", 200 if result.get("ok") else 400), result
        flow = parts[2]
        try:
            changed = getattr(self.controller, action)(flow, who)
        except KeyError:
            return 404, {"error": f"no flow {flow} runs here", "flows": [f["flow"] for f in
                                                                         self.controller.flows_state()]}
        state = "paused" if action == "pause" else "resumed"
        return 200, {"flow": flow, "result": state if changed else f"already {state}"}


def transport_refusal(host: str, live) -> str | None:
    """Why state-changing requests must be refused on ``host`` with web config ``live`` (a
    LiveWebConfig or None), or None."""
    if is_loopback(host):
        return None
    auth = live is not None and live.auth is not None
    if not auth:
        return (f"the control API listens on {host}, beyond loopback, without authentication: give "
                "--web-config-file with basic_auth_users (and TLS), or listen on 127.0.0.1")
    if live.ssl_context is None:
        return (f"the control API listens on {host}, beyond loopback, with basic auth but without TLS: the "
                "password would cross the network in clear; add tls_server_config to the web config file")
    return None


def host_refusal(host_header: str | None, server_port: str | None) -> str | None:
    """Why a state-changing request without authentication must be refused for its Host header, or None.

    Without credentials the loopback address is the only protection, and DNS rebinding defeats
    it: a page from evil.example whose name now resolves to 127.0.0.1 reaches this port from the
    victim's browser, but its requests still say ``Host: evil.example:PORT``. Only a loopback
    name or address with this server's port is accepted."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(f"//{host_header or ''}")
        name, port = parts.hostname, parts.port
    except ValueError:
        name, port = None, None
    if name and is_loopback(name) and str(port) == str(server_port):
        return None
    return (f"Host {str(host_header)[:100]!r} is not this loopback address and port: refused (DNS "
            "rebinding); send the request to 127.0.0.1:PORT, or configure basic_auth_users in --web-config-file")


def dispatch(metrics_app, control_app):
    """``/api/...`` to the control API, everything else to ``/metrics``."""

    def app(environ, start_response):
        if control_app is not None and environ.get("PATH_INFO", "").startswith("/api/"):
            return control_app(environ, start_response)
        return metrics_app(environ, start_response)

    return app
