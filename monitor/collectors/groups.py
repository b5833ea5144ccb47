"""GroupOffsetCollector: committed offsets of the flow's consumer groups on the source.

Every ``groups_interval``: ListGroups on the source, the flow's group filter and
the monitor's allow/deny lists, then one OffsetFetch per group (sent together).
Only partitions the monitor watches are kept. Compared with the checkpoints on
the target, they answer "can this group fail over now, and how many records
would it re-read"; then ``RecordTimestamps`` (when given) reads the timestamps
that say how long a span those records cover. With the target's client, the same
two requests on the target keep the groups' commits on the mirror partitions:
"could this group fail back now" (monitor.failback).
"""

from __future__ import annotations

import logging

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.periodic import refresh_forever
from monitor.collectors.timestamps import RecordTimestamps
from monitor.state import MonitorState
from monitor.watch import MonitorOptions, WatchedFlow

log = logging.getLogger(__name__)


class GroupOffsetCollector:
    name = "groups"

    def __init__(self, flow: WatchedFlow, source: ClusterClient, state: MonitorState,
                 options: MonitorOptions, timestamps: RecordTimestamps | None = None,
                 target: ClusterClient | None = None) -> None:
        self.flow = flow
        self.target = target
        self.timestamps = timestamps
        self.source = source
        self.state = state
        self.options = options

    async def run(self) -> None:
        await refresh_forever(self.refresh, self.options.groups_interval, self.state, self.flow.name, self.name,
                              f"reading consumer-group offsets for {self.flow.name}", log)

    async def refresh(self) -> None:
        started = self.state.clock()
        groups = await self.source.call(self.source.consumer_groups)
        groups = [g for g in groups if self.flow.watches_group(g, self.options.group_filter)]
        committed = await self.source.call(self.source.committed_offsets, groups) if groups else {}
        watched = self.state.flows[self.flow.name].partitions
        offsets = {}
        for group, parts in committed.items():
            mine = {key: offset for key, offset in parts.items() if key in watched}
            if mine:
                offsets[group] = mine
        self.state.set_group_offsets(self.flow.name, offsets, started)
        if self.timestamps is not None:
            await self.timestamps.refresh(self.flow.name)
        if self.target is not None:  # last: a target that is down costs the failover figures nothing
            await self._refresh_target(watched)

    async def _refresh_target(self, watched) -> None:
        """The groups' commits on the target's mirror partitions: who could fail back (monitor.failback)."""
        mirrors = {(p.target_topic, p.partition) for p in list(watched.values())}
        groups = await self.target.call(self.target.consumer_groups_beside_offsets)
        groups = [g for g in groups if self.flow.watches_group(g, self.options.group_filter)]
        committed = await self.target.call(self.target.committed_offsets, groups) if groups else {}
        offsets = {}
        for group, parts in committed.items():
            mine = {key: offset for key, offset in parts.items() if key in mirrors}
            if mine:
                offsets[group] = mine
        self.state.set_target_group_offsets(self.flow.name, offsets)
