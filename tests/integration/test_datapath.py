"""The data path against real brokers and real Spark, verified record by record.

One replicator run (module fixture) serves several checks: a randomized workload
over topics of 1, 5 and 12 partitions (keys, null keys, tombstones, repeated
headers, sizes up to 1 MB, timestamps from 2014), a transactional topic with
aborted transactions, a compacted topic with offset gaps, the offset-syncs, a new
topic and a partition increase while running, and a clean SIGTERM.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, ResourceType

from sparkmirror.model.records import OffsetSync
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BIG = 4 * 1024 * 1024


def _record(rng: random.Random, i: int, partitions: int) -> dict:
    size = rng.choice([0, 1, 10, 100, 1000, 10_000, 100_000] * 20 + [1_000_000])
    key = None if rng.random() < 0.2 else f"key-{rng.randint(0, 50)}".encode()
    value = None if rng.random() < 0.1 else (f"v{i}:".encode() + rng.randbytes(size))
    headers = None
    if rng.random() < 0.5:
        headers = [("trace", f"t{i}".encode()), ("dup", b"1"), ("dup", b"2"), ("empty", b"")]
    old = rng.random() < 0.3
    ts = 1_400_000_000_000 + i if old else int(time.time() * 1000) - rng.randint(0, 60_000)
    return {"key": key, "value": value, "headers": headers, "timestamp": ts, "partition": rng.randrange(partitions)}


def _identity(msg) -> tuple:
    return (msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])


def _by_partition(msgs) -> dict[int, list]:
    out: dict[int, list] = {}
    for m in msgs:
        out.setdefault(m.partition(), []).append(m)
    return {p: sorted(ms, key=lambda m: m.offset()) for p, ms in out.items()}


def _wait_mirrored(bootstrap: str, topic: str, expected: int, timeout: float = 240):
    got: list = []

    def mirrored():
        got[:] = consume_all(bootstrap, topic, expected=expected, timeout=10, **{"fetch.message.max.bytes": BIG})
        return len(got) >= expected and list(got)

    return wait_until(mirrored, timeout, interval=2, what=f"{expected} records mirrored to {topic}",
                      ignoring=Exception, details=lambda: f"{topic}: {len(got)} of {expected} records mirrored")


def _assert_identical(source_msgs, target_msgs, topic: str):
    src, dst = _by_partition(source_msgs), _by_partition(target_msgs)
    assert set(dst) <= set(src), f"{topic}: records in partitions that have none on the source"
    for p, records in src.items():
        assert [_identity(m) for m in dst.get(p, [])] == [_identity(m) for m in records], f"{topic} partition {p} differs"


@pytest.fixture(scope="module")
def replication(kafka_clusters, tmp_path_factory):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = f"{random.randrange(16**6):06x}"
    rng = random.Random(u)
    work = tmp_path_factory.mktemp("datapath")
    topics = {f"fid-a-{u}": 1, f"fid-b-{u}": 5, f"fid-c-{u}": 12}
    for t, n in topics.items():
        # retention.ms=-1: records stamped 2014 must not be deleted by time retention
        # (and the setting must be copied to the mirror topic, or they vanish there).
        create_topic(primary, t, n, config={"retention.ms": "-1"})
    AdminClient({"bootstrap.servers": primary}).incremental_alter_configs  # noqa: B018 (API present)
    sent = {}
    for t, n in topics.items():
        recs = [_record(rng, i, n) for i in range(400 if n > 1 else 150)]
        produce(primary, t, recs, **{"message.max.bytes": BIG})
        sent[t] = len(recs)

    # Transactions: committed and aborted batches interleaved.
    txn = f"txn-{u}"
    create_topic(primary, txn, 3)
    tp = Producer({"bootstrap.servers": primary, "transactional.id": f"tx-{u}"})
    tp.init_transactions(30)
    committed = 0
    for round_ in range(6):
        tp.begin_transaction()
        for i in range(25):
            tp.produce(txn, key=f"r{round_}".encode(), value=f"{round_}-{i}".encode(), partition=i % 3)
        if round_ % 2:
            assert tp.flush(30) == 0  # an abort racing AddPartitionsToTxn: confluentinc/librdkafka#4849
            tp.abort_transaction(30)
        else:
            tp.commit_transaction(30)
            committed += 25

    # Compaction: many updates of few keys, segments rolled so the cleaner runs.
    compact = f"compact-{u}"
    create_topic(primary, compact, 1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.001",
        "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})
    for burst in range(8):
        # the last burst updates only half the keys, so survivors of earlier bursts
        # sit between removed records: gaps inside the log, not only at its start
        keys = 5 if burst == 7 else 10
        produce(primary, compact, [{"key": f"k{i % keys}".encode(), "value": f"b{burst}-{i}".encode()} for i in range(30)])
        time.sleep(0.3)
    def compacted() -> bool:
        offsets = [m.offset() for m in consume_all(primary, compact)]
        if any(b != a + 1 for a, b in zip(offsets, offsets[1:])):
            return True
        produce(primary, compact, [{"key": b"roll", "value": b"x"}])  # rolls the active segment
        return False

    wait_until(compacted, 90, interval=1, what="the log cleaner to compact the test topic (gaps in its offsets)")

    config = write_config(work / "mm2.properties", primary, dr, {
        "primary->dr.topics": f".*-{u}", "offset.lag.max": "10",
        "dr.producer.message.max.bytes": str(BIG)})
    # checkpoints every 5 s, so that the batch metrics show a committed batch within the test's
    # time; the default minute is run by test_clean_stop, test_json_logs and test_alerting_e2e
    rep = Replicator(config, work / "checkpoints", work / "replicator.log",
                     extra_args=["--real-time-checkpoint-interval", "5"]).start()
    try:
        yield {"u": u, "primary": primary, "dr": dr, "topics": topics, "sent": sent, "txn": txn,
               "committed": committed, "compact": compact, "rep": rep, "work": work}
    finally:
        if rep.running():
            rep.terminate()


def test_every_record_arrives_identical(replication):
    r = replication
    for t, n in r["topics"].items():
        source = consume_all(r["primary"], t, **{"fetch.message.max.bytes": BIG})
        assert len(source) == r["sent"][t]
        target = _wait_mirrored(r["dr"], f"primary.{t}", len(source))
        assert len(target) == len(source)
        _assert_identical(source, target, t)
        md = AdminClient({"bootstrap.servers": r["dr"]}).list_topics(f"primary.{t}", timeout=10)
        assert len(md.topics[f"primary.{t}"].partitions) == n


def test_mirror_topics_get_source_configs(replication):
    r = replication
    t = next(iter(r["topics"]))
    _wait_mirrored(r["dr"], f"primary.{t}", 1)
    admin = AdminClient({"bootstrap.servers": r["dr"]})
    res = ConfigResource(ResourceType.TOPIC, f"primary.{t}")
    entries = admin.describe_configs([res])[res].result(30)
    assert entries["retention.ms"].value == "-1"


def test_aborted_transactions_never_reach_the_target(replication):
    r = replication
    target = _wait_mirrored(r["dr"], f"primary.{r['txn']}", r["committed"])
    time.sleep(3)  # anything aborted would have arrived by now
    target = consume_all(r["dr"], f"primary.{r['txn']}")
    values = sorted(m.value().decode() for m in target)
    assert len(values) == r["committed"]
    assert all(int(v.split("-")[0]) % 2 == 0 for v in values)
    _assert_identical(consume_all(r["primary"], r["txn"], **{"isolation.level": "read_committed"}), target, r["txn"])


def test_compacted_topic_replicates_with_gaps(replication):
    r = replication
    source = consume_all(r["primary"], r["compact"])
    target = _wait_mirrored(r["dr"], f"primary.{r['compact']}", len(source))
    _assert_identical(source, target, r["compact"])
    # The mirror is dense: its offsets are 0..n-1 although the source has gaps.
    assert [m.offset() for m in target] == list(range(len(target)))


def _syncs(r) -> list[OffsetSync]:
    recs = consume_all(r["primary"], "mm2-offset-syncs.dr.internal")
    return [OffsetSync.decode(m.key(), m.value()) for m in recs]


def test_offset_syncs_point_at_the_same_record(replication):
    r = replication
    checked = 0
    for t in [*r["topics"], r["compact"], r["txn"]]:
        source = {(m.partition(), m.offset()): m for m in consume_all(r["primary"], t, **{"fetch.message.max.bytes": BIG})}
        _wait_mirrored(r["dr"], f"primary.{t}", 1)
        # The driver sends a batch's offset-syncs after its records are on the target: wait for
        # them, then read the target (it holds every record a sync read so far points at).
        syncs = wait_until(lambda: [s for s in _syncs(r) if s.topic == t], 60, interval=1,
                           what=f"offset-syncs for {t}")
        target = {(m.partition(), m.offset()): m
                  for m in consume_all(r["dr"], f"primary.{t}", **{"fetch.message.max.bytes": BIG})}
        for s in syncs:
            src, dst = source[(s.partition, s.upstream_offset)], target[(s.partition, s.downstream_offset)]
            assert _identity(src) == _identity(dst), f"sync {s} maps different records"
            checked += 1
        # MM2's rule: the first record of every partition is synced, and so is every
        # upstream gap (compaction, transaction markers).
        for p in {p for p, _ in source}:
            first = min(o for q, o in source if q == p)
            assert any(s.partition == p and s.upstream_offset == first for s in syncs), f"{t}-{p}: first record not synced"
    assert checked > 50


def test_gaps_and_lag_max_trigger_syncs(replication):
    r = replication
    source_offsets = [m.offset() for m in consume_all(r["primary"], r["compact"])]
    _wait_mirrored(r["dr"], f"primary.{r['compact']}", len(source_offsets))
    synced = {s.upstream_offset for s in _syncs(r) if s.topic == r["compact"]}
    after_gap = [b for a, b in zip(source_offsets, source_offsets[1:]) if b != a + 1]
    assert after_gap and set(after_gap) <= synced
    # transaction markers and aborted records are gaps too
    txn = consume_all(r["primary"], r["txn"], **{"isolation.level": "read_committed"})
    _wait_mirrored(r["dr"], f"primary.{r['txn']}", len(txn))
    txn_synced = {(s.partition, s.upstream_offset) for s in _syncs(r) if s.topic == r["txn"]}
    for p, msgs in _by_partition(txn).items():
        offs = [m.offset() for m in msgs]
        gaps = [(p, b) for a, b in zip(offs, offs[1:]) if b != a + 1]
        assert gaps and set(gaps) <= txn_synced
    # offset.lag.max = 10: no two consecutive syncs of a contiguous 400-record topic are
    # more than 11 downstream offsets apart.
    big = max(r["topics"], key=lambda t: 0 if r["topics"][t] != 1 else 1)
    syncs = sorted(s.downstream_offset for s in _syncs(r) if s.topic == big and s.partition == 0)
    assert max(b - a for a, b in zip(syncs, syncs[1:])) <= 11


def test_new_topic_and_new_partitions_while_running(replication):
    r = replication
    a = next(t for t, n in r["topics"].items() if n == 1)
    _wait_mirrored(r["dr"], f"primary.{a}", r["sent"][a])
    admin = AdminClient({"bootstrap.servers": r["primary"]})
    admin.create_partitions([NewPartitions(a, 3)])[a].result(30)
    new = f"late-{r['u']}"
    create_topic(r["primary"], new, 4)
    produce(r["primary"], new, [{"key": b"k%d" % i, "value": b"late%d" % i, "partition": i % 4} for i in range(40)])
    produce(r["primary"], a, [{"key": b"n%d" % i, "value": b"grown%d" % i, "partition": 1 + i % 2} for i in range(20)])
    target_new = _wait_mirrored(r["dr"], f"primary.{new}", 40, timeout=120)
    _assert_identical(consume_all(r["primary"], new), target_new, new)
    target_a = _wait_mirrored(r["dr"], f"primary.{a}", r["sent"][a] + 20, timeout=120)
    _assert_identical(consume_all(r["primary"], a, **{"fetch.message.max.bytes": BIG}), target_a, a)
    md = AdminClient({"bootstrap.servers": r["dr"]}).list_topics(timeout=10).topics
    assert len(md[f"primary.{a}"].partitions) == 3
    assert len(md[f"primary.{new}"].partitions) == 4
    log = r["rep"].log()
    assert f"created primary.{new} on dr" in log and f"grew primary.{a} on dr to 3 partitions" in log


def test_the_driver_jvm_maps_its_classes_from_the_class_data_archive(replication):
    """`./run test` builds the archive (`sparkmirror dev fetch`); the replicator's Spark JVM has it
    mapped (its memory maps name the file), which is what makes its start-up ~3 s shorter."""
    from replicator.datapath import cds

    archive = cds.archive_path()
    assert archive.is_file(), "sparkmirror dev fetch built no class-data archive"
    rep = replication["rep"]
    # Logged as the JVM is launched. Run alone, this test comes before Spark's launcher has
    # handed over to the driver JVM (the launcher is a JVM of its own, without the archive).
    rep.wait_for_log(f"classes mapped from the class-data archive {archive}")
    jvms: list[int] = []

    def mapped() -> bool:
        jvms[:] = [pid for pid in _descendants(rep.proc.pid) if _exe(pid) == "java"]
        return any(str(archive) in _maps(pid) for pid in jvms)

    wait_until(mapped, 60, interval=0.5, what=f"a JVM of the replicator mapping {archive}",
               details=lambda: f"JVMs: {jvms}")
    assert len(jvms) == 1, jvms


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def _exe(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/exe").resolve(strict=True).name
    except OSError:  # gone meanwhile (Spark's launcher scripts start short-lived children)
        return None


def _descendants(pid: int) -> list[int]:
    children = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        return []
    return [d for c in children for d in (c, *_descendants(c))]


def test_progress_lines_and_sigterm(replication):
    r = replication
    rep = r["rep"]
    rep.wait_for_log("records/s", timeout=60)
    # the same figures, for Prometheus and the monitor, on the driver, once the first batch committed
    flow = 'flow="primary->dr"'
    deadline = time.monotonic() + 120
    while True:
        text = rep.metrics_text()
        samples = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
                   if line.startswith("sparkmirror_replicator_") and " " in line}
        if samples.get(f"sparkmirror_replicator_batches_total{{{flow}}}", 0) >= 1 \
                and samples[f"sparkmirror_replicator_records_total{{{flow}}}"] >= sum(r["sent"].values()) \
                or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert samples[f"sparkmirror_replicator_records_total{{{flow}}}"] >= sum(r["sent"].values())
    assert samples[f"sparkmirror_replicator_batches_total{{{flow}}}"] >= 1
    assert samples[f"sparkmirror_replicator_batch_duration_seconds_count{{{flow}}}"] >= 1
    assert samples[f"sparkmirror_replicator_partitions{{{flow}}}"] >= 1 + 5 + 12
    # heartbeats written on primary (by the dr->primary pair) are what primary->dr carries: the
    # series has the monitor's flow label
    assert samples[f"sparkmirror_replicator_heartbeats_sent_total{{{flow}}}"] >= 1
    assert rep.terminate() == 0
    log = rep.log()
    assert "received SIGTERM" in log
    assert "summary: flow primary->dr:" in log
    assert "Traceback" not in log
