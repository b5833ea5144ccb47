"""ReplicatorCollector: which flows a sparkmirror replicator has paused on purpose.

A paused flow copies nothing and its heartbeats stop reaching the target, which the
heartbeats alone cannot tell from a replicator that died. With ``--replicator-url`` the
monitor asks the replicator's control API (``GET /api/flows``, replicator.api) every
``--interval`` and records each flow's pause in the state; the evaluator then rates such a
flow PAUSED, not STOP. Apache MM2 has no such API: its flows never read as PAUSED.

Only reads: GET, never a state-changing request. The password (``--replicator-password-file``)
is read once at start and sent only in the Authorization header; it is never logged. After
``FORGET_AFTER`` failed polls in a row a replicator's flows are no longer known to be paused
(a replicator that went away while paused is a stopped copy, STOP), while one failed poll
changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import time
import urllib.error
import urllib.request

from monitor.loops import RoundFailures, repeat
from monitor.state import MonitorState
from sparkmirror.errors import ConfigError

log = logging.getLogger(__name__)

#: Failed polls in a row after which a replicator's flows are no longer known to be paused.
FORGET_AFTER = 3


def read_password(path: str) -> str:
    """The first line of ``--replicator-password-file``; ConfigError (exit 2) when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"--replicator-password-file {path}: {exc.strerror}",
                          hint="a file whose first line is the password of --replicator-user") from None


def check_url(url: str) -> str:
    """``url`` without a trailing slash; ConfigError for one the collector cannot use."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--replicator-url {url!r}: not an http:// or https:// address",
                          hint="the replicator's --metrics-listen address, e.g. http://127.0.0.1:9465")
    if parts.username or parts.password:
        raise ConfigError("--replicator-url must not carry credentials (they would show in logs)",
                          hint="use --replicator-user and --replicator-password-file")
    return url.rstrip("/")


class ReplicatorCollector:
    """Polls one replicator's ``GET /api/flows``."""

    name = "replicator"

    def __init__(self, url: str, state: MonitorState, interval: float, timeout: float, *,
                 user: str | None = None, password: str | None = None, cacert: str | None = None) -> None:
        self.url, self.state, self.interval, self.timeout = check_url(url), state, interval, timeout
        self._auth = ("Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()) if user else None
        self._context = (ssl.create_default_context(cafile=cacert) if cacert else ssl.create_default_context()) \
            if self.url.startswith("https:") else None
        self._seen: set[str] = set()  # the flows this replicator listed
        self._failed = 0

    def __repr__(self) -> str:  # never the Authorization value
        return f"ReplicatorCollector({self.url!r})"

    async def run(self) -> None:
        await repeat(self.refresh, self.interval, RoundFailures(f"reading {self.url}/api/flows", log))

    async def refresh(self) -> None:
        try:
            flows = await asyncio.to_thread(self._get)
        except Exception:
            self._failed += 1
            if self._failed >= FORGET_AFTER:
                self.state.set_replicator_flows([{"flow": f, "state": "unknown"} for f in self._seen], None)
            raise
        self._failed = 0
        self._seen = {f.get("flow") for f in flows if isinstance(f, dict)}
        self.state.set_replicator_flows([f for f in flows if isinstance(f, dict)], time.time())

    def _get(self) -> list:
        req = urllib.request.Request(self.url + "/api/flows", method="GET")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as resp:
                body = json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"HTTP {exc.code} {exc.reason}"
                               + (" (check --replicator-user and --replicator-password-file)"
                                  if exc.code == 401 else "")) from None
        flows = body.get("flows") if isinstance(body, dict) else None
        if not isinstance(flows, list):
            raise RuntimeError("the answer has no list of flows: is this a sparkmirror replicator's metrics port?")
        return flows
