"""GroupOffsetCollector: committed offsets of the flow's consumer groups on the source.

Every ``groups_interval``: ListGroups on the source, the flow's group filter and
the monitor's allow/deny lists, then one OffsetFetch per group (sent together).
Only partitions the monitor watches are kept. Compared with the checkpoints on
the target, they answer "can this group fail over now, and how many records
would it re-read".
"""

from __future__ import annotations

import asyncio
import logging
import time

from monitor.collectors.cluster import ClusterClient, ClusterUnavailable
from monitor.state import MonitorState
from monitor.watch import MonitorOptions, WatchedFlow

log = logging.getLogger(__name__)


class GroupOffsetCollector:
    name = "groups"

    def __init__(self, flow: WatchedFlow, source: ClusterClient, state: MonitorState,
                 options: MonitorOptions) -> None:
        self.flow = flow
        self.source = source
        self.state = state
        self.options = options

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.refresh()
            except ClusterUnavailable:
                pass
            except Exception:
                log.exception("reading consumer-group offsets for %s failed", self.flow.name)
            elapsed = time.monotonic() - started
            self.state.record_duration(self.flow.name, self.name, elapsed)
            await asyncio.sleep(max(0.05, self.options.groups_interval - elapsed))

    async def refresh(self) -> None:
        groups = await self.source.call(self.source.consumer_groups)
        groups = [g for g in groups if self.flow.watches_group(g, self.options.group_filter)]
        committed = await self.source.call(self.source.committed_offsets, groups) if groups else {}
        watched = self.state.flows[self.flow.name].partitions
        offsets = {}
        for group, parts in committed.items():
            mine = {key: offset for key, offset in parts.items() if key in watched}
            if mine:
                offsets[group] = mine
        self.state.set_group_offsets(self.flow.name, offsets)
