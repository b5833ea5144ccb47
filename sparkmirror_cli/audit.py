"""``sparkmirror audit``: a one-off reconciliation of a flow's copy, record by record.

Reads the flow's offset-syncs, then every window they bound on both clusters (the
source with the replicator's isolation level, the target with read_committed), and
reports each record that is missing, altered, out of order, foreign or duplicated,
with its exact offsets (monitor.audit does the work; this module only runs it once,
draws the progress and prints the report).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone

from sparkmirror.errors import ConfigError, SparkmirrorError

EXIT_FOUND = 1

_EPILOG = """\
exit status:
  0  every record checked is on the target, unaltered (duplicates and expired ranges are listed)
  1  records are missing or altered (or foreign records sit in the mirror topic)
  2  bad command line or configuration

examples:
  sparkmirror audit mm2.properties --flow primary->dr
  sparkmirror audit mm2.properties --flow primary->dr --topic orders --from-time 2026-12-01T10:00:00Z --json
  sparkmirror audit mm2.properties --flow primary->dr --replicator mm2
"""


def _from_time(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither epoch milliseconds nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _flow_name(text: str) -> tuple[str, str]:
    source, sep, target = text.partition("->")
    if not sep or not source.strip() or not target.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a flow: write SOURCE->TARGET, e.g. primary->dr")
    return source.strip(), target.strip()


class _Bar:
    """A progress bar with ETA on a terminal; nothing otherwise."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.on = stream.isatty()
        self.started = time.monotonic()
        self._drawn = 0.0

    def __call__(self, progress) -> None:
        now = time.monotonic()
        if not self.on or now - self._drawn < 0.2 or not progress.total:
            return
        self._drawn = now
        share = min(1.0, progress.done / progress.total)
        rate = progress.done / max(now - self.started, 1e-6)
        left = (progress.total - progress.done) / rate if rate > 0 else 0
        bar = "#" * int(share * 30)
        self.stream.write(f"\r[{bar:<30}] {share:5.1%} {progress.done:,}/{progress.total:,} ETA {int(left) // 60}:"
                          f"{int(left) % 60:02d} ")
        self.stream.flush()

    def close(self) -> None:
        if self.on:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()


def _trim(engine, readers, args) -> None:
    """Leave out what lies before --from-offset / --from-time on the source."""
    if args.from_offset is None and args.from_time is None:
        return
    keys = list(engine.books)
    if args.from_time is not None:
        starts = readers.source.offsets_for_time(keys, args.from_time)
    else:
        starts = {k: args.from_offset for k in keys}
    for key, book in engine.books.items():
        start = starts.get(key)
        if start is None or start < 0:  # nothing at or after that time: the whole partition is before it
            start = book.last[0] if book.last else 0
        book.pending = [w for w in book.pending if max(w.u_b, w.source_end) > start]
        for seg in book.unchecked:
            cut = min(max(start - seg.u, 0), seg.n)
            seg.u, seg.d, seg.n = seg.u + cut, seg.d + cut, seg.n - cut
        book.unchecked = [s for s in book.unchecked if s.n > 0]


def audit(args: argparse.Namespace) -> tuple[dict, int]:
    from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
    from monitor.audit.reader import ClusterReader
    from monitor.watch import librdkafka_client
    from sparkmirror.configfile import load_config

    config = load_config(args.config)
    source, target = args.flow
    flow_config = config.flow(source, target)
    if not flow_config.enabled:
        raise ConfigError(f"flow {flow_config.name} is not enabled", file=config.path,
                          hint=f"audit an enabled flow, or set {flow_config.name}.enabled = true")
    if not flow_config.emit_offset_syncs_enabled:
        raise ConfigError(f"{flow_config.name} has emit.offset-syncs.enabled = false: without offset-syncs "
                          "nothing says where each record went", file=config.path, line=flow_config.line_of(
                              "emit.offset-syncs.enabled"))
    flow = AuditFlow.of(config, flow_config, args.replicator, args.topic)
    consumer = {a: librdkafka_client(config, a, "consumer") for a in (flow.source, flow.target)}
    readers = Readers(ClusterReader(flow.source, consumer[flow.source], flow.source_isolation, args.timeout),
                      ClusterReader(flow.target, consumer[flow.target], "read_committed", args.timeout),
                      ClusterReader(flow.syncs_cluster, consumer[flow.syncs_cluster], "read_committed",
                                    args.timeout))
    bar = _Bar(sys.stderr)
    try:
        engine = AuditEngine(flow, readers, AuditSettings(budget=args.rate, chunk=args.chunk))
        engine.take_syncs(time.time())
        _trim(engine, readers, args)
        engine.progress.callbacks.append(bar)
        engine.full()
    finally:
        bar.close()
        readers.close()
    report = engine.snapshot()
    report["source"], report["target"] = flow.source, flow.target
    counts = report["counts"]
    return report, EXIT_FOUND if counts["missing"] or counts["mismatched"] else 0


def _text(report: dict) -> str:
    c = report["counts"]
    lines = [f"audit of {report['flow']}: source {report['source']} read {report['source_isolation']}, "
             f"target {report['target']} read read_committed, {report['partitions']} partition(s)"]
    for topic, t in report["topics"].items():
        lines.append(f"  {topic}: {t['verified']:,} verified · {t['missing']:,} missing · {t['mismatched']:,} "
                     f"altered · {t['duplicated']:,} duplicated · {t['expired']:,} expired · "
                     f"{t['unverifiable']:,} unverifiable")
    lines.append(f"total: {c['verified']:,} verified · {c['missing']:,} missing · {c['mismatched']:,} altered · "
                 f"{c['duplicated']:,} duplicated · {c['expired']:,} expired · {c['unverifiable']:,} unverifiable")
    if report["findings"]:
        rows = [["KIND", "TOPIC", "PARTITION", "SOURCE OFFSET", "TARGET OFFSET", "COUNT", "DETAIL"]]
        for f in report["findings"]:
            rows.append([f["kind"], f["topic"], str(f["partition"]),
                         "-" if f["source_offset"] is None else str(f["source_offset"]),
                         "-" if f["target_offset"] is None else str(f["target_offset"]), str(f["count"]), f["detail"]])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["findings:"] + ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    if report["undecodable_syncs"]:
        lines.append(f"warning: {report['undecodable_syncs']} records of the offset-syncs topic did not decode")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report, code = audit(args)
    print(json.dumps(report) if args.json else _text(report))
    return code


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from monitor.audit.engine import REPLICATORS

    parser = subparsers.add_parser(
        "audit", help="check record by record that a flow's mirror holds what the source holds",
        description=("Reconcile flow SOURCE->TARGET once: every window between two offset-syncs is read on "
                     "both clusters and each record's partition, order, key, value, headers and timestamp "
                     "(where both sides use CreateTime) compared. Reports every missing, altered, foreign "
                     "or duplicated record with its exact offsets; offsets below a log start are expired."),
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", metavar="CONFIG", help="path to mm2.properties")
    parser.add_argument("--flow", required=True, type=_flow_name, metavar="SOURCE->TARGET", help="the flow to audit")
    parser.add_argument("--topic", action="append", metavar="TOPIC",
                        help="audit only this source topic (repeatable; default: every topic the syncs name)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=int, metavar="N", help="start at source offset N of every partition")
    start.add_argument("--from-time", type=_from_time, metavar="TIME",
                       help="start at the first source record at or after TIME (ISO 8601, or epoch ms)")
    parser.add_argument("--replicator", choices=REPLICATORS, default="sparkmirror",
                        help="who copies the flow: the source is read as it reads it (sparkmirror: read_committed; "
                             "mm2: its consumer's isolation.level, read_uncommitted unless set). Default sparkmirror")
    parser.add_argument("--rate", type=float, default=None, metavar="BYTES_PER_SECOND",
                        help="read at most this much per cluster (default: no limit)")
    parser.add_argument("--chunk", type=int, default=2000, metavar="RECORDS", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="time limit of one request (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    """This command alone, with the exit codes of ``sparkmirror`` (until it is registered there)."""
    parser = argparse.ArgumentParser(prog="sparkmirror")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SparkmirrorError as exc:
        print(f"sparkmirror: error: {exc}" if not exc.location() else str(exc), file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
