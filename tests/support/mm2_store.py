"""A Python port of Apache MM2's OffsetSyncStore (the same class from 4.1 through 4.3.1): the
reference the checkpoint tests compare sparkmirror's translation against, and the offset-syncs the data path writes for a copy."""

from __future__ import annotations

from sparkmirror.model.offsets import OffsetSyncEmitter
from sparkmirror.model.records import OffsetSync


class MM2OffsetSyncStore:
    """Apache MM2's in-memory OffsetSyncStore for one partition, after its initial read.

    A port for comparison only: slot 0 holds the newest sync; a new sync
    refreshes slots until the first one that still satisfies invariant B
    (``syncs[i].U <= syncs[j].U + 2^j - 2^i`` for i < j), promoting older
    syncs that also keep invariant C (at least ``2^max(i-2, 0)`` apart), so the
    64 slots end up exponentially spaced back from the newest sync.
    Translation: the newest kept sync with U <= C gives D (C == U) or D + 1.
    tests/integration/test_control_mm2_store.py checks it against the real class.
    """

    SLOTS = 64

    def __init__(self) -> None:
        self.syncs: list[tuple[int, int]] | None = None

    @staticmethod
    def _b(i_sync, j_sync, i: int, j: int) -> bool:
        bound = j_sync[0] + (1 << j) - (1 << i)
        return i_sync is j_sync or bound < 0 or i_sync[0] <= bound

    @staticmethod
    def _c(i_sync, j_sync, i: int) -> bool:
        bound = j_sync[0] + (1 << max(i - 2, 0))
        return i_sync is j_sync or (bound >= 0 and i_sync[0] >= bound)

    def add(self, upstream: int, downstream: int) -> None:
        new = (upstream, downstream)
        if self.syncs is None or upstream < self.syncs[0][0]:
            self.syncs = [new] * self.SLOTS
            return
        original = self.syncs
        syncs = list(original)
        replacement, r = new, 0
        syncs[0] = new
        for current in range(1, self.SLOTS):
            previous = current - 1
            while True:
                old = original[r]
                recent = self._b(syncs[previous], old, previous, current)
                apart_prev = self._c(syncs[previous], old, previous)
                apart_next = current + 1 >= self.SLOTS or self._c(old, syncs[current + 1], current)
                duplicate = r + 1 < self.SLOTS and old is original[r + 1]
                promote = recent and apart_prev and apart_next
                if promote:
                    replacement = old
                skip = duplicate or not apart_prev
                if promote or skip:
                    r += 1
                if not (r < current and skip):
                    break
            if self._b(syncs[previous], syncs[current], previous, current):
                break
            syncs[current] = replacement
        self.syncs = syncs

    def translate(self, offset: int) -> int | None:
        if self.syncs is None:
            return None
        for u, d in self.syncs:
            if u <= offset:
                return d if u == offset else d + 1
        return None  # MM2 returns -1 here and emits no checkpoint


def data_path_syncs(records: int, batch: int, shift: int, lag_max: int = 100) -> list[OffsetSync]:
    """The syncs the data path writes for ``records`` records copied in batches, target starting at ``shift``."""
    emitter = OffsetSyncEmitter(lag_max)
    syncs: list[OffsetSync] = []
    for start in range(0, records, batch):
        n = min(batch, records - start)
        syncs += emitter.record_run("orders", 0, start, start + shift, n)
        syncs += emitter.take_pending()
    return syncs
