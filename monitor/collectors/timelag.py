"""LagProbe: timestamps the oldest source record not yet on the target (lag in seconds).

Seconds lag is ``now - timestamp`` of the first source record at or after the
replicated position: that record's real timestamp, read from the source, not
an interpolation from offsets. Reading it costs one fetch per lagging
partition, so it is done only when the position of a lagging partition moved
since the last probe (or, when the last probe found nothing to copy, when the
source grew since): while a partition is stalled, the same record is still
the oldest one missing and its cached timestamp keeps giving the right, growing
age at no cost. A caught-up partition is never probed (its lag is 0 s).

The probe reads ``read_committed``, as the replicator does: records of aborted
or still open transactions are never copied, so they are not lag either.

Cost: one assign + fetch round for all probed partitions of a flow per refresh,
with ``max.partition.fetch.bytes`` at 1 KiB so the broker returns one record
batch per partition. A partition whose records after the position are all gone
(markers, compaction) ends in an EOF instead of a record: it is caught up, and
the skipped offsets are remembered as empty (``Probe.empty_to``), so that
deleting them later (a Kafka Streams purge past a commit marker) is not
counted as data loss.
A position below the log start (data lost to retention) reads the first
record that still exists, so seconds lag is then a lower bound.
"""

from __future__ import annotations

import time
from dataclasses import replace

from monitor.collectors.cluster import ClusterClient, ClusterUnavailable, first_records
from monitor.lag import records_lag
from monitor.facts import PartitionState, Probe
from monitor.state import MonitorState


def needs_probe(part: PartitionState) -> bool:
    """The cached probe does not answer for the partition's current position and end."""
    probe = part.probe
    if probe is None or probe.position != part.position.offset:
        return True
    # Nothing was there to copy when it was read: records written since need a new look.
    return probe.offset is None and probe.source_end < (part.source_end or 0)


class LagProbe:
    def __init__(self, source: ClusterClient, state: MonitorState) -> None:
        self.source = source
        self.state = state
        self._consumer = None  # lives in the source cluster's probe thread only

    async def refresh(self, flow: str) -> None:
        fs = self.state.flows[flow]
        todo = []
        for key, part in fs.partitions.items():
            position = part.position.offset
            if records_lag(position, part.source_start, part.source_end) and needs_probe(part):
                todo.append((key, position, part.source_end))
        if not todo:
            return
        try:
            results = await self.source.call(self._read_first_records, todo, probe=True)
        except ClusterUnavailable:
            return
        for key, probe in results.items():
            self.state.record_probe(flow, key, probe)

    def _read_first_records(self, todo: list[tuple[tuple[str, int], int, int]]) -> dict[tuple[str, int], Probe]:
        if self._consumer is None:
            self._consumer = self.source.probe_consumer(**{"isolation.level": "read_committed"})
        ends = {key: end for key, _, end in todo}
        found = first_records(self._consumer, {key: position for key, position, _ in todo},
                              time.monotonic() + self.source.timeout)
        results = {key: Probe(position, found[key].offset, found[key].timestamp, ends[key], found[key].read_at)
                   for key, position, _ in todo if key in found}
        return self._known_empty(results)

    def _known_empty(self, results: dict[tuple[str, int], Probe]) -> dict[tuple[str, int], Probe]:
        """Mark the offsets a probe skipped as empty when the log start did not pass the position.

        A probe that found its first record past the position (or none before the end)
        skipped transaction markers or compacted-away records, unless retention or
        deleteRecords removed the position meanwhile (the consumer then resets to the log
        start). The log start read after the fetch tells which: at or below the position,
        the skipped offsets never held a record, and their later deletion is no data loss.
        """
        skipped = [key for key, p in results.items() if p.offset is None or p.offset > p.position]
        if not skipped:
            return results
        try:
            starts = self.source.list_offsets(skipped, "earliest")
        except Exception:  # unknown then: a later deletion past the position counts as loss
            return results
        for key in skipped:
            p = results[key]
            if key in starts and starts[key] <= p.position:
                results[key] = replace(p, empty_to=p.source_end if p.offset is None else p.offset)
        return results
