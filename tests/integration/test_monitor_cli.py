"""`sparkmirror monitor` as a process: serves the endpoints, stops cleanly on SIGTERM with exit 0."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from devenv.kafka import free_port
from tests.support.monitor import write_mm2_config
from tests.support.waiting import wait_until
from tests.support.web import fetch

pytestmark = pytest.mark.kafka


def test_monitor_process_serves_and_stops_on_sigterm(kafka_clusters, tmp_path, unique):
    config = write_mm2_config(tmp_path / "mm2.properties", {
        f"p{unique}": kafka_clusters.primary.bootstrap, f"d{unique}": kafka_clusters.dr.bootstrap,
    }, [(f"p{unique}", f"d{unique}")], {"topics": f"nothing-{unique}"})
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", "monitor", str(config),
                             "--listen", f"127.0.0.1:{port}", "--interval", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def output() -> str:  # all of it once the monitor exited (reading a live one's would block)
            return "monitor still running" if proc.poll() is None else proc.stdout.read()

        wait_until(lambda: fetch(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200, 30, interval=0.2,
                   what="the monitor to serve /healthz", ignoring=OSError,  # not listening yet
                   alive=lambda: proc.poll() is None, details=output)
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


def test_monitor_stops_cleanly_on_sigterm_while_busy(kafka_clusters, tmp_path, unique):
    """SIGTERM while the monitor tails heartbeats and offset-syncs, probes a lagging partition, reads the
    groups and answers requests: exit 0 within a few seconds, 'stopping the monitor' logged, and no
    ERROR, WARNING from a torn-down task or traceback on the way out (here with --log-format json:
    every line one JSON object)."""
    import threading

    from tests.support.monitor import Flow
    from tests.support.prometheus import MonitorProcess

    f = Flow(kafka_clusters, tmp_path, unique, partitions=2)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms - 5_000] * 50)
    f.copy(0, 20, now_ms - 5_000)
    f.sync(0, 0, 0)
    f.start_heartbeats()
    monitor = MonitorProcess(tmp_path / "monitor", f.config, "--interval", "0.5", "--groups-interval", "0.5",
                             "--topics-exclude", ".*heartbeats", "--log-format", "json")
    stop, signalled = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hammer() -> None:  # requests in flight when the signal lands
        while not stop.is_set():
            for path in ("/metrics", "/api/status?detail=partitions", "/", "/api/history"):
                try:
                    monitor.get(path, timeout=5)
                except OSError as exc:
                    if not signalled.is_set():  # refused or cut off only once the monitor is stopping
                        errors.append(exc)
                    return

    try:
        monitor.start(timeout=60)
        monitor.wait_for(lambda s: s["flows"][0]["lag"]["records"] == 30, 30, "the lagging partition")
        callers = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
        for t in callers:
            t.start()
        time.sleep(2)
        proc = monitor._proc
        started = time.monotonic()
        signalled.set()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        took = time.monotonic() - started
        stop.set()
        for t in callers:
            t.join(10)
    finally:
        stop.set()
        monitor.stop()
        f.stop_heartbeats()
    log = monitor.log_path.read_text()
    lines = [json.loads(line) for line in log.splitlines() if line.strip()]  # every line is JSON
    assert code == 0, log[-3000:]
    assert took < 10, f"took {took:.1f}s to stop"
    assert any(e["message"] == "stopping the monitor" for e in lines), log[-3000:]
    bad = [e for e in lines if e["level"] in ("ERROR", "CRITICAL") or "Traceback" in json.dumps(e)]
    assert not bad, bad
    assert not errors, errors
