"""The direct data path's own promises, on real brokers and real Spark.

Records deleted on the source before they were copied (retention, delete-records)
are reported with their count and offsets, never skipped silently, and the copy
goes on from the new log start. A partition re-created (or truncated) below the
offset already copied is copied again from its start, as MM2 does. A target
producer without idempotence keeps one request in flight and every offset-sync
pairs a record with its own copy.
"""

from __future__ import annotations

import uuid

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

import pytest

from sparkmirror.model.records import OffsetSync
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _records(first: int, last: int):
    return [{"key": b"k", "value": b"%d" % i, "partition": 0} for i in range(first, last)]


def test_records_deleted_before_copy_are_reported_not_skipped(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"direct-loss-{unique}"
    create_topic(primary, topic, 1)
    produce(primary, topic, _records(0, 100))
    cfg = write_config(tmp_path / "mm2.properties", primary, dr, {"topics": topic, "emit.checkpoints.enabled": "false",
                                                                   "sync.group.offsets.enabled": "false"})
    ckpt, logf = tmp_path / "ckpt", tmp_path / "replicator.log"
    with Replicator(cfg, ckpt, logf, ["--source", "direct"]) as rep:
        rep.wait_for_log("flow primary->dr: streaming", timeout=240)  # the mirror topic exists from here
        assert len(consume_all(dr, f"primary.{topic}", expected=100, timeout=180)) == 100
        assert rep.terminate() == 0

    # While the replicator is down, 100 more records arrive and the first 50 of them are
    # deleted on the source (as retention would) before anyone copied them.
    produce(primary, topic, _records(100, 200))
    admin = AdminClient({"bootstrap.servers": primary})
    for f in admin.delete_records([TopicPartition(topic, 0, 150)]).values():
        f.result(30)

    with Replicator(cfg, ckpt, logf, ["--source", "direct"]) as rep:
        got = consume_all(dr, f"primary.{topic}", expected=150, timeout=180)
        rep.wait_for_log(f"DATA LOSS: 50 records of source cluster primary topic {topic} partition 0 "
                         f"(offsets 100..149)", timeout=60)
        lost = [line for line in rep.metrics_text().splitlines()
                if line.startswith("sparkmirror_replicator_records_lost_total{")]
        assert lost == ['sparkmirror_replicator_records_lost_total{flow="primary->dr"} 50.0']
        assert rep.terminate() == 0
    values = [int(m.value()) for m in got]
    assert values == list(range(0, 100)) + list(range(150, 200))


@pytest.fixture(scope="module")
def idempotence_off(kafka_clusters, tmp_path_factory):
    """One replicator run whose target producer has idempotence switched off (as where the
    IdempotentWrite ACL is missing): a 4-partition topic and ``orders`` with 5000 records."""
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    work = tmp_path_factory.mktemp("idempotence-off")
    u = uuid.uuid4().hex[:8]
    pairing, orders = f"pairing-{u}", f"orders-{u}"
    create_topic(primary, pairing, 4)
    create_topic(primary, orders, 1)
    produce(primary, pairing, [{"key": b"k%d" % i, "value": b"p%d" % i, "partition": i % 4} for i in range(2000)])
    produce(primary, orders, _records(0, 5000))
    cfg = write_config(work / "mm2.properties", primary, dr, {
        "primary->dr.topics": f"{pairing}|{orders}", "offset.lag.max": "10", "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false", "dr.producer.enable.idempotence": "false"})
    ckpt, logf = work / "ckpt", work / "replicator.log"
    with Replicator(cfg, ckpt, logf, ["--source", "direct"]) as rep:
        rep.wait_for_log("flow primary->dr: streaming", timeout=240)
        assert len(consume_all(dr, f"primary.{pairing}", expected=2000, timeout=180)) == 2000
        assert len(consume_all(dr, f"primary.{orders}", expected=5000, timeout=180)) == 5000
        assert rep.terminate() == 0
    return {"primary": primary, "dr": dr, "pairing": pairing, "orders": orders, "config": cfg, "ckpt": ckpt,
            "log": logf}


def test_idempotence_off_keeps_one_request_in_flight_and_syncs_pair_identical_records(idempotence_off):
    r = idempotence_off
    assert ("flow primary->dr: cluster dr: producer setting enable.idempotence = false: the writer keeps one "
            "request in flight (max.in.flight.requests.per.connection = 1") in r["log"].read_text()
    source = {(m.partition(), m.offset()): m.value() for m in consume_all(r["primary"], r["pairing"])}
    target = {(m.partition(), m.offset()): m.value() for m in consume_all(r["dr"], f"primary.{r['pairing']}")}
    syncs = [s for s in (OffsetSync.decode(m.key(), m.value())
                         for m in consume_all(r["primary"], "mm2-offset-syncs.dr.internal")) if s.topic == r["pairing"]]
    assert len({s.partition for s in syncs}) == 4 and len(syncs) > 100
    for s in syncs:
        assert source[(s.partition, s.upstream_offset)] == target[(s.partition, s.downstream_offset)], s


def test_recreated_source_topic_is_copied_again_from_its_start(idempotence_off):
    """``orders`` (end 5000, all copied) is deleted and re-created while the replicator is down,
    and gets 10 new records at offsets 0-9: MM2 copies them (its consumer resets to earliest)."""
    r = idempotence_off
    admin = AdminClient({"bootstrap.servers": r["primary"]})
    admin.delete_topics([r["orders"]])[r["orders"]].result(30)
    wait_until(lambda: create_topic(r["primary"], r["orders"], 1) or True, 60, interval=0.5,
               what=f"{r['orders']} created again", ignoring=Exception)  # still being deleted
    produce(r["primary"], r["orders"], [{"key": b"k", "value": b"new-%d" % i, "partition": 0} for i in range(10)])
    with Replicator(r["config"], r["ckpt"], r["log"], ["--source", "direct"]) as rep:
        rep.wait_for_log("flow primary->dr: streaming", timeout=240)
        got = consume_all(r["dr"], f"primary.{r['orders']}", expected=5010, timeout=180)
        assert [m.value() for m in got[5000:]] == [b"new-%d" % i for i in range(10)]
        rep.wait_for_log(f"source cluster primary topic {r['orders']} partition 0 was re-created or truncated: its "
                         "end offset fell below offset 5000, which the copy had reached; copying it again from its "
                         "earliest offset 0", timeout=30)
        assert rep.terminate() == 0
    assert len(got) == 5010
