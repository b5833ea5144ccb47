"""Consumer-group offset sync: translated offsets written into the target's groups.

With ``sync.group.offsets.enabled`` every ``sync.group.offsets.interval.seconds``
the newest checkpoint of each checkpointed group is committed to the group of
the same name on the target — only when that group is absent or empty there
(nobody consumes with it on the target), and never moving a committed offset
backwards (a consumer that already read further on the target keeps its
position). A group with active members on the target is left alone; that is
logged once, until its state changes. These are MM2's rules
(MirrorCheckpointTask.syncGroupOffset), also used by ``sparkmirror translate
--apply``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from replicator.kafkaclients import group_admin
from sparkmirror.adminproc import run_admin
from sparkmirror.errors import ClusterError
from sparkmirror.model.records import Checkpoint

log = logging.getLogger("sparkmirror.groups")

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class TargetGroup:
    """What the target cluster says about a group: ``state`` (lower case) and its member count."""

    group: str
    state: str
    members: int

    @property
    def writable(self) -> bool:
        """Offsets may be committed by an admin: nobody is in the group."""
        return self.state in ("empty", "dead", "absent", "unknown") and self.members == 0


def offsets_to_commit(checkpoints: dict[TopicPartitionKey, Checkpoint],
                      target_offsets: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, Checkpoint]:
    """The checkpoints that move the target group forward (or set a partition it has no offset for)."""
    return {key: cp for key, cp in checkpoints.items()
            if target_offsets.get(key, -1) < cp.downstream_offset}


def describe_group(admin_client, cluster: str, group: str) -> TargetGroup:
    """``admin_client``: an AdminClient, or an AdminProcess to ask from a child process."""
    try:
        state, members = run_admin(admin_client, _describe_group, group)
    except Exception as exc:
        text = str(exc)
        if "GROUP_ID_NOT_FOUND" in text or "GroupIdNotFound" in text:
            return TargetGroup(group, "absent", 0)
        raise ClusterError(f"cannot describe consumer group {group}: {exc}", cluster=cluster) from None
    return TargetGroup(group, state, members)


def _describe_group(admin_client, group: str) -> tuple[str, int]:
    desc = admin_client.describe_consumer_groups([group], request_timeout=30)[group].result(60)
    return getattr(desc.state, "name", str(desc.state)).lower(), len(desc.members or [])


def group_offsets(admin_client, cluster: str, group: str) -> dict[TopicPartitionKey, int]:
    try:
        return run_admin(admin_client, _group_offsets, group)
    except Exception as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return {}
        raise ClusterError(f"cannot read the committed offsets of group {group}: {exc}", cluster=cluster) from None


def _group_offsets(admin_client, group: str) -> dict[TopicPartitionKey, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    fut = admin_client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)[group]
    res = fut.result(60)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.error is None and tp.offset >= 0}


def _alter_group_offsets(admin_client, group: str, offsets: list[tuple[str, int, int, str]]) -> list[str]:
    """Commit (topic, partition, offset, metadata) for ``group``; the partitions that failed, described."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o, metadata=m) for t, p, o, m in offsets])
    res = admin_client.alter_consumer_group_offsets([request], request_timeout=30)[group].result(60)
    return [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in res.topic_partitions if tp.error is not None]


class GroupNotEmpty(ClusterError):
    """The target group has members: its offsets are theirs to commit."""

    exit_code = 3

    def __init__(self, message: str, *, state: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.state = state


def require_empty(admin_client, cluster: str, group: str) -> None:
    """Raise GroupNotEmpty unless nobody is in ``group`` on ``cluster`` (an admin may write its offsets)."""
    described = describe_group(admin_client, cluster, group)
    if not described.writable:
        raise GroupNotEmpty(f"consumer group {group} has {described.members} active member(s) (state "
                            f"{described.state}); its offsets were not changed", cluster=cluster, state=described.state,
                            hint="stop the group's consumers on this cluster first; they will resume from their "
                                 "own committed offsets otherwise")


def commit_offsets(admin_client, cluster: str, group: str, offsets: list[tuple[str, int, int, str]]) -> None:
    """Commit (topic, partition, offset, metadata) for ``group`` in one request, if the group is empty.

    One OffsetCommit is one append to the group's log: all partitions are written or none.
    Raises GroupNotEmpty for a group with members (also when one joined between the check
    and the commit).
    """
    require_empty(admin_client, cluster, group)
    _commit(admin_client, cluster, group, offsets)


def _commit(admin_client, cluster: str, group: str, offsets: list[tuple[str, int, int, str]]) -> None:
    if not offsets:
        return
    try:
        failed = run_admin(admin_client, _alter_group_offsets, group, offsets)
    except Exception as exc:
        text = str(exc)
        if "UNKNOWN_MEMBER_ID" in text or "NON_EMPTY_GROUP" in text or "REBALANCE_IN_PROGRESS" in text:
            raise GroupNotEmpty(f"consumer group {group} became active while its offsets were being set; nothing "
                                "was changed", cluster=cluster, state="joining") from None
        raise ClusterError(f"cannot commit offsets for group {group}: {exc}", cluster=cluster) from None
    if failed:
        raise ClusterError(f"committing offsets for group {group} failed for {', '.join(failed)}", cluster=cluster)


def commit_checkpoints(admin_client, cluster: str, group: str, checkpoints: dict[TopicPartitionKey, Checkpoint]
                       ) -> tuple[dict[TopicPartitionKey, Checkpoint], dict[TopicPartitionKey, int]]:
    """Commit the checkpoints that move ``group`` forward on ``cluster``, if the group is empty there.

    Returns (committed, kept) where ``kept`` are the partitions whose target
    offset was already at or past the checkpoint. Raises GroupNotEmpty for a
    group with members (also when one joined between the check and the commit).
    """
    require_empty(admin_client, cluster, group)
    current = group_offsets(admin_client, cluster, group)
    todo = offsets_to_commit(checkpoints, current)
    kept = {key: current[key] for key in checkpoints if key not in todo}
    if not todo:
        return {}, kept
    _commit(admin_client, cluster, group,
            [(t, p, cp.downstream_offset, cp.metadata or "") for (t, p), cp in sorted(todo.items())])
    return todo, kept


class GroupOffsetSync:
    """The group offset sync loop of one flow, fed by the checkpoint loop's newest checkpoints."""

    def __init__(self, config, flow, checkpoints, *, target_admin=None) -> None:
        self.flow = flow
        self.checkpoints = checkpoints
        self.interval = float(flow.sync_group_offsets_interval_seconds)
        # group requests run in a child process (sparkmirror.adminproc); target_admin: an
        # AdminClient or AdminProcess to use instead
        self._admin = target_admin or group_admin(config, flow.target, flow)
        self._left_alone: dict[str, str] = {}  # group -> state we logged it in
        self.synced_total = 0

    def close(self) -> None:
        if hasattr(self._admin, "close"):
            self._admin.close()

    def sync_once(self) -> dict[str, dict[TopicPartitionKey, int]]:
        """One round; returns what was committed, per group."""
        wanted = set(self.checkpoints.groups)
        latest = {g: per for g, per in self.checkpoints.latest().items() if g in wanted and per}
        done: dict[str, dict[TopicPartitionKey, int]] = {}
        for group, per in sorted(latest.items()):
            try:
                committed, _kept = commit_checkpoints(self._admin, self.flow.target, group, per)
            except GroupNotEmpty as exc:
                if self._left_alone.get(group) != exc.state:
                    self._left_alone[group] = exc.state
                    log.info("group offset sync %s: leaving group %s alone on %s: %s", self.flow.name, group,
                             self.flow.target, exc.message)
                continue
            except ClusterError as exc:
                log.warning("group offset sync %s: %s", self.flow.name, exc)
                continue
            self._left_alone.pop(group, None)
            if committed:
                done[group] = {key: cp.downstream_offset for key, cp in committed.items()}
                self.synced_total += len(committed)
                shown = ", ".join(f"{t}[{p}]={cp.downstream_offset}" for (t, p), cp in sorted(committed.items())[:8])
                more = f" and {len(committed) - 8} more" if len(committed) > 8 else ""
                log.info("group offset sync %s: committed group %s on %s: %s%s", self.flow.name, group,
                         self.flow.target, shown, more)
        return done
