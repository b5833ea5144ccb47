"""The audit of a real replicator over minutes, with a kill -9 of it in the middle.

    python -m bench.audit_soak                                  # Apache MM2, 10 minutes
    python -m bench.audit_soak --replicator sparkmirror         # both data paths
    python -m bench.audit_soak --replicator sparkmirror --exactly-once
    python -m bench.audit_soak --minutes 3

Two fresh clusters; a producer writes ``--rate`` records/s into a plain topic (4 partitions),
a compacted one and a transactional one (every fifth transaction aborted: MM2, reading
read_uncommitted, copies aborted records too; sparkmirror reads read_committed). For
sparkmirror a backlog of ``--backlog`` records is written first, so that the copy starts in
micro-batches and switches to the real-time path once caught up (exactly-once stays in
micro-batches). At half time the replicator
is killed with SIGKILL (sparkmirror: its driver, Spark JVM and Python workers) and started
again: it replays from its last committed offsets, so duplicates are expected on an
at-least-once flow; losses never are, nor any duplicate on an exactly-once one. An AuditEngine
(the replicator's isolation level, default budget) audits all along. At the end: the counts,
loss coverage and findings, into bench/audit-results.json; the exit code is 1 when a record
is missing or altered (or duplicated on an exactly-once flow).
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
from tests.support.replicator import Replicator, write_config

RESULTS = Path(__file__).resolve().parent / "audit-results.json"
TOPICS = ("plain", "compacted", "txn")


def _produce(bootstrap: str, rate: float, stop: threading.Event, count: int | None = None, first: int = 0) -> int:
    """Writes at ``rate`` until ``stop`` (or ``count`` records as fast as it can); returns the next n."""
    plain, compacted, txn = TOPICS
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"soak-tx-{first}"})
    t.init_transactions(30)
    n, started = first, time.monotonic()
    while not stop.is_set() and (count is None or n < first + count):
        due = started + (n - first) / rate
        if count is None and time.monotonic() < due:
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
        if n % 1000 == 0:
            p.flush(30)
        p.poll(0)
        n += 1
    p.flush(30)
    return n


class _Mm2:
    source, target = "src", "dst"

    def __init__(self, primary: str, dr: str, work: Path, exactly_once: bool):
        if exactly_once:
            raise SystemExit("--exactly-once: only for --replicator sparkmirror")
        self.mm2 = MirrorMaker2({
            "clusters": "src, dst", "src.bootstrap.servers": primary, "dst.bootstrap.servers": dr,
            "src->dst.enabled": "true", "src->dst.topics": ", ".join(TOPICS), "dst->src.enabled": "false",
            "emit.checkpoints.enabled": "false", "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "5", "tasks.max": "1", **single_node_settings(),
        }, work / "mm2")
        self.config: Path | None = None

    def start(self) -> None:
        self.config = self.mm2.start().config_file

    def crash_and_restart(self) -> None:
        self.mm2.process.send_signal(signal.SIGKILL)
        self.mm2.process.wait(30)
        self.mm2.start()

    def stop(self) -> None:
        self.mm2.stop()


class _Sparkmirror:
    source, target = "primary", "dr"

    def __init__(self, primary: str, dr: str, work: Path, exactly_once: bool):
        extra = {"primary->dr.topics": ", ".join(TOPICS), "emit.checkpoints.enabled": "false"}
        if exactly_once:
            extra["primary->dr.exactly.once.support"] = "required"
        self.config = write_config(work / "mm2.properties", primary, dr, extra)
        self.rep = Replicator(self.config, work / "checkpoints", work / "replicator.log",
                              extra_args=["--source", "direct", "--data-path", "auto"])
        # exactly-once copies in micro-batches only: there is no switch to wait for
        self.started = "exactly-once (" if exactly_once else \
            "flow primary->dr: caught up: switching to the real-time data path"

    def start(self) -> None:
        self.rep.start()
        self.rep.wait_for_log(self.started, 300)

    def crash_and_restart(self) -> None:
        self.rep.kill9()
        self.rep.start()

    def stop(self) -> None:
        self.rep.terminate(60, group=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicator", choices=("mm2", "sparkmirror"), default="mm2")
    parser.add_argument("--exactly-once", action="store_true", help="sparkmirror in exactly-once mode")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s into the plain topic")
    parser.add_argument("--backlog", type=int, default=20000,
                        help="records written before sparkmirror starts (its micro-batch catch-up)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-audit-soak-"))
    pair = cluster_pair(work / "kafka")
    clusters = next(pair)
    try:
        primary, dr = clusters.primary.bootstrap, clusters.dr.bootstrap
        create_topic(primary, "plain", 4)
        create_topic(primary, "compacted", 1, config={"cleanup.policy": "compact", "segment.ms": "10000",
                                                      "min.cleanable.dirty.ratio": "0.01"})
        create_topic(primary, "txn", 2)
        runner = (_Mm2 if args.replicator == "mm2" else _Sparkmirror)(primary, dr, work, args.exactly_once)
        return _soak(args, runner, primary, dr, work)
    finally:
        try:
            next(pair)
        except StopIteration:
            pass


def _soak(args, runner, primary: str, dr: str, work: Path) -> int:
    stop = threading.Event()
    first = 0
    try:
        if args.replicator == "sparkmirror" and args.backlog:
            first = _produce(primary, args.rate, stop, count=args.backlog)
        runner.start()
        config = load_config(runner.config)
        flow = AuditFlow.of(config, config.flow(runner.source, runner.target), args.replicator, TOPICS)
        readers = Readers(ClusterReader(runner.source, {"bootstrap.servers": primary}, flow.source_isolation),
                          ClusterReader(runner.target, {"bootstrap.servers": dr}, "read_committed"),
                          ClusterReader(runner.source, {"bootstrap.servers": primary}, "read_committed"))
        engine = AuditEngine(flow, readers, AuditSettings(state_path=work / "audit.json"))
        producer = threading.Thread(target=_produce, args=(primary, args.rate, stop, None, first), daemon=True)
        producer.start()
        started = time.monotonic()
        end = started + args.minutes * 60
        killed_at = None
        while time.monotonic() < end:
            if killed_at is None and time.monotonic() > end - args.minutes * 30:
                killed_at = time.monotonic() - started
                runner.crash_and_restart()
            engine.round()
            time.sleep(1.0)
        stop.set()
        producer.join(60)
        time.sleep(30)  # the replicator copies the rest and sends its newest syncs
        for _ in range(10):
            engine.round()
        snap = engine.snapshot()
        runner.stop()
        readers.close()
        result = {"replicator": args.replicator, "exactly_once": args.exactly_once, "soak_minutes": args.minutes,
                  "rate": args.rate, "backlog": args.backlog if args.replicator == "sparkmirror" else 0,
                  "killed_at_s": round(killed_at or 0), "counts": snap["counts"], "topics": snap["topics"],
                  "coverage": snap["coverage"], "findings": snap["findings"][:20],
                  "positions": snap["positions"], "read_bytes": snap["read_bytes"],
                  "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        print(json.dumps(result, indent=2))
        old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps(old + [result], indent=2) + "\n")
        c = snap["counts"]
        bad = c["missing"] or c["mismatched"] or (args.exactly_once and c["duplicated"])
        return 1 if bad else 0
    finally:
        stop.set()
        try:
            runner.stop()  # (again after a clean end: a no-op) never a replicator left running
        except Exception:  # noqa: BLE001 - the run's own error is the one to see
            pass


if __name__ == "__main__":
    raise SystemExit(main())
