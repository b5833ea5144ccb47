"""The audit engine's decisions over logs held in memory: compaction on each side's own schedule.

The reads are a fake (the logic under test is the engine's: which ranges it compares and what
it concludes); the copier below writes offset-syncs by MM2's rules (a sync at a lifetime's first
record, at a skipped source offset, and every ``lag`` records), so the windows and stretches are
the ones a real MM2 leaves. The real brokers and the real MM2 do the same in
tests/integration/test_audit_mm2.py.
"""

from __future__ import annotations

import random

from monitor.audit.digest import CREATE_TIME, seen
from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.reader import Read
from sparkmirror.model.records import OffsetSync


class Log:
    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, bytes, int]] = {}
        self.end = 0

    def append(self, key: bytes, value: bytes, ts: int) -> int:
        self.records[self.end] = (key, value, ts)
        self.end += 1
        return self.end - 1

    def clean(self, upto: int) -> None:
        """The cleaner over [0, upto): a record goes when a newer one of its key lies below ``upto``."""
        newest = {}
        for o in sorted(o for o in self.records if o < upto):
            newest[self.records[o][0]] = o
        for o in [o for o in self.records if o < upto and newest[self.records[o][0]] != o]:
            del self.records[o]


class Reader:
    def __init__(self, logs: dict[str, Log], syncs: list[OffsetSync], compacted: set[str]) -> None:
        self.logs, self.syncs, self.compacted_topics = logs, syncs, compacted
        self.batches: list[int] = []  # the stretches of each read_many

    def read(self, topic, partition, lo, hi, bulk=False):
        log = self.logs[topic]
        recs = [seen(o, *log.records[o][:2], None, CREATE_TIME, log.records[o][2])
                for o in sorted(log.records) if lo <= o < min(hi, log.end)]
        return Read(recs, sum(r.size for r in recs), lo, max(lo, min(hi, log.end)))

    def read_many(self, ranges):
        self.batches.append(len(ranges))
        return [self.read(t, p, lo, hi, bulk=True) for t, p, lo, hi in ranges]

    def log_starts(self, keys):
        return {k: 0 for k in keys}

    def compacted(self, topics):
        return {t: t in self.compacted_topics for t in topics}

    def read_syncs(self, topic, positions):
        seen_up_to = positions.get(0, 0)
        return self.syncs[seen_up_to:], {0: len(self.syncs)}, 0

    def close(self):
        pass


class MM2:
    """Copies source records in order from an offset, with MM2's offset-sync rules, in lifetimes."""

    def __init__(self, source: Log, target: Log, syncs: list, lag: int = 10) -> None:
        self.source, self.target, self.syncs, self.lag = source, target, syncs, lag
        self.lifetime(0)

    def lifetime(self, start: int) -> None:
        self.position, self.previous, self.last_sync_d = start, None, None

    def copy(self, upto: int) -> None:
        for u in sorted(o for o in self.source.records if self.position <= o < upto):
            d = self.target.append(*self.source.records[u])
            if (self.last_sync_d is None or u - self.previous != 1 or d - (self.last_sync_d + 1) >= self.lag):
                self.syncs.append(OffsetSync("t", 0, u, d))
                self.last_sync_d = d
            self.previous = u
        self.position = max(self.position, upto)


def _produce(log: Log, n: int, keys: int, rnd: random.Random) -> None:
    for _ in range(n):
        i = log.end
        log.append(b"k%d" % rnd.randrange(keys), b"v%d" % i, 1_000_000 + i)


def test_a_compacted_copy_with_a_replay_cleaned_at_other_times_on_each_side_audits_clean():
    for seed in range(20):
        rnd = random.Random(seed)
        source, target, syncs = Log(), Log(), []
        logs = {"t": source, "src.t": target}
        reader = Reader(logs, syncs, {"t"})
        flow = AuditFlow("src->dst", "src", "dst", "src", "mm2-offset-syncs.dst.internal", lambda t: f"src.{t}",
                         "read_uncommitted", False)
        engine = AuditEngine(flow, Readers(reader, reader, reader), AuditSettings(budget=None, chunk=37))
        mm2 = MM2(source, target, syncs)
        _produce(source, 300, 20, rnd)
        mm2.copy(300)
        engine.round(content=False)
        source.clean(rnd.randrange(100, 300))          # the source's cleaner, before the next copy
        _produce(source, 300, 20, rnd)
        committed = rnd.randrange(300, 450)
        mm2.copy(rnd.randrange(committed, 600))       # killed here: started again from its committed offset
        mm2.lifetime(committed)
        mm2.copy(600)
        engine.round(content=False)
        target.clean(rnd.randrange(200, target.end))  # the target's cleaner, at its own point
        source.clean(rnd.randrange(300, 600))
        _produce(source, 50, 20, rnd)
        mm2.copy(650)
        for _ in range(3):
            engine.round()
        snap = engine.snapshot()
        c = snap["counts"]
        assert (c["missing"], c["mismatched"]) == (0, 0), (seed, snap["findings"][:5])
        assert snap["unchecked_records"] == 0 and snap["pending_windows"] <= 1, (seed, snap)
        assert c["verified"] > 0


def test_a_value_altered_on_a_compacted_copy_is_found_where_both_sides_hold_it():
    rnd = random.Random(7)
    source, target, syncs = Log(), Log(), []
    reader = Reader({"t": source, "src.t": target}, syncs, {"t"})
    flow = AuditFlow("src->dst", "src", "dst", "src", "syncs", lambda t: f"src.{t}", "read_uncommitted", False)
    engine = AuditEngine(flow, Readers(reader, reader, reader), AuditSettings(budget=None, chunk=50))
    mm2 = MM2(source, target, syncs)
    _produce(source, 200, 20, rnd)
    mm2.copy(200)
    key, _, ts = target.records[190]
    target.records[190] = (key, b"altered", ts)
    _produce(source, 20, 20, rnd)
    mm2.copy(220)
    target.clean(150)
    for _ in range(2):
        engine.round()
    found = [(f["kind"], f["source_offset"], f["target_offset"]) for f in engine.snapshot()["findings"]]
    assert found == [("mismatched", 190, 190)]


def test_flows_reading_the_same_clusters_share_each_clusters_budget():
    """a->b and b->a: cluster a is one flow's source and the other's target. With the buckets
    of ``cluster_budgets`` the first flow's content reads use up both clusters' budgets, and the
    second flow waits; with buckets of its own, each flow would read a budget's worth."""
    from monitor.audit.budget import cluster_budgets

    now = [0.0]
    rnd = random.Random(3)

    def flow_over(src: str, dst: str, topic: str):
        source, target, syncs = Log(), Log(), []
        reader = Reader({topic: source, f"{src}.{topic}": target}, syncs, set())
        flow = AuditFlow(f"{src}->{dst}", src, dst, src, "syncs", lambda t: f"{src}.{t}", "read_committed", False)
        mm2 = MM2(source, target, syncs)
        _produce(source, 400, 400, rnd)
        mm2.copy(400)
        return flow, Readers(reader, reader, reader)

    def engines(budgets):
        return [AuditEngine(flow, readers, AuditSettings(budget=200, chunk=20), clock=lambda: now[0],
                            budgets=budgets) for flow, readers in (flow_over("a", "b", "t"), flow_over("b", "a", "t"))]

    shared = cluster_budgets(["a", "b", "b", "a"], 200, clock=lambda: now[0])
    assert sorted(shared) == ["a", "b"]
    first, second = engines(shared)
    first.round()
    second.round()
    assert first.snapshot()["counts"]["verified"] > 0
    assert second.snapshot()["counts"]["verified"] == 0  # both of its clusters' buckets are spent
    # each flow's read_bytes are its own reads; a cluster's bucket counts both flows'
    assert first.snapshot()["read_bytes"]["source"] > 0
    for cluster, (a_side, b_side) in {"a": ("source", "target"), "b": ("target", "source")}.items():
        assert shared[cluster].spent == first.budgets[a_side].spent + second.budgets[b_side].spent
    now[0] += 60.0  # the buckets refill (to their 2-s capacity): the second flow's turn comes
    second.round()
    assert second.snapshot()["counts"]["verified"] > 0

    alone = engines(None)  # buckets of their own: both flows read at once
    for e in alone:
        e.round()
    assert all(e.snapshot()["counts"]["verified"] > 0 for e in alone)


def test_the_monitors_audit_gives_each_cluster_one_bucket_for_all_its_flows(tmp_path):
    from monitor.audit.component import AuditComponent
    from monitor.audit.options import AuditOptions
    from sparkmirror.configfile import load_config

    path = tmp_path / "mm2.properties"
    path.write_text("clusters = a, b, c\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:1\n"
                    "c.bootstrap.servers = 127.0.0.1:1\na->b.enabled = true\nb->a.enabled = true\n"
                    "a->c.enabled = true\n")
    consumers = {c: {"bootstrap.servers": "127.0.0.1:1"} for c in "abc"}
    component = AuditComponent(load_config(path), AuditOptions(budget=1000), consumers, timeout=1)
    try:
        by = {e.flow.name: {side: share.bucket for side, share in e.budgets.items()} for e in component.engines}
        assert set(by) == {"a->b", "b->a", "a->c"}
        assert by["a->b"]["source"] is by["b->a"]["target"] is by["a->c"]["source"]  # cluster a
        assert by["a->b"]["target"] is by["b->a"]["source"] is not by["a->c"]["target"]
        assert by["a->c"]["target"].rate == 1000
    finally:
        component.close(1)


def test_small_stretches_of_many_partitions_are_read_together_and_a_change_in_one_is_named():
    from monitor.audit import content

    logs, syncs = {}, []
    for i in range(300):
        source, target = Log(), Log()
        for o in range(10):
            for log in (source, target):
                log.append(b"k%d" % o, b"v%d-%d" % (i, o), 1_000_000 + o)
        logs[f"t{i}"], logs[f"src.t{i}"] = source, target
        syncs += [OffsetSync(f"t{i}", 0, 0, 0), OffsetSync(f"t{i}", 0, 9, 9)]
    key, _, ts = logs["src.t137"].records[4]
    logs["src.t137"].records[4] = (key, b"altered", ts)
    reader = Reader(logs, syncs, set())
    flow = AuditFlow("src->dst", "src", "dst", "src", "syncs", lambda t: f"src.{t}", "read_committed", False)
    engine = AuditEngine(flow, Readers(reader, reader, reader), AuditSettings(budget=None))
    engine.round()
    snap = engine.snapshot()
    assert snap["counts"]["verified"] == 300 * 9 - 1 and snap["counts"]["mismatched"] == 1
    assert [(f["topic"], f["source_offset"], f["target_offset"]) for f in snap["findings"]] == [("t137", 4, 4)]
    # one read_many per side per batch: a few batches, not a read per partition
    batches = reader.batches[::2]
    assert sum(batches) == 300 and len(batches) <= 4 and max(batches) <= content.BATCH_PARTITIONS


def _mirrored_topics(topics: int, synced: int):
    """``topics`` one-partition topics of ``synced`` + 1 records of 1 KB, mirrored alike, with
    syncs at 0 and ``synced``: one stretch of ``synced`` records each. Returns (reader, engine)."""
    logs, syncs = {}, []
    for i in range(topics):
        source, target = Log(), Log()
        for o in range(synced + 1):
            for log in (source, target):
                log.append(b"k", b"x" * 1000, 1_000_000 + o)
        logs[f"t{i}"], logs[f"src.t{i}"] = source, target
        syncs += [OffsetSync(f"t{i}", 0, 0, 0), OffsetSync(f"t{i}", 0, synced, synced)]
    reader = Reader(logs, syncs, set())
    flow = AuditFlow("src->dst", "src", "dst", "src", "syncs", lambda t: f"src.{t}", "read_committed", False)
    return reader, AuditEngine(flow, Readers(reader, reader, reader), AuditSettings(budget=None))


def test_a_batch_of_large_stretches_stays_near_its_byte_size():
    from monitor.audit import reader as reader_module

    reader, engine = _mirrored_topics(20, 100)
    engine.round()
    assert engine.snapshot()["counts"]["verified"] == 20 * 100
    per_batch = reader_module.BATCH_BYTES // (100 * 1000)  # stretches of ~100 KB each
    assert max(reader.batches) <= per_batch + 1 and sum(reader.batches) == 2 * 20


def test_at_thousands_of_partitions_a_round_asks_a_share_of_the_log_starts_and_each_within_30_s():
    from monitor.audit import engine as engine_module

    logs, syncs = {}, []
    for i in range(3000):
        logs[f"t{i}"], logs[f"src.t{i}"] = Log(), Log()
        syncs.append(OffsetSync(f"t{i}", 0, 0, 0))
    asked: list[list] = []

    class Counting(Reader):
        def log_starts(self, keys):
            asked.append(list(keys))
            return super().log_starts(keys)

    reader = Counting(logs, syncs, set())
    now = [1000.0]
    flow = AuditFlow("src->dst", "src", "dst", "src", "syncs", lambda t: f"src.{t}", "read_committed", False)
    engine = AuditEngine(flow, Readers(reader, reader, reader), AuditSettings(budget=None), clock=lambda: now[0])
    engine.round()  # the books open (both sides asked) and the first round asks for every partition
    assert [len(a) for a in asked[-2:]] == [3000, 3000]
    del asked[:]
    source_side = set()
    for _ in range(int(engine_module.LOG_START_REFRESH_S // 5)):
        now[0] += 5.0
        engine.round()
        assert len(asked[-2]) == len(asked[-1]) == 3000 * 5 // engine_module.LOG_START_REFRESH_S
        source_side.update(asked[-2])
    assert len(source_side) == 3000  # every partition within the refresh time


def test_a_stretch_that_fills_a_fetch_by_itself_is_read_alone():
    reader, engine = _mirrored_topics(4, 400)
    engine.round()
    assert engine.snapshot()["counts"]["verified"] == 4 * 400 and set(reader.batches) == {1}


def test_a_replay_from_below_the_sync_before_it_counts_every_record_copied_twice():
    """Records [1409, 1416) written twice, with an offset-lag sync at 1414 between the first copy's
    start and the replay: all 7 are duplicates from source offset 1409, not the 2 the window holds."""
    source, target = Log(), Log()
    for o in range(1600):
        source.append(b"k%d" % o, b"v%d" % o, 1_000_000 + o)
    for o in list(range(1416)) + list(range(1409, 1600)):
        target.append(*source.records[o])
    syncs = [OffsetSync("t", 0, 0, 0), OffsetSync("t", 0, 1414, 1414), OffsetSync("t", 0, 1409, 1416),
             OffsetSync("t", 0, 1599, 1606)]
    reader = Reader({"t": source, "src.t": target}, syncs, set())
    flow = AuditFlow("src->dst", "src", "dst", "src", "syncs", lambda t: f"src.{t}", "read_committed", False)
    engine = AuditEngine(flow, Readers(reader, reader, reader), AuditSettings(budget=None))
    engine.round()
    snap = engine.snapshot()
    assert [(f["kind"], f["source_offset"], f["target_offset"], f["count"]) for f in snap["findings"]] == \
        [("duplicated", 1409, 1416, 7)]
    assert (snap["counts"]["missing"], snap["counts"]["mismatched"], snap["counts"]["duplicated"]) == (0, 0, 7)
