"""The monitor's statuses stay true on a healthy Apache MirrorMaker 2.

One MM2 and one monitor, started in that order against an empty topic:

- start-up: while MM2 creates the mirror topic and writes its first offset-syncs,
  no partition may read "the newest offset-sync points past the end of the
  mirror partition" (the monitor once compared a new sync with topic metadata
  read before the mirror topic existed);
- checkpoints: MM2 writes a group's checkpoint only when its translation
  changes. A group committed between two offset-syncs gets an imprecise
  checkpoint (one past the older sync), and no newer one while it stays idle or
  moves on without passing the next sync: neither is stale, however old the
  checkpoint gets. Once the group passes a sync, MM2 checkpoints it again;
- a group that keeps consuming and committing, read every 8 s by a second
  monitor while MM2 checkpoints it every second: its checkpoints run ahead of
  the committed offset last read, and no failover summary may call that
  "would skip" (it is progress, not an offset reset).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from devenv.mm2 import MirrorMaker2, single_node_settings
from sparkmirror.model.records import OffsetSync
from tests.support.kafka import create_topic
from tests.support.monitor import CommittingGroup, RunningMonitor, false_skips, produce_raw, sample

pytestmark = [pytest.mark.kafka, pytest.mark.mm2]


def offset_syncs(bootstrap: str, topic: str, source_topic: str) -> list[tuple[int, int]]:
    """(upstream, downstream) of every offset-sync of ``source_topic`` partition 0, in order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-offset-syncs", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            sync = OffsetSync.decode(m.key(), m.value())
            if sync.topic == source_topic and sync.partition == 0:
                out.append((sync.upstream_offset, sync.downstream_offset))
    finally:
        c.close()
    return out


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    c.close()


def test_healthy_mm2_start_up_and_checkpoints_read_true(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    p, d = f"p{unique}", f"d{unique}"
    topic, group, live = f"ledger-{unique}", f"audit-{unique}", f"live-{unique}"
    create_topic(primary, topic, partitions=1)
    mm2 = MirrorMaker2({
        "clusters": f"{p}, {d}",
        f"{p}.bootstrap.servers": primary,
        f"{d}.bootstrap.servers": dr,
        f"{p}->{d}.enabled": "true",
        f"{p}->{d}.topics": topic,
        f"{p}->{d}.groups": f"{group}, {live}",
        f"{d}->{p}.enabled": "false",
        "emit.heartbeats.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "offset.lag.max": "100",
        "tasks.max": "1",
        **single_node_settings(),
    }, tmp_path / "mm2")
    mm2.work_dir.mkdir(parents=True)
    mm2.config_file.write_text("".join(f"{k} = {v}\n" for k, v in mm2.properties.items()))

    # The monitor's defaults for metadata (30 s); the checkpoint timeout is short so that a false
    # "stale" would show within the test: 2 x 1 s + the 0.5 s groups interval.
    with RunningMonitor(mm2.config_file, interval=0.5, groups_interval=0.5, metadata_interval=30.0,
                        heartbeat_timeout=5.0) as mon:
        mon.wait_for(lambda s: s["flows"][0]["partitions_by_status"].get("OK", 0) >= 1, 20, "the empty topic")
        with mm2:
            produce_raw(primary, topic, [{"value": b"v%d" % i} for i in range(300)])
            seen = []

            def caught_up(s):
                flow = s["flows"][0]
                part = next((x for x in flow.get("partitions", []) if x["topic"] == topic), None)
                if part is not None:
                    seen.append((part["status"], part["position_basis"], tuple(flow["reasons"])))
                return part is not None and part["lag_records"] == 0 and part["position_basis"] == "offset-sync"

            try:
                mon.wait_for(caught_up, 240, "MM2 caught up", interval=0.1)
            except AssertionError:
                assert mm2.running(), f"MM2 exited; see {mm2.log_file}"
                raise
            # Every status seen while MM2 started, created the mirror topic and wrote its first
            # syncs was a true one: never "sync ahead of target".
            assert not [x for x in seen if x[1] == "sync-ahead-of-target"], seen

            # A group committed between two syncs: MM2 checkpoints it one past the older sync.
            syncs = offset_syncs(primary, f"mm2-offset-syncs.{d}.internal", topic)
            gaps = [(u, nxt) for (u, _), (nxt, _) in zip(syncs, syncs[1:]) if nxt - u > 10]
            assert gaps, syncs
            older, newer = gaps[-1]
            committed = older + 5
            commit(primary, group, topic, committed)

            def checkpointed(s, upstream):
                g = next((g for g in s["flows"][0]["groups"] if g["group"] == group), None)
                gp = g and next((x for x in g["partitions"] if x["checkpoint_upstream"] == upstream), None)
                return gp and (g, gp)

            try:
                g, gp = mon.wait_for(lambda s: checkpointed(s, committed), 60, "MM2's checkpoint")
            except AssertionError:
                assert mm2.running(), f"MM2 exited; see {mm2.log_file}"
                raise
            assert gp["lag_records"] > 0, gp  # imprecise: a failover would re-read a few records
            # Idle, then moving without passing the next sync: MM2 writes nothing, and that is fine.
            time.sleep(4)
            commit(primary, group, topic, committed + 1)
            time.sleep(4)
            flow = mon.flow(f"{p}->{d}")
            g = next(g for g in flow["groups"] if g["group"] == group)
            assert [x["state"] for x in g["partitions"]] == ["ok"], g
            assert g["status"] == "OK" and g["stale"] == 0 and g["age_seconds"] == 0, g
            m = mon.metrics()
            assert sample(m, "sparkmirror_group_checkpoint_stale_partitions", flow=f"{p}->{d}", group=group) == 0
            assert sample(m, "sparkmirror_group_checkpoint_age_seconds", flow=f"{p}->{d}", group=group) == 0

            # Past the next sync: a newer checkpoint is due, and MM2 writes it.
            commit(primary, group, topic, newer + 1)
            g, gp = mon.wait_for(lambda s: checkpointed(s, newer + 1), 60, "MM2's next checkpoint")
            assert g["status"] == "OK" and gp["state"] == "ok", g

            # A group that keeps committing, and a monitor that reads committed offsets every 8 s.
            with RunningMonitor(mm2.config_file, interval=0.5, groups_interval=8.0, metadata_interval=30.0,
                                heartbeat_timeout=5.0) as slow, CommittingGroup(primary, live, topic) as reader:
                def live_checkpoints(s):
                    g = next((g for g in s["flows"][0]["groups"] if g["group"] == live), None)
                    return g and g["partitions"] and g["partitions"][0]["checkpoint_upstream"]

                n, skips, upstreams = 300, [], set()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and len(upstreams) < 12:
                    produce_raw(primary, topic, [{"value": b"v%d" % i} for i in range(n, n + 40)])
                    n += 40
                    s = slow.status()
                    skips.extend(false_skips(s, f"{p}->{d}"))
                    if live_checkpoints(s):
                        upstreams.add(live_checkpoints(s))
                    time.sleep(0.5)
                assert mm2.running(), f"MM2 exited; see {mm2.log_file}"
                # MM2 checkpointed the group at a dozen different offsets between the monitor's reads
                assert len(upstreams) >= 12 and reader.commits > 20, (upstreams, reader.commits)
                assert not skips, skips
