"""One command, three systems, the same data, the same machine, the same run.

    python -m bench.run                       # all four workloads
    python -m bench.run --workloads a --records 200000     # a quick look

Starts two fresh single-node KRaft clusters, then for each workload and each
system — raw (confluent-kafka consume->produce, one process per core), Apache
MirrorMaker 2 (dedicated mode, tasks.max = cores) and sparkmirror (Spark
local[*]) — starts it on the workload's data, measures, and stops it:

  a  catchup-2m-1kb-12p   2,000,000-record backlog, 1 KB values, 12 partitions
  b  catchup-2m-100b-12p  the same with 100-byte values
  c  catchup-2m-1kb-48p   the same over 48 partitions
  d  steady-1kb-12p       records produced at 50% of this run's raw ceiling (a)
                          for 60 s of warm-up, then 180 s measured; end-to-end
                          latency (source timestamp to arrival on the target)
                          p50 / p99 / p99.9 / max, and heartbeat latency the same
                          way; the warm-up's own p99 / max and when latency
                          settled under 1 s and under 0.1 s are reported beside them
  e  steady-curve-1kb-12p the steady workload at 10 %, 25 % and 50 % of the raw
                          ceiling (a), 60 s warm-up and 90 s measured at each
                          load: latency against load (--curve-loads to change)

Catch-up throughput is measured from the first record on the target to the last
(start-up reported separately); CPU is the system's whole process tree (JVMs,
Python workers) over that same window, per GB of record values. Results are
appended to bench/results.json and BENCHMARKS.md is regenerated from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.procstats import TreeSampler
from bench.workloads import WORKLOADS
from devenv.kafka import KafkaCluster, free_port
from devenv.mm2 import MirrorMaker2, single_node_settings
from sparkmirror import artifacts

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
CORES = os.cpu_count() or 2


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def fill(bootstrap: str, topic: str, records: int, value_bytes: int, partitions: int) -> None:
    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1000000, "acks": "1",
                  "queue.buffering.max.kbytes": 2097151})
    value = os.urandom(value_bytes)
    step = max(1, records // 10)
    for i in range(records):
        while True:
            try:
                p.produce(topic, key=b"%012d" % i, value=value, partition=i % partitions,
                          headers=[("bench", b"1")])
                break
            except BufferError:
                p.poll(0.05)
        if i % step == 0:
            p.poll(0)
            log(f"  source backlog {i * 100 // records}%")
    p.flush(300)


def end_offsets(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    try:
        return _end_offsets(c, topic)
    except Exception:  # a topic being created has no leader for a moment
        return 0
    finally:
        c.close()


def _end_offsets(c, topic: str) -> int:
    md = c.list_topics(topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return 0
    return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in t.partitions)


def eos_progress(bootstrap: str, topic: str) -> int:
    """Records an exactly-once flow has committed: its progress group's offsets (next source
    offset per partition). The target's end offsets also count transaction markers."""
    from replicator.datapath.eos_writer import progress_group

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": progress_group(*SPARKMIRROR_SYSTEMS["sparkmirror-eos"][0])})
    try:
        md = c.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return 0
        done = c.committed([TopicPartition(topic, p) for p in t.partitions], timeout=10)
        return sum(tp.offset for tp in done if tp.offset > 0)
    except Exception:
        return 0
    finally:
        c.close()


def wait_complete(bootstrap: str, topic: str, records: int, timeout: float, alive,
                  progress=end_offsets) -> tuple[float | None, float | None]:
    first = done = None
    deadline = time.monotonic() + timeout
    last_report = 0.0
    while time.monotonic() < deadline:
        n = progress(bootstrap, topic)
        now = time.monotonic()
        if first is None and (n > 0 or (progress is not end_offsets and end_offsets(bootstrap, topic) > 0)):
            first = now  # the first record on the target, committed or not
        if n >= records:
            done = now
            break
        if now - last_report > 15:
            log(f"  {topic}: {n}/{records} ({n * 100 // max(records, 1)}%)")
            last_report = now
        if not alive():
            log("  system exited early")
            break
        time.sleep(POLL_S)
    return first, done


def stop_group(proc: subprocess.Popen, timeout: float = 60) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_raw(src: str, dst: str, topic: str, partitions: int, work: Path) -> list[subprocess.Popen]:
    create_topic(dst, f"raw.{topic}", partitions)
    procs = []
    for i in range(CORES):
        parts = [str(p) for p in range(partitions) if p % CORES == i]
        if not parts:
            continue
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench.raw_mirror", "--source", src, "--target", dst, "--topic", topic,
             "--target-topic", f"raw.{topic}", "--partitions", ",".join(parts)],
            stdout=open(work / f"raw-{i}.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT))
    return procs


def mm2_properties(src: str, dst: str, topic: str) -> dict[str, str]:
    """Apache MM2 tuned like sparkmirror: same parallelism, batching, no compression."""
    return {
        "clusters": "mm2, dr", "mm2.bootstrap.servers": src, "dr.bootstrap.servers": dst,
        "mm2->dr.enabled": "true", "mm2->dr.topics": topic, "dr->mm2.enabled": "false",
        "tasks.max": str(CORES),
        "refresh.topics.interval.seconds": "5", "sync.topic.acls.enabled": "false",
        # the writer's batching: 1 MB batches, 5 ms linger, no compression, acks=all, idempotent
        "dr.producer.batch.size": "1000000", "dr.producer.linger.ms": "5",
        "dr.producer.compression.type": "none", "dr.producer.acks": "all",
        "dr.producer.enable.idempotence": "true",
        "mm2.consumer.max.poll.records": "10000", "mm2.consumer.fetch.max.bytes": "52428800",
        "mm2.consumer.max.partition.fetch.bytes": "10485760",
        **single_node_settings(),
    }


def sparkmirror_config(src: str, dst: str, topic: str, path: Path, extra: dict[str, str] | None = None,
                       alias: str = "sm", target_alias: str = "dr") -> Path:
    a, b = alias, target_alias
    props = {
        "clusters": f"{a}, {b}", f"{a}.bootstrap.servers": src, f"{b}.bootstrap.servers": dst,
        f"{a}->{b}.enabled": "true", f"{a}->{b}.topics": topic, "sync.topic.acls.enabled": "false",
        **single_node_settings(),
        **(extra or {}),
    }
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


POLL_S = 0.25  # how often the target's end offsets are read while waiting

_JIT_SPARK = "-XX:CompileCommand=quiet " + " ".join(
    f"-XX:CompileCommand=CompileThresholdScaling,{p}.*::*,0.05" for p in ("org.apache.spark", "scala", "com.fasterxml.jackson"))

SPARKMIRROR_SYSTEMS = {
    # system name -> (source alias, target alias), extra `sparkmirror replicate` arguments, mm2.properties
    # settings. Each has its own aliases: its own mirror topic and its own offset-syncs topic, so that
    # one does not resume from another's offset-syncs (and copy nothing).
    # the default: a backlog in micro-batches (the direct source), then Spark's real-time mode
    "sparkmirror": (("sm", "dr"), [], {}),
    # micro-batches only (--data-path micro-batch): the default before real time
    "sparkmirror-microbatch": (("smm", "drm"), ["--data-path", "micro-batch"], {}),
    # real time from the start, a backlog included (--data-path real-time)
    "sparkmirror-realtime": (("smr", "drr"), ["--data-path", "real-time"], {}),
    # a 5-, 10-, 15-, 30- or 60-s real-time checkpoint interval instead of the default (300 s in local
    # mode): the boundaries' cost against their number
    "sparkmirror-cp5": (("smv", "drv"), ["--real-time-checkpoint-interval", "5"], {}),
    "sparkmirror-cp10": (("sma", "dra"), ["--real-time-checkpoint-interval", "10"], {}),
    "sparkmirror-cp15": (("smf", "drf"), ["--real-time-checkpoint-interval", "15"], {}),
    "sparkmirror-cp30": (("smc", "drc"), ["--real-time-checkpoint-interval", "30"], {}),
    "sparkmirror-cp60": (("smt", "drt"), ["--real-time-checkpoint-interval", "60"], {}),
    # 60-s checkpoints with the source consumer fetching up to 8 MB per partition and request instead
    # of 1 MB: whether what piles up at a checkpoint comes back in fewer round trips
    "sparkmirror-cp60-fetch8m": (("smfb", "drfb"), ["--real-time-checkpoint-interval", "60"],
                                 {"smfb.consumer.max.partition.fetch.bytes": "8388608"}),
    # the default with Kafka's own fetch settings for the real-time source (a fetch returns with its
    # first byte, or after 500 ms) instead of sparkmirror's 64 KB or 20 ms: the default before
    "sparkmirror-fetch1": (("smq", "drq"), [], {"smq.consumer.fetch.min.bytes": "1",
                                                "smq.consumer.fetch.max.wait.ms": "500"}),
    # the default with a 5-ms fetch wait instead of 20 ms (64 KB still ends a fetch sooner): what a
    # record on a quiet partition waits for company, against the fetches a busy one costs
    "sparkmirror-wait5": (("smw", "drw"), [], {"smw.consumer.fetch.max.wait.ms": "5"}),
    # the default with the 20-ms wait configured, so fixed: the static wait beside the rate-chosen one
    "sparkmirror-wait20": (("smx", "drx"), [], {"smx.consumer.fetch.max.wait.ms": "20"}),
    "sparkmirror-cp60-wait5": (("smu", "dru"), ["--real-time-checkpoint-interval", "60"],
                               {"smu.consumer.fetch.max.wait.ms": "5"}),
    # the default with a flow's partitions dealt over three or six real-time queries instead of one
    "sparkmirror-shards3": (("smo", "dro"), ["--real-time-shards", "3"], {}),
    "sparkmirror-shards6": (("sms", "drs"), ["--real-time-shards", "6"], {}),
    "sparkmirror-kafka": (("smk", "drk"), ["--source", "kafka"], {}),  # Spark's Kafka source + Arrow writer
    "sparkmirror-eos": (("sme", "dre"), [], {"dre.exactly.once.source.support": "enabled"}),
    # the default with the driver JVM's compile thresholds scaled down: Spark's per-batch work is
    # compiled after a few real-time batches instead of hundreds
    "sparkmirror-jit": (("smx", "drx"), ["--conf", "spark.driver.extraJavaOptions=-XX:CompileThresholdScaling=0.05"], {}),
    # the default with the compile thresholds scaled down for Spark's, Scala's and Jackson's code only
    # (the per-batch planning, scheduling and status code, and the per-record source code), not for
    # the rest of the JVM
    "sparkmirror-jitspark": (("smz", "drz"), ["--conf", f"spark.driver.extraJavaOptions={_JIT_SPARK}"], {}),
    # the default with Spark's per-batch plan description (posted to its listeners before each
    # batch's job starts) in the simple mode instead of the formatted one
    "sparkmirror-explain": (("smy", "dry"), ["--conf", "spark.sql.ui.explainMode=simple"], {}),
    # the default path run from another source tree (--baseline-src): before/after a change, same run
    "sparkmirror-baseline": (("smb", "drb"), [], {}),
    # the default path on another JVM (--java-home: JAVA_HOME for Spark's driver and the writer's javac)
    "sparkmirror-java": (("smj", "drj"), [], {}),
}
BASELINE_SRC: list[Path] = []  # set from --baseline-src
JAVA_HOME: list[Path] = []  # set from --java-home


RUNNING: list[tuple[str, list[subprocess.Popen]]] = []  # systems started and not stopped yet


def start_system(system: str, src: str, dst: str, topic: str, partitions: int, work: Path):
    """Start one system mirroring ``topic``; returns (processes, target topic)."""
    procs, target_topic = _start_system(system, src, dst, topic, partitions, work)
    RUNNING.append((system, procs))
    return procs, target_topic


def _start_system(system: str, src: str, dst: str, topic: str, partitions: int, work: Path):
    if system == "raw":
        return run_raw(src, dst, topic, partitions, work), f"raw.{topic}"
    if system == "mm2":
        mm = MirrorMaker2(mm2_properties(src, dst, topic), work / f"mm2-{topic}", heap="2g", log_level="WARN").start()
        return [mm.process], f"mm2.{topic}"
    (alias, target_alias), args, extra = SPARKMIRROR_SYSTEMS[system]
    cfg = sparkmirror_config(src, dst, topic, work / f"{system}-{topic}.properties", extra, alias, target_alias)
    src_tree, env = ROOT, None
    if system == "sparkmirror-baseline":
        # `python -m` and Spark's Python workers import `replicator` from the working directory first
        src_tree = BASELINE_SRC[0]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src_tree), os.environ.get("PYTHONPATH")]))}
    if system == "sparkmirror-java":
        home = JAVA_HOME[0]
        env = {**os.environ, "JAVA_HOME": str(home), "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkmirror_cli.main", "replicate", str(cfg), "--checkpoint-dir",
         str(work / f"{system}-{topic}-ckpt"), "--metrics-listen", "off", *args],
        stdout=open(work / f"{system}-{topic}.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        cwd=src_tree, env=env)
    return [proc], f"{alias}.{topic}"


def stop_system(system: str, procs: list[subprocess.Popen]) -> None:
    RUNNING[:] = [r for r in RUNNING if r[1] is not procs]
    for p in procs:
        if system == "mm2":
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        else:
            stop_group(p)


def delete_topics(bootstrap: str, pattern: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=30).topics if pattern in t]
    if names:
        for f in admin.delete_topics(names, operation_timeout=60).values():
            try:
                f.result(60)
            except Exception:
                pass


def measure_catchup(system: str, wl: dict, src: str, dst: str, topic: str, work: Path, timeout: float) -> dict:
    records, value_bytes, partitions = wl["records"], wl["value_bytes"], wl["partitions"]
    log(f"{wl['name']}: {system}")
    started = time.monotonic()
    procs, target_topic = start_system(system, src, dst, topic, partitions, work)
    sampler = TreeSampler([p.pid for p in procs])
    sampler.start()
    cpu_at_first = [None]

    def alive():
        if cpu_at_first[0] is None and end_offsets(dst, target_topic) > 0:
            sampler.sample()
            cpu_at_first[0] = sampler.cpu_seconds
        return all(p.poll() is None for p in procs)

    progress = eos_progress if system == "sparkmirror-eos" else end_offsets
    first, done = wait_complete(dst, target_topic, records, timeout, alive, progress)
    sampler.stop()
    stop_system(system, procs)
    if first is None or done is None:
        raise SystemExit(f"{system} did not finish {wl['name']} within {timeout}s; see {work}")
    # first and done are seen by polls of the target: a tiny backlog can be copied between two
    # polls, so the window is at least one poll apart (quick runs; the real ones take many seconds)
    copy_s = max(done - first, POLL_S)
    gb = records * value_bytes / 1e9
    copy_cpu = sampler.cpu_seconds - (cpu_at_first[0] or 0.0)
    result = {
        "workload": wl["name"], "system": system,
        "records_per_s": round(records / copy_s, 1),
        "mb_per_s": round(records * value_bytes / 1e6 / copy_s, 2),
        "p50_latency_s": None, "p99_latency_s": None, "max_latency_s": None,
        "startup_s": round(first - started, 2), "copy_s": round(copy_s, 2), "wall_s": round(done - started, 2),
        "cpu_s_per_gb": round(copy_cpu / gb, 1) if gb else None,
        "cpu_s": round(sampler.cpu_seconds, 1), "peak_rss_mb": round(sampler.peak_rss / 1e6, 1),
        "records": records, "value_bytes": value_bytes, "partitions": partitions,
    }
    log(f"  {system}: {result['records_per_s']:,.0f} records/s, {result['mb_per_s']} MB/s, "
        f"start-up {result['startup_s']} s, CPU {result['cpu_s_per_gb']} s/GB, peak RSS {result['peak_rss_mb']} MB")
    return result


def measure_steady(system: str, wl: dict, rate: float, src: str, dst: str, work: Path, repeat: int = 1,
                   tag: str = "") -> dict:
    """Start the system on an empty topic, then produce at ``rate`` for the workload's seconds."""
    partitions, seconds, value_bytes = wl["partitions"], wl["seconds"], wl["value_bytes"]
    topic = f"steady-{system}{tag}" if repeat == 1 else f"steady-{system}{tag}-r{repeat}"
    log(f"{wl['name']}: {system} at {rate:,.0f} records/s for {seconds} s")
    create_topic(src, topic, partitions)
    started = time.monotonic()
    procs, target_topic = start_system(system, src, dst, topic, partitions, work)
    # warm-up: one record per partition, and wait until the system has copied them
    p = Producer({"bootstrap.servers": src})
    for i in range(partitions):
        p.produce(topic, value=b"warm-up", partition=i)
    p.flush(30)
    first, done = wait_complete(dst, target_topic, partitions, 300, lambda: all(q.poll() is None for q in procs))
    if done is None:
        stop_system(system, procs)
        raise SystemExit(f"{system} did not start copying within 300 s; see {work}")
    startup = done - started
    expect = int(rate * seconds)
    out = work / f"{topic}.json"
    # a mirror carries the source's heartbeats topic to <alias>.heartbeats (the raw loop does not)
    beats = [] if system == "raw" else ["--heartbeats-topic", f"{target_topic.split('.', 1)[0]}.heartbeats"]
    probe = subprocess.Popen([sys.executable, "-m", "bench.steady", "probe", "--bootstrap", dst, "--topic", target_topic,
                              "--expect", str(expect), "--timeout", str(seconds + wl.get("warm_up", 0.0) + 120), "--out", str(out), *beats],
                             stdout=subprocess.PIPE, cwd=ROOT)
    probe.stdout.readline()  # ready: assigned at the current end
    sampler = TreeSampler([q.pid for q in procs])
    sampler.start()
    sampler.sample()
    cpu0 = sampler.cpu_seconds
    # CPU per GB is the measured part's: the warm-up's records are not in the GB it is divided by.
    # The generator's measured part begins ``warm_up`` seconds after it starts (its start-up, well
    # under a second, is counted as warm-up here).
    warm_up = wl.get("warm_up", 0.0)
    measured_from: list[float] = []

    def measured_part_begins() -> None:
        sampler.sample()
        measured_from.append(sampler.cpu_seconds)

    timer = threading.Timer(warm_up, measured_part_begins)
    if warm_up > 0:
        timer.start()
    producer = subprocess.run([sys.executable, "-m", "bench.steady", "produce", "--bootstrap", src, "--topic", topic,
                               "--rate", str(rate), "--seconds", str(seconds), "--value-bytes", str(value_bytes),
                               "--partitions", str(partitions), "--warm-up", str(warm_up)],
                              capture_output=True, text=True, cwd=ROOT)
    sent = json.loads(producer.stdout.strip().splitlines()[-1])
    probe.wait(seconds + warm_up + 180)
    timer.cancel()
    sampler.stop()
    cpu_from = measured_from[0] if measured_from else cpu0
    stop_system(system, procs)
    lat = json.loads(out.read_text())
    gb = sent["sent"] * value_bytes / 1e9
    result = {
        "workload": wl["name"], "system": system,
        "records_per_s": sent["rate"], "mb_per_s": round(sent["rate"] * value_bytes / 1e6, 2),
        "p50_latency_s": lat["p50_s"], "p99_latency_s": lat["p99_s"], "p999_latency_s": lat.get("p999_s"),
        "max_latency_s": lat["max_s"],
        "startup_s": round(startup, 2), "copy_s": sent["seconds"], "wall_s": round(time.monotonic() - started, 2),
        "cpu_s_per_gb": round((sampler.cpu_seconds - cpu_from) / gb, 1) if gb else None,
        "cpu_s": round(sampler.cpu_seconds, 1), "cpu_s_measured": round(sampler.cpu_seconds - cpu_from, 1),
        "peak_rss_mb": round(sampler.peak_rss / 1e6, 1),
        "records": sent["sent"], "received": lat["received"], "value_bytes": value_bytes, "partitions": partitions,
        "target_rate": round(rate, 1), "seconds": seconds, "warm_up_s": warm_up, "repeat": repeat,
        "heartbeat_p50_latency_s": lat.get("heartbeat_p50_s"), "heartbeat_p99_latency_s": lat.get("heartbeat_p99_s"),
        "heartbeats": lat.get("heartbeat_received"),
        # the unmeasured warm-up's own figures (the system's first minute under load)
        "warm_up_p99_latency_s": lat.get("warm_up_p99_s"), "warm_up_max_latency_s": lat.get("warm_up_max_s"),
        "settled_s": lat.get("settled_s"), "settled_fast_s": lat.get("settled_fast_s"),
        # how far the load generator itself fell behind its schedule (it shares the cores)
        "generator_max_behind_s": sent.get("max_behind_s"),
    }
    beats = (f"; heartbeats p50 {result['heartbeat_p50_latency_s']} s, p99 {result['heartbeat_p99_latency_s']} s "
             f"({result['heartbeats']})" if result["heartbeats"] is not None else "")
    log(f"  {system}: sent {sent['sent']:,} at {sent['rate']:,.0f}/s, received {lat['received']:,}; latency p50 "
        f"{lat['p50_s']} s, p99 {lat['p99_s']} s, max {lat['max_s']} s; CPU {result['cpu_s_per_gb']} s/GB{beats}; "
        f"warm-up p99 {result['warm_up_p99_latency_s']} s, max {result['warm_up_max_latency_s']} s, latency under "
        f"1 s for good after {result['settled_s']} s; the load generator at most "
        f"{result['generator_max_behind_s']} s behind its schedule")
    series = lat.get("per_second") or []
    if series:
        # when the slowest records arrived, in seconds since the first measured one: a stall repeating
        # at a fixed period points at something periodic (a checkpoint, a batch boundary, a flush)
        t0 = series[0][0]
        slow = sorted(series, key=lambda s: -s[2])[:8]
        log(f"  {system}: slowest arrival seconds (s since start: worst latency s): "
            + ", ".join(f"{sec - t0}: {worst / 1000:.2f}" for sec, _, worst in sorted(slow)))
    delete_topics(src, topic)
    delete_topics(dst, topic)
    return result


def warm_up(src: str, dst: str, work: Path, timeout: float) -> None:
    """An untimed raw copy of 500,000 x 1 KB: freshly started brokers run their first minute
    in the JVM's interpreter, which would handicap whichever system is measured first."""
    wl = {"name": "warm-up", "records": 500_000, "value_bytes": 1024, "partitions": 12}
    log("warm-up: an untimed raw copy of 500,000 x 1 KB (broker JIT)")
    fill(src, "warm-up", wl["records"], wl["value_bytes"], wl["partitions"])
    measure_catchup("raw", wl, src, dst, "warm-up", work, timeout)
    delete_topics(src, "warm-up")
    delete_topics(dst, "warm-up")


def median_rate_by_system(rows: list[dict]) -> dict[str, tuple[float, float, float, int]]:
    """system -> (median, min, max, runs) of records/s, in the rows' order of systems."""

    rates: dict[str, list[float]] = {}
    for r in rows:
        rates.setdefault(r["system"], []).append(r["records_per_s"])
    return {s: (statistics.median(v), min(v), max(v), len(v)) for s, v in rates.items()}


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = platform.processor() or platform.machine()
    return f"{CORES} cores ({cpu}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def _exit_on_signal(signum, _frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="a,b,c,d", help="which of a,b,c,d,e (default a,b,c,d)")
    ap.add_argument("--systems", default="raw,mm2,sparkmirror",
                    help="comma-separated: raw, mm2, " + ", ".join(SPARKMIRROR_SYSTEMS))
    ap.add_argument("--extra-systems", default="sparkmirror-kafka,sparkmirror-eos",
                    help="systems measured on workload a only (default: the Spark Kafka source path and "
                         "exactly-once mode, for their cost against the default); '' for none")
    ap.add_argument("--records", type=int, default=None, help="override the catch-up backlog size (quick runs)")
    ap.add_argument("--steady-seconds", type=float, default=None, help="override the steady-state duration")
    ap.add_argument("--steady-warm-up", type=float, default=None,
                    help="override the steady workload's unmeasured warm-up seconds")
    ap.add_argument("--steady-rate", type=float, default=None,
                    help="records/s for the steady workload (default: half of this run's raw rate in workload a, "
                         "the median of its runs)")
    ap.add_argument("--curve-loads", default=None,
                    help="workload e's loads as shares of this run's raw rate (default 0.1,0.25,0.5)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per system and workload (catch-up: each on freshly written data; steady: "
                         "each on a fresh topic, the systems taking turns); BENCHMARKS.md shows the median "
                         "and the spread (min-max)")
    ap.add_argument("--catchup-repeats", type=int, default=None,
                    help="runs per system of the catch-up workloads (default --repeats): a curve repeated "
                         "three times needs its raw rate once")
    ap.add_argument("--curve-systems", default=None,
                    help="the systems of workload e's curve (default --systems; raw still runs workload a "
                         "for the rate)")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="a source tree of sparkmirror (e.g. `git archive main | tar x -C /tmp/base`) run as system "
                         "sparkmirror-baseline beside the others: a change's before and after in the same run")
    ap.add_argument("--java-home", type=Path, default=None,
                    help="a JDK run as system sparkmirror-java beside the others (the default path with this "
                         "JAVA_HOME): another JVM's effect, same run")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--no-write", action="store_true", help="print results only")
    ap.add_argument("--no-warm-up", action="store_true",
                    help="skip the untimed warm-up copy (fresh brokers' JVMs are slower for the first system)")
    args = ap.parse_args(argv)
    # SIGTERM ends the run as Ctrl-C does, through the clean-up below (Python's default would not)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    systems = args.systems.split(",")
    extra_systems = [x for x in args.extra_systems.split(",") if x]
    curve_systems = args.curve_systems.split(",") if args.curve_systems else systems
    for s in systems + extra_systems + curve_systems:
        if s not in ("raw", "mm2", *SPARKMIRROR_SYSTEMS):
            ap.error(f"unknown system {s!r}")
    if ("sparkmirror-baseline" in systems + extra_systems + curve_systems) != (args.baseline_src is not None):
        ap.error("system sparkmirror-baseline and --baseline-src go together")
    if ("sparkmirror-java" in systems + extra_systems + curve_systems) != (args.java_home is not None):
        ap.error("system sparkmirror-java and --java-home go together")
    if args.java_home is not None:
        if not (args.java_home / "bin" / "java").is_file():
            ap.error(f"--java-home {args.java_home}: no bin/java there")
        JAVA_HOME.append(args.java_home.resolve())
    if args.baseline_src is not None:
        if not (args.baseline_src / "sparkmirror_cli" / "main.py").is_file():
            ap.error(f"--baseline-src {args.baseline_src}: no sparkmirror_cli/main.py there")
        BASELINE_SRC.append(args.baseline_src.resolve())
    chosen = [WORKLOADS[w.strip()] for w in args.workloads.split(",")]
    artifacts.ensure_all()
    work = artifacts.cache_dir() / "bench" / datetime.now().strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True)
    clusters = [KafkaCluster(name, free_port(), free_port(), work / name, heap="1g") for name in ("src", "dst")]
    results = []
    raw_rates: list[float] = []  # the raw loop's runs on workload a: the steady rate is half their median
    try:
        for c in clusters:
            c.start()
        src, dst = clusters[0].bootstrap, clusters[1].bootstrap
        if not args.no_warm_up:
            warm_up(src, dst, work, args.timeout)
        for wl in chosen:
            wl = dict(wl)
            if wl["kind"] == "catchup":
                if args.records:
                    wl["records"] = args.records
                catchup_repeats = args.catchup_repeats or args.repeats
                for repeat in range(1, catchup_repeats + 1):
                    # Each repeat copies a freshly written topic of its own: every system starts
                    # from nothing (no checkpoint, no MM2 connector offsets to resume from).
                    topic = wl["name"] if catchup_repeats == 1 else f"{wl['name']}-r{repeat}"
                    log(f"clusters up: source {src}, target {dst}; {wl['name']} (repeat {repeat} of "
                        f"{catchup_repeats}): writing {wl['records']:,} x {wl['value_bytes']} B over "
                        f"{wl['partitions']} partitions")
                    fill(src, topic, wl["records"], wl["value_bytes"], wl["partitions"])
                    extra = extra_systems if wl["name"] == WORKLOADS["a"]["name"] else []
                    for system in systems + extra:
                        r = measure_catchup(system, wl, src, dst, topic, work, args.timeout)
                        r["repeat"] = repeat
                        results.append(r)
                        if system == "raw" and wl["value_bytes"] == 1024 and wl["partitions"] == 12:
                            raw_rates.append(r["records_per_s"])
                    delete_topics(src, topic)
                    delete_topics(dst, topic)
            elif wl["kind"] == "curve":
                if not raw_rates:
                    raise SystemExit("workload e sets its loads from this run's raw rate: run workload a first "
                                     "(--workloads a,e) with system raw")
                if args.steady_seconds:
                    wl["seconds"] = args.steady_seconds
                if args.steady_warm_up is not None:
                    wl["warm_up"] = args.steady_warm_up
                raw = statistics.median(raw_rates)
                loads = [float(x) for x in args.curve_loads.split(",")] if args.curve_loads else wl["loads"]
                for load in loads:
                    for repeat in range(1, args.repeats + 1):
                        for system in curve_systems:  # the same command line at every load: no per-load tuning
                            r = measure_steady(system, wl, raw * load, src, dst, work, repeat, tag=f"-l{int(load * 100)}")
                            r.update({"load": load, "raw_records_per_s": round(raw, 1)})
                            results.append(r)
            else:
                if args.steady_seconds:
                    wl["seconds"] = args.steady_seconds
                if args.steady_warm_up is not None:
                    wl["warm_up"] = args.steady_warm_up
                # The median, as the catch-up table shows it: the raw loop's fastest run can be half
                # as fast again as its median, and a load set from it saturates every system.
                rate = args.steady_rate or (statistics.median(raw_rates) * wl["load"] if raw_rates else 50_000.0)
                for repeat in range(1, args.repeats + 1):
                    for system in systems:
                        results.append(measure_steady(system, wl, rate, src, dst, work, repeat))
    finally:
        # an interrupted run stops what it started too: a system left running would hold the
        # brokers' ports, and the brokers' logs (tens of GB after a steady run) would fill the disk
        for system, procs in list(RUNNING):
            stop_system(system, procs)
        for c in clusters:
            c.stop()
        shutil.rmtree(work / "src" / "log", ignore_errors=True)
        shutil.rmtree(work / "dst" / "log", ignore_errors=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = "python -m bench.run " + shlex.join(argv if argv is not None else sys.argv[1:])
    for r in results:
        r.update({"date": stamp, "machine": machine(), "command": command.strip(), "kafka": artifacts.KAFKA_VERSION})
    for wl in chosen:
        by = median_rate_by_system([r for r in results if r["workload"] == wl["name"]])
        for system, (rate, low, high, n) in by.items():
            log(f"{wl['name']}: {system}: median {rate:,.0f} records/s over {n} run(s), spread {low:,.0f}-{high:,.0f}")
        if "sparkmirror" in by:
            for peer in ("mm2", "raw", "sparkmirror-baseline"):
                if peer in by and by[peer][0]:
                    log(f"{wl['name']}: sparkmirror/{peer}: {by['sparkmirror'][0] / by[peer][0]:.2f}x (medians)")
    if not args.no_write:
        existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps(existing + results, indent=2) + "\n")
        from bench.report import write_benchmarks_md

        write_benchmarks_md()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
