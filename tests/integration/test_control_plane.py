"""The control plane against the real brokers (authorizer on) and the real replicator.

One replicator run (module fixture) serves, in this order:

- topic config sync over time (a change on the source reaches the mirror topic,
  excluded configs are left alone) and partition growth;
- ACL sync: literal topic ACLs only, never ALLOW WRITE, ALL becomes READ;
- checkpoints for groups 1k, 100k and 1,000,000 records behind a partition of
  1,000,100 records, from the offset-syncs the data path writes for it: precise
  (within offset.lag.max, here exact) where Apache MM2's store, fed the same
  syncs, is off by far more;
- partition growth;
- ``sparkmirror inspect`` on the live internal topics;
- the failover drill: a transactional producer writes to primary,
  two groups read part of it and commit, then fail over to dr — one through
  group offset sync, one through ``sparkmirror translate --apply`` (refused while
  the group is active on dr) — and read on. Every record is checked: none
  skipped, re-reads per partition at most offset.lag.max. The drill stops the
  replicator (SIGTERM, exit 0), so it runs last.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions,
                                   ResourcePatternType, ResourceType)

from sparkmirror.model.offsets import OffsetSyncStore
from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.cli import run_cli
from tests.support.kafka import consume_all, create_topic
from tests.support.replicator import Replicator, write_config
from tests.support.mm2_store import MM2OffsetSyncStore
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LAG_MAX = 100
BIG = 1_000_100
SHIFT = 37
PARTITIONS = 3


_ADMINS: dict[str, AdminClient] = {}


def _admin(bootstrap: str) -> AdminClient:
    """One admin client per cluster for the module: a client must outlive its futures."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return _ADMINS[bootstrap]


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def _checkpoints(dr: str, topic: str = "primary.checkpoints.internal") -> dict[tuple[str, str, int], Checkpoint]:
    if topic not in _admin(dr).list_topics(timeout=10).topics:
        return {}
    out = {}
    for m in consume_all(dr, topic, timeout=20):
        cp = Checkpoint.decode(m.key(), m.value())
        out[(cp.group, cp.topic, cp.partition)] = cp
    return out


def _write_big_syncs(bootstrap: str, topic: str) -> list[OffsetSync]:
    """The offset-syncs the data path writes for BIG records copied to a mirror that already held SHIFT records.

    Written straight into the flow's offset-syncs topic: translation depends on
    the syncs only, and copying a million records through Spark would test the
    data path's speed, not the checkpoints' precision.
    """
    from replicator.control.topics import ensure_internal_topic
    from sparkmirror.model.offsets import OffsetSyncEmitter

    ensure_internal_topic(_admin(bootstrap), "primary", "mm2-offset-syncs.dr.internal", 1)
    emitter = OffsetSyncEmitter(LAG_MAX)
    syncs: list[OffsetSync] = []
    for start in range(0, BIG, 7_919):  # batches, each ending with the pending syncs
        syncs += emitter.record_run(topic, 0, start, start + SHIFT, min(7_919, BIG - start))
        syncs += emitter.take_pending()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for sync in syncs:
        p.produce("mm2-offset-syncs.dr.internal", key=sync.encode_key(), value=sync.encode_value(), partition=0)
    assert p.flush(60) == 0
    return syncs


def _transactional_drill(bootstrap: str, topic: str, txn_id: str, start: int, rounds: int) -> dict[int, list[bytes]]:
    """Write ``rounds`` transactions of 60 records per partition; every 5th is aborted. Committed values per partition."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(30)
    committed: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    for r in range(start, start + rounds):
        p.begin_transaction()
        batch = {q: [f"p{q}-r{r}-{i}".encode() for i in range(60)] for q in range(PARTITIONS)}
        for q, values in batch.items():
            for v in values:
                p.produce(topic, value=v, partition=q)
        if r % 5 == 4:
            # librdkafka can fail an abort with INVALID_TXN_STATE while the transaction's
            # AddPartitionsToTxn is still in flight (confluentinc/librdkafka#4849, seen here
            # on fresh clusters about one run in two): deliver the records first
            assert p.flush(30) == 0
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            for q, values in batch.items():
                committed[q] += values
    return committed


@pytest.fixture(scope="module")
def run(kafka_clusters, tmp_path_factory):
    import uuid

    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("control")
    t = {"big": f"big-{u}", "drill": f"drill-{u}", "conf": f"conf-{u}", "acl": f"acl-{u}"}
    create_topic(primary, t["big"], 1)
    create_topic(primary, t["drill"], PARTITIONS)
    create_topic(primary, t["conf"], 1, config={"retention.ms": "3600000", "min.insync.replicas": "2",
                                                "message.timestamp.type": "LogAppendTime"})
    create_topic(primary, t["acl"], 1)

    big_syncs = _write_big_syncs(primary, t["big"])
    behind = {f"lag1k-{u}": 1_000, f"lag100k-{u}": 100_000, f"lag1m-{u}": 1_000_000}
    for group, n in behind.items():
        _commit(primary, group, {(t["big"], 0): BIG - n})

    sent = _transactional_drill(primary, t["drill"], f"drill-tx-{u}", 0, 25)

    admin = _admin(primary)
    acls = [
        AclBinding(ResourceType.TOPIC, t["acl"], ResourcePatternType.LITERAL, f"User:alice-{u}", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, t["acl"], ResourcePatternType.LITERAL, f"User:alice-{u}", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, t["acl"], ResourcePatternType.LITERAL, f"User:bob-{u}", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, t["acl"], ResourcePatternType.LITERAL, f"User:eve-{u}", "*",
                   AclOperation.READ, AclPermissionType.DENY),
        AclBinding(ResourceType.TOPIC, f"acl-{u}", ResourcePatternType.PREFIXED, f"User:carol-{u}", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(acls).values():
        f.result(30)

    config = write_config(work / "mm2.properties", primary, dr, extra={
        "primary->dr.topics": ", ".join(t.values()),
        "primary->dr.groups": f".*-{u}",
        "emit.checkpoints.interval.seconds": "2",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "sync.topic.configs.interval.seconds": "3",
        "sync.topic.acls.enabled": "true",
        "sync.topic.acls.interval.seconds": "3",
        "offset.lag.max": str(LAG_MAX),
    })
    rep = Replicator(config, work / "checkpoints", work / "replicator.log").start()
    try:
        yield {"primary": primary, "dr": dr, "u": u, "t": t, "rep": rep, "config": config, "sent": sent,
               "behind": behind, "acls": acls, "big_syncs": big_syncs}
    finally:
        rep.terminate()
        for cluster in (primary, dr):
            a = _admin(cluster)
            for principal in (f"User:{n}-{u}" for n in ("alice", "bob", "eve", "carol")):
                flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                                       AclOperation.ANY, AclPermissionType.ANY)
                a.delete_acls([flt])[flt].result(30)


def test_topic_config_sync_over_time(run):
    primary, dr, t, rep = run["primary"], run["dr"], run["t"], run["rep"]
    remote = f"primary.{t['conf']}"

    def dr_configs():
        res = ConfigResource(ResourceType.TOPIC, remote)
        try:
            return _admin(dr).describe_configs([res])[res].result(30)
        except Exception:
            return None

    rep.wait_until(lambda: (c := dr_configs()) and c["retention.ms"].value == "3600000", 120,
                   what=f"{remote} created with the source's retention.ms")
    src = _admin(primary)
    res = ConfigResource(ResourceType.TOPIC, t["conf"], incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "200000", incremental_operation=AlterConfigOpType.SET)])
    src.incremental_alter_configs([res])[res].result(30)
    # an operator's own setting of an excluded config on the mirror topic is never touched
    dres = ConfigResource(ResourceType.TOPIC, remote, incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])
    _admin(dr).incremental_alter_configs([dres])[dres].result(30)

    def synced():
        c = dr_configs()
        return c and c["retention.ms"].value == "7200000" and c["max.message.bytes"].value == "200000"

    rep.wait_until(synced, 60, what="the source's config change on the mirror topic")
    c = dr_configs()
    assert c["min.insync.replicas"].value == "1"
    assert int(getattr(c["min.insync.replicas"].source, "value", c["min.insync.replicas"].source)) == \
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert c["message.timestamp.type"].value == "CreateTime"
    # the replicator logs the change once the broker has confirmed it: the line can trail what
    # describe_configs already shows by a moment
    rep.wait_for_log(f"config sync primary->dr: {remote}: retention.ms=7200000 (was 3600000)", 30)
    log = rep.log()
    assert "min.insync.replicas" not in "\n".join(ln for ln in log.splitlines() if "config sync" in ln)


def test_acl_sync_literal_topics_never_write_all_becomes_read(run):
    dr, t, u, rep = run["dr"], run["t"], run["u"], run["rep"]
    remote = f"primary.{t['acl']}"
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)

    def mine():
        got = _admin(dr).describe_acls(flt).result(30)
        return {(b.name, b.resource_pattern_type, b.principal, b.operation, b.permission_type)
                for b in got if b.principal.endswith(u)}

    expected = {
        (remote, ResourcePatternType.LITERAL, f"User:alice-{u}", AclOperation.READ, AclPermissionType.ALLOW),
        (remote, ResourcePatternType.LITERAL, f"User:bob-{u}", AclOperation.READ, AclPermissionType.ALLOW),
        (remote, ResourcePatternType.LITERAL, f"User:eve-{u}", AclOperation.READ, AclPermissionType.DENY),
    }
    rep.wait_until(lambda: mine() == expected, 90, what="the mirrored ACLs")
    time.sleep(4)  # another round: nothing more appears (no WRITE, no prefixed ACL)
    assert mine() == expected
    assert rep.log().count("ACL sync primary->dr: created") == 3


def test_checkpoints_of_groups_far_behind_are_precise(run):
    dr, t, rep = run["dr"], run["t"], run["rep"]
    remote = f"primary.{t['big']}"

    def ready():
        cps = _checkpoints(dr)
        mine = {g: cps.get((g, remote, 0)) for g in run["behind"]}
        return mine if all(mine.values()) else None

    mine = rep.wait_until(ready, 120, what="checkpoints of the three lagging groups")
    mm2 = MM2OffsetSyncStore()
    for s in run["big_syncs"]:
        mm2.add(s.upstream_offset, s.downstream_offset)
    print(f"\n{BIG:,} records, {len(run['big_syncs'])} offset-syncs, offset.lag.max {LAG_MAX}")
    for group, n in run["behind"].items():
        cp = mine[group]
        committed = BIG - n
        truth = committed + SHIFT
        assert cp.upstream_offset == committed
        assert cp.downstream_offset <= truth, "a checkpoint ahead of the truth would skip records"
        assert truth - cp.downstream_offset <= LAG_MAX
        theirs = mm2.translate(committed)
        print(f"group {n:>9,} behind: sparkmirror's checkpoint re-reads {truth - cp.downstream_offset}; "
              f"Apache MM2's store on the same syncs re-reads "
              f"{truth - theirs if theirs is not None else 'n/a (no checkpoint)'}")
    assert "checkpoints primary->dr: wrote" in rep.log()


def test_partition_growth_reaches_the_mirror(run):
    """Run after the million-record batch: growing restarts the query, which abandons a running batch."""
    primary, dr, t, rep = run["primary"], run["dr"], run["t"], run["rep"]
    _admin(primary).create_partitions([NewPartitions(t["conf"], 2)])[t["conf"]].result(30)
    remote = f"primary.{t['conf']}"
    rep.wait_until(lambda: len(_admin(dr).list_topics(timeout=10).topics[remote].partitions) == 2, 60,
                   what=f"{remote} grown to 2 partitions")
    assert f"grew {remote} on dr to 2 partitions" in rep.log()


def test_inspect_live_internal_topics(run):
    config, t = str(run["config"]), run["t"]
    out = run_cli("inspect", config, "--cluster", "dr", "--topic", "primary.checkpoints.internal", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert rows and all({"partition", "offset", "timestamp_ms", "record"} <= set(r) for r in rows)
    assert any(r["record"]["group"] in run["behind"] and r["record"]["topic"] == f"primary.{t['big']}" for r in rows)

    out = run_cli("inspect", config, "--cluster", "primary", "--topic", "mm2-offset-syncs.dr.internal", "--limit", "5",
                  "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 5 and all(r["type"] == "offset-sync" and "upstream_offset" in r["record"] for r in rows)

    out = run_cli("inspect", config, "--cluster", "dr", "--topic", "heartbeats", "--limit", "3")
    assert out.returncode == 0, out.stderr
    assert "heartbeat primary->dr at" in out.stdout

    # The disabled reverse pair heartbeats into primary's `heartbeats`, and the flow carries
    # them to dr as primary.heartbeats although the topic filter names only this test's topics.
    out = run_cli("inspect", config, "--cluster", "dr", "--topic", "primary.heartbeats", "--limit", "20", "--json")
    assert out.returncode == 0, out.stderr
    now_ms = time.time() * 1000
    reverse = [json.loads(line)["record"] for line in out.stdout.splitlines()]
    assert any(r["source"] == "dr" and r["target"] == "primary" and now_ms - r["timestamp_ms"] < 60_000
               for r in reverse)

    out = run_cli("inspect", config, "--cluster", "dr", "--topic", f"primary.{t['big']}")
    assert out.returncode == 2 and "not an MM2 internal topic" in out.stderr


def _consume_part(bootstrap: str, group: str, topic: str, fractions: list[float],
                  sent: dict[int, list[bytes]]) -> dict[int, int]:
    """As a member of ``group``, read ``fractions`` of each partition's records, commit, stop; the offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    want = {q: int(len(sent[q]) * f) for q, f in enumerate(fractions)}
    c.assign([TopicPartition(topic, q, 0) for q in want])
    got = {q: 0 for q in want}
    last: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while any(got[q] < want[q] for q in want) and time.monotonic() < deadline:
        for m in c.consume(500, timeout=0.5):
            q = m.partition()
            if m.error() or got[q] >= want[q]:
                continue
            assert m.value() == sent[q][got[q]]
            got[q] += 1
            last[q] = m.offset()
            if got[q] == want[q]:
                c.pause([TopicPartition(topic, q)])
    assert got == want
    offsets = {q: last[q] + 1 for q in want}
    c.commit(offsets=[TopicPartition(topic, q, o) for q, o in offsets.items()], asynchronous=False)
    c.close()
    return offsets


def _read_on(bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> dict[int, list[bytes]]:
    """Consume ``topic`` as a member of ``group`` from its committed offsets to the ends; values per partition.

    ``auto.offset.reset=earliest``, as the application would run: a partition
    without a translated offset would be read from the start and show up as far
    more re-reads than offset.lag.max.
    """
    starts = _committed(bootstrap, group, topic, len(ends))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: dict[int, list[bytes]] = {q: [] for q in ends}
    done = {q for q in ends if starts.get(q, 0) >= ends[q]}
    deadline = time.monotonic() + 120
    try:
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"group {group} did not reach the end on {bootstrap}: {done}"
            for m in c.consume(1000, timeout=0.5):
                if m.error():
                    continue
                got[m.partition()].append(m.value())
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
    finally:
        c.close()
    return got


def test_failover_drill(run):
    primary, dr, t, u, rep = run["primary"], run["dr"], run["t"], run["u"], run["rep"]
    topic, remote = t["drill"], f"primary.{t['drill']}"
    config = str(run["config"])
    sent = run["sent"]
    synced_group, applied_group = f"drill-synced-{u}", f"drill-applied-{u}"

    # The applied group already has a live consumer on dr: group sync must leave it alone.
    squatter = Consumer({"bootstrap.servers": dr, "group.id": applied_group, "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    squatter.subscribe([remote])
    wait_until(lambda: squatter.poll(0.5) is None and bool(squatter.assignment()), 60, interval=1,
               what="the dr consumer to join")
    # Two groups read part of each partition on primary and commit, then their consumers stop.
    committed = {
        synced_group: _consume_part(primary, synced_group, topic, [0.3, 0.45, 0.6], sent),
        applied_group: _consume_part(primary, applied_group, topic, [0.7, 0.55, 0.8], sent),
    }
    consumed = {g: {q: int(len(sent[q]) * f) for q, f in enumerate(fr)}
                for g, fr in ((synced_group, [0.3, 0.45, 0.6]), (applied_group, [0.7, 0.55, 0.8]))}
    # The producer goes on writing while the replicator runs.
    more = _transactional_drill(primary, topic, f"drill-tx2-{u}", 25, 10)
    for q in range(PARTITIONS):
        sent[q] += more[q]

    # Failover comes once dr holds every committed drill record. A checkpoint is as precise as
    # the offset-syncs of the records replicated when it was emitted: while the replicator is
    # behind (under load the first copy of the drill records can take seconds), a group
    # committed past the copied records translates to the last copied one, and the next
    # checkpoints refine it once the syncs of the rest are written.
    def mirrored():
        c = Consumer({"bootstrap.servers": dr, "group.id": f"ends-{u}"})
        try:
            return all(c.get_watermark_offsets(TopicPartition(remote, q), timeout=10)[1] >= len(sent[q])
                       for q in range(PARTITIONS))
        finally:
            c.close()

    rep.wait_until(mirrored, 120, what="all committed drill records on dr")

    # The drill acts on converged checkpoints: for every committed offset, the checkpoint is the
    # translation over every offset-sync now in the topic (the checkpoint emitter's own rule; how
    # precise that is, the read-back below measures record by record).
    def converged():
        store = OffsetSyncStore(LAG_MAX)
        for m in consume_all(primary, "mm2-offset-syncs.dr.internal", timeout=20):
            store.add(OffsetSync.decode(m.key(), m.value()))
        cps = _checkpoints(dr)
        return all((cps.get((g, remote, p)) or Checkpoint(g, remote, p, -1, -1)).downstream_offset
                   == store.translate(topic, p, o)
                   for g, offs in committed.items() for p, o in offs.items())

    rep.wait_until(converged, 120, what="checkpoints of both drill groups translating over every offset-sync")

    def synced():
        cps = _checkpoints(dr)
        return _committed(dr, synced_group, remote, PARTITIONS) == {
            p: cps[(synced_group, remote, p)].downstream_offset for p in committed[synced_group]}

    rep.wait_until(synced, 60, what="the synced group's offsets on dr (the newest checkpoints)")
    rep.wait_until(lambda: f"leaving group {applied_group} alone on dr" in rep.log(), 30,
                   what="the 'left alone' log line")
    assert _committed(dr, applied_group, remote, PARTITIONS) == {}

    refused = run_cli("translate", config, "--source", "primary", "--target", "dr", "--group", applied_group, "--apply")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "active member" in refused.stderr
    assert _committed(dr, applied_group, remote, PARTITIONS) == {}

    # Failover: the source side is gone; the replicator stops cleanly, the dr consumer too.
    assert rep.terminate() == 0
    squatter.close()

    shown = run_cli("translate", config, "--source", "primary", "--target", "dr", "--group", applied_group, "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    cps = _checkpoints(dr)
    assert {(r["topic"], r["partition"]): r["offset"] for r in report["offsets"]} == {
        (remote, p): cps[(applied_group, remote, p)].downstream_offset for p in committed[applied_group]}
    applied = run_cli("translate", config, "--source", "primary", "--target", "dr", "--group", applied_group, "--apply")
    assert applied.returncode == 0, applied.stderr
    assert f"committed {PARTITIONS} partition(s) of group {applied_group} on dr" in applied.stdout

    # Both groups read on at dr: record by record, nothing skipped.
    mirror_end = {}
    c = Consumer({"bootstrap.servers": dr, "group.id": f"ends-{u}"})
    for q in range(PARTITIONS):
        mirror_end[q] = c.get_watermark_offsets(TopicPartition(remote, q), timeout=10)[1]
    c.close()
    total_checked = 0
    for group in (synced_group, applied_group):
        resumed_at = _committed(dr, group, remote, PARTITIONS)
        got = _read_on(dr, group, remote, mirror_end)
        for q in range(PARTITIONS):
            values = got[q]
            before = consumed[group][q]  # records the group had consumed on primary
            todo = sent[q][before:]
            # every record not yet consumed on primary is read on dr, in order: none skipped
            assert values[len(values) - len(todo):] == todo, f"{group} partition {q}: records skipped or altered"
            rereads = len(values) - len(todo)
            # what comes before is only records the group had consumed already (re-reads)
            assert set(values[:rereads]) <= set(sent[q][:before]), f"{group} partition {q}: unexpected records"
            assert 0 <= rereads <= LAG_MAX, f"{group} partition {q}: {rereads} re-reads"
            total_checked += len(values)
            print(f"\n{group} partition {q}: committed at upstream offset {committed[group][q]} after {before} "
                  f"records, resumed on dr at {resumed_at[q]}: "
                  f"{len(todo)} records checked, 0 skipped, {rereads} re-read")
    print(f"failover drill: {total_checked} records checked one by one, 0 skipped")
