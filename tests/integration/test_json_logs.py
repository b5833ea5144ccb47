"""`--log-format json`: every line the replicator and the monitor write is one JSON object a
log shipper can read — sparkmirror's own lines, librdkafka's, Python warnings and Spark's JVM
(log4j) lines alike — with the flow on the lines of a flow's threads."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.support.cli import run_cli
from tests.support.kafka import create_topic, produce
from tests.support.replicator import Replicator, write_config

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

REQUIRED = {"time", "level", "logger", "message"}


def _objects(text: str) -> list[dict]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"line {n} is not JSON: {line[:300]!r}") from None
        assert isinstance(obj, dict) and REQUIRED <= obj.keys(), f"line {n} lacks {REQUIRED - obj.keys()}: {line[:300]}"
        out.append(obj)
    return out


def test_replicator_writes_only_json_lines_including_sparks_own(kafka_clusters, unique, tmp_path):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"jsonlog-{unique}"
    create_topic(primary, topic, 2)
    produce(primary, topic, [{"key": str(i).encode(), "value": b"v", "partition": i % 2} for i in range(50)])
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    # Spark at INFO, so the JVM certainly logs through log4j during the run.
    rep = Replicator(config, tmp_path / "ckpt", tmp_path / "replicator.log", extra_args=["--log-format", "json"],
                     env={"SPARKMIRROR_SPARK_LOG_LEVEL": "INFO"}).start()
    try:
        rep.wait_for_log("records/s", timeout=120)
        time.sleep(2)  # a heartbeat round, so the flow threads have logged
    finally:
        assert rep.terminate() == 0
    objects = _objects(rep.log())
    assert any(o.get("source") == "spark" for o in objects), "no line from Spark's JVM"
    assert any(o["logger"].startswith("sparkmirror") for o in objects)
    assert any("received SIGTERM" in o["message"] for o in objects)
    flows = {o.get("flow") for o in objects if o.get("thread", "").startswith(("heartbeats ", "refresh ", "checkpoints "))}
    assert "primary->dr" in flows or "dr->primary" in flows, f"flow threads' lines carry no flow: {flows}"


def test_monitor_and_config_errors_are_json(kafka_clusters, tmp_path):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    config = write_config(tmp_path / "mm2.properties", primary, dr)
    proc = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", "monitor", str(config), "--listen", "127.0.0.1:0",
                             "--log-format", "json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(8)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    objects = _objects(out)
    assert any("monitoring primary->dr" in o["message"] for o in objects)

    broken = tmp_path / "broken.properties"
    broken.write_text("clusters = a\na->b.enabled = true\n")
    done = run_cli("--log-format", "json", "replicate", str(broken), timeout=60)
    assert done.returncode == 2
    [error] = _objects(done.stderr)
    assert error["level"] == "ERROR" and f"{broken}:2" in error["message"]
