"""Reading MM2 internal topics, and the offset-syncs of a flow in particular.

``InternalTopicReader`` reads one internal topic from a start position up to the
end it had when asked, and remembers where it stopped, so a caller can catch up
again later: a record written meanwhile is read by the next round, never lost
between two rounds or read twice. The checkpoint loop, ``sparkmirror translate`` and ``sparkmirror
inspect`` use it.

``OffsetSyncsReader`` feeds a flow's offset-syncs topic into an OffsetSyncStore
(sparkmirror.model.offsets). The store lives only in memory: after a restart it
is rebuilt by reading the topic from its beginning, so every sync still in the
topic counts again. The topic is compacted by key (topic, partition); once the
log cleaner has run over a segment, only the newest sync of each partition in
it is left, and translation of groups behind that point falls back to "no
checkpoint" exactly as in MM2. In practice the active segment (7 days or 1 GB by
default) holds the recent history.

``starting_offsets_from_syncs`` lets a flow without a Spark checkpoint resume
where the previous replicator stopped — Apache MM2 or an earlier sparkmirror —
instead of copying every topic again from the beginning.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from replicator.kafkaclients import client_conf, watermarks
from sparkmirror.errors import ClusterError, RecordFormatError
from sparkmirror.model.offsets import OffsetSyncStore
from sparkmirror.model.records import OffsetSync

log = logging.getLogger("sparkmirror.offset_syncs")

#: Spark's startingOffsets value for "the earliest offset of this partition".
SPARK_EARLIEST = -2
_IDLE_END_SECONDS = 5.0


@dataclass(frozen=True)
class RawRecord:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


class InternalTopicReader:
    """Reads ``topic`` on ``cluster`` up to its current end, again and again, never committing.

    ``start`` is where each partition begins the first time: ``"beginning"`` or
    ``("last", n)`` for the newest n records of every partition.
    """

    def __init__(self, config, cluster: str, topic: str, flow=None, *, start="beginning",
                 client_id: str = "sparkmirror-reader") -> None:
        from confluent_kafka import Consumer

        self.cluster = cluster
        self.topic = topic
        self.start = start
        conf = client_conf(config, cluster, "consumer", flow)
        # Assigned, never subscribed: the group id is only a required placeholder.
        conf.update({"group.id": f"{client_id}-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                     "enable.partition.eof": False, "client.id": client_id})
        conf.pop("group.instance.id", None)
        self._consumer = Consumer(conf)
        self._positions: dict[int, int] = {}  # partition -> next offset to read
        self.present: bool | None = None

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:
            pass

    def __enter__(self) -> "InternalTopicReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _partitions(self, timeout: float) -> list[int] | None:
        md = self._consumer.list_topics(self.topic, timeout=timeout)
        tmd = md.topics.get(self.topic)
        if tmd is None or tmd.error is not None:
            return None
        return sorted(tmd.partitions)

    def read(self, timeout: float = 60.0) -> Iterator[RawRecord]:
        """Every record from where the last call stopped up to the end the topic has now."""
        from confluent_kafka import TopicPartition

        deadline = time.monotonic() + timeout
        try:
            partitions = self._partitions(min(timeout, 30.0))
        except Exception as exc:
            raise ClusterError(f"cannot read metadata of {self.topic}: {exc}", cluster=self.cluster,
                               topic=self.topic) from None
        self.present = partitions is not None
        if not partitions:
            return
        ends: dict[int, int] = {}
        for p in partitions:
            try:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)
            except Exception as exc:
                raise ClusterError(f"cannot read the end offsets of {self.topic}: {exc}", cluster=self.cluster,
                                   topic=self.topic) from None
            if p not in self._positions:
                if isinstance(self.start, tuple):
                    self._positions[p] = max(low, high - self.start[1])
                else:
                    self._positions[p] = low
            elif self._positions[p] > high:
                self._positions[p] = low  # the topic was deleted and re-created: read it anew
            else:
                self._positions[p] = max(self._positions[p], low)  # compacted or deleted meanwhile
            ends[p] = high
        todo = {p for p in partitions if self._positions[p] < ends[p]}
        if not todo:
            return
        self._consumer.assign([TopicPartition(self.topic, p, self._positions[p]) for p in sorted(todo)])
        idle_since = time.monotonic()
        try:
            while todo:
                now = time.monotonic()
                if now > deadline:
                    raise ClusterError(
                        f"reading {self.topic} did not reach its end within {timeout:.0f} s "
                        f"(partitions {sorted(todo)} behind)", cluster=self.cluster, topic=self.topic)
                if now - idle_since > _IDLE_END_SECONDS:
                    # Nothing more arrives although the high watermark is further: the last
                    # offsets were compacted away or sit behind an open transaction.
                    log.debug("%s on %s: no records after %s; taking that as the end", self.topic,
                              self.cluster, {p: self._positions[p] for p in todo})
                    break
                batch = self._consumer.consume(10_000, timeout=0.5)
                if batch:
                    idle_since = time.monotonic()
                for msg in batch:
                    if msg.error() is not None:
                        if msg.error().fatal():
                            raise ClusterError(f"reading {self.topic} failed: {msg.error()}", cluster=self.cluster,
                                               topic=self.topic)
                        continue
                    p, offset = msg.partition(), msg.offset()
                    if offset >= ends[p]:
                        # Written after this round's ends were read: the next round reads it
                        # (the position stays before it; moving past it would lose it for good).
                        todo.discard(p)
                        continue
                    self._positions[p] = offset + 1
                    yield RawRecord(p, offset, msg.timestamp()[1], msg.key(), msg.value())
                    if self._positions[p] >= ends[p]:
                        todo.discard(p)
                # Compaction can leave the last offsets before the end empty: ask where we are.
                if todo:
                    for tp in self._consumer.position([TopicPartition(self.topic, p) for p in todo]):
                        if tp.offset >= 0:
                            # never past this round's end: what lies beyond is the next round's
                            self._positions[tp.partition] = max(self._positions[tp.partition],
                                                                min(tp.offset, ends[tp.partition]))
                            if tp.offset >= ends[tp.partition]:
                                todo.discard(tp.partition)
        finally:
            self._consumer.unassign()


class OffsetSyncsReader:
    """A flow's offset-syncs, read into an OffsetSyncStore and kept up to date by ``catch_up``.

    Translation is interpolated along runs of syncs (sparkmirror's precise
    mode) unless the target cluster runs exactly-once
    (``FlowConfig.exactly_once``): transaction markers on the
    target then break the "equal D - U means no gap" argument, and the store
    falls back to MM2's rule over the kept syncs.
    """

    def __init__(self, config, flow, *, max_entries: int | None = None) -> None:
        self.flow = flow
        self.cluster, self.topic = flow.offset_syncs_location
        kwargs = {"max_entries": max_entries} if max_entries else {}
        self.store = OffsetSyncStore(flow.offset_lag_max, interpolate=not flow.exactly_once,
                                     **kwargs)
        #: newest sync per (upstream topic, partition), in topic order
        self.latest: dict[tuple[str, int], OffsetSync] = {}
        self.records = 0
        self.undecodable = 0
        self._reader = InternalTopicReader(config, self.cluster, self.topic, flow,
                                           client_id="sparkmirror-offset-syncs")
        self._warned = False

    @property
    def present(self) -> bool | None:
        return self._reader.present

    def catch_up(self, timeout: float = 120.0, on_sync: Callable[[OffsetSync], None] | None = None) -> int:
        """Apply every sync written since the last call; returns how many were read."""
        n = 0
        for rec in self._reader.read(timeout):
            n += 1
            try:
                sync = OffsetSync.decode(rec.key, rec.value)
            except RecordFormatError as exc:
                self.undecodable += 1
                if not self._warned:
                    self._warned = True
                    log.warning("%s on %s: skipping undecodable record at %d/%d: %s (further ones counted "
                                "silently)", self.topic, self.cluster, rec.partition, rec.offset, exc)
                continue
            self.store.add(sync)
            self.latest[(sync.topic, sync.partition)] = sync
            if on_sync is not None:
                on_sync(sync)
        self.records += n
        return n

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        return self.store.translate(topic, partition, upstream_offset)

    def close(self) -> None:
        self._reader.close()


def resume_offsets(latest: dict[tuple[str, int], OffsetSync], assignment: dict[str, int],
                   source_marks: dict[tuple[str, int], tuple[int, int]],
                   target_marks: dict[tuple[str, int], tuple[int, int]],
                   remote_topic: Callable[[str], str]) -> tuple[dict[str, dict[int, int]], list[str]]:
    """Where each assigned partition resumes, given the newest sync of each: (offsets, notes).

    The newest sync (U, D) says record U was written at D, so the copy resumes at
    U + 1 (records after U that the previous replicator wrote without a sync yet
    are copied again: duplicates, never loss). A partition resumes from the
    earliest offset when it has no sync, when the target no longer holds
    offset D (the mirror topic was deleted or truncated), or when the source
    ends before U + 1 (the source topic was re-created). A start below the
    source's log start is raised to it (those records are gone anyway).
    """
    offsets: dict[str, dict[int, int]] = {}
    notes: list[str] = []
    for topic, count in sorted(assignment.items()):
        per = offsets.setdefault(topic, {})
        for p in range(count):
            sync = latest.get((topic, p))
            if sync is None:
                per[p] = SPARK_EARLIEST
                continue
            start = sync.upstream_offset + 1
            src = source_marks.get((topic, p))
            dst = target_marks.get((remote_topic(topic), p))
            if dst is None or dst[1] <= sync.downstream_offset:
                per[p] = SPARK_EARLIEST
                notes.append(f"{topic}[{p}]: the newest sync says upstream {sync.upstream_offset} is at "
                             f"{remote_topic(topic)}[{p}] offset {sync.downstream_offset}, but the target ends at "
                             f"{dst[1] if dst else 'unknown'}; copying from the earliest offset")
            elif src is not None and start > src[1]:
                per[p] = SPARK_EARLIEST
                notes.append(f"{topic}[{p}]: the source ends at {src[1]}, before the newest sync's upstream "
                             f"offset {sync.upstream_offset} (re-created?); copying from the earliest offset")
            elif src is not None and start < src[0]:
                per[p] = src[0]
                notes.append(f"{topic}[{p}]: offsets {start}..{src[0] - 1} were deleted on the source before "
                             f"they were copied; resuming at the log start {src[0]}")
            else:
                per[p] = start
    return offsets, notes


def starting_offsets_from_syncs(config, flow, assignment: dict[str, int] | None = None, checkpoint_dir=None
                                ) -> dict[str, dict[int, int]] | None:
    """Per-partition start offsets for a flow that has no Spark checkpoint yet, or None.

    Reads the flow's offset-syncs topic (MM2's or sparkmirror's; same bytes,
    same place) and returns ``{topic: {partition: offset}}`` in the shape of
    Spark's ``startingOffsets`` JSON (-2 = earliest) for every partition of
    ``assignment`` (source topic -> partition count; default: the partitions
    the syncs name). None when no assigned partition has a sync, so the caller
    keeps starting from the earliest offsets.
    """
    reader = OffsetSyncsReader(config, flow)
    try:
        reader.catch_up()
    finally:
        reader.close()
    if assignment is None:
        assignment = {}
        for topic, p in reader.latest:
            assignment[topic] = max(assignment.get(topic, 0), p + 1)
    synced = [(t, p) for (t, p) in reader.latest if p < assignment.get(t, 0)]
    where = f" in {checkpoint_dir}" if checkpoint_dir is not None else ""
    if not synced:
        log.info("flow %s: no Spark checkpoint found%s and no offset-syncs for its %d partitions in %s on %s: "
                 "copying from the earliest offsets", flow.name, where, sum(assignment.values()), reader.topic,
                 reader.cluster)
        return None
    policy = flow.policy

    def remote(topic: str) -> str:
        return policy.format_remote_topic(flow.source, topic)

    source_marks = watermarks(config, flow.source, flow, synced)
    target_marks = watermarks(config, flow.target, flow, [(remote(t), p) for t, p in synced])
    offsets, notes = resume_offsets(reader.latest, assignment, source_marks, target_marks, remote)
    for note in notes:
        log.warning("flow %s: %s", flow.name, note)
    resumed = sum(1 for per in offsets.values() for o in per.values() if o != SPARK_EARLIEST)
    log.info("flow %s: no Spark checkpoint found%s; resuming from the offset-syncs instead of copying again: "
             "%d of %d partitions resume after the progress recorded in %s on %s (Apache MM2's or an earlier "
             "run's), the rest start from the earliest offset", flow.name, where, resumed,
             sum(assignment.values()), reader.topic, reader.cluster)
    return offsets if resumed else None


def spark_checkpoint_has_offsets(checkpoint_dir) -> bool:
    """True once Spark planned a batch in ``checkpoint_dir``: from then on it ignores startingOffsets."""
    from pathlib import Path

    offsets = Path(checkpoint_dir) / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def spark_starting_offsets(config, flow, assignment: dict[str, int], checkpoint_dir) -> str:
    """The ``startingOffsets`` option of a flow's Spark Kafka source.

    ``"earliest"`` (MM2 copies new partitions from their start), except when the
    Spark checkpoint has no batch yet and the offset-syncs topic records earlier
    progress on the assigned partitions: then the JSON of
    ``starting_offsets_from_syncs``. A failure to read the syncs is raised, not
    guessed around: starting from the earliest offsets by mistake would copy
    everything again.
    """
    if spark_checkpoint_has_offsets(checkpoint_dir):
        return "earliest"  # ignored by Spark; it resumes from the checkpoint
    import json

    offsets = starting_offsets_from_syncs(config, flow, assignment, checkpoint_dir)
    if not offsets:
        return "earliest"
    return json.dumps({t: {str(p): o for p, o in sorted(per.items())} for t, per in sorted(offsets.items())})
