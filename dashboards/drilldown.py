"""The drill-down: where the lag is (topics, partitions), whether consumer groups can
fail over (checkpoints), and whether the replicator and the monitor are working.

Per-partition panels need the monitor's ``--granularity partition`` (its
default); per-topic panels need ``topic`` or finer.
"""

from __future__ import annotations

from grafanalib import core as g

from alerts.config import DEFAULT, Config
from dashboards import layout as ui
from dashboards import queries as q

UID = "sparkmirror-drilldown"
TITLE = "sparkmirror: drill-down"


def build(overview_uid: str, config: Config = DEFAULT) -> g.Dashboard:
    # Long by design: the panels in the order the dashboard shows them, row by row.
    t = config.thresholds
    grid = ui.Grid()

    grid.row("Topics and partitions")
    grid.add(ui.table(
        "Top $k partitions by lag (records)", q.top_partitions_lag_records(),
        "Partitions with the most source records not yet on the target, now.", ui.RECORDS), w=8, h=9)
    grid.add(ui.table(
        "Top $k partitions by lag (seconds)", q.top_partitions_lag_seconds(),
        "Partitions whose oldest unreplicated record is oldest, now.", ui.SECONDS), w=8, h=9)
    grid.add(ui.table(
        "Top $k partitions by time to catch up", q.top_partitions_catchup_eta(),
        "Partitions furthest from caught up at their observed net rate (copy rate minus source rate); "
        "'not catching up': not gaining on the source.",
        ui.SECONDS, mappings=ui.infinite_mapping("not catching up")), w=8, h=9)
    grid.add(ui.table(
        "Bottom $k partitions by catch-up rate", q.bottom_partitions_catchup_rate(),
        "Records per second each partition's backlog shrinks; the lowest first (below 0: its lag grows).",
        ui.RECORDS_PER_SECOND), w=8, h=9)
    grid.add(ui.table(
        "Partitions not OK", q.partitions_not_ok(),
        "Partitions whose status is WARN, STALL, STOP or ERR (docs/monitor-status.md).", "none",
        mappings=ui.status_mappings()), w=8, h=9)
    grid.add(ui.timeseries(
        "Topic lag (records)", q.topic_lag_records(), "Source records not yet on the target, per topic.",
        ui.RECORDS, legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Topic lag (seconds)", q.topic_lag_seconds(), "Age of the topic's oldest unreplicated record.",
        ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.lag_seconds)),
        legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Partitions by status", q.partitions_by_status(), "Replicated partitions in each status.",
        "short"), w=4, h=8)
    grid.add(ui.timeseries(
        "Data lost to retention", q.topic_data_lost(),
        "Source records deleted before they were replicated, per topic.", ui.RECORDS), w=4, h=8)

    grid.add(ui.timeseries(
        "Retention headroom", q.retention_headroom(),
        "Time until the source's retention.ms may delete a record not yet on the target (oldest "
        "unreplicated record + retention.ms - now; retention.ms when caught up), least per topic and per "
        "flow. +Inf (off the chart): nothing is deleted by age.", ui.SECONDS,
        legend_calcs=["lastNotNull", "min"]), w=10, h=8)
    grid.add(ui.table(
        "Least retention headroom: bottom $k partitions", q.bottom_partitions_retention_headroom(),
        "Partitions closest to losing records not yet on the target to retention.", ui.SECONDS), w=8, h=8)
    grid.add(ui.stat(
        "Partitions with low retention headroom", q.retention_low_partitions(),
        "Partitions below the monitor's --retention-headroom-warn (or half the topic's retention.ms): "
        "SparkmirrorRetentionHeadroomLow.",
        thresholds=ui.steps((ui.GREEN, None), (ui.RED, 1)), text_mode="value_and_name"), w=6, h=8)

    grid.row("Consumer groups: checkpoints and failover")
    grid.add(ui.table(
        "Can fail over now?", q.failover_ready(),
        "Per group: READY when every partition it commits has a checkpoint that skips nothing and the "
        "re-read stays within the monitor's --failover-max-reread-* limits. /api/status and the "
        "monitor's page say it in words.", "none", mappings=ui.up_mappings("READY", "NOT READY")), w=6, h=8)
    grid.add(ui.table(
        "Can fail back now?", q.failback_ready(),
        "Per group consuming the mirror topics on the target: READY when every partition it commits maps "
        "back through a surviving offset-sync to an offset the source still holds (`sparkmirror "
        "failback`).", "none", mappings=ui.up_mappings("READY", "NOT READY")), w=6, h=8)
    grid.add(ui.table(
        "Why groups cannot fail over", q.failover_blocked(),
        "Per group, each reason (docs/monitor-status.md: no-checkpoint, behind-offset-syncs, would-skip, "
        "past-target-end, reread-records, reread-seconds); the ones that apply now come first.", "none",
        mappings=[{"type": "value", "options": {"1": {"text": "blocks", "color": ui.RED, "index": 0},
                                                "0": {"text": "-", "color": ui.GREEN, "index": 1}}}]), w=7, h=8)
    grid.add(ui.stat(
        "Groups not ready to fail over", q.failover_groups_not_ready(),
        "Consumer groups of the flow that cannot fail over now.",
        thresholds=ui.steps((ui.GREEN, None), (ui.RED, 1)), text_mode="value_and_name"), w=5, h=8)
    grid.add(ui.timeseries(
        "Failover re-read (seconds)", q.failover_reread_seconds(),
        "Time span of the records the group would read again if it failed over now (largest over its "
        "partitions).", ui.SECONDS, legend_calcs=["lastNotNull", "max"]), w=12, h=8)
    grid.add(ui.timeseries(
        "Failover re-read and skipped (records)", q.failover_reread_records(),
        "Records the group would read again, and records it has not consumed that it would skip (data "
        "lost for the group), if it failed over now.", ui.RECORDS, legend_calcs=["lastNotNull", "max"]),
        w=12, h=8)
    grid.add(ui.timeseries(
        "Checkpoint age per group", q.group_checkpoint_age(),
        "Oldest checkpoint among the group's partitions that are behind; 0 when every checkpoint is "
        "current.",
        ui.SECONDS, thresholds=ui.steps((ui.GREEN, None), (ui.RED, t.checkpoint_age_seconds)),
        legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Checkpoint lag per group", q.group_checkpoint_lag(),
        "Records a consumer of the group would re-read if it failed over to the target now.",
        ui.RECORDS, legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.table(
        "Partitions without a checkpoint", q.group_checkpoint_missing(),
        "Partitions where the group commits on the source but has no checkpoint on the target: it "
        "cannot fail over there.", "short"), w=8, h=8)
    grid.add(ui.table(
        "Top $k partitions by checkpoint lag", q.top_partitions_checkpoint_lag(),
        "Per group and partition: records a failover would re-read.", ui.RECORDS), w=12, h=9)
    grid.add(ui.table(
        "Top $k oldest partition checkpoints", q.top_partitions_checkpoint_age(),
        "Per group and partition: age of the newest checkpoint. MM2 writes a checkpoint only when it "
        "moves, so an old one is only a problem when the lag beside it is not 0.", ui.SECONDS), w=12, h=9)

    grid.row("Audit: is the mirror whole?")
    grid.add(ui.timeseries(
        "Audit findings", q.audit_findings(),
        "Source records found missing on the target, present but altered or out of order, and written "
        "twice, per second (docs/audit.md). A whole mirror shows none; duplicates are expected after a "
        "restart of an at-least-once flow.", "short", legend_calcs=["lastNotNull", "max"]), w=10, h=8)
    grid.add(ui.timeseries(
        "Records verified", q.audit_verified_rate(),
        "Records compared byte for byte on both sides, per second.", "short",
        legend_calcs=["lastNotNull", "mean"]), w=7, h=8)
    grid.add(ui.timeseries(
        "Audit coverage", q.audit_coverage(),
        "Share of the last hour's replicated records the audit checked: loss (accounted for by "
        "offset-syncs and source reads) and content (compared record by record).", "percentunit",
        legend_calcs=["lastNotNull", "min"]), w=7, h=8)

    grid.row("Replicator")
    grid.add(ui.timeseries(
        "Replicator up", q.replicator_up_over_time(),
        "1 while heartbeats (or offset-sync progress) arrive on the target.", "short"), w=8, h=8)
    grid.add(ui.timeseries(
        "Batch cadence: offset-sync age", q.offset_sync_age(),
        "Seconds since the flow's newest offset-sync, as the monitor reads it from the cluster: the "
        "replicator writes the pending offset-sync at the end of every batch that copied records.",
        ui.SECONDS, legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Replicator batch duration", q.replicator_batch_duration(),
        "From the replicator's own /metrics: micro-batch duration (write every record, wait for the "
        "acks, write the offset-syncs) and seconds since the newest batch.",
        ui.SECONDS, legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Replicator throughput", q.replicator_throughput(),
        "Records the replicator wrote per second (its own count, replays included), and source records "
        "it found deleted before it could copy them.", ui.RECORDS_PER_SECOND), w=8, h=8)
    grid.add(ui.timeseries(
        "Replicator bytes written", q.replicator_bytes(),
        "Key and value bytes the replicator wrote to the target per second.", "Bps"), w=8, h=8)
    grid.add(ui.timeseries(
        "Newest batch latency", q.replicator_batch_latency(),
        "Largest target-ack minus source-timestamp in the newest non-empty batch.", ui.SECONDS,
        legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Catch-up backlog", q.replicator_backlog(),
        "From the replicator's own /metrics: records on the source beyond the flow's newest committed "
        "batch.", ui.RECORDS, legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Time to catch up", q.replicator_catchup_eta(),
        "The backlog divided by how fast the copy gains on the source; a gap while it does not gain.",
        ui.SECONDS, legend_calcs=["lastNotNull", "max"]), w=8, h=8)
    grid.add(ui.timeseries(
        "Partitions read", q.replicator_partitions(),
        "Source partitions the flow's streaming query reads.", "short"), w=8, h=8)
    grid.add(ui.timeseries(
        "Batches and internal records written", q.replicator_writes(),
        "Micro-batches, offset-syncs and heartbeats the replicator wrote per second.", "short"), w=8, h=8)
    grid.add(ui.timeseries(
        "Heartbeats and offset-syncs", q.replicator_activity(),
        "Internal records the monitor reads per second: heartbeats should arrive at the emit interval.",
        "short"), w=8, h=8)

    grid.row("Monitor and clusters")
    grid.add(ui.timeseries(
        "Cluster request errors", q.cluster_errors(),
        "Failed or timed-out requests of the monitor per cluster, per second.", "short"), w=6, h=8)
    grid.add(ui.timeseries(
        "Undecodable internal records", q.decode_errors(),
        "Records on heartbeats, checkpoints or offset-syncs topics that did not decode, per second.",
        "short"), w=6, h=8)
    grid.add(ui.timeseries(
        "Collector and evaluation duration", q.collector_durations(),
        "Duration of each collector's last refresh and of the last evaluation.", ui.SECONDS), w=6, h=8)
    grid.add(ui.timeseries(
        "Lag probes", q.lag_probes(),
        "Source records read per second to timestamp the oldest unreplicated record (the cost of "
        "seconds lag).", "short"), w=6, h=8)

    links = [g.DashboardLink(title="Overview", type="link", uri=f"/d/{overview_uid}", includeVars=True,
                             keepTime=True, icon="dashboard")]
    templates = [
        ui.datasource_variable(), ui.query_variable("flow", "Flow"), ui.query_variable("topic", "Topic"),
        ui.query_variable("group", "Group"), ui.topk_variable(),
    ]
    return ui.dashboard(UID, TITLE, "Where the replication lag is, consumer-group failover readiness, "
                        "replicator and monitor internals.", grid, templates, links)
