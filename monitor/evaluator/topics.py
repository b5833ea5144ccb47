"""Each topic's status and figures, from its partitions' results."""

from __future__ import annotations

from collections.abc import Generator

from monitor import readiness
from monitor.evaluator.results import PartitionResult, TopicResult, worst
from monitor.pacing import Pacer


def topic_results(partitions: list[PartitionResult], lost_total: dict[str, int],
                  pacer: Pacer) -> Generator[None, None, list[TopicResult]]:
    by_topic: dict[str, list[PartitionResult]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
        if pacer.due():
            yield
    out = []
    for topic, parts in sorted(by_topic.items()):
        if pacer.due():
            yield
        # A topic is only as known as its least known partition: with one partition's position
        # unknown (no offset-sync for what its mirror holds, yet), the others' sum is no figure for
        # the topic, and 0 would read as caught up. The partition rows say which and why.
        lags = [p.lag_records for p in parts]
        secs = [p.lag_seconds for p in parts]
        out.append(TopicResult(topic, parts[0].target_topic, worst(p.status for p in parts), len(parts),
                               None if None in lags else sum(lags), None if None in secs else max(secs),
                               lost_total.get(topic, 0),
                               *readiness.least([(p.retention_headroom_seconds, p.retention_unlimited)
                                                 for p in parts])))
    return out
