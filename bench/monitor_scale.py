"""The lag monitor at scale: refresh, /metrics, /api/status, CPU and memory at N partitions.

    python -m bench.monitor_scale --partitions 10000      # partition, then topic granularity
    python -m bench.monitor_scale --partitions 100000 --granularity topic --brokers 8 --records 1

Starts two fresh single-node KRaft clusters (``--brokers N``: N nodes each, node 1
broker and controller, the others brokers only: a broker keeps an open file per
partition and this machine's limit is 20,000 per process, so 100,000 partitions
need several), creates ``--partitions`` source
partitions (topics of 100 partitions) and their mirror partitions, fills each
with a few records, copies them and writes one MM2 offset-sync per partition,
so every partition is caught up; then one more topic of 100 partitions is
kept busy by tests.support.copier (``--rate`` records/s, each copied 1 s after
its timestamp, offset-syncs and heartbeats written), so a hundred positions
move at every read while the rest stay idle, as on a real cluster. The monitor
runs as its own process (``sparkmirror monitor``, default options apart from
``--granularity``) and is measured for ``--seconds`` after its first complete
status:

- refresh_ms: duration of one round of the positions loop (two batched
  ListOffsets, the positions of every partition), p50 of every round of the
  last minute of the run (the monitor's own count, ``collector_last_minute`` in
  ``/api/status``); ``refresh_max_ms`` the worst, ``refresh_rounds`` how many;
  ``refresh_sampled_ms``: p50 of the last round before each of the bench's
  scrapes, as measured before (biased: each scrape makes an evaluation and a
  render on the loop the round shares);
- metrics_ms / status_ms: ``GET /metrics`` and ``GET /api/status`` (summary),
  p50 over the run; metrics_first_ms: the first ``GET /metrics``, made before the run
  (it formats every partition's lines; later renders reuse those that did not change);
- loop_block_max_ms: the slowest ``GET /healthz`` (it does nothing but answer,
  so its time is how long the event loop was busy with something else);
- evaluation_max_ms: the slowest evaluation (``evaluation_seconds``, its own work);
  evaluation_step_max_ms: the longest it kept the event loop busy at once (it runs in
  steps, letting requests through in between); evaluation_step_cpu_max_ms: the most
  CPU time one step used (the wall time above also counts waiting for the GIL while a
  collector thread held it); evaluation_step_max_runqueue_ms: of the longest step, the
  time the monitor's thread waited for a core (the brokers, the copier and the load
  generator share the two cores); gc_pause_max_ms: the longest garbage collection seen
  (every thread stops for it), from the evaluations sampled; gc_pause_cpu_max_ms: the most
  CPU time a collection used (a collection's wall time also counts its thread waiting for a
  core, the GIL held all along);
- gc_freeze_pause_ms: the one full collection the monitor makes when it freezes its
  state once built (``monitor.gcpauses``), measured before the run: the run starts
  after it and the evaluation that reports it, as it is a start-up cost (again only
  when the partitions watched grow by a quarter); gc_top_up_pause_ms: the collection that
  tops the freeze up with the idle partitions' results once they are built (the run starts
  after it too);
- cpu_percent: the monitor process' CPU over the run, in % of one core;
  rss_mb: its peak RSS.

Rows go to bench/results.json as ``{"system": "monitor", ...}`` and
BENCHMARKS.md is regenerated.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.procstats import TreeSampler
from devenv.kafka import KafkaCluster, free_port
from sparkmirror.model.records import OffsetSync
from tests.support.copier import DelayedCopier, SteadyProducer

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
PER_TOPIC = 100


def log(msg: str) -> None:
    print(f"[monitor-bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cluster_nodes(name: str, work: Path, brokers: int, heap: str) -> list[KafkaCluster]:
    """One cluster: node 1 broker and the only controller, nodes 2..N brokers only.

    The test clusters check retention every 5 s (tests delete records and watch for it); with
    tens of thousands of partitions per broker that scan is load of its own, so here it runs
    at Kafka's default, every 5 minutes."""
    common = {"log.retention.check.interval.ms": "300000"}
    first = KafkaCluster(name, free_port(), free_port(), work / name / "node1", heap=heap, extra_config=dict(common))
    if brokers == 1:
        return [first]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=").lstrip("-") or "sparkmirror"
    first.cluster_id = cluster_id
    voters = f"1@127.0.0.1:{first.controller_port}"
    nodes = [first]
    for i in range(2, brokers + 1):
        port = free_port()
        nodes.append(KafkaCluster(name, port, free_port(), work / name / f"node{i}", heap=heap, cluster_id=cluster_id,
                                  extra_config={**common, "process.roles": "broker", "node.id": str(i),
                                                "controller.quorum.voters": voters,
                                                "listeners": f"PLAINTEXT://127.0.0.1:{port}"}))
    return nodes


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), 20):
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i:i + 20]],
                                      operation_timeout=120, request_timeout=180)
        for f in futures.values():
            f.result(300)


def wait_for_logs(bootstrap: str, topics: list[str], deadline_seconds: float = 1800.0) -> None:
    """Until every partition of ``topics`` answers ListOffsets. CreateTopics returns once the
    controller has the partitions; each broker then creates their logs (a directory and files,
    some synced) one after the other, which at 100,000 partitions on two cores takes minutes.
    The monitor's first read is measured on brokers that are done with that. A new client each
    round: one whose call timed out while the brokers were busy kept timing out afterwards
    (as the monitor's ListOffsets client does; see ClusterClient._note_offsets_outcome)."""
    pending = [(t, p) for t in topics for p in range(PER_TOPIC)]
    started = last_log = time.monotonic()
    while pending:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "monitor-bench-wait"})
        left = []
        try:
            for i in range(0, len(pending), 500):
                chunk = pending[i:i + 500]
                try:
                    answer = consumer.offsets_for_times([TopicPartition(t, p, -1) for t, p in chunk], timeout=10)
                except KafkaException:
                    left.extend(pending[i:])  # this client is done for; a new one next round
                    break
                left.extend((tp.topic, tp.partition) for tp in answer if tp.error is not None or tp.offset < 0)
        finally:
            consumer.close()
        pending = left
        if time.monotonic() - last_log >= 30 or not pending:
            last_log = time.monotonic()
            log(f"{bootstrap.split(',')[0]}: {len(topics) * PER_TOPIC - len(pending)} of "
                f"{len(topics) * PER_TOPIC} partitions answer ListOffsets ({last_log - started:.0f} s)")
        if pending and time.monotonic() - started > deadline_seconds:
            raise RuntimeError(f"{len(pending)} partitions still do not answer ListOffsets after "
                               f"{deadline_seconds:.0f} s")
        if pending:
            time.sleep(2)


def fill(bootstrap: str, topics: list[str], records: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1000000})
    for t in topics:
        for part in range(PER_TOPIC):
            for _ in range(records):
                p.produce(t, b"v", key=b"k", partition=part)
        p.poll(0)
    assert p.flush(300) == 0


def write_syncs(bootstrap: str, topic: str, sources: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in sources:
        for part in range(PER_TOPIC):
            s = OffsetSync(t, part, 0, 0)
            p.produce(topic, s.encode_value(), key=s.encode_key())
        p.poll(0)
    assert p.flush(120) == 0


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 30 s: a monitor busy with its first read of 100,000
    partitions on loaded cores did not exit within 30 s of SIGTERM, and was left running."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def get(url: str, timeout: float = 60.0) -> tuple[bytes, float]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        body = resp.read()
    return body, time.perf_counter() - started


def wait_for_freeze(url: str, total: int, timeout: float = 120.0,
                    top_up_within: float = 30.0) -> tuple[float | None, float | None]:
    """Until the monitor froze its built state, then topped the freeze up with the idle
    partitions' results (or ``top_up_within`` s passed), and an evaluation after each reported
    its collection: (the freeze's pause, the top-up's) in s; None for what did not happen
    (below GcSettler.MIN_PARTITIONS nothing is frozen)."""
    from monitor.gcpauses import GcSettler

    if total < GcSettler.MIN_PARTITIONS:
        return None, None
    deadline = time.monotonic() + timeout

    def after(key: str, until: float) -> float | None:
        shown_in = None  # the evaluation (generated_at) that first showed it
        while time.monotonic() < until:
            doc = json.loads(get(url + "/api/status")[0])
            at, mon = doc.get("generated_at"), doc.get("monitor", {})
            if shown_in is None and (mon.get(key) or 0) >= 1:
                shown_in = at
            elif shown_in is not None and at != shown_in:
                return mon.get("gc_longest_pause_seconds")  # taken by the evaluation after it
            time.sleep(0.5)
        return None

    freeze = after("gc_state_freezes", deadline)
    if freeze is None:
        raise RuntimeError(f"the monitor did not freeze its state within {timeout:.0f} s")
    return freeze, after("gc_state_top_ups", time.monotonic() + top_up_within)


def measure(url: str, monitor: subprocess.Popen, total: int, granularity: str, args, work: Path) -> dict:
    waited = time.monotonic()
    deadline = waited + 900  # the first read of 100,000 partitions' metadata and offsets
    next_progress = waited + 30
    seen, collectors = 0, {}
    while True:
        try:
            doc = json.loads(get(url + "/api/status")[0])
            flow = doc["flows"][0]
            seen, collectors = sum(flow["partitions_by_status"].values()), flow.get("collector_seconds", {})
            if seen >= total and flow["lag"]["records"] is not None:
                break
        except (OSError, KeyError, IndexError, ValueError):
            pass
        if time.monotonic() > deadline or monitor.poll() is not None:
            tail = (work / f"monitor-{granularity}.log").read_text(errors="replace").splitlines()[-30:]
            raise RuntimeError(f"the monitor did not see {total} partitions (saw {seen}); the end of its log:\n"
                               + "\n".join(tail))
        if time.monotonic() >= next_progress:
            next_progress += 30
            log(f"waiting for the monitor's first complete read: {seen} of {total} partitions, "
                f"{time.monotonic() - waited:.0f} s, collector seconds {json.dumps(collectors)}")
        time.sleep(1)
    freeze_pause, top_up_pause = wait_for_freeze(url, total)
    # Prometheus scrapes from the monitor's start: the first render, which formats every
    # partition's lines (later ones reuse those that did not change), is a start-up cost too
    first_metrics = get(url + "/metrics")[1]
    log(f"monitor ready ({granularity}): {total} partitions; measuring {args.seconds:.0f} s")
    sampler = TreeSampler([monitor.pid], interval=1.0)
    sampler.sample()
    cpu0, wall0 = sampler.cpu_seconds, time.monotonic()
    sampler.start()
    refresh, probe, evaluation, steps, metrics_t, status_t, healthz_t = [], [], [], [], [], [], []
    step_cpu, gc_pause, gc_pause_cpu, step_runqueue = [], [], [], []
    metrics_bytes = 0
    end = time.monotonic() + args.seconds
    next_heavy = 0.0
    while time.monotonic() < end:
        healthz_t.append(get(url + "/healthz")[1])
        if time.monotonic() >= next_heavy:
            next_heavy = time.monotonic() + 5
            body, took = get(url + "/metrics")
            metrics_t.append(took)
            metrics_bytes = len(body)
            body, took = get(url + "/api/status")
            status_t.append(took)
            doc = json.loads(body)
            secs = doc["flows"][0]["collector_seconds"]
            refresh.append(secs.get("offsets", 0.0))
            probe.append(secs.get("lag_probe", 0.0))
            evaluation.append(doc["monitor"]["evaluation_seconds"])
            step = doc["monitor"].get("evaluation_longest_step_seconds")
            if step is not None:
                steps.append(step)
                step_runqueue.append((step, doc["monitor"].get("evaluation_longest_step_runqueue_seconds")))
            for values, key in ((step_cpu, "evaluation_longest_step_cpu_seconds"),
                                (gc_pause, "gc_longest_pause_seconds"),
                                (gc_pause_cpu, "gc_longest_pause_cpu_seconds")):
                if doc["monitor"].get(key) is not None:
                    values.append(doc["monitor"][key])
        time.sleep(0.25)
    sampler.stop()
    # Every round of the positions loop in the window, as the monitor counts them: a round sampled
    # from /api/status is always the last one before the bench's own scrape (each request makes a
    # fresh evaluation, and a scrape renders every partition's lines: both in steps on the loop the
    # round shares), and asking more often would make more evaluations, a load of its own.
    rounds = json.loads(get(url + "/api/status")[0])["flows"][0].get("collector_last_minute", {}).get("offsets")
    cpu = (sampler.cpu_seconds - cpu0) / (time.monotonic() - wall0) * 100

    def ms(values, fn=statistics.median):
        return round(fn(values) * 1000, 1)

    worst_step_runqueue = max(step_runqueue, key=lambda s: s[0])[1] if step_runqueue else None

    return {
        "workload": "monitor-scale", "system": "monitor", "partitions": total, "granularity": granularity,
        "refresh_ms": round(rounds["p50_seconds"] * 1000, 1) if rounds else ms(refresh),
        "refresh_max_ms": round(rounds["max_seconds"] * 1000, 1) if rounds else ms(refresh, max),
        "refresh_rounds": rounds["rounds"] if rounds else None,
        # the rounds sampled by /api/status after each scrape, as measured before
        "refresh_sampled_ms": ms(refresh), "refresh_sampled_max_ms": ms(refresh, max),
        "metrics_ms": ms(metrics_t), "metrics_max_ms": ms(metrics_t, max), "metrics_bytes": metrics_bytes,
        "metrics_first_ms": ms([first_metrics]),
        "status_ms": ms(status_t), "status_max_ms": ms(status_t, max),
        "probe_ms": ms(probe), "evaluation_max_ms": ms(evaluation, max),
        "evaluation_step_max_ms": ms(steps, max) if steps else None,
        "evaluation_step_cpu_max_ms": ms(step_cpu, max) if step_cpu else None,
        # of the longest step's wall time: waiting for a core (other processes had both)
        "evaluation_step_max_runqueue_ms": ms([worst_step_runqueue]) if worst_step_runqueue is not None else None,
        "gc_pause_max_ms": ms(gc_pause, max) if gc_pause else None,
        # the collector's own CPU time in its pauses, at most (the wall time above also counts its
        # thread waiting for a core)
        "gc_pause_cpu_max_ms": ms(gc_pause_cpu, max) if gc_pause_cpu else None,
        "gc_freeze_pause_ms": round(freeze_pause * 1000, 1) if freeze_pause is not None else None,
        "gc_top_up_pause_ms": round(top_up_pause * 1000, 1) if top_up_pause is not None else None,
        "loop_block_max_ms": ms(healthz_t, max),
        "cpu_percent": round(cpu, 1), "rss_mb": round(sampler.peak_rss / 2**20, 1),
        "busy_rate": args.rate, "seconds": args.seconds,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()}",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10000, help="idle source partitions (plus 100 busy ones)")
    ap.add_argument("--granularity", default="partition,topic",
                    help="comma-separated: one monitor run each, on the same clusters (default partition,topic)")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="records/s into the busy topic")
    ap.add_argument("--records", type=int, default=3, help="records per idle partition")
    ap.add_argument("--heap", default="2g", help="broker heap")
    ap.add_argument("--brokers", type=int, default=1,
                    help="brokers per cluster (a broker keeps a file open per partition: 20,000 at most here)")
    ap.add_argument("--no-record", action="store_true", help="print the row, do not write results")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="monitor-bench-"))
    clusters = [cluster_nodes(name, work, args.brokers, args.heap) for name in ("primary", "dr")]
    monitor = copier = producer = None
    try:
        started = time.monotonic()
        for nodes in clusters:
            nodes[0].start(timeout=300)
            for n in nodes[1:]:
                n.start(timeout=300)
        log(f"{len(clusters)} clusters of {args.brokers} broker(s) up in {time.monotonic() - started:.0f} s")
        primary, dr = (",".join(n.bootstrap for n in nodes) for nodes in clusters)
        idle = [f"t{i:04d}" for i in range(args.partitions // PER_TOPIC)]
        started = time.monotonic()
        log(f"creating {len(idle)} x {PER_TOPIC} source and mirror partitions")
        create_topics(primary, [*idle, "busy"], PER_TOPIC)
        create_topics(dr, [f"primary.{t}" for t in [*idle, "busy"]], PER_TOPIC)
        create_topics(dr, ["primary.heartbeats"], 1)
        create_topics(primary, ["mm2-offset-syncs.dr.internal"], 1)
        log(f"created in {time.monotonic() - started:.0f} s; waiting for the brokers to create their logs")
        wait_for_logs(primary, [*idle, "busy"])
        wait_for_logs(dr, [f"primary.{t}" for t in [*idle, "busy"]])
        log(f"logs ready {time.monotonic() - started:.0f} s after the first CreateTopics; filling")
        fill(primary, idle, args.records)
        fill(dr, [f"primary.{t}" for t in idle], args.records)
        if args.records:  # empty partitions need no offset-sync: an empty mirror is caught up
            write_syncs(primary, "mm2-offset-syncs.dr.internal", idle)
        log(f"filled in {time.monotonic() - started:.0f} s")
        producer = SteadyProducer(primary, "busy", PER_TOPIC, args.rate).start()
        copier = DelayedCopier(primary, dr, "busy", "primary.busy", PER_TOPIC, 1.0,
                               syncs_topic="mm2-offset-syncs.dr.internal", heartbeats_topic="primary.heartbeats",
                               source_alias="primary", target_alias="dr").start()

        config = work / "mm2.properties"
        config.write_text(f"clusters = primary, dr\nprimary.bootstrap.servers = {primary}\n"
                          f"dr.bootstrap.servers = {dr}\nprimary->dr.enabled = true\n"
                          "emit.checkpoints.enabled = false\n")
        total = len(idle) * PER_TOPIC + PER_TOPIC
        for granularity in args.granularity.split(","):
            monitor = subprocess.Popen([str(Path(sys.executable).parent / "sparkmirror"), "monitor", str(config),
                                        "--listen", f"127.0.0.1:{(port := free_port())}",
                                        "--granularity", granularity],
                                       stdout=open(work / f"monitor-{granularity}.log", "wb"),
                                       stderr=subprocess.STDOUT)
            try:
                row = measure(f"http://127.0.0.1:{port}", monitor, total, granularity, args, work)
                row["brokers_per_cluster"] = args.brokers
            finally:
                stop(monitor)
                monitor = None
            row["command"] = "python -m bench.monitor_scale " + " ".join(argv if argv is not None else sys.argv[1:])
            print(json.dumps(row, indent=1), flush=True)
            if not args.no_record:
                results = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
                results.append(row)
                RESULTS.write_text(json.dumps(results, indent=2) + "\n")
                from bench.report import write_benchmarks_md

                write_benchmarks_md()
        return 0
    finally:
        if monitor is not None:
            stop(monitor)
        if copier is not None:
            copier.stop()
        if producer is not None:
            producer.close()
        for nodes in clusters:
            for n in reversed(nodes):
                n.stop(kill=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
