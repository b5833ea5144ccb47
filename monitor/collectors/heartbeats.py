"""HeartbeatCollector: follows <A>.heartbeats on B for heartbeat latency and age.

Latency is target append time minus the heartbeat's timestamp. A mirrored record
keeps the CreateTime of its source record, so the record timestamp on B says
nothing about when it reached B. The append time is taken as:

- the record's timestamp when the topic uses LogAppendTime (exact), else
- the moment the tail received the record, for records that arrived after the
  tail had caught up with the partition ("live", see tail.py): the broker
  answers a waiting fetch as soon as the record is appended, so this
  over-states the append time by one fetch round trip (a few ms on a LAN).

Records that were already on B when the monitor started or reconnected have no
known append time: they update the newest-heartbeat age but add no latency
sample. (ListOffsets by timestamp cannot help: it searches record timestamps,
which are the source's CreateTime.)
"""

from __future__ import annotations

import asyncio

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.records import decode_or_count
from monitor.collectors.tail import TailedRecord, TopicTail
from monitor.state import MonitorState
from monitor.watch import WatchedFlow
from sparkmirror.model.records import Heartbeat

#: Records read back from the end of each partition at start, for the newest heartbeat.
STARTUP_RECORDS = 100


class HeartbeatCollector:
    name = "heartbeats"

    def __init__(self, flow: WatchedFlow, target: ClusterClient, state: MonitorState,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.flow = flow
        self.state = state
        self.cluster = target.alias
        self.tail = TopicTail(target, flow.heartbeats_topic, self._records, loop, last=STARTUP_RECORDS,
                              on_missing=self._missing)

    def start(self) -> None:
        self.tail.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.tail.stop(timeout)

    def _missing(self) -> None:
        self.state.flows[self.flow.name].heartbeat.topic_present = False

    def _records(self, records: list[TailedRecord]) -> None:
        for r in records:
            hb = decode_or_count(self.state, self.cluster, self.flow.heartbeats_topic, Heartbeat, r)
            if hb is None:
                continue
            if r.timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
                append_time = r.timestamp_ms / 1000.0
            else:
                append_time = r.received_at if r.live else None
            self.state.add_heartbeat(self.flow.name, hb, append_time)
