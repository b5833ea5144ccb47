"""Small helpers for tests that talk to the real test clusters."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_until


def admin(bootstrap: str, **conf) -> AdminClient:
    """``conf``: extra settings, e.g. ``**cluster.client_config()`` for a SASL_SSL test cluster."""
    return AdminClient({"bootstrap.servers": bootstrap, **conf})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None, **conf) -> None:
    """Create a topic and return once the broker serves it: every partition with a leader.

    CreateTopics answers when the controller has committed the topic; the broker's metadata
    cache follows a moment later, and on a busy machine a describe or a produce in between is
    told UNKNOWN_TOPIC_OR_PART."""
    client = admin(bootstrap, **conf)  # must outlive the futures
    fs = client.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    for f in fs.values():
        f.result(30)
    wait_for_topic(client, name, partitions)


def wait_for_topic(client: AdminClient, name: str, partitions: int, timeout: float = 30.0) -> None:
    def served() -> bool:
        meta = client.list_topics(name, timeout=10).topics.get(name)
        return (meta is not None and meta.error is None and len(meta.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values()))

    wait_until(served, timeout, interval=0.1, what=f"topic {name} with a leader for all {partitions} partitions")


def produce(bootstrap: str, topic: str, records, **conf) -> None:
    """records: iterable of dicts with key/value/partition/headers/timestamp.

    Idempotent unless ``conf`` says otherwise: without it librdkafka keeps many requests in
    flight, and one retried (a topic's first requests, before its leader is known everywhere)
    lands behind later ones, so the source partition itself is out of order, which a test
    checking the order on the target would blame on the mirror."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **conf})
    for r in records:
        while True:
            try:
                p.produce(topic, **r)
                break
            except BufferError:  # the local queue is full: wait for deliveries to make room
                p.poll(0.1)
        p.poll(0)
    assert p.flush(60) == 0


_LEADERSHIP_MOVING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


def _high_watermark(c: Consumer, topic: str, partition: int, timeout: float = 30.0) -> int:
    """The partition's high watermark; retried while its leadership moves (a broker restarted by an
    earlier test may still be taking its partitions back: NOT_LEADER_FOR_PARTITION)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        except KafkaException as e:
            err = e.args[0]
            if time.monotonic() > deadline or not (err.retriable() or err.code() in _LEADERSHIP_MOVING):
                raise
            time.sleep(0.5)


def consume_all(bootstrap: str, topic: str, expected: int | None = None, timeout: float = 60.0, **conf):
    """Read a topic from the beginning to its current end (or until `expected` records).

    A partition is done at its last record or at its end-of-partition event, whichever comes
    first: a transaction's commit marker or an aborted batch at the end has no record to reach."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"test-reader-{time.time_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True, **conf,
    })
    md = c.list_topics(topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
    ends = {p: _high_watermark(c, topic, p) for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out = []
    deadline = time.monotonic() + timeout
    done = {p for p in parts if ends[p] == 0}
    at_end: set[int] = set()  # end-of-partition seen; done once nothing more is queued (it may overtake records)
    while time.monotonic() < deadline:
        if expected is None and len(done) == len(parts):
            break
        if expected is not None and len(out) >= expected:
            break
        msg = c.poll(0.5)
        if msg is None:
            done |= at_end
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
            continue
        out.append(msg)
        if msg.offset() + 1 >= ends[msg.partition()]:
            done.add(msg.partition())
    c.close()
    return out


class NumberedProducer(threading.Thread):
    """Writes records with unique ids ("<n>") to a topic until stopped.

    Id n goes to partition ``n % partitions``, about ``rate`` records a second, sent in
    ``ticks`` bursts a second. ``keyed``: each record has the key ``n % 97``; ``pad``:
    bytes appended to the value after ``|`` (a record of a realistic size). A full
    local queue (BufferError) waits and tries the same id again. ``failed`` counts
    records the broker refused, ``errors`` keeps their messages. ``tick()`` runs once
    per burst on this thread: a subclass can do its own work there.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 400.0, first_id: int = 0, *,
                 ticks: int = 20, keyed: bool = True, pad: bytes = b"", conf: dict | None = None,
                 flush_timeout: float = 30.0, join_timeout: float = 60.0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.ticks, self.keyed, self.pad, self.conf = ticks, keyed, pad, conf or {}
        self.flush_timeout, self.join_timeout = flush_timeout, join_timeout
        self.stop_event = threading.Event()
        self.sent = first_id  # the next id; ids first_id..sent-1 were sent
        self.failed = 0
        self.errors: list[str] = []

    def value(self, n: int) -> bytes:
        return (b"%d|" % n + self.pad) if self.pad else str(n).encode()

    def tick(self) -> None:
        """Called once per burst, on the producing thread."""

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True, **self.conf})

        def done(err, _msg):
            if err is not None:
                self.failed += 1
                self.errors.append(err.str())

        period = 1.0 / self.ticks
        while not self.stop_event.is_set():
            start = time.monotonic()
            for _ in range(int(self.rate / self.ticks)):
                key = str(self.sent % 97).encode() if self.keyed else None
                try:
                    p.produce(self.topic, key=key, value=self.value(self.sent),
                              partition=self.sent % self.partitions, on_delivery=done)
                except BufferError:
                    p.poll(0.1)
                    continue
                self.sent += 1
            p.poll(0)
            self.tick()
            self.stop_event.wait(max(0.0, period - (time.monotonic() - start)))
        assert p.flush(self.flush_timeout) == 0

    def stop(self) -> int:
        self.stop_event.set()
        self.join(self.join_timeout)
        return self.sent
