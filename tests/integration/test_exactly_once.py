"""Exactly-once mode across SIGKILL: a read_committed consumer on the target sees every record once.

The flow runs with ``primary->dr.exactly.once.support = required`` (eos_writer:
one transaction per source partition, progress committed in it). The real
replicator process group is killed with -9 at random moments while a producer
writes unique ids; afterwards every id is counted on the target, record by
record, as an application reading with ``isolation.level=read_committed`` would.
"""

from __future__ import annotations

import json
import random
import re
import time

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

from replicator.datapath import eos_writer
from replicator.datapath.eos_writer import EosWriterSpec, progress_group, write_partition_eos
from replicator.datapath.writer import WriterSpec
from tests.support.kafka import NumberedProducer, create_topic
from tests.support.replicator import Replicator, write_config

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 6
#: how each run ends: after a random delay, or the moment a transaction holds records on the target
KILL_AT = ("random", "open-transaction", "open-transaction")


def wait_for_open_transaction(bootstrap: str, topic: str, timeout: float) -> bool:
    """True once some partition's last stable offset trails its high watermark (records in an
    open transaction), False after ``timeout``."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    client = AdminClient({"bootstrap.servers": bootstrap})
    tps = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stable = client.list_offsets(tps, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5)
            high = client.list_offsets(tps, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=5)
            lso = {tp.partition: f.result().offset for tp, f in stable.items()}
            if any(f.result().offset > lso[tp.partition] for tp, f in high.items()):
                return True
        except Exception:  # the mirror topic does not exist yet
            time.sleep(0.5)
    return False


def read_ids(bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 60.0,
             idle: float = 4.0) -> list[tuple[int, int]]:
    """(partition, id) of every record, in partition order, read until ``expected`` distinct ids
    are in and nothing new came for ``idle`` seconds (so duplicates after them are seen too)."""
    # A reset goes to the start, never past records (the default, latest, skips what is there).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-eos-reader-{time.time_ns()}",
                  "enable.auto.commit": False, "isolation.level": isolation, "auto.offset.reset": "earliest"})
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    last_new = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                if len(seen) >= expected and time.monotonic() - last_new > idle:
                    break
                continue
            last_new = time.monotonic()
            value = int(msg.value())
            out.append((msg.partition(), value))
            seen.add(value)
    finally:
        c.close()
    return out


def test_sigkill_restart_loop_exactly_once(kafka_clusters, tmp_path, unique, artifacts_dir):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"eos-{unique}"
    mirror = f"primary.{topic}"
    create_topic(primary, topic, PARTITIONS)
    config = write_config(tmp_path / "mm2.properties", primary, dr, {
        "primary->dr.topics": topic,
        "primary->dr.exactly.once.support": "required",
    })
    producer = NumberedProducer(primary, topic, PARTITIONS)
    producer.start()
    rng = random.Random(unique)
    kills = []
    logs = []
    rep = None
    try:
        for round_, kind in enumerate(KILL_AT):
            log_file = tmp_path / f"replicator-{round_}.log"
            logs.append(log_file)
            rep = Replicator(config, tmp_path / "ck", log_file).start()
            started = time.monotonic()
            if kind == "random":
                # Startup (JVM, query) takes 10-20 s here: some land in it, others anywhere in a
                # batch (between a partition's commit and Spark's batch commit too).
                time.sleep(rng.uniform(8, 22))
            else:
                kind = "open-transaction" if wait_for_open_transaction(dr, mirror, 120) else "open-transaction-not-seen"
            assert rep.running(), rep.log()[-3000:]
            rep.kill9()
            kills.append({"after_s": round(time.monotonic() - started, 1), "at": kind})
        logs.append(tmp_path / "replicator-final.log")
        rep = Replicator(config, tmp_path / "ck", logs[-1]).start()
        rep.wait_for_log("exactly-once (primary->dr.exactly.once.support = required", timeout=180)
        time.sleep(5)
        sent = producer.stop()
        assert producer.failed == 0
        # Wait for the replicator to copy everything, then read the whole mirror topic.
        deadline = time.monotonic() + 240
        records: list[tuple[int, int]] = []
        while time.monotonic() < deadline:
            records = read_ids(dr, mirror, "read_committed", sent, timeout=30)
            if len({v for _, v in records}) >= sent:
                break
            assert rep.running(), rep.log()[-3000:]
        ids = [v for _, v in records]
        lost = sent - len(set(ids))
        duplicated = len(ids) - len(set(ids))
        # What a read_uncommitted reader sees as well: the aborted transactions of the killed runs.
        uncommitted = read_ids(dr, mirror, "read_uncommitted", sent, timeout=30)
        log_text = "".join(p.read_text(errors="replace") for p in logs if p.exists())
        skipped = sum(int(n) for n in re.findall(r"(\d+) records not written again", log_text))
        report = {
            "mode": "primary->dr.exactly.once.support = required",
            "kills": len(kills), "kill_moments": kills, "sent": sent, "records_checked": len(ids),
            "lost": lost, "duplicated": duplicated,
            "read_uncommitted_records": len(uncommitted),
            "aborted_records_seen_by_read_uncommitted": len(uncommitted) - len(ids),
            "records_skipped_after_restarts": skipped,
        }
        (artifacts_dir / "kill9-exactly-once.json").write_text(json.dumps(report, indent=2))
        print("kill -9 loop, exactly-once:", report)
        assert lost == 0, report
        assert any(k["at"] == "open-transaction" for k in kills), report
        assert duplicated == 0, report
        assert set(ids) == set(range(sent))
        # Order per partition: the producer wrote increasing ids into each partition.
        by_partition: dict[int, list[int]] = {}
        for p, v in records:
            by_partition.setdefault(p, []).append(v)
        for p, seq in by_partition.items():
            assert seq == sorted(seq), f"partition {p} out of order"
            assert all(v % PARTITIONS == p for v in seq), f"partition {p} holds another partition's records"
        # The progress sits on the target, in the group the replicator named.
        c = Consumer({"bootstrap.servers": dr, "group.id": progress_group("primary", "dr")})
        try:
            committed = c.committed([TopicPartition(mirror, p) for p in range(PARTITIONS)], timeout=30)
        finally:
            c.close()
        assert sum(tp.offset for tp in committed) == sent, committed
        assert rep.terminate() == 0
    finally:
        producer.stop_event.set()
        if rep is not None and rep.running():
            rep.kill9()


def _spark_rows(topic: str, partition: int, offsets: range) -> pa.RecordBatch:
    """Source records as Spark's Kafka source hands them to the writer (one Arrow batch)."""
    return pa.RecordBatch.from_pydict({
        "key": [b"k%d" % o for o in offsets], "value": [b"%d" % o for o in offsets],
        "topic": [topic] * len(offsets), "partition": [partition] * len(offsets), "offset": list(offsets),
        "timestamp": [1_700_000_000_000_000 + o for o in offsets], "headers": [None] * len(offsets),
    }, schema=pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                         ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us")),
                         ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))]))


def test_progress_write_that_times_out_is_retried_before_the_commit(kafka_clusters, unique, monkeypatch):
    """The progress write of a transaction times out once (a transaction coordinator slower
    than the caller waits, on a real broker): the records must not be committed without
    their progress, or the replay of the batch writes them a second time."""
    import confluent_kafka

    dr = kafka_clusters.dr.bootstrap
    source_topic, mirror = f"eos-progress-{unique}", f"primary.eos-progress-{unique}"
    # The rows carry timestamps from 2023: under the default 7-day retention, the broker's
    # retention check (every 5 s here) deleted them before the read, now and then.
    create_topic(dr, mirror, 1, config={"retention.ms": "-1"})

    class SlowCoordinatorOnce(confluent_kafka.Producer):
        timeouts = 0

        def send_offsets_to_transaction(self, offsets, metadata, timeout=-1):
            if SlowCoordinatorOnce.timeouts == 0:
                SlowCoordinatorOnce.timeouts += 1
                timeout = 0.000001  # the coordinator answers after the caller stopped waiting
            return super().send_offsets_to_transaction(offsets, metadata, timeout)

    monkeypatch.setattr(confluent_kafka, "Producer", SlowCoordinatorOnce)
    # The writer keeps its progress reader for the next task, as in a Python worker; here the
    # test's own, closed at the end (one left open would keep reconnecting once the brokers stop).
    readers: dict = {}
    monkeypatch.setattr(eos_writer, "_READERS", readers)
    spec = EosWriterSpec(WriterSpec("primary", "dr", (("bootstrap.servers", dr),), ((source_topic, mirror),)),
                         group=f"__sparkmirror-eos-test-{unique}")
    rows = _spark_rows(source_topic, 0, range(10))
    try:
        (first,) = write_partition_eos(spec, [rows])
        assert SlowCoordinatorOnce.timeouts == 1
        assert first.column("records").to_pylist() == [10]
        # Spark replays the batch (the driver died before its commit): nothing is written again.
        (replay,) = write_partition_eos(spec, [rows])
    finally:
        for reader in readers.values():
            reader.close()
    assert replay.column("skipped").to_pylist() == [10] and replay.column("records").to_pylist() == [0]
    ids = read_ids(dr, mirror, "read_committed", 10, timeout=120, idle=2)
    assert [v for _p, v in ids] == list(range(10))
