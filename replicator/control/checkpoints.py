"""Checkpoints: consumer-group positions translated to the target, MirrorCheckpointTask's way.

Every ``emit.checkpoints.interval.seconds`` the loop reads the committed offsets
of every source group that passes the group filter and has offsets on topics
passing the topic filter (the group list is refreshed every
``refresh.groups.interval.seconds``, as in MM2), translates each through the
flow's offset-sync history and writes a Checkpoint into
``<source>.checkpoints.internal`` on the target, in MM2's bytes, with the
target-side topic name.

A checkpoint goes out only when it moves forward downstream or the group
rewound upstream (MM2's ``checkpointIsMoreRecent``); the newest emitted ones are
loaded from the checkpoints topic at start, so a restart (or taking over from
MM2) does not step back either. Translation is never ahead of the truth: a
consumer that resumes at a checkpoint may re-read records, never skip one.

``read_checkpoints`` is the reader side (RemoteClusterUtils.translateOffsets):
the newest checkpoint per group and partition in the topic.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from replicator.kafkaclients import admin, group_admin, producer
from replicator.control.offsetsyncs_reader import InternalTopicReader, OffsetSyncsReader
from replicator.control.topics import ensure_internal_topic
from sparkmirror.adminproc import AdminProcessError, run_admin
from sparkmirror.errors import ClusterError, RecordFormatError
from sparkmirror.model.records import Checkpoint

log = logging.getLogger("sparkmirror.checkpoints")

TopicPartitionKey = tuple[str, int]


# ------------------------------------------------------------------------------ pure rules


def checkpoint_topic(policy, source: str, target: str, topic: str) -> str:
    """The target-side name of source ``topic`` in a checkpoint (MM2's renameTopicPartition).

    A topic that came from the target itself (``B.orders`` on A, checkpointed for
    A->B) is named by its original name there; any other gets the remote name.
    """
    if policy.topic_source(topic) == target:
        return policy.original_topic(topic)
    return policy.format_remote_topic(source, topic)


def is_more_recent(new: Checkpoint, last: Checkpoint | None) -> bool:
    """Emit ``new``? Yes if it is the first, the group rewound upstream, or it moved forward downstream."""
    if last is None:
        return True
    if new.upstream_offset < last.upstream_offset:
        return True
    return new.downstream_offset > last.downstream_offset


def translate_group(group: str, committed: dict[TopicPartitionKey, tuple[int, str]], translate, topic_filter,
                    rename) -> dict[TopicPartitionKey, Checkpoint]:
    """Checkpoints for one group's committed source offsets, keyed by (target topic, partition).

    ``committed`` maps (source topic, partition) to (offset, metadata);
    ``translate(topic, partition, offset)`` gives the downstream offset or None;
    ``rename(topic)`` gives the target-side name. Partitions of topics the
    topic filter rejects, without a usable sync, or with a negative result are
    left out, as in MM2.
    """
    out: dict[TopicPartitionKey, Checkpoint] = {}
    for (topic, partition), (offset, metadata) in committed.items():
        if offset < 0 or not topic_filter.should_replicate_topic(topic):
            continue
        downstream = translate(topic, partition, offset)
        if downstream is None or downstream < 0:
            continue
        target_topic = rename(topic)
        out[(target_topic, partition)] = Checkpoint(group, target_topic, partition, offset, downstream, metadata or "")
    return out


# ------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class StoredCheckpoint:
    checkpoint: Checkpoint
    timestamp_ms: int
    offset: int


def read_checkpoints(config, flow, group: str | None = None, timeout: float = 60.0
                     ) -> tuple[dict[str, dict[TopicPartitionKey, StoredCheckpoint]], int, bool]:
    """Newest checkpoint per group and (target topic, partition) in the flow's checkpoints topic.

    Returns (checkpoints, undecodable record count, topic present). Like MM2's
    MirrorClient, the last record of a key wins; ``group`` keeps one group only.
    """
    topic = flow.policy.checkpoints_topic(flow.source)
    out: dict[str, dict[TopicPartitionKey, StoredCheckpoint]] = {}
    bad = 0
    with InternalTopicReader(config, flow.target, topic, flow, client_id="sparkmirror-checkpoints") as reader:
        for rec in reader.read(timeout):
            try:
                cp = Checkpoint.decode(rec.key, rec.value)
            except RecordFormatError as exc:
                bad += 1
                log.debug("%s on %s: record %d/%d: %s", topic, flow.target, rec.partition, rec.offset, exc)
                continue
            if group is None or cp.group == group:
                out.setdefault(cp.group, {})[(cp.topic, cp.partition)] = StoredCheckpoint(cp, rec.timestamp_ms,
                                                                                            rec.offset)
        present = bool(reader.present)
    return out, bad, present


def _result(future, what: str, cluster: str, timeout: float = 60.0):
    try:
        return future.result(timeout)
    except Exception as exc:
        raise ClusterError(f"{what} failed: {exc}", cluster=cluster) from None


def list_groups(admin_client, cluster: str) -> list[str]:
    """The cluster's consumer groups. ``admin_client``: an AdminClient, or an AdminProcess to ask
    from a child process (librdkafka aborted the monitor under ListGroups when a broker came back)."""
    try:
        ids, errors = run_admin(admin_client, _list_group_ids, 30.0)
    except Exception as exc:  # an AdminProcessError from the child, or the client's own
        raise ClusterError(f"listing consumer groups failed: {exc}", cluster=cluster) from None
    for err in errors:
        log.debug("listing consumer groups on %s: %s", cluster, err)
    return ids


def _list_group_ids(admin_client, timeout: float) -> tuple[list[str], list[str]]:
    """(group ids, errors of the brokers that did not answer), run where ``list_groups`` says."""
    result = admin_client.list_consumer_groups(request_timeout=timeout).result(timeout + 30)
    return sorted(g.group_id for g in result.valid), [str(e) for e in result.errors]


def committed_offsets(admin_client, cluster: str, groups: list[str]
                      ) -> dict[str, dict[TopicPartitionKey, tuple[int, str]]]:
    """Committed (offset, metadata) per partition of each group; groups that fail are logged and left out.
    ``admin_client``: an AdminClient, or an AdminProcess to ask from a child process."""
    try:
        out, failed = run_admin(admin_client, _committed_offsets, groups)
    except AdminProcessError as exc:
        raise ClusterError(f"reading the committed offsets of {len(groups)} groups failed: {exc.text}",
                           cluster=cluster) from None
    for g, message in failed.items():
        log.warning("cannot read the committed offsets of group %s on %s: %s", g, cluster, message)
    return out


def _committed_offsets(admin_client, groups: list[str]):
    """(offsets per group, error per group that failed): committed_offsets' requests."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = {g: admin_client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                            request_timeout=30)[g] for g in groups}
    out: dict[str, dict[TopicPartitionKey, tuple[int, str]]] = {}
    failed: dict[str, str] = {}
    for g, fut in futures.items():
        try:
            res = fut.result(60)
        except Exception as exc:
            failed[g] = str(exc)
            continue
        out[g] = {(tp.topic, tp.partition): (tp.offset, tp.metadata or "")
                  for tp in res.topic_partitions if tp.error is None and tp.offset >= 0}
    return out, failed


# ------------------------------------------------------------------------------ the loop


class CheckpointEmitter:
    """The checkpoint loop of one flow; ``latest()`` is what group offset sync reads."""

    def __init__(self, config, flow, *, source_admin=None, target_admin=None,
                 syncs: OffsetSyncsReader | None = None) -> None:
        self.config = config
        self.flow = flow
        self.policy = flow.policy
        self.topic = self.policy.checkpoints_topic(flow.source)
        self.topic_filter = flow.topic_filter
        self.group_filter = flow.group_filter
        self.interval = float(flow.emit_checkpoints_interval_seconds)
        self._source_admin = source_admin or admin(config, flow.source, flow)
        self._target_admin = target_admin or admin(config, flow.target, flow)
        # committed offsets are asked from a child process (sparkmirror.adminproc)
        self._source_groups = group_admin(config, flow.source, flow)
        self.syncs = syncs or OffsetSyncsReader(config, flow)
        self._producer = producer(config, flow.target, flow, **{"acks": "all", "linger.ms": 5,
                                                                "enable.idempotence": True})
        self._lock = threading.Lock()
        self._emitted: dict[str, dict[TopicPartitionKey, Checkpoint]] = {}
        self.groups: list[str] = []
        self._groups_at: float | None = None
        self.rounds = 0
        self.emitted_total = 0

    # -- lifecycle -------------------------------------------------------------------
    def prepare(self) -> None:
        """Create the checkpoints topic, load what was emitted before, read the offset-syncs."""
        ensure_internal_topic(self._target_admin, self.flow.target, self.topic,
                              self.flow.checkpoints_topic_replication_factor)
        stored, bad, _ = read_checkpoints(self.config, self.flow)
        with self._lock:
            # only this flow's groups, as MM2's CheckpointStore loads its task's groups
            self._emitted = {g: {k: s.checkpoint for k, s in per.items()} for g, per in stored.items()
                             if self.group_filter.should_replicate_group(g)}
        if bad:
            log.warning("%s on %s: %d undecodable records ignored", self.topic, self.flow.target, bad)
        self.syncs.catch_up()
        log.info("checkpoints %s: every %.0f s into %s on %s (%d earlier checkpoints of %d groups, %d offset-syncs "
                 "loaded from %s on %s)", self.flow.name, self.interval, self.topic, self.flow.target,
                 sum(len(v) for v in self._emitted.values()), len(self._emitted), self.syncs.records,
                 self.syncs.topic, self.syncs.cluster)

    def close(self) -> None:
        self._producer.flush(10)
        self.syncs.close()
        self._source_groups.close()

    # -- one round -------------------------------------------------------------------
    def refresh_groups(self, force: bool = False) -> list[str]:
        """Groups passing the group filter with offsets on topics passing the topic filter (MM2's rule)."""
        due = self._groups_at is None or (
            self.flow.refresh_groups_enabled and self.flow.refresh_groups_interval_seconds > 0
            and time.monotonic() - self._groups_at >= self.flow.refresh_groups_interval_seconds)
        if not (force or due):
            return self.groups
        candidates = [g for g in list_groups(self._source_groups, self.flow.source)
                      if self.group_filter.should_replicate_group(g)]
        offsets = committed_offsets(self._source_groups, self.flow.source, candidates)
        groups = sorted(g for g, per in offsets.items()
                        if any(self.topic_filter.should_replicate_topic(t) for t, _ in per))
        new, gone = sorted(set(groups) - set(self.groups)), sorted(set(self.groups) - set(groups))
        if new or gone:
            log.info("checkpoints %s: %d consumer groups (new: %s; gone: %s)", self.flow.name, len(groups),
                     ", ".join(new) or "-", ", ".join(gone) or "-")
        self.groups = groups
        self._groups_at = time.monotonic()
        return groups

    def compute(self, committed: dict[str, dict[TopicPartitionKey, tuple[int, str]]]
                ) -> dict[str, dict[TopicPartitionKey, Checkpoint]]:
        """Translated checkpoints of every group (before the monotonic filter)."""
        def rename(topic: str) -> str:
            return checkpoint_topic(self.policy, self.flow.source, self.flow.target, topic)

        return {g: translate_group(g, offs, self.syncs.translate, self.topic_filter, rename)
                for g, offs in committed.items()}

    def emit_once(self) -> list[Checkpoint]:
        """Catch up on offset-syncs, translate every group, write the checkpoints that moved."""
        self.syncs.catch_up()
        groups = self.refresh_groups()
        committed = committed_offsets(self._source_groups, self.flow.source, groups) if groups else {}
        translated = self.compute(committed)
        with self._lock:
            due = [cp for g, per in translated.items() for key, cp in per.items()
                   if is_more_recent(cp, self._emitted.get(g, {}).get(key))]
        self._send(due)
        self.rounds += 1
        if due:
            by_group: dict[str, int] = {}
            for cp in due:
                by_group[cp.group] = by_group.get(cp.group, 0) + 1
            log.info("checkpoints %s: wrote %d to %s on %s (%s)", self.flow.name, len(due), self.topic,
                     self.flow.target, ", ".join(f"{g}: {n}" for g, n in sorted(by_group.items())))
            for cp in due:
                log.debug("checkpoint %s %s[%d]: upstream %d -> downstream %d", cp.group, cp.topic, cp.partition,
                          cp.upstream_offset, cp.downstream_offset)
        return due

    def _send(self, checkpoints: list[Checkpoint]) -> None:
        if not checkpoints:
            return
        delivered: list[Checkpoint] = []
        errors: list[str] = []
        now = int(time.time() * 1000)
        for cp in checkpoints:
            def on_delivery(err, _msg, cp=cp):
                if err is None:
                    delivered.append(cp)
                else:
                    errors.append(str(err))

            while True:
                try:
                    self._producer.produce(self.topic, key=cp.encode_key(), value=cp.encode_value(), partition=0,
                                           timestamp=now, on_delivery=on_delivery)
                    break
                except BufferError:
                    self._producer.poll(0.1)
        left = self._producer.flush(60)
        with self._lock:
            for cp in delivered:
                self._emitted.setdefault(cp.group, {})[(cp.topic, cp.partition)] = cp
            self.emitted_total += len(delivered)
        if errors or left:
            raise ClusterError(f"{len(checkpoints) - len(delivered)} of {len(checkpoints)} checkpoints not written: "
                               f"{errors[0] if errors else 'not acknowledged in time'}", cluster=self.flow.target,
                               topic=self.topic)

    def latest(self) -> dict[str, dict[TopicPartitionKey, Checkpoint]]:
        """The newest emitted checkpoint per group and target partition (a copy)."""
        with self._lock:
            return {g: dict(per) for g, per in self._emitted.items()}
