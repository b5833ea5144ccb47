"""What an evaluation returns: the results per partition, topic, group and flow.

The exporters (Prometheus, OTel, /api/status, the status page) read only these; the
evaluator (monitor.evaluator) builds them from a MonitorState.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitor import catchup
from monitor import readiness
from sparkmirror.metrics import STATUS_CODES, STATUSES

OK, WARN, PAUSED, STALL, STOP, ERR = STATUSES


def worst(statuses) -> str:
    return max(statuses, key=STATUS_CODES.__getitem__, default=OK)


@dataclass
class PartitionResult:
    topic: str
    partition: int
    target_topic: str
    status: str
    reasons: list[str]
    source_start: int | None
    source_end: int | None
    target_end: int | None
    position: int | None
    position_basis: str
    lag_records: int | None
    lag_seconds: float | None
    oldest_unreplicated_timestamp_ms: int | None
    lost_records: int
    read_at: float | None
    retention_headroom_seconds: float | None = None  # None: unknown or unlimited
    retention_unlimited: bool = False
    open_transaction: bool = False  # everything committed is copied; an open transaction holds the rest
    # catch-up over the sample window (monitor.catchup): rates in records/s, ETA None when unknown
    # or not catching up
    catchup_state: str = catchup.UNKNOWN
    copy_rate: float | None = None
    source_rate: float | None = None
    catchup_eta_seconds: float | None = None


@dataclass
class TopicResult:
    topic: str
    target_topic: str
    status: str
    partitions: int
    lag_records: int | None
    lag_seconds: float | None
    lost_total: int
    retention_headroom_seconds: float | None = None
    retention_unlimited: bool = False


@dataclass
class GroupPartitionResult:
    topic: str
    target_topic: str
    partition: int
    state: str  # ok | stale | missing | pending | no-commit
    committed: int | None
    checkpoint_upstream: int | None
    checkpoint_downstream: int | None
    translated: int | None
    lag_records: int | None
    age_seconds: float | None
    due_seconds: float | None = None  # how long a newer checkpoint has been due; None: none is due


@dataclass
class GroupResult:
    group: str
    status: str
    reasons: list[str]
    lag_records: int
    age_seconds: float
    missing: int
    partitions: list[GroupPartitionResult]
    failover: readiness.GroupFailover | None = None  # None: no committed offset to fail over
    stale: int = 0             # partitions whose due checkpoint is later than the timeout
    due_seconds: float = 0.0   # longest time a newer checkpoint has been due (0: none is due)


@dataclass
class HeartbeatResult:
    topic: str
    expected: bool
    timeout_seconds: float
    age_seconds: float | None
    last_timestamp_ms: int | None
    received_total: int
    bucket_counts: list[int]
    latency_sum: float
    latency_count: int
    last_latency_seconds: float | None
    stopped: bool
    arrival_age_seconds: float | None = None  # since a heartbeat last arrived on the target


@dataclass
class FlowResult:
    name: str
    source: str
    target: str
    status: str
    reasons: list[str]
    replicator_up: bool
    heartbeat: HeartbeatResult
    offset_sync_age_seconds: float | None
    offset_syncs_total: int
    lag_records: int | None
    lag_seconds: float | None
    replicated_total: int
    source_total: int
    probes_total: int
    lost_total: dict[str, int]
    partitions_by_status: dict[str, int]
    partitions: list[PartitionResult]
    topics: list[TopicResult]
    groups: list[GroupResult]
    collector_seconds: dict[str, float]
    retention_headroom_seconds: float | None = None
    retention_unlimited: bool = False
    retention_low_partitions: int = 0
    failover_groups_not_ready: int = 0
    catchup_state: str = catchup.UNKNOWN   # of the slowest partition (monitor.catchup.combine)
    copy_rate: float | None = None         # records/s, summed over the partitions
    source_rate: float | None = None
    catchup_eta_seconds: float | None = None
    # per collector, (rounds, p50 s, worst s) over the last minute (MonitorState.recent_rounds)
    collector_last_minute: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    # partitions whose records lag is unknown (no offset-sync for what the mirror holds yet, ...):
    # lag_records and lag_seconds are over the others only, a lower bound while this is not 0
    lag_unknown_partitions: int = 0
    # paused on purpose, as the replicator's control API said it (who, when); None: not known to be
    paused: dict | None = None
    # per group committing on the flow's mirror partitions of the target: could it fail back now
    failback: list = field(default_factory=list)  # of monitor.failback.GroupFailback

    @property
    def catchup_rate(self) -> float | None:
        """Records/s the flow's backlog shrinks (negative: grows); None when unknown."""
        return None if self.copy_rate is None or self.source_rate is None else self.copy_rate - self.source_rate


@dataclass
class ClusterResult:
    alias: str
    up: bool | None
    error: str | None
    last_ok_at: float | None
    errors_total: int


@dataclass
class Evaluation:
    generated_at: float
    started_at: float
    status: str
    flows: list[FlowResult]
    clusters: list[ClusterResult]
    decode_errors: dict[tuple[str, str, str], int]
    granularity: str = "partition"
    duration_seconds: float = 0.0
    series: str = "all"
    extra: dict = field(default_factory=dict)
