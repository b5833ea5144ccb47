"""Each topic's status and figures, from its partitions' results."""

from __future__ import annotations

from monitor import readiness
from monitor.evaluator.results import PartitionResult, TopicResult, worst


def topic_result(topic: str, parts: list[PartitionResult], lost: int) -> TopicResult:
    # A topic is only as known as its least known partition: with one partition's position
    # unknown (no offset-sync for what its mirror holds, yet), the others' sum is no figure for
    # the topic, and 0 would read as caught up. The partition rows say which and why.
    lags = [p.lag_records for p in parts]
    secs = [p.lag_seconds for p in parts]
    return TopicResult(topic, parts[0].target_topic if parts else topic, worst(p.status for p in parts), len(parts),
                       None if None in lags else sum(lags), None if None in secs else max(secs), lost,
                       *readiness.least([(p.retention_headroom_seconds, p.retention_unlimited) for p in parts]))
