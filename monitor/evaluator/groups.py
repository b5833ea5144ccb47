"""Each consumer group's checkpoints and failover readiness (monitor.readiness).

MM2 writes a group's checkpoint only when its translation changes, so an old
checkpoint is no sign of trouble: an idle group, or one moving between two
offset-syncs, gets none for as long as that lasts. A newer checkpoint is *due*
once the group's committed offset C has passed an offset-sync (U, D) that the
newest checkpoint does not cover (checkpoint upstream < U <= C) and that moves
MM2's translation of C past the checkpointed target offset. It is due from
the later of the sync's record time and the moment the monitor first saw the
group at or past U; a checkpoint due for longer than the timeout is stale.
"""

from __future__ import annotations

from collections.abc import Generator

from monitor import readiness
from monitor.evaluator.results import OK, WARN, GroupPartitionResult, GroupResult, worst
from monitor.facts import FlowState
from monitor.options import EvaluatorSettings
from monitor.pacing import Pacer


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


def group_results(fs: FlowState, now: float, timeout: float, pacer: Pacer) -> Generator[None, None, list[GroupResult]]:
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



def failover(fs: FlowState, groups: list[GroupResult], now: float, grace: float,
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
