"""Byte compatibility with the real Apache MirrorMaker 2.

Runs Apache MM2 (dedicated mode, pinned jars) between the two test clusters for a few
seconds and decodes what it wrote to `heartbeats`, `primary.heartbeats`,
`primary.checkpoints.internal` and `mm2-offset-syncs.dr.internal` with sparkmirror's
model; every record must decode and re-encode to the very same bytes.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from devenv.mm2 import MirrorMaker2, single_node_settings
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.mm2, pytest.mark.private_clusters]  # MM2's fixed aliases


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def test_mm2_internal_topics_decode_with_our_model(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic, group = f"orders-{unique}", f"billing-{unique}"
    create_topic(primary, topic, partitions=2)
    produce(primary, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(200)])

    # A consumer group on the source that has read both partitions to their ends: Apache MM2 4.x's checkpoint task keeps only the newest offset-sync of
    # what it reads at its start (KAFKA-15906), so a group behind that sync is checkpointed
    # only if the task happened to start before MM2 copied past it (a loaded machine: not
    # always, this test then timed out). Translation of groups behind is tested against
    # MM2 in test_inspect_mm2; here the bytes matter.
    c = Consumer({"bootstrap.servers": primary, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 100), TopicPartition(topic, 1, 100)], asynchronous=False)
    c.close()

    props = {
        "clusters": "primary, dr",
        "primary.bootstrap.servers": primary,
        "dr.bootstrap.servers": dr,
        "primary->dr.enabled": "true",
        "primary->dr.topics": topic,
        "primary->dr.groups": group,
        "dr->primary.enabled": "false",
        "emit.heartbeats.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5",
        "refresh.groups.interval.seconds": "5",
        "sync.topic.acls.enabled": "false",
        "offset.lag.max": "10",
        "tasks.max": "1",
        **single_node_settings(),
    }
    with MirrorMaker2(props, tmp_path / "mm2") as mm2:
        def mm2_log() -> str:
            return f"MM2 {'running' if mm2.running() else 'exited'}; its log: {mm2.log_file}"

        wait_until(lambda: f"primary.{topic}" in _topics(dr), 120, interval=1, what="the mirror topic on dr",
                   alive=mm2.running, details=mm2_log)
        wait_until(lambda: len(consume_all(dr, f"primary.{topic}", expected=200, timeout=5)) >= 200, 120, interval=1,
                   what="200 mirrored records", alive=mm2.running, details=mm2_log)

        def checkpoints_for_group():
            if "primary.checkpoints.internal" not in _topics(dr):
                return None
            recs = consume_all(dr, "primary.checkpoints.internal", timeout=5)
            cps = [Checkpoint.decode(m.key(), m.value()) for m in recs]
            mine = {(cp.topic, cp.partition): cp for cp in cps if cp.group == group}
            return recs if len(mine) == 2 else None

        cp_records = wait_until(checkpoints_for_group, 120, interval=1, what="checkpoints for both partitions",
                                alive=mm2.running, details=mm2_log)
        hb_on_dr = wait_until(
            lambda: "primary.heartbeats" in _topics(dr) and consume_all(dr, "primary.heartbeats", timeout=5),
            120, interval=1, what="primary.heartbeats on dr", alive=mm2.running, details=mm2_log)
        hb_on_primary = wait_until(
            lambda: "heartbeats" in _topics(primary) and consume_all(primary, "heartbeats", timeout=5),
            60, interval=1, what="heartbeats on primary", alive=mm2.running, details=mm2_log)
        syncs = wait_until(
            lambda: "mm2-offset-syncs.dr.internal" in _topics(primary)
            and consume_all(primary, "mm2-offset-syncs.dr.internal", timeout=5),
            60, interval=1, what="offset syncs on primary", alive=mm2.running, details=mm2_log)
        hb_dr_local = consume_all(dr, "heartbeats", timeout=5) if "heartbeats" in _topics(dr) else []

    # Every record decodes, and re-encoding gives MM2's bytes exactly.
    for msg in cp_records:
        cp = Checkpoint.decode(msg.key(), msg.value())
        assert (cp.encode_key(), cp.encode_value()) == (msg.key(), msg.value())
    for msg in [*hb_on_dr, *hb_on_primary, *hb_dr_local]:
        hb = Heartbeat.decode(msg.key(), msg.value())
        assert (hb.encode_key(), hb.encode_value()) == (msg.key(), msg.value())
        assert len(msg.value()) == 10
    for msg in syncs:
        s = OffsetSync.decode(msg.key(), msg.value())
        assert (s.encode_key(), s.encode_value()) == (msg.key(), msg.value())
        assert len(msg.value()) == 16

    # And the decoded values mean what MM2 meant.
    mine = {}
    for msg in cp_records:
        cp = Checkpoint.decode(msg.key(), msg.value())
        if cp.group == group:
            mine[(cp.topic, cp.partition)] = cp
    assert mine[(f"primary.{topic}", 0)].upstream_offset == 100
    assert mine[(f"primary.{topic}", 1)].upstream_offset == 100
    for cp in mine.values():
        # The mirror topic was empty before MM2, so downstream == upstream here; MM2
        # translates to at most the true offset (never ahead).
        assert cp.downstream_offset <= cp.upstream_offset
    # The disabled dr->primary pair still heartbeats into primary, and the flow
    # carries those heartbeats to dr as primary.heartbeats.
    pairs_on_primary = {(h.source, h.target) for h in (Heartbeat.decode(m.key(), m.value()) for m in hb_on_primary)}
    assert ("dr", "primary") in pairs_on_primary
    pairs_on_dr = {(h.source, h.target) for h in (Heartbeat.decode(m.key(), m.value()) for m in hb_on_dr)}
    assert ("dr", "primary") in pairs_on_dr
    now_ms = time.time() * 1000
    for m in hb_on_dr:
        assert now_ms - 600_000 < Heartbeat.decode(m.key(), m.value()).timestamp_ms <= now_ms
    # MM2 records offset-syncs for every replicated partition, heartbeats included (the
    # topic is shared with other tests' replicators, so look at this test's topic only).
    mine = [s for s in (OffsetSync.decode(m.key(), m.value()) for m in syncs) if s.topic == topic]
    assert {s.partition for s in mine} == {0, 1}
    assert all(s.downstream_offset <= s.upstream_offset for s in mine)
