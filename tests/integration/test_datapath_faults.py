"""At-least-once across SIGKILL, rejected records stop the flow, active-active loops.

Every check counts record by record: each source record carries a unique id, and
the target is read back completely.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


class SteadyProducer(threading.Thread):
    """Writes records with unique ids ("<n>") to a topic until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 400.0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.stop_event = threading.Event()
        self.sent = 0
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


def test_sigkill_restart_loop_loses_nothing(kafka_clusters, tmp_path, unique, artifacts_dir):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"crash-{unique}"
    create_topic(primary, topic, 6)
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    producer = SteadyProducer(primary, topic, 6)
    producer.start()
    rng = random.Random(unique)
    kills = []
    for round_ in range(3):
        rep = Replicator(config, tmp_path / "ck", tmp_path / f"replicator-{round_}.log").start()
        # sometimes during startup, mostly mid-stream
        delay = rng.uniform(8, 40)
        time.sleep(delay)
        assert rep.running(), rep.log()[-3000:]
        rep.kill9()
        kills.append(round(delay, 1))
    rep = Replicator(config, tmp_path / "ck", tmp_path / "replicator-final.log").start()
    try:
        time.sleep(5)
        sent = producer.stop()
        assert producer.failed == 0
        deadline = time.monotonic() + 240
        ids: list[int] = []
        while time.monotonic() < deadline:
            ids = [int(m.value()) for m in consume_all(dr, f"primary.{topic}", timeout=20)]
            if len(set(ids)) >= sent:
                break
            time.sleep(3)
        lost = sent - len(set(ids))
        duplicated = len(ids) - len(set(ids))
        report = {"kills_after_s": kills, "sent": sent, "on_target": len(ids), "lost": lost, "duplicated": duplicated}
        (artifacts_dir / "kill9-datapath.json").write_text(json.dumps(report, indent=2))
        print("kill -9 loop:", report)
        assert lost == 0, report
        assert set(ids) == set(range(sent))
        # per-partition order survives: ids within a partition increase on the target
        by_partition: dict[int, list[int]] = {}
        for m in consume_all(dr, f"primary.{topic}", timeout=20):
            by_partition.setdefault(m.partition(), []).append(int(m.value()))
        for p, seq in by_partition.items():
            first_seen = list(dict.fromkeys(seq))
            assert first_seen == sorted(first_seen), f"partition {p} out of order"
        assert rep.terminate() == 0
    finally:
        producer.stop_event.set()
        if rep.running():
            rep.kill9()


def test_rejected_record_stops_the_flow_and_is_not_skipped(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"reject-{unique}"
    create_topic(primary, topic, 1)
    # the mirror topic exists already, with a record size limit the source does not have
    create_topic(dr, f"primary.{topic}", 1, config={"max.message.bytes": "2000"})
    records = [{"key": b"k", "value": b"small-%d" % i} for i in range(5)]
    records.append({"key": b"k", "value": b"B" * 5000})
    records += [{"key": b"k", "value": b"after-%d" % i} for i in range(5)]
    produce(primary, topic, records)
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    rep = Replicator(config, tmp_path / "ck", tmp_path / "replicator.log").start()
    try:
        code = rep.wait(240)
    finally:
        if rep.running():
            rep.kill9()
    log = rep.log()
    assert code == 1, log[-3000:]
    error_line = next(l for l in log.splitlines() if l.startswith("sparkmirror: error:"))
    for part in (f"topic {topic}", "partition 0", "offset 5", "cluster dr", f"primary.{topic}"):
        assert part in error_line, error_line
    # Nothing at or after the rejected record reached the target, and nothing before it
    # was skipped (records batched with it may have been rejected together with it).
    mirrored = [m.value() for m in consume_all(dr, f"primary.{topic}")]
    assert mirrored == [b"small-%d" % i for i in range(len(mirrored))]


def test_active_active_never_loops(kafka_clusters, tmp_path, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    on_primary, on_dr = f"aa-p-{unique}", f"aa-d-{unique}"
    create_topic(primary, on_primary, 2)
    create_topic(dr, on_dr, 2)
    produce(primary, on_primary, [{"value": b"p%d" % i} for i in range(50)])
    produce(dr, on_dr, [{"value": b"d%d" % i} for i in range(50)])
    # The filter matches every name containing the test's topics, mirrors included:
    # only the policy's cycle rule keeps dr.aa-d-… on primary from going back to dr.
    config = write_config(tmp_path / "mm2.properties", primary, dr, {
        "topics": f".*aa-.-{unique}",
        "refresh.topics.interval.seconds": "3",
    }, flows=("primary->dr", "dr->primary"))

    def names(bootstrap):
        return {t for t in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics if unique in t}

    with Replicator(config, tmp_path / "ck", tmp_path / "replicator.log") as rep:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if f"primary.{on_primary}" in names(dr) and f"dr.{on_dr}" in names(primary):
                if len(consume_all(dr, f"primary.{on_primary}", timeout=5)) == 50 and \
                        len(consume_all(primary, f"dr.{on_dr}", timeout=5)) == 50:
                    break
            assert rep.running(), rep.log()[-3000:]
            time.sleep(2)
        stable_primary, stable_dr = names(primary), names(dr)
        time.sleep(12)  # several topic refreshes later
        assert names(primary) == stable_primary == {on_primary, f"dr.{on_dr}"}
        assert names(dr) == stable_dr == {on_dr, f"primary.{on_primary}"}
        assert rep.terminate() == 0
    hb_primary = {t for t in AdminClient({"bootstrap.servers": primary}).list_topics(timeout=10).topics if "heartbeats" in t}
    assert not any(t.startswith(("primary.dr.", "dr.primary.")) for t in hb_primary)
