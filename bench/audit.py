"""The audit's cost and speed: read rate, the brokers' CPU with and without it, time to cover a backlog.

    python -m bench.audit                                  # 100 partitions, 200 MB backlog, 60 s each phase
    python -m bench.audit --partitions 10000 --backlog-mb 1024 --seconds 60 --pairs 3 --heap 2g

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
  audit takes to compare the whole backlog at that budget;
- requests_per_s: the requests the audit's consumers sent per second, by cluster and kind
  (librdkafka's statistics), and fetch_kb_per_request: what one fetch brought on average.

The idle and audited phases alternate ``--pairs`` times (the audit paused in between), so
that a change of the machine's other load shows as spread instead of as the audit's cost;
broker_cpu_added is the median of the pairs' differences, broker_cpu_added_spread their range.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
    # Idempotent: a retried request must not reorder or repeat records on one side only.
    # One partition at a time, so that a produce request carries full batches of a few
    # partitions (one record for each of 10,000 partitions per request timed the brokers out).
    slow = {"request.timeout.ms": 120000, "message.timeout.ms": 900000}
    src = Producer({"bootstrap.servers": primary, "linger.ms": 50, "batch.size": 1 << 20,
                    "compression.type": "none", "enable.idempotence": True, **slow})
    tgt = Producer({"bootstrap.servers": dr, "linger.ms": 50, "batch.size": 1 << 20, "enable.idempotence": True,
                    **slow})
    sync = Producer({"bootstrap.servers": primary, "linger.ms": 50, **slow})
    per = max(1, records // (len(topics) * partitions_per_topic))
    for topic in topics:
        for p in range(partitions_per_topic):
            for i in range(per):
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
        print(f"filled {topic} ({per} records in each of its {partitions_per_topic} partitions)", flush=True)
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


class RequestStats:
    """The cumulative request counts of one cluster's consumers, from librdkafka's statistics."""

    def __init__(self) -> None:
        self.by_client: dict[str, tuple[dict[str, int], int]] = {}

    def config(self) -> dict:
        return {"statistics.interval.ms": 1000, "stats_cb": self._on_stats}

    def _on_stats(self, text: str) -> None:
        data = json.loads(text)
        if data.get("type") != "consumer":
            return
        req: dict[str, int] = {}
        rx = 0
        for b in data.get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue  # the bootstrap connection, counted again under the broker's id
            for kind, n in b.get("req", {}).items():
                req[kind] = req.get(kind, 0) + n
            rx += b.get("rxbytes", 0)
        self.by_client[data.get("name", "")] = (req, rx)

    def snapshot(self) -> tuple[dict[str, int], int]:
        req: dict[str, int] = {}
        rx = 0
        for r, b in list(self.by_client.values()):
            for kind, n in r.items():
                req[kind] = req.get(kind, 0) + n
            rx += b
        return req, rx


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--backlog-mb", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="bytes/s per cluster")
    parser.add_argument("--heap", default=None, help="each broker's -Xmx (default: the fixtures'; 2g for "
                        "10,000 partitions)")
    parser.add_argument("--pairs", type=int, default=2, help="idle and audited phases, alternating")
    parser.add_argument("--fetch-kb", type=int, default=None, help="max.partition.fetch.bytes of the content "
                        "reads, KiB (default: the reader's own)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    pair = cluster_pair(work / "kafka", heap=args.heap)
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
        stats = {"source": RequestStats(), "target": RequestStats(), "syncs": RequestStats()}
        fetch = {"bulk_fetch_bytes": args.fetch_kb * 1024} if args.fetch_kb else {}
        readers = Readers(
            ClusterReader("src", {"bootstrap.servers": primary, **stats["source"].config()}, flow.source_isolation,
                          **fetch),
            ClusterReader("dst", {"bootstrap.servers": dr, **stats["target"].config()}, "read_committed", **fetch),
            ClusterReader("src", {"bootstrap.servers": primary, **stats["syncs"].config()}, "read_committed",
                          **fetch))
        engine = AuditEngine(flow, readers, AuditSettings(budget=args.budget, round_seconds=5.0))
        pids = _broker_pids(clusters)
        stop, auditing = threading.Event(), threading.Event()

        def rounds():
            while not stop.is_set():
                if auditing.wait(0.5):
                    engine.round()
                    stop.wait(1.0)
        me = psutil.Process(os.getpid())
        engine.round()  # the syncs and the loss accounting, before the measured phases
        first_round = engine.snapshot()
        thread = threading.Thread(target=rounds, daemon=True)
        thread.start()
        idles, audits = [], []
        took, audit_cpu_s = 0.0, 0.0
        read0, verified0 = dict(first_round["read_bytes"]), first_round["counts"]["verified"]
        req0 = {k: v.snapshot() for k, v in stats.items()}
        for _ in range(args.pairs):
            idles.append(_measure(pids, args.seconds))
            cpu_before, t0 = sum(me.cpu_times()[:2]), time.monotonic()
            auditing.set()
            audits.append(_measure(pids, args.seconds))
            auditing.clear()
            time.sleep(1.5)  # the round under way ends (a content read stops at the budget)
            took += time.monotonic() - t0
            audit_cpu_s += sum(me.cpu_times()[:2]) - cpu_before
        stop.set()
        thread.join(60)
        time.sleep(1.0)
        for r in (readers.source, readers.target, readers.syncs):
            for c in (r._consumer, getattr(r, "_bulk", None)):
                if c is not None:
                    c.poll(0.1)  # serves the statistics callback once more
        snap = engine.snapshot()
        audit_cpu = 100 * audit_cpu_s / took
        requests = {}
        fetched = {}
        for k, v in stats.items():
            (req1, rx1), (req_0, rx_0) = v.snapshot(), req0[k]
            requests[k] = {kind: round((n - req_0.get(kind, 0)) / took, 1) for kind, n in sorted(req1.items())
                           if n - req_0.get(kind, 0) > 0}
            fetches = req1.get("Fetch", 0) - req_0.get("Fetch", 0)
            fetched[k] = round((rx1 - rx_0) / fetches / 1024, 1) if fetches else None
        added = [a - i for i, a in zip(idles, audits)]
        readers.close()
        rate = {k: (snap["read_bytes"][k] - read0[k]) / took for k in ("source", "target")}
        backlog_bytes = per * len(topics) * per_topic * VALUE
        result = {
            "partitions": len(topics) * per_topic, "backlog_mb": round(backlog_bytes / 2**20), "budget": args.budget,
            "seconds": args.seconds, "fill_s": round(filled_s, 1),
            "read_bytes_per_s": {k: round(v) for k, v in rate.items()},
            "verified_per_s": round((snap["counts"]["verified"] - verified0) / took),
            "loss_accounted": sum(snap["positions"].values()) + len(snap["positions"]),
            "broker_cpu_idle": round(statistics.median(idles), 1),
            "broker_cpu_audit": round(statistics.median(audits), 1),
            "broker_cpu_added": round(statistics.median(added), 1),
            "broker_cpu_added_spread": [round(min(added), 1), round(max(added), 1)],
            "audit_cpu": round(audit_cpu, 1), "pairs": args.pairs, "heap": args.heap, "fetch_kb": args.fetch_kb,
            "requests_per_s": requests, "fetch_kb_per_request": fetched,
            "cover_backlog_s": round(backlog_bytes / rate["source"]) if rate["source"] else None,
            "counts": snap["counts"], "findings": snap["findings"][:20],
            "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
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
