"""Internal topics someone created with several partitions, on real brokers.

MM2 writes offset-syncs and heartbeats to partition 0, and its OffsetSyncStore reads
offset-syncs from partition 0 only. sparkmirror writes partition 0 whatever the
partition count of an existing internal topic, and says once that the others are
ignored, naming the cluster and the topic.
"""

from __future__ import annotations

import pytest
from replicator.control.heartbeats import HeartbeatEmitter
from sparkmirror.model.parse import parse_config
from sparkmirror.model.records import Heartbeat, OffsetSync
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator

pytestmark = [pytest.mark.kafka]


def _by_partition(bootstrap: str, topic: str) -> dict[int, list]:
    out: dict[int, list] = {}
    for m in consume_all(bootstrap, topic):
        out.setdefault(m.partition(), []).append(m)
    return out


@pytest.mark.spark
def test_offset_syncs_land_on_partition_0_of_a_three_partition_topic(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    # Own aliases: the offset-syncs topic is named after the target alias, and the session
    # clusters' mm2-offset-syncs.dr.internal belongs to the other tests.
    src, dst = f"src{unique}", f"dst{unique}"
    syncs_topic = f"mm2-offset-syncs.{dst}.internal"
    create_topic(primary, syncs_topic, 3, config={"cleanup.policy": "compact"})
    topic = f"multi-{unique}"
    create_topic(primary, topic, 6)
    produce(primary, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 6} for i in range(60)])
    props = {
        "clusters": f"{src}, {dst}", f"{src}.bootstrap.servers": primary, f"{dst}.bootstrap.servers": dr,
        f"{src}->{dst}.enabled": "true", f"{src}->{dst}.topics": topic,
        "replication.factor": "1", "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "emit.heartbeats.enabled": "false", "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false", "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": "5",
    }
    cfg = tmp_path / "mm2.properties"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    with Replicator(cfg, tmp_path / "ckpt", tmp_path / "replicator.log") as rep:
        rep.wait_for_log(f"flow {src}->{dst}: streaming", timeout=240)
        assert len(consume_all(dr, f"{src}.{topic}", expected=60, timeout=240)) == 60
        rep.wait_for_log(f"internal topic {syncs_topic} on cluster {src} has 3 partitions; sparkmirror writes it "
                         "to partition 0 only", timeout=30)
        assert rep.terminate() == 0
    # The batch's offset-syncs were acknowledged before Spark committed it, so they are all in.
    # Every source partition's first record is synced: six different keys, all on partition 0.
    syncs = _by_partition(primary, syncs_topic)
    assert set(syncs) == {0}, {p: len(ms) for p, ms in syncs.items()}
    assert {OffsetSync.decode(m.key(), m.value()).partition for m in syncs[0]} == set(range(6))
    assert rep.log().count(f"internal topic {syncs_topic} on cluster {src} has 3 partitions") == 1


def test_heartbeats_land_on_partition_0_of_a_three_partition_topic(kafka_clusters, unique, caplog):
    dr = kafka_clusters.dr.bootstrap
    config = parse_config(f"clusters = primary, dr\nprimary.bootstrap.servers = 127.0.0.1:1\n"
                          f"dr.bootstrap.servers = {dr}\nprimary->dr.enabled = true\n")
    emitter = HeartbeatEmitter(config, config.flow("primary", "dr"))
    # The session clusters' own `heartbeats` topic belongs to the other tests: a pre-created
    # three-partition topic of this test's own stands in for it.
    emitter.topic = f"heartbeats-{unique}"
    create_topic(dr, emitter.topic, 3, config={"cleanup.policy": "compact"})
    emitter.prepare()
    for _ in range(5):
        emitter.emit_once()
    assert emitter._producer.flush(30) == 0
    got = _by_partition(dr, emitter.topic)
    assert set(got) == {0}, {p: len(ms) for p, ms in got.items()}
    assert [Heartbeat.decode(m.key(), m.value()).source for m in got[0]] == ["primary"] * 5
    assert f"internal topic {emitter.topic} on cluster dr has 3 partitions" in caplog.text
