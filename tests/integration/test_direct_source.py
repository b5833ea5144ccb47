"""The direct data path's own promises, on real brokers and real Spark.

Records deleted on the source before they were copied (retention, delete-records)
are reported with their count and offsets, never skipped silently, and the copy
goes on from the new log start.
"""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

import pytest

from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config

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
