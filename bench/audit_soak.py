"""The audit of the real Apache MM2 over minutes, with a kill -9 of MM2 in the middle.

    python -m bench.audit_soak                  # 10 minutes
    python -m bench.audit_soak --minutes 3

Two fresh clusters; a producer writes ``--rate`` records/s into a plain topic (4 partitions),
a compacted one and a transactional one (every fifth transaction aborted, so MM2, reading
read_uncommitted, copies aborted records too); MM2 copies them; at half time it is killed
with SIGKILL and started again (it replays from its last committed offsets: duplicates are
expected, losses are not). An AuditEngine (``--replicator mm2``, default budget) audits
all along. At the end: the counts, loss coverage and findings, into bench/audit-results.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from devenv.mm2 import MirrorMaker2, single_node_settings
from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.reader import ClusterReader
from sparkmirror.configfile import load_config
from tests.support.clusters import cluster_pair
from tests.support.kafka import create_topic

RESULTS = Path(__file__).resolve().parent / "audit-results.json"


def _produce(bootstrap: str, topics: tuple[str, str, str], rate: float, stop: threading.Event) -> None:
    plain, compacted, txn = topics
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": "soak-tx"})
    t.init_transactions(30)
    n, started = 0, time.monotonic()
    while not stop.is_set():
        due = started + n / rate
        if time.monotonic() < due:
            stop.wait(due - time.monotonic())
            continue
        p.produce(plain, b"v%d" % n, key=b"k%d" % n, partition=n % 4, headers=[("n", b"%d" % n)])
        p.produce(compacted, b"c%d" % n, key=b"k%d" % (n % 50), partition=0)
        if n % 20 == 0:
            t.begin_transaction()
            for i in range(10):
                t.produce(txn, b"t%d-%d" % (n, i), partition=i % 2)
            t.flush(30)
            t.abort_transaction(30) if n % 100 == 0 else t.commit_transaction(30)
        p.poll(0)
        n += 1
    p.flush(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s into the plain topic")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-audit-soak-"))
    pair = cluster_pair(work / "kafka")
    clusters = next(pair)
    try:
        primary, dr = clusters.primary.bootstrap, clusters.dr.bootstrap
        topics = ("plain", "compacted", "txn")
        create_topic(primary, "plain", 4)
        create_topic(primary, "compacted", 1, config={"cleanup.policy": "compact", "segment.ms": "10000",
                                                      "min.cleanable.dirty.ratio": "0.01"})
        create_topic(primary, "txn", 2)
        mm2 = MirrorMaker2({
            "clusters": "src, dst", "src.bootstrap.servers": primary, "dst.bootstrap.servers": dr,
            "src->dst.enabled": "true", "src->dst.topics": "plain, compacted, txn", "dst->src.enabled": "false",
            "emit.checkpoints.enabled": "false", "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "5", "tasks.max": "1", **single_node_settings(),
        }, work / "mm2")
        config = load_config(mm2.start().config_file)
        flow = AuditFlow.of(config, config.flow("src", "dst"), "mm2", topics)
        readers = Readers(ClusterReader("src", {"bootstrap.servers": primary}, flow.source_isolation),
                          ClusterReader("dst", {"bootstrap.servers": dr}, "read_committed"),
                          ClusterReader("src", {"bootstrap.servers": primary}, "read_committed"))
        engine = AuditEngine(flow, readers, AuditSettings(state_path=work / "audit.json"))
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(primary, topics, args.rate, stop), daemon=True)
        producer.start()
        end = time.monotonic() + args.minutes * 60
        killed = False
        while time.monotonic() < end:
            if not killed and time.monotonic() > end - args.minutes * 30:
                mm2.process.send_signal(signal.SIGKILL)
                mm2.process.wait(30)
                mm2.start()
                killed = True
            engine.round()
            time.sleep(1.0)
        stop.set()
        producer.join(60)
        time.sleep(30)  # MM2 copies the rest and flushes its newest syncs
        for _ in range(10):
            engine.round()
        snap = engine.snapshot()
        mm2.stop()
        readers.close()
        result = {"soak_minutes": args.minutes, "rate": args.rate, "counts": snap["counts"], "topics": snap["topics"],
                  "coverage": snap["coverage"], "findings": snap["findings"][:20],
                  "positions": snap["positions"], "read_bytes": snap["read_bytes"],
                  "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(json.dumps(result, indent=2))
        old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps(old + [result], indent=2) + "\n")
        return 0 if snap["counts"]["missing"] == 0 and snap["counts"]["mismatched"] == 0 else 1
    finally:
        try:
            next(pair)
        except StopIteration:
            pass


if __name__ == "__main__":
    raise SystemExit(main())
