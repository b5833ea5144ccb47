"""The two sides of the steady-state workload, each its own process.

    python -m bench.steady produce --bootstrap B --topic T --rate R --seconds S --value-bytes N --partitions P [--warm-up S]
    python -m bench.steady probe   --bootstrap B --topic T --expect N --timeout S --out FILE

``produce`` writes ``rate`` records/s (1 KB values by default) paced in 10 ms ticks,
spread evenly over the partitions, each with CreateTime = the moment it is queued, and
prints how many it sent and how far it fell behind its schedule; with ``--warm-up S`` it first writes at the same rate for S seconds
records keyed ``w...``, which the probe does not measure (a system's first seconds
under load — JIT, first batches — are start-up, not steady state). ``probe`` reads the mirror topic on the target from its current end
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

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


IDLE_STOP_S = 20.0


MEASURED_KEY = b"m" * 12  # the probe measures records whose key does not start with b"w"
WARM_KEY = b"w" * 12
TICK_S = 0.01


def produce(args) -> int:
    """Write ``rate`` records/s in 10-ms ticks, each tick's records spread evenly over the partitions
    and queued with one ``produce_batch`` call per partition (a per-record ``produce`` call costs a
    Python core at ~150,000 records/s, which on this machine the brokers and the mirror need).
    librdkafka stamps each record with CreateTime = the moment it is queued. A tick's records are
    warm-up or measured by the tick's scheduled time, so a generator that falls behind still sends
    exactly ``rate x seconds`` measured records; ``max_behind_s`` says how far behind it fell."""
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5, "batch.size": 1000000, "acks": "1",
                  "queue.buffering.max.kbytes": 1048576, "queue.buffering.max.messages": 1000000})
    value = os.urandom(args.value_bytes)
    parts = args.partitions
    per_tick = args.rate * TICK_S
    sent = warm = 0
    owed = 0.0
    next_part = 0  # where this tick's remainder starts, so that no partition is always short
    max_behind = 0.0
    begin = time.monotonic()
    start = begin + args.warm_up  # the measured part starts after the warm-up
    end = start + args.seconds
    tick = begin
    while tick < end:
        measured = tick >= start
        msg = {"value": value, "key": MEASURED_KEY if measured else WARM_KEY}
        owed += per_tick
        n = int(owed)
        owed -= n
        base, extra = divmod(n, parts)
        for i in range(parts):
            part = (next_part + i) % parts
            todo = base + (1 if i < extra else 0)
            while todo:
                queued = p.produce_batch(args.topic, [msg] * todo, partition=part)
                msg.pop("_error", None)  # set on the shared dict by the records the full queue refused
                todo -= queued
                if todo:
                    p.poll(0.01)
        next_part = (next_part + extra) % parts
        if measured:
            sent += n
        else:
            warm += n
        p.poll(0)
        tick += TICK_S
        delay = tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            max_behind = max(max_behind, -delay)
    p.flush(120)
    elapsed = time.monotonic() - start
    print(json.dumps({"sent": sent, "warm_up_sent": warm, "seconds": round(elapsed, 2),
                      "rate": round(sent / elapsed, 1), "max_behind_s": round(max_behind, 3)}), flush=True)
    return 0


def take_arrived(consumer: Consumer, timeout: float, most: int = 10000) -> list:
    """Wait up to ``timeout`` for one record, then take at once whatever else has arrived.

    librdkafka's ``consume(n, timeout)`` returns only once it holds ``n`` records or the timeout
    has passed: asked for 10,000 at once, the first records of a call would wait in the caller
    until the rest came (up to the timeout), and a latency probe would count that wait as the
    mirror's, a copy loop would add it to every record's trip."""
    msgs = consumer.consume(1, timeout)
    if msgs:
        msgs += consumer.consume(most - 1, 0)
    return msgs


def _latest_assignment(c: Consumer, topic: str) -> list[TopicPartition]:
    md = c.list_topics(topic, timeout=30)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        return []
    return [TopicPartition(topic, p, c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1])
            for p in sorted(meta.partitions)]


def _percentiles(latencies: list[int], prefix: str = "") -> dict:
    latencies.sort()
    n = len(latencies)

    def pct(q: float):
        return round(latencies[min(n - 1, int(q * n))] / 1000, 3) if n else None

    return {f"{prefix}received": n, f"{prefix}p50_s": pct(0.50), f"{prefix}p99_s": pct(0.99),
            f"{prefix}p999_s": pct(0.999), f"{prefix}max_s": round(latencies[-1] / 1000, 3) if n else None}


SETTLED_BELOW_MS = 1000
#: the stricter settling bar: every record of every later second under 100 ms
SETTLED_FAST_BELOW_MS = 100


def warm_up_figures(warm_latencies: list[int], warm_per_second: dict[int, int],
                    per_second: dict[int, tuple[int, int]]) -> dict:
    """What the unmeasured warm-up hides: its own p99 and worst latency, and ``settled_s``, how
    long after the first record arrived the latency stayed under a second for good (the end of
    the last arrival second, warm-up or measured, whose worst record took longer; 0 if none did);
    ``settled_fast_s`` the same under 100 ms.
    A JVM-based mirror compiles its hot code in its first minute: this is its cost."""
    worst = dict(warm_per_second)
    for sec, (_n, w) in per_second.items():
        worst[sec] = max(worst.get(sec, 0), w)
    if not worst:
        return {"warm_up_p99_s": None, "warm_up_max_s": None, "settled_s": None, "settled_fast_s": None}
    first = min(worst)

    def settled(below_ms: int) -> int:
        late = [sec for sec, w in worst.items() if w > below_ms]
        return (max(late) + 1 - first) if late else 0

    figures = _percentiles(warm_latencies, "warm_up_")
    return {"warm_up_p99_s": figures["warm_up_p99_s"], "warm_up_max_s": figures["warm_up_max_s"],
            "settled_s": settled(SETTLED_BELOW_MS), "settled_fast_s": settled(SETTLED_FAST_BELOW_MS)}


def probe(args) -> int:
    """Tail the mirrored topic (and, if given, the mirrored heartbeats topic) from their ends:
    latency = arrival minus the record's timestamp, which a mirror keeps from the source (a
    heartbeat's record timestamp is the moment it was emitted: the monitor's heartbeat latency)."""
    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"bench-probe-{os.getpid()}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10, "fetch.min.bytes": 1,
                  "enable.partition.eof": False})
    data = _latest_assignment(c, args.topic)
    beats = _latest_assignment(c, args.heartbeats_topic) if args.heartbeats_topic else []
    c.assign(data + beats)
    print(json.dumps({"ready": True}), flush=True)
    latencies: list[int] = []
    per_second: dict[int, tuple[int, int]] = {}  # arrival second -> (records, worst latency ms)
    heartbeat_latencies: list[int] = []
    warm_latencies: list[int] = []
    warm_per_second: dict[int, int] = {}  # arrival second -> worst latency ms, warm-up records
    measured_since = None  # the source timestamp of the first measured record
    topic = args.topic
    deadline = time.monotonic() + args.timeout
    last_measured = None
    looked_for_beats = time.monotonic()
    while len(latencies) < args.expect and time.monotonic() < deadline:
        # the producer's pacing can end a few records short of rate x seconds: once the measured
        # records stop arriving for IDLE_STOP_S, that is all there is (``received`` says how many)
        if last_measured is not None and time.monotonic() - last_measured > IDLE_STOP_S:
            break
        if args.heartbeats_topic and not beats and time.monotonic() - looked_for_beats > 2:
            # a mirror may create <alias>.heartbeats only at its first topic refresh: read it from its
            # beginning once it exists (only heartbeats of the measured part count, see below)
            looked_for_beats = time.monotonic()
            beats = [TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)
                     for tp in _latest_assignment(c, args.heartbeats_topic)]
            if beats:
                c.incremental_assign(beats)
        msgs = take_arrived(c, 0.2)
        now = int(time.time() * 1000)
        # every record of one consume call arrived at ``now``: per record only its timestamp is kept
        # (the probe reads as many records a second as the mirror copies, on the same cores)
        measured: list[int] = []
        warm: list[int] = []
        for m in msgs:
            if m.error() is not None:
                continue
            if m.topic() != topic:
                ts = m.timestamp()[1]
                if measured_since is not None and ts >= measured_since:
                    heartbeat_latencies.append(now - ts)
            elif (m.key() or b"")[:1] == b"w":  # a warm-up record: kept apart (the system's first minute)
                warm.append(m.timestamp()[1])
            else:
                measured.append(m.timestamp()[1])
        second = now // 1000
        if warm:
            warm_latencies.extend([now - ts for ts in warm])
            warm_per_second[second] = max(warm_per_second.get(second, 0), now - min(warm))
        if measured:
            latencies.extend([now - ts for ts in measured])
            n, worst = per_second.get(second, (0, 0))
            per_second[second] = (n + len(measured), max(worst, now - min(measured)))
            last_measured = time.monotonic()
            if measured_since is None:
                measured_since = measured[0]
    c.close()
    out = _percentiles(latencies)
    # when the slow records arrived: a stall shows as a run of seconds with a high worst latency
    # (unix second of arrival, records, worst latency in ms)
    out["per_second"] = [[sec, n, worst] for sec, (n, worst) in sorted(per_second.items())]
    out.update(warm_up_figures(warm_latencies, warm_per_second, per_second))
    if args.heartbeats_topic:
        out.update(_percentiles(heartbeat_latencies, "heartbeat_"))
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(json.dumps({k: v for k, v in out.items() if k != "per_second"}), flush=True)
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
    a.add_argument("--warm-up", type=float, default=0.0,
                   help="seconds at the same rate before the measured part (records keyed w..., not measured)")
    b = sub.add_parser("probe")
    b.add_argument("--bootstrap", required=True)
    b.add_argument("--topic", required=True)
    b.add_argument("--expect", type=int, required=True)
    b.add_argument("--timeout", type=float, required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--heartbeats-topic", help="also measure heartbeats arriving in this topic")
    args = ap.parse_args(argv)
    return produce(args) if args.cmd == "produce" else probe(args)


if __name__ == "__main__":
    sys.exit(main())
