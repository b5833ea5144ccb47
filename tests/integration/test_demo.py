"""``./run demo`` stopped the way a terminal's Ctrl-C stops it — SIGINT to its whole process
group — stops the replicator exactly where the target acknowledged every record, then the
clusters, with exit code 0 and nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from devenv import clusters
from devenv.kafka import _port_open, free_port
from sparkmirror import artifacts
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


def _copied(bootstrap: str, topic: str) -> int:
    """Records on the target's ``topic`` (0 while the cluster or the topic is not there yet)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-test", "log_level": 0})
    try:
        md = c.list_topics(topic, timeout=5).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in md.partitions)
    except KafkaException:
        return 0
    finally:
        c.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_stops_the_demo_in_order(tmp_path):
    ports = [p for pair in clusters.DEV_CLUSTERS.values() for p in pair]
    if any(_port_open(p) for p in ports):
        pytest.skip("the dev clusters' ports are in use (sparkmirror dev up?)")
    # The demo's own cache (clusters, checkpoints, logs), sharing the downloaded jars.
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in ("jars", "cds"):
        if (artifacts.cache_dir() / name).exists():
            (cache / name).symlink_to(artifacts.cache_dir() / name)
    out = open(tmp_path / "demo.out", "wb")
    demo = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", "demo", "--listen", f"127.0.0.1:{free_port()}"],
                            cwd=ROOT, env={**os.environ, "SPARKMIRROR_CACHE": str(cache)},
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    dr = clusters.dev_cluster("dr").bootstrap
    broker_pids: list[int] = []
    try:
        wait_until(lambda: _copied(dr, "primary.orders") >= 500, 240, interval=2,
                   what="the demo to copy 500 records", alive=lambda: demo.poll() is None,
                   details=lambda: (tmp_path / "demo.out").read_text()[-3000:])
        broker_pids = [int((cache / "dev" / name / "pid").read_text()) for name in clusters.DEV_CLUSTERS]
        os.killpg(demo.pid, signal.SIGINT)  # a terminal's Ctrl-C
        code = demo.wait(90)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
        for pid in broker_pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    text = (tmp_path / "demo.out").read_text()
    log = (cache / "demo" / "replicator.log").read_text()
    assert code == 0, text[-3000:]
    assert "demo stopped" in text
    # The target was still up when the replicator stopped: nothing to copy again on restart.
    assert "resumes where the target acknowledged every record" in log, log[-3000:]
    assert "did not acknowledge" not in log
    assert not [pid for pid in broker_pids if _alive(pid)], "a cluster outlived the demo"
