"""Every metric sparkmirror exports, the monitor's and the replicator's, defined once.

This module is the single list the exporters (Prometheus ``/metrics`` and
OpenTelemetry), the dashboards in ``dashboards/``, the alert rules in
``alerts/`` and the docs build on. It only declares: importing it creates no
collector, registers nothing and opens no socket, so a dashboard generator can
``from sparkmirror.metrics import FLOW_LAG_SECONDS`` and use ``.name``.

Conventions (Prometheus naming best practice):

- one prefix, ``sparkmirror_``;
- base units in the name: ``_seconds`` (never ms), ``_records`` for counts of
  Kafka records; timestamps are ``_timestamp_seconds`` since the epoch;
- counters end in ``_total`` (``name`` is the exposed name, suffix included);
- labels are few and bounded. ``flow`` is ``"A->B"`` as written in
  mm2.properties; ``topic`` is always the *source* (upstream) topic name;
  ``partition`` is the partition number as a string.

Granularity. Lag and status exist at three levels with their own names, so a
query means the same whatever the monitor's ``--granularity`` is: ``flow``
metrics are always exported, ``topic`` metrics unless the granularity is
``flow``, ``partition`` metrics (and per-partition checkpoint metrics) only with
``--granularity partition``. Aggregation rules: records lag sums, seconds lag
takes the maximum, status takes the worst.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "sparkmirror_"

#: Status values, best first. Their index is the numeric code used by
#: ``sparkmirror_partition_status_code``; docs/monitor-status.md has the rules. PAUSED (paused
#: on purpose through the replicator's control API) ranks below STALL and STOP: one flow paused
#: on purpose must not hide another that stopped by itself, and ERR (data lost) beats it.
STATUSES: tuple[str, ...] = ("OK", "WARN", "PAUSED", "STALL", "STOP", "ERR")
STATUS_CODES: dict[str, int] = {s: i for i, s in enumerate(STATUSES)}

#: Why a consumer group cannot fail over now (the ``reason`` label of
#: ``sparkmirror_failover_blocked``); docs/monitor-status.md explains each.
FAILOVER_REASONS: tuple[str, ...] = (
    "no-checkpoint",        # a committed partition has no checkpoint on the target yet
    "behind-offset-syncs",  # ... and its committed offset is older than every offset-sync: none will come
    "would-skip",           # the checkpoint is ahead of the committed offset: unconsumed records would be skipped
    "past-target-end",      # the checkpoint points past the end of the mirror partition
    "reread-records",       # more records to re-read than --failover-max-reread-records
    "reread-seconds",       # re-read records span more than --failover-max-reread-seconds
)

#: Granularity levels, coarsest first (``--granularity``).
GRANULARITIES: tuple[str, ...] = ("flow", "topic", "partition")

#: Which per-partition series the monitor exports at ``--granularity partition`` (``--series``):
#: every partition (and group x partition), none (topic-level only, as ``--granularity topic``),
#: or only partitions not OK and group partitions whose checkpoint is not current. The budget at
#: 10k partitions x 20 groups is in docs/alerts.md (``python -m monitor.cardinality``).
SERIES_MODES: tuple[str, ...] = ("all", "topic", "not-ok")

#: Heartbeat latency buckets (seconds): replication of a heartbeat takes from a
#: few ms on an idle pair to minutes when the replicator is far behind.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)

_UCUM = {"seconds": "s", "records": "{record}", "records_per_second": "{record}/s", "bytes": "By", "": "1"}


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric: its exposed name, type, unit, labels and help text.

    ``level`` says which granularity must be enabled for it to be exported:
    ``monitor``/``cluster``/``flow``/``group`` always, ``topic`` unless the
    granularity is ``flow``, ``partition`` only at ``partition``.
    """

    name: str
    kind: str  # "gauge" | "counter" | "histogram"
    unit: str  # "seconds" | "records" | "records_per_second" | "bytes" | "" (dimensionless)
    labels: tuple[str, ...]
    help: str
    level: str = "flow"
    buckets: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not self.name.startswith(PREFIX):
            raise ValueError(f"{self.name}: metric names start with {PREFIX}")
        if self.kind not in ("gauge", "counter", "histogram"):
            raise ValueError(f"{self.name}: unknown kind {self.kind}")
        if (self.kind == "counter") != self.name.endswith("_total"):
            raise ValueError(f"{self.name}: counters, and only counters, end in _total")
        if self.unit and self.unit not in self.name:
            raise ValueError(f"{self.name}: the unit {self.unit} belongs in the name")

    @property
    def base_name(self) -> str:
        """The name without ``_total``: what prometheus-client and OTel instruments take."""
        return self.name[: -len("_total")] if self.kind == "counter" else self.name

    @property
    def otel_unit(self) -> str:
        return _UCUM[self.unit]


def _m(name: str, kind: str, unit: str, labels: tuple[str, ...], help: str, level: str = "flow",
       buckets: tuple[float, ...] | None = None) -> MetricSpec:
    return MetricSpec(PREFIX + name, kind, unit, labels, help, level, buckets)


F = ("flow",)
FT = ("flow", "topic")
FTP = ("flow", "topic", "partition")
FG = ("flow", "group")
FGTP = ("flow", "group", "topic", "partition")

# --- clusters ---------------------------------------------------------------
CLUSTER_UP = _m(
    "cluster_up", "gauge", "", ("cluster",),
    "1 if the monitor's last request to the cluster succeeded, 0 if it failed or timed out.",
    level="cluster")
CLUSTER_ERRORS = _m(
    "cluster_errors_total", "counter", "", ("cluster",),
    "Requests of the monitor to the cluster that failed or timed out.", level="cluster")

# --- flows: status, liveness, heartbeats -------------------------------------
FLOW_STATUS = _m(
    "flow_status", "gauge", "", ("flow", "status"),
    "1 for the flow's current status (OK, WARN, PAUSED, STALL, STOP, ERR), 0 for the others; "
    "rules in docs/monitor-status.md.")
FLOW_PARTITIONS = _m(
    "flow_partitions", "gauge", "", ("flow", "status"),
    "Replicated partitions of the flow in each status.")
REPLICATOR_UP = _m(
    "replicator_up", "gauge", "", F,
    "1 if the flow's replicator shows signs of life: a heartbeat arrived on the target within the "
    "heartbeat timeout, or offset-sync progress (or nothing to copy) while heartbeats are not expected.")
HEARTBEAT_LATENCY = _m(
    "heartbeat_latency_seconds", "histogram", "seconds", F,
    "Time from a heartbeat's timestamp (written on the source) to its append on the target "
    "(LogAppendTime, else the moment the monitor, tailing the topic, received it).",
    buckets=LATENCY_BUCKETS)
#: Lag seconds up to an hour: the objectives' 30 s and the fixed alerts' thresholds fall on a bound.
LAG_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
FLOW_LAG_OBSERVED = _m(
    "flow_lag_observed_seconds", "histogram", "seconds", F,
    "Each evaluation's flow lag in seconds, where it was known on every partition (an evaluation with "
    "unknown lag is not observed: the recovery-point SLI counts it as bad). "
    "histogram_quantile over rate(..._bucket[1h]) gives a flow's lag percentiles, across monitors too.",
    buckets=LAG_BUCKETS)
FLOW_INFO = _m(
    "flow_info", "gauge", "", ("flow", "source", "target"),
    "Always 1; the flow's source and target cluster aliases. Alert rules join it to give flow alerts "
    "source and target labels, so an unreachable cluster inhibits the alerts of the flows through it.")
HEARTBEATS_EXPECTED = _m(
    "heartbeats_expected", "gauge", "", F,
    "1 if heartbeats are expected for the flow (emit.heartbeats.enabled, the default), 0 if they are "
    "switched off: heartbeat alerts apply only where this is 1.")
HEARTBEAT_TIMEOUT = _m(
    "heartbeat_timeout_seconds", "gauge", "seconds", F,
    "Seconds without a heartbeat arriving on the target after which the monitor calls the flow STOP "
    "(compare with sparkmirror_heartbeat_arrival_age_seconds): 2 x the flow's "
    "emit.heartbeats.interval.seconds but at least 10 s, or the monitor's --heartbeat-timeout.")
HEARTBEAT_SEEN = _m(
    "heartbeat_seen", "gauge", "", F,
    "1 once the monitor has read a heartbeat of the flow, 0 while it has seen none (then the heartbeat "
    "age counts from the monitor's start: the newest heartbeat, if any, is at least that old).")
HEARTBEAT_AGE = _m(
    "heartbeat_age_seconds", "gauge", "seconds", F,
    "Now minus the timestamp of the newest heartbeat seen in <source>.heartbeats on the target; while "
    "none was seen (sparkmirror_heartbeat_seen 0), seconds since the monitor started watching the flow.")
HEARTBEAT_ARRIVAL_AGE = _m(
    "heartbeat_arrival_age_seconds", "gauge", "seconds", F,
    "Now minus when a heartbeat last arrived in <source>.heartbeats on the target (its append time "
    "when known, else its own timestamp): the flow is STOP when this exceeds the heartbeat timeout. "
    "Unlike the age it does not include the replication latency.")
HEARTBEAT_LAST_TIMESTAMP = _m(
    "heartbeat_last_timestamp_seconds", "gauge", "seconds", F,
    "Timestamp of the newest heartbeat seen on the target (epoch seconds).")
HEARTBEATS = _m(
    "heartbeats_total", "counter", "", F,
    "Heartbeats read from <source>.heartbeats on the target since the monitor started.")
OFFSET_SYNC_AGE = _m(
    "offset_sync_age_seconds", "gauge", "seconds", F,
    "Now minus the record timestamp of the newest offset-sync of the flow.")
OFFSET_SYNCS = _m(
    "offset_syncs_total", "counter", "", F,
    "Offset-sync records read for the flow since the monitor started.")

# --- lag ---------------------------------------------------------------------
FLOW_LAG_RECORDS = _m(
    "flow_lag_records", "gauge", "records", F,
    "Source records not yet on the target, summed over the flow's replicated partitions whose "
    "position is known: a lower bound while flow_lag_unknown_partitions is above 0.")
FLOW_LAG_SECONDS = _m(
    "flow_lag_seconds", "gauge", "seconds", F,
    "Age of the oldest source record not yet on the target, over the flow's partitions whose "
    "position is known (a lower bound while flow_lag_unknown_partitions is above 0); 0 when "
    "caught up.")
FLOW_LAG_UNKNOWN_PARTITIONS = _m(
    "flow_lag_unknown_partitions", "gauge", "", F,
    "Replicated partitions of the flow whose lag is unknown (no offset-sync yet for what their "
    "mirror holds, end offsets not read yet, offset-syncs off): not in flow_lag_records or "
    "flow_lag_seconds.")
FLOW_REPLICATED_RECORDS = _m(
    "flow_replicated_records_total", "counter", "records", F,
    "Source offsets the replicated position advanced by, as seen by the monitor (rate = "
    "replication throughput).")
FLOW_SOURCE_RECORDS = _m(
    "flow_source_records_total", "counter", "records", F,
    "Source offsets the end offsets of the replicated partitions advanced by, as seen by the "
    "monitor (rate = produce rate on the source).")
DATA_LOST_RECORDS = _m(
    "data_lost_records_total", "counter", "records", FT,
    "Source offsets deleted (retention, deleteRecords) before they were replicated: the log "
    "start offset moved past the replicated position.", level="topic")
TOPIC_LAG_RECORDS = _m(
    "topic_lag_records", "gauge", "records", FT,
    "Source records of the topic not yet on the target (sum over partitions); absent while any "
    "partition's position is unknown (the partition series say which), never a partial sum "
    "that could read 0.", level="topic")
TOPIC_LAG_SECONDS = _m(
    "topic_lag_seconds", "gauge", "seconds", FT,
    "Age of the topic's oldest source record not yet on the target (max over partitions); "
    "absent while any partition's is unknown.", level="topic")
PARTITION_LAG_RECORDS = _m(
    "partition_lag_records", "gauge", "records", FTP,
    "Source end offset minus the upstream position already on the target; never negative.",
    level="partition")
PARTITION_LAG_SECONDS = _m(
    "partition_lag_seconds", "gauge", "seconds", FTP,
    "Now minus the timestamp of the first source record not yet on the target; 0 when "
    "caught up.", level="partition")
PARTITION_STATUS_CODE = _m(
    "partition_status_code", "gauge", "", FTP,
    "Partition status as a number: 0 OK, 1 WARN, 2 PAUSED, 3 STALL, 4 STOP, 5 ERR.", level="partition")

# --- catch-up (monitor.catchup: rates over the trend window, --window samples at --interval) ---
FLOW_CATCHUP_RATE = _m(
    "flow_catchup_records_per_second", "gauge", "records_per_second", F,
    "Records per second the flow's backlog shrinks: the copy rate minus the rate the source adds "
    "records, over the partitions' sample window (--window refreshes at --interval); negative while "
    "the lag grows. Absent until two samples exist.")
FLOW_CATCHUP_ETA = _m(
    "flow_catchup_eta_seconds", "gauge", "seconds", F,
    "Time until the flow's slowest partition is caught up at its observed net rate: 0 when caught up, "
    "+Inf while some lagging partition does not gain on its source; absent while unknown.")
PARTITION_CATCHUP_RATE = _m(
    "partition_catchup_records_per_second", "gauge", "records_per_second", FTP,
    "Records per second the partition's backlog shrinks (copy rate minus source rate over the sample "
    "window); negative while its lag grows.", level="partition")
PARTITION_CATCHUP_ETA = _m(
    "partition_catchup_eta_seconds", "gauge", "seconds", FTP,
    "Time until the partition is caught up at its observed net rate (lag / net rate; lag / copy rate "
    "while the lag is less than the copy moves in one window): 0 when caught up, +Inf while not gaining.",
    level="partition")

# --- checkpoints -------------------------------------------------------------
CHECKPOINT_AGE = _m(
    "checkpoint_age_seconds", "gauge", "seconds", FGTP,
    "Now minus the record timestamp of the group's newest checkpoint for the partition. MM2 "
    "emits a checkpoint only when it moves, so age alone is not staleness: see the lag.",
    level="partition")
CHECKPOINT_LAG = _m(
    "checkpoint_lag_records", "gauge", "records", FGTP,
    "Records a consumer of the group failing over now would re-read: the group's committed "
    "source offset translated to the target minus the checkpointed target offset.",
    level="partition")
GROUP_CHECKPOINT_AGE = _m(
    "group_checkpoint_age_seconds", "gauge", "seconds", FG,
    "Oldest checkpoint age among the group's partitions where a newer checkpoint is due (the group "
    "moved past an offset-sync its newest checkpoint does not cover); 0 when none is due. MM2 writes "
    "a checkpoint only when the translation changes, so an idle group's old checkpoint is not due.",
    level="group")
GROUP_CHECKPOINT_STALE = _m(
    "group_checkpoint_stale_partitions", "gauge", "", FG,
    "Partitions whose due checkpoint has not come within the checkpoint timeout (the group moved past "
    "an offset-sync and no checkpoint followed): checkpoints stopped. The checkpoints-stale alert input.",
    level="group")
GROUP_CHECKPOINT_LAG = _m(
    "group_checkpoint_lag_records", "gauge", "records", FG,
    "Checkpoint lag summed over the group's partitions.", level="group")
GROUP_CHECKPOINT_MISSING = _m(
    "group_checkpoint_missing_partitions", "gauge", "", FG,
    "Partitions where the group has a committed source offset but no checkpoint on the target "
    "(the group cannot fail over there).", level="group")

# --- failover readiness (per consumer group) ------------------------------------
FAILOVER_READY = _m(
    "failover_ready", "gauge", "", FG,
    "1 if the group could fail over to the target now: every partition it commits has a checkpoint "
    "that skips nothing and exists on the target, and the re-read stays within the monitor's "
    "--failover-max-reread-* limits; else 0.", level="group")
FAILOVER_BLOCKED = _m(
    "failover_blocked", "gauge", "", ("flow", "group", "reason"),
    "1 for each reason the group cannot fail over now, 0 for the others (reasons in "
    "docs/monitor-status.md).", level="group")
FAILOVER_REREAD_RECORDS = _m(
    "failover_reread_records", "gauge", "records", FG,
    "Records the group would read again if it failed over now, over its partitions with a "
    "checkpoint (the committed offset translated to the target minus the checkpointed one).",
    level="group")
FAILOVER_REREAD_SECONDS = _m(
    "failover_reread_seconds", "gauge", "seconds", FG,
    "Time span of the records the group would read again (timestamp of its last consumed record "
    "minus that of the checkpointed one), largest over its partitions; absent when unknown.",
    level="group")
FAILOVER_SKIPPED_RECORDS = _m(
    "failover_skipped_records", "gauge", "records", FG,
    "Records the group has not consumed that a failover now would skip (its checkpoint is ahead of "
    "its committed offset): data the group would lose.", level="group")
FAILOVER_GROUPS_NOT_READY = _m(
    "failover_groups_not_ready", "gauge", "", F,
    "Consumer groups of the flow that cannot fail over now (sparkmirror_failover_ready == 0).")

# --- failback readiness (per consumer group on the target) -----------------------
FAILBACK_READY = _m(
    "failback_ready", "gauge", "", FG,
    "1 if the group, consuming the flow's mirror topics on the target, could fail back to the source "
    "now (`sparkmirror failback`): every partition it commits maps back through a surviving "
    "offset-sync to an offset the source still holds, skipping nothing; else 0.", level="group")

# --- audit of the copy's contents --------------------------------------------------
AUDIT_VERIFIED = _m(
    "audit_records_verified_total", "counter", "records", FT,
    "Records the audit compared on both sides (partition, order, key, value, headers, timestamp) "
    "and found identical.", level="audit")
AUDIT_MISSING = _m(
    "audit_records_missing_total", "counter", "records", FT,
    "Source records the audit found missing from the target (a source record where the offset-syncs "
    "say the target advanced less).", level="audit")
AUDIT_MISMATCHED = _m(
    "audit_records_mismatched_total", "counter", "records", FT,
    "Records present on the target but different from the source's, or out of order.", level="audit")
AUDIT_DUPLICATED = _m(
    "audit_records_duplicated_total", "counter", "records", FT,
    "Records written to the target more than once (an error on exactly-once flows, expected after a "
    "restart on at-least-once flows).", level="audit")
AUDIT_EXACTLY_ONCE = _m(
    "audit_exactly_once", "gauge", "", ("flow",),
    "1 when the audited flow writes its target exactly once (exactly.once.source.support = enabled): a "
    "record held twice is then an error that pages, not the replay of an at-least-once restart.",
    level="audit")
AUDIT_COVERAGE = _m(
    "audit_coverage_ratio", "gauge", "", ("flow", "kind"),
    "Share of the last hour's replicated records the audit checked: kind=\"loss\" (accounted for by "
    "offset-syncs and source reads) or kind=\"content\" (compared record by record).", level="audit")

# --- retention headroom ------------------------------------------------------
FLOW_RETENTION_HEADROOM = _m(
    "flow_retention_headroom_seconds", "gauge", "seconds", F,
    "Least time, over the flow's partitions, until the source's retention.ms may delete a record "
    "not yet on the target (oldest unreplicated record's timestamp + retention.ms - now; "
    "retention.ms when caught up); +Inf when nothing is deleted by age.")
FLOW_RETENTION_LOW = _m(
    "flow_retention_low_partitions", "gauge", "", F,
    "Partitions whose retention headroom is below the monitor's warning threshold "
    "(--retention-headroom-warn, or half the topic's retention.ms if smaller).")
TOPIC_RETENTION_HEADROOM = _m(
    "topic_retention_headroom_seconds", "gauge", "seconds", FT,
    "Least retention headroom over the topic's partitions; +Inf when unlimited.", level="topic")
PARTITION_RETENTION_HEADROOM = _m(
    "partition_retention_headroom_seconds", "gauge", "seconds", FTP,
    "Time until the source's retention.ms may delete the partition's oldest record not yet on the "
    "target; retention.ms when caught up, +Inf when unlimited.", level="partition")

# --- input quality and the monitor itself ------------------------------------
DECODE_ERRORS = _m(
    "decode_errors_total", "counter", "", ("cluster", "topic", "record_type"),
    "Records on heartbeats, checkpoints or offset-syncs topics that did not decode and were "
    "skipped.", level="cluster")
LAG_PROBES = _m(
    "lag_probes_total", "counter", "", F,
    "Source records read to timestamp the oldest unreplicated record (cost of seconds lag).")
COLLECTOR_DURATION = _m(
    "collector_duration_seconds", "gauge", "seconds", ("collector", "flow"),
    "Duration of the collector's last refresh.", level="monitor")
EVALUATION_DURATION = _m(
    "monitor_evaluation_duration_seconds", "gauge", "seconds", (),
    "Duration of the last status evaluation.", level="monitor")
LAST_EVALUATION = _m(
    "monitor_last_evaluation_timestamp_seconds", "gauge", "seconds", (),
    "When the last status evaluation finished (epoch seconds).", level="monitor")
MONITOR_INFO = _m(
    "monitor_info", "gauge", "", ("version", "granularity"),
    "Always 1; labels describe the running monitor.", level="monitor")

# --- the replicator's own figures (served by `sparkmirror replicate` on its driver,
# --metrics-listen, default 127.0.0.1:9465; not by the monitor) ---------------
BATCH_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
REPLICATOR_BATCHES = _m(
    "replicator_batches_total", "counter", "", F,
    "Micro-batches the flow's streaming query committed.", level="replicator")
REPLICATOR_RECORDS = _m(
    "replicator_records_total", "counter", "records", F,
    "Records the replicator wrote to the target (acknowledged), replays after a crash included.",
    level="replicator")
REPLICATOR_RECORDS_LOST = _m(
    "replicator_records_lost_total", "counter", "records", F,
    "Source records the replicator found deleted on the source (retention, delete-records) before it could "
    "copy them; each is also logged as DATA LOSS with topic, partition and offsets.",
    level="replicator")
REPLICATOR_BYTES = _m(
    "replicator_bytes_total", "counter", "bytes", F,
    "Key and value bytes the replicator wrote to the target.", level="replicator")
REPLICATOR_OFFSET_SYNCS = _m(
    "replicator_offset_syncs_total", "counter", "", F,
    "Offset-sync records the replicator wrote.", level="replicator")
REPLICATOR_HEARTBEATS_SENT = _m(
    "replicator_heartbeats_sent_total", "counter", "", F,
    "Heartbeats the replicator wrote (on the source cluster of the flow label: they are the heartbeats that "
    "flow carries to its target, the monitor's sparkmirror_heartbeats_total of the same flow).",
    level="replicator")
REPLICATOR_BATCH_DURATION = _m(
    "replicator_batch_duration_seconds", "histogram", "seconds", F,
    "Duration of a micro-batch on the driver: write every record, wait for the acks, write the "
    "offset-syncs.", level="replicator", buckets=BATCH_BUCKETS)
REPLICATOR_LATENCY_MAX = _m(
    "replicator_batch_latency_max_seconds", "gauge", "seconds", F,
    "Largest target-ack time minus source record timestamp in the newest non-empty batch.",
    level="replicator")
REPLICATOR_LAST_BATCH = _m(
    "replicator_last_batch_timestamp_seconds", "gauge", "seconds", F,
    "When the flow's newest batch finished (epoch seconds).", level="replicator")
REPLICATOR_PARTITIONS = _m(
    "replicator_partitions", "gauge", "", F,
    "Source partitions the flow's streaming query reads.", level="replicator")

REPLICATOR_FLOW_PAUSED = _m(
    "replicator_flow_paused", "gauge", "", F,
    "1 while the flow is paused on purpose (the control API's pause, kept across restarts): it copies "
    "nothing and its heartbeats stop reaching the target; 0 while it runs.", level="replicator")
REPLICATOR_FLOW_PAUSED_SINCE = _m(
    "replicator_flow_paused_since_timestamp_seconds", "gauge", "seconds", F,
    "When the paused flow was paused (epoch seconds, from its pause file: it survives restarts); absent "
    "while the flow runs.", level="replicator")

REPLICATOR_BACKLOG = _m(
    "replicator_backlog_records", "gauge", "records", F,
    "Records on the source (read_committed end offsets) beyond the flow's newest committed batch: what "
    "the replicator still has to copy, as the replicator sees it.", level="replicator")
REPLICATOR_CATCHUP_ETA = _m(
    "replicator_catchup_eta_seconds", "gauge", "seconds", F,
    "Time until the backlog is copied at the current copy rate, net of what the source adds meanwhile; "
    "0 when there is no backlog, +Inf while the copy does not gain on the source.", level="replicator")

#: Every metric, in exposition order.
ALL: tuple[MetricSpec, ...] = tuple(v for v in list(globals().values()) if isinstance(v, MetricSpec))
BY_NAME: dict[str, MetricSpec] = {m.name: m for m in ALL}


def enabled(spec: MetricSpec, granularity: str) -> bool:
    """Whether ``spec`` is exported at ``granularity`` (see the module docstring)."""
    if spec.level == "partition":
        return granularity == "partition"
    if spec.level == "topic":
        return granularity != "flow"
    return True


def markdown_table() -> str:
    """The metric table of docs/monitor-status.md (``python -m sparkmirror.metrics`` prints it)."""
    rows = ["| name | type | labels | level | help |", "| --- | --- | --- | --- | --- |"]
    for spec in ALL:
        labels = ", ".join(f"`{label}`" for label in spec.labels) or "-"
        rows.append(f"| `{spec.name}` | {spec.kind} | {labels} | {spec.level} | {spec.help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
