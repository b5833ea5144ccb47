"""Offset-sync emission (MM2's rule) and offset translation (never ahead, within offset.lag.max)."""

from __future__ import annotations

from bisect import bisect_left

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkmirror.errors import ConfigError
from sparkmirror.model.offsets import OffsetSyncEmitter, OffsetSyncStore, translate_offset
from sparkmirror.model.records import OffsetSync

T = "orders"


# --- reference models (tests only) -------------------------------------------------


class Mm2PartitionState:
    """MM2 4.x OffsetSyncWriter.PartitionState, transcribed line for line (with its -1 sentinels)."""

    def __init__(self, max_offset_lag: int) -> None:
        self.previous_upstream = -1
        self.previous_downstream = -1
        self.last_sync_downstream = -1
        self.max_offset_lag = max_offset_lag
        self.should_sync = False

    def update(self, upstream: int, downstream: int) -> bool:
        no_previous_sync = self.last_sync_downstream == -1
        too_stale = downstream - (self.last_sync_downstream + 1) >= self.max_offset_lag
        skipped_upstream = upstream - self.previous_upstream != 1
        truncated_downstream = downstream < self.previous_downstream
        if no_previous_sync or too_stale or skipped_upstream or truncated_downstream:
            self.last_sync_downstream = downstream
            self.should_sync = True
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        return self.should_sync

    def reset(self) -> None:
        self.should_sync = False


class Mm2StyleSyncStore:
    """MM2's OffsetSyncStore in miniature: 64 syncs per partition, exponentially spaced.

    updateSyncArray after the initial read-to-end: slot 0 is the newest sync, slot i
    is replaced only when the sync's upstream offset differs from it in bits >= i.
    """

    SLOTS = 64

    def __init__(self) -> None:
        self._syncs: dict[tuple[str, int], list[tuple[int, int]]] = {}

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        u, d = sync.upstream_offset, sync.downstream_offset
        syncs = self._syncs.get(key)
        if syncs is None or syncs[0][0] > u:
            self._syncs[key] = [(u, d)] * self.SLOTS
            return
        syncs[0] = (u, d)
        for i in range(1, self.SLOTS):
            mask = (((1 << 63) - 1) << i) & ((1 << 64) - 1)
            if (syncs[i][0] ^ u) & mask:
                syncs[i] = (u, d)
            else:
                break

    def translate(self, topic: str, partition: int, c: int) -> int | None:
        for u, d in self._syncs.get((topic, partition), []):
            if u <= c:
                return d if u == c else d + 1
        return None

    def memory_entries(self) -> int:
        return self.SLOTS * len(self._syncs)


def mm2_rule_over_all_syncs(syncs: list[OffsetSync], c: int) -> int | None:
    """MM2's translation with unlimited memory: the newest sync with U <= C."""
    best = None
    for s in syncs:
        if s.upstream_offset <= c:
            best = s
    return translate_offset(best, c)


# --- a replication run: records, syncs, truth --------------------------------------


class Replication:
    """One partition replicated record by record, its syncs, and the true offsets."""

    def __init__(self, offset_lag_max: int) -> None:
        self.emitter = OffsetSyncEmitter(offset_lag_max)
        self.ups: list[int] = []
        self.downs: list[int] = []
        self.syncs: list[OffsetSync] = []

    def write(self, u: int, d: int, *, drop_immediate: bool = False) -> None:
        self.ups.append(u)
        self.downs.append(d)
        sync = self.emitter.record(T, 0, u, d)
        if sync is not None and not drop_immediate:
            self.syncs.append(sync)

    def flush(self) -> None:
        self.syncs.extend(self.emitter.take_pending())

    def truth(self, c: int) -> int:
        """Where a consumer committed at upstream C must resume downstream to miss nothing."""
        i = bisect_left(self.ups, c)
        return self.downs[i] if i < len(self.ups) else self.downs[-1] + 1

    def rereads(self, translated: int, c: int) -> int:
        """Records a consumer resuming at ``translated`` reads again before reaching truth(C)."""
        return bisect_left(self.downs, self.truth(c)) - bisect_left(self.downs, translated)


def stream(draw_steps, u0: int, d0: int) -> list[tuple[int, int]]:
    records, u, d = [], u0, d0
    for up_gap, down_gap in draw_steps:
        records.append((u, d))
        u += 1 + up_gap
        d += 1 + down_gap
    return records


mostly_zero = st.one_of(st.just(0), st.just(0), st.just(0), st.integers(1, 40))
rarely_nonzero = st.one_of(st.just(0), st.just(0), st.just(0), st.just(0), st.integers(1, 5))


# --- translate_offset ------------------------------------------------------------


def test_translate_offset_is_mm2s_single_sync_rule():
    sync = OffsetSync(T, 0, 100, 40)
    assert translate_offset(sync, 100) == 40
    assert translate_offset(sync, 101) == 41
    assert translate_offset(sync, 5000) == 41
    assert translate_offset(sync, 99) is None
    assert translate_offset(None, 100) is None


# --- OffsetSyncEmitter ---------------------------------------------------------------


def test_emitter_rules():
    e = OffsetSyncEmitter(3)
    assert e.record(T, 0, 10, 0) == OffsetSync(T, 0, 10, 0)  # first
    assert e.record(T, 0, 11, 1) is None
    assert e.record(T, 0, 12, 2) is None
    assert e.record(T, 0, 13, 3) is None  # 3 - (0 + 1) = 2 < 3
    assert e.pending() == [OffsetSync(T, 0, 13, 3)]
    assert e.record(T, 0, 14, 4) == OffsetSync(T, 0, 14, 4)  # 4 - 1 >= 3
    assert e.pending() == []  # an immediate sync supersedes the pending one
    assert e.record(T, 0, 15, 5) is None
    assert e.record(T, 0, 17, 6) == OffsetSync(T, 0, 17, 6)  # upstream gap
    assert e.record(T, 0, 18, 7) is None
    assert e.record(T, 0, 19, 2) == OffsetSync(T, 0, 19, 2)  # downstream went backwards
    assert e.record(T, 0, 5, 3) == OffsetSync(T, 0, 5, 3)  # upstream rewound


def test_emitter_pending_is_per_partition_and_take_clears():
    e = OffsetSyncEmitter(100)
    e.record(T, 0, 0, 0)
    e.record(T, 1, 0, 0)
    e.record(T, 0, 1, 1)
    e.record(T, 1, 1, 1)
    e.record(T, 0, 2, 2)
    assert e.pending() == [OffsetSync(T, 0, 2, 2), OffsetSync(T, 1, 1, 1)]
    assert e.pending() == e.take_pending()
    assert e.pending() == [] and e.take_pending() == []
    assert e.record(T, 0, 3, 3) is None  # flushing does not re-pace immediate syncs


def test_emitter_reset_makes_the_next_record_first():
    e = OffsetSyncEmitter(100)
    e.record(T, 0, 0, 0)
    assert e.record(T, 0, 1, 1) is None
    e.reset(T, 0)
    assert e.pending() == [OffsetSync(T, 0, 1, 1)]  # still a true fact
    assert e.record(T, 0, 2, 2) == OffsetSync(T, 0, 2, 2)
    assert e.pending() == []
    e.reset("never-seen", 9)  # harmless


def test_emitter_lag_max_zero_syncs_every_record():
    e = OffsetSyncEmitter(0)
    assert all(e.record(T, 0, u, u) is not None for u in range(20))


@pytest.mark.parametrize("bad", [-1, 1.5, "100", True])
def test_emitter_rejects_bad_lag_max(bad):
    with pytest.raises(ConfigError, match="offset.lag.max"):
        OffsetSyncEmitter(bad)


@given(
    st.integers(0, 10),
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(-3, 30), st.integers(-3, 30), st.booleans()),
        max_size=200,
    ),
)
def test_emitter_matches_mm2_partition_state_and_delayed_map(lag, steps):
    """Random interleaved partitions with gaps, rewinds and truncation: same decisions as MM2."""
    ours = OffsetSyncEmitter(lag)
    states: dict[int, Mm2PartitionState] = {}
    delayed: dict[tuple[str, int], OffsetSync] = {}
    position = {p: (0, 0) for p in range(3)}
    for p, du, dd, flush in steps:
        u, d = position[p]
        u, d = max(0, u + du), max(0, d + dd)
        position[p] = (u + 1, d + 1)
        sync = OffsetSync(T, p, u, d)
        state = states.setdefault(p, Mm2PartitionState(lag))
        if state.update(u, d):
            delayed.pop((T, p), None)
            state.reset()
            expected = sync
        else:
            delayed[(T, p)] = sync
            expected = None
        assert ours.record(T, p, u, d) == expected
        assert ours.pending() == list(delayed.values())
        if flush:
            assert ours.take_pending() == list(delayed.values())
            delayed.clear()


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 30),
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(-5, 5), st.integers(-5, 60), st.integers(0, 250),
                  st.booleans()),
        max_size=25,
    ),
)
def test_record_run_is_the_per_record_loop(lag, runs):
    """The data path reports contiguous runs; the result must equal recording one by one."""
    by_run, by_record = OffsetSyncEmitter(lag), OffsetSyncEmitter(lag)
    position = {0: (0, 0), 1: (0, 0)}
    for p, up_jump, down_jump, count, flush in runs:
        u, d = position[p]
        u, d = max(0, u + up_jump), max(0, d + down_jump)
        expected = [s for i in range(count) if (s := by_record.record(T, p, u + i, d + i))]
        assert by_run.record_run(T, p, u, d, count) == expected
        assert by_run.pending() == by_record.pending()
        if flush:
            assert by_run.take_pending() == by_record.take_pending()
        position[p] = (u + count, d + count)
    # and the two emitters stay in the same state afterwards
    assert by_run.record(T, 0, 10**6, 10**6) == by_record.record(T, 0, 10**6, 10**6)


def test_record_run_of_a_million_records_is_cheap_and_exact():
    e = OffsetSyncEmitter(100)
    syncs = e.record_run(T, 0, 5000, 0, 1_000_000)
    assert [s.downstream_offset for s in syncs] == list(range(0, 1_000_000, 101))
    assert all(s.upstream_offset == s.downstream_offset + 5000 for s in syncs)
    assert e.take_pending() == [OffsetSync(T, 0, 1_004_999, 999_999)]
    assert e.record_run(T, 0, 0, 0, 0) == []


# --- OffsetSyncStore basics ------------------------------------------------------------


def test_store_translates_like_mm2_around_a_single_sync():
    store = OffsetSyncStore(100)
    store.add(OffsetSync(T, 0, 100, 40))
    assert store.translate(T, 0, 99) is None
    assert store.translate(T, 0, 100) == 40
    assert store.translate(T, 0, 150) == 41
    assert store.translate(T, 1, 100) is None
    assert store.translate("other", 0, 100) is None
    assert store.error_bound(T, 0, 99) is None
    assert store.error_bound(T, 0, 150) == 100


def test_store_interpolates_on_a_line_and_compacts_it():
    store = OffsetSyncStore(100)
    for u in range(1000, 100_000, 101):
        store.add(OffsetSync(T, 0, u, u - 1000))
    assert store.memory_entries() == 1
    assert store.memory_entries(T, 0) == 1
    assert store.translate(T, 0, 5000) == 4000  # exact, where MM2 would say 3031 + 1
    assert store.partitions() == [(T, 0)]


def test_store_ignores_duplicate_syncs():
    store = OffsetSyncStore(100)
    for _ in range(3):
        store.add(OffsetSync(T, 0, 10, 5))
    store.add(OffsetSync(T, 0, 20, 9))
    store.add(OffsetSync(T, 0, 20, 9))
    assert store.memory_entries() == 2
    assert store.translate(T, 0, 20) == 9


def test_store_upstream_rewind_keeps_older_syncs_and_uses_the_new_copy():
    """The replicator restarted and re-replicated from upstream 500: two copies downstream."""
    rep = Replication(100)
    for u in range(1000):
        rep.write(u, u)
    rep.flush()
    rep.emitter.reset(T, 0)
    for i, u in enumerate(range(500, 1500)):
        rep.write(u, 1000 + i)
    rep.flush()
    store = OffsetSyncStore(100)
    for s in rep.syncs:
        store.add(s)
    assert store.translate(T, 0, 200) == 200  # first copy, still exact (MM2 forgets it)
    assert store.translate(T, 0, 499) == 499
    assert 1000 + 200 - 100 <= store.translate(T, 0, 700) <= 1000 + 200  # second copy
    assert store.translate(T, 0, 1499) == 1999
    mm2 = Mm2StyleSyncStore()
    for s in rep.syncs:
        mm2.add(s)
    assert mm2.translate(T, 0, 200) is None


def test_store_upstream_rewind_supersedes_every_older_sync_at_or_above_it():
    store = OffsetSyncStore(100)
    for u in range(0, 701, 100):
        store.add(OffsetSync(T, 0, u, u))
    for u in range(710, 1000, 100):  # a compaction gap: a second line
        store.add(OffsetSync(T, 0, u, u - 9))
    assert store.memory_entries() == 2
    store.add(OffsetSync(T, 0, 500, 1000))  # restart re-reads from 500
    store.add(OffsetSync(T, 0, 600, 1100))
    assert store.memory_entries() == 2  # [0, 499] of the first copy, then the new line
    assert store.translate(T, 0, 499) == 499
    assert store.translate(T, 0, 550) == 1050
    assert store.translate(T, 0, 600) == 1100
    assert store.translate(T, 0, 800) == 1101  # newest sync below is (600, 1100), as in MM2


def test_store_downstream_truncation_forgets_everything_before():
    store = OffsetSyncStore(100)
    for u in range(0, 1000, 101):
        store.add(OffsetSync(T, 0, u, u))
    store.add(OffsetSync(T, 0, 1000, 0))  # target topic re-created
    assert store.translate(T, 0, 500) is None  # the old offsets point at records that are gone
    assert store.translate(T, 0, 1000) == 0
    assert store.memory_entries() == 1


def test_store_without_interpolation_is_exactly_mm2s_rule_over_all_syncs():
    store = OffsetSyncStore(100, interpolate=False)
    syncs = [OffsetSync(T, 0, u, u // 2) for u in range(0, 2000, 37)]
    for s in syncs:
        store.add(s)
    assert store.memory_entries() == len(syncs)
    for c in range(-5, 2100, 7):
        assert store.translate(T, 0, c) == mm2_rule_over_all_syncs(syncs, c)


@pytest.mark.parametrize("bad", [0, 3, -1])
def test_store_rejects_tiny_capacity(bad):
    with pytest.raises(ConfigError):
        OffsetSyncStore(100, max_entries=bad)


# --- the bound, as property tests ----------------------------------------------------


def replicate(lag, u0, d0, steps, flushes, final_flush, drop=None) -> Replication:
    rep = Replication(lag)
    for i, (u, d) in enumerate(stream(steps, u0, d0)):
        rep.write(u, d, drop_immediate=bool(drop and drop[i % len(drop)]))
        if flushes[i % len(flushes)]:
            rep.flush()
    if final_flush:
        rep.flush()
    return rep


def check_against_truth(rep: Replication, store: OffsetSyncStore, lag: int, *, exact_bound: bool):
    first = rep.syncs[0].upstream_offset
    for c in range(first - 3, rep.ups[-1] + 4):
        translated = store.translate(T, 0, c)
        if c < first:
            assert translated is None
            continue
        assert translated is not None
        assert translated <= rep.truth(c), f"ahead of the truth at C={c}"
        if exact_bound:
            assert rep.rereads(translated, c) <= lag, f"C={c}"
        else:
            assert rep.rereads(translated, c) <= store.error_bound(T, 0, c), f"C={c}"


replication_runs = dict(
    lag=st.integers(0, 15),
    u0=st.integers(0, 10_000),
    d0=st.integers(0, 10_000),
    steps=st.lists(st.tuples(mostly_zero, rarely_nonzero), min_size=1, max_size=300),
    flushes=st.lists(st.booleans(), min_size=1, max_size=40),
    final_flush=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(**replication_runs)
def test_never_ahead_and_within_offset_lag_max(lag, u0, d0, steps, flushes, final_flush):
    """Upstream gaps (compaction, markers) and target-side gaps; all syncs delivered."""
    rep = replicate(lag, u0, d0, steps, flushes, final_flush)
    store = OffsetSyncStore(lag, max_entries=10_000)
    for s in rep.syncs:
        store.add(s)
    check_against_truth(rep, store, lag, exact_bound=True)
    # at least as precise as MM2 with unlimited memory, never less
    for c in range(rep.ups[0], rep.ups[-1] + 2):
        assert store.translate(T, 0, c) >= mm2_rule_over_all_syncs(rep.syncs, c)


@settings(max_examples=300, deadline=None)
@given(**replication_runs, max_entries=st.integers(4, 12))
def test_bounded_memory_stays_never_ahead_within_reported_bound(
    lag, u0, d0, steps, flushes, final_flush, max_entries
):
    """A tiny capacity forces merging: still never ahead, error within error_bound()."""
    rep = replicate(lag, u0, d0, steps, flushes, final_flush)
    store = OffsetSyncStore(lag, max_entries=max_entries)
    for s in rep.syncs:
        store.add(s)
        assert store.memory_entries() <= max_entries
    check_against_truth(rep, store, lag, exact_bound=False)
    # for a fixed state, translation is monotonic in C (as in MM2)
    translations = [store.translate(T, 0, c) for c in range(rep.ups[0], rep.ups[-1] + 3)]
    assert translations == sorted(translations)


@settings(max_examples=300, deadline=None)
@given(
    lag=st.integers(0, 15),
    gaps=st.lists(mostly_zero, min_size=1, max_size=200),
    restarts=st.lists(st.tuples(st.integers(1, 80), st.integers(0, 60), st.booleans()), max_size=5),
    max_entries=st.sampled_from([4, 8, 10_000]),
    interpolate=st.booleans(),
)
def test_restarts_that_re_replicate_never_make_a_consumer_skip(
    lag, gaps, restarts, max_entries, interpolate
):
    """The replicator restarts and re-reads from an earlier upstream offset; the target keeps
    both copies. Once it has read to the end again, resuming at translate(C) must reach a
    copy of every upstream record >= C. (Before that the new copy may not hold every record
    yet; the replicator writes them again, so nothing is lost, as in MM2.)"""
    log, u = [], 1000  # the upstream partition, compaction gaps included
    for gap in gaps:
        log.append(u)
        u += 1 + gap
    rep, d, i = Replication(lag), 0, 0
    for length, rewind, reset in [*restarts, (len(log), 0, False)]:
        for _ in range(length):
            if i >= len(log):
                break
            rep.write(log[i], d)
            i += 1
            d += 1
        rep.flush()
        i = max(0, i - rewind)  # restart from an older committed position
        if reset:
            rep.emitter.reset(T, 0)
    while i < len(log):  # the final read reaches the end of the log
        rep.write(log[i], d)
        i += 1
        d += 1
    rep.flush()
    store = OffsetSyncStore(lag, max_entries=max_entries, interpolate=interpolate)
    for sync in rep.syncs:
        store.add(sync)
    newest: dict[int, int] = {}
    for up, down in zip(rep.ups, rep.downs):
        newest[up] = down  # later copies are further downstream
    for c in range(999, log[-1] + 3):
        later = [newest[up] for up in log if up >= c]
        limit = min(later) if later else rep.downs[-1] + 1
        translated = store.translate(T, 0, c)
        assert translated is None or translated <= limit, f"C={c} would skip a record"


@settings(max_examples=300, deadline=None)
@given(**replication_runs, drop=st.lists(st.booleans(), min_size=1, max_size=10),
       max_entries=st.sampled_from([4, 8, 10_000]))
def test_lost_syncs_without_target_gaps_never_ahead(
    lag, u0, d0, steps, flushes, final_flush, drop, max_entries
):
    """MM2 can coalesce immediate syncs; with no target-side gaps the lines stay safe."""
    steps = [(up, 0) for up, _ in steps]
    rep = replicate(lag, u0, d0, steps, flushes, final_flush, drop=drop)
    if not rep.syncs:
        return
    store = OffsetSyncStore(lag, max_entries=max_entries)
    for s in rep.syncs:
        store.add(s)
    first = rep.syncs[0].upstream_offset
    for c in range(first, rep.ups[-1] + 3):
        assert store.translate(T, 0, c) <= rep.truth(c), f"ahead at C={c}"


@settings(max_examples=300, deadline=None)
@given(**replication_runs, drop=st.lists(st.booleans(), min_size=1, max_size=10),
       max_entries=st.sampled_from([4, 8, 10_000]))
def test_without_interpolation_lost_syncs_and_target_gaps_never_ahead(
    lag, u0, d0, steps, flushes, final_flush, drop, max_entries
):
    rep = replicate(lag, u0, d0, steps, flushes, final_flush, drop=drop)
    if not rep.syncs:
        return
    store = OffsetSyncStore(lag, max_entries=max_entries, interpolate=False)
    for s in rep.syncs:
        store.add(s)
        assert store.memory_entries() <= max_entries
    first = rep.syncs[0].upstream_offset
    for c in range(first, rep.ups[-1] + 3):
        assert store.translate(T, 0, c) <= rep.truth(c), f"ahead at C={c}"


@settings(max_examples=200, deadline=None)
@given(**replication_runs, max_entries=st.sampled_from([4, 6, 9]))
def test_without_interpolation_thinned_error_within_reported_bound(
    lag, u0, d0, steps, flushes, final_flush, max_entries
):
    rep = replicate(lag, u0, d0, steps, flushes, final_flush)
    store = OffsetSyncStore(lag, max_entries=max_entries, interpolate=False)
    for s in rep.syncs:
        store.add(s)
    check_against_truth(rep, store, lag, exact_bound=False)


# --- a group 1,000,000 records behind --------------------------------------------------

LAG = 100
BEHIND = 1_000_000


def far_behind_run(txn_size: int | None) -> tuple[Replication, int]:
    """1.2M records from upstream offset 3e9; optionally a transaction marker every txn_size."""
    rep = Replication(LAG)
    u, d = 3_000_000_000, 0
    for i in range(1_200_000):
        if txn_size and i and i % txn_size == 0:
            u += 1  # the commit marker takes an offset but is never replicated
        rep.write(u, d)
        if (i + 1) % 5000 == 0:  # one micro-batch
            rep.flush()
        u += 1
        d += 1
    rep.flush()
    return rep, u  # u is the upstream log end


@pytest.fixture(scope="module")
def contiguous_run():
    return far_behind_run(None)


@pytest.fixture(scope="module")
def transactional_run():
    return far_behind_run(50)


def test_group_1m_behind_contiguous_is_exact_in_one_entry(contiguous_run):
    rep, log_end = contiguous_run
    store, mm2 = OffsetSyncStore(LAG), Mm2StyleSyncStore()
    for s in rep.syncs:
        store.add(s)
        mm2.add(s)
    c = log_end - BEHIND
    truth = rep.truth(c)
    ours = store.translate(T, 0, c)
    assert store.memory_entries() == 1
    assert 0 <= truth - ours <= LAG
    assert ours == truth  # a contiguous range is exact, not just within offset.lag.max
    theirs = mm2.translate(T, 0, c)
    assert truth - theirs > 100 * LAG  # MM2's 64 slots: tens of thousands of records off
    # everywhere in the last million, not only at one point
    for behind in range(1, BEHIND + 1, 9973):
        c = log_end - behind
        assert store.translate(T, 0, c) == rep.truth(c)


def test_group_1m_behind_with_a_transaction_every_50_records(transactional_run):
    rep, log_end = transactional_run
    store, mm2 = OffsetSyncStore(LAG), Mm2StyleSyncStore()
    for s in rep.syncs:
        store.add(s)
        mm2.add(s)
    assert store.memory_entries() <= store.max_entries  # ~24,000 gaps, at most 1024 runs
    worst_ours = worst_mm2 = 0
    for behind in (BEHIND, *range(1, BEHIND + 1, 9973)):
        c = log_end - behind
        truth, ours, theirs = rep.truth(c), store.translate(T, 0, c), mm2.translate(T, 0, c)
        assert ours <= truth
        assert rep.rereads(ours, c) <= store.error_bound(T, 0, c)
        worst_ours = max(worst_ours, rep.rereads(ours, c))
        worst_mm2 = max(worst_mm2, rep.rereads(theirs, c))
    assert worst_ours <= 2 * LAG
    assert worst_mm2 > 100 * worst_ours
    c = log_end - BEHIND
    assert rep.rereads(store.translate(T, 0, c), c) <= store.error_bound(T, 0, c) <= 2 * LAG
