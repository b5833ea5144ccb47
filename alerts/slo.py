"""The recovery-point objectives in PromQL: the SLI recorded once, its ratios and burn rates.

Each flow's objective (sparkmirror/objectives.py, the ``rpo:`` section of the mixin
config) becomes two series, so one rule reads every flow's own numbers:

- ``sparkmirror:flow_rpo_objective_seconds``: the lag the flow promises;
- ``sparkmirror:flow_rpo_error_budget:ratio``: the share of time it may exceed it (1 - target).

Both exist for each flow the monitor reports (``sparkmirror_flow_info``) that has an
objective; a flow without one has neither, and the fixed lag alerts apply to it. Then,
at every evaluation:

- ``sparkmirror:flow_rpo_good``: 1 when the flow's lag is known on every partition and
  at most the objective, else 0: unknown (``flow_lag_unknown_partitions`` above 0) and
  absent lag are bad, never good;
- ``sparkmirror:flow_rpo_since_timestamp_seconds``: when Prometheus began recording it;
- ``sparkmirror:flow_rpo_errors:ratio_<w>``: the bad share of each window ``w`` (5m, 30m, 1h,
  2h, 6h, 1d, 3d), counted over the whole window: time before recording began counts as
  neither (a restarted monitor, or a new flow, does not burn a window's worth at once);
- ``sparkmirror:flow_rpo_burn_rate:<w>``: that ratio over the error budget (1 = spending the
  budget exactly as fast as the period allows);
- the errors over each objective's whole period and the share of its budget left,
  ``sparkmirror:flow_rpo_budget_remaining:ratio`` (30 days of samples per flow at each
  evaluation: a few milliseconds a flow).

The alerts are the SRE workbook's multi-window, multi-burn-rate pair: critical when
both the 1h and the 5m windows burn at 14.4x (2 % of a 30-day budget in an hour; the short
window makes it resolve soon after the burn stops), warning at 6x over 6h and 30m or 1x over
3d and 6h.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import sel
from sparkmirror import metrics as m
from sparkmirror.objectives import Objective, duration_seconds

OBJECTIVE = "sparkmirror:flow_rpo_objective_seconds"
BUDGET = "sparkmirror:flow_rpo_error_budget:ratio"
GOOD = "sparkmirror:flow_rpo_good"
SINCE = "sparkmirror:flow_rpo_since_timestamp_seconds"
PERIOD_ERRORS = "sparkmirror:flow_rpo_errors:ratio_period"
BUDGET_REMAINING = "sparkmirror:flow_rpo_budget_remaining:ratio"
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")

#: Go template for an annotation: the flow's budget left, as a percentage.
BUDGET_LEFT_TEMPLATE = (f'{{{{ with printf "{BUDGET_REMAINING}{{flow=%q}}" $labels.flow | query }}}}'
                        '{{ . | first | value | humanizePercentage }}{{ else }}not known yet{{ end }}')


def errors(window: str) -> str:
    return f"sparkmirror:flow_rpo_errors:ratio_{window}"


def burn_rate(window: str) -> str:
    return f"sparkmirror:flow_rpo_burn_rate:{window}"


def _number(x: float) -> str:
    return f"{x:.10g}"


def classes(config: Config) -> list[tuple[tuple[str, ...], Objective]]:
    """(flow matchers, objective) for each flow named in the config and for the default."""
    out = [((f'flow="{name}"',), objective) for name, objective in config.rpo.flows if objective is not None]
    if config.rpo.default is not None:
        out.append((tuple(f'flow!="{name}"' for name, _ in config.rpo.flows), config.rpo.default))
    return out


def _covered(ratio: str, seconds: int) -> str:
    """``ratio`` of the recorded samples, scaled to the part of the window recording has covered."""
    return f"{ratio} * on(flow) clamp_max((time() - {SINCE}) / {seconds}, 1)"


def recordings(config: Config) -> list[dict]:
    """The recording rules, in evaluation order, as rule-file dicts."""
    fast: list[dict] = []
    period: list[dict] = []
    info = m.FLOW_INFO
    for matchers, objective in classes(config):
        flows = f"max by (flow) ({sel(info, *config.matchers, *matchers)}) * 0"
        fast.append({"record": OBJECTIVE, "expr": f"{flows} + {_number(objective.lag_seconds)}"})
        fast.append({"record": BUDGET, "expr": f"{flows} + {_number(objective.budget)}"})
        good = f'{GOOD}{{{",".join(matchers)}}}' if matchers else GOOD
        period_seconds = duration_seconds(objective.period)
        period.append({"record": PERIOD_ERRORS, "expr": _covered(
            f"(1 - avg_over_time({good}[{objective.period}]))", period_seconds)})
    if not fast:
        return []
    lag = f"max by (flow) ({sel(m.FLOW_LAG_SECONDS, *config.matchers)})"
    unknown = f"max by (flow) ({sel(m.FLOW_LAG_UNKNOWN_PARTITIONS, *config.matchers)})"
    fast.append({"record": GOOD, "expr": f"({lag} <= bool on(flow) {OBJECTIVE}) * on(flow) ({unknown} == bool 0) "
                                          f"or on(flow) ({OBJECTIVE} * 0)"})
    # Its own previous value while the flow is recorded; the first evaluation's time otherwise.
    fast.append({"record": SINCE, "expr": f"({SINCE} and on(flow) {GOOD}) or on(flow) ({GOOD} * 0 + time())"})
    for w in WINDOWS:
        fast.append({"record": errors(w), "expr": _covered(f"(1 - avg_over_time({GOOD}[{w}]))",
                                                           duration_seconds(w))})
    for w in WINDOWS:
        fast.append({"record": burn_rate(w), "expr": f"{errors(w)} / on(flow) {BUDGET}"})
    period.append({"record": BUDGET_REMAINING, "expr": f"1 - {PERIOD_ERRORS} / on(flow) {BUDGET}"})
    return fast + period


def fast_burn(t) -> str:
    return f"{burn_rate('1h')} > {_number(t.rpo_fast_burn)} and {burn_rate('5m')} > {_number(t.rpo_fast_burn)}"


def slow_burn(t) -> str:
    return (f"({burn_rate('6h')} > {_number(t.rpo_slow_burn)} and {burn_rate('30m')} > {_number(t.rpo_slow_burn)}) "
            f"or ({burn_rate('3d')} > {_number(t.rpo_steady_burn)} and {burn_rate('6h')} > "
            f"{_number(t.rpo_steady_burn)})")
