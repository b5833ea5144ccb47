"""Failing back: where a consumer group resumes on the original cluster after a failover.

After a failover from A (primary) to B (dr) the group commits on B. Failing back maps
each of its B offsets to an offset on A, per partition, by what B's topic is:

- a mirror of an A topic (``A.orders`` on B, or ``orders`` under Identity): mapped back
  through the forward flow's offset-syncs (A->B). A sync (U, D) says the record at U on A
  sits at D on B. The group's committed offset C on B is "the next record to read", so
  with the newest sync (U, D) at or before C:

  * C == D: resume at U, exactly;
  * C inside a one-to-one window (the next sync (U', D') has U' - U == D' - D, and the
    target has no offset gaps of its own, i.e. the flow is not exactly-once): every
    record between is at U + (C - D), so resume there, exactly;
  * otherwise: the group read the record at D (U) and some of the records after it,
    how many of A's is unknown, so resume at U + 1 (the earlier bound: re-read, never
    skip). Syncs come at least every ``offset.lag.max`` records, so the re-read is at
    most that many records;
  * no sync at or before C (compacted away, or never written): refused.

  Never below the group's commit on A from before the failover (it had read that far).
- a topic the reverse flow (B->A) copies to A (active-active: ``orders`` on B is
  ``B.orders`` on A): the reverse flow's newest checkpoint, as ``translate`` reads it. A
  checkpoint of an older commit is still safe (it only re-reads more); one of a commit
  past the group's current one would skip, and is refused.
- anything else exists on B only (produced on B during the outage, no flow copies it
  to A): counted and named, never mapped.

Everything here is pure: the command (``sparkmirror_cli.failback``) reads the syncs,
checkpoints and offsets, checks that A still holds what the syncs describe, and writes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sparkmirror.model.records import OffsetSync

TopicPartition = tuple[str, int]

EXACT_SYNC = "exact (at a sync)"
EXACT_WINDOW = "exact (one-to-one window)"
EARLIER_BOUND = "earlier bound"
PRE_FAILOVER = "pre-failover commit"
CHECKPOINT = "reverse checkpoint"
STALE_CHECKPOINT = "older reverse checkpoint"


def clean_syncs(syncs: Iterable[OffsetSync]) -> dict[TopicPartition, list[tuple[int, int]]]:
    """The syncs still true of each partition, as (U, D) pairs increasing in both, from the syncs in
    the order they were written.

    The rules are OffsetSyncStore's: a D not after the newest one means the target was
    truncated or re-created (every older sync may point past what exists now: dropped); a U not
    after the newest one means the replicator re-read after a restart (syncs at or above it are
    superseded by the new copy).
    """
    out: dict[TopicPartition, list[tuple[int, int]]] = {}
    for s in syncs:
        pairs = out.setdefault((s.topic, s.partition), [])
        u, d = s.upstream_offset, s.downstream_offset
        if pairs and (u, d) == pairs[-1]:
            continue
        if pairs and d <= pairs[-1][1]:
            pairs.clear()
        elif pairs and u <= pairs[-1][0]:
            del pairs[bisect_right([p[0] for p in pairs], u - 1):]
        pairs.append((u, d))
    return out


@dataclass(frozen=True)
class Mapped:
    """Where committed offset C on B resumes on A, from one partition's syncs."""

    offset: int
    basis: str
    sync: tuple[int, int]  # the (U, D) the answer rests on: the command checks A still holds it
    reread: int  # records the group read on B that it reads again on A (at most)


@dataclass(frozen=True)
class NotCovered:
    """No surviving sync is at or before C."""

    oldest: tuple[int, int] | None  # the oldest surviving sync, None when there is none


def trusts_sync_windows(*, exactly_once: bool, identity: bool) -> bool:
    """Whether two syncs whose offset distances agree prove a one-to-one copy between them.

    Not on exactly-once flows (transaction markers on the target shift the distances), and not
    under IdentityReplicationPolicy: the DR side's own producers write into the mirror topic too,
    so records produced there can balance source offsets that held no record (markers, aborted
    records) and make a window look one-to-one that is not; mapping inside it could skip."""
    return not exactly_once and not identity


def map_back(pairs: Sequence[tuple[int, int]], c: int, *, one_to_one_windows: bool) -> Mapped | NotCovered:
    """Committed offset ``c`` on the mirror partition, mapped to the source (the module docstring)."""
    i = bisect_right([d for _u, d in pairs], c) - 1
    if i < 0:
        return NotCovered(pairs[0] if pairs else None)
    u, d = pairs[i]
    if c == d:
        return Mapped(u, EXACT_SYNC, (u, d), 0)
    if one_to_one_windows and i + 1 < len(pairs):
        nu, nd = pairs[i + 1]
        if nu - u == nd - d:
            return Mapped(u + (c - d), EXACT_WINDOW, (u, d), 0)
    return Mapped(u + 1, EARLIER_BOUND, (u, d), c - d - 1)


@dataclass
class PartitionPlan:
    """One partition of the group: where it is on B, where it resumes on A, and why."""

    dr_topic: str
    partition: int
    dr_offset: int
    primary_topic: str | None = None
    primary_offset: int | None = None
    basis: str = ""
    reread: int = 0
    reread_span_ms: int | None = None
    skipped: int = 0
    pre_failover: int | None = None
    check: tuple[int, int] | None = None  # (U on A, D on B) whose records must match
    refused: str | None = None
    choices: list[str] = field(default_factory=list)
    dr_only: int = 0  # records on B that are not on A (produced on B during the outage)
    dr_only_range: tuple[int, int] | None = None  # their offsets on B, first and last

    def refuse(self, reason: str, *, earliest: int | None = None) -> None:
        """Refuse the partition, listing the positions that skip nothing."""
        self.refused, self.primary_offset, self.basis, self.reread = reason, None, "refused", 0
        self.check = None
        self.choices = safe_choices(self.pre_failover, earliest)

    def as_json(self) -> dict:
        return {"dr_topic": self.dr_topic, "partition": self.partition, "dr_offset": self.dr_offset,
                "primary_topic": self.primary_topic, "primary_offset": self.primary_offset, "basis": self.basis,
                "reread_records": self.reread, "reread_span_ms": self.reread_span_ms,
                "skipped_records": self.skipped, "pre_failover_offset": self.pre_failover,
                "refused": self.refused, "safe_choices": self.choices, "dr_only_records": self.dr_only,
                "dr_only_offsets": list(self.dr_only_range) if self.dr_only_range else None}


def safe_choices(pre_failover: int | None, earliest: int | None) -> list[str]:
    """Positions on A that skip nothing, for a partition the syncs cannot map."""
    out = []
    if pre_failover is not None:
        out.append(f"the group's pre-failover commit {pre_failover} (re-reads what it read on the dr side since)")
    out.append(f"the earliest offset{f' {earliest}' if earliest is not None else ''} (re-reads everything)")
    return out


def plan_mirror(dr_topic: str, partition: int, c: int, primary_topic: str, pairs: Sequence[tuple[int, int]], *,
                pre_failover: int | None, one_to_one_windows: bool) -> PartitionPlan:
    """The plan of a partition of a mirror topic (before the command checks the records on A)."""
    plan = PartitionPlan(dr_topic, partition, c, primary_topic, pre_failover=pre_failover)
    mapped = map_back(pairs, c, one_to_one_windows=one_to_one_windows)
    if isinstance(mapped, NotCovered):
        oldest = (f"the oldest surviving offset-sync is at {dr_topic}[{partition}] offset {mapped.oldest[1]}"
                  if mapped.oldest else f"no offset-sync of {primary_topic}[{partition}] survives")
        plan.refuse(f"no offset-sync covers offset {c}: {oldest}")
        return plan
    plan.check = mapped.sync
    if pre_failover is not None and pre_failover > mapped.offset:
        plan.primary_offset, plan.basis = pre_failover, PRE_FAILOVER
        plan.reread = max(0, mapped.reread - (pre_failover - mapped.offset))
    else:
        plan.primary_offset, plan.basis, plan.reread = mapped.offset, mapped.basis, mapped.reread
    return plan


def plan_reverse(dr_topic: str, partition: int, c: int, primary_topic: str, checkpoint, *,
                 pre_failover: int | None) -> PartitionPlan:
    """The plan of a partition the reverse flow copies to A, from its newest checkpoint (or None)."""
    plan = PartitionPlan(dr_topic, partition, c, primary_topic, pre_failover=pre_failover)
    if checkpoint is None:
        plan.refuse("no checkpoint of the reverse flow for this partition yet: wait one "
                    "emit.checkpoints.interval.seconds after the reverse flow copied it")
        return plan
    if checkpoint.upstream_offset > c:
        plan.refuse(f"the newest reverse checkpoint is of offset {checkpoint.upstream_offset}, past the group's "
                    f"commit {c}: the group moved back since, and the checkpoint would skip records")
        return plan
    offset, basis = checkpoint.downstream_offset, CHECKPOINT
    if checkpoint.upstream_offset < c:
        basis = STALE_CHECKPOINT
        plan.reread = c - checkpoint.upstream_offset
    if pre_failover is not None and pre_failover > offset:
        offset, basis = pre_failover, PRE_FAILOVER
    plan.primary_offset, plan.basis = offset, basis
    return plan


def plan_dr_only(dr_topic: str, partition: int, c: int, low: int, high: int) -> PartitionPlan:
    """A partition no flow copies to A: its records are named, never mapped."""
    plan = PartitionPlan(dr_topic, partition, c, basis="not on the primary")
    plan.dr_only = max(0, high - low)
    plan.dr_only_range = (low, high - 1) if high > low else None
    return plan


def split_dr_tail(dr_records: Sequence[tuple[int, object]], primary_records: Sequence[object]
                  ) -> tuple[list[int], list[int]]:
    """Under Identity the mirror topic on B also takes what B's producers wrote there. Given B's
    records after the newest sync's D, as (offset, what the record is), and A's records after its
    U in order (what each is), which of B's are copies and which are B's own, by offset.

    The copy keeps A's order, so B's records are matched against A's in turn: one equal to the
    next of A's is its copy, any other is B's own (the copies after the newest sync number up to
    ``offset.lag.max``, and B's own may sit between them)."""
    copies, own = [], []
    j = 0
    for offset, record in dr_records:
        if j < len(primary_records) and record == primary_records[j]:
            copies.append(offset)
            j += 1
        else:
            own.append(offset)
    return copies, own


def mark_dr_tail(plan: PartitionPlan, newest: tuple[int, int] | None, copies: Sequence[int],
                 own: Sequence[int]) -> None:
    """Count B's own records of an Identity mirror partition (``split_dr_tail``) on its plan; an
    answer at the earlier bound of the newest sync re-reads the copies the group read past it."""
    if own:
        plan.dr_only, plan.dr_only_range = len(own), (own[0], own[-1])
    if newest is not None and plan.basis == EARLIER_BOUND and plan.check == newest:
        plan.reread = sum(1 for o in copies if o < plan.dr_offset)
