"""The audit's reads: small ranges of one partition, log starts, the offset-syncs topic.

Blocking confluent-kafka calls, run by the engine in a thread. Every consumer is only
assigned, never subscribed, and never commits (the monitor writes nothing).

What the brokers spend on the audit is mostly per request, not per byte (a fetch is sent
from the page cache without a copy), so a read asks for as little as it can: no
watermark query before a range (the end-of-partition event and the offset-reset error
tell the same), and content stretches through a consumer of their own whose fetches hold
a whole stretch (``BULK_FETCH_BYTES``), with at most one response queued ahead. Loss
windows are a few records each: their consumer fetches ``FETCH_BYTES``, so that what the
broker sends past a window's end, outside the budget's count, stays small.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from monitor.audit.digest import Seen, seen
from sparkmirror.errors import RecordFormatError
from sparkmirror.logsetup import LibrdkafkaLog
from sparkmirror.model.records import OffsetSync

#: bytes per partition per fetch of loss windows and syncs: a range's overshoot is at most this
FETCH_BYTES = 64 * 1024
#: the same for content stretches (500 records of 1 KB in one fetch): bench/NOTES.md, "The audit"
BULK_FETCH_BYTES = 512 * 1024
#: what one ``read_many`` is meant to bring (content.py fills its batches to it). The bulk
#: consumer's queue stays at one fetch: a queue of a whole batch prefetched past the ranges' ends,
#: four times the fetches at 10,000 partitions (bench/NOTES.md, "The audit")
BATCH_BYTES = 1024 * 1024


@dataclass
class Read:
    records: list[Seen]
    cost: int           # bytes of every record the read returned
    log_start: int      # the log start when the range began below it, else the range's first offset
    end: int = 0        # the read covered [max(lo, log_start), end): ``hi``, or the log's end if lower


class ClusterReader:
    """One cluster's reads with one isolation level."""

    def __init__(self, alias: str, config: dict[str, str], isolation: str, timeout: float = 10.0,
                 bulk_fetch_bytes: int | None = None) -> None:
        self.alias = alias
        self.timeout = timeout
        self.isolation = isolation
        self.bulk_fetch_bytes = bulk_fetch_bytes or BULK_FETCH_BYTES
        base = {k: v for k, v in config.items() if k not in ("group.id", "isolation.level")}
        # librdkafka's own lines (a cluster down, every backoff) through logging, at DEBUG with the
        # cluster, as the monitor's other clients: never raw text on stderr beside JSON logs
        base["logger"] = LibrdkafkaLog(f"monitor.audit.librdkafka.{alias}", alias)
        self._base = base
        self._consumer = self._new_consumer(FETCH_BYTES)
        self._bulk: Consumer | None = None
        self._admin_config = base
        self._admin: AdminClient | None = None

    def _new_consumer(self, fetch: int) -> Consumer:
        return Consumer({
            **self._base, "group.id": f"sparkmirror-audit-{uuid.uuid4().hex[:12]}", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True, "auto.offset.reset": "error",
            "isolation.level": self.isolation, "max.partition.fetch.bytes": fetch,
            "fetch.max.bytes": 1048576 + fetch, "queued.max.messages.kbytes": max(fetch // 1024, 64),
            "fetch.wait.max.ms": 50,
        })

    def close(self) -> None:
        self._consumer.close()
        if self._bulk is not None:
            self._bulk.close()

    def log_starts(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """First offset of each partition, in one ListOffsets call per 250 partitions."""
        out = {}
        for i in range(0, len(partitions), 250):
            chunk = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions[i:i + 250]]
            try:
                got = self._consumer.offsets_for_times(chunk, timeout=self.timeout)
            except KafkaException:
                # one partition the cluster does not have (a sync naming it) fails the whole call:
                # ask one by one, and leave out those that fail
                got = []
                for tp in chunk:
                    try:
                        got += self._consumer.offsets_for_times([tp], timeout=self.timeout)
                    except KafkaException:
                        continue
            for tp in got:
                if tp.error is None and tp.offset >= 0:
                    out[(tp.topic, tp.partition)] = tp.offset
        return out

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout)

    def offsets_for_time(self, partitions: list[tuple[str, int]], ms: int) -> dict[tuple[str, int], int]:
        got = self._consumer.offsets_for_times([TopicPartition(t, p, ms) for t, p in partitions],
                                               timeout=self.timeout)
        return {(tp.topic, tp.partition): tp.offset for tp in got if tp.error is None}

    def compacted(self, topics: list[str]) -> dict[str, bool]:
        """Whether each topic's cleanup.policy includes compact (topics that fail are left out)."""
        if not topics:
            return {}
        if self._admin is None:
            self._admin = AdminClient(dict(self._admin_config))
        futures = self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                               request_timeout=self.timeout)
        out = {}
        for resource, future in futures.items():
            try:
                entries = future.result(self.timeout + 1)
            except KafkaException:
                continue
            policy = entries.get("cleanup.policy")
            out[resource.name] = bool(policy and "compact" in (policy.value or ""))
        return out

    def read(self, topic: str, partition: int, lo: int, hi: int, *, bulk: bool = False) -> Read:
        """The records at offsets [lo, hi) that this isolation level sees (``bulk``: a content
        stretch, read through the consumer with the larger fetches).

        No watermark query before the read: the log's end shows as the end-of-partition event, and a
        range starting below the log start as an offset-reset error, after which the log start is
        asked for and the read goes on from there. So the Read's ``log_start`` is the partition's log
        start only when the range began below it; otherwise it is ``lo`` (the log started at or before)."""
        if lo >= hi:
            return Read([], 0, lo, lo)
        if bulk and self._bulk is None:
            self._bulk = self._new_consumer(self.bulk_fetch_bytes)
        consumer = self._bulk if bulk else self._consumer
        records: list[Seen] = []
        cost, low, end = 0, lo, hi
        consumer.assign([TopicPartition(topic, partition, lo)])
        deadline = time.monotonic() + self.timeout * 3
        try:
            done = False
            while not done:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic}[{partition}] {lo}..{hi} on {self.alias}")
                for m in consumer.consume(500, timeout=0.5):
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            end = min(hi, max(m.offset(), low))
                            done = True
                        elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                            low, high = self.watermarks(topic, partition)
                            if low >= min(hi, high):
                                end, done = max(low, min(hi, high)), True
                            else:
                                consumer.assign([TopicPartition(topic, partition, low)])
                            break
                        elif err.code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                            raise KafkaException(err)
                        continue
                    offset = m.offset()
                    s = seen(offset, m.key(), m.value(), m.headers(), *m.timestamp())
                    cost += s.size
                    if offset >= hi:
                        done = True
                        break
                    records.append(s)
                    if offset >= hi - 1:
                        done = True
                        break
                if not done:
                    pos = consumer.position([TopicPartition(topic, partition)])[0].offset
                    done = pos >= hi  # read_committed: markers or aborted records closed the range
        finally:
            consumer.unassign()
        return Read(records, cost, low, end)

    def read_many(self, ranges: list[tuple[str, int, int, int]]) -> list[Read]:
        """Content stretches of several partitions, (topic, partition, lo, hi) each, read together
        through the bulk consumer, so that one fetch carries them all; a Read per range, in order.
        A range that begins below its log start is read again on its own (``read``)."""
        if len(ranges) == 1:
            t, p, lo, hi = ranges[0]
            return [self.read(t, p, lo, hi, bulk=True)]
        if self._bulk is None:
            self._bulk = self._new_consumer(self.bulk_fetch_bytes)
        consumer = self._bulk
        key = {(t, p): i for i, (t, p, _, _) in enumerate(ranges)}
        if len(key) < len(ranges):
            raise ValueError("one range per partition")
        reads = [Read([], 0, lo, hi) for _, _, lo, hi in ranges]
        open_ = {i for i, (_, _, lo, hi) in enumerate(ranges) if lo < hi}
        again: list[int] = []
        paused: list[TopicPartition] = []
        for i in set(range(len(ranges))) - open_:
            reads[i].end = reads[i].log_start
        consumer.assign([TopicPartition(t, p, lo) for i, (t, p, lo, _) in enumerate(ranges) if i in open_])
        deadline = time.monotonic() + self.timeout * 3
        try:
            while open_:
                if time.monotonic() > deadline:
                    t, p, lo, hi = ranges[min(open_)]
                    raise TimeoutError(f"reading {len(open_)} ranges, {t}[{p}] {lo}..{hi} among them, on {self.alias}")
                closed: set[int] = set()
                for m in consumer.consume(1000, timeout=0.5):
                    i = key.get((m.topic(), m.partition()))
                    if i is None or i not in open_ or i in closed:
                        continue
                    err, r, hi = m.error(), reads[i], ranges[i][3]
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            r.end = min(hi, max(m.offset(), r.log_start))
                            closed.add(i)
                        elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                            again.append(i)
                            closed.add(i)
                        elif err.code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                            raise KafkaException(err)
                        continue
                    offset = m.offset()
                    sn = seen(offset, m.key(), m.value(), m.headers(), *m.timestamp())
                    r.cost += sn.size
                    if offset < hi:
                        r.records.append(sn)
                    if offset >= hi - 1:
                        closed.add(i)
                still = sorted(open_ - closed)
                if still:  # read_committed: markers or aborted records closed a range
                    tps = consumer.position([TopicPartition(*ranges[i][:2]) for i in still])
                    closed.update(i for i, tp in zip(still, tps) if tp.offset >= ranges[i][3])
                if closed:
                    done = [TopicPartition(*ranges[i][:2]) for i in closed]
                    consumer.pause(done)  # no more fetches of a range that is done
                    paused += done
                    open_ -= closed
        finally:
            if paused:  # a pause outlives unassign: the partition's next read would get nothing
                consumer.resume(paused)
            consumer.unassign()
        for i in again:
            reads[i] = self.read(*ranges[i], bulk=True)
        return reads

    def read_syncs(self, topic: str, positions: dict[int, int]) -> tuple[list[OffsetSync], dict[int, int], int]:
        """Every offset-sync after ``positions`` (partition -> next offset) up to the end;
        returns them in order, the new positions, and how many records did not decode."""
        md = self._consumer.list_topics(topic, timeout=self.timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return [], positions, 0
        positions = dict(positions)
        out: list[OffsetSync] = []
        bad = 0
        for p in sorted(t.partitions):
            low, high = self.watermarks(topic, p)
            start = max(positions.get(p, 0), low)
            if start >= high:
                positions[p] = max(positions.get(p, 0), start)
                continue
            for s in self._range_raw(topic, p, start, high):
                try:
                    out.append(OffsetSync.decode(s.key(), s.value()))
                except RecordFormatError:
                    bad += 1
                positions[p] = s.offset() + 1
            positions[p] = max(positions.get(p, 0), high)
        return out, positions, bad

    def _range_raw(self, topic: str, partition: int, start: int, end: int):
        self._consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + self.timeout * 3
        try:
            while time.monotonic() < deadline:
                for m in self._consumer.consume(1000, timeout=0.5):
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            return
                        if m.error().code() == KafkaError._AUTO_OFFSET_RESET:  # compacted or deleted since
                            self._consumer.assign([TopicPartition(topic, partition, self.watermarks(topic, partition)[0])])
                            break
                        continue
                    yield m
                    if m.offset() >= end - 1:
                        return
        finally:
            self._consumer.unassign()
