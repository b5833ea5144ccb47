"""The monitor's series count for a large deployment, per ``--series`` mode (the cardinality budget).

``python -m monitor.cardinality`` builds an Evaluation by hand (no brokers): one
flow, ``PARTITIONS`` partitions over ``TOPICS`` topics, ``GROUPS`` consumer groups
committing on every partition, ``NOT_OK`` of the partitions and of the group
partitions not OK, and counts the series the Prometheus exporter would serve
(the same ``samples()``, plus the heartbeat-latency histogram) at
``--granularity partition`` for each ``--series`` mode. docs/alerts.md carries the
table it prints; a unit test checks the two agree.
"""

from __future__ import annotations

from sparkmirror import metrics as m
from monitor.readiness import GroupFailover
from monitor.rpo import RpoTracker
from monitor.evaluator.results import (ClusterResult, Evaluation, FlowResult, GroupPartitionResult, GroupResult,
                                       HeartbeatResult, PartitionResult, TopicResult)
from monitor.exporters.samples import samples

PARTITIONS = 10_000
TOPICS = 100
GROUPS = 20
NOT_OK = 0.01  # share of partitions (and of group partitions) not OK in the not-ok count


def synthetic_evaluation(partitions: int = PARTITIONS, topics: int = TOPICS, groups: int = GROUPS,
                         not_ok: float = NOT_OK, series: str = "all") -> Evaluation:
    per_topic = partitions // topics
    every = max(1, round(1 / not_ok)) if not_ok else 0
    parts = []
    for i in range(partitions):
        bad = bool(every) and i % every == 0
        topic = f"topic-{i // per_topic:04d}"
        parts.append(PartitionResult(topic, i % per_topic, f"src.{topic}", "STALL" if bad else "OK", [],
                                     0, 100, 100, 90 if bad else 100, "sync", 10 if bad else 0,
                                     60.0 if bad else 0.0, None, 0, 0.0, retention_headroom_seconds=3600.0,
                                     catchup_state="catching-up" if bad else "caught-up", copy_rate=1.0,
                                     source_rate=0.5, catchup_eta_seconds=20.0 if bad else 0.0))
    topic_results = [TopicResult(f"topic-{t:04d}", f"src.topic-{t:04d}", "OK", per_topic, 0, 0.0, 0,
                                 retention_headroom_seconds=3600.0) for t in range(topics)]
    group_results = []
    for g in range(groups):
        gps = [GroupPartitionResult(p.topic, p.target_topic, p.partition,
                                    "stale" if every and i % every == 0 else "ok", 100, 100, 100, 100,
                                    5 if every and i % every == 0 else 0, 30.0)
               for i, p in enumerate(parts)]
        failover = GroupFailover(True, [], "can fail over now: would re-read 5 records (1.0 s)", 5, 1.0, 0)
        group_results.append(GroupResult(f"group-{g:02d}", "OK", [], 0, 0.0, 0, gps, failover))
    heartbeat = HeartbeatResult("src.heartbeats", True, 2.0, 1.0, 0, 10, [0] * (len(m.LATENCY_BUCKETS) + 1),
                                0.0, 0, None, False, 0.5)
    by_status = {s: 0 for s in m.STATUSES}
    for p in parts:
        by_status[p.status] += 1
    flow = FlowResult("src->dst", "src", "dst", "OK", [], True, heartbeat, 1.0, 0, 0, 0.0, 0, 0, 0, {}, by_status,
                      parts, topic_results, group_results, {"offsets": 0.1}, retention_headroom_seconds=3600.0,
                      catchup_state="catching-up", copy_rate=float(partitions), source_rate=partitions / 2,
                      catchup_eta_seconds=20.0)
    clusters = [ClusterResult(a, True, None, 0.0, 0) for a in ("src", "dst")]
    ev = Evaluation(0.0, 0.0, "OK", [flow], clusters, {}, "partition", series=series)
    RpoTracker().annotate(ev)  # as the monitor does at every evaluation
    return ev


def series_count(ev: Evaluation) -> int:
    """Series the Prometheus exporter serves for ``ev``: every sample, and per flow the heartbeat
    latency and the lag histograms' buckets (+Inf included), _sum and _count."""
    histogram = len(ev.flows) * (len(m.LATENCY_BUCKETS) + 1 + 2)
    histogram += sum(1 for h in (ev.extra.get("lag_histograms") or {}).values() if h) * (len(m.LAG_BUCKETS) + 1 + 2)
    return sum(1 for _ in samples(ev)) + histogram


def counts() -> dict[str, int]:
    return {mode: series_count(synthetic_evaluation(series=mode)) for mode in m.SERIES_MODES}


def markdown_table() -> str:
    rows = ["| `--series` | series at 10k partitions x 20 groups |", "| --- | ---: |"]
    for mode, count in counts().items():
        rows.append(f"| `{mode}` | {count:,} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
