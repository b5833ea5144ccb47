"""The audit's content checks: one-to-one stretches compared record for record, in batches.

A batch takes the next stretch of as many partitions as fit in ``reader.BATCH_BYTES`` (at
the record size seen so far), in ``ContentOrder``'s turn, and reads them on each side with
one ``read_many``: the brokers' cost is per request more than per byte, so at thousands of
partitions, whose stretches are small, a fetch then carries many of them instead of one
each (bench/NOTES.md, "The audit"). A batch starts only while both clusters' budgets
are positive, so the budget's average holds; a batch overdraws it by at most its size.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from monitor.audit.book import PartitionBook, Segment
from monitor.audit.budget import BudgetShare, ContentOrder
from monitor.audit.findings import Finding, Tally
from monitor.audit.reader import BATCH_BYTES, BULK_FETCH_BYTES, Read
from monitor.audit.reconcile import paired, reconcile

#: the most partitions one batch spans
BATCH_PARTITIONS = 200


class ContentChecks:
    def __init__(self, readers, budgets: dict[str, BudgetShare], tally: Tally, remote: Callable[[str], str],
                 is_compacted: Callable[[str], bool], chunk: int, clock: Callable[[], float]) -> None:
        self.readers, self.budgets, self.tally = readers, budgets, tally
        self.remote, self.is_compacted, self.chunk, self.clock = remote, is_compacted, chunk, clock
        self.order = ContentOrder()
        self.record_bytes = 1024.0  # the mean size of what was read so far: how many stretches fit a batch

    def check(self, books: dict[tuple[str, int], PartitionBook], deadline: float | None,
              progress: Callable[[int], None]) -> None:
        while deadline is None or time.monotonic() < deadline:
            if not (self.budgets["source"].available() and self.budgets["target"].available()):
                return
            batch = self.pick(books)
            if not batch:
                return
            self.compare(batch)
            progress(sum(seg.n for _, seg in batch))

    def pick(self, books: dict[tuple[str, int], PartitionBook]) -> list[tuple[PartitionBook, Segment]]:
        """The next stretches, one per partition: the first always, then while the batch fits."""
        keys = [k for k, b in books.items() if b.unchecked]
        batch: list[tuple[PartitionBook, Segment]] = []
        expected = first = 0.0
        # consecutive turns over the same keys name distinct partitions, up to len(keys) of them
        while len(batch) < min(len(keys), BATCH_PARTITIONS):
            nxt = self.order.peek(keys)
            if nxt is None:
                break
            size = self._size(books[nxt[0]], nxt[1])
            # a stretch that fills a fetch by itself is read alone: batched, such stretches came in
            # more and smaller fetches than one by one (bench/NOTES.md, "The audit")
            if batch and (expected + size > BATCH_BYTES or max(size, first) >= BULK_FETCH_BYTES // 2):
                break
            first = first or size
            key, newest = self.order.next(keys)
            b = books[key]
            seg = b.take_newest(self.chunk) if newest else b.take_oldest(self.chunk)
            expected += size
            batch.append((b, seg))
        return batch

    def _size(self, b: PartitionBook, newest: bool) -> float:
        end = b.unchecked[-1] if newest else b.unchecked[0]
        return min(self.chunk, end.n) * self.record_bytes

    def compare(self, batch: list[tuple[PartitionBook, Segment]]) -> None:
        src = self.readers.source.read_many([(b.topic, b.partition, seg.u, seg.u + seg.n) for b, seg in batch])
        tgt = self.readers.target.read_many([(self.remote(b.topic), b.partition, seg.d, seg.d + seg.n)
                                             for b, seg in batch])
        cost = (sum(r.cost for r in src), sum(r.cost for r in tgt))
        self.budgets["source"].spend(cost[0])
        self.budgets["target"].spend(cost[1])
        got = sum(len(r.records) for r in src)
        if got:
            self.record_bytes = cost[0] / got
        now = self.clock()
        for (b, seg), s, t in zip(batch, src, tgt):
            self._segment(b, seg, s, t, now)

    def _segment(self, b: PartitionBook, seg: Segment, s: Read, t: Read, now: float) -> None:
        cut = max(s.log_start - seg.u, t.log_start - seg.d, 0)
        if cut:  # one-to-one: the same count of records is gone from the front of both
            if s.log_start - seg.u >= t.log_start - seg.d:
                self.tally.counts[b.topic]["expired"] += min(cut, seg.n)
            src = [r for r in s.records if r.offset >= seg.u + cut]
            tgt = [r for r in t.records if r.offset >= seg.d + cut]
        else:
            src, tgt = s.records, t.records
        outcome = paired(src, tgt, seg.d - seg.u) if self.is_compacted(b.topic) else reconcile(src, tgt)
        self.tally.verified(b.topic, outcome.verified, now)
        for d in outcome.differences:
            self.tally.add(Finding(d.kind, b.topic, b.partition, d.source_offset, d.target_offset, 1, d.detail, now))
