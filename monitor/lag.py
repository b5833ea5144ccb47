"""Where the target stands in the source's offsets: the arithmetic behind records lag and data loss.

An offset-sync (U, D) says the source record at upstream offset U sits at
downstream offset D of the mirror partition. The mirror partition is written
in source order by one writer and by nobody else, so the T - 1 - D records
after D (T = target end offset) are the source records after U. The next
source offset not yet on the target is therefore

    position = U + (T - D)

capped at the source end offset. This holds however old the sync is, because
the target end offset carries the rest: a replicator that flushes its syncs
lazily (MM2 keeps the newest one pending) still gives an exact position, and
an idle one gives exactly ``source end - position = 0``.

A target written in transactions breaks "T - 1 - D records": every commit
leaves a marker offset (and an abort leaves records no consumer reads), so the
position would run ahead of the truth and lag read 0 while records are still
missing. For such flows the position is the newest sync's U + 1 instead
(``replicated_position(..., target_has_gaps=True)``), exact once the newest
sync is written and otherwise behind, never ahead.

Where it is not exact (documented in docs/monitor-status.md): offsets missing
upstream between U and the position (compaction, transaction markers) make the
position too low, so lag is over-counted until the next sync, which MM2 sends
immediately after such a gap; the seconds-lag probe then finds no record at the
position and reports the partition caught up. Duplicates written after a
replicator restart (at-least-once) make it too high until the restarted
replicator's first sync, which is sent immediately.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How a position was found (``position_basis`` in /api/status).
BASIS_SYNC = "offset-sync"
BASIS_SYNC_ONLY = "offset-sync-only"       # target with transaction markers: U + 1 of the newest sync
BASIS_EMPTY_MIRROR = "empty-mirror"        # no sync, nothing on the target: nothing copied yet
BASIS_NO_MIRROR = "no-mirror-partition"    # the mirror partition does not exist (yet)
UNKNOWN_NO_SYNC = "no-offset-sync"         # target has records but no sync says what they are
UNKNOWN_SYNC_AHEAD = "sync-ahead-of-target"  # target end <= D: truncated or re-created
UNKNOWN_NO_OFFSETS = "no-offsets"          # the end offsets could not be read
UNKNOWN_SYNCS_OFF = "offset-syncs-disabled"  # emit.offset-syncs.enabled = false: no sync will ever say


@dataclass(frozen=True)
class Position:
    """The next source offset not yet on the target (``offset``), or None with the reason."""

    offset: int | None
    basis: str


def replicated_position(sync: tuple[int, int] | None, target_end: int | None,
                        source_start: int | None, source_end: int | None, *, syncs_enabled: bool = True,
                        target_has_gaps: bool = False) -> Position:
    """The position from the newest sync (U, D), the target end offset and the source offsets.

    Without offset-syncs (``syncs_enabled`` False) only an absent or empty mirror
    partition has a known position; the end offsets alone cannot say which source
    records a non-empty mirror holds (retention, compaction and transaction markers
    differ on the two sides), so the position is unknown rather than guessed.

    ``target_has_gaps``: the replicator writes the target in transactions, so T - D
    also counts commit markers (and aborted records) and would put the position
    past records not yet copied. The position is then U + 1, the sync's own
    record: exact whenever the replicator has flushed its newest sync (MM2 does
    after every transaction, sparkmirror after every batch), never too high.
    """
    if source_end is None or source_start is None:
        return Position(None, UNKNOWN_NO_OFFSETS)
    if not syncs_enabled and target_end:
        return Position(None, UNKNOWN_SYNCS_OFF)
    if target_end is None:
        # No mirror partition: nothing is copied yet; everything still on the source is behind.
        return Position(source_start, BASIS_NO_MIRROR) if sync is None else Position(None, UNKNOWN_SYNC_AHEAD)
    if sync is None:
        if target_end == 0:
            return Position(source_start, BASIS_EMPTY_MIRROR)
        return Position(None, UNKNOWN_NO_SYNC)
    upstream, downstream = sync
    if target_end <= downstream:
        return Position(None, UNKNOWN_SYNC_AHEAD)
    if target_has_gaps:
        return Position(min(upstream + 1, source_end), BASIS_SYNC_ONLY)
    return Position(min(upstream + target_end - downstream, source_end), BASIS_SYNC)


def records_lag(position: int | None, source_start: int | None, source_end: int | None) -> int | None:
    """Source end offset minus the position, never negative; None when unknown.

    Offsets below the source's log start no longer exist and can never be
    copied: they are not lag but data loss (``lost_range``), so the lag counts
    from ``max(position, log start)``.
    """
    if position is None or source_end is None:
        return None
    return max(0, source_end - max(position, source_start or 0))


def lost_range(position: int | None, source_start: int | None,
               empty_to: int | None = None) -> tuple[int, int] | None:
    """Source offsets [position, log start) deleted before they were copied, or None.

    ``empty_to``: the offsets [position, empty_to) are known to hold no record (a
    transaction's commit marker at the position, read before retention or
    deleteRecords removed it); they are not counted as lost.
    """
    if position is None or source_start is None:
        return None
    first = max(position, empty_to or position)
    if source_start <= first:
        return None
    return first, source_start
