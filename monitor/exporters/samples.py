"""Evaluation -> metric samples: the one mapping both the Prometheus and the OTel exporter use.

``samples(evaluation)`` yields ``(spec, labels, value)`` for every gauge and
counter of sparkmirror.metrics that the granularity enables; histograms are
exported from ``histogram(flow)``. Unknown lag (a position that cannot be
computed) is left out rather than exported as 0 or NaN; heartbeats, which
the page rests on, are explicit from start-up instead: ``heartbeat_seen`` 0
says none was seen yet, and the age then counts from the monitor's start.
"""

from __future__ import annotations

from collections.abc import Iterator

from monitor import catchup
from monitor.audit import component as audit_component
from monitor.evaluator.results import Evaluation, FlowResult, GroupResult, PartitionResult, TopicResult
from monitor.readiness import Headroom
from sparkmirror import metrics as m

Sample = tuple[m.MetricSpec, tuple[str, ...], float]

#: Levels of the metrics the monitor serves; sparkmirror.metrics may also define metrics other
#: processes serve (e.g. the replicator's own), which the monitor's exporters leave out.
MONITOR_LEVELS = frozenset({"monitor", "cluster", "flow", "group", "topic", "partition", "audit"})

#: the audit's counts per flow and topic (monitor.audit's snapshot): metric -> its key there
AUDIT_COUNTS = tuple((m.BY_NAME[name], key) for name, key in audit_component.COUNTERS.items())


def served_specs(granularity: str) -> list[m.MetricSpec]:
    """The metrics the monitor exports at ``granularity``."""
    return [s for s in m.ALL if s.level in MONITOR_LEVELS and m.enabled(s, granularity)]


def partition_level(ev: Evaluation) -> bool:
    """Per-partition series: every one, none (--series topic) or only those not OK (--series not-ok)."""
    return ev.granularity == "partition" and ev.series != "topic"


def samples(ev: Evaluation, version: str = "", partitions: bool = True) -> Iterator[Sample]:
    """Every sample; ``partitions=False`` leaves out the partitions' own series (see
    ``partition_samples``), which an exporter may render from a cache of its own."""
    g = ev.granularity
    topic_level = g != "flow"
    per_partition = partition_level(ev)
    only_not_ok = ev.series == "not-ok"
    for c in ev.clusters:
        if c.up is not None:
            yield m.CLUSTER_UP, (c.alias,), 1.0 if c.up else 0.0
        yield m.CLUSTER_ERRORS, (c.alias,), float(c.errors_total)
    for f in ev.flows:
        yield from _flow(f, topic_level, per_partition, ev.generated_at - ev.started_at, only_not_ok, partitions)
    yield from audit_samples(ev.extra.get("audit") or {})
    for (cluster, topic, record_type), count in sorted(ev.decode_errors.items()):
        yield m.DECODE_ERRORS, (cluster, topic, record_type), float(count)
    yield m.EVALUATION_DURATION, (), ev.duration_seconds
    yield m.LAST_EVALUATION, (), ev.generated_at
    yield m.MONITOR_INFO, (version, g), 1.0


def audit_samples(snapshots: dict[str, dict]) -> Iterator[Sample]:
    """The audit's series from its snapshot per flow: counts per topic, coverage per kind (a
    coverage that is not known yet, nothing replicated in the last hour, is left out)."""
    for flow, snap in sorted(snapshots.items()):
        yield m.AUDIT_EXACTLY_ONCE, (flow,), 1.0 if snap["exactly_once"] else 0.0
        for topic, counts in snap["topics"].items():
            for spec, key in AUDIT_COUNTS:
                yield spec, (flow, topic), float(counts.get(key, 0))
        for kind, ratio in snap["coverage"].items():
            if ratio is not None:
                yield m.AUDIT_COVERAGE, (flow, kind), float(ratio)


def _flow(f: FlowResult, topic_level: bool, per_partition: bool, watched_seconds: float,
          only_not_ok: bool = False, partitions: bool = True) -> Iterator[Sample]:
    fl = (f.name,)
    yield m.FLOW_INFO, (f.name, f.source, f.target), 1.0
    for status in m.STATUSES:
        yield m.FLOW_STATUS, (f.name, status), 1.0 if f.status == status else 0.0
        yield m.FLOW_PARTITIONS, (f.name, status), float(f.partitions_by_status.get(status, 0))
    yield m.REPLICATOR_UP, fl, 1.0 if f.replicator_up else 0.0
    hb = f.heartbeat
    # What the monitor expects of the flow's heartbeats, from start-up on: a rule can then page
    # for a flow whose replicator never started (no heartbeat ever) and stay quiet for a flow
    # with heartbeats switched off, without relying on a series being absent.
    yield m.HEARTBEATS_EXPECTED, fl, 1.0 if hb.expected else 0.0
    yield m.HEARTBEAT_TIMEOUT, fl, float(hb.timeout_seconds)
    yield m.HEARTBEAT_SEEN, fl, 0.0 if hb.age_seconds is None else 1.0
    yield m.HEARTBEAT_AGE, fl, max(0.0, watched_seconds) if hb.age_seconds is None else hb.age_seconds
    if hb.last_timestamp_ms is not None:
        yield m.HEARTBEAT_LAST_TIMESTAMP, fl, hb.last_timestamp_ms / 1000.0
    # the page's input: since a heartbeat last arrived, or (none seen yet) since the monitor started
    yield m.HEARTBEAT_ARRIVAL_AGE, fl, max(0.0, watched_seconds) if hb.arrival_age_seconds is None \
        else hb.arrival_age_seconds
    yield m.HEARTBEATS, fl, float(hb.received_total)
    if f.offset_sync_age_seconds is not None:
        yield m.OFFSET_SYNC_AGE, fl, f.offset_sync_age_seconds
    yield m.OFFSET_SYNCS, fl, float(f.offset_syncs_total)
    if f.lag_records is not None:
        yield m.FLOW_LAG_RECORDS, fl, float(f.lag_records)
    if f.lag_seconds is not None:
        yield m.FLOW_LAG_SECONDS, fl, f.lag_seconds
    yield m.FLOW_LAG_UNKNOWN_PARTITIONS, fl, float(f.lag_unknown_partitions)
    yield m.FLOW_REPLICATED_RECORDS, fl, float(f.replicated_total)
    yield m.FLOW_SOURCE_RECORDS, fl, float(f.source_total)
    if f.catchup_rate is not None:
        yield m.FLOW_CATCHUP_RATE, fl, f.catchup_rate
    eta = _eta(f.catchup_state, f.catchup_eta_seconds)
    if eta is not None:
        yield m.FLOW_CATCHUP_ETA, fl, eta
    yield m.LAG_PROBES, fl, float(f.probes_total)
    headroom = _headroom(f.retention_headroom_seconds, f.retention_unlimited)
    if headroom is not None:
        yield m.FLOW_RETENTION_HEADROOM, fl, headroom
    yield m.FLOW_RETENTION_LOW, fl, float(f.retention_low_partitions)
    yield m.FAILOVER_GROUPS_NOT_READY, fl, float(f.failover_groups_not_ready)
    for collector, seconds in sorted(f.collector_seconds.items()):
        yield m.COLLECTOR_DURATION, (collector, f.name), seconds
    if topic_level:
        for t in f.topics:
            yield from _topic_samples(f.name, t)
    if per_partition and partitions:
        for p in f.partitions:
            if not (only_not_ok and p.status == "OK"):
                yield from partition_samples(f.name, p)
    for grp in f.groups:
        yield from _group_samples(f.name, grp, per_partition, only_not_ok)
    for fb in f.failback:
        yield m.FAILBACK_READY, (f.name, fb.group), 1.0 if fb.ready else 0.0


def _topic_samples(flow: str, t: TopicResult) -> Iterator[Sample]:
    labels = (flow, t.topic)
    yield m.DATA_LOST_RECORDS, labels, float(t.lost_total)
    if t.lag_records is not None:
        yield m.TOPIC_LAG_RECORDS, labels, float(t.lag_records)
    if t.lag_seconds is not None:
        yield m.TOPIC_LAG_SECONDS, labels, t.lag_seconds
    headroom = _headroom(t.retention_headroom_seconds, t.retention_unlimited)
    if headroom is not None:
        yield m.TOPIC_RETENTION_HEADROOM, labels, headroom


def _group_samples(flow: str, grp: GroupResult, per_partition: bool, only_not_ok: bool) -> Iterator[Sample]:
    labels = (flow, grp.group)
    yield m.GROUP_CHECKPOINT_AGE, labels, grp.age_seconds
    yield m.GROUP_CHECKPOINT_LAG, labels, float(grp.lag_records)
    yield m.GROUP_CHECKPOINT_MISSING, labels, float(grp.missing)
    yield m.GROUP_CHECKPOINT_STALE, labels, float(grp.stale)
    fo = grp.failover
    if fo is not None:
        yield m.FAILOVER_READY, labels, 1.0 if fo.ready else 0.0
        for reason in m.FAILOVER_REASONS:
            yield m.FAILOVER_BLOCKED, (*labels, reason), 1.0 if reason in fo.blockers else 0.0
        yield m.FAILOVER_REREAD_RECORDS, labels, float(fo.reread_records)
        if fo.reread_seconds is not None:
            yield m.FAILOVER_REREAD_SECONDS, labels, fo.reread_seconds
        yield m.FAILOVER_SKIPPED_RECORDS, labels, float(fo.skipped_records)
    if per_partition:
        for gp in grp.partitions:
            if only_not_ok and gp.state == "ok" and not gp.lag_records:
                continue
            gl = (flow, grp.group, gp.topic, str(gp.partition))
            if gp.age_seconds is not None:
                yield m.CHECKPOINT_AGE, gl, gp.age_seconds
            if gp.lag_records is not None:
                yield m.CHECKPOINT_LAG, gl, float(gp.lag_records)


def partition_samples(flow: str, p: PartitionResult) -> Iterator[Sample]:
    """The series of one partition (exported at partition granularity)."""
    labels = (flow, p.topic, str(p.partition))
    yield m.PARTITION_STATUS_CODE, labels, float(m.STATUS_CODES[p.status])
    if p.lag_records is not None:
        yield m.PARTITION_LAG_RECORDS, labels, float(p.lag_records)
    if p.lag_seconds is not None:
        yield m.PARTITION_LAG_SECONDS, labels, p.lag_seconds
    headroom = _headroom(p.retention_headroom_seconds, p.retention_unlimited)
    if headroom is not None:
        yield m.PARTITION_RETENTION_HEADROOM, labels, headroom
    if p.copy_rate is not None and p.source_rate is not None:
        yield m.PARTITION_CATCHUP_RATE, labels, p.copy_rate - p.source_rate
    eta = _eta(p.catchup_state, p.catchup_eta_seconds)
    if eta is not None:
        yield m.PARTITION_CATCHUP_ETA, labels, eta


def partition_figures(p: PartitionResult) -> tuple:
    """Everything ``partition_samples`` reads from the partition's result."""
    return (p.status, p.lag_records, p.lag_seconds, p.retention_headroom_seconds, p.retention_unlimited,
            p.copy_rate, p.source_rate, p.catchup_state, p.catchup_eta_seconds)


def _eta(state: str, seconds: float | None) -> float | None:
    """Time to catch up as exported: +Inf while not catching up, None (left out) when unknown."""
    if state == catchup.NOT_CATCHING_UP:
        return float("inf")
    return seconds


def _headroom(seconds: float | None, unlimited: bool) -> float | None:
    """Retention headroom as exported: +Inf when unlimited, None (left out) when unknown."""
    return Headroom(seconds, unlimited, False, None).value


def histogram(f: FlowResult) -> tuple[list[tuple[str, float]], float]:
    """Cumulative (le, count) buckets incl. +Inf, and the sum, of the flow's heartbeat latency."""
    buckets, total = [], 0
    bounds = [*m.LATENCY_BUCKETS, float("inf")]
    for bound, count in zip(bounds, f.heartbeat.bucket_counts):
        total += count
        buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(total)))
    return buckets, f.heartbeat.latency_sum
