"""``--web-config-file``: TLS and basic auth for sparkmirror's HTTP endpoints, in Prometheus' format.

The file is the one Prometheus exporters read (prometheus/exporter-toolkit,
``docs/web-configuration.md``), so an operator who already secures node_exporter
reuses the same file and the same bcrypt hashes::

    tls_server_config:
      cert_file: server.crt          # relative paths: to the web config file's folder
      key_file: server.key
      client_ca_file: clients-ca.crt # optional: verify client certificates
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12
    basic_auth_users:
      prometheus: $2b$12$...         # bcrypt hash (htpasswd -nBC 12 "" | tr -d ':\\n')

Both the monitor (aiohttp) and the replicator's metrics endpoint (WSGI) read it
through ``load_web_config``; each server only adds its own glue (middleware,
WSGI wrapper). Everything wrong with the file is a ConfigError naming the file
and line, found before any socket is bound. Options of the toolkit that
sparkmirror cannot honour (cipher suites, curves, client SAN allow-lists,
extra headers) are refused by name rather than silently ignored.

Passwords: checked with bcrypt, so a wrong guess always costs one bcrypt
round, also for a user that does not exist (checked against a dummy hash of the
same cost), and the comparison of names never short-cuts. A right answer is
remembered (keyed by an HMAC with a per-process key, never the password
itself) so a scrape every few seconds does not pay bcrypt each time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

from sparkmirror.errors import ConfigError, one_line

#: What a 401 answer carries, so browsers and curl know to ask for credentials.
WWW_AUTHENTICATE = 'Basic realm="sparkmirror", charset="UTF-8"'

CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
#: Toolkit values Python's ssl module cannot express (it always verifies a certificate it asks for).
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}

_TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}
_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version"}
_TLS_UNSUPPORTED = {"cert", "key", "client_ca", "cipher_suites", "curve_preferences",
                    "prefer_server_cipher_suites", "client_allowed_sans"}
_HTTP_KEYS = {"http2"}  # accepted and moot: sparkmirror serves HTTP/1.1
_HTTP_UNSUPPORTED = {"headers"}
_BCRYPT = re.compile(r"^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$")

DOCS_HINT = "see 'Securing the HTTP endpoints' in README.md (Prometheus' web configuration format)"


@dataclass(frozen=True)
class TlsSettings:
    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth: ssl.VerifyMode = ssl.CERT_NONE
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion | None = None
    cert_line: int | None = None  # where cert_file / key_file stand, for errors found when loading them
    key_line: int | None = None
    ca_line: int | None = None


@dataclass(frozen=True)
class WebConfig:
    """A parsed web config file. ``tls`` None: plain HTTP; ``users`` empty: no basic auth."""

    path: str
    tls: TlsSettings | None = None
    users: dict[str, bytes] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (certificate, key and client CA read now); ConfigError naming the line."""
        tls = self.tls
        if tls is None:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = tls.min_version
        if tls.max_version is not None:
            ctx.maximum_version = tls.max_version

        def encrypted(*_):
            raise ConfigError(f"key_file {tls.key_file} is encrypted", file=self.path, line=tls.key_line,
                              hint="give an unencrypted PEM key (as Prometheus exporters need too)")

        for name, path, line in (("cert_file", tls.cert_file, tls.cert_line),
                                 ("key_file", tls.key_file, tls.key_line)):
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise ConfigError(f"cannot read {name} {path}: {exc.strerror}", file=self.path, line=line,
                                  hint="paths are relative to the web config file's folder") from None
        try:
            ctx.load_cert_chain(tls.cert_file, tls.key_file, password=encrypted)
        except ssl.SSLError as exc:
            raise ConfigError(f"cert_file {tls.cert_file} and key_file {tls.key_file} are not a PEM certificate "
                              f"and its private key{f' ({exc.reason})' if exc.reason else ''}", file=self.path, line=tls.cert_line,
                              hint="both must be PEM; the key must belong to the certificate") from None
        if tls.client_ca_file is not None:
            try:
                ctx.load_verify_locations(cafile=tls.client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
                raise ConfigError(f"cannot load client_ca_file {tls.client_ca_file}: {reason}", file=self.path,
                                  line=tls.ca_line, hint="a PEM file of CA certificates") from None
        ctx.verify_mode = tls.client_auth
        return ctx

    def authenticator(self) -> BasicAuth | None:
        return BasicAuth(self.users) if self.users else None


class BasicAuth:
    """Checks an ``Authorization`` header against bcrypt hashes; thread-safe."""

    _CACHE_SIZE = 256

    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = dict(users)
        cost = max(int(_BCRYPT.match(h.decode()).group(1)) for h in users.values())
        import bcrypt

        self._bcrypt = bcrypt
        # An unknown user is checked against this, so it costs what a known one does.
        self._dummy = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(max(4, min(cost, 31))))
        self._key = secrets.token_bytes(32)
        self._good: set[bytes] = set()
        self._lock = threading.Lock()

    def check(self, header: str | None) -> bool:
        """True when ``header`` is ``Basic base64(user:password)`` of a configured user."""
        credentials = _basic_credentials(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = self._dummy
        known = False
        for name, value in self._users.items():  # no early exit: the time does not depend on where the name is
            if hmac.compare_digest(name.encode(), user):
                hashed, known = value, True
        key = hmac.new(self._key, b"".join(len(p).to_bytes(4, "big") + p for p in (user, password, hashed)),
                       hashlib.sha256).digest()
        with self._lock:
            if key in self._good:
                return True
        try:
            ok = self._bcrypt.checkpw(password, hashed) and known
        except ValueError:  # cannot happen for hashes load_web_config accepted; refuse rather than fail
            ok = False
        if ok:
            with self._lock:
                if len(self._good) >= self._CACHE_SIZE:
                    self._good.clear()
                self._good.add(key)
        return ok


class FailedLogins:
    """Logs refused requests at most once a minute (with a count), never the credentials tried."""

    def __init__(self, log, every: float = 60.0) -> None:
        self._log = log
        self._every = every
        self._count = 0
        self._logged_at = float("-inf")
        self._lock = threading.Lock()

    def note(self, path: str, remote: str | None) -> None:
        import time

        with self._lock:
            self._count += 1
            now = time.monotonic()
            if now - self._logged_at < self._every:
                return
            count, self._count, self._logged_at = self._count, 0, now
        self._log.warning("refused %d HTTP request(s) without valid credentials (latest: %s from %s)",
                          count, one_line(path, 200), remote or "?")


def _basic_credentials(header: str | None) -> tuple[bytes, bytes] | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep or len(password) > 72:  # bcrypt reads 72 bytes: a longer password could only match truncated
        return None
    return user, password


# --- parsing ----------------------------------------------------------------------------------


def load_web_config(path: str | os.PathLike | None) -> WebConfig | None:
    """Read, parse and check ``path`` (certificates included); None when no file is given."""
    if path is None:
        return None
    path = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(1_000_001)
    except OSError as exc:
        raise ConfigError(f"cannot read the web config file: {exc.strerror}", file=path,
                          hint="--web-config-file takes a YAML file in Prometheus' web configuration format") from None
    if len(raw) > 1_000_000:
        raise ConfigError("the web config file is larger than 1 MB", file=path, hint=DOCS_HINT)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("the web config file is not UTF-8 text", file=path, hint=DOCS_HINT) from None
    config = parse_web_config(text, path)
    config.ssl_context()  # unreadable or mismatched certificate and key: refused now, not at the first scrape
    return config


def parse_web_config(text: str, path: str) -> WebConfig:
    """Parse the YAML text of a web config file (no file access); ConfigError with FILE:LINE."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"not valid YAML: {problem}", file=path, line=mark.line + 1 if mark else None,
                          hint=DOCS_HINT) from None
    if root is None or (isinstance(root, yaml.ScalarNode) and root.value in ("", "~", "null")):
        return WebConfig(path)  # an empty file is valid in Prometheus too: plain HTTP, no auth
    top = _mapping(root, "the web config file", path)
    base = Path(path).parent
    tls = users = None
    for key, (line, node) in top.items():
        if key not in _TOP_KEYS:
            raise _unknown(key, line, path, _TOP_KEYS)
        if key == "tls_server_config":
            tls = _tls(node, path, base, line)
        elif key == "basic_auth_users":
            users = _users(node, path)
        else:
            _http(node, path)
    return WebConfig(path, tls, users or {})


def _tls(node, path: str, base: Path, line: int) -> TlsSettings | None:
    if _is_null(node):
        return None
    items = _mapping(node, "tls_server_config", path)
    values: dict[str, tuple[int, str]] = {}
    for key, (kline, value) in items.items():
        if key in _TLS_UNSUPPORTED:
            raise ConfigError(f"tls_server_config.{key} is not supported by sparkmirror", file=path, line=kline,
                              hint="remove it; sparkmirror uses Python's TLS defaults for ciphers and curves"
                              if key in ("cipher_suites", "curve_preferences", "prefer_server_cipher_suites")
                              else "use cert_file, key_file and client_ca_file")
        if key not in _TLS_KEYS:
            raise _unknown(f"tls_server_config.{key}", kline, path, _TLS_KEYS)
        values[key] = (kline, _scalar(value, f"tls_server_config.{key}", path))
    values = {k: v for k, v in values.items() if v[1] != ""}
    if not values:
        return None
    for needed, other in (("cert_file", "key_file"), ("key_file", "cert_file")):
        if needed not in values:
            raise ConfigError(f"tls_server_config has {other} but no {needed}",
                              file=path, line=values.get(other, (line, ""))[0],
                              hint="TLS needs both cert_file and key_file")
    auth_line, auth_name = values.get("client_auth_type", (None, "NoClientCert"))
    if auth_name in _UNVERIFIED_CLIENT_AUTH:
        raise ConfigError(f"client_auth_type {auth_name} is not supported by sparkmirror", file=path, line=auth_line,
                          hint="use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file")
    if auth_name not in CLIENT_AUTH_TYPES:
        raise ConfigError(f"client_auth_type {auth_name!r} is not one of {', '.join(CLIENT_AUTH_TYPES)}",
                          file=path, line=auth_line, hint=DOCS_HINT)
    client_auth = CLIENT_AUTH_TYPES[auth_name]
    if client_auth != ssl.CERT_NONE and "client_ca_file" not in values:
        raise ConfigError(f"client_auth_type {auth_name} needs client_ca_file", file=path, line=auth_line,
                          hint="client_ca_file: the CA that signed the clients' certificates")
    if "client_ca_file" in values and client_auth == ssl.CERT_NONE:
        # As exporter-toolkit: a client CA without a client_auth_type means "verify".
        client_auth = ssl.CERT_REQUIRED
    versions = {}
    for key in ("min_version", "max_version"):
        if key in values:
            vline, name = values[key]
            if name not in TLS_VERSIONS:
                raise ConfigError(f"{key} {name!r} is not one of {', '.join(TLS_VERSIONS)}", file=path, line=vline,
                                  hint="for example min_version: TLS12")
            versions[key] = TLS_VERSIONS[name]
    if "min_version" in versions and "max_version" in versions and versions["min_version"] > versions["max_version"]:
        raise ConfigError("min_version is above max_version", file=path, line=values["max_version"][0],
                          hint="for example min_version: TLS12, max_version: TLS13")

    def file(key):
        return (base / values[key][1]) if key in values else None

    return TlsSettings(
        cert_file=file("cert_file"), key_file=file("key_file"), client_ca_file=file("client_ca_file"),
        client_auth=client_auth, min_version=versions.get("min_version", ssl.TLSVersion.TLSv1_2),
        max_version=versions.get("max_version"), cert_line=values["cert_file"][0], key_line=values["key_file"][0],
        ca_line=values.get("client_ca_file", (None, ""))[0])


def _users(node, path: str) -> dict[str, bytes]:
    if _is_null(node):
        return {}
    users = {}
    for name, (line, value) in _mapping(node, "basic_auth_users", path).items():
        if ":" in name or not name:
            raise ConfigError(f"basic_auth_users: user name {name!r} is empty or has a ':'", file=path, line=line,
                              hint="HTTP basic auth cannot carry a ':' in a user name")
        hashed = _scalar(value, f"basic_auth_users.{name}", path)
        if not _BCRYPT.match(hashed):
            # The value is not quoted: someone may have put a plain password here.
            raise ConfigError(f"basic_auth_users: the password of {name!r} is not a bcrypt hash", file=path,
                              line=line, hint="store bcrypt hashes, e.g. from: htpasswd -nBC 12 \"\" | tr -d ':\\n'")
        if not 4 <= int(_BCRYPT.match(hashed).group(1)) <= 31:
            raise ConfigError(f"basic_auth_users: the bcrypt cost of {name!r} is not 4 to 31", file=path, line=line,
                              hint="hash it again with a cost between 10 and 14")
        users[name] = hashed.encode()
    return users


def _http(node, path: str) -> None:
    if _is_null(node):
        return
    for key, (line, value) in _mapping(node, "http_server_config", path).items():
        if key in _HTTP_UNSUPPORTED:
            raise ConfigError(f"http_server_config.{key} is not supported by sparkmirror", file=path, line=line,
                              hint="remove it")
        if key not in _HTTP_KEYS:
            raise _unknown(f"http_server_config.{key}", line, path, _HTTP_KEYS | _HTTP_UNSUPPORTED)
        if _scalar(value, f"http_server_config.{key}", path).lower() not in ("true", "false"):
            raise ConfigError(f"http_server_config.{key} must be true or false", file=path, line=line)


def _mapping(node, what: str, path: str) -> dict[str, tuple[int, object]]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{what} must be a mapping of keys to values", file=path, line=node.start_mark.line + 1,
                          hint=DOCS_HINT)
    out: dict[str, tuple[int, object]] = {}
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            raise ConfigError(f"{what}: a key must be a plain name", file=path, line=line, hint=DOCS_HINT)
        if key_node.value in out:
            raise ConfigError(f"{what}: {key_node.value!r} is given twice (also on line {out[key_node.value][0]})",
                              file=path, line=line, hint="keep one")
        out[key_node.value] = (line, value_node)
    return out


def _scalar(node, what: str, path: str) -> str:
    import yaml

    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError(f"{what} must be a single value", file=path, line=node.start_mark.line + 1, hint=DOCS_HINT)
    return "" if node.value in ("~", "null") and node.style is None else node.value


def _is_null(node) -> bool:
    import yaml

    return isinstance(node, yaml.ScalarNode) and node.style is None and node.value in ("", "~", "null")


def _unknown(key: str, line: int, path: str, known) -> ConfigError:
    return ConfigError(f"unknown key {key!r}", file=path, line=line,
                       hint=f"expected one of {', '.join(sorted(known))}")
