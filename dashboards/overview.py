"""The overview: a summary line, then one row per flow (repeated over ``$flow``).

Each flow row answers "is DR keeping up?": health, replicator liveness,
heartbeat age, lag in records and in seconds, data lost, then heartbeat
latency percentiles, lag and throughput over time.
"""

from __future__ import annotations

from grafanalib import core as g

from alerts import thresholds as t
from dashboards import layout as ui
from dashboards import queries as q

UID = "sparkmirror-overview"
TITLE = "sparkmirror: replication overview"


def build(drilldown_uid: str) -> g.Dashboard:
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
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.MONITOR_EVALUATION_AGE_SECONDS))),
        w=4, h=4)
    grid.add(ui.stat(
        "Data lost (time range)", q.data_lost_in_range(),
        "Source records deleted by retention before they were replicated, in the selected time range. "
        "Anything above 0 is a gap in the DR copy.",
        unit=ui.RECORDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, 1))), w=4, h=4)

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
        f"Now minus the newest replicated heartbeat's timestamp. The page fires above "
        f"{t.HEARTBEAT_AGE_SECONDS} s held for {t.HEARTBEATS_STOPPED_FOR}.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.HEARTBEAT_AGE_SECONDS)),
        graph=True), w=4, h=4)
    grid.add(ui.stat(
        "Lag (records)", q.flow_lag_records(), "Source records not yet on the target.",
        unit=ui.RECORDS, graph=True), w=4, h=4)
    grid.add(ui.stat(
        "Lag (seconds)", q.flow_lag_seconds(),
        "Age of the oldest source record not yet on the target: the recovery point if the source "
        "were lost now.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.YELLOW, t.LAG_GROWING_MIN_SECONDS),
                                             (ui.RED, t.LAG_SECONDS)), graph=True), w=4, h=4)
    grid.add(ui.stat(
        "Data lost (time range)", q.flow_data_lost(),
        "Records deleted on the source before they were copied, in the selected time range.",
        unit=ui.RECORDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, 1))), w=4, h=4)
    grid.add(ui.timeseries(
        "Heartbeat latency", q.heartbeat_latency_percentiles(),
        "Percentiles of heartbeat timestamp -> append on the target: end-to-end replication latency "
        "of a tiny record.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.LATENCY_SECONDS)),
        legend_calcs=["lastNotNull", "max"]), w=6, h=8)
    grid.add(ui.timeseries(
        "Lag (records)", q.flow_lag_records(), "Source records not yet on the target.", unit=ui.RECORDS,
        legend_calcs=["lastNotNull", "max"]), w=6, h=8)
    grid.add(ui.timeseries(
        "Lag (seconds)", q.flow_lag_seconds(), "Age of the oldest unreplicated source record.",
        unit=ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.LAG_SECONDS)),
        legend_calcs=["lastNotNull", "max"]), w=6, h=8)
    grid.add(ui.timeseries(
        "Throughput", q.throughput(),
        "Records per second copied to the target vs produced on the source; a persistent gap means "
        "growing lag.",
        unit=ui.RECORDS_PER_SECOND, legend_calcs=["lastNotNull", "mean"]), w=6, h=8)

    links = [g.DashboardLink(title="Drill-down", type="link", uri=f"/d/{drilldown_uid}", includeVars=True,
                             keepTime=True, icon="dashboard")]
    templates = [ui.datasource_variable(), ui.query_variable("flow", "Flow")]
    return ui.dashboard(UID, TITLE, "Cross-cluster replication health per flow (sparkmirror or Apache MM2).",
                        grid, templates, links)

