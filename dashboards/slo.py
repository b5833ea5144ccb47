"""Recovery-point objectives: one row per flow (repeated over ``$flow``).

Each row answers "are we keeping the promise?": the flow's objective, the share of the
period's error budget left, whether the newest sample is good, the burn rate over each
window the alerts use (with the page's and the ticket's limits drawn), the lag's
percentiles over time, and the periods that burned the budget. Every series comes from
the recording rules of alerts/slo.py (docs/slo.md).
"""

from __future__ import annotations

from grafanalib import core as g

from alerts.config import DEFAULT, Config
from dashboards import layout as ui
from dashboards import queries as q

UID = "sparkmirror-slo"
TITLE = "sparkmirror: recovery-point objectives"


def build(overview_uid: str, config: Config = DEFAULT) -> "g.Dashboard":
    t = config.thresholds
    grid = ui.Grid()
    grid.row("Flow $flow", repeat="flow")
    grid.add(ui.stat(
        "Objective", q.rpo_objective(),
        "The recovery point the flow promises: the oldest source record not yet on the target is at most "
        "this old, for the target share of each period (the mixin config's rpo:, docs/slo.md). No data: the "
        "flow has no objective, and the fixed lag alerts apply.", unit=ui.SECONDS), w=4, h=5)
    grid.add(ui.stat(
        "Budget left", q.rpo_budget_left(),
        "Share of the period's error budget (1 - target) not spent yet: time with the lag above the "
        "objective or unknown spends it. Below 0: overspent.",
        unit="percentunit", thresholds=ui.steps((ui.RED, None), (ui.YELLOW, 0.25), (ui.GREEN, 0.5)), graph=True),
        w=4, h=5)
    grid.add(ui.stat(
        "Now", q.rpo_good_now(),
        "The newest sample: within the objective with every partition's lag known (1), or not (0).",
        mappings=ui.up_mappings("within", "breached"), thresholds=ui.steps((ui.RED, None), (ui.GREEN, 1))),
        w=4, h=5)
    grid.add(ui.timeseries(
        "Burn rate per window", q.rpo_burn_rates(),
        f"How fast the budget is spent over each window: 1 spends it exactly over the period. The page "
        f"fires above {t.rpo_fast_burn:g}x over both 1h and 5m, the ticket above {t.rpo_slow_burn:g}x over "
        f"6h and 30m or {t.rpo_steady_burn:g}x over 3d and 6h.",
        unit="none", thresholds=ui.steps((ui.GREEN, None), (ui.YELLOW, t.rpo_slow_burn), (ui.RED, t.rpo_fast_burn)),
        legend_calcs=["lastNotNull", "max"]), w=12, h=10)
    grid.add(ui.timeseries(
        "Lag percentiles", q.rpo_lag_percentiles(),
        "p50 and p99 of the flow's lag in seconds over the last 5 minutes and hour, from the histogram "
        "each evaluation of the monitor feeds (sparkmirror_flow_lag_observed_seconds; evaluations with "
        "unknown lag are left out of it and burn the budget instead).", unit=ui.SECONDS, legend_calcs=["lastNotNull", "max"]), w=12, h=8)
    grid.add(ui.timeseries(
        "Periods that burned the budget", q.rpo_bad_periods(),
        "Share of bad samples (lag above the objective or unknown) over the last 5 minutes and hour: the "
        "peaks are when the budget went.", unit="percentunit", legend_calcs=["max", "mean"]), w=12, h=8)

    links = [g.DashboardLink(title="Overview", type="link", uri=f"/d/{overview_uid}", includeVars=True,
                                keepTime=True, icon="dashboard")]
    templates = [ui.datasource_variable(), ui.query_variable("flow", "Flow")]
    return ui.dashboard(UID, TITLE, "Each flow's recovery-point objective, its error budget and burn rates.",
                        grid, templates, links)
