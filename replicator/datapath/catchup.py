"""How far along a flow's catch-up is, and when it will be done.

Every ``interval`` seconds, per flow: the source's end offsets (read_committed, what the
replicator can copy) minus the offsets the streaming query has committed is the backlog;
the records copied since the last look give the copy rate, the end offsets' growth the
rate at which the source adds records; the time to catch up is the backlog divided by the
difference (none while the source grows faster than the copy).

Shown on a terminal as one live line per flow (records and bytes done and remaining,
rate, ETA), as a log line every ``log_every`` seconds otherwise (or with
``--log-format json``), and always on the replicator's /metrics as
``sparkmirror_replicator_backlog_records`` and ``sparkmirror_replicator_catchup_eta_seconds``.
A catch-up starts when the backlog is above ``CATCHING_UP_RECORDS`` and ends, with one
"caught up" line, when it falls below ``CAUGHT_UP_RECORDS``. On a busy source both
thresholds are at least as many records as the source adds in ``CATCHING_UP_SECONDS``
and ``CAUGHT_UP_SECONDS``: a flow keeping pace always has about one batch of records in
flight, which at a high rate is more than the fixed thresholds (it would start and end a
"catch-up" every few seconds, and a flow in micro-batches would never come below
``CAUGHT_UP_RECORDS`` to go real time).
That rate is the source's sustained one, the median of its last few looks: a burst (a
backlog written all at once) is the catch-up itself and must not raise the bar above it.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
import statistics
from collections import deque
from dataclasses import dataclass

from sparkmirror import logsetup
from replicator.metrics import metrics

log = logging.getLogger("sparkmirror.replicate")

#: A flow that copied records within this many seconds is copying (a real-time batch boundary
#: pauses the copy for a second or two; an unreachable cluster for longer).
COPYING_WITHIN_S = 10.0

CATCHING_UP_RECORDS = 10_000
CAUGHT_UP_RECORDS = 1_000
CATCHING_UP_SECONDS = 10.0
CAUGHT_UP_SECONDS = 3.0
SUSTAINED_LOOKS = 5  # the source rate the thresholds scale with: the median of this many looks


@dataclass
class Estimate:
    backlog: int
    done: int  # records copied since the catch-up began
    done_bytes: int
    copy_rate: float  # records/s
    source_rate: float  # records/s the source adds
    eta: float | None  # seconds; None while the copy does not gain on the source
    bytes_per_record: float
    measured: bool = True  # False on the first look: no rate yet

    def line(self, flow: str) -> str:
        total = self.done + self.backlog
        pct = 100.0 * self.done / total if total else 100.0
        remaining_mb = self.backlog * self.bytes_per_record / 1e6
        if not self.measured:
            eta = "being measured"
        elif self.eta is not None:
            eta = _duration(self.eta)
        else:
            eta = f"none: not gaining (the source adds {self.source_rate:,.0f} records/s)"
        return (f"flow {flow} catching up: {self.done:,} of {total:,} records ({pct:.0f} %), "
                f"{self.done_bytes / 1e6:,.1f} MB done, ~{remaining_mb:,.1f} MB to go, "
                f"{self.copy_rate:,.0f} records/s, ETA {eta}")


def _duration(seconds: float) -> str:
    seconds = int(math.ceil(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def committed_offsets(query) -> dict[tuple[str, int], int] | None:
    """The end offsets of the query's newest committed batch, from Spark's progress report
    (the same ``{topic: {partition: offset}}`` JSON for the direct and the Kafka source)."""
    try:
        progress = query.lastProgress if query is not None else None
    except Exception:
        return None
    if not progress or not progress.get("sources"):
        return None
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        try:
            end = json.loads(end)
        except ValueError:
            return None
    if not isinstance(end, dict):
        return None
    out = {}
    for topic, per in end.items():
        if isinstance(per, dict):
            for p, off in per.items():
                if isinstance(off, int) and off >= 0:
                    out[(topic, int(p))] = off
    return out


class CatchUpTracker:
    """The estimate for one flow, fed with (time, source ends, committed, copied records/bytes)."""

    def __init__(self, smoothing: float = 0.3) -> None:
        self.smoothing = smoothing
        self._last: tuple[float, int, int, int] | None = None  # t, source total, copied records, copied bytes
        self.copy_rate = 0.0
        self.source_rate = 0.0
        self._source_rates: deque[float] = deque(maxlen=SUSTAINED_LOOKS)  # unsmoothed, one per look
        self.active = False
        self._start_records = 0
        self._start_bytes = 0
        self._started_at = 0.0

    def update(self, now: float, source_ends: dict, committed: dict, copied_records: int,
               copied_bytes: int) -> Estimate:
        backlog = sum(max(0, end - committed.get(tp, end)) for tp, end in source_ends.items())
        source_total = sum(source_ends.values())
        measured = self._last is not None
        if measured:
            t0, src0, rec0, _b0 = self._last
            dt = max(now - t0, 1e-3)
            a = self.smoothing
            self.copy_rate = (1 - a) * self.copy_rate + a * max(0, copied_records - rec0) / dt
            added = max(0, source_total - src0) / dt
            self.source_rate = (1 - a) * self.source_rate + a * added
            self._source_rates.append(added)
        self._last = (now, source_total, copied_records, copied_bytes)
        if not self.active and backlog > self.catching_up_above():
            self.active = True
            self._start_records, self._start_bytes, self._started_at = copied_records, copied_bytes, now
        gain = self.copy_rate - self.source_rate
        return Estimate(
            backlog=backlog,
            done=max(0, copied_records - self._start_records) if self.active else 0,
            done_bytes=max(0, copied_bytes - self._start_bytes) if self.active else 0,
            copy_rate=self.copy_rate, source_rate=self.source_rate,
            eta=backlog / gain if backlog and gain > 0 else (0.0 if not backlog else None),
            bytes_per_record=copied_bytes / copied_records if copied_records else 0.0,
            measured=measured,
        )

    def sustained_source_rate(self) -> float:
        """Records/s the source keeps adding: the median of the last looks, so one burst does not count."""
        return statistics.median(self._source_rates) if self._source_rates else 0.0

    def catching_up_above(self) -> float:
        """A backlog above this many records is a catch-up (see the module docstring)."""
        return max(CATCHING_UP_RECORDS, self.sustained_source_rate() * CATCHING_UP_SECONDS)

    def caught_up_below(self) -> float:
        """A backlog below this many records is caught up: within a few seconds of the source."""
        return max(CAUGHT_UP_RECORDS, self.sustained_source_rate() * CAUGHT_UP_SECONDS)

    def finish(self, now: float) -> float | None:
        """The catch-up ended (backlog below ``caught_up_below``): its duration, once."""
        if not self.active:
            return None
        self.active = False
        return now - self._started_at


class FallBehind:
    """When a real-time flow should leave for micro-batches because it cannot keep up (pure).

    The real-time path copies fewer records per second than micro-batches (one task per
    partition, each record on its own; the JVM's first minute is mostly compilation). A flow
    that stays behind on it gets further behind for as long as the source writes faster;
    micro-batches catch it up, and the flow goes real time again once caught up. Only a flow
    that copies counts: one that copies nothing waits for a cluster or a failed query, which
    micro-batches would not copy faster.
    """

    def __init__(self, after: float, eta_limit: float) -> None:
        """``after``: seconds a flow must stay behind, copying but not due to catch up within
        ``eta_limit`` seconds, before it falls back (``fall_back_after`` and ``fall_back_eta`` of
        replicator.settings)."""
        self.after = after
        self.eta_limit = eta_limit
        self.since: float | None = None  # since when the flow has been behind and not catching up

    def look(self, now: float, est: Estimate, behind_above: float, copying: bool) -> bool:
        """One look at a real-time flow's estimate (``copying``: it copied records within the last
        COPYING_WITHIN_S); True once it has been falling behind for ``after`` s."""
        falling_behind = (est.measured and copying and est.backlog > behind_above
                          and (est.eta is None or est.eta > self.eta_limit))
        if not falling_behind:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= self.after

    def reset(self) -> None:
        self.since = None


def source_end_offsets(admin, assignment: dict[str, int]) -> dict[tuple[str, int], int]:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    tps = [TopicPartition(t, p) for t, n in assignment.items() for p in range(n)]
    if not tps:
        return {}
    futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                 isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


class CatchUpReport:
    """The catch-up progress of FlowReplicator ``fr``: ``step()`` takes one look (the service
    runs it every second on a driver thread)."""

    def __init__(self, fr, log_every: float = 10.0, stream=None) -> None:
        self.fr = fr
        self.log_every = log_every
        self.stream = stream or sys.stderr
        self.live = (logsetup.current_format() == "text" and hasattr(self.stream, "isatty")
                     and self.stream.isatty())
        self.tracker = CatchUpTracker()
        self.fall_behind = FallBehind(fr.settings.fall_back_after, fr.settings.fall_back_eta)
        self.logged_at = 0.0
        self._copied_before = 0  # the flow's copied records at the previous look
        self._copied_at: float | None = None  # when they last grew

    def step(self) -> None:
        fr, stream, tracker = self.fr, self.stream, self.tracker
        committed = fr.copied_offsets() if hasattr(fr, "copied_offsets") else committed_offsets(fr.query)
        if committed is None or not fr.assignment:
            return
        try:
            ends = source_end_offsets(fr.source_admin, dict(fr.assignment))
        except Exception as exc:  # the flow's own supervision reports an unreachable cluster
            log.debug("flow %s: progress: %s", fr.name, exc)
            return
        now = time.monotonic()
        est = tracker.update(now, ends, committed, fr.stats.records, fr.stats.bytes)
        metrics().catchup(fr.name, est.backlog, est.eta)
        caught_up = est.backlog < tracker.caught_up_below()
        if tracker.active and not caught_up:
            if self.live:
                stream.write("\r\x1b[2K" + est.line(fr.name))
                stream.flush()
            elif now - self.logged_at >= self.log_every:
                log.info("%s", est.line(fr.name))
                self.logged_at = now
        elif tracker.active:
            took = tracker.finish(now)
            if self.live:
                stream.write("\r\x1b[2K")
            log.info("flow %s caught up: %s records in %s (%s records/s)", fr.name, f"{est.done:,}",
                     _duration(took), f"{est.done / took:,.0f}" if took else "-")
        if est.measured and caught_up and getattr(fr, "catching_up_first", False):
            fr.caught_up()  # a flow that caught up in micro-batches goes real time
        if fr.stats.records > self._copied_before:
            self._copied_before, self._copied_at = fr.stats.records, now
        copying = self._copied_at is not None and now - self._copied_at <= COPYING_WITHIN_S
        if getattr(fr, "may_fall_back", False) and fr.realtime:
            if self.fall_behind.look(now, est, tracker.catching_up_above(), copying):
                self.fall_behind.reset()
                fr.fall_back(est.backlog, est.copy_rate, est.source_rate, self.fall_behind.after)
        else:
            self.fall_behind.reset()
        wait = getattr(fr, "fetch_wait", None)
        if wait is not None and est.measured:
            # the sustained rate: one burst (a backlog written at once) does not change the wait
            source_bps = tracker.sustained_source_rate() * est.bytes_per_record
            if fr.realtime:
                new = wait.look(now, source_bps, behind=not caught_up)
                if new is not None:
                    fr.refetch(new, source_bps)
            elif source_bps:  # in micro-batches: what the real-time query will start with
                wait.changed(wait.wanted(source_bps))
