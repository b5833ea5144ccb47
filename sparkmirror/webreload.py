"""LiveWebConfig: a running server picks up changes of its --web-config-file, as Prometheus exporters do.

exporter-toolkit re-reads the web config file for every request, so operators
rotate certificates (cert-manager, ACME) and change basic-auth users without a
restart. Here the file and the certificate files it names are stat()ed at most
every ``check_every`` seconds; when one changed, the file is loaded and checked
as at start. Then:

- basic_auth_users apply at once (also adding or removing auth altogether);
- cert_file, key_file, min_version and max_version are loaded *into the live
  SSLContext* for the next connections. That is safe only on the thread that
  creates the connections' SSL objects (the event loop, the accept loop), which
  is why loading (``poll``, slow: bcrypt, file reads) and applying (``apply``,
  fast) are two steps;
- turning TLS on or off and the client-certificate settings need a restart
  (Python cannot take CA certificates out of a live context): said in the log.

A file that no longer loads is logged once per change, without secrets, and the
server goes on with what it has.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
import threading
import time

from sparkmirror.errors import ConfigError
from sparkmirror.webconfig import WWW_AUTHENTICATE, BasicAuth, FailedLogins, WebConfig, load_web_config

log = logging.getLogger(__name__)


def _no_password() -> bytes:
    raise ValueError("the key is encrypted")  # never let OpenSSL prompt on a terminal


def _stamp(config: WebConfig) -> tuple:
    paths = [config.path]
    if config.tls is not None:
        paths += [config.tls.cert_file, config.tls.key_file, config.tls.client_ca_file]
    out = []
    for path in paths:
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            st = None
        out.append(None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class LiveWebConfig:
    """The web config a server uses now: ``config``, ``ssl_context`` (None: plain HTTP) and ``auth``."""

    def __init__(self, config: WebConfig, check_every: float = 1.0) -> None:
        self.config = config
        self.ssl_context = config.ssl_context()
        self.auth: BasicAuth | None = config.authenticator()
        self.check_every = check_every
        self._stamp = _stamp(config)
        self._checked_at = time.monotonic()
        self._reported: tuple | None = None
        self._lock = threading.Lock()

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    def poll(self) -> tuple[WebConfig, BasicAuth | None, tuple] | None:
        """A newly loaded config (with its authenticator) when the files changed since the last look, else None."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked_at < self.check_every:
                return None
            self._checked_at = now
            stamp = _stamp(self.config)
            if stamp == self._stamp or stamp == self._reported:
                return None
        try:
            config = load_web_config(self.config.path)
        except ConfigError as exc:
            self._reported = stamp
            log.warning("web config not reloaded, still serving with the previous one: %s", exc)
            return None
        return config, config.authenticator(), _stamp(config)

    def apply(self, loaded: tuple[WebConfig, BasicAuth | None, tuple]) -> None:
        """Use ``loaded`` (from ``poll``) from now on; call it where connections are created."""
        config, auth, stamp = loaded
        old = self.config
        changes = []
        if (config.tls is None) != (old.tls is None) or (
                config.tls is not None and (config.tls.client_ca_file, config.tls.client_auth)
                != (old.tls.client_ca_file, old.tls.client_auth)):
            log.warning("web config %s: switching TLS on or off and client certificate settings take effect "
                        "after a restart", config.path)
            config = dataclasses.replace(config, tls=old.tls)  # what is live; the rest still applies
        elif config.tls is not None and (stamp[1:3] != self._stamp[1:3] or (
                config.tls.cert_file, config.tls.key_file, config.tls.min_version, config.tls.max_version)
                != (old.tls.cert_file, old.tls.key_file, old.tls.min_version, old.tls.max_version)):
            ctx, tls = self.ssl_context, config.tls
            try:
                ctx.load_cert_chain(tls.cert_file, tls.key_file, password=_no_password)
                ctx.minimum_version = tls.min_version
                ctx.maximum_version = tls.max_version or ssl.TLSVersion.MAXIMUM_SUPPORTED
                changes.append("certificate")
            except (OSError, ValueError) as exc:  # the files changed again between the check and now
                log.warning("web config %s: certificate not reloaded (%s)", config.path, type(exc).__name__)
                return
        if config.users != old.users:
            self.auth = auth
            changes.append("basic auth users" if auth is not None else "basic auth off")
        self.config = config
        self._stamp = stamp if config is loaded[0] else _stamp(config)
        log.info("web config %s reloaded%s", config.path, f" ({', '.join(changes)})" if changes else "")


class CredentialCheck:
    """Basic auth as the live web config file says at each request; refusals logged, never the credentials.

    The one check behind both HTTP servers: the monitor's (aiohttp, the check in a worker
    thread: bcrypt takes tens of milliseconds) and the replicator's /metrics (WSGI).
    A refused request gets ``STATUS``, ``HEADERS`` and ``BODY``.
    """

    STATUS = "401 Unauthorized"
    HEADERS = {"WWW-Authenticate": WWW_AUTHENTICATE}
    BODY = "401 Unauthorized\n"

    def __init__(self, live: LiveWebConfig, log: logging.Logger) -> None:
        self.live = live
        self._failures = FailedLogins(log)

    @property
    def required(self) -> bool:
        """False while the file has no basic_auth_users: every request passes."""
        return self.live.auth is not None

    def allows(self, header: str | None, path: str, remote: str | None) -> bool:
        """Whether the ``Authorization`` header passes; a refusal is noted for the log."""
        auth = self.live.auth  # the users of the file as it is now (it may be edited while we run)
        if auth is None or auth.check(header):
            return True
        self._failures.note(path, remote)
        return False
