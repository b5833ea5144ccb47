"""Turns the collected state into statuses and numbers: the monitor's evaluator stage.

Pure logic: ``evaluate(state, now, settings)`` reads a MonitorState and returns
an Evaluation; it performs no I/O and changes nothing, so it is unit-tested
with hand-built states. The exporters only ever read an Evaluation.

The rules are Burrow's, adapted to replication (the partition's *replicated
position* plays the consumer offset) and documented for users in
docs/monitor-status.md; keep the two in step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from monitor import catchup
from monitor import lag as lagmath
from monitor import readiness
from monitor.options import EvaluatorSettings  # the options the evaluator reads, declared there
from monitor.pacing import _CHECK_EVERY, STEP_SECONDS, Pacer, finish  # noqa: F401 (_CHECK_EVERY: tests)
from sparkmirror.metrics import STATUS_CODES, STATUSES
from monitor.state import AT, LAG, POSITION, SOURCE_END, FlowState, MonitorState, PartitionState

OK, WARN, STALL, STOP, ERR = STATUSES


#: Heartbeats reach the target in bursts (a Spark micro-batch, a busy MM2 producer), so the
#: default silence allowed is never below this, however short the heartbeat interval.
MIN_HEARTBEAT_TIMEOUT = 10.0


def heartbeat_timeout(settings: EvaluatorSettings, interval: float) -> float:
    """Seconds without a heartbeat arriving after which a flow is STOP."""
    return settings.heartbeat_timeout or max(2.0 * interval, MIN_HEARTBEAT_TIMEOUT)


def worst(statuses) -> str:
    return max(statuses, key=STATUS_CODES.__getitem__, default=OK)


@dataclass
class PartitionResult:
    topic: str
    partition: int
    target_topic: str
    status: str
    reasons: list[str]
    source_start: int | None
    source_end: int | None
    target_end: int | None
    position: int | None
    position_basis: str
    lag_records: int | None
    lag_seconds: float | None
    oldest_unreplicated_timestamp_ms: int | None
    lost_records: int
    read_at: float | None
    retention_headroom_seconds: float | None = None  # None: unknown or unlimited
    retention_unlimited: bool = False
    open_transaction: bool = False  # everything committed is copied; an open transaction holds the rest
    # catch-up over the sample window (monitor.catchup): rates in records/s, ETA None when unknown
    # or not catching up
    catchup_state: str = catchup.UNKNOWN
    copy_rate: float | None = None
    source_rate: float | None = None
    catchup_eta_seconds: float | None = None


@dataclass
class TopicResult:
    topic: str
    target_topic: str
    status: str
    partitions: int
    lag_records: int | None
    lag_seconds: float | None
    lost_total: int
    retention_headroom_seconds: float | None = None
    retention_unlimited: bool = False


@dataclass
class GroupPartitionResult:
    topic: str
    target_topic: str
    partition: int
    state: str  # ok | stale | missing | pending | no-commit
    committed: int | None
    checkpoint_upstream: int | None
    checkpoint_downstream: int | None
    translated: int | None
    lag_records: int | None
    age_seconds: float | None
    due_seconds: float | None = None  # how long a newer checkpoint has been due; None: none is due


@dataclass
class GroupResult:
    group: str
    status: str
    reasons: list[str]
    lag_records: int
    age_seconds: float
    missing: int
    partitions: list[GroupPartitionResult]
    failover: readiness.GroupFailover | None = None  # None: no committed offset to fail over
    stale: int = 0             # partitions whose due checkpoint is later than the timeout
    due_seconds: float = 0.0   # longest time a newer checkpoint has been due (0: none is due)


@dataclass
class HeartbeatResult:
    topic: str
    expected: bool
    timeout_seconds: float
    age_seconds: float | None
    last_timestamp_ms: int | None
    received_total: int
    bucket_counts: list[int]
    latency_sum: float
    latency_count: int
    last_latency_seconds: float | None
    stopped: bool
    arrival_age_seconds: float | None = None  # since a heartbeat last arrived on the target


@dataclass
class FlowResult:
    name: str
    source: str
    target: str
    status: str
    reasons: list[str]
    replicator_up: bool
    heartbeat: HeartbeatResult
    offset_sync_age_seconds: float | None
    offset_syncs_total: int
    lag_records: int | None
    lag_seconds: float | None
    replicated_total: int
    source_total: int
    probes_total: int
    lost_total: dict[str, int]
    partitions_by_status: dict[str, int]
    partitions: list[PartitionResult]
    topics: list[TopicResult]
    groups: list[GroupResult]
    collector_seconds: dict[str, float]
    retention_headroom_seconds: float | None = None
    retention_unlimited: bool = False
    retention_low_partitions: int = 0
    failover_groups_not_ready: int = 0
    catchup_state: str = catchup.UNKNOWN   # of the slowest partition (monitor.catchup.combine)
    copy_rate: float | None = None         # records/s, summed over the partitions
    source_rate: float | None = None
    catchup_eta_seconds: float | None = None
    # per collector, (rounds, p50 s, worst s) over the last minute (MonitorState.recent_rounds)
    collector_last_minute: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    # partitions whose records lag is unknown (no offset-sync for what the mirror holds yet, ...):
    # lag_records and lag_seconds are over the others only, a lower bound while this is not 0
    lag_unknown_partitions: int = 0

    @property
    def catchup_rate(self) -> float | None:
        """Records/s the flow's backlog shrinks (negative: grows); None when unknown."""
        return None if self.copy_rate is None or self.source_rate is None else self.copy_rate - self.source_rate


@dataclass
class ClusterResult:
    alias: str
    up: bool | None
    error: str | None
    last_ok_at: float | None
    errors_total: int


@dataclass
class Evaluation:
    generated_at: float
    started_at: float
    status: str
    flows: list[FlowResult]
    clusters: list[ClusterResult]
    decode_errors: dict[tuple[str, str, str], int]
    granularity: str = "partition"
    duration_seconds: float = 0.0
    series: str = "all"
    extra: dict = field(default_factory=dict)


# Pacer, STEP_SECONDS: monitor.pacing (the evaluation runs on the event loop in steps).


def evaluate(state: MonitorState, now: float, settings: EvaluatorSettings = EvaluatorSettings()) -> Evaluation:
    return finish(evaluate_steps(state, now, settings))


def evaluate_steps(state: MonitorState, now: float, settings: EvaluatorSettings = EvaluatorSettings(),
                   clock: Callable[[], float] = time.perf_counter) -> Generator[None, None, Evaluation]:
    """``evaluate`` in steps: yields whenever a step has worked for STEP_SECONDS (by ``clock``),
    in every pass over the partitions and groups, and returns the Evaluation.

    The monitor drives it on its event loop and lets other work run at each pause, so a
    large state never blocks the loop for long. Each partition is evaluated whole; the
    state may change between two steps, which only means that later partitions are
    evaluated from slightly newer figures.
    """
    pacer = Pacer(clock, STEP_SECONDS)
    flows = []
    for fs in list(state.flows.values()):
        flows.append((yield from _flow(state, fs, now, settings, pacer)))
        yield
    clusters = [ClusterResult(h.alias, h.up, h.error, h.last_ok_at, h.errors_total) for h in state.clusters.values()]
    return Evaluation(now, state.started_at, worst(f.status for f in flows), flows, clusters,
                      dict(state.decode_errors), settings.granularity, series=settings.series)


# --- partitions ----------------------------------------------------------------

def _partition(part: PartitionState, now: float, stopped: bool, stop_reason: str,
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
        # Unknown by configuration (no offset-syncs) is said, not warned about: nothing is wrong.
        status = OK if part.position.basis == lagmath.UNKNOWN_SYNCS_OFF else WARN
        reasons.append(_UNKNOWN_REASONS.get(part.position.basis, part.position.basis))
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
    elif trend_full and all(s[LAG] is not None for s in trend) and trend[-1][LAG] > trend[0][LAG] and all(
            b[LAG] >= a[LAG] for a, b in zip(trend, trend[1:])):
        status = WARN
        reasons.append(f"lag grew in each of the last {len(trend)} refreshes "
                       f"({trend[0][LAG]} -> {trend[-1][LAG]} records)")
    else:
        status = OK
    pace = catchup.partition(_window_ends(trend), lag)
    return PartitionResult(part.topic, part.partition, part.target_topic, status, reasons, part.source_start,
                           part.source_end, part.target_end, position, part.position.basis, lag, lag_seconds,
                           oldest_ms, lost_records, part.read_at, open_transaction=held is not None,
                           catchup_state=pace.state, copy_rate=pace.copy_rate, source_rate=pace.source_rate,
                           catchup_eta_seconds=pace.eta_seconds)


def _partition_order(fs: FlowState) -> list:
    """The flow's partition keys, sorted; sorted again only when partitions came or went.

    One sort of 10,000 keys is a single call that holds the event loop for tens of ms on a
    busy machine, and the set of partitions changes only with the topics.
    """
    order = fs.partitions_order
    if order is None or order[0] != fs.partitions_changed or order[1] != len(fs.partitions):
        order = fs.partitions_order = (fs.partitions_changed, len(fs.partitions), sorted(fs.partitions))
    return order[2]


def _idle_signature(part: PartitionState) -> tuple | None:
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


def _topics(partitions: list[PartitionResult], lost_total: dict[str, int],
            pacer: Pacer) -> Generator[None, None, list[TopicResult]]:
    by_topic: dict[str, list[PartitionResult]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
        if pacer.due():
            yield
    out = []
    for topic, parts in sorted(by_topic.items()):
        if pacer.due():
            yield
        # A topic is only as known as its least known partition: with one partition's position
        # unknown (no offset-sync for what its mirror holds, yet), the others' sum is no figure for
        # the topic, and 0 would read as caught up. The partition rows say which and why.
        lags = [p.lag_records for p in parts]
        secs = [p.lag_seconds for p in parts]
        out.append(TopicResult(topic, parts[0].target_topic, worst(p.status for p in parts), len(parts),
                               None if None in lags else sum(lags), None if None in secs else max(secs),
                               lost_total.get(topic, 0),
                               *readiness.least([(p.retention_headroom_seconds, p.retention_unlimited)
                                                 for p in parts])))
    return out


# --- checkpoints -----------------------------------------------------------------
#
# MM2 writes a group's checkpoint only when its translation changes, so an old
# checkpoint is no sign of trouble: an idle group, or one moving between two
# offset-syncs, gets none for as long as that lasts. A newer checkpoint is *due*
# once the group's committed offset C has passed an offset-sync (U, D) that the
# newest checkpoint does not cover (checkpoint upstream < U <= C) and that moves
# MM2's translation of C past the checkpointed target offset. It is due from
# the later of the sync's record time and the moment the monitor first saw the
# group at or past U; a checkpoint due for longer than the timeout is stale.

def checkpoint_due_since(syncs, history, committed: int, cp, first_seen: float) -> float | None:
    """When a checkpoint newer than ``cp`` became due for committed offset ``committed``, or None."""
    due = None
    for upstream, downstream, written in syncs or ():
        if not cp.upstream_offset < upstream <= committed:
            continue
        translated = downstream if committed == upstream else downstream + 1  # MM2's rule with this sync
        if translated <= cp.downstream_offset:
            continue
        reached = first_seen
        for offset, at in reversed(history or ()):
            if offset < upstream:
                break
            reached = at
        since = max(written, reached)
        due = since if due is None else min(due, since)
    return due


def _groups(fs: FlowState, now: float, timeout: float, pacer: Pacer) -> Generator[None, None, list[GroupResult]]:
    source_of = {p.target_topic: p.topic for p in fs.partitions.values()}
    by_group: dict[str, dict[tuple[str, int], object]] = {}
    for (group, target_topic, partition), record in fs.checkpoints.items():
        topic = source_of.get(target_topic)
        if topic is not None:
            by_group.setdefault(group, {})[(topic, partition)] = record
    results = []
    for group in sorted(set(by_group) | set(fs.group_offsets)):
        committed = fs.group_offsets.get(group, {})
        cps = by_group.get(group, {})
        first_seen = fs.group_first_seen.get(group, now)
        parts = []
        for topic, partition in sorted(set(committed) | set(cps)):
            if pacer.due():
                yield
            c = committed.get((topic, partition))
            record = cps.get((topic, partition))
            target_topic = fs.partitions[(topic, partition)].target_topic if (topic, partition) in fs.partitions \
                else fs.watch.remote_topic(topic)
            translated = fs.sync_store.translate(topic, partition, c) if c is not None else None
            if record is not None:
                cp = record.checkpoint
                age = max(0.0, now - record.timestamp_ms / 1000.0)
                if c is None:
                    parts.append(GroupPartitionResult(topic, target_topic, partition, "no-commit", None,
                                                      cp.upstream_offset, cp.downstream_offset, None, None, age))
                    continue
                lag = readiness.reread_records(c, cp.upstream_offset, cp.downstream_offset, translated)
                since = checkpoint_due_since(fs.recent_syncs.get((topic, partition)),
                                             fs.group_history.get((group, topic, partition)), c, cp, first_seen)
                due = None if since is None else max(0.0, now - since)
                stale = due is not None and due > timeout
                parts.append(GroupPartitionResult(topic, target_topic, partition, "stale" if stale else "ok", c,
                                                  cp.upstream_offset, cp.downstream_offset, translated, lag, age,
                                                  due))
            else:
                state = "missing" if translated is not None and now - first_seen > timeout else "pending"
                parts.append(GroupPartitionResult(topic, target_topic, partition, state, c, None, None,
                                                  translated, None, None))
        stale = [p for p in parts if p.state == "stale"]
        missing = [p for p in parts if p.state == "missing"]
        reasons = []
        if stale:
            reasons.append(f"{len(stale)} partitions where the group moved past an offset-sync more than "
                           f"{timeout:.0f}s ago and no checkpoint followed (checkpoints stopped?)")
        if missing:
            reasons.append(f"{len(missing)} partitions with a committed offset have no checkpoint: the group "
                           f"cannot fail over there")
        due = [p for p in parts if p.due_seconds is not None]
        results.append(GroupResult(group, WARN if reasons else OK, reasons,
                                   sum(p.lag_records or 0 for p in parts),
                                   max((p.age_seconds for p in due), default=0.0),
                                   len(missing), parts, stale=len(stale),
                                   due_seconds=max((p.due_seconds for p in due), default=0.0)))
    return results


# --- flows -------------------------------------------------------------------------

def _flow(state: MonitorState, fs: FlowState, now: float, settings: EvaluatorSettings,
          pacer: Pacer) -> Generator[None, None, FlowResult]:
    w = fs.watch
    reasons: list[str] = []
    statuses = [OK]
    for alias in dict.fromkeys((w.source, w.target, w.offset_syncs_cluster)):
        health = state.clusters.get(alias)
        if health is not None and health.up is False:
            statuses.append(ERR)
            reasons.append(f"cluster {alias} unreachable: {health.error}; figures below are from the last "
                           f"successful read")

    hb = fs.heartbeat
    timeout = heartbeat_timeout(settings, w.heartbeat_interval)
    age = max(0.0, now - hb.newest_ms / 1000.0) if hb.newest_ms is not None else None
    # Arrival, not age: a heartbeat's age includes the replication latency, so a slow but
    # healthy flow would look stopped. The monitor watches from its start, so a heartbeat that
    # arrived before it (or whose arrival it cannot know) counts as arrived at the start.
    silent = now - max(hb.last_arrival_at or fs.started_at, fs.started_at)
    arrival_age = max(0.0, now - hb.last_arrival_at) if hb.last_arrival_at is not None else None
    stopped = False
    stop_reason = ""
    if w.heartbeats_expected:
        if silent > timeout and arrival_age is not None:
            stopped, stop_reason = True, f"no heartbeat arrived in {w.heartbeats_topic} on {w.target} for " \
                                         f"{arrival_age:.1f}s (timeout {timeout:g}s)"
        elif silent > timeout:
            stopped, stop_reason = True, f"no heartbeat seen in {w.heartbeats_topic} on {w.target} " \
                                         f"since the monitor started {now - fs.started_at:.0f}s ago"
        elif age is not None and age > settings.heartbeat_latency_warn:
            statuses.append(WARN)
            reasons.append(f"heartbeats arrive, but the newest was emitted {age:.0f}s ago (replication latency "
                           f"over {settings.heartbeat_latency_warn:g}s)")
    if stopped:
        statuses.append(STOP)
        reasons.append(f"replication stopped: {stop_reason}")
    resumed_at = hb.resumed_after(timeout) if w.heartbeats_expected else None
    heartbeat = HeartbeatResult(w.heartbeats_topic, w.heartbeats_expected, timeout, age, hb.newest_ms,
                                hb.received_total, list(hb.bucket_counts), hb.latency_sum, hb.latency_count,
                                hb.last_latency, stopped, arrival_age)

    partitions = []
    previous, kept, built = fs.idle_results, {}, 0
    for key in _partition_order(fs):
        p = fs.partitions.get(key)
        if p is None:
            continue  # dropped by a refresh recorded while this evaluation paused
        signature = _idle_signature(p)
        hit = previous.get(key) if signature is not None else None
        if hit is not None and hit[0] == signature and hit[1].status == OK and not hit[1].reasons:
            result = hit[1]
            result.read_at = p.read_at
            kept[key] = hit  # the same objects: nothing new for the garbage collector to follow
        else:
            result = _partition(p, now, stopped, stop_reason, settings, resumed_at)
            if signature is not None and result.lag_records == 0 and result.status == OK and not result.reasons:
                kept[key] = (signature, result)
                built += 1
        partitions.append(result)
        if pacer.due():
            yield
    fs.idle_results = kept
    fs.idle_results_built += built
    # what follows goes over every partition again, pausing the same way
    low = yield from _headroom(partitions, fs, now, settings, pacer)
    by_status = {s: 0 for s in STATUSES}
    held = 0
    lags: list[int] = []
    secs: list[float] = []
    unknown = 0
    for p in partitions:
        by_status[p.status] += 1
        held += p.open_transaction
        if p.lag_records is None:
            unknown += 1
        else:
            lags.append(p.lag_records)
        if p.lag_seconds is not None:
            secs.append(p.lag_seconds)
        if pacer.due():
            yield
    if by_status[ERR]:
        statuses.append(ERR)
        reasons.append(f"{by_status[ERR]} partitions lost records to retention before replication")
    if by_status[STALL]:
        statuses.append(STALL)
        reasons.append(f"{by_status[STALL]} partitions stalled with lag")
    if held:
        statuses.append(WARN)
        reasons.append(f"{held} partitions wait on an open transaction on the source (not a replicator fault)")
    if by_status[WARN] > low.raised + held:
        statuses.append(WARN)
        reasons.append(f"{by_status[WARN] - low.raised - held} partitions with growing or unknown lag")
    if low.count:
        statuses.append(WARN)
        reasons.append(f"{low.count} partitions may soon lose records not yet on the target to retention; "
                       f"lowest: {low.lowest}")
    if fs.partitions_read_at is not None and not partitions:
        statuses.append(WARN)
        reasons.append("no source topic matches the flow's topic filter and the monitor's allow/deny lists")

    cp_timeout = settings.checkpoint_timeout or (2.0 * w.checkpoint_interval + settings.groups_interval)
    groups = (yield from _groups(fs, now, cp_timeout, pacer)) if w.checkpoints_enabled else []
    not_ready = _failover(fs, groups, now, cp_timeout, settings)
    warn_groups = [g.group for g in groups if g.status != OK]
    if warn_groups:
        statuses.append(WARN)
        reasons.append(f"checkpoints behind or missing, or failover not ready, for groups: "
                       f"{', '.join(warn_groups[:5])}"
                       + (" ..." if len(warn_groups) > 5 else ""))

    moved = False
    # a copy: a refresh between two steps may add or drop partitions
    for p in list(fs.partitions.values()):
        if len(p.window) >= 2 and p.window[-1][POSITION] != p.window[0][POSITION]:
            moved = True
            break
        if pacer.due():
            yield
    if w.heartbeats_expected:
        replicator_up = not stopped
    else:
        replicator_up = moved or (bool(lags) and sum(lags) == 0)
    sync_age = max(0.0, now - fs.newest_sync_ms / 1000.0) if fs.newest_sync_ms is not None else None
    pace = catchup.combine((p.catchup_state, p.copy_rate, p.source_rate, p.catchup_eta_seconds)
                           for p in partitions if p.catchup_state != catchup.UNKNOWN)
    if pace.state == catchup.CAUGHT_UP and (unknown or any(p.catchup_state == catchup.UNKNOWN for p in partitions)):
        # the others are caught up, but a partition whose lag (or, lagging, whose rate) is not
        # known yet may not be: the flow is not said to be caught up
        pace = catchup.CatchUp(catchup.UNKNOWN)
    topics = yield from _topics(partitions, fs.lost_total, pacer)
    return FlowResult(
        w.name, w.source, w.target, worst(statuses), reasons, replicator_up, heartbeat, sync_age,
        fs.syncs_total, sum(lags) if lags else None, max(secs) if secs else None, fs.replicated_total,
        fs.source_total, fs.probes_total, dict(fs.lost_total), by_status, partitions,
        topics, groups, dict(fs.collector_seconds),
        *readiness.least([(p.retention_headroom_seconds, p.retention_unlimited) for p in partitions]),
        low.count, not_ready, pace.state, pace.copy_rate, pace.source_rate, pace.eta_seconds,
        state.recent_rounds(w.name), unknown)


# --- failover readiness and retention headroom (monitor.readiness) ---------------------

@dataclass(frozen=True)
class _LowHeadroom:
    count: int = 0    # partitions below the threshold
    raised: int = 0   # of which were OK and are WARN because of it
    lowest: str = ""


def _headroom(partitions: list[PartitionResult], fs: FlowState, now: float, settings: EvaluatorSettings,
              pacer: Pacer) -> Generator[None, None, _LowHeadroom]:
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
        return _LowHeadroom()
    worst_p = min(low, key=lambda p: p.retention_headroom_seconds)
    return _LowHeadroom(len(low), raised, f"{worst_p.topic}[{worst_p.partition}] in "
                                          f"{readiness.seconds_text(worst_p.retention_headroom_seconds)}")


def _failover(fs: FlowState, groups: list[GroupResult], now: float, grace: float,
              settings: EvaluatorSettings) -> int:
    """Attach each group's failover readiness; a group not ready is WARN (a new group without
    checkpoints only after the checkpoint timeout). Returns the groups not ready."""
    not_ready = 0
    for g in groups:
        g.failover = readiness.group_failover(fs, g.group, settings.failover_max_reread_records,
                                              settings.failover_max_reread_seconds)
        if g.failover is None or g.failover.ready:
            continue
        not_ready += 1
        only_missing = set(g.failover.blockers) <= {readiness.NO_CHECKPOINT}
        if only_missing and (g.missing or now - fs.group_first_seen.get(g.group, now) <= grace):
            continue  # already said by the checkpoint rules, or a new group within its grace period
        g.status = worst((g.status, WARN))
        g.reasons.append(g.failover.summary)
    return not_ready
