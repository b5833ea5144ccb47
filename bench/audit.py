"""The audit's cost and speed: read rate, the brokers' CPU with and without it, time to cover a backlog.

    python -m bench.audit                                  # 100 partitions, 200 MB backlog, 60 s each phase
    python -m bench.audit --partitions 10000 --backlog-mb 1024 --seconds 120

Starts two fresh single-node KRaft clusters, creates ``--partitions`` source partitions
(topics of 100) and their mirror partitions, and writes the same records into both (a
mirror by construction: same partition, key, value, headers and timestamp), with MM2
offset-syncs every 100 records per partition as MM2's ``offset.lag.max``. Then the
brokers' CPU (both JVMs, psutil) is measured for ``--seconds`` while nothing reads, and for
``--seconds`` while one AuditEngine audits the flow at ``--budget`` (the default budget
unless given). Written to bench/audit-results.json:

- read_bytes_per_s: what the audit read per second from each cluster (source, target);
- verified_per_s: records compared per second; loss_accounted: records the syncs accounted for;
- broker_cpu_idle / broker_cpu_audit: CPU of both brokers in % of one core, without and with
  the audit; broker_cpu_added: the difference;
- audit_cpu: the audit's own process, % of one core;
- cover_backlog_s: the backlog's bytes over the measured source read rate: how long the
  audit takes to compare the whole backlog at that budget.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil
from confluent_kafka import Producer

from bench.procstats import TreeSampler
from monitor.audit.budget import DEFAULT_BUDGET
from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.reader import ClusterReader
from sparkmirror.configfile import load_config
from sparkmirror.model.records import OffsetSync
from tests.support.clusters import cluster_pair
from tests.support.kafka import create_topic
from tests.support.monitor import write_mm2_config

RESULTS = Path(__file__).resolve().parent / "audit-results.json"
VALUE = 1000


def _fill(primary: str, dr: str, topics: list[str], partitions_per_topic: int, records: int, syncs: str) -> None:
    now = int(time.time() * 1000)
    src = Producer({"bootstrap.servers": primary, "linger.ms": 50, "batch.size": 1 << 20,
                    "compression.type": "none"})
    tgt = Producer({"bootstrap.servers": dr, "linger.ms": 50, "batch.size": 1 << 20})
    sync = Producer({"bootstrap.servers": primary, "linger.ms": 50})
    per = max(1, records // (len(topics) * partitions_per_topic))
    for i in range(per):
        for topic in topics:
            for p in range(partitions_per_topic):
                value = (b"%s-%d-%d-" % (topic.encode(), p, i)).ljust(VALUE, b"x")
                for producer, name in ((src, topic), (tgt, f"src.{topic}")):
                    while True:
                        try:
                            producer.produce(name, value, key=b"k%d" % i, partition=p, timestamp=now + i)
                            break
                        except BufferError:
                            producer.poll(0.1)
                if i % 100 == 0 or i == per - 1:
                    s = OffsetSync(topic, p, i, i)
                    sync.produce(syncs, s.encode_value(), key=s.encode_key(), partition=0)
        src.poll(0)
        tgt.poll(0)
        sync.poll(0)
    for producer in (src, tgt, sync):
        producer.flush(300)
    return per


def _broker_pids(clusters) -> list[int]:
    return [c.pid for c in (clusters.primary, clusters.dr)]


def _measure(pids: list[int], seconds: float) -> float:
    sampler = TreeSampler(pids)
    sampler.sample()
    start_cpu, start = sampler.cpu_seconds, time.monotonic()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    return 100 * (sampler.cpu_seconds - start_cpu) / (time.monotonic() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--backlog-mb", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="bytes/s per cluster")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    pair = cluster_pair(work / "kafka")
    clusters = next(pair)
    try:
        primary, dr = clusters.primary.bootstrap, clusters.dr.bootstrap
        per_topic = min(100, args.partitions)
        topics = [f"t{i}" for i in range(max(1, args.partitions // per_topic))]
        syncs = "mm2-offset-syncs.dst.internal"
        create_topic(primary, syncs, 1, config={"cleanup.policy": "compact"})
        for t in topics:
            create_topic(primary, t, per_topic)
            create_topic(dr, f"src.{t}", per_topic)
        records = args.backlog_mb * 1024 * 1024 // VALUE
        started = time.monotonic()
        per = _fill(primary, dr, topics, per_topic, records, syncs)
        filled_s = time.monotonic() - started
        config = load_config(write_mm2_config(work / "mm2.properties", {"src": primary, "dst": dr},
                                              [("src", "dst")]))
        flow = AuditFlow.of(config, config.flow("src", "dst"))
        readers = Readers(ClusterReader("src", {"bootstrap.servers": primary}, flow.source_isolation),
                          ClusterReader("dst", {"bootstrap.servers": dr}, "read_committed"),
                          ClusterReader("src", {"bootstrap.servers": primary}, "read_committed"))
        engine = AuditEngine(flow, readers, AuditSettings(budget=args.budget, round_seconds=5.0))
        pids = _broker_pids(clusters)
        idle = _measure(pids, args.seconds)
        stop = threading.Event()

        def rounds():
            while not stop.is_set():
                engine.round()
                stop.wait(1.0)
        me = psutil.Process(os.getpid())
        cpu_before = sum(me.cpu_times()[:2])
        engine.round()  # the syncs and the loss accounting, before the measured phase
        first_round = engine.snapshot()
        t0, read0, verified0 = time.monotonic(), dict(first_round["read_bytes"]), first_round["counts"]["verified"]
        thread = threading.Thread(target=rounds, daemon=True)
        thread.start()
        audit = _measure(pids, args.seconds)
        stop.set()
        thread.join(60)
        took = time.monotonic() - t0
        snap = engine.snapshot()
        audit_cpu = 100 * (sum(me.cpu_times()[:2]) - cpu_before) / took
        readers.close()
        rate = {k: (snap["read_bytes"][k] - read0[k]) / took for k in ("source", "target")}
        backlog_bytes = per * len(topics) * per_topic * VALUE
        result = {
            "partitions": len(topics) * per_topic, "backlog_mb": round(backlog_bytes / 2**20), "budget": args.budget,
            "seconds": args.seconds, "fill_s": round(filled_s, 1),
            "read_bytes_per_s": {k: round(v) for k, v in rate.items()},
            "verified_per_s": round((snap["counts"]["verified"] - verified0) / took),
            "loss_accounted": sum(snap["positions"].values()) + len(snap["positions"]),
            "broker_cpu_idle": round(idle, 1), "broker_cpu_audit": round(audit, 1),
            "broker_cpu_added": round(audit - idle, 1), "audit_cpu": round(audit_cpu, 1),
            "cover_backlog_s": round(backlog_bytes / rate["source"]) if rate["source"] else None,
            "counts": snap["counts"], "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        print(json.dumps(result, indent=2))
        old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps(old + [result], indent=2) + "\n")
        return 0
    finally:
        try:
            next(pair)
        except StopIteration:
            pass


if __name__ == "__main__":
    raise SystemExit(main())
