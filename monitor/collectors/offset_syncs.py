"""OffsetSyncCollector: reads the flow's offset-syncs topic from the beginning and follows it.

The topic (``mm2-offset-syncs.<B>.internal`` on A, or ``mm2-offset-syncs.<A>.internal``
on B with ``offset-syncs.topic.location=target``) holds the syncs of every flow
A->B, compacted to the newest per partition. The newest sync per partition
drives the replicated position (monitor.lag); all of them feed an
OffsetSyncStore for translating consumer-group offsets (checkpoint lag). The
record timestamp of the newest sync is the replicator's offset-sync liveness.
"""

from __future__ import annotations

import asyncio

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.records import decode_or_count
from monitor.collectors.tail import TailedRecord, TopicTail
from monitor.state import MonitorState
from monitor.watch import WatchedFlow
from sparkmirror.model.records import OffsetSync


class OffsetSyncCollector:
    name = "offset_syncs"

    def __init__(self, flow: WatchedFlow, client: ClusterClient, state: MonitorState,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.flow = flow
        self.state = state
        self.cluster = client.alias
        self.tail = TopicTail(client, flow.offset_syncs_topic, self._records, loop, on_missing=self._missing,
                              on_caught_up=self._loaded)

    def start(self) -> None:
        self.tail.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.tail.stop(timeout)

    def _missing(self) -> None:
        fs = self.state.flows[self.flow.name]
        fs.syncs_topic_present, fs.syncs_loaded = False, True

    def _loaded(self) -> None:
        self.state.flows[self.flow.name].syncs_loaded = True

    def _records(self, records: list[TailedRecord]) -> None:
        for r in records:
            sync = decode_or_count(self.state, self.cluster, self.flow.offset_syncs_topic, OffsetSync, r)
            if sync is not None:
                self.state.add_sync(self.flow.name, sync, r.timestamp_ms)
