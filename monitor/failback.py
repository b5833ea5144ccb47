"""Failback readiness: could each group consuming a flow's mirror topics on the target fail
back to the source now? Pure logic, no I/O, tested on hand-built states.

It is ``sparkmirror failback``'s mapping (``sparkmirror.model.failback``) on what the
monitor reads anyway: the group's committed offset C on a mirror partition of the target
is mapped back through the flow's newest offset-syncs (the ``RECENT_SYNCS`` the monitor
keeps per partition): exactly at a sync or inside a one-to-one window, else to the earlier
bound (re-read, never skip), and never below the group's commit on the source. A group is
ready when every mirror partition it commits maps back so, and the source still holds
the offset to resume at (its log start at or before it, its end at or after it).

Not ready, with the reason per partition: no kept offset-sync at or before C (the group
is older than every sync the monitor holds, or no sync was ever written), the source
ends before the answer (truncated or re-created), or retention deleted it. What the
command checks on top (the record at U on the source is the mirror's at D) needs record
reads the monitor does not make: ``sparkmirror failback`` is the authority before
``--apply``; this gauge says when running it is worth it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from monitor.facts import FlowState
from sparkmirror.model import failback as fb
from sparkmirror.model.policy import IdentityReplicationPolicy
from sparkmirror.model.records import OffsetSync


@dataclass
class FailbackPartition:
    target_topic: str
    topic: str  # on the source
    partition: int
    committed: int  # the group's offset on the target
    offset: int | None  # where it resumes on the source; None: blocked
    basis: str
    reread_records: int
    blocker: str | None = None


@dataclass
class GroupFailback:
    group: str
    ready: bool
    summary: str
    reread_records: int
    partitions: list[FailbackPartition] = field(default_factory=list)


def _pairs(fs: FlowState, key: tuple[str, int]) -> list[tuple[int, int]]:
    """The partition's kept syncs as (U, D) increasing in both (failback's own cleaning)."""
    recent = fs.recent_syncs.get(key) or ()
    return fb.clean_syncs(OffsetSync(key[0], key[1], u, d) for u, d, _at in recent).get(key, [])


def failback_results(fs: FlowState) -> list[GroupFailback]:
    """Every group with commits on the flow's mirror partitions of the target, by name."""
    if not fs.target_group_offsets:
        return []
    w = fs.watch
    windows = fb.trusts_sync_windows(exactly_once=w.target_has_gaps,
                                     identity=isinstance(w.policy, IdentityReplicationPolicy))
    by_target = {(p.target_topic, p.partition): key for key, p in fs.partitions.items()}
    out = []
    for group, commits in sorted(fs.target_group_offsets.items()):
        parts = []
        for (target_topic, partition), c in sorted(commits.items()):
            key = by_target.get((target_topic, partition))
            if key is not None:
                parts.append(_partition(fs, key, target_topic, c, fs.group_offsets.get(group, {}), windows))
        if parts:
            out.append(_group(group, parts, w.source))
    return out


def _partition(fs: FlowState, key: tuple[str, int], target_topic: str, c: int,
               source_commits: Mapping[tuple[str, int], int], windows: bool) -> FailbackPartition:
    topic, partition = key
    plan = fb.plan_mirror(target_topic, partition, c, topic, _pairs(fs, key),
                          pre_failover=source_commits.get(key), one_to_one_windows=windows)
    if plan.refused:
        return FailbackPartition(target_topic, topic, partition, c, None, plan.basis, 0,
                                 plan.refused.replace("no offset-sync covers", "no offset-sync the monitor keeps "
                                                                                "covers"))
    part = fs.partitions[key]
    offset = plan.primary_offset
    blocker = None
    if part.source_end is None:
        blocker = "the source's end offset is not known yet"
    elif part.source_end < offset:
        blocker = (f"{topic}[{partition}] ends at {part.source_end} on the source, before offset {offset}: "
                   f"truncated or re-created")
    elif part.source_start is not None and part.source_start > offset:
        blocker = (f"retention deleted {topic}[{partition}] up to {part.source_start} on the source, past offset "
                   f"{offset}: failing back would skip records")
    return FailbackPartition(target_topic, topic, partition, c, None if blocker else offset, plan.basis,
                             plan.reread, blocker)


def _group(group: str, parts: list[FailbackPartition], source: str) -> GroupFailback:
    blocked = [p for p in parts if p.blocker]
    reread = sum(p.reread_records for p in parts if not p.blocker)
    if blocked:
        first = blocked[0]
        more = f" (and {len(blocked) - 1} more partitions)" if len(blocked) > 1 else ""
        summary = f"cannot fail back to {source} now: {first.target_topic}[{first.partition}]: {first.blocker}{more}"
    else:
        summary = (f"can fail back to {source} now: re-reads at most {reread} records, skips none"
                   if reread else f"can fail back to {source} now: exactly, re-reads nothing")
    return GroupFailback(group, not blocked, summary, reread, parts)
