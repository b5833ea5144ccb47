"""The replicator on a real Spark standalone cluster, not only ``local[*]``.

A Master and two Workers (two cores each), every one its own JVM with its own work dir and
ports (tests/support/spark_cluster.py); the replicator is the driver, started with
``--master spark://...``, so the executors and their Python workers run in other processes
than the driver, under the Workers. The checks are the data path's: every record identical
on the target (key, value, headers, timestamp) and in order, each offset-sync pairing the
same record on both sides, and the work spread over both Workers. The module has its own
pair of Kafka clusters: on the session's, every other test's heartbeats topics would be
replicated too, and their partitions would need real-time task slots of their own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import sparkmirror_cli.main
from sparkmirror.model.records import OffsetSync
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config
from tests.support.spark_cluster import SparkStandalone

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LIVE = 300  # per source topic, written while the replicator runs


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=2).start()
    yield cluster
    cluster.stop()


def _records(topic_index: int, first: int, count: int, base_ms: int):
    for i in range(first, first + count):
        yield {"key": f"k{i % 13}".encode(), "value": f"{topic_index}:{i}".encode(),
               "headers": [("n", str(i).encode()), ("t", str(topic_index).encode())], "timestamp": base_ms + i}


def _identity(msg) -> tuple:
    return msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1]


def _wait_for(bootstrap: str, topic: str, expected: int, timeout: float = 180.0) -> list:
    deadline = time.monotonic() + timeout
    got: list = []
    while time.monotonic() < deadline:
        # to each partition's end, not to `expected` records: with a batch copied again (a query
        # restarted mid-batch), `expected` records can all be one partition's, copies included
        got = consume_all(bootstrap, topic, timeout=10)
        if len({(m.partition(), *_identity(m)) for m in got}) >= expected:
            return got
        time.sleep(2)
    return got


CATCH_UP = 200_000


def test_a_worker_killed_mid_catch_up_loses_nothing_and_comes_back(private_kafka_clusters, spark_cluster, unique, tmp_path,
                                                                 artifacts_dir):
    """SIGKILL one Worker together with its executor and Python workers while a catch-up of
    200,000 records runs: the query goes on with the executor left (Spark runs the lost tasks
    again there, or the flow restarts the query from its checkpoint), nothing is lost, what was
    copied twice is counted; then the Worker comes back and registers again."""
    import json

    from tests.support.kafka import NumberedProducer

    primary, dr = private_kafka_clusters.primary.bootstrap, private_kafka_clusters.dr.bootstrap
    topic = f"workerkill-{unique}"
    mirror = f"primary.{topic}"
    create_topic(primary, topic, 4)
    produce(primary, topic, ({"value": str(i).encode(), "partition": i % 4} for i in range(CATCH_UP)),
            **{"linger.ms": 50})
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    rep = Replicator(config, tmp_path / "ckpt", tmp_path / "replicator.log", ["--master", spark_cluster.url]).start()
    producer = NumberedProducer(primary, topic, 4, rate=200.0, first_id=CATCH_UP)
    killed_at = recovered_at = None
    try:
        deadline = time.monotonic() + 240
        # mid catch-up (the first batch copies the whole backlog, a task per partition), with
        # tasks running under the Worker to be killed
        while (_end_offsets(dr, mirror) < 20_000 or not spark_cluster.tasks_per_worker()[1]) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        tasks_before = spark_cluster.tasks_per_worker()
        on_target_at_kill = _end_offsets(dr, mirror)
        assert 0 < on_target_at_kill < CATCH_UP, f"{on_target_at_kill} records on the target: not mid catch-up"
        producer.start()
        spark_cluster.kill_worker(1)
        killed_at = time.monotonic()
        deadline = time.monotonic() + 300
        backlog = set(range(CATCH_UP))
        while time.monotonic() < deadline:  # the whole backlog on the target (duplicates do not count)
            if backlog <= {int(m.value()) for m in consume_all(dr, mirror, timeout=30)}:
                break
            assert rep.running(), rep.log()[-3000:]
            time.sleep(0.5)
        recovered_at = time.monotonic()
        spark_cluster.start_worker(1)
        spark_cluster.wait_for_workers(2, 120)
        sent = producer.stop()
        deadline = time.monotonic() + 240
        ids: list[int] = []
        while time.monotonic() < deadline:  # every id once at least: duplicates do not count
            ids = [int(m.value()) for m in consume_all(dr, mirror, timeout=30)]
            if len(set(ids)) >= sent:
                break
            assert rep.running(), rep.log()[-3000:]
            time.sleep(2)
    finally:
        if producer.is_alive():
            producer.stop()
        rep.terminate()
    lost = sent - len(set(ids))
    report = {"records": sent, "on_target": len(ids), "lost": lost, "duplicated": len(ids) - len(set(ids)),
              "on_target_at_kill": on_target_at_kill,
              "seconds_from_kill_to_backlog_copied_at_most": round(recovered_at - killed_at, 1),
              "tasks_per_worker_before_kill": tasks_before, "tasks_per_worker": spark_cluster.tasks_per_worker()}
    (artifacts_dir / "spark-standalone-worker-kill.json").write_text(json.dumps(report, indent=2))
    print("worker kill:", json.dumps(report))
    assert lost == 0, report
    assert set(ids) == set(range(sent)), report


def _end_offsets(bootstrap: str, topic: str) -> int:
    """Records on ``topic`` (duplicates included); 0 while the topic is being created."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions)
    except KafkaException:  # a partition without its leader yet, right after the mirror topic was created
        return 0
    finally:
        c.close()


# The same kill of the whole replicator on local[*] is in the default run (test_datapath_faults.py's
# kill -9 loops); on the cluster it runs with -m slow.
@pytest.mark.slow
def test_the_driver_killed_and_restarted_on_the_same_checkpoint_loses_nothing(private_kafka_clusters, spark_cluster,
                                                                             unique, tmp_path):
    """SIGKILL the replicator (the driver: the application goes, the Workers stop its executors)
    mid catch-up, start it again against the same checkpoint directory (storage every process
    of the cluster sees): it continues where its last committed batch ended, nothing lost."""
    primary, dr = private_kafka_clusters.primary.bootstrap, private_kafka_clusters.dr.bootstrap
    topic = f"driverkill-{unique}"
    mirror = f"primary.{topic}"
    records = 150_000
    create_topic(primary, topic, 4)
    produce(primary, topic, ({"value": str(i).encode(), "partition": i % 4} for i in range(records)),
            **{"linger.ms": 50})
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    args = ["--master", spark_cluster.url, "--max-records-per-batch", "10000"]
    first = Replicator(config, tmp_path / "ckpt", tmp_path / "first.log", args).start()
    try:
        deadline = time.monotonic() + 240
        while _end_offsets(dr, mirror) < 20_000 and time.monotonic() < deadline:
            time.sleep(0.2)
        at_kill = _end_offsets(dr, mirror)
        first.kill9()
    finally:
        if first.running():
            first.kill9()
    assert 0 < at_kill < records, f"{at_kill} records on the target at the kill: not mid catch-up"
    spark_cluster.wait_for_workers(2, 60)
    second = Replicator(config, tmp_path / "ckpt", tmp_path / "second.log", args).start()
    ids: list[int] = []

    def all_copied() -> bool:
        ids[:] = [int(m.value()) for m in consume_all(dr, mirror, timeout=30)]
        return len(set(ids)) >= records

    try:
        second.wait_until(all_copied, 240, interval=2, what=f"all {records} records on the target after the restart",
                          details=lambda: f"{records - len(set(ids))} records missing")
    finally:
        second.terminate()
    assert set(ids) == set(range(records)), f"{records - len(set(ids))} records lost across the driver kill"
    assert "copying from the earliest offsets" not in second.log(), "the restart did not resume its checkpoint"
    print(f"driver kill: {at_kill} on the target at the kill, {len(ids) - records} copied twice, 0 lost")


@pytest.fixture(scope="module")
def third_cluster(tmp_path_factory):
    from devenv.kafka import KafkaCluster, free_port

    cluster = KafkaCluster("c", free_port(), free_port(), tmp_path_factory.mktemp("kafka-c"), heap="512m")
    cluster.start(timeout=180)
    yield cluster
    cluster.stop()


def _partitioned(prefix: str, first: int, count: int, base_ms: int):
    for i in range(first, first + count):
        yield {"key": str(i).encode(), "value": f"{prefix}{i}".encode(), "partition": i % 2,
               "headers": [("n", str(i).encode()), ("from", prefix.encode())], "timestamp": base_ms + i}


@pytest.mark.slow  # the recipe and worker-kill tests run flows on the cluster by default
def test_three_clusters_three_flows_in_one_application(private_kafka_clusters, third_cluster, spark_cluster, unique,
                                                       tmp_path):
    """Flows a->b, a->c and b->a (active-active between a and b) at once, in one replicator on
    the standalone cluster: a backlog, then records written while it runs; each flow's topic
    complete and exact on its target (key, value, headers, timestamp, order per partition),
    each offset-sync pairing the same record on both sides, nothing replicated back to where it
    came from, and the tasks spread over both Workers. With 4 task slots the first flow runs
    real time (one slot per partition) and the other two micro-batches, so both paths run on
    executors outside the driver."""
    a, b, c = private_kafka_clusters.primary.bootstrap, private_kafka_clusters.dr.bootstrap, third_cluster.bootstrap
    on_a, on_b = f"orders-{unique}", f"payments-{unique}"
    base_ms = int(time.time() * 1000) - 3_600_000
    create_topic(a, on_a, 2)
    create_topic(b, on_b, 2)
    produce(a, on_a, _partitioned("a", 0, 2_000, base_ms))
    produce(b, on_b, _partitioned("b", 0, 2_000, base_ms))
    props = {
        "clusters": "a, b, c",
        "a.bootstrap.servers": a, "b.bootstrap.servers": b, "c.bootstrap.servers": c,
        "a->b.enabled": "true", "a->c.enabled": "true", "b->a.enabled": "true",
        "a->b.topics": on_a, "a->c.topics": on_a, "b->a.topics": f"{on_b}|b\\..*|a\\..*",
        "replication.factor": "1", "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "emit.heartbeats.interval.seconds": "1", "refresh.topics.interval.seconds": "5",
        "sync.topic.acls.enabled": "false",
    }
    config = tmp_path / "mm2.properties"
    config.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    mirrors = {("b", f"a.{on_a}"): b, ("c", f"a.{on_a}"): c, ("a", f"b.{on_b}"): a}
    total = 2_000 + LIVE
    rep = Replicator(config, tmp_path / "ckpt", tmp_path / "replicator.log", ["--master", spark_cluster.url]).start()
    try:
        for (_, mirror), bootstrap in mirrors.items():
            _wait_for(bootstrap, mirror, 2_000, timeout=240)
        produce(a, on_a, _partitioned("a", 2_000, LIVE, base_ms))
        produce(b, on_b, _partitioned("b", 2_000, LIVE, base_ms))
        got = {key: _wait_for(bootstrap, key[1], total, timeout=240) for key, bootstrap in mirrors.items()}
        assert rep.running(), rep.log()[-3000:]
        # (records, distinct records) per mirror partition
        counts = {f"{mirror} on {cluster}": {p: (len(ids := [_identity(m) for m in msgs if m.partition() == p]),
                                                len(set(ids))) for p in (0, 1)}
                  for (cluster, mirror), msgs in got.items()}
        assert all(sum(d for _, d in n.values()) >= total for n in counts.values()), \
            f"(records, distinct) per mirror partition after 240 s: {counts}; data paths and batches:\n" + "\n".join(
                line for line in rep.log().splitlines() if "sparkmirror.replicate" in line)[-6000:]
    finally:
        rep.terminate()
    log = rep.log()
    source = {on_a: consume_all(a, on_a), on_b: consume_all(b, on_b)}
    syncs_on = {"b": (a, on_a), "c": (a, on_a), "a": (b, on_b)}  # target alias -> (source cluster, topic)
    checked = 0
    for (cluster, mirror), msgs in got.items():
        origin = mirror.split(".", 1)[1]
        want = {p: [_identity(m) for m in source[origin] if m.partition() == p] for p in (0, 1)}
        # At least once: a query restarted mid-batch (its topic set grew when the other flows
        # created their heartbeats mirrors) copies that batch again; each record's first copy is
        # in source order, in its own partition.
        have = {p: list(dict.fromkeys(_identity(m) for m in msgs if m.partition() == p)) for p in (0, 1)}
        assert have == want, f"{mirror} on {cluster} differs from {origin}: (records, distinct) {counts}"
        # every offset-sync of the flow pairs the same record upstream and downstream
        src_bootstrap, topic = syncs_on[cluster]
        upstream = {(m.partition(), m.offset()): m for m in source[origin]}
        downstream = {(m.partition(), m.offset()): m for m in msgs}
        syncs = [s for s in (OffsetSync.decode(m.key(), m.value())
                             for m in consume_all(src_bootstrap, f"mm2-offset-syncs.{cluster}.internal"))
                 if s.topic == topic]
        assert syncs, f"no offset-syncs for {topic} -> {cluster}"
        for s in syncs:
            assert _identity(upstream[(s.partition, s.upstream_offset)]) == \
                _identity(downstream[(s.partition, s.downstream_offset)]), (cluster, s)
            checked += 1
    # loop prevention: b->a takes b's own topics, never a's topics coming back (a.* on b)
    from confluent_kafka.admin import AdminClient

    on_a_now = AdminClient({"bootstrap.servers": a}).list_topics(timeout=10).topics
    assert f"b.a.{on_a}" not in on_a_now and not any(t.startswith("b.a.") for t in on_a_now)
    # the application waited for its executors' cores (2 x 2); the first flow got its slots for real time
    assert "4 task slots (2 executors registered)" in log, log[-3000:]
    assert "in real time (one task per partition" in log, log[-3000:]
    # the executors ran under both Workers, in processes other than the driver
    tasks = spark_cluster.tasks_per_worker()
    assert all(n > 0 for n in tasks), f"tasks per worker: {tasks}\n{log[-3000:]}"
    print(f"standalone cluster: 3 flows x {total} records exact, {checked} offset-syncs checked, "
          f"tasks per worker {tasks}")


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory):
    """The executors' Python: its own environment at a path every host has (here: one host),
    with sparkmirror installed from the checkout as a package (not the driver's editable
    install) and the two libraries its copy tasks import; pyspark itself comes from Spark."""
    import subprocess
    import sys
    from importlib.metadata import version
    from pathlib import Path

    env = tmp_path_factory.mktemp("executor-env") / "venv"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", str(root)], check=True, cwd=tmp_path_factory.getbasetemp())
    subprocess.run([*pip, f"confluent-kafka=={version('confluent-kafka')}", f"pyarrow=={version('pyarrow')}"],
                   check=True)
    return env / "bin" / "python"


def test_the_documented_spark_submit_recipe_runs_on_the_cluster(private_kafka_clusters, spark_cluster, executor_python,
                                                                unique, tmp_path):
    """``spark-submit`` as README says: the connector and writer jars with --jars, the executors'
    Python given by spark.pyspark.python (an environment of their own), the driver's by
    spark.pyspark.driver.python. Records arrive exactly, and the executors ran the copy."""
    import os
    import signal
    import subprocess
    import sys

    from sparkmirror import artifacts
    from replicator.datapath import jvmwriter
    from tests.support.spark_cluster import spark_home

    primary, dr = private_kafka_clusters.primary.bootstrap, private_kafka_clusters.dr.bootstrap
    topic = f"submit-{unique}"
    create_topic(primary, topic, 2)
    produce(primary, topic, _records(0, 0, 2_000, int(time.time() * 1000) - 60_000))
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    jars = [*artifacts.ensure(artifacts.SPARK_KAFKA).jars(), jvmwriter.ensure_jar()]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["SPARK_HOME"] = str(spark_home())
    cli = str(Path(sparkmirror_cli.main.__file__))  # the script README and docs/deploy.md name
    log_file = tmp_path / "spark-submit.log"
    proc = subprocess.Popen(
        [str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.url,
         "--jars", ",".join(str(j) for j in jars),
         "--conf", f"spark.pyspark.python={executor_python}",
         "--conf", f"spark.pyspark.driver.python={sys.executable}",
         # micro-batches: their copy runs in the executors' Python workers (real time copies in the JVM)
         cli, "replicate", str(config), "--checkpoint-dir", str(tmp_path / "ckpt"), "--metrics-listen", "127.0.0.1:0",
         "--data-path", "micro-batch"],
        env=env, cwd=tmp_path, stdout=open(log_file, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        got = _wait_for(dr, f"primary.{topic}", 2_000)
        log = log_file.read_text(errors="replace")
        assert proc.poll() is None, log[-3000:]
        pythons = _python_workers(spark_cluster.root)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    # each partition exactly, in order (a reader interleaves the two partitions as it polls them)
    source = consume_all(primary, topic)
    want = {p: [_identity(m) for m in source if m.partition() == p] for p in (0, 1)}
    have = {p: [_identity(m) for m in got if m.partition() == p] for p in (0, 1)}
    assert have == want, log[-3000:]
    tasks = spark_cluster.tasks_per_worker()
    assert sum(tasks) > 0, f"no task ran on the cluster: {tasks}"
    # the executors' Python workers run the executor environment's interpreter, not the driver's
    assert pythons and all(exe == str(executor_python) for exe in pythons), pythons


def _python_workers(under: Path) -> list[str]:
    """The interpreter (argv[0]) of every running PySpark worker daemon started by an executor
    of the cluster (its working directory is the executor's, in a Worker's work dir)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if b"pyspark.daemon" in argv and cwd.startswith(str(under)):
            found.append(argv[0].decode())
    return found
