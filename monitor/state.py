"""What the collectors have seen: the monitor's storage stage (Burrow's ``storage/``).

Collectors write here, the evaluator reads. All writes happen on the event-loop
thread (threads hand their results over with ``loop.call_soon_threadsafe``), so
nothing here needs a lock, except the heartbeat latency samples kept for the
OpenTelemetry histogram (``LatencySamples``), which its reader's thread takes.
The state keeps raw facts (monitor.facts), bounded windows of the past such as the
per-partition sample windows for trend rules (monitor.windows), and the monotonic
counters (heartbeats, syncs, data lost, replicated records) that must survive from
one evaluation to the next. ``MonitorState`` is where every write goes.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter, deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace

from monitor.facts import (DOWN_AFTER_FAILURES, DOWN_AFTER_SECONDS, CheckpointRecord, ClusterHealth, FlowState,
                           PartitionState, Probe, TopicPartition, TopicRetention)
from monitor.lag import UNKNOWN_NO_SYNC, lost_range, records_lag, replicated_position
from monitor.pacing import Pacer, finish
from monitor.watch import WatchedFlow
from monitor.windows import (AT, GROUP_HISTORY, POSITION, RECENT_SYNCS, ROUNDS_KEPT, SOURCE_END, LatencySamples,
                             add_recent_sync, add_silence, round_figures, sample_of)
from sparkmirror import metrics
from sparkmirror.model.offsets import OffsetSyncStore
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync


def _never() -> bool:
    return False


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
            add_silence(hb.silences, at, silence)
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
        add_recent_sync(recent, sync.upstream_offset, sync.downstream_offset, timestamp_ms / 1000.0)
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
        monitor runs it on its event loop with ``run_in_steps``: each refresh, several a second,
        touches every watched partition). Each partition is recorded whole; an evaluation
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
                    _sample(state, key, window, sample_of(at, part.position.offset, part.source_start,
                                                          part.source_end))
        seen = set(keep)
        seen.update(unchanged)
        for row in rows:
            if due():
                yield
            key = (row.topic, row.partition)
            seen.add(key)
            part = parts.get(key)
            if part is None:
                part = parts[key] = PartitionState(row.topic, row.partition, row.target_topic,
                                                   window=deque(maxlen=state.window))
                state.partitions_changed += 1
            elif (part.read_at is not None and part.source_end == row.source_end and part.target_end == row.target_end
                  and part.sync == row.sync and part.source_start == row.source_start
                  and part.source_high_watermark == row.source_high_watermark):
                # Nothing moved (most partitions, most of the time): only the time of the read changes.
                part.read_at = at
                window = part.window
                if window and at - window[-1][AT] >= self.sample_every:
                    _sample(state, key, window, sample_of(at, part.position.offset, part.source_start,
                                                          part.source_end))
                continue
            self._record_row(state, part, row, at)
        for key in [k for k in state.partitions if k not in seen]:
            del state.partitions[key]
            state.partitions_changed += 1
        state.partitions_read_at = at

    def _record_row(self, state: FlowState, part: PartitionState, row: OffsetsRow, at: float) -> None:
        """A read that changed the partition's figures: its position, the flow's counters of records
        replicated, written and lost, its probe when that says something new, and a sample."""
        state.touched.add(part.topic)
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
        if position.basis != UNKNOWN_NO_SYNC:
            part.no_sync_since = None
        elif part.position.basis != UNKNOWN_NO_SYNC or part.no_sync_since is None:
            part.no_sync_since = at
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

    def record_probe(self, flow: str, key: TopicPartition, probe: Probe) -> None:
        state = self.flows[flow]
        state.probes_total += 1
        part = state.partitions.get(key)
        if part is None or part.position.offset is None or probe.position > part.position.offset:
            return  # gone, or the position went back (topic re-created): the probe is of another log
        if part.probe is None or probe.read_at >= part.probe.read_at:
            part.probe = probe
            state.touched.add(key[0])

    def set_retention(self, flow: str, retention: dict[str, TopicRetention]) -> None:
        self.flows[flow].retention = retention

    def set_record_timestamps(self, flow: str, found: dict[tuple[str, int, int], int | None],
                              keep: set[tuple[str, int, int]]) -> None:
        """Add ``found``; drop what is neither in ``found`` nor in ``keep`` (no longer needed)."""
        stamps = self.flows[flow].record_timestamps
        for key in [k for k in stamps if k not in keep and k not in found]:
            del stamps[key]
        stamps.update(found)

    def set_target_group_offsets(self, flow: str, offsets: dict[str, dict[TopicPartition, int]]) -> None:
        """Groups' committed offsets on the flow's mirror partitions of the target (monitor.failback)."""
        self.flows[flow].target_group_offsets = offsets

    def set_replicator_flows(self, flows: list[dict], at: float | None) -> None:
        """What a replicator's ``GET /api/flows`` listed, read at ``at``; flows it does not run keep
        what they had (another replicator, or Apache MM2, runs them)."""
        for entry in flows:
            fs = self.flows.get(entry.get("flow"))
            if fs is not None:
                paused = entry.get("paused") if entry.get("state") == "paused" else None
                fs.replicator_paused = dict(paused if isinstance(paused, dict) else {}) \
                    if entry.get("state") == "paused" else None
                fs.replicator_read_at = at

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
            figures = round_figures(rounds, since)
            if figures is not None:
                out[collector] = figures
        return out


def _sample(state: FlowState, key: TopicPartition, window, sample) -> None:
    """Appends a sample of a partition read again with the same figures; the topic is touched
    when that changes what its results depend on (``evaluator.partitions.idle_signature``: the
    window's ends, and whether it spans time), e.g. a position recorded between two samples."""
    first, last, spans = window[0], window[-1], len(window) >= 2
    window.append(sample)
    new_first = window[0]
    if not spans or sample[POSITION] != last[POSITION] or sample[SOURCE_END] != last[SOURCE_END] \
            or new_first[POSITION] != first[POSITION] or new_first[SOURCE_END] != first[SOURCE_END]:
        state.touched.add(key[0])
