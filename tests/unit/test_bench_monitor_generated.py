"""bench.monitor_generated: the generator feeds the monitor's state what its collectors would."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest

import monitor.service
from bench.monitor_generated import (BUSY, PER_TOPIC, SOURCE, SYNC_EVERY, TARGET, EvaluationLog, FedCheckpoints,
                                     FedHeartbeats, FedOffsetSyncs, GeneratedCluster, Workload, checkpoints,
                                     initial_syncs, installed, top_costs, mm2_properties, monitor_args, new_syncs, tailed,
                                     window_figures)
from monitor.state import MonitorState
from monitor.watch import watched_flows
from sparkmirror.configfile import load_config
from sparkmirror.model.records import Heartbeat


@pytest.fixture
def config(tmp_path):
    return mm2_properties(tmp_path / "mm2.properties")


def test_busy_partitions_grow_at_the_rate_and_are_copied_after_the_delay():
    w = Workload(300, rate=1000.0, delay=1.0, start=1000.0)  # 10 records/s per partition
    assert w.total == 400 and w.topics(SOURCE)[BUSY] == PER_TOPIC
    assert w.written(0, 1000.0) == 1 and w.written(0, 1010.0) == 101 and w.written(50, 1010.0) == 100
    assert w.copied(0, 1010.0) == w.written(0, 1009.0) == 91
    assert w.newest_sync(0, 1000.5) is None and w.newest_sync(0, 1011.0) == SYNC_EVERY
    # each record's timestamp is when it was written: it exists at that time, not before
    for offset in (0, 7, 99):
        written_at = w.start + (offset + 0.5) / w.rate
        assert w.written(50, written_at - 0.01) == offset and w.written(50, written_at + 0.001) == offset + 1
    assert w.timestamp_ms(BUSY, 50, 7) == int((1000.0 + 7.5 / 10) * 1000)
    assert w.timestamp_ms(BUSY, 0, w.written(0, time.time()) + 10) is None
    assert w.timestamp_ms("t0000", 3, 2) is not None and w.timestamp_ms("t0000", 3, 3) is None


def test_list_offsets_answers_the_partitions_asked_keyed_by_the_callers_tuples():
    w = Workload(200, start=1000.0)
    asked = [("t0001", 5), (BUSY, 3), ("nope", 0)]
    out = w.list_offsets(SOURCE, asked, "latest", 1010.0)
    assert out == {("t0001", 5): 3, (BUSY, 3): w.written(3, 1010.0)}
    assert all(any(k is a for a in asked) for k in out)
    assert w.list_offsets(TARGET, [(f"{SOURCE}.{BUSY}", 3)], "latest", 1010.0) == {
        (f"{SOURCE}.{BUSY}", 3): w.copied(3, 1010.0)}
    assert w.list_offsets(SOURCE, [(BUSY, 3)], "earliest", 1010.0) == {(BUSY, 3): 0}


def test_generated_records_reach_the_state_through_the_real_collectors(config):
    w = Workload(200, start=time.time() - 30)
    flow, = watched_flows(load_config(config))
    state = MonitorState([flow], [SOURCE, TARGET])
    GeneratedCluster.workload = w
    clients = [GeneratedCluster(a, {"bootstrap.servers": "x:1"}, {"bootstrap.servers": "x:1"}, state)
               for a in (SOURCE, TARGET)]
    loop = asyncio.new_event_loop()
    try:
        syncs = FedOffsetSyncs(flow, clients[0], state, loop)
        syncs._deliver(tailed(initial_syncs(w)))
        syncs._deliver(tailed(new_syncs(w, {}, time.time())))
        fs = state.flows[flow.name]
        assert len(fs.syncs) == 300 and fs.syncs[("t0001", 7)] == (0, 0)
        assert fs.syncs[(BUSY, 0)] == (w.newest_sync(0, time.time()),) * 2
        hb = Heartbeat(SOURCE, TARGET, int(time.time() * 1000) - 1000)
        FedHeartbeats(flow, clients[1], state, loop)._deliver(tailed([hb], timestamps=[hb.timestamp_ms]))
        assert fs.heartbeat.received_total == 1 and fs.heartbeat.latency_count == 1
        FedCheckpoints(flow, clients[1], state, loop, monitor_args([str(config)])[1])._deliver(
            tailed(checkpoints(w, time.time())))
        assert len(fs.checkpoints) == 3 * PER_TOPIC and ("group-0", f"{SOURCE}.{BUSY}", 0) in fs.checkpoints
        assert not state.decode_errors
    finally:
        loop.close()
        for c in clients:
            c.shutdown()


def test_the_monitor_service_watches_every_generated_partition_and_the_busy_ones_lag(config):
    _, options = monitor_args([str(config), "--listen", "127.0.0.1:0", "--granularity", "topic"])
    w, evaluations = Workload(300, start=time.time() - 30), EvaluationLog()
    real = monitor.service.ClusterClient

    def status(port: int) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as r:
            return json.loads(r.read())["flows"][0]

    async def run(service_cls) -> tuple[dict, str]:
        service = service_cls(load_config(config), options)
        await service.start()
        try:
            deadline = time.monotonic() + 10
            while True:
                flow = await asyncio.to_thread(status, service.port)
                if flow["partitions_by_status"]["OK"] == w.total and flow["lag"]["records"] or \
                        time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            metrics = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{service.port}/metrics", timeout=10).read())
            return flow, metrics.decode()
        finally:
            await service.stop()

    with installed(w, evaluations) as service_cls:
        flow, metrics = asyncio.run(run(service_cls))
    assert monitor.service.ClusterClient is real  # the names are put back
    assert flow["partitions_by_status"]["OK"] == w.total
    # 10 records/s per busy partition, copied 1 s late: ~10 records and ~1 s behind each
    assert 800 <= flow["lag"]["records"] <= 1200
    assert f'sparkmirror_topic_lag_records{{flow="{SOURCE}->{TARGET}",topic="{BUSY}"}}' in metrics
    assert evaluations.evaluations
    figures = window_figures({"evaluations": list(evaluations.evaluations), "generator": []}, 0, time.monotonic())
    assert figures["evaluations"] == len(evaluations.evaluations) and figures["evaluation_cpu_ms"] > 0


def test_top_costs_counts_the_top_frame_as_self_and_every_frame_once_as_inclusive(tmp_path):
    collapsed = (f"<module> ({tmp_path}/a.py:1);run ({tmp_path}/a.py:5);work (/lib/b.py:9) 3\n"
                 f"<module> ({tmp_path}/a.py:1);run ({tmp_path}/a.py:5);run ({tmp_path}/a.py:7) 1\n")
    own, inclusive, total = top_costs(collapsed, root=tmp_path)
    assert total == 4
    assert own == [(3, "/lib/b.py:work"), (1, "a.py:run")]
    assert (4, "a.py:run") in inclusive and (4, "a.py:<module>") in inclusive and (3, "/lib/b.py:work") in inclusive
