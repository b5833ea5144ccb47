"""RecordTimestamps: reads the source records that bound what a failover would re-read.

For each group partition whose checkpoint is behind the committed offset C, the
re-read span (monitor.readiness) needs the timestamps of the first record at or
after the checkpoint's upstream offset and of the record at C - 1. A record's
timestamp never changes, so each is read once and kept while it is still
needed; a group that neither commits nor gets a new checkpoint costs nothing.

Cost: rounds of one assignment each (a partition at most once per round, so
two offsets of one partition take two rounds) with ``max.partition.fetch.bytes``
at 1 KiB, at most ``MAX_READS`` offsets per refresh (the rest follow at the next
groups refresh), in the source cluster's probe thread.
"""

from __future__ import annotations

import time

from monitor import readiness
from monitor.collectors.cluster import ClusterClient, ClusterUnavailable, first_records
from monitor.state import MonitorState

MAX_READS = 1000

Key = tuple[str, int, int]


class RecordTimestamps:
    def __init__(self, source: ClusterClient, state: MonitorState) -> None:
        self.source = source
        self.state = state
        self._consumer = None  # lives in the source cluster's probe thread only

    async def refresh(self, flow: str) -> None:
        fs = self.state.flows[flow]
        needed = readiness.timestamps_needed(fs)
        todo = sorted(k for k in needed if k not in fs.record_timestamps)[:MAX_READS]
        found: dict[Key, int | None] = {}
        if todo:
            try:
                found = await self.source.call(self._read, todo, probe=True)
            except ClusterUnavailable:
                pass
        self.state.set_record_timestamps(flow, found, needed)

    def _read(self, todo: list[Key]) -> dict[Key, int | None]:
        if self._consumer is None:
            self._consumer = self.source.probe_consumer()
        results: dict[Key, int | None] = {}
        deadline = time.monotonic() + self.source.timeout
        rest = list(todo)
        while rest and time.monotonic() < deadline:
            round_, seen, later = [], set(), []
            for key in rest:
                (later if key[:2] in seen else round_).append(key)
                seen.add(key[:2])
            results.update(self._read_round(round_, deadline))
            rest = later
        return results

    def _read_round(self, keys: list[Key], deadline: float) -> dict[Key, int | None]:
        found = first_records(self._consumer, {(t, p): o for t, p, o in keys}, deadline)
        return {(t, p, o): found[(t, p)].timestamp for t, p, o in keys if (t, p) in found}
