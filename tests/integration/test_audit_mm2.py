"""The audit of a healthy copy made by the real Apache MirrorMaker 2, then of harms done to it.

One MM2 (module fixture) copies a plain topic, a compacted one and one written in
transactions (some aborted: MM2 reads read_uncommitted by default, so it copies those
too, and the audit reads the source as MM2 does; read as sparkmirror reads, those copies
are foreign). The audit finds 0 missing and 0 altered, with every synced record
accounted for. Then ``deleteRecords`` on the mirror topic and a foreign record produced
into it are each reported at their exact offsets. A second compacted topic is cleaned on
the mirror only (its cleaner runs past the ranges the audit compares), and with -m slow
MM2 is killed with SIGKILL and started again in between: 0 missing, 0 altered. A compacted topic
written in transactions, whose aborted records the source's cleaner drops after MM2 copied them,
audits clean too. (The 10-minute run, with a
kill -9 of MM2 in the middle, is bench/audit_soak.py.)
"""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from devenv.mm2 import MirrorMaker2, single_node_settings
from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.reader import ClusterReader
from sparkmirror.configfile import load_config
from sparkmirror_cli import audit as audit_cli
from tests.support.kafka import consume_all, create_topic
from tests.support.monitor import produce_raw
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.mm2]


def _transactions(bootstrap, topic, tid, partitions=2):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    for n in range(8):
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, b"tx%d-%d" % (n, i), key=b"t%d" % i, partition=i % partitions)
        if n in (1, 4):
            p.flush(30)  # on the log before the abort, which would otherwise purge them unsent
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)


#: the compacted topic cleaned on the mirror only: records per burst, keys
BURST, KEYS = 300, 20


@pytest.fixture(scope="module")
def mm2_flow(kafka_clusters, tmp_path_factory):
    unique = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("audit-mm2")
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    p, d = f"p{unique}", f"d{unique}"
    plain, compacted, txn = f"plain-{unique}", f"compact-{unique}", f"txn-{unique}"
    late, ctxn = f"late-{unique}", f"ctxn-{unique}"
    create_topic(primary, plain, partitions=2)
    create_topic(primary, compacted, partitions=1, config={"cleanup.policy": "compact", "segment.ms": "500",
                                                           "min.cleanable.dirty.ratio": "0.01"})
    create_topic(primary, txn, partitions=2)
    # compacted and written in transactions: the source's cleaner later drops the aborted records
    # MM2 copied (read_uncommitted), so the mirror holds records the source no longer has
    create_topic(primary, ctxn, partitions=1, config={"cleanup.policy": "compact", "segment.ms": "500",
                                                      "min.cleanable.dirty.ratio": "0.01",
                                                      "min.compaction.lag.ms": "0"})
    # the source keeps every record in its active segment (never cleaned); the mirror, created
    # before MM2 starts, rolls and cleans at once: the two sides are compacted at different times
    create_topic(primary, late, partitions=1, config={"cleanup.policy": "compact"})
    create_topic(dr, f"{p}.{late}", partitions=1, config={
        "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0"})
    produce_raw(primary, plain, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2,
                                  "headers": [("h", b"%d" % i)]} for i in range(400)])
    produce_raw(primary, compacted, [{"key": b"k%d" % (i % 20), "value": b"c%d" % i, "partition": 0}
                                     for i in range(200)])
    _transactions(primary, txn, f"tx-{unique}")
    _transactions(primary, ctxn, f"ctx-{unique}", partitions=1)
    produce_raw(primary, late, _burst(0))
    topics = [plain, compacted, txn, late, ctxn]
    mm2 = MirrorMaker2({
        "clusters": f"{p}, {d}", f"{p}.bootstrap.servers": primary, f"{d}.bootstrap.servers": dr,
        f"{p}->{d}.enabled": "true", f"{p}->{d}.topics": ", ".join(topics), f"{d}->{p}.enabled": "false",
        "emit.checkpoints.enabled": "false", "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false", "refresh.topics.interval.seconds": "5", "offset.lag.max": "10",
        "tasks.max": "1", **single_node_settings(),
    }, work / "mm2")
    mm2.work_dir.mkdir(parents=True)
    mm2.config_file.write_text("".join(f"{k} = {v}\n" for k, v in mm2.properties.items()))
    config = load_config(mm2.config_file)
    with mm2:
        yield dict(mm2=mm2, config=config, p=p, d=d, primary=primary, dr=dr, plain=plain, compacted=compacted,
                   txn=txn, late=late, ctxn=ctxn, work=work)


def _end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def _burst(n: int) -> list[dict]:
    return [{"key": b"k%d" % (i % KEYS), "value": b"late-%d-%d" % (n, i), "partition": 0} for i in range(BURST)]


def _engine(f, topics, state_path, **settings):
    flow = AuditFlow.of(f["config"], f["config"].flow(f["p"], f["d"]), "mm2", topics)
    readers = Readers(ClusterReader(f["p"], {"bootstrap.servers": f["primary"]}, flow.source_isolation),
                      ClusterReader(f["d"], {"bootstrap.servers": f["dr"]}, "read_committed"),
                      ClusterReader(f["p"], {"bootstrap.servers": f["primary"]}, "read_committed"))
    return AuditEngine(flow, readers, AuditSettings(state_path=state_path, **settings))


def test_a_healthy_mm2_copy_audits_clean_and_later_harm_is_named(mm2_flow, tmp_path, capsys):
    m = mm2_flow
    mm2, p, d, primary, dr = m["mm2"], m["p"], m["d"], m["primary"], m["dr"]
    plain, compacted, txn = m["plain"], m["compacted"], m["txn"]
    engine = _engine(m, [plain, compacted, txn], tmp_path / "audit.json")
    flow, readers = engine.flow, engine.readers
    assert flow.source_isolation == "read_uncommitted"
    source_records = 400 + 200 + 160
    try:
        def synced():
            engine.round()
            snap = engine.snapshot()
            # records up to the newest sync of each partition (MM2 syncs every 10 records here)
            return sum(snap["positions"].values()) >= source_records - 6 * 12 and snap["unchecked_records"] == 0 \
                and snap["pending_windows"] == 0 and snap
        try:
            snap = wait_until(synced, 150, interval=1.0, what="MM2's syncs reaching the end of every topic")
        except AssertionError:
            assert mm2.running(), f"MM2 exited; see {mm2.log_file}"
            raise
        c = snap["counts"]
        assert (c["missing"], c["mismatched"], c["unverifiable"]) == (0, 0, 0), snap["findings"]
        assert c["verified"] >= 0.8 * (400 + 160), snap
        assert snap["coverage"]["loss"] == 1.0, snap["coverage"]
        # read as sparkmirror would (read_committed), MM2's copies of the aborted records are foreign
        code = audit_cli.main(["audit", str(mm2.config_file), "--flow", f"{p}->{d}", "--topic", txn, "--json"])
        wrong = json.loads(capsys.readouterr().out)
        assert code == 1 and wrong["counts"]["mismatched"] >= 20, wrong["counts"]
        assert {f["kind"] for f in wrong["findings"]} == {"foreign"}

        # deleteRecords on the mirror topic: named by its target offsets, with the source's
        remote = f"{p}.{plain}"
        admin = AdminClient({"bootstrap.servers": dr})
        for f in admin.delete_records([TopicPartition(remote, 0, 50)]).values():
            f.result(30)
        engine.round()
        expired = [f for f in engine.snapshot()["findings"] if f["kind"] == "expired"]
        assert [(f["topic"], f["partition"], f["source_offset"], f["target_offset"], f["count"])
                for f in expired] == [(plain, 0, 0, 0, 50)], expired

        # a foreign record produced into the mirror topic, then more of the source's
        landed = []
        foreign = Producer({"bootstrap.servers": dr})
        foreign.produce(remote, b"not from the source", key=b"intruder", partition=1,
                        on_delivery=lambda err, msg: landed.append(msg.offset()))
        foreign.flush(30)
        time.sleep(0.5)
        produce_raw(primary, plain, [{"key": b"m%d" % i, "value": b"more", "partition": 1} for i in range(40)])

        def foreign_found():
            engine.round()
            return [f for f in engine.snapshot()["findings"] if f["kind"] == "foreign"]
        found = wait_until(foreign_found, 90, interval=1.0, what="the foreign record named",
                           details=lambda: f"findings: {engine.snapshot()['findings']}")
        assert [(f["topic"], f["partition"], f["target_offset"]) for f in found] == [(plain, 1, landed[0])]
        c = engine.snapshot()["counts"]
        assert (c["missing"], c["mismatched"]) == (0, 1), engine.snapshot()["findings"]
    finally:
        readers.close()


# with a kill -9 of MM2 between two bursts (its restart takes ~30 s here): -m slow
@pytest.mark.parametrize("kill", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["steady", "kill-9"])
def test_a_mirror_cleaned_on_its_own_schedule_audits_clean(mm2_flow, tmp_path, kill):
    """The mirror's cleaner removes whole ranges the source still holds (their keys' newer values lie
    past them): compared by key, they looked missing, as in the kill -9 soak's compacted topic."""
    m = mm2_flow
    mm2, late, primary = m["mm2"], m["late"], m["primary"]
    remote = f"{m['p']}.{late}"
    engine = _engine(m, [late], tmp_path / "late.json", chunk=50)

    def synced(n):
        def check():
            engine.round(content=False)  # syncs and loss windows only: the content waits for the cleaner
            return engine.snapshot()["positions"].get(f"{late}/0", -1) >= n - 12
        return lambda: wait_until(check, 120, interval=0.5, what=f"MM2's syncs of {n} records of {late}",
                                  details=lambda: f"MM2 running: {mm2.running()}, log {mm2.log_file}")

    try:
        synced(BURST)()
        time.sleep(0.5)  # past the mirror's segment.ms: the next burst rolls its segment, the cleaner follows
        produce_raw(primary, late, _burst(1))
        synced(2 * BURST)()
        if kill:
            mm2.process.send_signal(signal.SIGKILL)  # MM2 starts again from its last committed offsets
            mm2.process.wait(30)
            mm2.start()
        time.sleep(0.5)
        produce_raw(primary, late, _burst(2))
        synced(3 * BURST)()

        def cleaned():
            held = [r.offset() for r in consume_all(m["dr"], remote, timeout=20)]
            return not [o for o in held if o < 2 * BURST - KEYS] and held
        wait_until(cleaned, 60, interval=1.0, what=f"the mirror's cleaner to remove the first bursts of {remote}")

        def compared():
            engine.round()
            snap = engine.snapshot()
            return snap["unchecked_records"] == 0 and snap["pending_windows"] == 0 and snap
        snap = wait_until(compared, 60, interval=0.5, what="every synced record of the topic compared",
                          details=lambda: f"{engine.snapshot()}")
    finally:
        engine.readers.close()
    c = snap["counts"]
    assert (c["missing"], c["mismatched"], c["unverifiable"]) == (0, 0, 0), snap["findings"]
    # what both sides still hold was compared: at least the newest of every key
    assert c["verified"] >= KEYS, c
    assert snap["coverage"]["loss"] >= 0.99, snap["coverage"]


def test_a_compacted_transactional_topic_cleaned_on_the_source_after_the_copy_audits_clean(mm2_flow, tmp_path):
    """MM2 copied the aborted records (read_uncommitted); the source's cleaner then drops them and
    the older values of every key, and the mirror's cleaner runs on its own schedule: none of
    that is missing, altered or foreign."""
    m = mm2_flow
    ctxn, primary = m["ctxn"], m["primary"]
    remote = f"{m['p']}.{ctxn}"
    engine = _engine(m, [ctxn], tmp_path / "ctxn.json")
    aborted = {b"tx1-%d" % i for i in range(20)} | {b"tx4-%d" % i for i in range(20)}
    try:
        wait_until(lambda: aborted <= {r.value() for r in consume_all(m["dr"], remote, timeout=20)}, 120,
                   interval=1.0, what=f"MM2's copy of {ctxn}, aborted records included")
        # newer values of every key roll the source's segment (segment.ms 500): its cleaner follows
        rolls = iter(range(1000))

        def cleaned():
            time.sleep(0.6)
            n = next(rolls)
            produce_raw(primary, ctxn, [{"key": b"t%d" % i, "value": b"roll%d-%d" % (n, i), "partition": 0}
                                        for i in range(20)])
            held = {r.value() for r in consume_all(primary, ctxn, timeout=20,
                                                   **{"isolation.level": "read_uncommitted"})}
            return not (aborted & held)
        wait_until(cleaned, 90, interval=0.5, what=f"the source's cleaner to drop the aborted records of {ctxn}")
        # the mirror topic, created with the source's configs, is compacted on its own schedule too
        end = _end_offset(primary, ctxn)

        def compared():
            engine.round()
            snap = engine.snapshot()
            # past the last roll's records: MM2 syncs every 10 records here
            return (snap["positions"].get(f"{ctxn}/0", -1) >= end - 12 and snap["unchecked_records"] == 0
                    and snap["pending_windows"] == 0 and snap)
        snap = wait_until(compared, 120, interval=1.0, what=f"every synced record of {ctxn} up to {end} compared",
                          details=lambda: f"{engine.snapshot()}")
    finally:
        engine.readers.close()
    c = snap["counts"]
    assert (c["missing"], c["mismatched"], c["unverifiable"]) == (0, 0, 0), snap["findings"]
    assert c["verified"] >= 20, c  # at least the newest of every key
    assert snap["coverage"]["loss"] >= 0.99, snap["coverage"]
