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

from devenv.kafka import free_port
from sparkmirror.model.records import OffsetSync
from tests.support.kafka import create_topic
from tests.support.monitor import RunningMonitor, partition_of, produce_raw, sample, \
    write_mm2_config

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


def test_a_refresh_with_nothing_to_ask_does_not_mark_a_down_cluster_reachable(tmp_path):
    """Regression: ListOffsets of no partition "succeeded" without a request and flipped a down cluster to up.

    The end-offsets collector keeps topic metadata for --metadata-interval; a cluster
    that goes down in between, with no partition to ask about (the mirror topic not
    created yet, no topic matching), was shown reachable again at every refresh.
    """
    import asyncio

    from monitor.collectors.cluster import ClusterClient, ClusterUnavailable
    from monitor.collectors.offsets import EndOffsetCollector
    from monitor.state import MonitorState
    from monitor.watch import MonitorOptions, librdkafka_client, watched_flows
    from sparkmirror.configfile import load_config

    source, target = f"down-src-{free_port()}", f"down-tgt-{free_port()}"
    config = load_config(write_mm2_config(tmp_path / "mm2.properties", {
        source: f"127.0.0.1:{free_port()}", target: f"127.0.0.1:{free_port()}"}, [(source, target)]))
    flow = watched_flows(config)[0]
    state = MonitorState([flow], [source, target], window=4)
    state.flows[flow.name].syncs_loaded = True
    options = MonitorOptions(port=0, timeout=1.0)
    clients = {a: ClusterClient(a, librdkafka_client(config, a, "admin"), librdkafka_client(config, a, "consumer"),
                                state, timeout=1.0) for a in (source, target)}

    async def scenario():
        # both went down after the collector had read their metadata
        outcomes = await asyncio.gather(*(c.call(c.describe_cluster) for c in clients.values()),
                                        return_exceptions=True)
        assert all(isinstance(o, ClusterUnavailable) for o in outcomes), outcomes
        collector = EndOffsetCollector(flow, clients[source], clients[target], state, options, probe=None)
        collector._metadata_at = time.monotonic()
        # 1. a watched source topic whose mirror does not exist yet: nothing to ask the target
        collector._watched, collector._starts = [("orders", 0, flow.remote_topic("orders"), False)], {("orders", 0): 0}
        with pytest.raises(ClusterUnavailable):
            await collector.refresh()  # the source is asked, and fails
        assert state.clusters[target].up is False, "target shown reachable without being asked"
        # 2. no watched topic at all: nothing to ask either cluster
        collector._source_topics, collector._target_topics, collector._watched = {}, {}, []
        await collector.refresh()
        await collector.refresh_metadata()
        assert state.clusters[source].up is False, "source shown reachable without being asked"
        assert state.clusters[target].up is False, "target shown reachable without being asked"

    try:
        asyncio.run(scenario())
    finally:
        for client in clients.values():
            client.shutdown()


def test_listing_groups_of_a_closed_port_is_a_failure_not_an_empty_answer():
    """librdkafka answers ListConsumerGroups on an unreachable cluster with no groups and the
    error aside; taken as an answer, the groups refresh kept sparkmirror_cluster_up at 1 (and the
    cluster's page silent) for a cluster that never answered."""
    import asyncio

    from monitor.collectors.cluster import ClusterClient, ClusterUnavailable
    from monitor.state import MonitorState

    state = MonitorState([], ["gone"])
    client = ClusterClient("gone", {"bootstrap.servers": f"127.0.0.1:{free_port()}"},
                           {"bootstrap.servers": "unused:1"}, state, timeout=1.0)
    try:
        with pytest.raises(ClusterUnavailable):
            asyncio.run(client.call(client.consumer_groups))
        assert state.clusters["gone"].up is False
    finally:
        client.shutdown()
