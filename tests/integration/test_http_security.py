"""--web-config-file end to end: TLS and basic auth on the monitor and the replicator's metrics endpoint.

A throwaway CA (openssl CLI) signs the server certificate; the real
``sparkmirror monitor`` serves with it and a bcrypt user, and the real Debian
Prometheus scrapes it over https with ``tls_config.ca_file`` and ``basic_auth``
(a second job with a wrong password must stay down). The password never shows
up in the monitor's log or in any response.
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.error
import urllib.request

import bcrypt
import pytest

from devenv.kafka import free_port
from sparkmirror.webconfig import load_web_config
from tests.support.monitor import write_mm2_config
from tests.support.prometheus import MonitorProcess, PrometheusServer
from tests.support.tls import make_pki
from tests.support.waiting import wait_until
from tests.support.web import fetch

PROTECTED = ("/metrics", "/api/status", "/api/history", "/")


def write_web_config(folder, password: str, cost: int = 8):
    """web.yml next to pki/, with paths relative to the file (as Prometheus resolves them)."""
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()
    path = folder / "web.yml"
    path.write_text("tls_server_config:\n  cert_file: pki/server.crt\n  key_file: pki/server.key\n"
                    f"basic_auth_users:\n  prometheus: {hashed}\n")
    return path


def assert_plain_http_fails(port: int) -> None:
    with pytest.raises((OSError, http.client.HTTPException)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()


@pytest.mark.kafka
def test_monitor_serves_tls_and_basic_auth_and_prometheus_scrapes_it(kafka_clusters, tmp_path, unique):
    pki = make_pki(tmp_path / "pki")
    password = f"Pw-{unique}-never-shown"
    web = write_web_config(tmp_path, password)
    p, d = f"p{unique}", f"d{unique}"
    config = write_mm2_config(tmp_path / "mm2.properties", {
        p: kafka_clusters.primary.bootstrap, d: kafka_clusters.dr.bootstrap}, [(p, d)], {"topics": f"none-{unique}"})
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    bodies = []
    with MonitorProcess(tmp_path / "monitor", config, "--interval", "1", web_config=web, ca_file=pki.ca_cert,
                        auth=("prometheus", password)) as mon:
        assert mon.url.startswith("https://")
        for path in PROTECTED:
            for auth in (None, ("prometheus", "wrong"), ("nobody", password), ("prometheus", password + "x"),
                         ("PROMETHEUS", password)):
                code, headers, body = fetch(mon.url + path, context=ctx, auth=auth)
                assert code == 401, (path, auth)
                assert headers["WWW-Authenticate"].startswith("Basic "), headers
                bodies.append(body)
            code, _, body = fetch(mon.url + path, context=ctx, auth=("prometheus", password))
            assert code == 200, path
            bodies.append(body)
        code, _, body = fetch(mon.url + "/healthz", context=ctx)  # open to liveness probes, still over TLS
        assert code == 200 and b'"ok"' in body
        assert fetch(mon.url + "/no-such-page", context=ctx).status == 401  # no probing for paths without credentials
        assert b"sparkmirror_cluster_up" in mon.get("/metrics")
        assert mon.status()["flows"][0]["name"] == f"{p}->{d}"

        assert_plain_http_fails(mon.port)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(mon.url + "/healthz", timeout=5)  # a client that does not trust the CA
        assert fetch(mon.url + "/healthz", context=ctx).status == 200  # none of that hurt the server

        scrape = {"scheme": "https", "tls_config": {"ca_file": str(pki.ca_cert)}}
        with PrometheusServer(tmp_path / "prometheus", {"monitor": [mon.address], "intruder": [mon.address]},
                              scrape_options={
                                  "monitor": {**scrape, "basic_auth": {"username": "prometheus",
                                                                       "password": password}},
                                  "intruder": {**scrape, "basic_auth": {"username": "prometheus",
                                                                        "password": "guess"}}}) as prom:
            def scraped():
                targets = prom.api("targets")["activeTargets"]
                health = {t["labels"]["job"]: (t["health"], t["lastError"], t["scrapeUrl"]) for t in targets}
                return (health.get("monitor", ("",))[0] == "up" and health.get("intruder", ("",))[0] == "down"
                        and health)

            health = wait_until(scraped, 30, interval=0.5, what="job monitor up and job intruder down",
                                details=lambda: f"targets: {prom.api('targets')['activeTargets']}")
            assert health["monitor"][0] == "up", health
            assert health["monitor"][2].startswith("https://"), health
            assert health["intruder"][0] == "down" and "401" in health["intruder"][1], health
            assert prom.wait_for_data(f'sparkmirror_cluster_up{{job="monitor",cluster="{p}"}}')

        # The file edited while the monitor runs: a new password, then a rotated certificate.
        write_web_config(tmp_path, "Second-" + password)
        wait_until(lambda: fetch(mon.url + "/metrics", context=ctx,
                                 auth=("prometheus", "Second-" + password)).status == 200,
                   10, interval=0.2, what="new password")
        assert fetch(mon.url + "/metrics", context=ctx, auth=("prometheus", password)).status == 401
        new_ctx = rotate(tmp_path, "pki2")

        def new_certificate_served() -> bool:
            try:
                return fetch(mon.url + "/healthz", context=new_ctx).status == 200
            except urllib.error.URLError:  # still the old certificate
                return False
        wait_until(new_certificate_served, 10, interval=0.2, what="rotated certificate")
        assert mon.running
    log = mon.log_path.read_text()
    assert "refused" in log and "without valid credentials" in log
    assert "https://127.0.0.1" in log and "with basic auth" in log
    assert "reloaded (basic auth users)" in log and "reloaded (certificate)" in log
    assert "Traceback" not in log
    for text in (log.encode(), *bodies):
        assert password.encode() not in text and b"guess" not in text


def rotate(tmp_path, name: str):
    """A new CA and server certificate, copied over pki/server.* (what cert-manager does); the new CA's context."""
    import shutil

    fresh = make_pki(tmp_path / name)
    shutil.copyfile(fresh.server_key, tmp_path / "pki" / "server.key.new")
    shutil.copyfile(fresh.server_cert, tmp_path / "pki" / "server.crt")
    (tmp_path / "pki" / "server.key.new").replace(tmp_path / "pki" / "server.key")
    return ssl.create_default_context(cafile=str(fresh.ca_cert))


def test_replicator_metrics_endpoint_takes_the_same_web_config(tmp_path):
    from replicator.metrics import ReplicatorMetrics

    make_pki(tmp_path / "pki")
    password = "replicator-Pw-77"
    rm = ReplicatorMetrics()
    rm.web_config = load_web_config(write_web_config(tmp_path, password, cost=4))
    rm.batch("a->b", 3, 30, 1, 0.1, 5, time.time())
    port = free_port()
    rm.serve(("127.0.0.1", port))
    try:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        url = f"https://127.0.0.1:{port}/metrics"
        for auth in (None, ("prometheus", "wrong"), ("other", password)):
            code, headers, body = fetch(url, context=ctx, auth=auth)
            assert code == 401 and headers["WWW-Authenticate"].startswith("Basic ")
            assert password.encode() not in body
        code, _, body = fetch(url, context=ctx, auth=("prometheus", password))
        assert code == 200 and b'sparkmirror_replicator_records_total{flow="a->b"} 3.0' in body
        assert_plain_http_fails(port)
        # still serving after the plain request
        assert fetch(url, context=ctx, auth=("prometheus", password)).status == 200

        # Edited while running, as exporter-toolkit allows: users at once, certificates for new connections.
        web = tmp_path / "web.yml"
        web.write_text("not: [valid\n")
        time.sleep(1.5)
        # a broken edit keeps the last good config
        assert fetch(url, context=ctx, auth=("prometheus", password)).status == 200
        write_web_config(tmp_path, "second-Pw", cost=4)
        wait_until(lambda: fetch(url, context=ctx, auth=("prometheus", "second-Pw")).status == 200, 10, interval=0.2,
                   what="new password")
        assert fetch(url, context=ctx, auth=("prometheus", password)).status == 401
        new_ctx = rotate(tmp_path, "pki2")

        def new_certificate_served() -> bool:
            try:
                return fetch(url, context=new_ctx, auth=("prometheus", "second-Pw")).status == 200
            except urllib.error.URLError:  # still the old certificate
                return False
        wait_until(new_certificate_served, 10, interval=0.2, what="rotated certificate")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            fetch(url, context=ctx, auth=("prometheus", "second-Pw"))  # the old CA no longer matches
    finally:
        rm.server.shutdown()
        rm.server.server_close()


def test_client_certificates_are_required_when_configured(tmp_path):
    from replicator.metrics import ReplicatorMetrics

    pki = make_pki(tmp_path / "pki")
    web = tmp_path / "web.yml"
    web.write_text("tls_server_config:\n  cert_file: pki/server.crt\n  key_file: pki/server.key\n"
                   "  client_ca_file: pki/ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n")
    rm = ReplicatorMetrics()
    rm.web_config = load_web_config(web)
    port = free_port()
    rm.serve(("127.0.0.1", port))
    try:
        url = f"https://127.0.0.1:{port}/metrics"
        anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
        with pytest.raises((OSError, http.client.HTTPException)):
            fetch(url, context=anonymous)
        with_cert = ssl.create_default_context(cafile=str(pki.ca_cert))
        with_cert.load_cert_chain(pki.client_cert, pki.client_key)
        code, _, body = fetch(url, context=with_cert)
        assert code == 200 and b"sparkmirror_replicator" in body
    finally:
        rm.server.shutdown()
        rm.server.server_close()
