"""The overview: a summary line, then one row per flow (repeated over ``$flow``).

Each flow row answers "is DR keeping up?": health, replicator liveness,
heartbeat age, lag in records and in seconds, data lost, then heartbeat
latency percentiles, lag and throughput over time.
"""

from __future__ import annotations

from grafanalib import core as g

from alerts.config import DEFAULT, Config
from alerts.rules import build as build_rules
from dashboards import layout as ui
from dashboards import queries as q

UID = "sparkmirror-overview"
TITLE = "sparkmirror: replication overview"


def build(drilldown_uid: str, config: Config = DEFAULT) -> g.Dashboard:
    # Long by design: the panels in the order the dashboard shows them, row by row.
    t = config.thresholds
    grid = ui.Grid()
    grid.add(ui.stat(
        "Flows by status", q.flows_by_status(),
        "How many flows are in each status (OK, WARN, STALL, STOP, ERR); rules in docs/monitor-status.md.",
        text_mode="value_and_name"), w=8, h=4)
    grid.add(ui.stat(
        "Clusters reachable", q.clusters_up(),
        "1 when the monitor's last request to the cluster succeeded.",
        mappings=ui.up_mappings("reachable", "unreachable"), text_mode="value_and_name"), w=8, h=4)
    grid.add(ui.stat(
        "Monitor: last evaluation", q.monitor_evaluation_age(),
        "Seconds since the monitor last evaluated. No data: Prometheus is not scraping the monitor.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.monitor_evaluation_age_seconds))),
        w=4, h=4)
    grid.add(ui.stat(
        "Data lost (time range)", q.data_lost_in_range(),
        "Source records deleted by retention before they were replicated, in the selected time range. "
        "Anything above 0 is a gap in the DR copy.",
        unit=ui.RECORDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, 1))), w=4, h=4)
    rules = build_rules(config)
    grid.add(ui.table(
        "Firing alerts", q.firing_alerts([r.name for r in rules]),
        "sparkmirror alerts Prometheus fires now (its ALERTS series), with their labels; the runbook of "
        "each is linked on the right.", "none", hide=("alertstate",)), w=16, h=6)
    grid.add(ui.text(
        "Runbooks",
        "\n".join(f"- [{r.name}]({config.runbook_url(r.name)}) ({r.severity})" for r in rules),
        "What to check and do for each alert (docs/runbooks.md)."), w=8, h=6)

    grid.row("Flow $flow", repeat="flow")
    grid.add(ui.stat(
        "Health", q.flow_status_code(), "Flow status from the monitor's evaluation.",
        mappings=ui.status_mappings(), thresholds=ui.status_thresholds()), w=4, h=4)
    grid.add(ui.stat(
        "Replicator", q.replicator_up(),
        "Heartbeats (or offset-sync progress) are arriving on the target.",
        mappings=ui.up_mappings()), w=4, h=4)
    grid.add(ui.stat(
        "Heartbeat age", q.heartbeat_age(),
        f"Now minus the newest replicated heartbeat's timestamp. The page fires when no heartbeat has "
        f"arrived for the flow's heartbeat timeout (2 x emit.heartbeats.interval.seconds) plus "
        f"{t.heartbeats_stopped_margin_seconds}s.",
        unit=ui.SECONDS, graph=True), w=4, h=4)
    grid.add(ui.stat(
        "Lag (records)", q.flow_lag_records(), "Source records not yet on the target.",
        unit=ui.RECORDS, graph=True), w=4, h=4)
    grid.add(ui.stat(
        "Lag (seconds)", q.flow_lag_seconds(),
        "Age of the oldest source record not yet on the target: the recovery point if the source "
        "were lost now.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.YELLOW, t.lag_growing_min_seconds),
                                             (ui.RED, t.lag_seconds)), graph=True), w=4, h=4)
    grid.add(ui.stat(
        "Data lost (time range)", q.flow_data_lost(),
        "Records deleted on the source before they were copied, in the selected time range.",
        unit=ui.RECORDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, 1))), w=4, h=4)
    grid.add(ui.timeseries(
        "Heartbeat latency", q.heartbeat_latency_percentiles(),
        "Percentiles of heartbeat timestamp -> append on the target: end-to-end replication latency "
        "of a tiny record.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.latency_seconds)),
        legend_calcs=["lastNotNull", "max"]), w=6, h=8)
    grid.add(ui.timeseries(
        "Lag (records)", q.flow_lag_records(), "Source records not yet on the target.", unit=ui.RECORDS,
        legend_calcs=["lastNotNull", "max"]), w=6, h=8)
    grid.add(ui.timeseries(
        "Lag (seconds)", q.flow_lag_seconds(), "Age of the oldest unreplicated source record.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.lag_seconds)),
        legend_calcs=["lastNotNull", "max"]), w=6, h=8)
    grid.add(ui.timeseries(
        "Throughput", q.throughput(),
        "Records per second copied to the target vs produced on the source; a persistent gap means "
        "growing lag.",
        unit=ui.RECORDS_PER_SECOND, legend_calcs=["lastNotNull", "mean"]), w=6, h=8)
    grid.add(ui.stat(
        "Time to catch up", q.flow_catchup_eta(),
        "Time until the flow's slowest partition is caught up at the net rate the monitor observes (copy "
        "rate minus what the source adds, over its trend window); 0 when caught up. 'not catching up': "
        "some lagging partition does not gain on its source.",
        unit=ui.SECONDS, mappings=ui.infinite_mapping("not catching up"),
        thresholds=ui.steps((ui.GREEN, None), (ui.YELLOW, t.lag_growing_min_seconds), (ui.RED, t.lag_seconds)),
        graph=True), w=6, h=6)
    grid.add(ui.timeseries(
        "Catch-up rate", q.flow_catchup_rate(),
        "Records per second the backlog shrinks: copy rate minus the rate the source adds records, over "
        "the monitor's trend window. Below 0 the lag grows.",
        unit=ui.RECORDS_PER_SECOND, legend_calcs=["lastNotNull", "min"]), w=14, h=6)
    grid.add(ui.stat(
        "Partitions of unknown lag", q.flow_lag_unknown_partitions(),
        "Partitions whose lag the monitor cannot work out yet (no offset-sync for what their mirror holds, "
        "end offsets not read). The lag figures above leave them out: while this is above 0 they are a "
        "lower bound.",
        unit=ui.RECORDS, thresholds=ui.steps((ui.GREEN, None), (ui.YELLOW, 1))), w=4, h=6)

    links = [g.DashboardLink(title="Drill-down", type="link", uri=f"/d/{drilldown_uid}", includeVars=True,
                             keepTime=True, icon="dashboard")]
    templates = [ui.datasource_variable(), ui.query_variable("flow", "Flow")]
    return ui.dashboard(UID, TITLE, "Cross-cluster replication health per flow (sparkmirror or Apache MM2).",
                        grid, templates, links)

