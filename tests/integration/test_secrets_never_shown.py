"""No password or key material from mm2.properties appears in any output: stdout, stderr, logs, HTTP.

Every secret the file can hold is a unique marker: SCRAM and OAUTHBEARER
passwords in ``sasl.jaas.config`` (inline, per role, and through the
``${file:...}`` and ``${env:...}`` config providers), ``ssl.key.password`` of an
encrypted PEM key, ``ssl.truststore.password``, ``ssl.keystore.password``, and
an OIDC client secret. ``sparkmirror validate`` (text and --json, with -v debug
logging, on the valid file and on broken variants that fail on exactly those
lines) and ``sparkmirror monitor`` (with -v, against the real plaintext test
cluster speaking SASL to it, and an unreachable one; /metrics, /api/status,
/healthz and / fetched while the login fails) must never print one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from devenv.kafka import free_port
from tests.support.cli import run_cli
from tests.support.waiting import wait_until
from tests.support.web import fetch

pytestmark = pytest.mark.kafka

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def markers() -> dict[str, str]:
    run = uuid.uuid4().hex[:10]
    names = ["scram-via-file", "scram-producer", "oidc-client-secret", "truststore-password", "key-password",
             "oidc-via-env", "keystore-password-dropped", "broken-jaas", "jaas-junk-after-password"]
    return {name: f"Zq{run}{i}{name.replace('-', '')}" for i, name in enumerate(names)}


def pem_files(tmp: Path, key_password: str) -> tuple[Path, Path]:
    """A self-signed CA (ca.pem) and client.pem = its certificate + the key encrypted with ``key_password``."""
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=sparkmirror-test", "-passout", f"pass:{key_password}"],
                   check=True, capture_output=True, timeout=60)
    client = tmp / "client.pem"
    client.write_text(cert.read_text() + key.read_text())
    return cert, client


def write_config(tmp: Path, primary: str, dr: str, secret: dict[str, str]) -> Path:
    ca, client = pem_files(tmp, secret["key-password"])
    secrets_file = tmp / "secrets.properties"
    secrets_file.write_text(f'jaas = {SCRAM} required username="mirror" password="{secret["scram-via-file"]}";\n')
    lines = [
        "clusters = primary, dr",
        f"primary.bootstrap.servers = {primary}",
        f"dr.bootstrap.servers = {dr}",
        "primary->dr.enabled = true",
        "dr->primary.enabled = true",
        "config.providers = file, env",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "primary.security.protocol = SASL_PLAINTEXT",
        "primary.sasl.mechanism = SCRAM-SHA-512",
        f"primary.sasl.jaas.config = ${{file:{secrets_file}:jaas}}",
        f'primary.producer.sasl.jaas.config = {SCRAM} required username="p" password="{secret["scram-producer"]}";',
        "dr.security.protocol = SASL_SSL",
        "dr.sasl.mechanism = OAUTHBEARER",
        "dr.sasl.oauthbearer.token.endpoint.url = http://127.0.0.1:1/oauth2/token",
        f'dr.sasl.jaas.config = {OAUTH} required clientId="mirror" clientSecret="{secret["oidc-client-secret"]}";',
        "dr.consumer.sasl.oauthbearer.client.credentials.client.secret = ${env:SPARKMIRROR_TEST_OIDC_SECRET}",
        "dr.ssl.truststore.type = PEM",
        f"dr.ssl.truststore.location = {ca}",
        f"dr.ssl.truststore.password = {secret['truststore-password']}",
        "dr.ssl.keystore.type = PEM",
        f"dr.ssl.keystore.location = {client}",
        f"dr.ssl.key.password = {secret['key-password']}",
        "dr.admin.ssl.endpoint.identification.algorithm =",
        "emit.heartbeats.interval.seconds = 1",
    ]
    path = tmp / "mm2.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def broken_variants(config: Path, secret: dict[str, str]) -> list[Path]:
    """Copies that fail validation on the very lines holding secrets."""
    text = config.read_text()
    variants = {
        "unterminated-jaas": text.replace(
            f'password="{secret["scram-producer"]}";', f'password="{secret["broken-jaas"]};'),
        "junk-after-password": text.replace(
            f'clientSecret="{secret["oidc-client-secret"]}";',
            f'clientSecret="{secret["jaas-junk-after-password"]}" tokenEndpoint;'),
        "pkcs12-key-password": text.replace("dr.ssl.keystore.type = PEM", "dr.ssl.keystore.type = PKCS12")
        + f"dr.ssl.keystore.password = {secret['keystore-password-dropped']}\n",
        "missing-provider-key": text.replace(":jaas}", ":no-such-key}"),
        "wrong-module": text.replace("primary.sasl.mechanism = SCRAM-SHA-512", "primary.sasl.mechanism = PLAIN"),
    }
    out = []
    for name, body in variants.items():
        path = config.with_name(f"{name}.properties")
        path.write_text(body)
        out.append(path)
    return out


def leaks(text: str, secret: dict[str, str]) -> list[str]:
    found = []
    for name, marker in secret.items():
        # the whole marker, and its unique middle (a cut-short echo would still show that)
        if marker in text or marker[2:14] in text:
            found.append(name)
    return found


def test_no_secret_in_any_output(kafka_clusters, tmp_path):
    secret = markers()
    env = {**os.environ, "SPARKMIRROR_TEST_OIDC_SECRET": secret["oidc-via-env"]}
    unreachable = f"127.0.0.1:{free_port()}"
    config = write_config(tmp_path, kafka_clusters.primary.bootstrap, unreachable, secret)
    outputs: dict[str, str] = {}

    for args in (["validate"], ["validate", "--json"], ["-v", "validate"], ["-v", "validate", "--json"]):
        done = run_cli(*args, str(config), env=env)
        assert done.returncode == 0, done.stderr
        outputs[" ".join(args)] = done.stdout + done.stderr
    assert "********" in outputs["validate"]  # the secrets are there, masked
    for variant in broken_variants(config, secret):
        for args in (["-v", "validate"], ["validate", "--json"]):
            done = run_cli(*args, str(variant), env=env)
            assert done.returncode == 2, (variant.name, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr
            outputs[f"{' '.join(args)} {variant.name}"] = done.stdout + done.stderr

    port = free_port()
    log_path = tmp_path / "monitor.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", "-v", "monitor", str(config), "--listen",
                                 f"127.0.0.1:{port}", "--interval", "0.5", "--timeout", "2"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: "cluster" in fetch(base + "/api/status").text, 60, interval=0.3,
                   what="the monitor to serve /api/status", ignoring=OSError,  # not listening yet
                   alive=lambda: proc.poll() is None, details=lambda: log_path.read_text()[-3000:])
        # let the logins fail a few times, so every error path has produced its messages
        time.sleep(6)
        for path in ("/metrics", "/api/status", "/api/status?detail=partitions", "/healthz", "/",
                     "/?fragment=1", "/api/history"):
            outputs[f"GET {path}"] = fetch(base + path).text
        assert '"up": false' in outputs["GET /api/status"].replace('"up":false', '"up": false')
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    outputs["monitor log"] = log_path.read_text(errors="replace")
    assert "DEBUG" in outputs["monitor log"], "the monitor ran without -v debug logging"

    found = {where: leaks(text, secret) for where, text in outputs.items() if leaks(text, secret)}
    assert found == {}, f"secrets shown: {found}"
    assert sum(len(t) for t in outputs.values()) > 10_000, "suspiciously little output was checked"
