"""What each flow looked like over the last hours: the history behind the status page's charts.

The monitor records every evaluation here, whether or not anyone has the page
open, so a page opened (or reloaded) later shows the hours before it. Memory is
bounded: per flow a ring of at most ``POINTS`` points, one per ``step`` seconds
(``--history-step``, default 10 s: 3 hours). Evaluations within one step are
merged into its point: the largest lag in seconds and in records (a peak seen
between two points is never smoothed away), and the newest replicated and
source totals, from which each point's throughput is the records copied since
the previous point per second. A point is a list of six numbers, so a flow's
history takes the same bounded memory whatever the step or the uptime
(tests/unit/test_monitor_history.py measures a full ring against its bound).

Served as JSON on ``/api/history`` and drawn by the status page.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

POINTS = 1080
DEFAULT_STEP = 10.0


@dataclass(frozen=True)
class HistoryPoint:
    at: float                   # the newest evaluation merged into the point
    lag_seconds: float | None   # largest over the step; None: unknown throughout
    lag_records: int | None
    throughput: float | None    # records/s copied since the previous point; None for the first
    produced: float | None      # records/s added on the source since the previous point


# A ring entry is a list [step number, time, lag seconds, lag records, replicated total, source total].
_Entry = list


class History:
    """Per flow: a ring of at most ``points`` merged points, ``step`` seconds apart."""

    def __init__(self, step: float = DEFAULT_STEP, points: int = POINTS) -> None:
        if step <= 0 or points < 2:
            raise ValueError("a history needs a step above 0 and at least 2 points")
        self.step, self.points_max = step, points
        self._flows: dict[str, deque[_Entry]] = {}

    def record(self, evaluation) -> None:
        """Merge one Evaluation (monitor.evaluator) into the history; flows that went away are forgotten."""
        at = evaluation.generated_at
        bucket = int(at // self.step)
        names = set()
        for f in evaluation.flows:
            names.add(f.name)
            ring = self._flows.get(f.name)
            if ring is None:
                ring = self._flows[f.name] = deque(maxlen=self.points_max)
            last = ring[-1] if ring else None
            if last is not None and at <= last[1]:
                continue  # an older evaluation than one already merged (concurrent requests)
            if last is not None and last[0] == bucket:
                last[1] = at
                last[2] = _max(last[2], f.lag_seconds)
                last[3] = _max(last[3], f.lag_records)
                last[4], last[5] = f.replicated_total, f.source_total
            else:
                ring.append([bucket, at, f.lag_seconds, f.lag_records, f.replicated_total, f.source_total])
        for gone in set(self._flows) - names:
            del self._flows[gone]

    def flows(self) -> list[str]:
        return list(self._flows)

    def points(self, flow: str) -> list[HistoryPoint]:
        out: list[HistoryPoint] = []
        previous = None
        for _bucket, at, secs, records, replicated, source in self._flows.get(flow, ()):
            if previous is None or at <= previous[0]:
                copied = produced = None
            else:
                elapsed = at - previous[0]
                copied = max(0, replicated - previous[1]) / elapsed
                produced = max(0, source - previous[2]) / elapsed
            out.append(HistoryPoint(at, secs, records, copied, produced))
            previous = (at, replicated, source)
        return out

    def document(self) -> dict:
        """The /api/history JSON: per flow, points as [time, lag s, lag records, copied/s, produced/s]."""
        return {
            "step_seconds": self.step, "points_max": self.points_max,
            "flows": {name: [[round(p.at, 3), _round(p.lag_seconds), p.lag_records, _round(p.throughput),
                              _round(p.produced)] for p in self.points(name)]
                      for name in self._flows},
        }


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
