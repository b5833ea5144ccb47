"""A replicator whose lag is known by construction, for measuring the monitor's accuracy.

``SteadyProducer`` writes records into a source topic at a fixed rate, each
stamped with the moment it is produced. ``DelayedCopier`` copies every record
to the mirror topic on the target exactly ``delay`` seconds after its
timestamp, and does what a replicator does besides: MM2 offset-syncs (the
first copied record of each partition, then every ``sync_every`` records, as
MM2's ``offset.lag.max``) on the source cluster, and heartbeats
(``<source>.heartbeats`` on the target, one per second, each itself delivered
``delay`` seconds after its timestamp). So at any moment the true lag in
seconds is ``delay``, the true records lag is ``rate x delay`` and the true
heartbeat latency is ``delay``; after ``stop()`` the true lag in seconds is
``now - first_missing_ms / 1000``. That holds while both threads get the CPU
when they want it; on a loaded machine either can fall behind its schedule, so
both keep a timeline of what they did (``Timeline``: when each record was
acknowledged, and its timestamp) from which the truth at any past moment is
read back (``true_seconds_lag``, ``true_records_lag``, ``true_heartbeat_latency``).

The records on the wire are MM2's own bytes (``sparkmirror.model.records``).
Both run in their own threads; ``close()`` stops them.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from sparkmirror.model.records import Heartbeat, OffsetSync


def produce(producer: Producer, topic: str, value: bytes, **kwargs) -> None:
    """``producer.produce``, waiting out a topic its metadata does not show yet (a loaded broker)."""
    for _ in range(600):
        try:
            producer.produce(topic, value, **kwargs)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION,
                                          KafkaError._QUEUE_FULL):
                raise
            producer.poll(0.1)
    raise RuntimeError(f"{topic}: the producer never learnt about the topic")


class Timeline:
    """When each record of a partition was acknowledged (wall clock), in offset order, with its timestamp.

    Acknowledgements of one partition come in offset order (one idempotent producer), so the
    records of a partition on the cluster at a moment are a prefix: ``count_at`` is its length.
    """

    def __init__(self, partitions: int) -> None:
        self.acked: list[list[float]] = [[] for _ in range(partitions)]
        self.timestamps: list[list[int]] = [[] for _ in range(partitions)]

    def callback(self, timestamp_ms: int | None):
        """A delivery callback that appends the record (``timestamp_ms`` None: the message's own)."""
        def record(err, msg) -> None:
            if err is None:
                p = msg.partition()
                self.acked[p].append(time.time())
                self.timestamps[p].append(msg.timestamp()[1] if timestamp_ms is None else timestamp_ms)
        return record

    def count_at(self, partition: int, at: float) -> int:
        return bisect.bisect_right(self.acked[partition], at)

    def timestamp_of(self, partition: int, index: int) -> int | None:
        ts = self.timestamps[partition]
        return ts[index] if index < len(ts) else None


class SteadyProducer:
    """``rate`` records per second into ``topic``, spread round-robin over its partitions."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.produced = 0
        self.written = Timeline(partitions)  # when each record was on the source, by partition and offset
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"steady-{topic}", daemon=True)

    def start(self) -> "SteadyProducer":
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = started + self.produced / self.rate
            wait = due - time.monotonic()
            if wait > 0:
                self._stop.wait(wait)
                continue
            ts = int(time.time() * 1000)
            produce(self._producer, self.topic, b"v", key=b"k", partition=self.produced % self.partitions,
                    timestamp=ts, on_delivery=self.written.callback(ts))
            self._producer.poll(0)
            self.produced += 1
        self._producer.flush(30)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


class DelayedCopier:
    """Copies ``topic`` (source) to ``remote`` (target) ``delay`` seconds after each record's timestamp."""

    def __init__(self, source: str, target: str, topic: str, remote: str, partitions: int, delay: float, *,
                 syncs_topic: str, heartbeats_topic: str, source_alias: str, target_alias: str,
                 sync_every: int = 100, heartbeat_every: float = 1.0) -> None:
        self.topic, self.remote, self.partitions, self.delay = topic, remote, partitions, delay
        self.syncs_topic, self.heartbeats_topic = syncs_topic, heartbeats_topic
        self.source_alias, self.target_alias = source_alias, target_alias
        self.sync_every, self.heartbeat_every = sync_every, heartbeat_every
        self.copied = 0
        self.first_missing_ms: int | None = None   # after stop(): timestamp of the oldest record not copied
        self.mirrored = Timeline(partitions)  # when each copy was on the target, by source partition and offset
        self.beats: list[tuple[float, int]] = []  # (acknowledged at, timestamp ms) of each heartbeat
        self._source_bootstrap = source
        self._target = Producer({"bootstrap.servers": target, "linger.ms": 0, "enable.idempotence": True})
        self._syncs = Producer({"bootstrap.servers": source, "linger.ms": 0})
        self._since_sync = [None] * partitions   # records copied since the partition's last sync (None: none yet)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"copier-{topic}", daemon=True)

    def start(self) -> "DelayedCopier":
        self._thread.start()
        return self

    # --- the copy loop (its own thread) -------------------------------------------------------
    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self._source_bootstrap, "group.id": "copier-unused",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "fetch.wait.max.ms": 5})
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        pending: list[deque] = [deque() for _ in range(self.partitions)]  # (offset, timestamp_ms)
        beats: deque[int] = deque()
        next_beat = time.time()
        try:
            while not self._stop.is_set():
                for m in consumer.consume(1000, timeout=0.002):
                    if m.error() is None:
                        pending[m.partition()].append((m.offset(), m.timestamp()[1]))
                    elif m.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(m.error())
                now = time.time()
                if now >= next_beat:
                    beats.append(int(now * 1000))
                    next_beat += self.heartbeat_every
                while beats and beats[0] / 1000 + self.delay <= now:
                    hb = Heartbeat(self.target_alias, self.source_alias, beats.popleft())
                    produce(self._target, self.heartbeats_topic, hb.encode_value(), key=hb.encode_key(),
                            timestamp=hb.timestamp_ms, on_delivery=self._beat_delivered(hb.timestamp_ms))
                for p, queue in enumerate(pending):
                    while queue and queue[0][1] / 1000 + self.delay <= now:
                        offset, ts = queue.popleft()
                        produce(self._target, self.remote, b"v", key=b"k", partition=p, timestamp=ts,
                                on_delivery=self._delivered(p, offset))
                        self.copied += 1
                self._target.poll(0)
                self._syncs.poll(0)
            heads = [q[0][1] for q in pending if q]
            self.first_missing_ms = min(heads) if heads else None
        finally:
            consumer.close()
            self._target.flush(30)
            self._syncs.flush(30)

    def _beat_delivered(self, timestamp_ms: int):
        def callback(err, msg) -> None:
            if err is None:
                self.beats.append((time.time(), timestamp_ms))
        return callback

    def _delivered(self, partition: int, upstream: int):
        record = self.mirrored.callback(None)

        def callback(err, msg) -> None:
            if err is not None:
                raise RuntimeError(err)
            record(err, msg)
            since = self._since_sync[partition]
            if since is None or since + 1 >= self.sync_every:
                sync = OffsetSync(self.topic, partition, upstream, msg.offset())
                produce(self._syncs, self.syncs_topic, sync.encode_value(), key=sync.encode_key())
                self._since_sync[partition] = 0
            else:
                self._since_sync[partition] = since + 1
        return callback

    # --- the truth at a past moment, read back from the timelines --------------------------------
    def true_seconds_lag(self, producer: "SteadyProducer", partition: int, at: float) -> float:
        """Seconds lag of ``partition`` at wall time ``at``: the age then of the first source record
        not yet on the target (0 when every record written by then was copied). Ask once the copier
        has read past ``at`` (the timestamps of records it had not read by then come from its reads)."""
        copied = self.mirrored.count_at(partition, at)
        ts = producer.written.timestamp_of(partition, copied)
        return 0.0 if ts is None or ts / 1000 > at else at - ts / 1000

    def true_records_lag(self, producer: "SteadyProducer", partition: int, at: float) -> int:
        return max(0, producer.written.count_at(partition, at) - self.mirrored.count_at(partition, at))

    def true_heartbeat_latency(self, at: float) -> float | None:
        """Latency of the newest heartbeat on the target at ``at``: its acknowledgement minus its timestamp."""
        i = bisect.bisect_right(self.beats, (at, float("inf")))
        return None if i == 0 else self.beats[i - 1][0] - self.beats[i - 1][1] / 1000

    def stop(self) -> None:
        """Stop copying (and heartbeating): from now on the flow is stalled."""
        self._stop.set()
        self._thread.join(30)
