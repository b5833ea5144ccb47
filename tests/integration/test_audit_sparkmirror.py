"""The audit of a healthy copy made by the real sparkmirror replicator, through both data paths.

A backlog of more than 10,000 records (a plain topic, a compacted one with offset gaps
left by its cleaner, a transactional one with aborted transactions) is copied in
micro-batches; once caught up the replicator switches to the real-time path, and more
records of each kind follow. The audit reads the source as sparkmirror does
(read_committed): 0 missing, 0 altered, 0 duplicated, every synced record accounted for.
"""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Producer

from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.reader import ClusterReader
from sparkmirror.configfile import load_config
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

#: the backlog of the plain topic per partition: with the others, past the 10,000 records of a catch-up
BACKLOG = 5200


def _transactions(bootstrap, topic, tid, rounds, first=0):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    committed = 0
    for n in range(first, first + rounds):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, b"tx%d-%d" % (n, i), key=b"t%d" % i, partition=i % 2)
        if n % 3 == 1:
            assert p.flush(30) == 0  # on the log before the abort, which would otherwise purge them unsent
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += 10
    return committed


def _compacted_with_gaps(bootstrap, topic):
    # many updates of few keys, segments rolled so that the cleaner leaves gaps inside the log
    for burst in range(6):
        keys = 5 if burst == 5 else 10
        produce(bootstrap, topic, [{"key": b"k%d" % (i % keys), "value": b"b%d-%d" % (burst, i)} for i in range(30)])
        time.sleep(0.2)

    def compacted() -> bool:
        offsets = [m.offset() for m in consume_all(bootstrap, topic)]
        if any(b != a + 1 for a, b in zip(offsets, offsets[1:])):
            return True
        produce(bootstrap, topic, [{"key": b"roll", "value": b"x"}])  # rolls the active segment
        return False
    wait_until(compacted, 60, interval=0.5, what=f"the log cleaner to leave gaps in {topic}")


def test_a_healthy_sparkmirror_copy_through_both_data_paths_audits_clean(kafka_clusters, tmp_path):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = f"{random.randrange(16**6):06x}"
    plain, compact, txn = f"aud-plain-{u}", f"aud-compact-{u}", f"aud-txn-{u}"
    create_topic(primary, plain, 2)
    create_topic(primary, compact, 1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
        "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})
    create_topic(primary, txn, 2)
    now = int(time.time() * 1000)
    produce(primary, plain, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2, "timestamp": now + i,
                              "headers": [("n", b"%d" % i)]} for i in range(2 * BACKLOG)])
    _compacted_with_gaps(primary, compact)
    committed = _transactions(primary, txn, f"tx-{u}", 9)
    config = write_config(tmp_path / "mm2.properties", primary, dr, {
        "primary->dr.topics": f"aud-.*-{u}", "offset.lag.max": "10"})
    topics = [plain, compact, txn]
    # both paths whatever the suite's SPARKMIRROR_TEST_* variant: a backlog in micro-batches, then real time
    with Replicator(config, tmp_path / "checkpoints", tmp_path / "replicator.log",
                    extra_args=["--source", "direct", "--data-path", "auto"]) as rep:
        rep.wait_for_log("flow primary->dr: caught up: switching to the real-time data path", 150)
        rep.wait_for_log("in real time", 60)
        # the real-time path: more of each kind
        produce(primary, plain, [{"key": b"r%d" % i, "value": b"live%d" % i, "partition": i % 2,
                                  "headers": [("n", b"%d" % i)]} for i in range(200)])
        produce(primary, compact, [{"key": b"k%d" % (i % 10), "value": b"live%d" % i} for i in range(40)])
        committed += _transactions(primary, txn, f"tx-{u}", 6, first=9)
        rep.wait_until(lambda: len(consume_all(dr, f"primary.{txn}", expected=committed, timeout=10)) >= committed
                       and len(consume_all(dr, f"primary.{plain}", expected=2 * BACKLOG + 200, timeout=10))
                       >= 2 * BACKLOG + 200, 90, what="the live records mirrored")

        loaded = load_config(config)
        flow = AuditFlow.of(loaded, loaded.flow("primary", "dr"), "sparkmirror", topics)
        readers = Readers(ClusterReader("primary", {"bootstrap.servers": primary}, flow.source_isolation),
                          ClusterReader("dr", {"bootstrap.servers": dr}, "read_committed"),
                          ClusterReader("primary", {"bootstrap.servers": primary}, "read_committed"))
        engine = AuditEngine(flow, readers, AuditSettings(state_path=tmp_path / "audit.json"))
        ends = {}
        for t in topics:
            for p in (0, 1) if t != compact else (0,):
                ends[f"{t}/{p}"] = readers.source.watermarks(t, p)[1]
        try:
            def audited():
                engine.round()
                snap = engine.snapshot()
                # up to each partition's newest sync (every 10 records; a transaction's marker is one more)
                near = all(snap["positions"].get(k, -1) >= end - 12 for k, end in ends.items())
                return near and snap["unchecked_records"] == 0 and snap["pending_windows"] == 0 and snap
            snap = rep.wait_until(audited, 60, interval=1.0, what="the audit reaching the newest syncs",
                                  details=lambda: f"ends {ends}, audit {engine.snapshot()}")
        finally:
            readers.close()
    c = snap["counts"]
    assert (c["missing"], c["mismatched"], c["duplicated"], c["unverifiable"]) == (0, 0, 0, 0), snap["findings"]
    assert snap["coverage"]["loss"] >= 0.99, snap["coverage"]
    # the plain and transactional records were each compared (up to the newest syncs)
    assert c["verified"] >= 0.98 * (2 * BACKLOG + 200 + committed), c
