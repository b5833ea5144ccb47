"""CheckpointCollector: reads <A>.checkpoints.internal on B from the beginning and follows it.

Keeps the newest checkpoint per (group, mirror topic, partition) with its record
timestamp (MM2 writes it when it emits the checkpoint; the value has no time of
its own). Groups outside the flow's group filter or the monitor's allow/deny
lists are skipped here, so they never reach labels.
"""

from __future__ import annotations

import asyncio

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.records import decode_or_count
from monitor.collectors.tail import TailedRecord, TopicTail
from monitor.state import MonitorState
from monitor.watch import MonitorOptions, WatchedFlow
from sparkmirror.model.records import Checkpoint


class CheckpointCollector:
    name = "checkpoints"

    def __init__(self, flow: WatchedFlow, target: ClusterClient, state: MonitorState,
                 loop: asyncio.AbstractEventLoop, options: MonitorOptions) -> None:
        self.flow = flow
        self.state = state
        self.options = options
        self.cluster = target.alias
        self._wanted: dict[str, bool] = {}
        self.tail = TopicTail(target, flow.checkpoints_topic, self._records, loop, on_missing=self._missing)

    def start(self) -> None:
        self.tail.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.tail.stop(timeout)

    def _missing(self) -> None:
        self.state.flows[self.flow.name].checkpoints_topic_present = False

    def _records(self, records: list[TailedRecord]) -> None:
        for r in records:
            cp = decode_or_count(self.state, self.cluster, self.flow.checkpoints_topic, Checkpoint, r)
            if cp is None:
                continue
            wanted = self._wanted.get(cp.group)
            if wanted is None:
                wanted = self._wanted[cp.group] = self.flow.watches_group(cp.group, self.options.group_filter)
            if wanted:
                self.state.add_checkpoint(self.flow.name, cp, r.timestamp_ms)
