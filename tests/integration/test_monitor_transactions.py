"""The monitor on source partitions written by transactional producers (real brokers).

The test plays the replicator as in test_monitor_lag.py: it copies records to the
target and writes the offset-syncs itself, so the true position is known.

- A transaction's commit marker takes an offset but is no record: a position at a
  trailing marker that retention or deleteRecords later removes (Kafka Streams
  purges its exactly-once repartition topics this way) lost nothing.
- A transaction left open (a hanging producer) holds the last stable offset below
  the high watermark: a read_committed replicator (sparkmirror) copies nothing
  past it. The status says so, instead of calling the partition caught up or
  the replicator stalled.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.monitor import Flow, RunningMonitor, partition_of, sample

pytestmark = pytest.mark.kafka


def transactional_producer(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"test-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    return p


def test_deleting_a_trailing_commit_marker_is_not_data_loss(kafka_clusters, tmp_path, unique):
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    producer = transactional_producer(f.primary)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(f.topic, b"v%d" % i, partition=0, timestamp=now_ms)
    producer.commit_transaction(30)  # records 0-9, the commit marker at 10, end offset 11
    # The replicator copied all ten records; MM2 sends no sync for the marker.
    f.copy(0, 10, now_ms)
    f.sync(0, 9, 9)
    with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
        def p0(s):
            return next((p for p in s["flows"][0].get("partitions", []) if p["topic"] == f.topic), {})

        mon.wait_for(lambda s: p0(s).get("position") == 10 and p0(s).get("lag_seconds") == 0, 30,
                     "position at the commit marker")
        assert p0(mon.status())["lag_records"] == 0
        # Purge everything consumed, as Kafka Streams does after a commit: past the marker.
        admin = AdminClient({"bootstrap.servers": f.primary})
        for fut in admin.delete_records([TopicPartition(f.topic, 0, 11)]).values():
            fut.result(30)
        mon.wait_for(lambda s: p0(s).get("source_start") == 11, 30, "the purge seen")
        time.sleep(1.5)  # a few more refreshes
        flow = mon.flow(f.name)
        p0 = partition_of(flow, f.topic, 0)
        assert (p0["status"], p0["lost_records"], p0["lag_records"]) == ("OK", 0, 0), p0
        assert flow["data_lost_records_total"] == 0
        assert sample(mon.metrics(), "sparkmirror_data_lost_records_total", flow=f.name, topic=f.topic) == 0


def test_open_source_transaction_is_explained_not_reported_as_a_replicator_fault(kafka_clusters, tmp_path,
                                                                                unique):
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 5)
    f.copy(0, 5, now_ms)
    f.sync(0, 4, 4)  # records 0-4 copied: position 5
    producer = transactional_producer(f.primary)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(f.topic, b"open%d" % i, partition=0, timestamp=now_ms)
    assert producer.flush(30) == 0  # offsets 5-7 written, the transaction left open
    f.start_heartbeats()
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"]) as mon:
            def p0(s):
                return next((p for p in s["flows"][0].get("partitions", []) if p["topic"] == f.topic), {})

            # The window (4 samples, one per 0.5 s interval) fills with the last stable offset at 5.
            flow = mon.wait_for(lambda s: p0(s).get("status") not in (None, "OK") and s["flows"][0], 30,
                                "a verdict on the held partition")
            p = p0({"flows": [flow]})
            assert (p["status"], p["position"]) == ("WARN", 5), p
            assert p["reasons"][0].startswith("open transaction on the source: the last stable offset 5 is 3 "
                                              "offsets behind the high watermark 8"), p["reasons"]
            assert flow["status"] == "WARN" and flow["replicator_up"], flow["reasons"]
            assert "1 partitions wait on an open transaction on the source (not a replicator fault)" \
                in flow["reasons"]
            m = mon.metrics()
            assert sample(m, "sparkmirror_flow_status", flow=f.name, status="STALL") == 0
            # Once it commits, the records are ordinary lag and the explanation goes.
            producer.commit_transaction(30)
            producer = None
            p = mon.wait_for(lambda s: p0(s).get("lag_records", 0) >= 3 and not p0(s)["open_transaction"] and p0(s),
                             30, "the committed transaction as lag")
            assert not any(r.startswith("open transaction") for r in p["reasons"]), p
    finally:
        f.stop_heartbeats()
        if producer is not None:
            producer.abort_transaction(30)
