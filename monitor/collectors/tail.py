"""Follow one topic in a thread of its own: the reader under the heartbeat, offset-sync and checkpoint collectors.

A TopicTail assigns every partition of its topic at a chosen start (the
beginning, or the last N records) and hands each batch of records to a
callback on the event loop. It waits for a topic that does not exist yet,
picks up partitions added later, and survives an unreachable cluster (the
consumer reconnects by itself; reachability is reported by the other
collectors). It never commits: the consumer is only assigned, never subscribed.

Each record is passed with ``live``: True once the tail has reached the end of
that partition (an EOF event) before the record arrived. A live record was
appended to the topic after the tail caught up, so the moment the tail
receives it is an upper bound of its append time, off by the fetch round trip.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from monitor.collectors.cluster import ClusterClient
from monitor.loops import RoundFailures, repeat_in_thread
from sparkmirror import logsetup

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TailedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_type: int
    timestamp_ms: int
    live: bool
    received_at: float


class TopicTail:
    """A daemon thread reading ``topic`` on ``client``'s cluster and calling ``handler(records)`` on ``loop``."""

    def __init__(self, client: ClusterClient, topic: str, handler: Callable[[list[TailedRecord]], None],
                 loop: asyncio.AbstractEventLoop, *, last: int | None = None,
                 on_missing: Callable[[], None] | None = None,
                 on_caught_up: Callable[[], None] | None = None, metadata_interval: float = 10.0,
                 poll_timeout: float = 0.2) -> None:
        self.client = client
        self.topic = topic
        self.handler = handler
        self.loop = loop
        self.last = last  # None: from the beginning; N: the last N records of each partition
        self.on_missing = on_missing
        self.on_caught_up = on_caught_up  # once, when every partition reached its end the first time
        self.metadata_interval = metadata_interval
        self.poll_timeout = poll_timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tail-{client.alias}-{topic}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _deliver(self, fn: Callable, *args) -> None:
        if not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # loop closed between the check and the call
                pass

    def _run(self) -> None:
        logsetup.set_thread_context(cluster=self.client.alias, topic=self.topic)  # on every line of this thread
        consumer = self.client.consumer(**{"fetch.wait.max.ms": 100})
        self._assigned: dict[int, bool] = {}  # partition -> caught up (EOF seen)
        self._next_metadata = 0.0
        self._announced = False
        try:
            # a failing round (a bug here, a consumer call that raises) is logged and the tail
            # reads on: a tail that stopped would leave its flow's figures frozen
            repeat_in_thread(lambda: self._read(consumer), self._stop,
                             RoundFailures(f"tail of {self.topic} on {self.client.alias}", log))
        finally:
            consumer.close()

    def _read(self, consumer) -> None:
        """One round: new partitions when the metadata is due, then one batch of records."""
        assigned = self._assigned
        now = time.monotonic()
        if now >= self._next_metadata:
            self._next_metadata = now + (self.metadata_interval if assigned else 1.0)
            self._assign_new(consumer, assigned)
        if not assigned:
            self._stop.wait(0.5)
            return
        first = consumer.poll(self.poll_timeout)
        if first is None:
            return
        received_at = time.time()
        messages = [first, *consumer.consume(1000, timeout=0)]
        batch = []
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    assigned[m.partition()] = True
                elif err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                    self._next_metadata = 0.0
                continue
            ts_type, ts = m.timestamp()
            batch.append(TailedRecord(m.partition(), m.offset(), m.key(), m.value(), ts_type, ts,
                                      assigned.get(m.partition(), False), received_at))
        if batch:
            self._deliver(self.handler, batch)
        if not self._announced and all(assigned.values()):
            self._announced = True
            if self.on_caught_up is not None:
                self._deliver(self.on_caught_up)

    def _assign_new(self, consumer, assigned: dict[int, bool]) -> None:
        try:
            md = consumer.list_topics(self.topic, timeout=self.client.timeout)
        except Exception as exc:
            log.debug("metadata of %s on %s: %s", self.topic, self.client.alias, exc)
            return
        topic = md.topics.get(self.topic)
        if topic is None or topic.error is not None:
            if not assigned and self.on_missing is not None:
                self._deliver(self.on_missing)
            return
        new = [p for p in sorted(topic.partitions) if p not in assigned]
        if not new:
            return
        starts = []
        for p in new:
            offset = OFFSET_BEGINNING
            if self.last is not None:
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                               timeout=self.client.timeout)
                    offset = max(low, high - self.last)
                except Exception as exc:
                    log.debug("watermarks of %s[%d] on %s: %s", self.topic, p, self.client.alias, exc)
                    return
            starts.append(TopicPartition(self.topic, p, offset))
        consumer.incremental_assign(starts)
        for tp in starts:
            assigned[tp.partition] = False
