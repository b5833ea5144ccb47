"""Each partition's status and figures, and the pass over a flow's partitions that builds them.

The rules are documented for users in docs/monitor-status.md (keep the two in step).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from monitor import catchup
from monitor import lag as lagmath
from monitor import readiness
from monitor.evaluator.results import ERR, OK, STALL, STOP, WARN, PartitionResult
from monitor.facts import FlowState, PartitionState
from monitor.options import EvaluatorSettings
from monitor.pacing import Pacer
from monitor.windows import AT, LAG, POSITION, SOURCE_END


def partition_results(fs: FlowState, keys, idle: dict, now: float, stopped: bool, stop_reason: str,
                      settings: EvaluatorSettings, resumed_at: float | None,
                      pacer: Pacer) -> Generator[None, None, tuple[list, list, dict, int]]:
    """The results of the partitions ``keys``, in order: (results, their states, the idle
    entries to keep, how many of them are idle). A caught-up idle partition's result of the
    previous evaluation (in ``idle``: key -> (signature, result)) is reused while its
    ``idle_signature`` holds."""
    results, states, kept, built = [], [], {}, 0
    partitions = fs.partitions
    for key in keys:
        p = partitions.get(key)
        if p is None:
            continue  # dropped by a refresh recorded while this evaluation paused
        signature = idle_signature(p)
        hit = idle.get(key) if signature is not None else None
        if hit is not None and hit[0] == signature and hit[1].status == OK and not hit[1].reasons:
            result = hit[1]
            result.read_at = p.read_at
            kept[key] = hit  # the same objects: nothing new for the garbage collector to follow
        else:
            result = partition_result(p, now, stopped, stop_reason, settings, resumed_at)
            if signature is not None and result.lag_records == 0 and result.status == OK and not result.reasons:
                kept[key] = (signature, result)
                built += 1
        results.append(result)
        states.append(p)
        if pacer.due():
            yield
    fs.idle_results_built += built
    return results, states, kept, len(kept)


# How long a mirror partition may hold records before the offset-sync that covers them arrives:
# MM2's task offset commit (offset.flush.interval.ms, 60 s by default) plus a refresh.
NO_SYNC_GRACE_SECONDS = 75.0


def partition_result(part: PartitionState, now: float, stopped: bool, stop_reason: str,
               settings: EvaluatorSettings, resumed_at: float | None = None) -> PartitionResult:
    """One partition's figures and status.

    ``resumed_at``: when the flow's heartbeats last began to arrive again after a silence
    longer than the timeout (the replicator stopped, or not started yet). The trend rules
    (STALL, growing lag) and the catch-up rates judge a running replicator, so they count
    only the samples taken since: a restarted replicator has a full window to move each
    partition, where samples from its stop would call a partition it has not reached yet
    STALL at once, and its copy rate would include the time it was down.
    """
    position = part.position.offset
    lag = lagmath.records_lag(position, part.source_start, part.source_end)
    lag, lag_seconds, oldest_ms = _seconds_lag(part, lag, now)
    probe = part.probe
    empty_to = probe.empty_to if probe is not None and probe.position == position else None
    lost = lagmath.lost_range(position, part.source_start, empty_to)
    lost_records = lost[1] - lost[0] if lost else 0

    reasons: list[str] = []
    window = list(part.window)
    full = len(window) >= max(2, settings.window)
    # (a copy only while the window still reaches back past the resumption: evaluated for every partition)
    trend = window if resumed_at is None or not window or window[0][AT] > resumed_at \
        else [s for s in window if s[AT] > resumed_at]
    trend_full = len(trend) >= max(2, settings.window)
    held = None
    if lost_records:
        status = ERR
        reasons.append(f"{lost_records} source records were deleted (retention or deleteRecords) before "
                       f"they were replicated: log start {part.source_start} > replicated position "
                       f"{lost[0]}")
    elif lag is None:
        basis = part.position.basis
        if basis == lagmath.UNKNOWN_NO_SYNC and part.no_sync_since is not None \
                and now - part.no_sync_since < NO_SYNC_GRACE_SECONDS:
            # A mirror partition's first records land before the offset-sync that describes them
            # (MM2 sends it after their acknowledgement, or with the task's next offset commit when
            # its sync producer has 10 in flight): unknown, but not yet a warning.
            status = OK
            reasons.append(f"waiting for the first offset-sync of this mirror partition "
                           f"({now - part.no_sync_since:.0f}s; a warning after {NO_SYNC_GRACE_SECONDS:.0f}s)")
        else:
            # Unknown by configuration (no offset-syncs) is said, not warned about: nothing is wrong.
            status = OK if basis == lagmath.UNKNOWN_SYNCS_OFF else WARN
            reasons.append(_UNKNOWN_REASONS.get(basis, basis))
    elif (held := _held_by_open_transaction(part, position, window, full)) is not None:
        # The replicator reads read_committed, where MM2's consumer reads everything: it can copy
        # nothing past the last stable offset while a transaction is open there. Not its fault.
        status = WARN
        stable, high, since = held
        reasons.append(f"open transaction on the source: the last stable offset {stable} is {high - stable} "
                       f"offsets behind the high watermark {high} and has not moved for {since:.0f}s; "
                       f"everything committed before it is copied, the rest waits until the transaction "
                       f"commits or aborts (the producer's transaction.timeout.ms)")
    elif lag == 0:
        status = OK
    elif stopped:
        status = STOP
        reasons.append(f"{lag} records to copy and {stop_reason}")
    elif trend_full and all(s[POSITION] == position and s[LAG] for s in trend):
        status = STALL
        reasons.append(f"replicated position {position} unchanged for {trend[-1][AT] - trend[0][AT]:.0f}s "
                       f"({len(trend)} refreshes) with {lag} records to copy")
    elif trend_full and (growth := lag_growth(trend)) is not None:
        status = WARN
        reasons.append(growth)
    else:
        status = OK
    pace = catchup.partition(_window_ends(trend), lag)
    return PartitionResult(part.topic, part.partition, part.target_topic, status, reasons, part.source_start,
                           part.source_end, part.target_end, position, part.position.basis, lag, lag_seconds,
                           oldest_ms, lost_records, part.read_at, open_transaction=held is not None,
                           catchup_state=pace.state, copy_rate=pace.copy_rate, source_rate=pace.source_rate,
                           catchup_eta_seconds=pace.eta_seconds)


def lag_growth(trend: list) -> str | None:
    """Why the records lag over ``trend`` (a full window) is growing, or None when it is not.

    A window with a lag of 0 is a caught-up partition, whatever came after (Burrow's first rule):
    one record arriving between two refreshes reads 0, ..., 0, 1. Growth must also be sustained
    beyond the partition's jitter: the lag never falls, and rises in more than half of the steps.
    A partition fed one record a second whose copy takes 2.3 s reads 2 or 3 records at random,
    and a window of 2, 2, ..., 2, 3 is one step of that jitter, not growth.
    """
    lags = [s[LAG] for s in trend]
    if any(lag is None or lag == 0 for lag in lags) or lags[-1] <= lags[0]:
        return None
    steps = len(lags) - 1
    if any(b < a for a, b in zip(lags, lags[1:])):
        return None
    rises = sum(b > a for a, b in zip(lags, lags[1:]))
    if 2 * rises <= steps:
        return None
    return (f"lag grew in {rises} of the last {steps} refreshes and never fell over "
            f"{trend[-1][AT] - trend[0][AT]:.0f}s ({lags[0]} -> {lags[-1]} records)")


def partition_order(fs: FlowState) -> list:
    """The flow's partition keys, sorted; sorted again only when partitions came or went.

    A sort is one call that cannot pause, so a large flow's sort would hold the event loop in
    one piece, while the set of partitions changes only with the topics (bench/NOTES.md,
    Monitor at scale).
    """
    order = fs.partitions_order
    if order is None or order[0] != fs.partitions_changed or order[1] != len(fs.partitions):
        order = fs.partitions_order = (fs.partitions_changed, len(fs.partitions), sorted(fs.partitions))
    return order[2]


def idle_signature(part: PartitionState) -> tuple | None:
    """What a caught-up partition's result depends on, when its sample window shows no movement.

    Most partitions of a large flow are caught up and idle: their result is the same at every
    evaluation but for the time of the read, so the evaluator reuses it while this signature is
    unchanged (the figures, the probe, the window's ends; a window whose ends differ has rates
    that change with the clock) rather than building it again: evaluation costs what changed.
    A source transaction held open (last stable offset below the high watermark) is never
    reused: its status depends on how long the window has seen it.
    """
    window = part.window
    if not window:
        return None
    first, last = window[0], window[-1]
    if first[POSITION] is None or first[POSITION] != last[POSITION] or first[SOURCE_END] != last[SOURCE_END]:
        return None
    high = part.source_high_watermark
    if high is not None and part.source_end is not None and high > part.source_end:
        return None
    return (part.position, part.source_start, part.source_end, part.target_end, high, part.probe,
            first[POSITION], first[SOURCE_END], len(window) >= 2 and last[AT] > first[AT])


def _window_ends(window: list) -> tuple:
    """The oldest and newest samples with a known position, as catch-up's (at, position, end) tuples."""
    if len(window) < 2:
        return ()
    first, last = window[0], window[-1]
    if first[POSITION] is None or last[POSITION] is None:  # rare: scan for the known ones
        known = [s for s in window if s[POSITION] is not None]
        if len(known) < 2:
            return ()
        first, last = known[0], known[-1]
    return (first[AT], first[POSITION], first[SOURCE_END]), (last[AT], last[POSITION], last[SOURCE_END])


def _held_by_open_transaction(part: PartitionState, position: int | None, window: list,
                              full: bool) -> tuple[int, int, float] | None:
    """(last stable offset, high watermark, seconds) when an open transaction holds the partition.

    The position reached the last stable offset (``source_end``), which stayed below the high
    watermark and did not move over a full window (transactions that commit within the window
    are normal traffic).
    """
    stable, high = part.source_end, part.source_high_watermark
    if stable is None or high is None or position is None or not stable < high or position < stable:
        return None
    if not full or not all(s[SOURCE_END] == stable for s in window):
        return None
    return stable, high, window[-1][AT] - window[0][AT]


def _seconds_lag(part: PartitionState, lag: int | None, now: float) -> tuple[int | None, float | None, int | None]:
    """(records lag, seconds lag, timestamp of the oldest record not yet copied) from the newest probe.

    A probe of the current position and end is exact. One that is older (the position
    moved, or the source grew past a probe that found nothing, and the next probe is in
    flight) still bounds the answer: the oldest record missing now is no older than the one
    it found, or than the moment it found nothing missing, so that age is reported and keeps
    growing with the clock until the next probe corrects it (a partition never drops out
    of the flow's figure between two probes).
    """
    if lag == 0:
        return 0, 0.0, None
    probe = part.probe
    if lag is None or probe is None or part.position.offset is None:
        return lag, None, None
    position, end = part.position.offset, part.source_end or 0
    if probe.offset is None:
        if probe.position == position and probe.source_end >= end:
            return 0, 0.0, None  # nothing but markers or compacted-away offsets past the position
        return lag, max(0.0, now - probe.read_at), None
    if position <= probe.offset:
        # The record found is still the first at or after the position (exact even when the position
        # moved within the gap before it): records lag counts from it, skipping markers.
        lag = max(0, end - probe.offset)
        if not lag:
            return 0, 0.0, None
    return lag, max(0.0, now - probe.timestamp_ms / 1000.0), probe.timestamp_ms


_UNKNOWN_REASONS = {
    lagmath.UNKNOWN_NO_SYNC: "the mirror partition has records but no offset-sync says which source "
                             "offsets they are (offset-syncs topic missing, unreadable or elsewhere?)",
    lagmath.UNKNOWN_SYNC_AHEAD: "the newest offset-sync points past the end of the mirror partition "
                                "(mirror topic truncated or re-created?)",
    lagmath.UNKNOWN_NO_OFFSETS: "end offsets not read yet",
    lagmath.UNKNOWN_SYNCS_OFF: "records lag unknown: the flow emits no offset-syncs (emit.offset-syncs.enabled "
                               "= false), so nothing says which source records the mirror partition holds; "
                               "heartbeats still show whether replication runs",
}



# --- retention headroom (monitor.readiness) ---------------------------------------

@dataclass(frozen=True)
class LowHeadroom:
    """The partitions whose retention headroom is low, as ``retention_headroom`` found them."""

    count: int = 0    # partitions below the threshold
    raised: int = 0   # of which were OK and are WARN because of it
    worst: PartitionResult | None = None  # the one with the lowest headroom

    @property
    def lowest(self) -> str:
        w = self.worst
        return f"{w.topic}[{w.partition}] in {readiness.seconds_text(w.retention_headroom_seconds)}" if w else ""


def retention_headroom(partitions: list[PartitionResult], fs: FlowState, now: float, settings: EvaluatorSettings,
                       pacer: Pacer) -> Generator[None, None, LowHeadroom]:
    """Fill in each partition's retention headroom; a low one makes an OK partition WARN."""
    low: list[PartitionResult] = []
    raised = 0
    caught_up: dict[str, readiness.Headroom] = {}  # topic -> the headroom of its caught-up partitions
    for p in partitions:
        if p.lag_records == 0:  # nothing missing: the same for every such partition of the topic
            h = caught_up.get(p.topic)
            if h is None:
                h = caught_up[p.topic] = readiness.headroom(0, None, fs.retention.get(p.topic), now,
                                                            settings.retention_headroom_warn)
        else:
            h = readiness.headroom(p.lag_records, p.oldest_unreplicated_timestamp_ms, fs.retention.get(p.topic),
                                   now, settings.retention_headroom_warn)
        p.retention_headroom_seconds, p.retention_unlimited = h.seconds, h.unlimited
        if h.low:
            low.append(p)
            p.reasons.append(h.reason)
            if p.status == OK:
                p.status, raised = WARN, raised + 1
        if pacer.due():
            yield
    if not low:
        return LowHeadroom()
    return LowHeadroom(len(low), raised, min(low, key=lambda p: p.retention_headroom_seconds))

