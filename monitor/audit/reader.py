"""The audit's reads: small ranges of one partition, log starts, the offset-syncs topic.

Blocking confluent-kafka calls, run by the engine in a thread. Every consumer is only
assigned, never subscribed, and never commits (the monitor writes nothing). Fetches
are kept small (``max.partition.fetch.bytes``) so that what the broker sends beyond
the end of a range, and so outside the budget's count, stays small too.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from monitor.audit.digest import Seen, seen
from sparkmirror.errors import RecordFormatError
from sparkmirror.model.records import OffsetSync

#: bytes per partition per fetch: a range's overshoot is at most this
FETCH_BYTES = 64 * 1024


@dataclass
class Read:
    records: list[Seen]
    cost: int           # bytes of every record the read returned
    log_start: int      # the partition's first offset when it was read
    end: int = 0        # the read covered [max(lo, log_start), end): ``hi``, or the log's end if lower


class ClusterReader:
    """One cluster's reads with one isolation level."""

    def __init__(self, alias: str, config: dict[str, str], isolation: str, timeout: float = 10.0) -> None:
        self.alias = alias
        self.timeout = timeout
        base = {k: v for k, v in config.items() if k not in ("group.id", "isolation.level")}
        self._consumer = Consumer({
            **base, "group.id": f"sparkmirror-audit-{uuid.uuid4().hex[:12]}", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "isolation.level": isolation, "max.partition.fetch.bytes": FETCH_BYTES,
            "fetch.max.bytes": 1048576 + FETCH_BYTES, "queued.max.messages.kbytes": 1024, "fetch.wait.max.ms": 50,
        })
        self._admin_config = base
        self._admin: AdminClient | None = None

    def close(self) -> None:
        self._consumer.close()

    def log_starts(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """First offset of each partition, in one ListOffsets call per 250 partitions."""
        out = {}
        for i in range(0, len(partitions), 250):
            chunk = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions[i:i + 250]]
            for tp in self._consumer.offsets_for_times(chunk, timeout=self.timeout):
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

    def read(self, topic: str, partition: int, lo: int, hi: int) -> Read:
        """The records at offsets [lo, hi) that this isolation level sees."""
        low, high = self.watermarks(topic, partition)
        begin = max(lo, low)
        end = min(hi, high)
        records: list[Seen] = []
        cost = 0
        if begin >= end:
            return Read(records, cost, low, begin)
        tp = TopicPartition(topic, partition, begin)
        self._consumer.assign([tp])
        deadline = time.monotonic() + self.timeout * 3
        try:
            done = False
            while not done:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic}[{partition}] {begin}..{end} on {self.alias}")
                for m in self._consumer.consume(500, timeout=0.5):
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done = True
                        elif err.code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                            raise KafkaException(err)
                        continue
                    offset = m.offset()
                    headers = m.headers()
                    s = seen(offset, m.key(), m.value(), headers, *m.timestamp())
                    cost += s.size
                    if offset >= end:
                        done = True
                        break
                    records.append(s)
                    if offset >= end - 1:
                        done = True
                        break
                if not done:
                    pos = self._consumer.position([TopicPartition(topic, partition)])[0].offset
                    done = pos >= end  # read_committed: markers or aborted records closed the range
        finally:
            self._consumer.unassign()
        return Read(records, cost, low, end)

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
                        continue
                    yield m
                    if m.offset() >= end - 1:
                        return
        finally:
            self._consumer.unassign()
