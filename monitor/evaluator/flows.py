"""Each flow's status and figures: its clusters, its heartbeats, and the totals of its
partitions, topics and groups (evaluated by the sibling modules)."""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field

from monitor import catchup
from monitor import readiness
from monitor.failback import failback_results
from monitor.evaluator.groups import failover, group_results
from monitor.evaluator.blocks import TopicBlock, topic_blocks
from monitor.evaluator.partitions import LowHeadroom, partition_order
from monitor.evaluator.results import (ERR, OK, PAUSED, STALL, STOP, WARN, ClusterResult, FlowResult, GroupResult,
                                       HeartbeatResult, PartitionResult, worst)
from monitor.facts import FlowState
from monitor.options import EvaluatorSettings
from monitor.pacing import Pacer
from monitor.state import MonitorState
from monitor.watch import WatchedFlow
from sparkmirror.metrics import STATUSES

#: Heartbeats reach the target in bursts (a Spark micro-batch, a busy MM2 producer), so the
#: default silence allowed is never below this, however short the heartbeat interval.
MIN_HEARTBEAT_TIMEOUT = 10.0


def heartbeat_timeout(settings: EvaluatorSettings, interval: float) -> float:
    """Seconds without a heartbeat arriving after which a flow is STOP."""
    return settings.heartbeat_timeout or max(2.0 * interval, MIN_HEARTBEAT_TIMEOUT)


class _Findings:
    """The flow's statuses so far, each but the first OK with its reason, in the order found."""

    def __init__(self) -> None:
        self.statuses = [OK]
        self.reasons: list[str] = []

    def add(self, status: str, reason: str) -> None:
        self.statuses.append(status)
        self.reasons.append(reason)


@dataclass
class _Totals:
    """What the flow's topic blocks add up to."""

    by_status: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STATUSES})
    held: int = 0                    # waiting on an open transaction on the source
    lag_sum: int | None = None       # records lag of the partitions where it is known; None: none known
    secs_max: float | None = None    # seconds lag, the largest known
    unknown: int = 0                 # partitions whose records lag is unknown
    low: LowHeadroom = field(default_factory=LowHeadroom)


def flow_result(state: MonitorState, fs: FlowState, now: float, settings: EvaluatorSettings,
                pacer: Pacer, health: Mapping[str, ClusterResult]) -> Generator[None, None, FlowResult]:
    """The flow's result; ``health`` is the clusters' health the whole evaluation reports."""
    w = fs.watch
    found = _Findings()
    _clusters(health, w, found)
    paused = _paused(fs)
    heartbeat, stop_reason, resumed_at = _heartbeat(fs, now, settings, found, paused)
    blocks = yield from topic_blocks(fs, partition_order(fs), now, heartbeat.stopped, stop_reason, paused, settings,
                                     resumed_at, pacer)
    if paused:
        found.add(PAUSED, paused)
    totals = _totals(blocks)
    partitions: list[PartitionResult] = []
    for b in blocks:
        partitions.extend(b.results)
    low = totals.low
    _partition_findings(totals, low, fs.partitions_read_at is not None and not partitions, found)

    cp_timeout = settings.checkpoint_timeout or (2.0 * w.checkpoint_interval + settings.groups_interval)
    groups = (yield from group_results(fs, now, cp_timeout, pacer)) if w.checkpoints_enabled else []
    not_ready = failover(fs, groups, now, cp_timeout, settings)
    _group_findings(groups, found)

    moved = any(b.moved for b in blocks)
    if paused:
        replicator_up = True  # its control API just answered
    elif w.heartbeats_expected:
        replicator_up = not heartbeat.stopped
    else:
        replicator_up = moved or totals.lag_sum == 0
    sync_age = max(0.0, now - fs.newest_sync_ms / 1000.0) if fs.newest_sync_ms is not None else None
    pace = _catchup(blocks, totals.unknown)
    return FlowResult(
        w.name, w.source, w.target, worst(found.statuses), found.reasons, replicator_up, heartbeat, sync_age,
        fs.syncs_total, totals.lag_sum, totals.secs_max,
        fs.replicated_total, fs.source_total, fs.probes_total, dict(fs.lost_total), totals.by_status, partitions,
        [b.topic for b in blocks], groups, dict(fs.collector_seconds),
        *readiness.least([(b.topic.retention_headroom_seconds, b.topic.retention_unlimited) for b in blocks]),
        low.count, not_ready, pace.state, pace.copy_rate, pace.source_rate, pace.eta_seconds,
        state.recent_rounds(w.name), totals.unknown, paused=fs.replicator_paused, failback=failback_results(fs))


def _clusters(health: Mapping[str, ClusterResult], w: WatchedFlow, found: _Findings) -> None:
    for alias in dict.fromkeys((w.source, w.target, w.offset_syncs_cluster)):
        cluster = health.get(alias)
        if cluster is not None and cluster.up is False:
            found.add(ERR, f"cluster {alias} unreachable: {cluster.error}; figures below are from the last "
                           f"successful read")


def _paused(fs: FlowState) -> str:
    """Why the flow copies nothing on purpose, or "" (what the replicator's control API said:
    monitor.collectors.replicator)."""
    pause = fs.replicator_paused
    if pause is None:
        return ""
    at = pause.get("at")
    when = time.strftime(" at %Y-%m-%dT%H:%M:%SZ", time.gmtime(at)) if isinstance(at, (int, float)) else ""
    return (f"paused on purpose by {pause.get('by') or 'someone'}{when} through the replicator's control API: "
            f"it copies nothing until resumed (sparkmirror ctl resume '{fs.watch.name}')")


def _heartbeat(fs: FlowState, now: float, settings: EvaluatorSettings,
               found: _Findings, paused: str = "") -> tuple[HeartbeatResult, str, float | None]:
    """(the heartbeat result, why the flow is stopped or "", when heartbeats resumed after a
    silence longer than the timeout or None: see ``partition_result``). A paused flow's silence
    is its pause (``paused``), not a STOP."""
    w, hb = fs.watch, fs.heartbeat
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
            found.add(WARN, f"heartbeats arrive, but the newest was emitted {age:.0f}s ago (replication latency "
                            f"over {settings.heartbeat_latency_warn:g}s)")
    if stopped and not paused:
        found.add(STOP, f"replication stopped: {stop_reason}")
    resumed_at = hb.resumed_after(timeout) if w.heartbeats_expected else None
    heartbeat = HeartbeatResult(w.heartbeats_topic, w.heartbeats_expected, timeout, age, hb.newest_ms,
                                hb.received_total, list(hb.bucket_counts), hb.latency_sum, hb.latency_count,
                                hb.last_latency, stopped, arrival_age)
    return heartbeat, stop_reason, resumed_at


def _totals(blocks: list[TopicBlock]) -> _Totals:
    totals = _Totals()
    by_status = totals.by_status
    count = raised = 0
    lowest = None
    for b in blocks:
        for status, n in b.by_status.items():
            by_status[status] += n
        totals.held += b.held
        totals.unknown += b.unknown
        if b.lag_sum is not None:
            totals.lag_sum = b.lag_sum + (totals.lag_sum or 0)
        if b.secs_max is not None and (totals.secs_max is None or b.secs_max > totals.secs_max):
            totals.secs_max = b.secs_max
        if b.low.count:
            count, raised = count + b.low.count, raised + b.low.raised
            w = b.low.worst
            if lowest is None or w.retention_headroom_seconds < lowest.retention_headroom_seconds:
                lowest = w
    if count:
        totals.low = LowHeadroom(count, raised, lowest)
    return totals


def _partition_findings(totals: _Totals, low: LowHeadroom, none_match: bool, found: _Findings) -> None:
    by_status, held = totals.by_status, totals.held
    if by_status[ERR]:
        found.add(ERR, f"{by_status[ERR]} partitions lost records to retention before replication")
    if by_status[STALL]:
        found.add(STALL, f"{by_status[STALL]} partitions stalled with lag")
    if held:
        found.add(WARN, f"{held} partitions wait on an open transaction on the source (not a replicator fault)")
    if by_status[WARN] > low.raised + held:
        found.add(WARN, f"{by_status[WARN] - low.raised - held} partitions with growing or unknown lag")
    if low.count:
        found.add(WARN, f"{low.count} partitions may soon lose records not yet on the target to retention; "
                        f"lowest: {low.lowest}")
    if none_match:
        found.add(WARN, "no source topic matches the flow's topic filter and the monitor's allow/deny lists")


def _group_findings(groups: list[GroupResult], found: _Findings) -> None:
    warn_groups = [g.group for g in groups if g.status != OK]
    if warn_groups:
        found.add(WARN, f"checkpoints behind or missing, or failover not ready, for groups: "
                        f"{', '.join(warn_groups[:5])}"
                        + (" ..." if len(warn_groups) > 5 else ""))


def _catchup(blocks: list[TopicBlock], unknown: int) -> catchup.CatchUp:
    # each block's pace is already combined over its partitions: combining those is the same
    pace = catchup.combine(b.pace for b in blocks if b.pace.state != catchup.UNKNOWN)
    if pace.state == catchup.CAUGHT_UP and (unknown or any(b.pace_unknown for b in blocks)):
        # the others are caught up, but a partition whose lag (or, lagging, whose rate) is not
        # known yet may not be: the flow is not said to be caught up
        pace = catchup.CatchUp(catchup.UNKNOWN)
    return pace
