"""EndOffsetCollector: the end offsets behind records lag, once per refresh interval.

Per refresh and flow: topic metadata of both clusters (every
``metadata_interval``), then one batched ListOffsets (latest) on the target and
two (earliest, latest) on the source, whatever the number of partitions. The
order matters: the newest offset-sync is taken first, then the target end
offset, then the source offsets, so the computed position (monitor.lag) is
never ahead of the source end it is compared with. Then the LagProbe reads the
first unreplicated record of each lagging partition whose position moved.

A refresh that fails on either cluster records nothing: the previous figures
stay (with their ``read_at``) and the cluster shows as down.
"""

from __future__ import annotations

import logging
import time

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.periodic import refresh_forever
from monitor.collectors.timelag import LagProbe
from monitor.state import MonitorState, OffsetsRow
from monitor.watch import MonitorOptions, WatchedFlow

log = logging.getLogger(__name__)


class EndOffsetCollector:
    name = "offsets"

    def __init__(self, flow: WatchedFlow, source: ClusterClient, target: ClusterClient, state: MonitorState,
                 options: MonitorOptions, probe: LagProbe | None) -> None:
        self.flow = flow
        self.source = source
        self.target = target
        self.state = state
        self.options = options
        self.probe = probe
        self._source_topics: dict[str, int] | None = None
        self._target_topics: dict[str, int] | None = None
        self._metadata_at = float("-inf")
        self._created = time.monotonic()

    async def run(self) -> None:
        await refresh_forever(self.refresh, self.options.interval, self.state, self.flow.name, self.name,
                              f"refreshing end offsets of {self.flow.name} failed", log)

    async def refresh(self) -> None:
        now = time.monotonic()
        fs = self.state.flows[self.flow.name]
        if not fs.syncs_loaded and now - self._created < self.options.timeout:
            return  # positions need the offset-syncs read to their end first; don't report a false "unknown"
        if self._source_topics is None or now - self._metadata_at >= self.options.metadata_interval:
            self._source_topics = await self.source.call(self.source.topic_partitions)
            self._target_topics = await self.target.call(self.target.topic_partitions)
            self._metadata_at = now
        watched = []
        for topic in sorted(self._source_topics):
            if self.flow.watches_topic(topic, self.options.topic_filter):
                remote = self.flow.remote_topic(topic)
                mirrored = self._target_topics.get(remote, 0)
                watched.extend((topic, p, remote, p < mirrored) for p in range(self._source_topics[topic]))
        syncs = {(t, p): fs.syncs.get((t, p)) for t, p, _, _ in watched}
        # Every ClusterClient.call counts as contact with the cluster: with nothing to ask, don't call,
        # or a cluster that went down since the metadata was read would show as reachable again.
        target_parts = [(remote, p) for _, p, remote, exists in watched if exists]
        target_ends = await self.target.call(self.target.list_offsets, target_parts, "latest") \
            if target_parts else {}
        source_parts = [(t, p) for t, p, _, _ in watched]
        source = await self.source.call(self.source.source_offsets, source_parts) if source_parts else {}
        at = time.time()
        rows, unread = [], set()
        for t, p, remote, exists in watched:
            if (t, p) not in source or (exists and (remote, p) not in target_ends):
                unread.add((t, p))  # this partition failed alone: keep its previous figures
                continue
            rows.append(OffsetsRow(t, p, remote, *source[(t, p)], target_ends.get((remote, p)), syncs[(t, p)]))
        self.state.record_offsets(self.flow.name, rows, at, keep=unread)
        if self.probe is not None:
            probe_started = time.monotonic()
            await self.probe.refresh(self.flow.name)
            self.state.record_duration(self.flow.name, "lag_probe", time.monotonic() - probe_started)

    def forget_metadata(self) -> None:
        """Re-read topic metadata at the next refresh (new topics, grown partitions)."""
        self._metadata_at = float("-inf")
