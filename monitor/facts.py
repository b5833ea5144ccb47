"""The raw facts the monitor's state holds, per cluster, flow and partition.

Collectors record them through ``monitor.state.MonitorState``; the evaluator reads them.
The windows of the past that some of them keep are in monitor.windows.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from monitor.lag import Position
from monitor.watch import WatchedFlow
from monitor.windows import Sample
from sparkmirror import metrics
from sparkmirror.model.offsets import OffsetSyncStore
from sparkmirror.model.records import Checkpoint

TopicPartition = tuple[str, int]


@dataclass
class ClusterHealth:
    """Reachability of one cluster, from the outcome of every request the monitor makes."""

    alias: str
    up: bool | None = None  # None: not asked yet
    error: str | None = None
    last_ok_at: float | None = None
    last_error_at: float | None = None
    errors_total: int = 0
    failures: int = 0  # consecutive failed requests since the last one that succeeded
    failing_since: float | None = None  # when the first of those failed


#: A cluster that answered is reported down only once this many requests in a row failed over at
#: least ``DOWN_AFTER_SECONDS``: one slow broker failing one of several concurrent requests, or
#: one refresh timing out, must not flip ``sparkmirror_cluster_up`` (and page) and flip it back
#: on the next refresh. A cluster never reached yet is down at its first failure.
DOWN_AFTER_FAILURES = 3
DOWN_AFTER_SECONDS = 15.0


@dataclass(frozen=True)
class Probe:
    """The first source record at or after ``position`` (seconds lag), read at ``read_at``.

    ``offset``/``timestamp_ms`` are None when the source had no record there
    (the partition ended first: only markers or nothing past the position).
    A read of the end offsets that finds a partition caught up stores one of
    those too: it is the last moment the partition was known to lack nothing.
    A probe stays until a newer one replaces it, so a partition whose position
    moved keeps its last-known seconds lag while the next probe is in flight.
    """

    position: int
    offset: int | None
    timestamp_ms: int | None
    source_end: int
    read_at: float
    # The probe found no record in [position, empty_to) and the log start was still at or below
    # the position afterwards: those offsets held only transaction markers (or compacted-away
    # records), never a record to copy. None when unknown.
    empty_to: int | None = None


@dataclass
class PartitionState:
    topic: str
    partition: int
    target_topic: str
    source_start: int | None = None
    source_end: int | None = None
    source_high_watermark: int | None = None  # source_end is the last stable offset
    target_end: int | None = None
    sync: tuple[int, int] | None = None   # the sync the position was computed from
    position: Position = Position(None, "no-offsets")
    read_at: float | None = None
    probe: Probe | None = None
    lost_through: int = -1                # data loss counted up to this offset (exclusive)
    no_sync_since: float | None = None    # when the mirror first held records that no offset-sync covers
    window: deque[Sample] = field(default_factory=deque)



@dataclass
class HeartbeatState:
    newest_ms: int | None = None
    received_total: int = 0
    last_received_at: float | None = None
    # When a heartbeat last arrived on the target: its append time when known (LogAppendTime,
    # or received live), else its own timestamp, the earliest it can have arrived.
    last_arrival_at: float | None = None
    topic_present: bool | None = None
    bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(metrics.LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0
    latency_count: int = 0
    last_latency: float | None = None
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)  # (source, target) -> newest ms
    # Arrivals that ended a silence, as (arrival, seconds of silence before it; the first counted
    # from the monitor's start), oldest first. Each silence is longer than every later one, so the
    # newest arrival after a silence longer than any timeout is the last such entry.
    silences: list[tuple[float, float]] = field(default_factory=list)

    def resumed_after(self, timeout: float) -> float | None:
        """When heartbeats last began to arrive again after a silence longer than ``timeout``."""
        for arrival, silence in reversed(self.silences):
            if silence > timeout:
                return arrival
        return None



@dataclass(frozen=True)
class TopicRetention:
    """A source topic's deletion settings, as DescribeConfigs reports them.

    ``retention_ms`` / ``retention_bytes`` are None when unlimited (-1); ``deletes``
    is False when ``cleanup.policy`` has no ``delete`` (compact only: nothing is
    deleted by age or size).
    """

    retention_ms: int | None
    retention_bytes: int | None
    deletes: bool


@dataclass(frozen=True)
class CheckpointRecord:
    checkpoint: Checkpoint
    timestamp_ms: int
    received_at: float = 0.0  # the monitor's clock when it read the checkpoint


@dataclass
class FlowState:
    watch: WatchedFlow
    started_at: float
    window: int = 10
    heartbeat: HeartbeatState = field(default_factory=HeartbeatState)
    syncs: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    sync_store: OffsetSyncStore = field(default_factory=OffsetSyncStore)
    newest_sync_ms: int | None = None
    syncs_total: int = 0
    syncs_topic_present: bool | None = None
    syncs_loaded: bool = False  # the offset-syncs topic was read to its end once (or does not exist)
    partitions: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    partitions_changed: int = 0  # counts partitions added to or dropped from ``partitions``
    # (partitions_changed, len(partitions), the keys in order) as the evaluator last sorted them
    partitions_order: tuple[int, int, list[TopicPartition]] | None = None
    partitions_read_at: float | None = None
    checkpoints: dict[tuple[str, str, int], CheckpointRecord] = field(default_factory=dict)
    checkpoints_topic_present: bool | None = None
    group_offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    group_first_seen: dict[str, float] = field(default_factory=dict)
    # Per (group, topic, partition): each committed offset seen, with when it was first seen.
    group_history: dict[tuple[str, str, int], deque[tuple[int, float]]] = field(default_factory=dict)
    # Per partition: the newest offset-syncs as (upstream, downstream, record time in seconds).
    recent_syncs: dict[TopicPartition, deque[tuple[int, int, float]]] = field(default_factory=dict)
    groups_read_at: float | None = None
    # Per group: its committed offsets on the flow's mirror partitions of the target, keyed by
    # (target topic, partition): what failing back would map (monitor.failback).
    target_group_offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    # When the read behind ``group_offsets`` began: a checkpoint read after it may carry a newer
    # committed offset than the one read (monitor.readiness).
    groups_read_started: float | None = None
    lost_total: Counter = field(default_factory=Counter)  # topic -> offsets lost
    retention: dict[str, TopicRetention] = field(default_factory=dict)  # source topic -> its settings
    # (topic, partition, offset) -> timestamp (ms) of the first source record at or after the
    # offset, None if there is none: the ends of the range a failover would re-read.
    record_timestamps: dict[tuple[str, int, int], int | None] = field(default_factory=dict)
    replicated_total: int = 0
    source_total: int = 0
    probes_total: int = 0
    collector_seconds: dict[str, float] = field(default_factory=dict)
    # per collector, its last ROUNDS_KEPT rounds as (time.monotonic() at the end, duration)
    collector_rounds: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    # The evaluator's memory of each topic's evaluation (monitor.evaluator.blocks), reused while
    # nothing in the topic moves, so an evaluation costs what changed; ``touched``: topics whose
    # partitions' figures changed since the evaluator last took them.
    topic_blocks: dict[str, object] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    # (the evaluator's sorted keys, [(topic, its keys)]) as it last grouped them
    topics_order: tuple | None = None
    idle_results_built: int = 0  # idle partitions' results built anew (monitor.gcpauses.GcSettler takes them)
    # What the replicator's control API (--replicator-url) last said of the flow: its pause (who,
    # when) or None while it runs, and when that was read (None: never; the flow is not its).
    replicator_paused: dict | None = None
    replicator_read_at: float | None = None
