"""What the collectors have seen: the monitor's storage stage (Burrow's ``storage/``).

Collectors write here, the evaluator reads. All writes happen on the event-loop
thread (threads hand their results over with ``loop.call_soon_threadsafe``), so
nothing here needs a lock, except the heartbeat latency samples kept for the
OpenTelemetry histogram (``LatencySamples``), which its reader's thread takes.
The state keeps raw facts, per-partition sample windows for trend rules, and the
monotonic counters (heartbeats, syncs, data lost, replicated records) that must
survive from one evaluation to the next.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace

from sparkmirror import metrics

#: rounds of each collector kept for the last minute's figures (the positions loop makes ~5 a second)
ROUNDS_KEPT = 600
from monitor.lag import Position, lost_range, records_lag, replicated_position
from monitor.pacing import Pacer, finish
from monitor.watch import WatchedFlow

#: Offset-syncs per partition and committed offsets per group partition kept with their times,
#: for telling when a checkpoint became due (see evaluator: checkpoints).
RECENT_SYNCS = 16
GROUP_HISTORY = 16
from sparkmirror.model.offsets import OffsetSyncStore
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync

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


#: One partition's figures at one read, kept in its sample window: ``(at, position, lag,
#: source_end)``, read with the indexes below. A plain tuple of numbers, which the garbage
#: collector stops tracking at the first collection it survives (a NamedTuple is a tuple
#: subclass, and those stay tracked): a monitor of 10,000 partitions keeps 100,000 samples,
#: and as tracked objects every full collection walked them all (7-23 ms with every thread
#: stopped, in the middle of an evaluation step).
Sample = tuple[float, int | None, int | None, int | None]
AT, POSITION, LAG, SOURCE_END = 0, 1, 2, 3


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
    window: deque[Sample] = field(default_factory=deque)


def _never() -> bool:
    return False


def _sample_of(part: PartitionState, at: float) -> Sample:
    """A trend sample of the partition's figures as they are now (the newest read's): reads come
    more often than samples, so a read that moved them may have come since the previous sample."""
    position = part.position.offset
    return at, position, records_lag(position, part.source_start, part.source_end), part.source_end


class LatencySamples:
    """Heartbeat latency samples, (flow, seconds), from one ``take()`` to the next: at most ``limit``.

    A histogram that records each sample (OpenTelemetry's) cannot be rebuilt from the
    cumulative bucket counts the Prometheus exporter reads, so its exporter takes the
    samples themselves: each once, whatever thread it reads from. Samples that arrive
    while ``limit`` of them wait are dropped and counted, and ``take()`` says how many.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._samples: list[tuple[str, float]] = []
        self._dropped = 0
        self.dropped_total = 0
        self._lock = threading.Lock()

    def add(self, flow: str, seconds: float) -> None:
        with self._lock:
            if len(self._samples) < self.limit:
                self._samples.append((flow, seconds))
            else:
                self._dropped += 1
                self.dropped_total += 1

    def take(self) -> tuple[list[tuple[str, float]], int]:
        """The samples since the last take, and how many were dropped since then."""
        with self._lock:
            taken, dropped = self._samples, self._dropped
            self._samples, self._dropped = [], 0
        return taken, dropped


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


#: ``HeartbeatState.silences`` kept: the oldest (the longest) go first when there are more.
SILENCES_KEPT = 64


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
    # The evaluator's memory of caught-up idle partitions' results (monitor.evaluator._idle_signature):
    # reused while their figures do not move, so an evaluation costs what changed.
    idle_results: dict[TopicPartition, tuple] = field(default_factory=dict)
    idle_results_built: int = 0  # entries of idle_results built anew (monitor.gcpauses.GcSettler takes them)


@dataclass(frozen=True)
class OffsetsRow:
    """End offsets of one replicated partition, read by the offsets collector.

    ``sync`` is the newest offset-sync as it was *before* the target end offset
    was read, and the target is read before the source, so the computed
    position is never ahead of the source end it is compared with.
    """

    topic: str
    partition: int
    target_topic: str
    source_start: int | None
    source_end: int | None
    target_end: int | None
    sync: tuple[int, int] | None
    # The high watermark, when read: above the last stable offset (source_end) while a
    # transaction is open there (read on the slower metadata cadence).
    source_high_watermark: int | None = None


class MonitorState:
    """Everything collected so far, for every cluster and flow."""

    def __init__(self, flows: list[WatchedFlow], clusters: list[str], *, window: int = 10,
                 sample_every: float = 0.0, clock: Callable[[], float] = time.time,
                 latency_samples: int = 0) -> None:
        self.clock = clock
        # Positions are read several times a second; the trend rules (STALL, growing lag) count
        # samples of a partition, taken at most once per ``sample_every`` (the status interval).
        self.sample_every = sample_every
        self.started_at = clock()
        self.clusters = {alias: ClusterHealth(alias) for alias in clusters}
        self.flows = {f.name: FlowState(f, self.started_at, window=window) for f in flows}
        for fs in self.flows.values():
            # As the replicator's own store: interpolating between syncs assumes a target without
            # gaps, which transactions break (sparkmirror.model.offsets.OffsetSyncStore).
            fs.sync_store = OffsetSyncStore(fs.watch.offset_lag_max, interpolate=not fs.watch.target_has_gaps)
        self.decode_errors: Counter = Counter()  # (cluster, topic, record_type) -> count
        # Every heartbeat latency sample, until a reader takes them (the OTel exporter, when it
        # exports: see LatencySamples); None when nothing reads them, so none are kept.
        self.latency_samples = LatencySamples(latency_samples) if latency_samples > 0 else None

    # --- clusters -------------------------------------------------------------
    def cluster_ok(self, alias: str) -> None:
        health = self.clusters[alias]
        health.up, health.error, health.last_ok_at = True, None, self.clock()
        health.failures, health.failing_since = 0, None

    def cluster_failed(self, alias: str, error: str, sent_at: float | None = None) -> bool:
        """Count a failed request; True if it made the cluster down (see ``DOWN_AFTER_FAILURES``).

        ``sent_at``: when the failed request was sent. A request that waited its whole timeout
        for a broker that is gone says the cluster has been failing since it was sent, not since
        the answer came: counting from the answer added one request timeout to every outage
        before the cluster was called down. Never earlier than the last success, though: a slow
        request sent before the cluster answered again says nothing about the time after.
        """
        health = self.clusters[alias]
        now = self.clock()
        health.error, health.last_error_at = error, now
        health.errors_total += 1
        health.failures += 1
        since = now if sent_at is None else min(sent_at, now)
        if health.last_ok_at is not None:
            since = max(since, health.last_ok_at)
        if health.failing_since is None or since < health.failing_since:
            health.failing_since = since
        if health.up is False:
            return False
        if health.up is None or (health.failures >= DOWN_AFTER_FAILURES
                                 and now - health.failing_since >= DOWN_AFTER_SECONDS):
            health.up = False
            return True
        return False

    def decode_error(self, cluster: str, topic: str, record_type: str) -> bool:
        """Count one undecodable record; True if it is the first for this topic (log it)."""
        key = (cluster, topic, record_type)
        self.decode_errors[key] += 1
        return self.decode_errors[key] == 1

    # --- heartbeats -------------------------------------------------------------
    def add_heartbeat(self, flow: str, heartbeat: Heartbeat, append_time: float | None) -> None:
        """A heartbeat read from <A>.heartbeats; ``append_time`` when it is known (else no latency sample)."""
        hb = self.flows[flow].heartbeat
        hb.received_total += 1
        hb.last_received_at = self.clock()
        hb.topic_present = True
        if hb.newest_ms is None or heartbeat.timestamp_ms > hb.newest_ms:
            hb.newest_ms = heartbeat.timestamp_ms
        pair = (heartbeat.source, heartbeat.target)
        hb.pairs[pair] = max(hb.pairs.get(pair, heartbeat.timestamp_ms), heartbeat.timestamp_ms)
        arrival = append_time if append_time is not None else heartbeat.timestamp_ms / 1000.0
        # A heartbeat that arrived before the monitor started counts as arrived at its start (as
        # for the STOP rule), so the first silence is counted from the start.
        previous = max(hb.last_arrival_at or self.started_at, self.started_at)
        at = max(arrival, self.started_at)
        if at > previous:
            silence = at - previous
            while hb.silences and hb.silences[-1][1] <= silence:
                hb.silences.pop()
            hb.silences.append((at, silence))
            del hb.silences[:-SILENCES_KEPT]
        hb.last_arrival_at = arrival if hb.last_arrival_at is None else max(hb.last_arrival_at, arrival)
        if append_time is None:
            return
        latency = max(0.0, append_time - heartbeat.timestamp_ms / 1000.0)
        hb.bucket_counts[bisect.bisect_left(metrics.LATENCY_BUCKETS, latency)] += 1
        hb.latency_sum += latency
        hb.latency_count += 1
        hb.last_latency = latency
        if self.latency_samples is not None:
            self.latency_samples.add(flow, latency)

    # --- offset syncs and checkpoints -------------------------------------------
    def add_sync(self, flow: str, sync: OffsetSync, timestamp_ms: int) -> None:
        state = self.flows[flow]
        state.syncs[(sync.topic, sync.partition)] = (sync.upstream_offset, sync.downstream_offset)
        state.sync_store.add(sync)
        recent = state.recent_syncs.get((sync.topic, sync.partition))
        if recent is None:
            recent = state.recent_syncs[(sync.topic, sync.partition)] = deque(maxlen=RECENT_SYNCS)
        if recent and sync.downstream_offset <= recent[-1][1]:
            recent.clear()  # the target went backwards (re-created): the older syncs describe nothing now
        recent.append((sync.upstream_offset, sync.downstream_offset, timestamp_ms / 1000.0))
        state.syncs_total += 1
        state.syncs_topic_present = True
        if state.newest_sync_ms is None or timestamp_ms > state.newest_sync_ms:
            state.newest_sync_ms = timestamp_ms

    def add_checkpoint(self, flow: str, checkpoint: Checkpoint, timestamp_ms: int) -> None:
        state = self.flows[flow]
        state.checkpoints_topic_present = True
        key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
        state.checkpoints[key] = CheckpointRecord(checkpoint, timestamp_ms, self.clock())

    def set_group_offsets(self, flow: str, offsets: dict[str, dict[TopicPartition, int]],
                          read_started: float | None = None) -> None:
        """The committed offsets of the flow's groups, read from the source; ``read_started``: when
        the read began (default now)."""
        state = self.flows[flow]
        now = self.clock()
        state.group_offsets = offsets
        state.groups_read_at = now
        state.groups_read_started = now if read_started is None else read_started
        for group in offsets:
            state.group_first_seen.setdefault(group, now)
        for group in list(state.group_first_seen):
            if group not in offsets:
                del state.group_first_seen[group]
        seen = set()
        for group, parts in offsets.items():
            for (topic, partition), offset in parts.items():
                key = (group, topic, partition)
                seen.add(key)
                history = state.group_history.get(key)
                if history is None:
                    history = state.group_history[key] = deque(maxlen=GROUP_HISTORY)
                if not history or history[-1][0] != offset:
                    history.append((offset, now))
        for key in [k for k in state.group_history if k not in seen]:
            del state.group_history[key]

    # --- end offsets and positions ----------------------------------------------
    def record_offsets(self, flow: str, rows: list[OffsetsRow], at: float | None = None,
                       keep: set[TopicPartition] = frozenset(), unchanged: list[TopicPartition] = ()) -> None:
        """One refresh of the flow's watched partitions, in one go (see ``record_offsets_steps``)."""
        finish(self.record_offsets_steps(flow, rows, at, keep, unchanged))

    def record_offsets_steps(self, flow: str, rows: list[OffsetsRow], at: float | None = None,
                             keep: set[TopicPartition] = frozenset(), unchanged: list[TopicPartition] = (),
                             pacer: Pacer | None = None) -> Generator[None, None, None]:
        """One refresh of the flow's watched partitions, pausing whenever ``pacer`` says so (the
        monitor runs it on its event loop with ``run_in_steps``: at 10,000 partitions a refresh
        every 0.2 s touches every one of them). Each partition is recorded whole; an evaluation
        between two steps sees some partitions at this read and the others at the previous one.

        ``unchanged``: partitions read again with the same figures as last time (only their
        read time changes). Partitions in none of ``rows``, ``keep`` (watched but not read
        this time) and ``unchanged`` are no longer watched and are dropped.
        """
        state = self.flows[flow]
        at = self.clock() if at is None else at
        parts = state.partitions
        due = pacer.due if pacer is not None else _never
        for key in unchanged:
            if due():
                yield
            part = parts.get(key)
            if part is not None:
                part.read_at = at
                window = part.window
                if window and at - window[-1][AT] >= self.sample_every:
                    window.append(_sample_of(part, at))
        seen = set(keep)
        seen.update(unchanged)
        for row in rows:
            if due():
                yield
            key = (row.topic, row.partition)
            seen.add(key)
            part = state.partitions.get(key)
            if part is None:
                part = state.partitions[key] = PartitionState(row.topic, row.partition, row.target_topic,
                                                              window=deque(maxlen=state.window))
                state.partitions_changed += 1
            elif (part.read_at is not None and part.source_end == row.source_end and part.target_end == row.target_end
                  and part.sync == row.sync and part.source_start == row.source_start
                  and part.source_high_watermark == row.source_high_watermark):
                # Nothing moved (most partitions, most of the time): only the time of the read changes.
                part.read_at = at
                window = part.window
                if window and at - window[-1][AT] >= self.sample_every:
                    window.append(_sample_of(part, at))
                continue
            was_caught_up = records_lag(part.position.offset, part.source_start, part.source_end) == 0 \
                and part.probe is not None and part.probe.offset is None
            previous_read_at = part.read_at
            position = replicated_position(row.sync, row.target_end, row.source_start, row.source_end,
                                           syncs_enabled=state.watch.offset_syncs_enabled,
                                           target_has_gaps=state.watch.target_has_gaps)
            if part.read_at is not None:
                if row.source_end is not None and part.source_end is not None and row.source_end > part.source_end:
                    state.source_total += row.source_end - part.source_end
                old, new = part.position.offset, position.offset
                if old is not None and new is not None and new > old:
                    state.replicated_total += new - old
            empty_to = part.probe.empty_to if part.probe is not None and \
                part.probe.position == position.offset else None
            lost = lost_range(position.offset, row.source_start, empty_to)
            if lost is not None:
                start = max(lost[0], part.lost_through)
                if lost[1] > start:
                    state.lost_total[row.topic] += lost[1] - start
                part.lost_through = max(part.lost_through, lost[1])
            part.target_topic = row.target_topic
            part.source_start, part.source_end, part.target_end = row.source_start, row.source_end, row.target_end
            part.source_high_watermark = row.source_high_watermark
            part.sync, part.position, part.read_at = row.sync, position, at
            if row.source_end is not None:
                lag = records_lag(position.offset, row.source_start, row.source_end)
                if lag == 0:
                    # (keeping what a probe at this position found empty: see Probe.empty_to)
                    part.probe = Probe(position.offset, None, None, row.source_end, at, empty_to=empty_to)
                elif was_caught_up:
                    # Caught up until the previous read: what is missing now was written after it.
                    part.probe = replace(part.probe, read_at=previous_read_at)
                if not part.window or at - part.window[-1][AT] >= self.sample_every:
                    part.window.append((at, position.offset, lag, row.source_end))
        for key in [k for k in state.partitions if k not in seen]:
            del state.partitions[key]
            state.partitions_changed += 1
        state.partitions_read_at = at

    def record_probe(self, flow: str, key: TopicPartition, probe: Probe) -> None:
        state = self.flows[flow]
        state.probes_total += 1
        part = state.partitions.get(key)
        if part is None or part.position.offset is None or probe.position > part.position.offset:
            return  # gone, or the position went back (topic re-created): the probe is of another log
        if part.probe is None or probe.read_at >= part.probe.read_at:
            part.probe = probe

    def set_retention(self, flow: str, retention: dict[str, TopicRetention]) -> None:
        self.flows[flow].retention = retention

    def set_record_timestamps(self, flow: str, found: dict[tuple[str, int, int], int | None],
                              keep: set[tuple[str, int, int]]) -> None:
        """Add ``found``; drop what is neither in ``found`` nor in ``keep`` (no longer needed)."""
        stamps = self.flows[flow].record_timestamps
        for key in [k for k in stamps if k not in keep and k not in found]:
            del stamps[key]
        stamps.update(found)

    def record_duration(self, flow: str, collector: str, seconds: float, phase: bool = False) -> None:
        """A collector's round took ``seconds``; ``phase``: a part of a round (kept for the last
        minute's figures only, not as the collector's duration)."""
        fs = self.flows[flow]
        if not phase:
            fs.collector_seconds[collector] = seconds
        rounds = fs.collector_rounds.get(collector)
        if rounds is None:
            rounds = fs.collector_rounds[collector] = deque(maxlen=ROUNDS_KEPT)
        rounds.append((time.monotonic(), seconds))

    def recent_rounds(self, flow: str, seconds: float = 60.0) -> dict[str, tuple[int, float, float]]:
        """Per collector, (rounds, p50, worst) of its durations over the last ``seconds``."""
        since = time.monotonic() - seconds
        out = {}
        for collector, rounds in self.flows[flow].collector_rounds.items():
            recent = sorted(d for at, d in rounds if at >= since)
            if recent:
                out[collector] = (len(recent), recent[(len(recent) - 1) // 2], recent[-1])
        return out
