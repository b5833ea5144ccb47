"""At-least-once across SIGKILL, rejected records stop the flow, active-active loops.

Every check counts record by record: each source record carries a unique id, and
the target is read back completely.
"""

from __future__ import annotations

import json
import random
import time

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.kafka import NumberedProducer, consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


KILLS_CATCH_UP = 2  # while a backlog written before the first start is copied
KILLS_STEADY = 2  # while a producer keeps writing
BACKLOG = 100_000


#: per data path: the arguments of the killed runs
PATHS = {
    # capped batches, so that the catch-up takes many and kills land inside them
    "micro-batch": ["--max-records-per-batch", "5000"],
    # records copied as they come, offsets checkpointed every 5 s ("batch" lines): kills land
    # inside short batches, as they would inside the default minute-long ones, in less time
    "real-time": ["--data-path", "real-time", "--real-time-checkpoint-interval", "5"],
}
#: real-time queries of each killed run: kills land with one query and with the partitions dealt
#: over three (each with its own checkpoint), and the runs after a change resume a checkpoint laid
#: out for the other number (the last run takes the default, one query)
REALTIME_SHARDS = [1, 3, 3, 1]


@pytest.mark.timeout(1200)  # five Spark start-ups; about 1.5 minutes on an idle 2-core machine
# The micro-batch loop is the second variant (-m slow): the real-time one's last run takes auto,
# which copies its backlog in micro-batches before it goes real time.
@pytest.mark.parametrize("path", [pytest.param("micro-batch", marks=pytest.mark.slow), "real-time"])
def test_sigkill_at_random_moments_loses_nothing(kafka_clusters, tmp_path, unique, artifacts_dir, path):
    """SIGKILL the whole replicator (driver, Spark JVM, Python workers) at random moments:
    some during start-up, most mid-stream, first while a backlog is copied, then while a
    producer runs; on each data path. The last run takes --data-path auto (so the
    micro-batch case also crosses over to the real-time path mid-stream). Every record
    arrives; per-partition order holds."""
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"crash-{path}-{unique}"
    mirror = f"primary.{topic}"
    create_topic(primary, topic, 6)
    produce(primary, topic, ({"key": str(i % 97).encode(), "value": str(i).encode(), "partition": i % 6}
                             for i in range(BACKLOG)), **{"linger.ms": 50, "enable.idempotence": True})
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    rng = random.Random(unique)
    kills = []
    producer = NumberedProducer(primary, topic, 6, first_id=BACKLOG)
    rep = None
    try:
        for round_ in range(KILLS_CATCH_UP + KILLS_STEADY):
            phase = "catch-up" if round_ < KILLS_CATCH_UP else "steady"
            if phase == "steady" and not producer.is_alive():
                producer.start()
            args = PATHS[path]
            if path == "real-time":
                args = [*args, "--real-time-shards", str(REALTIME_SHARDS[round_])]
            rep = Replicator(config, tmp_path / "ck", tmp_path / f"replicator-{round_}.log", args).start()
            started = time.monotonic()
            if rng.random() < 0.2:  # during start-up: before or while the query starts
                time.sleep(rng.uniform(1, 8))
                moment = "start-up"
            else:  # mid-stream: after 1-3 committed batches of this run, mostly inside the next one
                batches = rng.randint(1, 3)
                _wait_for_batches(rep, batches)
                time.sleep(rng.uniform(0, 2))
                moment = f"after batch {batches - 1} + {time.monotonic() - started:.1f} s"
            assert rep.running(), rep.log()[-3000:]
            rep.kill9()
            kills.append({"round": round_, "phase": phase, "moment": moment, "args": args,
                          "after_start_s": round(time.monotonic() - started, 1),
                          "batches_logged": rep.log().count(" records, "),
                          "on_target_at_kill": _end_offsets_sum(dr, mirror),
                          "sent_at_kill": BACKLOG if phase == "catch-up" else producer.sent})
        rep = Replicator(config, tmp_path / "ck", tmp_path / "replicator-final.log", ["--data-path", "auto"]).start()
        rep.wait_for_log("flow primary->dr: streaming", 180)
        time.sleep(3)
        sent = producer.stop()
        assert producer.failed == 0
        deadline = time.monotonic() + 240
        ids: list[int] = []
        while time.monotonic() < deadline:
            ids = [int(m.value()) for m in consume_all(dr, mirror, timeout=30)]
            if len(set(ids)) >= sent:
                break
            assert rep.running(), rep.log()[-3000:]
            time.sleep(3)
        lost = sent - len(set(ids))
        duplicated = len(ids) - len(set(ids))
        report = {"kills": kills, "kills_total": len(kills), "backlog": BACKLOG, "sent": sent,
                  "on_target": len(ids), "lost": lost, "duplicated": duplicated,
                  "catch_up_kills_before_backlog_copied": sum(1 for k in kills if k["phase"] == "catch-up"
                                                              and k["on_target_at_kill"] < BACKLOG)}
        (artifacts_dir / f"kill9-datapath-{path}.json").write_text(json.dumps(report, indent=2))
        print("kill -9 loop:", json.dumps({k: v for k, v in report.items() if k != "kills"}), kills)
        assert lost == 0, report
        assert set(ids) == set(range(sent))
        # per-partition order survives: the first copy of each record comes in source offset order
        source: dict[int, list[int]] = {}
        for m in consume_all(primary, topic, timeout=30):
            source.setdefault(m.partition(), []).append(int(m.value()))
        by_partition: dict[int, list[int]] = {}
        for m in consume_all(dr, mirror, timeout=30):
            by_partition.setdefault(m.partition(), []).append(int(m.value()))
        for p, seq in by_partition.items():
            assert list(dict.fromkeys(seq)) == source[p], f"partition {p}: target order differs from the source's"
        assert rep.terminate() == 0
    finally:
        producer.stop_event.set()
        if rep is not None and rep.running():
            rep.kill9()


@pytest.mark.timeout(600)
def test_a_kill9_between_real_time_checkpoints_copies_again_only_the_journal_interval(kafka_clusters, tmp_path,
                                                                                       unique):
    """A kill -9 15 s after a real-time checkpoint copies again only what came after the last
    journal of acknowledged positions (every 5 s), not the 15 s since the checkpoint; nothing is
    lost. (The default interval is 5 minutes; 20 s here brings a checkpoint sooner.)"""
    from replicator.settings import ACKNOWLEDGED_JOURNAL_S

    rate, after_checkpoint_s = 400, 15
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"journal-{unique}"
    mirror = f"primary.{topic}"
    create_topic(primary, topic, 3)
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    args = ["--data-path", "real-time", "--real-time-checkpoint-interval", "20"]
    producer = NumberedProducer(primary, topic, 3, rate=rate)
    committed = tmp_path / "ck" / "primary-to-dr.realtime" / "shard-0" / "commits" / "0"
    rep = Replicator(config, tmp_path / "ck", tmp_path / "killed.log", args).start()
    try:
        rep.wait_for_log("flow primary->dr: streaming", 180)
        producer.start()
        rep.wait_until(committed.exists, 120, what="the first checkpoint", interval=0.2)
        time.sleep(after_checkpoint_s)
        rep.kill9()
        rep = Replicator(config, tmp_path / "ck", tmp_path / "after.log", args).start()
        rep.wait_for_log("flow primary->dr: streaming", 180)
        assert "its journal of acknowledged positions), not at its last checkpoint: " in rep.log(), \
            rep.log()[-3000:]
        time.sleep(2)
        sent = producer.stop()
        assert producer.failed == 0
        rep.wait_until(lambda: len({int(m.value()) for m in consume_all(dr, mirror, timeout=30)}) >= sent, 120,
                       what="every record on the target")
        ids = [int(m.value()) for m in consume_all(dr, mirror, timeout=30)]
        assert set(ids) == set(range(sent)), "nothing lost"
        duplicated = len(ids) - len(set(ids))
        print(f"kill -9 {after_checkpoint_s} s after a checkpoint at {rate} records/s: {duplicated} copied again")
        # from the checkpoint it would be ~rate * after_checkpoint_s (6,000)
        assert duplicated <= rate * (ACKNOWLEDGED_JOURNAL_S + 2), duplicated
        assert rep.terminate() == 0
    finally:
        producer.stop_event.set()
        if rep.running():
            rep.kill9()


@pytest.mark.timeout(600)
def test_a_quiet_flow_fetches_with_the_short_wait_and_keeps_it(kafka_clusters, tmp_path, unique):
    """Locally, a real-time flow starts with the short fetch wait; a source that adds little
    never restarts it for another; every record arrives once."""
    from replicator.datapath.fetchwait import SHORT_AFTER_S, SHORT_WAIT_MS

    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"quiet-{unique}"
    create_topic(primary, topic, 3)
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    producer = NumberedProducer(primary, topic, 3, rate=200, pad=b"x" * 1000)
    rep = Replicator(config, tmp_path / "ck", tmp_path / "quiet.log", ["--data-path", "real-time"]).start()
    try:
        rep.wait_for_log(f"fetch.max.wait.ms {SHORT_WAIT_MS}), checkpoint", 180)
        producer.start()
        time.sleep(SHORT_AFTER_S + 5)
        sent = producer.stop()
        assert producer.failed == 0
        assert "real-time fetches wait at most" not in rep.log(), "restarted for another wait"
        mirror = f"primary.{topic}"
        rep.wait_until(lambda: len(consume_all(dr, mirror, timeout=20)) >= sent, 120, what="every record on the target")
        ids = [int(m.value().split(b"|")[0]) for m in consume_all(dr, mirror, timeout=20)]
        assert sorted(ids) == list(range(sent)), "each record exactly once"
        assert rep.terminate() == 0
    finally:
        producer.stop_event.set()
        if rep.running():
            rep.kill9()


def _wait_for_batches(rep: Replicator, n: int, timeout: float = 240) -> None:
    """Until this run logged n batches with records (batch lines say 'N records, ')."""
    rep.wait_until(lambda: rep.log().count(" records, ") >= n, timeout, interval=0.2, what=f"{n} batches with records")


def _end_offsets_sum(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill9-probe", "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions)
    except KafkaException:  # a leader moving, a broker restarting: ask again on the next poll
        return 0
    finally:
        c.close()


@pytest.mark.parametrize("data_path", ["micro-batch", "real-time"])
def test_rejected_record_stops_the_flow_and_is_not_skipped(kafka_clusters, tmp_path, unique, data_path):
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
    rep = Replicator(config, tmp_path / "ck", tmp_path / "replicator.log", extra_args=["--data-path", data_path]).start()
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
