"""Broker outages under a running replicator and monitor: nothing lost, nothing needs a hand.

On a private cluster pair (brokers are stopped and restarted here, which the
session clusters' other users must never see), one replicator run and one
``sparkmirror monitor`` process live through:

- the target broker stopped for ~30 s and restarted mid-stream,
- the source broker stopped for ~30 s and restarted mid-stream,

while a producer keeps writing records with unique ids. Each phase's ids are a
range of the producer's sequence, so lost and duplicated records are counted per
phase, record by record, after the target is read back completely. The monitor
must keep answering /metrics during each outage, show the stopped cluster
unreachable (and its flow not OK) in /api/status, and recover afterwards. The
counts go to test-artifacts/broker-outages.json.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.support.clusters import cluster_pair
from tests.support.kafka import NumberedProducer, consume_all, create_topic, produce
from tests.support.prometheus import MonitorProcess
from tests.support.replicator import Replicator, write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

OUTAGE_S = 30.0
BURST = 60_000  # a backlog whose batch lasts long enough to kill its tasks' workers again and again


@pytest.fixture(scope="module")
def outage_clusters(tmp_path_factory):
    """Clusters this module stops and restarts; nobody else uses them."""
    yield from cluster_pair(tmp_path_factory.mktemp("kafka-outages"))


def count_by_phase(ids: list[int], phases: list[tuple[str, int, int]]) -> dict[str, dict]:
    """Per phase (name, first id, end id): sent, lost and duplicated, from the ids read back."""
    seen: dict[int, int] = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
    out = {}
    for name, lo, hi in phases:
        rng = range(lo, hi)
        out[name] = {
            "ids": [lo, hi],
            "sent": len(rng),
            "lost": sum(1 for i in rng if i not in seen),
            "duplicated": sum(seen[i] - 1 for i in rng if i in seen),
        }
    return out


def read_ids(bootstrap: str, topic: str, want: int, timeout: float = 240.0) -> list[int]:
    """Every id on ``topic``, once at least ``want`` distinct ids arrived (or the timeout passed)."""
    deadline = time.monotonic() + timeout
    ids: list[int] = []
    while time.monotonic() < deadline:
        ids = [int(m.value()) for m in consume_all(bootstrap, topic, timeout=30)]
        if len(set(ids)) >= want:
            break
        time.sleep(2)
    return ids


def target_count(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "outage-probe", "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions)
    except KafkaException:  # a leader moving, a broker restarting: ask again on the next poll
        return 0
    finally:
        c.close()


def monitor_view(mon: MonitorProcess, cluster: str) -> tuple[bool | None, str | None, float]:
    """(cluster up?, status of the flow, seconds the request took); /metrics is fetched too and must answer."""
    started = time.monotonic()
    body = mon.get("/metrics", timeout=10).decode()
    assert "sparkmirror_cluster_up" in body
    status = mon.status()
    elapsed = time.monotonic() - started
    up = next((c["up"] for c in status["clusters"] if c["alias"] == cluster), None)
    flow = next((f["status"] for f in status["flows"] if f["name"] == "primary->dr"), None)
    return up, flow, elapsed


def outage(cluster, mon: MonitorProcess, rep: Replicator, record: dict) -> None:
    """Stop ``cluster`` for OUTAGE_S while polling the monitor; restart it; record what was seen."""
    seen_down = seen_not_ok = False
    slowest = 0.0
    polls = 0
    cluster.stop()
    stopped = time.monotonic()
    while time.monotonic() - stopped < OUTAGE_S:
        up, flow, elapsed = monitor_view(mon, cluster.name)
        polls += 1
        slowest = max(slowest, elapsed)
        seen_down |= up is False
        seen_not_ok |= flow not in (None, "OK")
        assert rep.running(), f"replicator exited during the {cluster.name} outage:\n{rep.log()[-4000:]}"
        time.sleep(1)
    cluster.start()
    record.update({"outage_s": round(time.monotonic() - stopped, 1), "monitor_polls": polls,
                   "monitor_saw_cluster_down": seen_down, "monitor_saw_flow_not_ok": seen_not_ok,
                   "slowest_monitor_answer_s": round(slowest, 2)})
    assert seen_down, f"the monitor never showed {cluster.name} unreachable during its outage"
    assert seen_not_ok, f"the monitor's flow status stayed OK while {cluster.name} was down"


# The micro-batch variants are deselected by default (marker ``slow``: the suite's time budget);
# ``pytest -m slow tests/integration/test_datapath_outages.py`` runs them.
@pytest.mark.parametrize("data_path", [pytest.param("micro-batch", marks=pytest.mark.slow), "auto"])
def test_broker_outages_lose_nothing_and_recover_by_themselves(outage_clusters, tmp_path, unique, artifacts_dir,
                                                               data_path):
    primary, dr = outage_clusters.primary, outage_clusters.dr
    topic = f"outage-{unique}"
    mirror = f"primary.{topic}"
    create_topic(primary.bootstrap, topic, 4)
    config = write_config(tmp_path / "mm2.properties", primary.bootstrap, dr.bootstrap,
                          {"primary->dr.topics": topic})
    producer = NumberedProducer(primary.bootstrap, topic, 4, rate=200.0)
    report: dict = {"topic": topic, "outage_s": OUTAGE_S, "data_path": data_path}
    rep = Replicator(config, tmp_path / "ck", tmp_path / "replicator.log", extra_args=["--data-path", data_path]).start()
    mon = MonitorProcess(tmp_path / "monitor", config, "--interval", "1")
    try:
        producer.start()
        rep.wait_until(lambda: target_count(dr.bootstrap, mirror) > 0, 180, what="first records on the target")
        mon.start(timeout=60)
        rep.wait_until(lambda: monitor_view(mon, "dr")[1] == "OK", 120, what="flow OK in the monitor")
        phases = []
        for name, cluster in (("target_outage", dr), ("source_outage", primary)):
            first = producer.sent
            rec = report.setdefault(name, {})
            outage(cluster, mon, rep, rec)
            waits = [l.split(": ", 1)[-1] for l in rep.log().splitlines()
                     if "waiting:" in l and f"cluster {cluster.name} unreachable" in l]
            rec["replicator_wait_lines"] = waits[:3]
            restarted = time.monotonic()
            # recovery: the records sent so far arrive, and the monitor sees the cluster and the flow well again
            want = producer.sent
            rep.wait_until(lambda: target_count(dr.bootstrap, mirror) >= want, 240,
                           what=f"catch-up after the {cluster.name} restart")
            rec["caught_up_after_restart_s"] = round(time.monotonic() - restarted, 1)
            seen: dict = {}

            def recovered() -> bool:
                seen["view"] = monitor_view(mon, cluster.name)[:2]
                return seen["view"] == (True, "OK")

            try:
                wait_until(recovered, 180, interval=1, what=f"monitor recovery after the {cluster.name} restart")
            except AssertionError as exc:  # say what the monitor showed instead
                flows = [f for f in mon.status()["flows"] if f["name"] == "primary->dr"]
                raise AssertionError(f"{exc}; last (cluster up, flow status): {seen.get('view')}; "
                                     f"the flow in /api/status: {json.dumps(flows)[:6000]}") from None
            rec["monitor_ok_after_restart_s"] = round(time.monotonic() - restarted, 1)
            phases.append((name, first, producer.sent))
            assert waits, f"the replicator never said it waits for {cluster.name}:\n{rep.log()[-4000:]}"
        time.sleep(3)
        sent = producer.stop()
        assert producer.failed == 0, "the test's own producer lost records"
        phases.insert(0, ("before", 0, phases[0][1]))
        phases.append(("after", phases[-1][2], sent))
        ids = read_ids(dr.bootstrap, mirror, sent)
        counts = count_by_phase(ids, phases)
        for name, c in counts.items():
            report.setdefault(name, {}).update(c)
        report.update({"sent": sent, "on_target": len(ids), "lost": sent - len(set(ids)),
                       "duplicated": len(ids) - len(set(ids))})
        (artifacts_dir / f"broker-outages-{data_path}.json").write_text(json.dumps(report, indent=2))
        print("broker outages:", json.dumps(report, indent=1))
        assert report["lost"] == 0, report
        assert set(ids) == set(range(sent))
        assert "Traceback" not in rep.log(), rep.log()[-4000:]
        assert rep.terminate() == 0
    finally:
        producer.stop_event.set()
        mon.stop()
        if rep.running():
            rep.kill9()
        for c in (primary, dr):
            if not c.is_running():
                c.start()


def python_workers(rep: Replicator) -> list:
    """The replicator's forked PySpark workers (children of pyspark.daemon, under the Spark JVM)."""
    import psutil

    out = []
    for proc in psutil.Process(rep.proc.pid).children(recursive=True):
        try:
            parent = proc.parent()
            if parent is not None and "pyspark.daemon" in " ".join(parent.cmdline()) \
                    and "pyspark.daemon" in " ".join(proc.cmdline()):
                out.append(proc)
        except psutil.Error:
            pass
    return out


@pytest.mark.timeout(900)
# The micro-batch variants are deselected by default (marker ``slow``: the suite's time budget);
# ``pytest -m slow tests/integration/test_datapath_outages.py`` runs them.
@pytest.mark.parametrize("data_path", [pytest.param("micro-batch", marks=pytest.mark.slow), "auto"])
def test_task_failures_deleted_topics_and_lost_checkpoint(outage_clusters, tmp_path, unique, artifacts_dir,
                                                          data_path):
    """Python workers SIGKILLed mid-batch (Spark retries the task), a source topic and a mirror
    topic deleted while replicated, then the Spark checkpoint directory removed between two runs.

    On the real-time path (``auto`` with no backlog) the records never pass through a Python
    worker, so that fault does not exist there: the topic deletions and the lost checkpoint do."""
    import shutil

    from confluent_kafka.admin import AdminClient

    primary, dr = outage_clusters.primary.bootstrap, outage_clusters.dr.bootstrap
    main, gone, remirrored = f"main-{unique}", f"gone-{unique}", f"remirrored-{unique}"
    burst = f"burst-{unique}"
    create_topic(primary, main, 4)
    create_topic(primary, burst, 2)
    create_topic(primary, gone, 1)
    create_topic(primary, remirrored, 2)
    lag_max = 100
    config = write_config(tmp_path / "mm2.properties", primary, dr, {
        "primary->dr.topics": f".*-{unique}", "offset.lag.max": str(lag_max), "refresh.topics.interval.seconds": "3"})
    p_main = NumberedProducer(primary, main, 4, rate=200.0)
    p_gone = NumberedProducer(primary, gone, 1, rate=20.0)
    p_re = NumberedProducer(primary, remirrored, 2, rate=40.0)
    producers = (p_main, p_gone, p_re)
    report: dict = {"topics": [main, gone, remirrored], "offset.lag.max": lag_max}
    ck = tmp_path / "ck"
    args = ["--data-path", data_path]
    rep = Replicator(config, ck, tmp_path / "replicator-1.log", extra_args=args).start()
    try:
        for p in producers:
            p.start()
        rep.wait_until(lambda: target_count(dr, f"primary.{main}") > 500, 180, what="records of the main topic")
        realtime = "real-time data path" in rep.log()
        assert realtime == (data_path == "auto"), rep.log()[-3000:]
        report["data_path"] = "real-time" if realtime else "micro-batch"

        # 1. task failures: SIGKILL every forked Python worker while batches run
        first = p_main.sent
        kills = []
        for _ in range(0 if realtime else 3):
            workers = rep.wait_until(lambda: python_workers(rep), 60, interval=0.2, what="a running PySpark worker")
            for w in workers:
                w.kill()
            kills.append(len(workers))
            before = target_count(dr, f"primary.{main}")
            rep.wait_until(lambda: target_count(dr, f"primary.{main}") > before + 400, 120,
                           what="records after a worker kill")
        if not realtime:
            rep.wait_for_log("Spark task attempts failed and were retried", 180)
        retried = [l for l in rep.log().splitlines() if "Spark task attempts failed and were retried" in l]
        report["task_failure"] = {"workers_killed": kills, "kill_rounds": len(kills),
                                  "retry_lines": [l.split(": ", 1)[-1] for l in retried],
                                  "query_restarts": rep.log().count("the streaming query failed")}
        assert retried or realtime, f"no batch reported retried task attempts:\n{rep.log()[-4000:]}"

        # 1b. a task that fails more often than Spark retries it fails the batch and the query:
        # the flow restarts the query from its checkpoint by itself
        produce(primary, burst, ({"value": str(i).encode(), "partition": i % 2} for i in range(BURST)),
                **{"linger.ms": 50})
        burst_kills = 0
        while not realtime and "the streaming query failed" not in rep.log():
            assert burst_kills < 12, f"the query never failed after {burst_kills} kill rounds:\n{rep.log()[-4000:]}"
            for w in rep.wait_until(lambda: python_workers(rep), 120, interval=0.1, what="a running PySpark worker"):
                w.kill()
            burst_kills += 1
            time.sleep(0.5)
        if not realtime:
            rep.wait_for_log("restarted after the failure", 180)
            failed_line = next(l for l in rep.log().splitlines() if "the streaming query failed" in l)
            report["task_failure"].update({"burst_kill_rounds": burst_kills,
                                           "query_failure_line": failed_line.split(": ", 1)[-1][:400]})
        task_phase = (first, p_main.sent)

        # 2. a source topic deleted while replicated
        primary_admin, dr_admin = AdminClient({"bootstrap.servers": primary}), AdminClient({"bootstrap.servers": dr})
        primary_admin.delete_topics([gone])[gone].result(30)
        gone_sent = p_gone.stop()  # its producer now fails: the topic is gone (auto-creation is off)
        rep.wait_for_log(f"source topic {gone} is gone from cluster primary", 120)
        before = target_count(dr, f"primary.{main}")
        rep.wait_until(lambda: target_count(dr, f"primary.{main}") > before + 400, 120,
                       what=f"main-topic records after deleting {gone}")
        report["source_topic_deleted"] = {"topic": gone, "flow_kept_running": True}

        # 3. a mirror topic deleted while replicated
        dr_admin.delete_topics([f"primary.{remirrored}"])[f"primary.{remirrored}"].result(30)
        re_mark = p_re.sent
        rep.wait_for_log(f"mirror topic primary.{remirrored} was deleted on cluster dr", 120)
        # what was sent after the deletion arrives on the re-created topic, while the flow runs
        want = p_re.sent
        rep.wait_until(lambda: set(range(re_mark, want)) <= {int(m.value()) for m in consume_all(
            dr, f"primary.{remirrored}", timeout=20)}, 180, what=f"records sent after deleting primary.{remirrored}")
        before = target_count(dr, f"primary.{main}")
        rep.wait_until(lambda: target_count(dr, f"primary.{main}") > before + 400, 120,
                       what=f"main-topic records after deleting primary.{remirrored}")
        assert rep.running()
        assert rep.terminate() == 0
        log1 = rep.log()

        # 4. the Spark checkpoint lost between two runs: resume from the offset-syncs
        stop_mark = p_main.sent
        shutil.rmtree(ck)
        rep = Replicator(config, ck, tmp_path / "replicator-2.log", extra_args=args).start()
        rep.wait_for_log("no Spark checkpoint found", 180)
        resume_line = next(l for l in rep.log().splitlines() if "no Spark checkpoint found" in l)
        assert "resuming from the offset-syncs" in resume_line, resume_line
        rep.wait_until(lambda: target_count(dr, f"primary.{main}") >= p_main.sent, 180, what="catch-up after the restart")
        time.sleep(2)
        sent = p_main.stop()
        re_sent = p_re.stop()
        assert p_main.failed == 0 and p_re.failed == 0

        ids = read_ids(dr, f"primary.{main}", sent)
        counts = count_by_phase(ids, [("before", 0, task_phase[0]), ("task_failure", *task_phase),
                                      ("topic_deletions", task_phase[1], stop_mark),
                                      ("after_checkpoint_loss", stop_mark, sent)])
        # duplicates that the checkpoint loss caused: the re-read records were sent before the stop
        by_partition: dict[int, dict[int, int]] = {}
        for m in consume_all(dr, f"primary.{main}", timeout=30):
            by_partition.setdefault(m.partition(), {})
            i = int(m.value())
            by_partition[m.partition()][i] = by_partition[m.partition()].get(i, 0) + 1
        dup_after_tasks = {p: sum(n - 1 for i, n in seen.items() if i >= task_phase[1]) for p, seen in by_partition.items()}
        re_ids = [int(m.value()) for m in consume_all(dr, f"primary.{remirrored}", timeout=30)]
        burst_ids = read_ids(dr, f"primary.{burst}", BURST)
        report["task_failure"].update({"burst_sent": BURST, "burst_lost": BURST - len(set(burst_ids)),
                                       "burst_duplicated": len(burst_ids) - len(set(burst_ids))})
        report.update({
            "main": {"sent": sent, "on_target": len(ids), "lost": sent - len(set(ids)),
                     "duplicated": len(ids) - len(set(ids)), "phases": counts},
            "checkpoint_lost": {"resume_line": resume_line.split(": ", 1)[-1],
                                "duplicates_per_partition_after_task_phase": dup_after_tasks},
            "mirror_topic_deleted": {
                "topic": f"primary.{remirrored}", "sent": re_sent, "sent_after_deletion": re_sent - re_mark,
                "lost_after_deletion": sum(1 for i in range(re_mark, re_sent) if i not in set(re_ids)),
                "on_recreated_topic": len(re_ids)},
            "source_topic_deleted": {**report["source_topic_deleted"], "sent_before_deletion": gone_sent},
        })
        (artifacts_dir / f"datapath-faults-{data_path}.json").write_text(json.dumps(report, indent=2))
        print("datapath faults:", json.dumps(report, indent=1))
        assert report["main"]["lost"] == 0, report
        assert set(ids) == set(range(sent))
        assert report["mirror_topic_deleted"]["lost_after_deletion"] == 0, report
        assert set(burst_ids) == set(range(BURST)), report["task_failure"]
        assert all(d <= lag_max for d in dup_after_tasks.values()), dup_after_tasks
        assert rep.terminate() == 0
        # No traceback for these faults. Known exception, left to the direct source's owner: after
        # a query restart, pyspark's python_streaming_source_runner of the failed query may print
        # CANNOT_OPEN_SOCKET with a traceback (seen once under heavy load).
        tracebacks = [chunk for chunk in log1.split("Traceback (most recent call last):")[1:]
                      if "python_streaming_source_runner" not in re.split(r"\n\d{4}-\d\d-\d\d ", chunk)[0]]
        assert not tracebacks, f"a traceback in the replicator's log:\n{log1[-4000:]}"
    finally:
        for p in producers:
            p.stop_event.set()
        if rep.running():
            rep.kill9()
