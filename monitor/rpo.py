"""Each flow's recovery-point objective as the monitor sees it: budget left and lag percentiles.

The objective comes from the mixin config the alert rules are rendered from
(``--objectives FILE``, its ``rpo:`` section; sparkmirror/objectives.py), the default
(lag <= 30 s for 99.9 % of 30 days) without it. At every evaluation a flow's sample is
good when its lag is known on every partition and at most the objective; unknown lag
is bad, never good, as in the recording rules (alerts/slo.py). The time until the next
evaluation counts as that sample's.

- **Budget left**: 1 - bad time / (the budget's share of the period), over what this
  monitor has watched since it started (at most one period). Prometheus keeps the
  durable figure over the whole period (``sparkmirror:flow_rpo_budget_remaining:ratio``);
  this one restarts with the monitor, and says since when it counts.
- **Lag percentiles**: p50 and p99 of the flow's lag in seconds over the last 5 minutes
  and hour, over the evaluations whose lag was known (``unknown_samples`` counts the
  others).

Memory is bounded: per flow at most ``SAMPLES_KEPT`` samples (one an evaluation, the
last hour) and two sums.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field

from sparkmirror.metrics import LAG_BUCKETS
from sparkmirror.objectives import DEFAULT, Objective, Objectives

SAMPLES_KEPT = 4096
WINDOWS = (("5m", 300.0), ("1h", 3600.0))


@dataclass
class _FlowTrack:
    objective: Objective | None
    since: float
    samples: deque = field(default_factory=lambda: deque(maxlen=SAMPLES_KEPT))  # (at, lag or None)
    last: tuple[float, bool] | None = None  # (at, good) of the previous evaluation
    good_seconds: float = 0.0
    bad_seconds: float = 0.0
    # every known lag sample since the monitor started, per LAG_BUCKETS bound (+Inf last)
    lag_buckets: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS) + 1))
    lag_sum: float = 0.0


def _good(objective: Objective | None, lag_seconds: float | None, unknown: int) -> bool:
    limit = objective.lag_seconds if objective is not None else math.inf
    return lag_seconds is not None and unknown == 0 and lag_seconds <= limit


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0-1) of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class RpoTracker:
    def __init__(self, objectives: Objectives = DEFAULT) -> None:
        self.objectives = objectives
        self._flows: dict[str, _FlowTrack] = {}

    def record(self, evaluation) -> None:
        """Add one Evaluation's flows; flows that went away are forgotten."""
        at = evaluation.generated_at
        names = set()
        for f in evaluation.flows:
            names.add(f.name)
            track = self._flows.get(f.name)
            if track is None:
                track = self._flows[f.name] = _FlowTrack(self.objectives.for_flow(f.name), at)
            if track.last is not None and at <= track.last[0]:
                continue  # an older evaluation than one already recorded (concurrent requests)
            known = f.lag_seconds if f.lag_unknown_partitions == 0 else None
            good = _good(track.objective, f.lag_seconds, f.lag_unknown_partitions)
            if track.last is not None:
                elapsed = at - track.last[0]
                if track.last[1]:
                    track.good_seconds += elapsed
                else:
                    track.bad_seconds += elapsed
            track.last = (at, good)
            track.samples.append((at, known))
            if known is not None:
                track.lag_buckets[bisect.bisect_left(LAG_BUCKETS, known)] += 1
                track.lag_sum += known
            while track.samples and track.samples[0][0] < at - WINDOWS[-1][1]:
                track.samples.popleft()
        for gone in set(self._flows) - names:
            del self._flows[gone]

    def annotate(self, evaluation) -> None:
        """Record ``evaluation`` and attach what the exporters serve from it: each flow's ``rpo``
        document (/api/status) and lag histogram (/metrics)."""
        self.record(evaluation)
        at = evaluation.generated_at
        evaluation.extra["rpo"] = {f.name: self.document(f.name, at) for f in evaluation.flows}
        evaluation.extra["lag_histograms"] = {f.name: self.histogram(f.name) for f in evaluation.flows}

    def histogram(self, flow: str) -> tuple[list[tuple[str, float]], float] | None:
        """Cumulative (le, count) buckets incl. +Inf, and the sum, of the flow's known lag samples
        (sparkmirror_flow_lag_observed_seconds); None for a flow never recorded."""
        track = self._flows.get(flow)
        if track is None:
            return None
        out, total = [], 0
        for bound, count in zip([*LAG_BUCKETS, math.inf], track.lag_buckets):
            total += count
            out.append(("+Inf" if bound == math.inf else repr(float(bound)), float(total)))
        return out, track.lag_sum

    def document(self, flow: str, now: float) -> dict | None:
        """The ``rpo`` object of a flow in /api/status; None for a flow never recorded."""
        track = self._flows.get(flow)
        if track is None:
            return None
        lag: dict = {}
        for name, seconds in WINDOWS:
            recent = [v for at, v in track.samples if at >= now - seconds]
            known = [v for v in recent if v is not None]
            lag[name] = {"p50_seconds": _round(percentile(known, 0.5)), "p99_seconds": _round(percentile(known, 0.99)),
                         "samples": len(recent), "unknown_samples": len(recent) - len(known)}
        o = track.objective
        doc: dict = {"objective": None, "lag_percentiles": lag, "counted_since": track.since,
                     "good_seconds": round(track.good_seconds, 1), "bad_seconds": round(track.bad_seconds, 1)}
        if o is not None:
            budget_seconds = o.budget * o.period_seconds
            doc["objective"] = {"lag_seconds": o.lag_seconds, "target": o.target, "period": o.period,
                                "text": o.text(), "budget_seconds": round(budget_seconds, 1)}
            doc["budget_left_ratio"] = round(1.0 - track.bad_seconds / budget_seconds, 4)
            doc["meeting_objective"] = bool(track.last and track.last[1])
        return doc


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
