"""--web-config-file: Prometheus' web configuration format, parsed and checked (sparkmirror.webconfig)."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import time

import bcrypt
import pytest

from sparkmirror.errors import ConfigError
from sparkmirror.webconfig import BasicAuth, load_web_config, parse_web_config
from sparkmirror.webreload import LiveWebConfig
from tests.support.tls import make_pki

HASH = bcrypt.hashpw(b"s3cret-pw", bcrypt.gensalt(4)).decode()


def header(user: str | bytes, password: str | bytes) -> str:
    u = user.encode() if isinstance(user, str) else user
    p = password.encode() if isinstance(password, str) else password
    return "Basic " + base64.b64encode(u + b":" + p).decode()


def refused(text: str, path: str = "/etc/web.yml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_web_config(text, path)
    assert info.value.file == path
    return info.value


# --- parsing ------------------------------------------------------------------------------------------


def test_full_file_parses_with_paths_relative_to_the_file():
    cfg = parse_web_config(
        "tls_server_config:\n"
        "  cert_file: server.crt\n"
        "  key_file: /abs/server.key\n"
        "  client_ca_file: ca.crt\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        "  min_version: TLS13\n"
        "http_server_config:\n"
        "  http2: true\n"
        f"basic_auth_users:\n  prometheus: {HASH}\n  'alice': '{HASH}'\n", "/etc/sm/web.yml")
    assert str(cfg.tls.cert_file) == "/etc/sm/server.crt"
    assert str(cfg.tls.key_file) == "/abs/server.key"
    assert str(cfg.tls.client_ca_file) == "/etc/sm/ca.crt"
    assert cfg.tls.client_auth == ssl.CERT_REQUIRED
    assert cfg.tls.min_version == ssl.TLSVersion.TLSv1_3
    assert cfg.users == {"prometheus": HASH.encode(), "alice": HASH.encode()}
    assert cfg.scheme == "https"


@pytest.mark.parametrize("text", ["", "# nothing\n", "tls_server_config:\nbasic_auth_users: {}\n",
                                  "tls_server_config: {cert_file: '', key_file: ''}\n"])
def test_empty_sections_mean_plain_http_without_auth(text):
    cfg = parse_web_config(text, "web.yml")
    assert cfg.tls is None and cfg.users == {} and cfg.scheme == "http" and cfg.authenticator() is None


def test_basic_auth_without_tls_is_allowed():
    cfg = parse_web_config(f"basic_auth_users:\n  u: {HASH}\n", "web.yml")
    assert cfg.tls is None and cfg.scheme == "http" and set(cfg.users) == {"u"}


def test_a_client_ca_alone_means_verify_client_certificates():
    cfg = parse_web_config("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n", "w.yml")
    assert cfg.tls.client_auth == ssl.CERT_REQUIRED


@pytest.mark.parametrize("text, line, words", [
    ("tls_server_config: [\n", 2, "not valid YAML"),
    ("- a\n- b\n", 1, "must be a mapping"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\nbasic_auth_user:\n  u: x\n", 4, "unknown key 'basic_auth_user'"),
    ("tls_server_config:\n  cert_file: a\n  keyfile: b\n", 3, "unknown key 'tls_server_config.keyfile'"),
    ("tls_server_config:\n  cert_file: a\n", 2, "no key_file"),
    ("tls_server_config:\n  key_file: a\n", 2, "no cert_file"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n", 4,
     "needs client_ca_file"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n", 4,
     "not supported"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Maybe\n", 4, "not one of"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n", 4, "min_version 'TLS14'"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n", 5,
     "min_version is above max_version"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", 4,
     "cipher_suites is not supported"),
    ("tls_server_config:\n  cert_file: [a, b]\n  key_file: b\n", 2, "single value"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: deny\n", 2, "headers is not supported"),
    ("http_server_config:\n  http2: maybe\n", 2, "true or false"),
    ("http_server_config:\n  http3: true\n", 2, "unknown key"),
    ("basic_auth_users:\n  u: x\n  u: y\n", 3, "given twice"),
    ("basic_auth_users:\n  'a:b': x\n", 2, "':'"),
    (f"basic_auth_users:\n  ok: {HASH}\n  bob: {HASH[:-1]}\n", 3, "not a bcrypt hash"),
    ("basic_auth_users:\n  bob: $2b$03$" + "a" * 53 + "\n", 2, "cost"),
])
def test_bad_files_name_the_line(text, line, words):
    err = refused(text)
    assert err.line == line, str(err)
    assert words in err.message, str(err)
    assert str(err).startswith(f"/etc/web.yml:{line}: ")
    assert err.exit_code == 2


def test_a_plain_password_in_place_of_a_hash_is_refused_without_quoting_it():
    err = refused("basic_auth_users:\n  prometheus: PlainTextSecret99\n")
    assert "not a bcrypt hash" in err.message
    assert "PlainTextSecret99" not in str(err)


# --- loading: files and certificates -------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_load_builds_a_tls_context(pki, tmp_path):
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
                    f"  client_ca_file: {pki.ca_cert}\n")
    cfg = load_web_config(path)
    ctx = cfg.ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert load_web_config(None) is None


@pytest.mark.parametrize("case", ["missing-cert", "key-of-another-cert", "not-pem", "encrypted-key",
                                  "missing-ca", "unreadable-file", "not-utf8"])
def test_load_refuses_unusable_files_naming_file_and_line(pki, tmp_path, case):
    cert, key, ca = pki.server_cert, pki.server_key, None
    line = 2
    if case == "missing-cert":
        cert = tmp_path / "nope.crt"
    elif case == "key-of-another-cert":
        key = pki.client_key
    elif case == "not-pem":
        cert = tmp_path / "junk.crt"
        cert.write_text("not a certificate\n")
    elif case == "encrypted-key":
        key = tmp_path / "enc.key"
        subprocess.run(["openssl", "pkey", "-in", str(pki.server_key), "-aes256", "-passout", "pass:pw",
                        "-out", str(key)], check=True, capture_output=True)
        line = 3
    elif case == "missing-ca":
        ca, line = tmp_path / "nope-ca.crt", 4
    path = tmp_path / "web.yml"
    text = f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
    if ca:
        text += f"  client_ca_file: {ca}\n"
    path.write_bytes(text.encode() if case != "not-utf8" else b"basic_auth_users:\n  \xff: x\n")
    if case == "unreadable-file":
        path = tmp_path / "missing.yml"
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    err = info.value
    assert err.file == str(path), str(err)
    if case not in ("unreadable-file", "not-utf8"):
        assert err.line == line, str(err)


# --- basic auth -------------------------------------------------------------------------------------------


def test_basic_auth_accepts_only_the_right_user_and_password():
    other = bcrypt.hashpw(b"other-pw", bcrypt.gensalt(4))
    auth = BasicAuth({"prometheus": HASH.encode(), "grafana": other})
    assert auth.check(header("prometheus", "s3cret-pw"))
    assert auth.check(header("prometheus", "s3cret-pw"))  # remembered
    assert auth.check(header("grafana", "other-pw"))
    assert auth.check("basic " + base64.b64encode(b"grafana:other-pw").decode())  # scheme is case-insensitive
    for bad in (None, "", "Basic", "Bearer abc", "Basic !!!notbase64", "Basic " + base64.b64encode(b"nocolon").decode(),
                header("prometheus", "wrong"), header("prometheus", "s3cret-pw "), header("grafana", "s3cret-pw"),
                header("nobody", "s3cret-pw"), header("", ""), header("prometheus", b"\xff\xfe"),
                header("Prometheus", "s3cret-pw"), header("prometheus", "s3cret-pw" + "x" * 80)):
        assert not auth.check(bad), bad
    # a remembered success for one user is not a success for another with the same hash
    twins = BasicAuth({"a": HASH.encode(), "b": HASH.encode()})
    assert twins.check(header("a", "s3cret-pw")) and twins.check(header("b", "s3cret-pw"))
    assert not twins.check(header("c", "s3cret-pw"))


def test_an_unknown_user_costs_a_bcrypt_round_like_a_known_one():
    slow = bcrypt.hashpw(b"pw", bcrypt.gensalt(10))  # ~50 ms a check; an early "no such user" would take µs
    auth = BasicAuth({"prometheus": slow})

    def cost(h: str) -> float:
        started = time.perf_counter()
        for _ in range(3):
            assert not auth.check(h)
        return (time.perf_counter() - started) / 3

    known, unknown = cost(header("prometheus", "wrong")), cost(header("nobody", "wrong"))
    assert unknown > known / 3, (known, unknown)


def test_default_listen_addresses_are_loopback():
    from sparkmirror_cli.main import build_parser
    from monitor.command import options_from_args

    args = build_parser().parse_args(["monitor", "mm2.properties"])
    assert (options_from_args(args).host, options_from_args(args).port) == ("127.0.0.1", 9464)
    args = build_parser().parse_args(["replicate", "mm2.properties"])
    assert args.metrics_listen.startswith("127.0.0.1:")


@pytest.mark.parametrize("command", ["monitor", "replicate"])
def test_cli_refuses_a_bad_web_config_with_exit_2_before_reading_mm2_properties(tmp_path, command):
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prometheus: NotAHash-Secret77\n")
    result = subprocess.run([sys.executable, "-m", "sparkmirror_cli.main", command, str(tmp_path / "absent.properties"),
                             "--web-config-file", str(web)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"{web}:2: basic_auth_users" in result.stderr
    assert "Traceback" not in result.stderr and "NotAHash-Secret77" not in result.stderr + result.stdout


def test_monitor_app_asks_credentials_for_every_spelling_of_a_protected_path():
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    from monitor.exporters.http import HttpSources, build_app
    from monitor.exporters.prometheus import build_registry

    async def no_evaluation():
        return None

    sources = HttpSources(no_evaluation, build_registry(lambda: None), lambda: (True, {}), "t",
                          web=LiveWebConfig(parse_web_config(f"basic_auth_users:\n  prometheus: {HASH}\n", "w.yml")))
    right = {"Authorization": header("prometheus", "s3cret-pw")}

    async def scenario():
        client = TestClient(TestServer(build_app(sources)))
        await client.start_server()
        try:
            assert (await client.get("/healthz")).status == 200
            assert (await client.get("/healthz?x=/metrics")).status == 200
            assert (await client.get("/metrics", headers=right)).status == 200
            for path in ("/metrics", "/api/status", "/api/history", "/", "/%6detrics", "/healthz/../metrics", "/healthz/%2E%2E/metrics",
                         "/healthz%2F..%2Fmetrics", "//metrics", "/./metrics", "/metrics/", "/healthz/", "/nothing",
                         "/api/status?detail=partitions", "/metrics;/healthz", "/metrics#/healthz"):
                # sent as raw bytes: an HTTP client library would normalise most of these first
                reader, writer = await asyncio.open_connection(client.host, client.port)
                writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                answer = (await reader.read()).decode(errors="replace")
                writer.close()
                status = answer.split(" ", 2)[1]
                assert status in ("401", "400"), (path, answer[:300])
                assert status == "400" or "WWW-Authenticate: Basic" in answer, (path, answer[:300])
        finally:
            await client.close()

    asyncio.run(scenario())


def test_replicator_metrics_app_asks_credentials_and_logs_refusals_without_them(caplog):
    """The replicator's WSGI /metrics goes through the same CredentialCheck as the monitor's server."""
    import logging

    from sparkmirror.webauth import wsgi_basic_auth
    from sparkmirror.webreload import CredentialCheck

    def metrics_app(_environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"metrics\n"]

    live = LiveWebConfig(parse_web_config(f"basic_auth_users:\n  prometheus: {HASH}\n", "w.yml"))
    app = wsgi_basic_auth(metrics_app, CredentialCheck(live, logging.getLogger("sparkmirror.replicate")))

    def get(authorization: str | None):
        answer = {}
        environ = {"PATH_INFO": "/metrics", "REMOTE_ADDR": "10.0.0.9"}
        if authorization is not None:
            environ["HTTP_AUTHORIZATION"] = authorization
        body = b"".join(app(environ, lambda status, headers: answer.update(status=status, headers=dict(headers))))
        return answer["status"], answer["headers"], body

    assert get(header("prometheus", "s3cret-pw"))[::2] == ("200 OK", b"metrics\n")
    with caplog.at_level(logging.WARNING, logger="sparkmirror.replicate"):
        for authorization in (None, header("prometheus", "wrong-pw-77"), "Bearer x"):
            status, headers, body = get(authorization)
            assert (status, body) == ("401 Unauthorized", b"401 Unauthorized\n")
            assert headers["WWW-Authenticate"].startswith("Basic realm=")
    [refusal] = caplog.records  # at most one line a minute, with the count
    assert "refused 1 HTTP request(s)" in refusal.getMessage() and "/metrics from 10.0.0.9" in refusal.getMessage()
    assert "wrong-pw-77" not in caplog.text
