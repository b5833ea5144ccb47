"""The audit against a copy with faults, on the real brokers.

The tests' own copier (tests/support/faultycopier.py) copies a backlog and writes
MM2's offset-syncs as MM2 would, with one of each fault at random offsets: a record
dropped, a value byte changed, a header changed, two records swapped, a range written
twice, a range deleted from the source by deleteRecords before it was copied. The
continuous engine, at a budget scaled down with the backlog (2 minutes of it read a twelfth
of the backlog, as the default budget would of a ~750-MB one), names the faults the syncs
reveal in its first round; ``sparkmirror audit`` names all six with their exact source
offsets and nothing else; a restarted engine continues from its state file.
"""

from __future__ import annotations

import json
import os
import random
import time

import pytest

from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.reader import ClusterReader
from sparkmirror.configfile import load_config
from sparkmirror_cli import audit as audit_cli
from tests.support.faultycopier import FaultyCopier
from tests.support.kafka import create_topic
from tests.support.monitor import write_mm2_config

pytestmark = [pytest.mark.kafka]

PARTITIONS, PER_PARTITION, VALUE = 2, 6000, 1000
#: bytes per second per cluster for the engine here: the backlog (12 MB) is 12x what it reads in 2 minutes
BUDGET = 8 * 1024


def _produce(bootstrap, topic):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    # recent timestamps, a millisecond apart: older ones would fall to the brokers' retention mid-test
    first = int(time.time() * 1000) - PER_PARTITION
    for i in range(PER_PARTITION):
        for part in range(PARTITIONS):
            p.produce(topic, (b"%06d-%d-" % (i, part)).ljust(VALUE, b"x"), key=b"k%d" % i, partition=part,
                      headers=[("trace", b"t%d" % i)], timestamp=first + i)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)


@pytest.fixture(scope="module")
def faulty(kafka_clusters, tmp_path_factory):
    import uuid
    # the faults' offsets follow from u: AUDIT_SEED=<u> places them as in an earlier run
    u = os.environ.get("AUDIT_SEED") or uuid.uuid4().hex[:8]
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    src, tgt = f"a{u}", f"b{u}"
    topic = f"orders-{u}"
    remote = f"{src}.{topic}"
    syncs = f"mm2-offset-syncs.{tgt}.internal"
    create_topic(primary, topic, PARTITIONS)
    create_topic(dr, remote, PARTITIONS)
    create_topic(primary, syncs, 1, config={"cleanup.policy": "compact"})
    _produce(primary, topic)
    rnd = random.Random(u)
    # partition 1 loses [a, b) to deleteRecords first: its other faults lie above b
    a = rnd.randrange(200, 1500)
    b = a + rnd.randrange(5, 50)
    while True:  # faults apart from each other, each in windows of its own
        faults = {
            "drop": (0, rnd.randrange(100, PER_PARTITION - 100)),
            "header": (0, rnd.randrange(100, PER_PARTITION - 100)),
            "twice": (0, rnd.randrange(100, PER_PARTITION - 100), 7),
            "value": (1, rnd.randrange(b + 100, PER_PARTITION - 100)),
            "swap": (1, rnd.randrange(b + 100, PER_PARTITION - 100)),
        }
        apart = [sorted(f[1] for f in faults.values() if f[0] == part) for part in (0, 1)]
        if all(y - x >= 150 for offsets in apart for x, y in zip(offsets, offsets[1:])):
            break
    copier = FaultyCopier(primary, dr, topic, remote, PARTITIONS, syncs, drop=[faults["drop"]],
                          value=[faults["value"]], header=[faults["header"]], swap=[faults["swap"]],
                          twice=[faults["twice"]], delete_source=(1, a, b))
    copier.copy()
    path = write_mm2_config(tmp_path_factory.mktemp("audit") / "mm2.properties", {src: primary, tgt: dr},
                            [(src, tgt)], {f"{src}->{tgt}.topics": topic})
    return dict(path=path, src=src, tgt=tgt, topic=topic, faults=faults, deleted=(a, b), copier=copier,
                primary=primary, dr=dr)


def _expected(f):
    t = f["topic"]
    drop, header, twice = f["faults"]["drop"], f["faults"]["header"], f["faults"]["twice"]
    value, swap = f["faults"]["value"], f["faults"]["swap"]
    a, b = f["deleted"]
    return {("missing", t, 0, drop[1], 1), ("mismatched", t, 0, header[1], 1),
            ("duplicated", t, 0, twice[1], twice[2]), ("mismatched", t, 1, value[1], 1),
            ("expired", t, 1, a, b - a)}, (t, 1, swap[1])


def _engine(f, state_path, budget):
    config = load_config(f["path"])
    flow = AuditFlow.of(config, config.flow(f["src"], f["tgt"]))
    readers = Readers(ClusterReader(f["src"], {"bootstrap.servers": f["primary"]}, flow.source_isolation),
                      ClusterReader(f["tgt"], {"bootstrap.servers": f["dr"]}, "read_committed"),
                      ClusterReader(f["src"], {"bootstrap.servers": f["primary"]}, "read_committed"))
    return AuditEngine(flow, readers, AuditSettings(budget=budget, chunk=200, round_seconds=2.0,
                                                    state_path=state_path))


def _found(findings):
    return {(x["kind"], x["topic"], x["partition"], x["source_offset"], x["count"]) for x in findings}


def test_the_engine_names_what_the_syncs_reveal_in_its_first_round_within_the_budget(faulty, tmp_path):
    state = tmp_path / "audit-state.json"
    engine = _engine(faulty, state, BUDGET)
    try:
        engine.round()
        engine.round()  # the newest irregular windows are held for one round
        snap = engine.snapshot()
    finally:
        engine.readers.close()
    expected, (topic, part, swapped) = _expected(faulty)
    found = _found(snap["findings"])
    # the drop, the range written twice, the deleted range and the swap change the syncs' distances
    reveal = {e for e in expected if e[0] in ("missing", "duplicated", "expired")}
    assert reveal <= found, (reveal - found, found, faulty["faults"])
    assert any(x[0] == "mismatched" and x[2] == part and x[3] in (swapped, swapped + 1) for x in found), found
    # the budget is exercised: the content of most of the backlog is still to be read
    assert snap["unchecked_records"] > 0.8 * PARTITIONS * PER_PARTITION
    assert snap["read_bytes"]["source"] < 0.2 * PARTITIONS * PER_PARTITION * VALUE
    # and a restarted engine continues from the state file: nothing reported twice, nothing lost
    again = _engine(faulty, state, BUDGET)
    try:
        assert again.snapshot()["counts"] == snap["counts"]
        assert again.snapshot()["unchecked_records"] == snap["unchecked_records"]
        again.round()
        after = again.snapshot()
    finally:
        again.readers.close()
    assert after["counts"]["missing"] == snap["counts"]["missing"]
    assert after["counts"]["duplicated"] == snap["counts"]["duplicated"]
    assert after["counts"]["verified"] >= snap["counts"]["verified"]
    assert after["unchecked_records"] < snap["unchecked_records"]


def test_the_command_names_each_fault_at_its_exact_source_offset_and_nothing_else(faulty, capsys):
    code = audit_cli.main(["audit", str(faulty["path"]), "--flow", f"{faulty['src']}->{faulty['tgt']}", "--json"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    expected, (topic, part, swapped) = _expected(faulty)
    found = _found(report["findings"])
    swap_found = {x for x in found if x[0] == "mismatched" and x[2] == part and x[3] in (swapped, swapped + 1)}
    assert swap_found, report["findings"]
    assert found - swap_found == expected, report["findings"]
    assert code == 1
    total = PARTITIONS * PER_PARTITION
    a, b = faulty["deleted"]
    c = report["counts"]
    assert c["missing"] == 1 and c["duplicated"] == 7 and c["unverifiable"] == 0
    # every record still on the source was compared, apart from the faulty ones
    assert c["verified"] + c["missing"] + c["mismatched"] + c["expired"] >= total - (b - a) - 2


def test_the_command_reports_in_text_and_refuses_a_bad_flow(faulty, capsys):
    flow = f"{faulty['src']}->{faulty['tgt']}"
    assert audit_cli.main(["audit", str(faulty["path"]), "--flow", flow, "--from-offset",
                           str(PER_PARTITION - 50)]) == 0
    out, _ = capsys.readouterr()
    assert f"audit of {flow}" in out and "0 missing" in out and "findings:" not in out
    assert audit_cli.main(["audit", str(faulty["path"]), "--flow", f"{faulty['tgt']}->{faulty['src']}"]) == 2
    _, err = capsys.readouterr()
    assert "not enabled" in err and str(faulty["path"]) in err


def test_the_monitor_component_audits_continuously_and_a_restart_continues(faulty, tmp_path):
    """At the default budget, while the copier copies more (dropping one more record): the new drop
    is named at its offset, the metrics carry their exact names, and a component started again on
    the same state directory shows the same counts before its first round."""
    import asyncio

    from confluent_kafka import Producer

    from monitor.audit.component import COVERAGE, MISSING, VERIFIED, AuditComponent, summary
    from monitor.audit.options import AuditOptions

    config = load_config(faulty["path"])
    consumers = {faulty["src"]: {"bootstrap.servers": faulty["primary"]},
                 faulty["tgt"]: {"bootstrap.servers": faulty["dr"]}}
    options = AuditOptions(interval=0.5, state_dir=tmp_path)
    topic, copier = faulty["topic"], faulty["copier"]
    dropped = PER_PARTITION + 37
    copier.drop.add((0, dropped))

    async def audit_while_copying():
        component = AuditComponent(config, options, consumers)
        task = asyncio.create_task(component.run())
        try:
            p = Producer({"bootstrap.servers": faulty["primary"]})
            for i in range(100):
                p.produce(topic, b"late-%d" % i, key=b"late", partition=0)
            p.flush(30)
            await asyncio.to_thread(copier.copy)
            for _ in range(240):
                snap = component.snapshot()[f"{faulty['src']}->{faulty['tgt']}"]
                if any(f["kind"] == "missing" and f["source_offset"] == dropped for f in snap["findings"]):
                    return component, snap
                await asyncio.sleep(0.5)
            raise AssertionError(f"the drop at {dropped} was not named: {snap['findings']}")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    component, snap = asyncio.run(audit_while_copying())
    try:
        samples = {(name, tuple(sorted(labels.items()))): v for name, labels, v in component.samples()}
        flow = f"{faulty['src']}->{faulty['tgt']}"
        assert samples[(MISSING, (("flow", flow), ("topic", topic)))] == snap["topics"][topic]["missing"] >= 2
        assert samples[(VERIFIED, (("flow", flow), ("topic", topic)))] > 0
        assert samples[(COVERAGE, (("flow", flow), ("kind", "loss")))] >= 0.99
        assert "missing" in summary(snap) and "records in the last hour" in summary(snap)
        counts = component.snapshot()[flow]["counts"]
    finally:
        component.close()
    again = AuditComponent(config, options, consumers)
    try:
        assert again.snapshot()[flow]["counts"] == counts
    finally:
        again.close()


def test_a_batched_read_of_several_partitions_reads_them_again_the_next_time(kafka_clusters, unique):
    """The content checks read the stretches of several partitions at once (read_many), pausing
    each once its range is done; the same partitions must read whole in the next batch too."""
    from tests.support.kafka import produce

    primary = kafka_clusters.primary.bootstrap
    topic = f"many-{unique}"
    create_topic(primary, topic, 3)
    produce(primary, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 3} for i in range(90)])
    reader = ClusterReader("primary", {"bootstrap.servers": primary}, "read_committed")
    try:
        for lo, hi in ((0, 10), (10, 30), (25, 40)):  # the last runs past the log end (30 per partition)
            reads = reader.read_many([(topic, p, lo, hi) for p in range(3)])
            for r in reads:
                assert [s.offset for s in r.records] == list(range(lo, min(hi, 30))), (lo, hi, r)
                assert r.end == min(hi, 30)
    finally:
        reader.close()
