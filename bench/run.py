"""One command, three systems, the same data, the same machine, the same run.

    python -m bench.run                      # catch-up of 1,000,000 x 1 KB over 12 partitions
    python -m bench.run --records 200000 --value-bytes 100 --workload catchup-100b

Starts two fresh single-node KRaft clusters, writes the backlog once to the source,
then for each system — raw (confluent-kafka consume->produce, 2 processes),
Apache MirrorMaker 2 (dedicated mode, tasks.max = cores) and sparkmirror (Spark
local[*]) — starts it, waits until all records are on its own target topic and
stops it. Throughput is measured from the first record on the target to the last
(start-up excluded; reported separately). Results are appended to
bench/results.json and BENCHMARKS.md is regenerated from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.procstats import TreeSampler
from replicator.devenv import artifacts
from replicator.devenv.kafka import KafkaCluster, free_port
from replicator.devenv.mm2 import MirrorMaker2, single_node_settings

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


def wait_complete(bootstrap: str, topic: str, records: int, timeout: float, alive) -> tuple[float | None, float | None]:
    first = done = None
    deadline = time.monotonic() + timeout
    last_report = 0.0
    while time.monotonic() < deadline:
        n = end_offsets(bootstrap, topic)
        now = time.monotonic()
        if n > 0 and first is None:
            first = now
        if n >= records:
            done = now
            break
        if now - last_report > 15:
            log(f"  {topic}: {n}/{records} ({n * 100 // max(records, 1)}%)")
            last_report = now
        if not alive():
            log("  system exited early")
            break
        time.sleep(0.25)
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


def sparkmirror_config(src: str, dst: str, topic: str, path: Path) -> Path:
    props = {
        "clusters": "sm, dr", "sm.bootstrap.servers": src, "dr.bootstrap.servers": dst,
        "sm->dr.enabled": "true", "sm->dr.topics": topic, "sync.topic.acls.enabled": "false",
        **single_node_settings(),
    }
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


def measure(system: str, workload: str, src: str, dst: str, topic: str, records: int, value_bytes: int,
            partitions: int, work: Path, timeout: float) -> dict:
    log(f"{workload}: {system}")
    started = time.monotonic()
    if system == "raw":
        procs = run_raw(src, dst, topic, partitions, work)
        target_topic = f"raw.{topic}"
    elif system == "mm2":
        mm = MirrorMaker2(mm2_properties(src, dst, topic), work / "mm2", heap="2g", log_level="WARN").start()
        procs = [mm.process]
        target_topic = f"mm2.{topic}"
    else:
        cfg = sparkmirror_config(src, dst, topic, work / "sparkmirror.properties")
        procs = [subprocess.Popen(
            [sys.executable, "-m", "replicator.cli", "replicate", str(cfg), "--checkpoint-dir", str(work / "sm-ckpt")],
            stdout=open(work / "sparkmirror.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)]
        target_topic = f"sm.{topic}"
    sampler = TreeSampler([p.pid for p in procs])
    sampler.start()
    first, done = wait_complete(dst, target_topic, records, timeout, lambda: all(p.poll() is None for p in procs))
    sampler.stop()
    for p in procs:
        if system == "mm2":
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        else:
            stop_group(p)
    if first is None or done is None:
        raise SystemExit(f"{system} did not finish {workload} within {timeout}s; see {work}")
    copy_s = max(done - first, 1e-6)
    gb = records * value_bytes / 1e9
    result = {
        "workload": workload, "system": system,
        "records_per_s": round(records / copy_s, 1),
        "mb_per_s": round(records * value_bytes / 1e6 / copy_s, 2),
        "p50_latency_s": None, "p99_latency_s": None,
        "startup_s": round(first - started, 2), "copy_s": round(copy_s, 2), "wall_s": round(done - started, 2),
        "cpu_s_per_gb": round(sampler.cpu_seconds / gb, 1) if gb else None,
        "cpu_s": round(sampler.cpu_seconds, 1), "peak_rss_mb": round(sampler.peak_rss / 1e6, 1),
        "records": records, "value_bytes": value_bytes, "partitions": partitions,
    }
    log(f"  {system}: {result['records_per_s']:.0f} records/s, {result['mb_per_s']} MB/s, "
        f"start-up {result['startup_s']} s, CPU {result['cpu_s']} s, peak RSS {result['peak_rss_mb']} MB")
    return result


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = platform.processor() or platform.machine()
    return f"{CORES} cores ({cpu}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="catchup-1m-1kb-12p")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--systems", default="raw,mm2,sparkmirror")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--no-write", action="store_true", help="print results only")
    args = ap.parse_args(argv)
    artifacts.ensure_all()
    work = artifacts.cache_dir() / "bench" / datetime.now().strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True)
    clusters = [KafkaCluster(name, free_port(), free_port(), work / name, heap="1g") for name in ("src", "dst")]
    results = []
    try:
        for c in clusters:
            c.start()
        src, dst = clusters[0].bootstrap, clusters[1].bootstrap
        log(f"clusters up: source {src}, target {dst}; writing {args.records} x {args.value_bytes} B over {args.partitions} partitions")
        fill(src, "bench", args.records, args.value_bytes, args.partitions)
        for system in args.systems.split(","):
            results.append(measure(system, args.workload, src, dst, "bench", args.records, args.value_bytes,
                                   args.partitions, work, args.timeout))
    finally:
        for c in clusters:
            c.stop()
        shutil.rmtree(work / "src" / "log", ignore_errors=True)
        shutil.rmtree(work / "dst" / "log", ignore_errors=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:])
    for r in results:
        r.update({"date": stamp, "machine": machine(), "command": command.strip()})
    by = {r["system"]: r for r in results}
    if "sparkmirror" in by:
        for peer in ("mm2", "raw"):
            if peer in by:
                log(f"sparkmirror/{peer}: {by['sparkmirror']['records_per_s'] / by[peer]['records_per_s']:.2f}x")
    if not args.no_write:
        existing = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps(existing + results, indent=2) + "\n")
        from bench.report import write_benchmarks_md

        write_benchmarks_md()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
