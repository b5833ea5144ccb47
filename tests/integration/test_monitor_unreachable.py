"""An unreachable cluster shows as down while the monitor keeps serving and keeps measuring the others.

Two bad clusters next to the real ones: one on a closed port (connection
refused at once) and one on a socket that accepts connections and never
answers (every request hangs until the timeout), which is what a stalled
broker or a black-holing firewall looks like.
"""

from __future__ import annotations

import socket
import time

import pytest

from replicator.devenv.kafka import free_port
from replicator.model.records import OffsetSync
from tests.integration.test_monitor_helpers import RunningMonitor, partition_of, produce_raw, sample, \
    write_mm2_config
from tests.support.kafka import create_topic

pytestmark = pytest.mark.kafka


def test_unreachable_clusters_are_down_and_the_rest_keeps_working(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    p, d, closed, silent = f"p{unique}", f"d{unique}", f"closed{unique}", f"silent{unique}"
    topic = f"orders-{unique}"
    create_topic(primary, topic)
    create_topic(dr, f"{p}.{topic}")
    create_topic(primary, f"mm2-offset-syncs.{d}.internal")
    produce_raw(primary, topic, [{"value": b"x"}] * 5)
    produce_raw(dr, f"{p}.{topic}", [{"value": b"x"}] * 2)
    sync = OffsetSync(topic, 0, 0, 0)
    produce_raw(primary, f"mm2-offset-syncs.{d}.internal", [{"key": sync.encode_key(), "value": sync.encode_value()}])

    hanging = socket.socket()
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(64)  # the kernel completes handshakes; nobody ever reads or answers
    config = write_mm2_config(tmp_path / "mm2.properties", {
        p: primary, d: dr, closed: f"127.0.0.1:{free_port()}", silent: f"127.0.0.1:{hanging.getsockname()[1]}",
    }, [(p, d), (p, closed), (p, silent)], {"topics": f".*-{unique}", "emit.heartbeats.interval.seconds": "1"})
    try:
        started = time.monotonic()
        with RunningMonitor(config, topics_exclude=[".*heartbeats"], timeout=3.0) as mon:
            # Serve fast the whole time, including while requests to `silent` hang for 3 s.
            slowest = 0.0
            down = set()
            while time.monotonic() - started < 8:
                for path in ("/metrics", "/api/status", "/healthz"):
                    code, _, elapsed = mon.get(path)
                    assert code == 200, path
                    slowest = max(slowest, elapsed)
                m = mon.metrics()
                down = {c for c in (closed, silent) if sample(m, "sparkmirror_cluster_up", cluster=c) == 0}
                if down == {closed, silent}:
                    break
                time.sleep(0.2)
            assert down == {closed, silent}
            assert slowest < 1.0, slowest

            m = mon.metrics()
            assert sample(m, "sparkmirror_cluster_up", cluster=p) == 1
            assert sample(m, "sparkmirror_cluster_up", cluster=d) == 1
            assert sample(m, "sparkmirror_cluster_errors_total", cluster=silent) >= 1
            status = mon.status()
            flows = {f["name"]: f for f in status["flows"]}
            for bad in (closed, silent):
                flow = flows[f"{p}->{bad}"]
                assert flow["status"] == "ERR"
                assert any(f"cluster {bad} unreachable" in r for r in flow["reasons"]), flow["reasons"]
                assert sample(m, "sparkmirror_flow_status", flow=f"{p}->{bad}", status="ERR") == 1
            clusters = {c["alias"]: c for c in status["clusters"]}
            assert clusters[closed]["up"] is False and clusters[closed]["error"]

            # The healthy flow keeps being measured while the others hang.
            good = f"{p}->{d}"
            assert partition_of(flows[good], topic, 0)["lag_records"] == 3
            produce_raw(primary, topic, [{"value": b"x"}] * 4)
            flow = mon.wait_for(lambda s: partition_of(s["flows"][0], topic, 0)["lag_records"] == 7
                                and s["flows"][0], 5, "lag update on the healthy flow")
            assert flow["name"] == good
            stop_started = time.monotonic()
        assert time.monotonic() - stop_started < 15
    finally:
        hanging.close()
