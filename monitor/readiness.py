"""Failover readiness and retention headroom, from what the monitor already collects.

Pure logic called by the evaluator (``monitor.evaluator``): no I/O, tested on
hand-built states. docs/monitor-status.md explains both for users.

**Failover readiness** (per consumer group). A consumer of group G that fails
over to the target now resumes, on each partition, at the downstream offset D
of G's newest checkpoint (U, D) there. Against G's committed offset C on the
source:

- U <= C: it reads again the records between D and where C lands on the
  target (C translated through the offset-syncs, or ``C - U`` without a
  translation): ``reread_records``. Their time span is the timestamp of the
  last consumed source record (offset C - 1) minus that of the first record at
  or after U, read from the source by ``monitor.collectors.timestamps``.
- U > C: the checkpoint is ahead of the group (its offsets were reset back
  after the checkpoint): the records in [C, U) that it has not consumed would
  be skipped: data lost for the group (``would-skip``). Only when the
  checkpoint was read before the committed offsets were: committed offsets are
  read every ``--groups-interval`` (30 s by default), checkpoints arrive every
  few seconds, and a checkpoint newer than the read carries a committed offset
  the group reached after it (MM2 checkpoints what the group committed). Then
  U stands in for C until the next read, which tells a reset from progress.
- D > the mirror partition's end offset: the checkpoint points past what is on
  the target (mirror truncated or re-created): ``past-target-end``.
- no checkpoint: ``no-checkpoint``; or ``behind-offset-syncs`` when C is older
  than every offset-sync of the partition, so it cannot be translated and MM2
  will not checkpoint it until the group moves on (KAFKA-15906).

A group is ready when none of these applies on any partition it commits and the
re-read stays within the limits (``max_reread_records`` summed over its
partitions, ``max_reread_seconds`` the longest span). A group that has consumed
nothing of what is on the source, with nothing on the target, is ready.

**Retention headroom** (per partition): how long until the source's
``retention.ms`` may delete a record not yet on the target: the oldest
unreplicated record's timestamp + retention.ms - now (retention.ms itself when
caught up: the time replication may stop before anything is at risk). The
broker deletes whole segments once their *newest* record is older than
retention.ms, so the real time left is at least this. Unlimited (+Inf) when
retention.ms is -1 or the topic is compact-only. ``retention.bytes`` is not
estimated: it needs partition sizes (DescribeLogDirs), which the monitor's
client library cannot ask for. A partition is low when its headroom is under
``warn_seconds`` or half its retention.ms, whichever is smaller (so a topic
with a short retention is not in warning whenever it has any lag).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sparkmirror.metrics import FAILOVER_REASONS
from monitor.facts import CheckpointRecord, FlowState, TopicRetention

NO_CHECKPOINT, BEHIND_SYNCS, WOULD_SKIP, PAST_TARGET_END, REREAD_RECORDS, REREAD_SECONDS = FAILOVER_REASONS

Key = tuple[str, int, int]  # (source topic, partition, offset)


def seconds_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


# --- failover readiness -------------------------------------------------------------

def reread_records(committed: int, upstream: int, downstream: int, translated: int | None) -> int:
    """Records a consumer resuming at checkpoint (upstream, downstream) reads again (checkpoint lag)."""
    if translated is not None:
        return max(0, translated - downstream)
    return max(0, committed - upstream)


@dataclass(frozen=True)
class PartitionFailover:
    topic: str
    partition: int
    committed: int
    resume_at: int | None            # target offset a consumer failing over now starts at
    reread_records: int | None
    reread_seconds: float | None     # None: unknown (timestamps not read, or not readable)
    skipped_records: int
    blocker: str | None              # one of FAILOVER_REASONS (not the limits), None if fine
    detail: str


@dataclass
class GroupFailover:
    ready: bool
    blockers: list[str]              # reasons in FAILOVER_REASONS order
    summary: str                     # "can fail over now: ..." / "cannot fail over: ..."
    reread_records: int
    reread_seconds: float | None
    skipped_records: int
    partitions: list[PartitionFailover] = field(default_factory=list)


def _partition(fs: FlowState, topic: str, partition: int, committed: int,
               record: CheckpointRecord | None) -> PartitionFailover:
    part = fs.partitions.get((topic, partition))
    target_end = part.target_end if part is not None else None
    source_start = part.source_start if part is not None else None
    translated = fs.sync_store.translate(topic, partition, committed)
    where = f"{topic}[{partition}]"
    if record is None:
        if not target_end and committed <= (source_start or 0):
            return PartitionFailover(topic, partition, committed, None, 0, 0.0, 0, None,
                                     f"{where}: nothing consumed and nothing on the target yet")
        if translated is None and fs.sync_store.memory_entries(topic, partition):
            return PartitionFailover(
                topic, partition, committed, None, None, None, 0, BEHIND_SYNCS,
                f"{where}: committed offset {committed} is older than every offset-sync, so it cannot be "
                f"translated and no checkpoint will come until the group moves on")
        return PartitionFailover(topic, partition, committed, None, None, None, 0, NO_CHECKPOINT,
                                 f"{where}: no checkpoint yet")
    cp = record.checkpoint
    upstream, downstream = cp.upstream_offset, cp.downstream_offset
    if target_end is not None and downstream > target_end:
        return PartitionFailover(
            topic, partition, committed, downstream, None, None, 0, PAST_TARGET_END,
            f"{where}: the checkpoint points at target offset {downstream}, past the end of the mirror "
            f"partition ({target_end}; truncated or re-created?)")
    newer = fs.groups_read_started is not None and record.received_at > fs.groups_read_started
    if upstream > committed and newer:
        committed = upstream  # the group got there after the read: not a reset (see the module docstring)
    if upstream > committed:
        skipped = upstream - committed
        return PartitionFailover(
            topic, partition, committed, downstream, 0, 0.0, skipped, WOULD_SKIP,
            f"{where}: would skip {skipped:,} records the group has not consumed (checkpoint at source "
            f"offset {upstream}, committed offset {committed})")
    records = reread_records(committed, upstream, downstream, translated)
    seconds: float | None = 0.0
    if records:
        first = fs.record_timestamps.get((topic, partition, upstream))
        last = fs.record_timestamps.get((topic, partition, committed - 1))
        seconds = None if first is None or last is None else max(0.0, (last - first) / 1000.0)
    return PartitionFailover(topic, partition, committed, downstream, records, seconds, 0, None,
                             f"{where}: would re-read {records:,} records")


def timestamps_needed(fs: FlowState) -> set[Key]:
    """Source offsets whose record timestamps the re-read spans need (see the module docstring)."""
    needed: set[Key] = set()
    for group, committed in fs.group_offsets.items():
        for (topic, partition), c in committed.items():
            record = _checkpoint(fs, group, topic, partition)
            if record is None:
                continue
            u, d = record.checkpoint.upstream_offset, record.checkpoint.downstream_offset
            if u <= c and reread_records(c, u, d, fs.sync_store.translate(topic, partition, c)):
                needed.add((topic, partition, u))
                needed.add((topic, partition, c - 1))
    return needed


def _checkpoint(fs: FlowState, group: str, topic: str, partition: int) -> CheckpointRecord | None:
    part = fs.partitions.get((topic, partition))
    target_topic = part.target_topic if part is not None else fs.watch.remote_topic(topic)
    return fs.checkpoints.get((group, target_topic, partition))


def group_failover(fs: FlowState, group: str, max_records: int | None,
                   max_seconds: float | None) -> GroupFailover | None:
    """The group's readiness to fail over now; None when it has no committed offset to fail over."""
    committed = fs.group_offsets.get(group)
    if not committed:
        return None
    parts = [_partition(fs, t, p, c, _checkpoint(fs, group, t, p)) for (t, p), c in sorted(committed.items())]
    records = sum(p.reread_records or 0 for p in parts)
    spans = [p.reread_seconds for p in parts if p.blocker is None]
    seconds = None if any(s is None for s in spans) else max(spans, default=0.0)
    known = [s for s in spans if s is not None]
    longest = max(known, default=None)
    skipped = sum(p.skipped_records for p in parts)
    problems: dict[str, str] = {}
    for reason in FAILOVER_REASONS[:4]:
        hit = [p for p in parts if p.blocker == reason]
        if hit:
            more = f" (and {len(hit) - 1} more partitions)" if len(hit) > 1 else ""
            problems[reason] = hit[0].detail + more
    if max_records is not None and records > max_records:
        problems[REREAD_RECORDS] = f"would re-read {records:,} records (limit {max_records:,})"
    if max_seconds is not None and longest is not None and longest > max_seconds:
        problems[REREAD_SECONDS] = (f"would re-read records spanning {seconds_text(longest)} "
                                    f"(limit {seconds_text(max_seconds)})")
    blockers = [r for r in FAILOVER_REASONS if r in problems]
    if blockers:
        summary = "cannot fail over: " + "; ".join(problems[r] for r in blockers)
    elif records == 0:
        summary = "can fail over now: nothing to re-read"
    else:
        span = f"{seconds_text(seconds)}" if seconds is not None else \
            f"at least {seconds_text(longest)}" if longest is not None else "time span not known yet"
        summary = f"can fail over now: would re-read {records:,} records ({span})"
    return GroupFailover(not blockers, blockers, summary, records, seconds if seconds is not None else longest,
                         skipped, parts)


# --- retention headroom -------------------------------------------------------------

@dataclass(frozen=True)
class Headroom:
    seconds: float | None   # None: unknown or unlimited
    unlimited: bool
    low: bool
    reason: str | None

    @property
    def value(self) -> float | None:
        """The exported figure: +Inf when unlimited, None when unknown."""
        return math.inf if self.unlimited else self.seconds


UNKNOWN = Headroom(None, False, False, None)
UNLIMITED = Headroom(None, True, False, None)


def headroom(lag_records: int | None, oldest_unreplicated_ms: int | None, retention: TopicRetention | None,
             now: float, warn_seconds: float) -> Headroom:
    """Retention headroom of one partition (see the module docstring)."""
    if retention is None:
        return UNKNOWN
    if not retention.deletes or retention.retention_ms is None:
        return UNLIMITED
    keep = retention.retention_ms / 1000.0
    if lag_records == 0:
        oldest = now
    elif lag_records is None or oldest_unreplicated_ms is None:
        return UNKNOWN
    else:
        oldest = oldest_unreplicated_ms / 1000.0
    seconds = max(0.0, oldest + keep - now)
    threshold = min(warn_seconds, keep / 2)
    if seconds >= threshold:
        return Headroom(seconds, False, False, None)
    return Headroom(seconds, False, True,
                    f"retention (retention.ms {retention.retention_ms}) may delete records not yet on the target "
                    f"in {seconds_text(seconds)}: the oldest was written {seconds_text(max(0.0, now - oldest))} ago "
                    f"(warning below {seconds_text(threshold)})")


def least(values: list[tuple[float | None, bool]]) -> tuple[float | None, bool]:
    """(seconds, unlimited) of the lowest headroom among (seconds, unlimited) pairs; unknown ones skipped."""
    finite = [s for s, unlimited in values if s is not None and not unlimited]
    if finite:
        return min(finite), False
    return None, any(unlimited for _, unlimited in values)
