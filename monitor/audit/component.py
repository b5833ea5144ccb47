"""AuditComponent: the audit of every enabled flow, as the monitor's service runs it.

Self-contained: it opens its own readers (from the monitor's consumer settings per
cluster), runs one AuditEngine per flow in its own loop, and offers what the exporters
show: ``snapshot()`` per flow (counts, coverage, findings: /api/status and the status
page), ``samples()`` (the metrics, by their exact names) and ``summary(flow)`` (the
status page's one line). Nothing in it writes to a cluster.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from monitor.audit.budget import cluster_budgets
from monitor.audit.engine import AuditEngine, AuditFlow, AuditSettings, Readers
from monitor.audit.options import AuditOptions
from monitor.audit.reader import ClusterReader
from monitor.loops import RoundFailures, repeat

log = logging.getLogger(__name__)

VERIFIED = "sparkmirror_audit_records_verified_total"
MISSING = "sparkmirror_audit_records_missing_total"
MISMATCHED = "sparkmirror_audit_records_mismatched_total"
DUPLICATED = "sparkmirror_audit_records_duplicated_total"
COVERAGE = "sparkmirror_audit_coverage_ratio"
#: metric -> the count it shows, per flow and topic
COUNTERS = {VERIFIED: "verified", MISSING: "missing", MISMATCHED: "mismatched", DUPLICATED: "duplicated"}


class AuditComponent:
    def __init__(self, config, options: AuditOptions, consumer_configs: dict[str, dict[str, str]],
                 timeout: float = 10.0) -> None:
        self.options = options
        self.engines: list[AuditEngine] = []
        # Each round runs in a daemon thread of its flow (blocking Kafka reads). A stop waits for the
        # round in flight before the readers close (a consumer closed while another thread reads with
        # it is undefined behaviour in librdkafka); a round still running then is left to the
        # process's exit, which a daemon thread does not hold up.
        self._running: dict[str, threading.Thread] = {}
        # per flow, the snapshot at the end of its newest round (or of the state it continues from),
        # taken in the round's thread: the exporters on the event loop read a finished one
        self._latest: dict[str, dict] = {}
        if not options.enabled:
            return
        # a cluster is read at most at the budget, whichever flows read it and on which side
        budgets = cluster_budgets([c for f in config.enabled_flows() for c in (f.source, f.target)],
                                  options.budget or None)
        for flow_config in config.enabled_flows():
            if not flow_config.emit_offset_syncs_enabled:
                log.info("no audit of %s: emit.offset-syncs.enabled = false leaves nothing to pair records by",
                         flow_config.name, extra={"flow": flow_config.name})
                continue
            flow = AuditFlow.of(config, flow_config, options.replicator)
            readers = Readers(ClusterReader(flow.source, consumer_configs[flow.source], flow.source_isolation, timeout),
                              ClusterReader(flow.target, consumer_configs[flow.target], "read_committed", timeout),
                              ClusterReader(flow.syncs_cluster, consumer_configs[flow.syncs_cluster],
                                            "read_committed", timeout))
            state = options.state_dir / f"audit-{flow.source}-{flow.target}.json" if options.state_dir else None
            self.engines.append(AuditEngine(flow, readers, AuditSettings(
                budget=options.budget or None, interval=options.interval, state_path=state), budgets=budgets))

        self._latest = {e.flow.name: e.snapshot() for e in self.engines}

    async def run(self) -> None:
        """Every flow's rounds, until cancelled."""
        if self.engines:
            await asyncio.gather(*(self._rounds(e) for e in self.engines))

    async def _rounds(self, e: AuditEngine) -> None:
        loop = asyncio.get_running_loop()

        def round_() -> None:
            e.round()
            self._latest[e.flow.name] = e.snapshot()

        await repeat(lambda: self._in_thread(loop, e.flow.name, round_), e.settings.interval,
                     RoundFailures(f"audit of {e.flow.name}", log, extra={"flow": e.flow.name}))

    def _in_thread(self, loop: asyncio.AbstractEventLoop, flow: str, fn) -> asyncio.Future:
        done = loop.create_future()

        def run() -> None:
            try:
                fn()
                outcome = None
            except BaseException as exc:  # handed to the loop, which logs it as the round's failure
                outcome = exc
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:
                pass  # the loop is gone: the monitor stopped

        thread = self._running[flow] = threading.Thread(target=run, name=f"audit {flow}", daemon=True)
        thread.start()
        return done

    def close(self, timeout: float = 8.0) -> None:
        """Waits up to ``timeout`` for the rounds in flight, then closes the readers of the flows
        whose round ended (a reader still in use is left to the process's exit)."""
        deadline = time.monotonic() + timeout
        for e in self.engines:
            thread = self._running.get(e.flow.name)
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    log.warning("the audit of %s did not end its round within %.0fs: its readers are left "
                                "open", e.flow.name, timeout, extra={"flow": e.flow.name})
                    continue
            e.readers.close()

    def snapshot(self) -> dict[str, dict]:
        """Per flow, the snapshot at the end of its newest round (or of the state it continues from)."""
        return dict(self._latest)

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        """(metric, labels, value) for every audit series."""
        out = []
        for e in self.engines:
            snap = self._latest[e.flow.name]
            for topic, counts in snap["topics"].items():
                for metric, count in COUNTERS.items():
                    out.append((metric, {"flow": e.flow.name, "topic": topic}, float(counts[count])))
            for kind, ratio in snap["coverage"].items():
                if ratio is not None:
                    out.append((COVERAGE, {"flow": e.flow.name, "kind": kind}, ratio))
        return out


def summary(snap: dict) -> str:
    """The status page's line: "verified 1.2 M records in the last hour · 0 missing · 0 altered · 12 duplicates"."""
    c = snap["counts"]
    parts = [f"verified {_count(snap['verified_last_hour'])} records in the last hour", f"{c['missing']:,} missing",
             f"{c['mismatched']:,} altered"]
    if c["duplicated"]:
        first = min((f["first_seen"] for f in snap["findings"] if f["kind"] == "duplicated"), default=None)
        when = f" since {time.strftime('%H:%M', time.localtime(first))}" if first is not None else ""
        parts.append(f"{c['duplicated']:,} duplicates{when}" + (" (exactly-once flow)" if snap["exactly_once"] else ""))
    if c["unverifiable"]:
        parts.append(f"{c['unverifiable']:,} unverifiable")
    return " · ".join(parts)


def _count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} M"
    if n >= 10_000:
        return f"{n / 1000:.0f} k"
    return f"{n:,}"


def _settle(done: asyncio.Future, outcome: BaseException | None) -> None:
    if done.done():  # cancelled: the monitor is stopping
        return
    if outcome is None:
        done.set_result(None)
    else:
        done.set_exception(outcome)
