"""Offset syncs: when to emit them, and how to translate a group's offset with them.

Two pieces of pure logic shared by the data path (which emits syncs) and the
control plane and monitor (which translate consumer-group offsets for
checkpoints):

``OffsetSyncEmitter`` is MM2's emission rule (OffsetSyncWriter.PartitionState in
MM2 4.x), record for record.

``OffsetSyncStore`` translates like MM2 (newest sync (U, D) with U <= C gives D if
C == U else D + 1; none gives None) but keeps far more of the sync history in
bounded memory, so a group that is far behind translates almost exactly instead
of MM2's "within about half the distance to the end" (64 exponentially spaced
syncs per partition, KAFKA-14666).
"""

from __future__ import annotations

from bisect import bisect_right

from sparkmirror.errors import ConfigError
from sparkmirror.model.records import OffsetSync

DEFAULT_OFFSET_LAG_MAX = 100
DEFAULT_MAX_ENTRIES = 1024

TopicPartition = tuple[str, int]


def translate_offset(sync: OffsetSync | None, upstream_offset: int) -> int | None:
    """MM2's translation of one committed upstream offset with one sync.

    The record at ``sync.upstream_offset`` sits at ``sync.downstream_offset``, so
    an upstream offset one or more past it can only safely map one past that
    downstream offset: how many of the records in between were written is unknown,
    and overestimating would make a failed-over consumer skip records.
    """
    if sync is None or sync.upstream_offset > upstream_offset:
        return None
    if upstream_offset == sync.upstream_offset:
        return sync.downstream_offset
    return sync.downstream_offset + 1


def _check_lag_max(offset_lag_max: int) -> int:
    if not isinstance(offset_lag_max, int) or isinstance(offset_lag_max, bool) or offset_lag_max < 0:
        raise ConfigError(f"offset.lag.max must be a whole number >= 0, got {offset_lag_max!r}")
    return offset_lag_max


class _EmitterState:
    __slots__ = ("previous_upstream", "previous_downstream", "last_sync_downstream")

    def __init__(self, upstream: int, downstream: int) -> None:
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        self.last_sync_downstream = downstream


class OffsetSyncEmitter:
    """Decides, per replicated record, whether its offset sync must go out now.

    A sync is due immediately when it is the first for the partition (since
    construction or ``reset``), when ``D - (last sent D + 1) >= offset_lag_max``
    (a translation one past the last sync would be too stale), when the upstream
    offset is not the previous one + 1 (compaction, transaction markers, a rewind)
    or when D went backwards (target truncated). Otherwise the newest sync of the
    partition is kept pending; flush it with ``take_pending`` at least once per
    batch. As in MM2, flushing a pending sync does not move "last sent D": only
    immediate syncs pace the immediate ones.

    The caller must send every sync ``record`` returns and every one
    ``take_pending`` returns, in that order; ``OffsetSyncStore``'s precision bound
    relies on it.
    """

    def __init__(self, offset_lag_max: int = DEFAULT_OFFSET_LAG_MAX) -> None:
        self.offset_lag_max = _check_lag_max(offset_lag_max)
        self._states: dict[TopicPartition, _EmitterState] = {}
        # newest unsent (upstream, downstream) per partition; plain tuples keep
        # the per-record cost low, OffsetSync objects are built only when sent
        self._pending: dict[TopicPartition, tuple[int, int]] = {}

    def record(
        self, topic: str, partition: int, upstream_offset: int, downstream_offset: int
    ) -> OffsetSync | None:
        """Note that ``upstream_offset`` was written at ``downstream_offset``; return the sync to send now."""
        key = (topic, partition)
        state = self._states.get(key)
        if state is None:
            self._states[key] = _EmitterState(upstream_offset, downstream_offset)
            send_now = True
        else:
            send_now = (
                downstream_offset - (state.last_sync_downstream + 1) >= self.offset_lag_max
                or upstream_offset - state.previous_upstream != 1
                or downstream_offset < state.previous_downstream
            )
            state.previous_upstream = upstream_offset
            state.previous_downstream = downstream_offset
            if send_now:
                state.last_sync_downstream = downstream_offset
        if send_now:
            self._pending.pop(key, None)
            return OffsetSync(topic, partition, upstream_offset, downstream_offset)
        self._pending[key] = (upstream_offset, downstream_offset)
        return None

    def record_run(
        self, topic: str, partition: int, upstream_start: int, downstream_start: int, count: int
    ) -> list[OffsetSync]:
        """``record`` for ``count`` records at consecutive upstream and downstream offsets.

        The data path reports what a writer task wrote as such runs; inside a run
        only the staleness rule can fire, every ``offset_lag_max + 1`` records, so
        the syncs are computed directly instead of record by record. The result
        (syncs returned, pending state) is exactly that of the per-record loop.
        """
        if count <= 0:
            return []
        key = (topic, partition)
        first = self.record(topic, partition, upstream_start, downstream_start)
        syncs = [first] if first is not None else []
        state = self._states[key]
        last_d = downstream_start + count - 1
        step = self.offset_lag_max + 1
        # After the first record, last sync D + step > downstream_start always holds.
        d = state.last_sync_downstream + step
        while d <= last_d:
            syncs.append(OffsetSync(topic, partition, upstream_start + (d - downstream_start), d))
            state.last_sync_downstream = d
            d += step
        state.previous_upstream = upstream_start + count - 1
        state.previous_downstream = last_d
        if syncs:
            self._pending.pop(key, None)
        if not syncs or syncs[-1].downstream_offset != last_d:
            self._pending[key] = (state.previous_upstream, last_d)
        return syncs

    def pending(self) -> list[OffsetSync]:
        """The newest unsent sync of each partition, without clearing them."""
        return [OffsetSync(t, p, u, d) for (t, p), (u, d) in self._pending.items()]

    def take_pending(self) -> list[OffsetSync]:
        """The newest unsent sync of each partition; they count as sent afterwards."""
        syncs = self.pending()
        self._pending.clear()
        return syncs

    def reset(self, topic: str, partition: int) -> None:
        """Forget the partition's history: its next record is synced immediately.

        A pending sync is kept: it is still a true fact about a written record,
        and it is dropped anyway as soon as the next immediate sync goes out.
        """
        self._states.pop((topic, partition), None)


class _PartitionSyncs:
    """The sync history of one partition as runs ordered by upstream offset.

    Run i covers upstream offsets ``[u_first[i], u_last[i]]``; ``d_last[i]`` is the
    downstream offset of its newest sync and ``k_min[i]``/``k_max[i]`` bound
    ``D - U`` over the syncs it holds. A run of syncs on one line (``k_min ==
    k_max``) maps every offset it covers exactly. Runs are disjoint and ordered
    (``u_last[i] < u_first[i + 1]``) and hold the syncs in the order they came, so
    the run found by bisecting ``u_first`` holds the newest sync with U <= C.
    """

    __slots__ = ("u_first", "u_last", "d_last", "k_min", "k_max")

    def __init__(self) -> None:
        self.u_first: list[int] = []
        self.u_last: list[int] = []
        self.d_last: list[int] = []
        self.k_min: list[int] = []
        self.k_max: list[int] = []

    def __len__(self) -> int:
        return len(self.u_first)

    def _append(self, u: int, d: int) -> None:
        for column, value in zip(
            (self.u_first, self.u_last, self.d_last, self.k_min, self.k_max), (u, u, d, d - u, d - u)
        ):
            column.append(value)

    def _truncate(self, n: int) -> None:
        for column in (self.u_first, self.u_last, self.d_last, self.k_min, self.k_max):
            del column[n:]

    def add(self, u: int, d: int, interpolate: bool) -> None:
        if not self.u_first:
            self._append(u, d)
            return
        lu, ld = self.u_last[-1], self.d_last[-1]
        if u == lu and d == ld:
            return  # the same sync again (a pending flush of an immediate one)
        if d <= ld:
            # The target went backwards: truncated or re-created. Every older sync
            # may point past the records that exist now, so none is kept.
            self._truncate(0)
        elif u <= lu:
            # Upstream rewound (the replicator re-reads after a restart) while the
            # target moved on: older syncs below ``u`` still describe the first
            # copy correctly; those at or above it are superseded by the new copy.
            keep = bisect_right(self.u_first, u - 1)
            self._truncate(keep)
            if keep and self.u_last[-1] >= u:
                self.u_last[-1] = u - 1
                self.d_last[-1] = u - 1 + self.k_min[-1]  # never ahead of the real one
        elif interpolate and self.k_min[-1] == self.k_max[-1] == d - u:
            self.u_last[-1] = u
            self.d_last[-1] = d
            return
        self._append(u, d)

    def find(self, c: int) -> int:
        return bisect_right(self.u_first, c) - 1

    def translate(self, c: int) -> int | None:
        i = self.find(c)
        if i < 0:
            return None
        if c > self.u_last[i]:
            return self.d_last[i] + 1
        linear = c + self.k_min[i]
        # A merged run is pulled down to its lowest line; the previous run's
        # newest sync still guarantees at least one past its downstream offset.
        return max(linear, self.d_last[i - 1] + 1) if i else linear

    def merge_older(self, keep_newest: int, target: int) -> None:
        """Merge adjacent older runs with the smallest tolerance that fits ``target`` runs.

        A merged run translates with its smallest ``D - U``, which is never ahead
        of any of its parts and at most ``k_max - k_min`` records behind them.
        """
        n_old = len(self) - keep_newest
        if n_old <= target:
            return
        kmin, kmax = self.k_min[:n_old], self.k_max[:n_old]

        def groups(tolerance: int) -> list[tuple[int, int]]:
            spans: list[tuple[int, int]] = []
            start, low, high = 0, kmin[0], kmax[0]
            for j in range(1, n_old):
                new_low, new_high = min(low, kmin[j]), max(high, kmax[j])
                if new_high - new_low <= tolerance:
                    low, high = new_low, new_high
                else:
                    spans.append((start, j))
                    start, low, high = j, kmin[j], kmax[j]
            spans.append((start, n_old))
            return spans

        lo, hi = 0, max(kmax) - min(kmin)
        while lo < hi:  # smallest tolerance whose greedy grouping fits
            mid = (lo + hi) // 2
            if len(groups(mid)) <= target:
                hi = mid
            else:
                lo = mid + 1
        columns = (self.u_first, self.u_last, self.d_last, self.k_min, self.k_max)
        merged: list[list[int]] = [[], [], [], [], []]
        for a, b in groups(lo):
            merged[0].append(self.u_first[a])
            merged[1].append(self.u_last[b - 1])
            merged[2].append(self.d_last[b - 1])
            merged[3].append(min(kmin[a:b]))
            merged[4].append(max(kmax[a:b]))
        for column, head in zip(columns, merged):
            column[:n_old] = head

    def thin_older(self, keep_newest: int) -> None:
        """Drop every other sync older than the newest ``keep_newest`` (oldest kept)."""
        n_old = len(self) - keep_newest
        drop = set(range(1, n_old, 2))
        for column in (self.u_first, self.u_last, self.d_last, self.k_min, self.k_max):
            column[:] = [v for j, v in enumerate(column) if j not in drop]


class OffsetSyncStore:
    """Offset syncs of many partitions, for translating consumer-group offsets.

    Translation is MM2's: the newest sync (U, D) with U <= C gives D if C == U,
    else D + 1, and no such sync gives None. What differs is how much history is
    kept. Syncs are stored as runs: consecutive syncs with the same ``D - U`` lie
    on one line, and with ``interpolate=True`` a run translates every C it covers
    to ``C + (D - U)``. A replicated range without upstream gaps therefore costs one
    entry however long it is (``memory_entries()`` counts runs); every upstream gap
    (compaction, a transaction marker) starts a new run.

    Bound. Let the syncs come from ``OffsetSyncEmitter`` (MM2's rule) with every
    returned sync delivered in order, and let truth(C) be the downstream offset of
    the first replicated record with upstream offset >= C (or one past the last
    one). Then for every C at or after the oldest stored sync:

    - never ahead: ``translate(C) <= truth(C)``; a consumer resuming there may
      re-read records but never skips one;
    - precise: the records at downstream offsets in ``[translate(C), truth(C))``
      number at most ``offset_lag_max`` while the partition holds at most
      ``max_entries`` runs. Proof sketch: between two consecutive syncs upstream
      offsets are consecutive except just before the second (a gap forces a
      sync), and every record in between lies at most ``offset_lag_max``
      downstream offsets past the first sync; on a run's line, downstream gaps
      only push records later, so the line is never ahead.

    Bounded memory. Only gaps cost entries. When a partition exceeds
    ``max_entries`` runs (pathological gaps, e.g. a transaction per few records),
    the newest quarter is kept exact and older adjacent runs are merged with the
    smallest common tolerance that brings the total to three quarters; a merged
    run translates on its lowest line, which keeps "never ahead" and adds at
    most its spread ``k_max - k_min`` to the bound. ``error_bound()`` reports the
    bound for a given C.

    Without interpolation. The line argument also holds when immediate syncs were
    lost but the target partition has no offset gaps (MM2 and sparkmirror
    without exactly-once/transactions downstream): equal ``D - U`` then proves no
    upstream gap in between. If syncs may be lost *and* the target has
    transaction markers (MM2 with ``exactly.once.support``), use
    ``interpolate=False``: runs are single syncs, translation is exactly MM2's
    rule over the kept syncs, and beyond ``max_entries`` every other sync in the
    older half is dropped (precision there degrades to the spacing of the kept
    syncs, as in MM2, but never ahead).

    A sync whose D is not after the partition's newest D (target truncated or
    re-created) clears the partition; a sync whose U is not after the newest U
    (upstream re-read after a restart) drops the syncs at or above that U.
    """

    def __init__(
        self,
        offset_lag_max: int = DEFAULT_OFFSET_LAG_MAX,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        interpolate: bool = True,
    ) -> None:
        self.offset_lag_max = _check_lag_max(offset_lag_max)
        if not isinstance(max_entries, int) or max_entries < 4:
            raise ConfigError(f"offset sync store max_entries must be >= 4, got {max_entries!r}")
        self.max_entries = max_entries
        self.interpolate = interpolate
        self._partitions: dict[TopicPartition, _PartitionSyncs] = {}

    def add(self, sync: OffsetSync) -> None:
        """Apply one sync, in the order they were written to the offset-syncs topic."""
        key = (sync.topic, sync.partition)
        runs = self._partitions.get(key)
        if runs is None:
            runs = self._partitions[key] = _PartitionSyncs()
        runs.add(sync.upstream_offset, sync.downstream_offset, self.interpolate)
        if len(runs) > self.max_entries:
            if self.interpolate:
                keep = max(1, self.max_entries // 4)
                runs.merge_older(keep, max(1, self.max_entries * 3 // 4 - keep))
            else:
                runs.thin_older(self.max_entries // 2)

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The downstream offset to resume at for committed upstream offset C, or None."""
        runs = self._partitions.get((topic, partition))
        return None if runs is None else runs.translate(upstream_offset)

    def error_bound(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """Most records a consumer resuming at ``translate(...)`` may re-read (see the class bound).

        None when there is no translation. For ``interpolate=False`` after
        thinning this is the distance to the next kept sync.
        """
        runs = self._partitions.get((topic, partition))
        if runs is None:
            return None
        i = runs.find(upstream_offset)
        if i < 0:
            return None
        if self.interpolate:
            spread = runs.k_max[i] - runs.k_min[i] if upstream_offset <= runs.u_last[i] else 0
            return self.offset_lag_max + spread
        translated = runs.translate(upstream_offset)
        if i + 1 < len(runs) and translated is not None:
            next_d = runs.u_first[i + 1] + runs.k_min[i + 1]
            return max(self.offset_lag_max, next_d - translated)
        return self.offset_lag_max

    def memory_entries(self, topic: str | None = None, partition: int | None = None) -> int:
        """Runs held for one partition, or for all partitions when none is named."""
        if topic is not None and partition is not None:
            runs = self._partitions.get((topic, partition))
            return 0 if runs is None else len(runs)
        return sum(len(runs) for runs in self._partitions.values())

    def partitions(self) -> list[TopicPartition]:
        return list(self._partitions)
