"""What the monitor's state keeps of the past, and how it forgets: bounded windows.

Each partition keeps a window of trend samples (``Sample``) for the evaluator's trend
rules and catch-up rates; each collector its recent rounds for the last minute's figures;
each partition its newest offset-syncs and each group partition its committed offsets
with their times (when a checkpoint became due); each flow the heartbeat arrivals that
ended a silence; and the heartbeat latency samples wait here for the OTel exporter
(``LatencySamples``). The raw facts these windows belong to are in monitor.facts.
"""

from __future__ import annotations

import threading
from collections import deque

from monitor.lag import records_lag

#: One partition's figures at one read, kept in its sample window: ``(at, position, lag,
#: source_end)``, read with the indexes below. A plain tuple of numbers, which the garbage
#: collector stops tracking at the first collection it survives (a NamedTuple is a tuple
#: subclass, and those stay tracked): a large monitor keeps ``--window`` samples for every
#: partition, and as tracked objects every full collection, with every thread stopped, walked
#: them all (bench/NOTES.md, Monitor at scale).
Sample = tuple[float, int | None, int | None, int | None]
AT, POSITION, LAG, SOURCE_END = 0, 1, 2, 3

#: rounds of each collector kept for the last minute's figures (the positions loop makes ~5 a second)
ROUNDS_KEPT = 600

#: Offset-syncs per partition and committed offsets per group partition kept with their times,
#: for telling when a checkpoint became due (see monitor.evaluator.groups).
RECENT_SYNCS = 16
GROUP_HISTORY = 16

#: ``HeartbeatState.silences`` kept: the oldest (the longest) go first when there are more.
SILENCES_KEPT = 64


def sample_of(at: float, position: int | None, source_start: int | None, source_end: int | None) -> Sample:
    """A trend sample of a partition's figures at ``at``."""
    return at, position, records_lag(position, source_start, source_end), source_end


def add_silence(silences: list[tuple[float, float]], at: float, silence: float) -> None:
    """A heartbeat arrived at ``at`` after ``silence`` seconds without one: keep it, and only
    the earlier arrivals whose silence was longer (see ``HeartbeatState.silences``)."""
    while silences and silences[-1][1] <= silence:
        silences.pop()
    silences.append((at, silence))
    del silences[:-SILENCES_KEPT]


def add_recent_sync(recent: deque[tuple[int, int, float]], upstream: int, downstream: int, at: float) -> None:
    """An offset-sync (upstream, downstream) written at ``at``, in its partition's window."""
    if recent and downstream <= recent[-1][1]:
        recent.clear()  # the target went backwards (re-created): the older syncs describe nothing now
    recent.append((upstream, downstream, at))


def round_figures(rounds: deque[tuple[float, float]], since: float) -> tuple[int, float, float] | None:
    """(rounds, p50, worst) of the durations of the ``rounds`` that ended at ``since`` or later."""
    recent = sorted(d for at, d in rounds if at >= since)
    if not recent:
        return None
    return len(recent), recent[(len(recent) - 1) // 2], recent[-1]


class LatencySamples:
    """Heartbeat latency samples, (flow, seconds), from one ``take()`` to the next: at most ``limit``.

    A histogram that records each sample (OpenTelemetry's) cannot be rebuilt from the
    cumulative bucket counts the Prometheus exporter reads, so its exporter takes the
    samples themselves: each once, whatever thread it reads from. Samples that arrive
    while ``limit`` of them wait are dropped and counted, and ``take()`` says how many.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._samples: list[tuple[str, float]] = []
        self._dropped = 0
        self.dropped_total = 0
        self._lock = threading.Lock()

    def add(self, flow: str, seconds: float) -> None:
        with self._lock:
            if len(self._samples) < self.limit:
                self._samples.append((flow, seconds))
            else:
                self._dropped += 1
                self.dropped_total += 1

    def take(self) -> tuple[list[tuple[str, float]], int]:
        """The samples since the last take, and how many were dropped since then."""
        with self._lock:
            taken, dropped = self._samples, self._dropped
            self._samples, self._dropped = [], 0
        return taken, dropped
