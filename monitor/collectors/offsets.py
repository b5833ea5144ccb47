"""EndOffsetCollector: the end offsets behind records lag and the replicated positions.

Two loops per flow, so that the cost of a refresh follows what changed:

- the positions loop, every ``positions_interval`` (default 0.25 s): one
  batched ListOffsets (latest) on the target and one on the source, whatever
  the number of partitions, then the LagProbe for the lagging partitions whose
  position moved (in the background: a slow probe never delays the next read
  of positions). The order matters: the newest offset-sync is taken first (the
  syncs are streamed by the OffsetSyncCollector, nothing to read), then the
  target end offset, then the source, so the computed position (monitor.lag) is
  never ahead of the source end it is compared with. The source end is the
  last stable offset, not the high watermark: the replicator reads committed
  records only, so an open or aborted transaction at the end of a partition is
  not lag. The loop waits three times as long as its last round took (at most
  ``interval``), so a slow round does not take more than a quarter of a core,
  and positions are still read at least once per round plus ``interval``.
  The target's topic list must not be older than the sync either: when a sync
  names a mirror partition the cached metadata lacks, it is read again first.
- the metadata loop, every ``interval``: topic metadata of both clusters (every
  ``metadata_interval``), the source log start offsets (data loss, lag of a
  partition with nothing copied yet) and high watermarks (an open transaction
  holding the last stable offset below them), which move far less often.

A refresh that fails on either cluster records nothing: the previous figures
stay (with their ``read_at``) and the cluster shows as down once that lasts
(``monitor.facts.DOWN_AFTER_SECONDS``). Partitions that fail alone (their
leader's broker is down) keep their previous figures while the rest are read;
see ``ClusterClient.list_offsets``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from monitor.collectors.cluster import ClusterClient
from monitor.collectors.periodic import refresh_forever
from monitor.collectors.timelag import LagProbe
from monitor.pacing import STEP_SECONDS, Pacer, run_in_steps
from monitor.state import MonitorState, OffsetsRow
from monitor.watch import MonitorOptions, WatchedFlow

log = logging.getLogger(__name__)

#: (source topic, partition, mirror topic, the mirror partition exists)
Watched = tuple[str, int, str, bool]


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
        self._watched: list[Watched] | None = None
        self._starts: dict[tuple[str, int], int] = {}
        self._metadata_at = float("-inf")
        self._created = time.monotonic()
        self._probing: asyncio.Task | None = None
        self._parts: tuple[list[Watched], list[tuple[str, int]], list[tuple[str, int]]] | None = None
        self._source_parts: tuple[list[Watched], list[tuple[str, int]]] | None = None  # for refresh_metadata
        self._previous: dict[tuple[str, int], tuple] = {}  # figures of the last read, per partition
        self._rechecked: dict[tuple[str, int], tuple[int, int]] = {}  # see _target_metadata_after
        self._highs: dict[tuple[str, int], int] = {}  # source high watermarks (metadata cadence)

    async def run(self) -> None:
        try:
            await asyncio.gather(
                refresh_forever(self.refresh_metadata, self.options.interval, self.state, self.flow.name,
                                "metadata", f"reading topic metadata of {self.flow.name}", log),
                refresh_forever(self.refresh, self.options.positions_interval, self.state, self.flow.name,
                                self.name, f"refreshing end offsets of {self.flow.name}", log,
                                idle_ratio=3.0, idle_max=self.options.interval))
        finally:
            if self._probing is not None:
                self._probing.cancel()

    async def refresh_metadata(self) -> None:
        """Topics and partitions (every ``metadata_interval``) and the source log start offsets."""
        now = time.monotonic()
        if self._source_topics is None or now - self._metadata_at >= self.options.metadata_interval:
            source_topics = await self.source.call(self.source.topic_partitions)
            target_topics = await self.target.call(self.target.topic_partitions)
            self._source_topics, self._target_topics, self._metadata_at = source_topics, target_topics, now
            self._watched = self._same_or(self._watch(source_topics, target_topics))
        if self._source_parts is None or self._source_parts[0] is not self._watched:
            self._source_parts = (self._watched, [(t, p) for t, p, _, _ in self._watched])
        parts = self._source_parts[1]  # one list object per metadata: its ListOffsets questions are kept
        # Every ClusterClient.call counts as contact with the cluster: with nothing to ask, don't call,
        # or a cluster that went down since the metadata was read would show as reachable again.
        starts = await self.source.call(self.source.list_offsets, parts, "earliest") if parts else {}
        self._starts = {key: starts.get(key, self._starts.get(key)) for key in parts
                        if key in starts or key in self._starts}
        # High watermarks: above the last stable offset only while a transaction is open, which the
        # status explains (a read_committed replicator waits there); no hurry, so on this cadence.
        self._highs = await self.source.call(self.source.list_offsets, parts, "latest") if parts else {}

    def _watch(self, source_topics: dict[str, int], target_topics: dict[str, int]) -> list[Watched]:
        watched = []
        for topic in sorted(source_topics):
            if self.flow.watches_topic(topic, self.options.topic_filter):
                remote = self.flow.remote_topic(topic)
                mirrored = target_topics.get(remote, 0)
                watched.extend((topic, p, remote, p < mirrored) for p in range(source_topics[topic]))
        return watched

    async def _target_metadata_after(self, watched: list[Watched], syncs) -> list[Watched]:
        """The watched partitions, with the target's topics re-read if a sync is newer than them.

        A sync for a mirror partition the cached metadata lacks: that metadata may predate the
        mirror topic (the replicator created it, copied and synced since), and comparing the two
        would read "the newest offset-sync points past the end of the mirror partition". The
        target's topics are read again, after the sync; once per new sync, so a mirror topic that
        is really gone costs one extra request per sync, not one per round.
        """
        new = {(t, p): syncs[(t, p)] for t, p, _, exists in watched
               if not exists and (t, p) in syncs and self._rechecked.get((t, p)) != syncs[(t, p)]}
        if not new:
            return watched
        self._target_topics = await self.target.call(self.target.topic_partitions)
        self._rechecked.update(new)
        self._watched = self._same_or(self._watch(self._source_topics, self._target_topics))
        return self._watched

    def _same_or(self, watched: list[Watched]) -> list[Watched]:
        """The list watched so far when ``watched`` equals it: the partition lists and
        ListOffsets questions built for it stay (``ClusterClient._requests`` keeps them per list
        object). Rebuilt on every metadata read, they were new long-lived objects for every
        partition, for the garbage collector's full collections to walk (bench/NOTES.md,
        Monitor at scale)."""
        return self._watched if self._watched is not None and watched == self._watched else watched

    async def refresh(self) -> None:
        """End offsets and positions of the watched partitions, then probe what moved."""
        fs = self.state.flows[self.flow.name]
        if not fs.syncs_loaded and time.monotonic() - self._created < self.options.timeout:
            return  # positions need the offset-syncs read to their end first; don't report a false "unknown"
        watched, starts = self._watched, self._starts
        if watched is None or (watched and not starts):
            return  # the metadata loop has not answered yet
        syncs = fs.syncs.copy()  # before the target metadata and end offsets (see the module docstring)
        watched = await self._target_metadata_after(watched, syncs)
        if self._parts is None or self._parts[0] is not watched:
            # The metadata changed: which partitions to ask each cluster, and forget what was not kept.
            keys = {(t, p) for t, p, _, _ in watched}
            self._previous = {k: v for k, v in self._previous.items() if k in keys}
            self._parts = (watched, [(remote, p) for _, p, remote, exists in watched if exists],
                           [(t, p) for t, p, _, _ in watched])
        _, target_parts, source_parts = self._parts
        # Every ClusterClient.call counts as contact with the cluster: with nothing to ask, don't call,
        # or a cluster that went down since the metadata was read would show as reachable again.
        # each part's duration goes to the last minute's figures (/api/status collector_last_minute)
        phase = functools.partial(self.state.record_duration, self.flow.name, phase=True)
        started = time.monotonic()
        target_ends = await self.target.call(self.target.list_offsets, target_parts, "latest") \
            if target_parts else {}
        listed = time.monotonic()
        phase("offsets.target_list_offsets", listed - started)
        source_ends = await self.source.call(self.source.list_offsets, source_parts, "latest", True) \
            if source_parts else {}
        at = time.time()
        started, listed = listed, time.monotonic()
        phase("offsets.source_list_offsets", listed - started)
        rows, unread, unchanged = await run_in_steps(self._compare(watched, starts, syncs, source_ends, target_ends))
        started, listed = listed, time.monotonic()
        phase("offsets.compare", listed - started)
        await run_in_steps(self.state.record_offsets_steps(self.flow.name, rows, at, keep=unread, unchanged=unchanged,
                                                            pacer=Pacer(time.perf_counter, STEP_SECONDS)))
        phase("offsets.record", time.monotonic() - listed)
        if self.probe is not None and (self._probing is None or self._probing.done()):
            self._probing = asyncio.create_task(self._probe())

    def _compare(self, watched: list[Watched], starts, syncs, source_ends, target_ends):
        """(rows that changed since the previous read, partitions not read, partitions unchanged).

        At 10,000 partitions this is the bulk of a refresh's Python work (on most rounds most
        partitions did not move): it runs on the event loop in steps (``run_in_steps``), as the
        evaluation does, rather than in a worker thread that would hold the GIL against the loop.
        """
        previous = self._previous
        rows, unread, unchanged = [], set(), []
        pacer = Pacer(time.perf_counter, STEP_SECONDS)
        for t, p, remote, exists in watched:
            if pacer.due():
                yield
            key = (t, p)
            end, start = source_ends.get(key), starts.get(key)
            target_end = target_ends.get((remote, p))
            if end is None or start is None or (exists and target_end is None):
                unread.add(key)  # this partition failed alone (or is new): keep its previous figures
                continue
            figures = (start, end, target_end, syncs.get(key), remote, self._highs.get(key))
            if previous.get(key) == figures:
                unchanged.append(key)
                continue
            previous[key] = figures
            rows.append(OffsetsRow(t, p, remote, start, end, target_end, figures[3], figures[5]))
        return rows, unread, unchanged

    async def _probe(self) -> None:
        started = time.monotonic()
        try:
            await self.probe.refresh(self.flow.name)
        except Exception:
            log.exception("reading the oldest unreplicated records of %s failed", self.flow.name,
                          extra={"flow": self.flow.name})
        self.state.record_duration(self.flow.name, "lag_probe", time.monotonic() - started)

    def forget_metadata(self) -> None:
        """Re-read topic metadata at the next refresh (new topics, grown partitions)."""
        self._metadata_at = float("-inf")
