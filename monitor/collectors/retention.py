"""RetentionCollector: the source topics' retention settings, for retention headroom.

Every ``metadata_interval`` (topic settings change rarely), and as soon as the
watched topics change: one DescribeConfigs on the source for the topics the
flow watches, keeping ``retention.ms``, ``retention.bytes`` and ``cleanup.policy``. The evaluator turns them into the
retention headroom of each partition (monitor.readiness).
"""

from __future__ import annotations

import logging
import time

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.periodic import refresh_forever
from monitor.facts import TopicRetention
from monitor.state import MonitorState
from monitor.watch import MonitorOptions, WatchedFlow

log = logging.getLogger(__name__)

CONFIGS = ("retention.ms", "retention.bytes", "cleanup.policy")


def parse_retention(values: dict[str, str]) -> TopicRetention:
    """TopicRetention from DescribeConfigs values; -1 (or a missing value) is unlimited."""
    def limit(name: str) -> int | None:
        try:
            value = int(values.get(name, "-1"))
        except ValueError:
            return None
        return value if value >= 0 else None

    policies = {p.strip() for p in values.get("cleanup.policy", "delete").split(",")}
    return TopicRetention(limit("retention.ms"), limit("retention.bytes"), "delete" in policies)


class RetentionCollector:
    name = "retention"

    def __init__(self, flow: WatchedFlow, source: ClusterClient, state: MonitorState,
                 options: MonitorOptions) -> None:
        self.flow = flow
        self.source = source
        self.state = state
        self.options = options
        self._topics: list[str] = []
        self._read_at = float("-inf")

    async def run(self) -> None:
        # Checked every interval, read when the watched topics changed or metadata_interval passed.
        await refresh_forever(self.refresh, self.options.interval, self.state, self.flow.name, self.name,
                              f"reading topic retention settings for {self.flow.name}", log)

    async def refresh(self) -> None:
        topics = sorted({t for t, _ in self.state.flows[self.flow.name].partitions})
        now = time.monotonic()
        if not topics or (topics == self._topics and now - self._read_at < self.options.metadata_interval):
            return
        configs = await self.source.call(self.source.topic_configs, topics, CONFIGS)
        self.state.set_retention(self.flow.name, {t: parse_retention(v) for t, v in configs.items()})
        self._topics, self._read_at = topics, now
