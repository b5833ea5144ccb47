"""Small helpers for tests that talk to the real test clusters."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def admin(bootstrap: str, **conf) -> AdminClient:
    """``conf``: extra settings, e.g. ``**cluster.client_config()`` for a SASL_SSL test cluster."""
    return AdminClient({"bootstrap.servers": bootstrap, **conf})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None, **conf) -> None:
    client = admin(bootstrap, **conf)  # must outlive the futures
    fs = client.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    for f in fs.values():
        f.result(30)


def produce(bootstrap: str, topic: str, records, **conf) -> None:
    """records: iterable of dicts with key/value/partition/headers/timestamp."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for r in records:
        p.produce(topic, **r)
        p.poll(0)
    assert p.flush(60) == 0


def consume_all(bootstrap: str, topic: str, expected: int | None = None, timeout: float = 60.0, **conf):
    """Read a topic from the beginning to its current end (or until `expected` records)."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"test-reader-{time.time_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf,
    })
    md = c.list_topics(topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out = []
    deadline = time.monotonic() + timeout
    done = {p for p in parts if ends[p] == 0}
    while time.monotonic() < deadline:
        if expected is None and len(done) == len(parts):
            break
        if expected is not None and len(out) >= expected:
            break
        msg = c.poll(0.5)
        if msg is None or msg.error():
            continue
        out.append(msg)
        if msg.offset() + 1 >= ends[msg.partition()]:
            done.add(msg.partition())
    c.close()
    return out


class NumberedProducer(threading.Thread):
    """Writes records with unique ids ("<n>") to a topic until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 400.0, first_id: int = 0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.stop_event = threading.Event()
        self.sent = first_id  # the next id; ids first_id..sent-1 were sent
        self.failed = 0

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})

        def done(err, _msg):
            if err is not None:
                self.failed += 1

        while not self.stop_event.is_set():
            start = time.monotonic()
            for _ in range(int(self.rate / 20)):
                p.produce(self.topic, key=str(self.sent % 97).encode(), value=str(self.sent).encode(),
                          partition=self.sent % self.partitions, on_delivery=done)
                self.sent += 1
            p.poll(0)
            self.stop_event.wait(max(0.0, 0.05 - (time.monotonic() - start)))
        assert p.flush(30) == 0

    def stop(self) -> int:
        self.stop_event.set()
        self.join(60)
        return self.sent
