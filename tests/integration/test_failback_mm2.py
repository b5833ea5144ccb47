"""Failing back after Apache MM2 replicated: ``sparkmirror failback`` reads MM2's offset-syncs.

The real MM2 (devenv/mm2.py) copies a primary topic with a transaction in it (markers: gaps
in the upstream offsets); the group read part of it on the primary, then on dr up to an
offset between two of MM2's syncs; MM2 stops (the outage), the primary takes records that
never reach dr, and the group fails back: 0 skipped, at most offset.lag.max re-read per
partition, the late records read. Behind ``slow``: MM2's start and copy take a while.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from devenv.mm2 import MirrorMaker2, single_node_settings
from tests.integration.test_failback import LAG_MAX, PARTS, _commit, _committed, _read_from, _records, _syncs
from tests.support.cli import run_cli
from tests.support.kafka import create_topic, produce
from tests.support.replicator import write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _between_syncs(pairs, low: int) -> int:
    """A DR offset at or after ``low`` strictly between two syncs (MM2 drops syncs while more than
    ten are outstanding in its producer, so its windows can be far longer than offset.lag.max)."""
    for a, b in zip(pairs, pairs[1:]):
        start = max(a[1], low)
        if b[1] - start >= 3:
            return start + 2
    raise AssertionError(f"no two syncs 3 or more apart after {low}: {pairs}")


def test_failback_after_mm2(kafka_clusters, tmp_path):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"fbm-{u}", f"fbm-g-{u}"
    remote = f"primary.{topic}"
    create_topic(primary, topic, PARTS)
    produce(primary, topic, [{"value": f"a{i}".encode(), "partition": i % PARTS} for i in range(200)])
    tx = Producer({"bootstrap.servers": primary, "transactional.id": f"fbm-tx-{u}"})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(40):
        tx.produce(topic, value=f"t{i}".encode(), partition=i % PARTS)
    tx.commit_transaction(30)
    produce(primary, topic, [{"value": f"b{i}".encode(), "partition": i % PARTS} for i in range(200)])
    props = {
        "clusters": "primary, dr", "primary.bootstrap.servers": primary, "dr.bootstrap.servers": dr,
        "primary->dr.enabled": "true", "primary->dr.topics": topic, "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5", "sync.topic.acls.enabled": "false",
        "offset.lag.max": str(LAG_MAX), "tasks.max": "1", "offset.flush.interval.ms": "500",
        **single_node_settings(),
    }
    before = _records(primary, topic)
    pre = {q: before[q][len(before[q]) // 3][0] for q in range(PARTS)}
    _commit(primary, group, {(topic, q): o for q, o in pre.items()})
    with MirrorMaker2(props, tmp_path / "mm2") as mm2:
        wait_until(lambda: [len(v) for v in _records(dr, remote).values()] == [len(before[q]) for q in range(PARTS)],
                   180, interval=1, what="MM2's copy", ignoring=Exception, alive=mm2.running)

        def synced_to_end():
            pairs = _syncs(primary)
            return all(pairs.get((topic, q)) and pairs[(topic, q)][-1][0] == before[q][-1][0] for q in range(PARTS))

        wait_until(synced_to_end, 60, interval=1, what="MM2's offset-syncs of the last records", alive=mm2.running)
    pairs = _syncs(primary)
    # On dr the group read from its primary position (the copy has no gap before the transaction,
    # so the same offset) to a point between two of MM2's syncs.
    stop = {q: _between_syncs(pairs[(topic, q)], pre[q]) for q in range(PARTS)}
    read_dr = _read_from(dr, remote, pre, stop)
    _commit(dr, group, {(remote, q): o for q, o in stop.items()})
    produce(primary, topic, [{"value": f"late{i}".encode(), "partition": i % PARTS} for i in range(20)])
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic,
                                                                       "offset.lag.max": str(LAG_MAX)})
    shown = run_cli("failback", str(config), "--from", "dr", "--to", "primary", "--group", group, "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    rows = {r["partition"]: r for r in json.loads(shown.stdout)["partitions"]}
    for q in range(PARTS):
        assert rows[q]["skipped_records"] == 0 and rows[q]["reread_records"] <= LAG_MAX, rows[q]
    applied = run_cli("failback", str(config), "--from", "dr", "--to", "primary", "--group", group, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = _read_from(primary, topic, _committed(primary, group, topic))
    now = _records(primary, topic)
    for q in range(PARTS):
        seen = {v for o, v in before[q] if o < pre[q]} | {v for _o, v in read_dr[q]}
        read_after = [v for _o, v in after[q]]
        assert [v for _o, v in now[q] if v not in seen and v not in read_after] == [], f"partition {q}: skipped"
        rereads = [v for v in read_after if v in seen]
        assert len(rereads) <= LAG_MAX, f"partition {q}: {len(rereads)} re-read"
        assert all(f"late{i}".encode() in read_after for i in range(q, 20, PARTS))
        print(f"\nfailback after MM2 [{q}]: {rows[q]['basis']}, {len(now[q])} records checked, 0 skipped, "
              f"{len(rereads)} re-read")
