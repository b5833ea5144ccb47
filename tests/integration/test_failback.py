"""The failover-and-failback drill, against the real brokers and the real replicator.

One replicator run, both flows enabled (active-active), serves the whole drill:

- the primary's topic has a compaction gap and a transaction (markers, an aborted batch)
  before it is copied, so its offset-syncs have gaps and one-to-one windows;
- group G reads part of it on the primary and commits, fails over (``translate --apply``),
  reads on at dr up to an offset strictly inside a one-to-one sync window, and also reads
  part of dr's own topic, which producers write during the outage (the reverse flow copies
  it to the primary as ``dr.T``);
- the replicator stops (the primary's outage, seen from dr), the primary takes records that
  never reach dr, and G fails back: with the active-active file (reverse checkpoints) and
  with a one-way file (dr's own records counted and named instead);
- the monitor's failback readiness of a group caught up on dr agrees with the command;
- ``--apply`` is refused while G is active on the primary, then commits; G reads on at the
  primary: every record read once at least, none skipped, re-reads at most offset.lag.max;
- a primary topic re-created after the failover (truncated) is refused by name, and
  ``--apply`` then writes nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from sparkmirror.model import failback as fb
from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.cli import run_cli
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.monitor import RunningMonitor, sample
from tests.support.replicator import Replicator, write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LAG_MAX = 10
PARTS = 2


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def _records(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) of every committed record, per partition."""
    out: dict[int, list[tuple[int, bytes]]] = {q: [] for q in range(PARTS)}
    for m in consume_all(bootstrap, topic, timeout=30):
        out[m.partition()].append((m.offset(), m.value()))
    for q in out:
        out[q].sort()
    return out


def _read_from(bootstrap: str, topic: str, starts: dict[int, int], until: dict[int, int] | None = None
               ) -> dict[int, list[tuple[int, bytes]]]:
    """Records from ``starts`` to the current end (or ``until``, exclusive), per partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    ends = {q: c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1] for q in starts}
    if until:
        ends = {q: min(ends[q], until[q]) for q in ends}
    out: dict[int, list[tuple[int, bytes]]] = {q: [] for q in starts}
    todo = {q for q in starts if starts[q] < ends[q]}
    c.assign([TopicPartition(topic, q, starts[q]) for q in todo])
    deadline = time.monotonic() + 60
    while todo and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.partition() in todo and m.error().code() == -191:  # end of partition
                todo.discard(m.partition())
            continue
        if m.offset() < ends[m.partition()]:
            out[m.partition()].append((m.offset(), m.value()))
        if m.offset() + 1 >= ends[m.partition()]:
            todo.discard(m.partition())
    c.close()
    return out


def _syncs(primary: str) -> dict[tuple[str, int], list[tuple[int, int]]]:
    return fb.clean_syncs(OffsetSync.decode(m.key(), m.value())
                          for m in consume_all(primary, "mm2-offset-syncs.dr.internal", timeout=30))


def _checkpoints(bootstrap: str, topic: str, group: str) -> dict[tuple[str, int], Checkpoint]:
    if topic not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics:
        return {}
    out = {}
    for m in consume_all(bootstrap, topic, timeout=20):
        cp = Checkpoint.decode(m.key(), m.value())
        if cp.group == group:
            out[(cp.topic, cp.partition)] = cp
    return out


def _fill_primary(primary: str, topic: str, u: str) -> None:
    """Keyed updates the log cleaner compacts (gaps inside the log), then a transaction with an
    aborted batch, then unique keys only: nothing the cleaner removes later."""
    create_topic(primary, topic, PARTS, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
        "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})
    for burst in range(4):
        # the last burst updates half the keys: survivors of the earlier ones sit between removed records
        keys = 4 if burst == 3 else 8
        produce(primary, topic, [{"key": f"k{i % keys}".encode(), "value": f"b{burst}-{i}".encode(),
                                  "partition": i % PARTS} for i in range(40)])
        time.sleep(0.2)
    produce(primary, topic, [{"key": f"u{i}".encode(), "value": f"u{i}".encode(), "partition": i % PARTS}
                             for i in range(60)])
    tx = Producer({"bootstrap.servers": primary, "transactional.id": f"fb-tx-{u}"})
    tx.init_transactions(30)
    for r in range(3):
        tx.begin_transaction()
        for i in range(20):
            tx.produce(topic, key=f"t{r}-{i}".encode(), value=f"t{r}-{i}".encode(), partition=i % PARTS)
        if r == 1:
            assert tx.flush(30) == 0  # librdkafka#4849: deliver before an abort
            tx.abort_transaction(30)
        else:
            tx.commit_transaction(30)
    produce(primary, topic, [{"key": f"v{i}".encode(), "value": f"v{i}".encode(), "partition": i % PARTS}
                             for i in range(80)])

    def compacted() -> bool:
        recs = _records(primary, topic)
        keys = [m.key() for m in consume_all(primary, topic, timeout=30)]
        gaps = all(any(b - a > 1 for (a, _), (b, _) in zip(recs[q][:30], recs[q][1:30])) for q in recs)
        if gaps and len(keys) == len(set(keys)):
            return True
        produce(primary, topic, [{"key": f"roll{time.time_ns()}".encode(), "value": b"roll", "partition": q}
                                 for q in range(PARTS)])  # rolls the active segment
        return False

    wait_until(compacted, 90, interval=1, what="the log cleaner to leave gaps in the primary topic")


@pytest.fixture(scope="module")
def drill(kafka_clusters, tmp_path_factory):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("failback")
    topic, cut = f"fb-{u}", f"fbcut-{u}"
    _fill_primary(primary, topic, u)
    create_topic(primary, cut, PARTS)
    produce(primary, cut, [{"value": f"c{i}".encode(), "partition": i % PARTS} for i in range(100)])
    create_topic(dr, topic, PARTS)  # dr's own topic of the same name
    common = {"offset.lag.max": str(LAG_MAX), "emit.checkpoints.interval.seconds": "1",
              "sync.group.offsets.enabled": "false", "refresh.groups.interval.seconds": "1"}
    both = write_config(work / "mm2.properties", primary, dr, {
        **common, "primary->dr.topics": f"fb-{u}|fbcut-{u}", "dr->primary.topics": f"fb-{u}"},
        flows=("primary->dr", "dr->primary"))
    oneway = write_config(work / "oneway.properties", primary, dr, {**common, "primary->dr.topics": f"fb-{u}|fbcut-{u}"})
    rep = Replicator(both, work / "checkpoints", work / "replicator.log").start()
    try:
        yield {"u": u, "primary": primary, "dr": dr, "topic": topic, "cut": cut, "both": str(both),
               "oneway": str(oneway), "rep": rep}
    finally:
        if rep.running():
            rep.terminate()


def _mirrored(dr: str, remote: str, primary_recs) -> bool:
    got = _records(dr, remote)
    return all([v for _o, v in got[q]] == [v for _o, v in primary_recs[q]] for q in range(PARTS))


def _inside_window(pairs, low: int) -> int:
    """A DR offset at or after ``low`` strictly inside a one-to-one sync window."""
    for (u1, d1), (u2, d2) in zip(pairs, pairs[1:]):
        if d1 >= low and u2 - u1 == d2 - d1 and d2 - d1 >= 3:
            return d1 + 2
    raise AssertionError(f"no one-to-one window after {low} in {pairs}")


def test_failover_then_failback(drill):
    d = drill
    primary, dr, topic, rep, u = d["primary"], d["dr"], d["topic"], d["rep"], d["u"]
    remote = f"primary.{topic}"
    group, oneway_group = f"fb-g-{u}", f"fb-one-{u}"
    before = _records(primary, topic)
    rep.wait_until(lambda: _mirrored(dr, remote, before), 120, what="the primary topic on dr")

    # G (and the one-way group) read part of each partition on the primary and commit.
    pre = {q: before[q][len(before[q]) // 3][0] for q in range(PARTS)}
    for g in (group, oneway_group):
        _commit(primary, g, {(topic, q): o for q, o in pre.items()})
    want = {(remote, q): None for q in range(PARTS)}

    def checkpointed(g):
        cps = _checkpoints(dr, "primary.checkpoints.internal", g)
        return all(k in cps and cps[k].upstream_offset == pre[k[1]] for k in want)

    rep.wait_until(lambda: checkpointed(group) and checkpointed(oneway_group), 90,
                   what="checkpoints of both groups on dr")
    for g in (group, oneway_group):
        failover = run_cli("translate", d["both"], "--source", "primary", "--target", "dr", "--group", g, "--apply")
        assert failover.returncode == 0, failover.stderr
    on_dr = _committed(dr, group, remote)

    # On dr: read on to an offset strictly inside a one-to-one sync window, and read part of
    # dr's own topic, which dr's producers write to during the outage.
    pairs = _syncs(primary)
    stop = {q: _inside_window(pairs[(topic, q)], on_dr[q]) for q in range(PARTS)}
    read_dr = _read_from(dr, remote, on_dr, stop)
    produce(dr, topic, [{"value": f"dr{i}".encode(), "partition": i % PARTS} for i in range(50)])
    own = {q: 15 for q in range(PARTS)}
    for g in (group, oneway_group):
        _commit(dr, g, {**{(remote, q): o for q, o in stop.items()}, **{(topic, q): o for q, o in own.items()}})

    # The reverse flow copies dr's topic to the primary and checkpoints G there.
    def reverse_checkpointed():
        cps = _checkpoints(primary, "dr.checkpoints.internal", group)
        return all(cps.get((f"dr.{topic}", q)) and cps[(f"dr.{topic}", q)].upstream_offset == own[q]
                   for q in range(PARTS))

    rep.wait_until(reverse_checkpointed, 90, what="the reverse flow's checkpoints of G on the primary")
    assert rep.terminate() == 0  # the outage, seen from dr: nothing more is copied
    # The primary takes records that never reach dr.
    produce(primary, topic, [{"key": f"late{i}".encode(), "value": f"late{i}".encode(), "partition": i % PARTS}
                             for i in range(30)])

    # Dry run, active-active: mirror partitions exact, dr's own topic through the reverse checkpoints.
    shown = run_cli("failback", d["both"], "--from", "dr", "--to", "primary", "--group", group, "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    report = json.loads(shown.stdout)
    parts = {(r["dr_topic"], r["partition"]): r for r in report["partitions"]}
    reverse_cps = _checkpoints(primary, "dr.checkpoints.internal", group)
    for q in range(PARTS):
        mirror = parts[(remote, q)]
        assert mirror["basis"] == fb.EXACT_WINDOW and mirror["skipped_records"] == 0, mirror
        assert mirror["reread_records"] <= LAG_MAX
        own_row = parts[(topic, q)]
        assert (own_row["primary_topic"], own_row["primary_offset"], own_row["basis"]) == (
            f"dr.{topic}", reverse_cps[(f"dr.{topic}", q)].downstream_offset, fb.CHECKPOINT)
    table = run_cli("failback", d["both"], "--from", "dr", "--to", "primary", "--group", group)
    assert table.returncode == 0 and "PRIMARY OFFSET" in table.stdout and remote in table.stdout, table.stderr

    # The monitor, on what it reads anyway, agrees with the command for a group caught up on dr.
    caught_up = f"fb-mon-{u}"
    ends = {q: _read_from(dr, remote, {q: 0})[q][-1][0] + 1 for q in range(PARTS)}
    _commit(dr, caught_up, {(remote, q): o for q, o in ends.items()})
    said = json.loads(run_cli("failback", d["oneway"], "--from", "dr", "--to", "primary", "--group", caught_up,
                              "--json").stdout)
    with RunningMonitor(Path(d["oneway"])) as mon:
        def verdict(status):
            f = next(f for f in status["flows"] if f["name"] == "primary->dr")
            return next((g for g in f["failback"] if g["group"] == caught_up), None)

        seen = mon.wait_for(verdict, 30, what="the monitor's failback verdict of the caught-up group")
        assert seen["ready"] and "can fail back to primary now" in seen["summary"], seen
        assert {(p["target_topic"], p["partition"]): p["offset"] for p in seen["partitions"]} == {
            (r["dr_topic"], r["partition"]): r["primary_offset"] for r in said["partitions"]}
        assert sample(mon.metrics(), "sparkmirror_failback_ready", flow="primary->dr", group=caught_up) == 1

    # One-way: dr's own records are not on the primary: counted and named.
    one = run_cli("failback", d["oneway"], "--from", "dr", "--to", "primary", "--group", oneway_group)
    assert one.returncode == 0, one.stdout + one.stderr
    for q in range(PARTS):
        assert f"not on primary: 25 record(s) of {topic}[{q}] (offsets 0..24) were produced on dr" in one.stdout

    # --apply: refused while G is active on the primary, then committed.
    squatter = Consumer({"bootstrap.servers": primary, "group.id": group, "enable.auto.commit": False})
    squatter.subscribe([topic])
    wait_until(lambda: squatter.poll(0.5) is not squatter and bool(squatter.assignment()), 60, interval=0.5,
               what="a consumer of G on the primary")
    refused = run_cli("failback", d["both"], "--from", "dr", "--to", "primary", "--group", group, "--apply")
    assert refused.returncode == 3 and "active member" in refused.stderr, refused.stdout + refused.stderr
    assert _committed(primary, group, topic) == pre
    squatter.close()
    for g, cfg in ((group, d["both"]), (oneway_group, d["oneway"])):
        applied = run_cli("failback", cfg, "--from", "dr", "--to", "primary", "--group", g, "--apply")
        assert applied.returncode == 0, applied.stdout + applied.stderr

    # G reads on at the primary: every record, none skipped, re-reads at most offset.lag.max.
    now = _records(primary, topic)
    for g in (group, oneway_group):
        resumed = _committed(primary, g, topic)
        after = _read_from(primary, topic, resumed)
        for q in range(PARTS):
            seen = {v for o, v in before[q] if o < pre[q]} | {v for _o, v in read_dr[q]}
            read_after = [v for _o, v in after[q]]
            missing = [v for _o, v in now[q] if v not in seen and v not in read_after]
            assert missing == [], f"{g}[{q}]: skipped {missing[:5]}"
            rereads = [v for v in read_after if v in seen]
            assert len(rereads) <= LAG_MAX, f"{g}[{q}]: {len(rereads)} re-read"
            assert all(f"late{i}".encode() in read_after for i in range(q, 30, PARTS))  # never reached dr
            print(f"\nfailback {g}[{q}]: resumed at {resumed[q]}, {len(now[q])} records checked, 0 skipped, "
                  f"{len(rereads)} re-read")
    for q in range(PARTS):
        assert _committed(primary, group, f"dr.{topic}")[q] == reverse_cps[(f"dr.{topic}", q)].downstream_offset


def test_a_primary_recreated_after_failover_is_refused_by_name(drill):
    d = drill
    primary, dr, cut, u = d["primary"], d["dr"], d["cut"], d["u"]
    remote, group = f"primary.{cut}", f"fb-cut-{u}"
    rep = d["rep"]
    if rep.running():  # the drill above stops it; alone, wait for the copy
        rep.wait_until(lambda: sum(len(v) for v in _records(dr, remote).values()) == 100, 120, what="the copy")
        assert rep.terminate() == 0
    _commit(dr, group, {(remote, q): 40 for q in range(PARTS)})
    ok = run_cli("failback", d["oneway"], "--from", "dr", "--to", "primary", "--group", group, "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The primary comes back without what it had: the topic re-created, fewer records.
    client = AdminClient({"bootstrap.servers": primary})  # must outlive its futures
    client.delete_topics([cut])[cut].result(30)
    wait_until(lambda: cut not in client.list_topics(timeout=10).topics, 30,
               interval=0.5, what="the topic deleted")
    create_topic(primary, cut, PARTS)
    produce(primary, cut, [{"value": f"new{i}".encode(), "partition": i % PARTS} for i in range(60)])
    refused = run_cli("failback", d["oneway"], "--from", "dr", "--to", "primary", "--group", group, "--apply")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    for q in range(PARTS):
        assert f"refused {remote}[{q}]: " in refused.stdout and f"{cut}[{q}]" in refused.stdout
    assert "truncated or re-created" in refused.stdout and "earliest" in refused.stdout
    assert "nothing committed" in refused.stderr
    assert _committed(primary, group, cut) == {}


def test_under_identity_a_topic_only_dr_has_is_counted_not_refused(drill, tmp_path):
    d = drill
    primary, dr, u = d["primary"], d["dr"], d["u"]
    own, group = f"fbown-{u}", f"fb-own-{u}"
    create_topic(dr, own, 1)
    produce(dr, own, [{"value": f"o{i}".encode()} for i in range(40)])
    _commit(dr, group, {(own, 0): 30})
    identity = write_config(tmp_path / "identity.properties", primary, dr, {
        "primary->dr.topics": f"fb-{u}|fbown-{u}",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    out = run_cli("failback", str(identity), "--from", "dr", "--to", "primary", "--group", group)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"not on primary: 40 record(s) of {own}[0] (offsets 0..39) were produced on dr" in out.stdout
