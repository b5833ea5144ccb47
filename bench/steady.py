"""The two sides of the steady-state workload, each its own process.

    python -m bench.steady produce --bootstrap B --topic T --rate R --seconds S --value-bytes N --partitions P
    python -m bench.steady probe   --bootstrap B --topic T --expect N --timeout S --out FILE

``produce`` writes ``rate`` records/s (1 KB values by default) paced in 10 ms ticks,
spread round-robin over the partitions, each with CreateTime = now, and prints how
many it sent. ``probe`` reads the mirror topic on the target from its current end
with a short fetch wait and records, per record, receive time minus the record's
own (source) timestamp: the end-to-end latency a heartbeat would show, plus the
probe's fetch delay (``fetch.wait.max.ms=10``). It writes percentiles to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def produce(args) -> int:
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "batch.size": 1000000, "acks": "1",
                  "queue.buffering.max.kbytes": 1048576})
    value = os.urandom(args.value_bytes)
    per_tick = args.rate / 100.0
    sent = 0
    owed = 0.0
    start = time.monotonic()
    end = start + args.seconds
    tick = start
    while True:
        now = time.monotonic()
        if now >= end:
            break
        owed += per_tick
        n = int(owed)
        owed -= n
        ts = int(time.time() * 1000)
        for _ in range(n):
            while True:
                try:
                    p.produce(args.topic, value=value, key=b"%012d" % sent, partition=sent % args.partitions,
                              timestamp=ts)
                    break
                except BufferError:
                    p.poll(0.01)
            sent += 1
        p.poll(0)
        tick += 0.01
        delay = tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    p.flush(120)
    elapsed = time.monotonic() - start
    print(json.dumps({"sent": sent, "seconds": round(elapsed, 2), "rate": round(sent / elapsed, 1)}), flush=True)
    return 0


def probe(args) -> int:
    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"bench-probe-{os.getpid()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10, "fetch.min.bytes": 1,
                  "enable.partition.eof": False})
    md = c.list_topics(args.topic, timeout=30)
    parts = sorted(md.topics[args.topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)[1] for p in parts}
    c.assign([TopicPartition(args.topic, p, ends[p]) for p in parts])
    print(json.dumps({"ready": True}), flush=True)
    latencies: list[int] = []
    deadline = time.monotonic() + args.timeout
    while len(latencies) < args.expect and time.monotonic() < deadline:
        msgs = c.consume(10000, 0.2)
        now = int(time.time() * 1000)
        for m in msgs:
            if m.error() is None:
                latencies.append(now - m.timestamp()[1])
    c.close()
    latencies.sort()
    n = len(latencies)

    def pct(q: float):
        return round(latencies[min(n - 1, int(q * n))] / 1000, 3) if n else None

    out = {"received": n, "p50_s": pct(0.50), "p99_s": pct(0.99), "max_s": round(latencies[-1] / 1000, 3) if n else None}
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(json.dumps(out), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("produce")
    a.add_argument("--bootstrap", required=True)
    a.add_argument("--topic", required=True)
    a.add_argument("--rate", type=float, required=True)
    a.add_argument("--seconds", type=float, required=True)
    a.add_argument("--value-bytes", type=int, default=1024)
    a.add_argument("--partitions", type=int, required=True)
    b = sub.add_parser("probe")
    b.add_argument("--bootstrap", required=True)
    b.add_argument("--topic", required=True)
    b.add_argument("--expect", type=int, required=True)
    b.add_argument("--timeout", type=float, required=True)
    b.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    return produce(args) if args.cmd == "produce" else probe(args)


if __name__ == "__main__":
    sys.exit(main())
