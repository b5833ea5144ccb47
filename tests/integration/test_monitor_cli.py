"""`sparkmirror monitor` as a process: serves the endpoints, stops cleanly on SIGTERM with exit 0."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from replicator.devenv.kafka import free_port
from tests.integration.test_monitor_helpers import write_mm2_config

pytestmark = pytest.mark.kafka


def test_monitor_process_serves_and_stops_on_sigterm(kafka_clusters, tmp_path, unique):
    config = write_mm2_config(tmp_path / "mm2.properties", {
        f"p{unique}": kafka_clusters.primary.bootstrap, f"d{unique}": kafka_clusters.dr.bootstrap,
    }, [(f"p{unique}", f"d{unique}")], {"topics": f"nothing-{unique}"})
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "replicator.cli", "monitor", str(config),
                             "--listen", f"127.0.0.1:{port}", "--interval", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "monitor did not start serving"
                time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5) as resp:
            assert json.loads(resp.read())["flows"][0]["name"] == f"p{unique}->d{unique}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert b"sparkmirror_cluster_up" in resp.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            assert b"sparkmirror monitor" in resp.read()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "Traceback" not in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
