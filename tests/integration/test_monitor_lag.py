"""The monitor against the real test brokers, with MM2's internal records written by the test.

The test plays the replicator: it copies records into ``p<u>.<topic>`` on dr and
writes offset-syncs, heartbeats and checkpoints in MM2's bytes, so every lag
figure the monitor exports is known exactly. The ``heartbeats`` topic of the
shared primary cluster is excluded with the monitor's deny list: other tests
(and the real MM2) write to it.
"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from sparkmirror.metrics import STATUS_CODES
from sparkmirror.model.records import Checkpoint
from tests.support.monitor import Flow, RunningMonitor, partition_of, produce_raw, sample

pytestmark = pytest.mark.kafka


def test_known_lag_in_records_and_seconds_then_caught_up(kafka_clusters, tmp_path, unique):
    f = Flow(kafka_clusters, tmp_path, unique, partitions=2)
    now_ms = int(time.time() * 1000)
    # Replicated so far: 5 records of partition 0 and 3 of partition 1.
    f.produce_source(0, [now_ms - 60_000] * 5)
    f.produce_source(1, [now_ms - 60_000] * 3)
    f.copy(0, 5, now_ms - 60_000)
    f.copy(1, 3, now_ms - 60_000)
    f.sync(0, 0, 0)
    f.sync(1, 2, 2)
    f.start_heartbeats()
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
            mon.wait_for(lambda s: s["flows"][0]["lag"]["records"] == 0, 20, "lag 0 at start")
            # Replication "paused": 7 new source records, the oldest 42 s old.
            oldest_ms = int(time.time() * 1000) - 42_000
            f.produce_source(0, [oldest_ms + i * 1000 for i in range(7)])
            flow = mon.wait_for(lambda s: any(p["oldest_unreplicated_timestamp_ms"] for p in s["flows"][0]["partitions"])
                                and s["flows"][0], 20, "lag after the pause, probed")
            p0, p1 = partition_of(flow, f.topic, 0), partition_of(flow, f.topic, 1)
            status = mon.status()
            truth = status["generated_at"] - oldest_ms / 1000
            p0 = partition_of(status["flows"][0], f.topic, 0)
            assert p0["lag_records"] == 7 and p0["position"] == 5 and p0["position_basis"] == "offset-sync"
            assert abs(p0["lag_seconds"] - truth) < 1.0, (p0["lag_seconds"], truth)
            assert p0["oldest_unreplicated_timestamp_ms"] == oldest_ms
            assert (p1["lag_records"], p1["lag_seconds"]) == (0, 0.0)
            m = mon.metrics()
            assert sample(m, "sparkmirror_partition_lag_records", flow=f.name, topic=f.topic, partition=0) == 7
            assert sample(m, "sparkmirror_partition_lag_records", flow=f.name, topic=f.topic, partition=1) == 0
            assert sample(m, "sparkmirror_topic_lag_records", flow=f.name, topic=f.topic) == 7
            assert sample(m, "sparkmirror_flow_lag_records", flow=f.name) == 7
            assert 41.0 < sample(m, "sparkmirror_flow_lag_seconds", flow=f.name) < 50.0

            # Resume: the 7 records reach the target (no new sync needed: the target end carries it).
            f.copy(0, 7, oldest_ms)
            flow = mon.wait_for(lambda s: s["flows"][0]["lag"]["records"] == 0 and s["flows"][0], 20,
                                "caught up again")
            assert flow["lag"]["seconds"] == 0
            assert all(p["lag_records"] == 0 and p["lag_seconds"] == 0 for p in flow["partitions"])
            assert flow["replicated_records_total"] == 7 and flow["source_records_total"] == 7
            m = mon.metrics()
            assert sample(m, "sparkmirror_flow_lag_records", flow=f.name) == 0
            assert sample(m, "sparkmirror_flow_lag_seconds", flow=f.name) == 0
            assert sample(m, "sparkmirror_flow_replicated_records_total", flow=f.name) == 7
            # Heartbeats were received live: a latency histogram with small values.
            count = sample(m, "sparkmirror_heartbeat_latency_seconds_count", flow=f.name)
            assert count and count >= 1
            assert sample(m, "sparkmirror_heartbeat_latency_seconds_sum", flow=f.name) / count < 1.0
            assert sample(m, "sparkmirror_heartbeat_age_seconds", flow=f.name) < 2.0
            assert sample(m, "sparkmirror_replicator_up", flow=f.name) == 1
            assert sample(m, "sparkmirror_cluster_up", cluster=f.src) == 1
            assert flow["status"] == "OK", flow["reasons"]
    finally:
        f.stop_heartbeats()


def test_heartbeats_stop_turns_the_flow_stop(kafka_clusters, tmp_path, unique):
    f = Flow(kafka_clusters, tmp_path, unique)
    f.produce_source(0, [int(time.time() * 1000)] * 3)
    f.sync(0, 0, 0)  # ... but only one record copied: lag 2 while the replicator is gone
    f.copy(0, 1, int(time.time() * 1000))
    f.start_heartbeats(every=0.2)
    # A 2 s timeout (the default is 2 x the interval but at least 10 s) keeps the test short.
    with RunningMonitor(f.config, topics_exclude=[".*heartbeats"], heartbeat_timeout=2.0) as mon:
        mon.wait_for(lambda s: s["flows"][0]["heartbeat"]["received_total"] > 2, 20, "heartbeats")
        assert mon.flow(f.name)["status"] != "STOP"
        f.stop_heartbeats()
        last = f.last_heartbeat_ms / 1000
        flow = mon.wait_for(lambda s: s["flows"][0]["status"] == "STOP" and s["flows"][0], 10, "STOP",
                            interval=0.05)
        detected = time.time() - last
        # No heartbeat arrival for the 2 s timeout, evaluation every 0.5 s: STOP within 2 s + 0.5 s
        # after the last one arrived, plus the 0.05 s of this polling loop.
        assert detected <= 2 * 1.0 + 0.5 + 0.1, detected
        assert flow["heartbeat"]["stopped"] and flow["replicator_up"] is False
        assert any("no heartbeat" in r for r in flow["reasons"])
        assert partition_of(flow, f.topic, 0)["status"] == "STOP"
        age1 = flow["heartbeat"]["age_seconds"]
        time.sleep(1.0)
        m = mon.metrics()
        assert sample(m, "sparkmirror_heartbeat_age_seconds", flow=f.name) > age1 + 0.5
        assert sample(m, "sparkmirror_flow_status", flow=f.name, status="STOP") == 1
        assert sample(m, "sparkmirror_flow_status", flow=f.name, status="OK") == 0
        assert sample(m, "sparkmirror_replicator_up", flow=f.name) == 0
        assert sample(m, "sparkmirror_partition_status_code", flow=f.name, topic=f.topic, partition=0) == \
            STATUS_CODES["STOP"]


def test_checkpoint_lag_age_and_missing_checkpoints(kafka_clusters, tmp_path, unique):
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 10)
    f.copy(0, 10, now_ms)
    f.sync(0, 0, 0)
    f.sync(0, 9, 9)
    behind, current, missing = f"behind-{unique}", f"current-{unique}", f"nocheckpoint-{unique}"
    # "behind" committed 10, past the sync at 9 that its checkpoint (at 5) does not cover: a newer
    # checkpoint is due, and stale once the 2 s checkpoint timeout passes without one.
    for group, offset in ((behind, 10), (current, 10), (missing, 4)):
        c = Consumer({"bootstrap.servers": f.primary, "group.id": group})
        c.commit(offsets=[TopicPartition(f.topic, 0, offset)], asynchronous=False)
        c.close()
    old_ms = now_ms - 100_000
    cps = [(Checkpoint(behind, f.remote, 0, 5, 5), old_ms), (Checkpoint(current, f.remote, 0, 10, 10), now_ms)]
    produce_raw(f.dr, f.checkpoints, [{"key": cp.encode_key(), "value": cp.encode_value(), "timestamp": ts}
                                      for cp, ts in cps])
    f.start_heartbeats()
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"], checkpoint_timeout=2.0) as mon:
            def groups_ready(s):
                groups = {g["group"]: g for g in s["flows"][0]["groups"]}
                return len(groups) == 3 and groups[missing]["missing"] == 1 and groups[behind]["stale"] == 1 \
                    and groups
            groups = mon.wait_for(groups_ready, 20, "three groups evaluated")
            b = groups[behind]["partitions"][0]
            # Committed 10 translates to 10 (syncs 0->0 and 9->9 lie on one line); checkpoint at 5.
            assert (b["committed"], b["translated"], b["checkpoint_downstream"], b["lag_records"]) == (10, 10, 5, 5)
            assert 99 < b["age_seconds"] < 130 and b["state"] == "stale"
            assert groups[behind]["status"] == "WARN"
            assert groups[current]["partitions"][0]["lag_records"] == 0 and groups[current]["status"] == "OK"
            assert groups[missing]["partitions"][0]["state"] == "missing"
            m = mon.metrics()
            labels = dict(flow=f.name, group=behind, topic=f.topic, partition=0)
            assert sample(m, "sparkmirror_checkpoint_lag_records", **labels) == 5
            assert 99 < sample(m, "sparkmirror_checkpoint_age_seconds", **labels) < 130
            assert sample(m, "sparkmirror_group_checkpoint_lag_records", flow=f.name, group=behind) == 5
            assert sample(m, "sparkmirror_group_checkpoint_stale_partitions", flow=f.name, group=behind) == 1
            assert sample(m, "sparkmirror_group_checkpoint_lag_records", flow=f.name, group=current) == 0
            assert sample(m, "sparkmirror_group_checkpoint_age_seconds", flow=f.name, group=current) == 0
            assert sample(m, "sparkmirror_group_checkpoint_missing_partitions", flow=f.name, group=missing) == 1
            assert mon.flow(f.name)["status"] == "WARN"
    finally:
        f.stop_heartbeats()


def test_data_loss_after_delete_records_is_counted(kafka_clusters, tmp_path, unique):
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 10)
    f.copy(0, 4, now_ms)
    f.sync(0, 0, 0)
    f.sync(0, 3, 3)
    admin = AdminClient({"bootstrap.servers": f.primary})
    for fut in admin.delete_records([TopicPartition(f.topic, 0, 7)]).values():
        fut.result(30)
    f.start_heartbeats()
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
            flow = mon.wait_for(lambda s: s["flows"][0]["data_lost_records_total"] == 3 and s["flows"][0], 20,
                                "data loss counted")
            p0 = partition_of(flow, f.topic, 0)
            # Offsets 4..6 are gone (data loss, not lag); 7..9 still wait to be copied.
            assert (p0["source_start"], p0["position"], p0["lost_records"], p0["lag_records"]) == (7, 4, 3, 3)
            assert p0["status"] == "ERR" and flow["status"] == "ERR"
            m = mon.metrics()
            assert sample(m, "sparkmirror_data_lost_records_total", flow=f.name, topic=f.topic) == 3
            # The replicator skips to the log start and copies 7..9: lag 0, the loss stays counted once.
            f.copy(0, 3, now_ms)
            f.sync(0, 7, 4)
            flow = mon.wait_for(lambda s: s["flows"][0]["lag"]["records"] == 0 and s["flows"][0], 20, "lag 0")
            assert flow["data_lost_records_total"] == 3 and partition_of(flow, f.topic, 0)["status"] == "OK"
            assert sample(mon.metrics(), "sparkmirror_data_lost_records_total", flow=f.name, topic=f.topic) == 3
    finally:
        f.stop_heartbeats()


def test_garbage_on_internal_topics_is_counted_logged_once_and_skipped(kafka_clusters, tmp_path, unique, caplog):
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 4)
    f.copy(0, 4, now_ms)
    garbage = [{"key": b"\xff\x00garbage", "value": b"\x01"}, {"key": None, "value": b"not a record"}]
    produce_raw(f.primary, f.syncs, garbage)
    f.sync(0, 3, 3)
    produce_raw(f.dr, f.heartbeats, garbage)
    produce_raw(f.dr, f.checkpoints, garbage)
    f.start_heartbeats()
    caplog.set_level(logging.WARNING, logger="monitor")
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
            mon.wait_for(lambda s: len(s["decode_errors"]) == 3 and s["flows"][0]["heartbeat"]["received_total"]
                         and s["flows"][0]["lag"]["records"] is not None, 20, "decode errors on three topics")
            m = mon.metrics()
            for cluster, topic, kind in ((f.src, f.syncs, "offset-sync"), (f.dst, f.heartbeats, "heartbeat"),
                                         (f.dst, f.checkpoints, "checkpoint")):
                assert sample(m, "sparkmirror_decode_errors_total", cluster=cluster, topic=topic,
                              record_type=kind) == 2
                assert sum(1 for r in caplog.records if "undecodable" in r.getMessage()
                           and topic in r.getMessage()) == 1
            # The good records around the garbage still count.
            flow = mon.flow(f.name)
            assert partition_of(flow, f.topic, 0)["lag_records"] == 0
            assert flow["offset_sync"]["received_total"] == 1
    finally:
        f.stop_heartbeats()


def test_a_partition_ending_in_an_aborted_transaction_is_caught_up_not_stalled(kafka_clusters, tmp_path, unique):
    """The replicator reads committed records only: an aborted tail is never copied, and is no lag."""
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 5)
    f.copy(0, 5, now_ms)
    f.sync(0, 0, 0)
    txn = Producer({"bootstrap.servers": f.primary, "transactional.id": f"aborting-{unique}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for _ in range(3):
        txn.produce(f.topic, b"never committed", partition=0)
    txn.flush(30)
    txn.abort_transaction(30)  # offsets 5-7 aborted, 8 the abort marker: high watermark 9
    f.start_heartbeats()
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
            mon.wait_for(lambda s: s["flows"][0]["partitions"] and s["flows"][0]["partitions"][0]["source_end"] == 9,
                         20, "source end offsets read")
            time.sleep(4 * 0.5 + 1)  # more than the window (4 refreshes of 0.5 s): a stall would show by now
            flow = mon.flow(f.name)
            p0 = partition_of(flow, f.topic, 0)
            assert (p0["position"], p0["lag_records"], p0["lag_seconds"], p0["status"]) == (5, 0, 0.0, "OK"), p0
            assert flow["status"] == "OK", flow["reasons"]
            assert sample(mon.metrics(), "sparkmirror_partition_lag_seconds", flow=f.name, topic=f.topic,
                          partition=0) == 0
    finally:
        f.stop_heartbeats()


def test_catchup_rate_and_time_to_catch_up_follow_a_backlog_copied_in_steps(kafka_clusters, tmp_path, unique):
    """A 3,000-record backlog copied 200 records per step while the source adds 20: catching up, with the
    ETA lag / net rate; then the copy pauses (not catching up, +Inf); then everything is copied (0)."""
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 3_000)
    f.copy(0, 1, now_ms)
    f.sync(0, 0, 0)
    f.start_heartbeats()
    copied, produced = 1, 3_000

    def step(copy: int, add: int) -> dict:
        nonlocal copied, produced
        if add:
            f.produce_source(0, [int(time.time() * 1000)] * add)
            produced += add
        if copy:
            f.copy(0, copy, now_ms)
            copied += copy
        time.sleep(0.3)
        return partition_of(mon.flow(f.name), f.topic, 0)

    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
            mon.wait_for(lambda s: s["flows"][0]["lag"]["records"] == 2_999, 20, "the backlog seen")
            for _ in range(40):  # the window (4 samples, 0.5 s apart) fills with steady steps
                p = step(200, 20)
                if p["catchup_state"] == "catching-up" and copied > 1_000:
                    break
            flow = mon.flow(f.name)
            p = partition_of(flow, f.topic, 0)
            assert p["catchup_state"] == "catching-up", p
            assert p["copy_rate"] > p["source_rate"] > 0, p
            net = p["copy_rate"] - p["source_rate"]
            assert p["catchup_eta_seconds"] == pytest.approx(p["lag_records"] / net, rel=0.01)
            assert flow["catchup"]["state"] == "catching-up"
            assert flow["catchup"]["eta_seconds"] == p["catchup_eta_seconds"]
            assert "caught up in about" in flow["catchup"]["text"]
            m = mon.metrics()
            assert sample(m, "sparkmirror_flow_catchup_eta_seconds", flow=f.name) > 0
            assert sample(m, "sparkmirror_partition_catchup_records_per_second", flow=f.name, topic=f.topic,
                          partition=0) is not None

            for _ in range(40):  # the copy pauses while the source keeps adding
                p = step(0, 20)
                if p["catchup_state"] == "not-catching-up":
                    break
            assert p["catchup_state"] == "not-catching-up" and p["catchup_eta_seconds"] is None, p
            assert p["copy_rate"] == 0 and p["source_rate"] > 0, p
            assert sample(mon.metrics(), "sparkmirror_flow_catchup_eta_seconds", flow=f.name) == float("inf")

            f.copy(0, produced - copied, now_ms)
            flow = mon.wait_for(lambda s: s["flows"][0]["lag"]["records"] == 0 and s["flows"][0], 20, "caught up")
            assert flow["catchup"]["state"] == "caught-up" and flow["catchup"]["eta_seconds"] == 0
            assert sample(mon.metrics(), "sparkmirror_flow_catchup_eta_seconds", flow=f.name) == 0
    finally:
        f.stop_heartbeats()
