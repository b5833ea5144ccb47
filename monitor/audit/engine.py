"""AuditEngine: one flow's audit, in rounds; its snapshot; its state file.

A round: read the offset-syncs that arrived since the last round into the books
(``book``); note where each partition's log now starts on both sides; read every
window the syncs revealed as irregular (losses are named within the round of the
sync that reveals them, whatever the budget); then compare content, newest and
oldest stretches of every partition in turn, while the read budget of both
clusters allows; then save the state. the monitor repeats rounds (monitor.audit.component);
``full`` (``sparkmirror audit``) reads everything at once, without a budget.

The source is read with the replicator's isolation level (sparkmirror: always
read_committed; MM2: its consumer's ``isolation.level``, read_uncommitted unless
set), the target always with read_committed, so what counts as the correct copy is
what that replicator should have written.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from monitor.audit import persist
from monitor.audit.book import PartitionBook, Window
from monitor.audit.digest import compare_times
from monitor.audit.budget import DEFAULT_BUDGET, ReadBudget, flow_budgets
from monitor.audit.content import ContentChecks
from monitor.audit.findings import Finding, Tally
from monitor.audit.reader import ClusterReader
from monitor.audit.reconcile import (DUPLICATED, FOREIGN, MISMATCHED, MISSING, Difference, by_key, paired, reconcile,
                                     whole)
from monitor.options import AUDIT_REPLICATORS

log = logging.getLogger(__name__)

REPLICATORS = AUDIT_REPLICATORS
#: Every partition's log starts are asked for at least this often (seconds). At thousands of
#: partitions a round asks only for a share: each ListOffsets request costs the brokers, and
#: 10,000 partitions every round were 40 requests per cluster every few seconds.
LOG_START_REFRESH_S = 30
#: partitions per ListOffsets request (ClusterReader.log_starts)
LOG_STARTS_PER_REQUEST = 250
#: target records read as one window at most (irregular windows in a row are merged up to it)
MAX_WINDOW = 5000


@dataclass(frozen=True)
class AuditFlow:
    name: str
    source: str
    target: str
    syncs_cluster: str
    syncs_topic: str
    remote: Callable[[str], str]
    source_isolation: str
    exactly_once: bool
    topics: frozenset[str] | None = None   # None: every topic the syncs name

    @classmethod
    def of(cls, config, flow, replicator: str = "sparkmirror", topics=None) -> "AuditFlow":
        """The audit's view of ``flow`` (a FlowConfig of ``config``) as ``replicator`` copies it."""
        if replicator not in REPLICATORS:
            raise ValueError(f"replicator must be one of {REPLICATORS}")
        isolation = "read_committed"
        if replicator == "mm2":
            isolation = config.client_config(flow.source, "consumer", flow).get(
                "isolation.level", "read_uncommitted").strip().lower()
        cluster, topic = flow.offset_syncs_location
        policy = flow.policy
        return cls(flow.name, flow.source, flow.target, cluster, topic,
                   lambda t: policy.format_remote_topic(flow.source, t), isolation, flow.exactly_once,
                   frozenset(topics) if topics else None)


@dataclass(frozen=True)
class AuditSettings:
    budget: float | None = DEFAULT_BUDGET   # bytes per second per cluster; None: no limit
    chunk: int = 500                        # records per content read
    interval: float = 5.0                   # seconds between rounds
    round_seconds: float = 10.0             # content checks stop after this long in one round
    state_path: Path | None = None


@dataclass
class Readers:
    source: ClusterReader
    target: ClusterReader
    syncs: ClusterReader

    def close(self) -> None:
        for r in {id(r): r for r in (self.source, self.target, self.syncs)}.values():
            r.close()


@dataclass
class Progress:
    total: int = 0
    done: int = 0
    callbacks: list[Callable[["Progress"], None]] = field(default_factory=list)

    def add(self, n: int) -> None:
        self.done += n
        for cb in self.callbacks:
            cb(self)


class AuditEngine:
    def __init__(self, flow: AuditFlow, readers: Readers, settings: AuditSettings = AuditSettings(),
                 clock: Callable[[], float] = time.time, budgets: dict[str, ReadBudget] | None = None) -> None:
        self.flow = flow
        self.readers = readers
        self.settings = settings
        self.clock = clock
        self.budgets = flow_budgets(flow.source, flow.target, settings.budget, budgets)  # per cluster, shared
        self.books: dict[tuple[str, int], PartitionBook] = {}
        self.tally = Tally()
        self.sync_positions: dict[int, int] = {}
        self.target_starts: dict[tuple[str, int], int] = {}
        self.compacted: dict[str, bool] = {}
        self.rounds = 0
        self._log_start_turn = 0
        self._log_starts_at: float | None = None  # when the last round asked (the first asks for all)
        self.undecodable_syncs = 0
        self.progress = Progress()
        self._restore()
        self.content = ContentChecks(readers, self.budgets, self.tally, flow.remote, self._is_compacted,
                                     settings.chunk, clock)

    # --- state ----------------------------------------------------------------------
    def _restore(self) -> None:
        data = persist.load(self.settings.state_path, self.flow.name)
        if not data:
            return
        self.sync_positions = {int(k): v for k, v in data.get("positions", {}).items()}
        self.books = {(b["topic"], b["partition"]): PartitionBook.from_json(b) for b in data.get("books", [])}
        self.tally = Tally.from_json(data.get("tally", {}))
        self.target_starts = {(t, int(p)): o for t, p, o in data.get("target_starts", [])}
        log.info("audit of %s continues from %s: %d partitions", self.flow.name, self.settings.state_path,
                 len(self.books), extra={"flow": self.flow.name})

    def save(self) -> None:
        persist.save(self.settings.state_path, self.flow.name, {
            "positions": {str(k): v for k, v in self.sync_positions.items()},
            "books": [b.to_json() for b in self.books.values()], "tally": self.tally.to_json(),
            "target_starts": [[t, p, o] for (t, p), o in self.target_starts.items()]})

    # --- a round --------------------------------------------------------------------
    def round(self, content: bool = True) -> None:
        now = self.clock()
        self.take_syncs(now)
        self.check_log_starts(now)
        self.check_losses(now)
        if content:
            self.check_content(time.monotonic() + self.settings.round_seconds)
        self.rounds += 1
        self.save()

    def full(self) -> None:
        """Everything at once: every irregular window, then every unchecked stretch (the command)."""
        self.progress.total = sum(len(b.pending) for b in self.books.values()) + sum(
            b.unchecked_records() for b in self.books.values())
        self.check_log_starts(self.clock(), every=True)
        self.check_losses(self.clock(), hold_newest=False)
        self.check_content(None)

    def take_syncs(self, now: float) -> None:
        syncs, self.sync_positions, bad = self.readers.syncs.read_syncs(self.flow.syncs_topic, self.sync_positions)
        self.undecodable_syncs += bad
        if self.flow.topics is not None:
            syncs = [s for s in syncs if s.topic in self.flow.topics]
        firsts: dict[tuple[str, int], int] = {}
        for s in syncs:
            firsts.setdefault((s.topic, s.partition), s.upstream_offset)
        fresh = [k for k in firsts if k not in self.books]
        if fresh:
            self._open_books(fresh, firsts, now)
        for s in syncs:
            if (book := self.books.get((s.topic, s.partition))) is None:  # not on the source: _open_books
                continue
            last = book.last
            accounted = book.add_sync(s.upstream_offset, s.downstream_offset,
                                      gaps_on_target=self.flow.exactly_once)
            if book.pending and book.pending[-1].seen_round < 0:
                book.pending[-1].seen_round = self.rounds
            if last is not None and book.last != last:
                self.tally.replicated(max(book.last[0] - last[0], 0), now)
                self.tally.loss_checked(accounted, now)

    def _open_books(self, keys: list[tuple[str, int]], firsts: dict[tuple[str, int], int], now: float) -> None:
        """Books for partitions seen first. A replicator need not sync its first record (MM2 replaces a
        pending sync while its producer is busy): when both logs start at 0 the first window is from
        (0, 0); else what precedes the first sync cannot be paired with the target: unverifiable."""
        if new_topics := [t for t in {t for t, _ in keys} if t not in self.compacted]:
            self.compacted.update(self.readers.source.compacted(new_topics))
        src = self.readers.source.log_starts(keys)
        tgt = self.readers.target.log_starts([(self.flow.remote(t), p) for t, p in keys])
        for topic, partition in keys:
            start, first = src.get((topic, partition)), firsts[(topic, partition)]
            if start is None:  # not on the source now: its next sync asks again
                _not_on_source(self.flow.name, topic, partition)
                continue
            book = self.books[(topic, partition)] = PartitionBook(topic, partition)
            if first <= start:
                continue
            if start == 0 and tgt.get((self.flow.remote(topic), partition)) == 0:
                book.add_sync(0, 0)
            else:
                self.tally.add(Finding("unverifiable", topic, partition, start, None, first - start,
                                       "copied before the first offset-sync the audit saw", now))

    def _is_compacted(self, topic: str) -> bool:
        if topic not in self.compacted:  # not in the state file: a restarted audit asks again
            self.compacted.update(self.readers.source.compacted([topic]))
        return self.compacted.get(topic, False)

    def check_log_starts(self, now: float, every: bool = False) -> None:
        """Where the partitions' logs start on both sides. A round asks for a share of the partitions,
        each in turn, so that each is asked at least every LOG_START_REFRESH_S (``every``: all now)."""
        books = list(self.books.values())
        if not books:
            return
        since, self._log_starts_at = now - (self._log_starts_at or 0.0), now
        share = max(LOG_STARTS_PER_REQUEST, math.ceil(len(books) * since / LOG_START_REFRESH_S))
        if not every and share < len(books):
            first = self._log_start_turn % len(books)
            self._log_start_turn = first + share
            books = (books[first:] + books[:first])[:share]
        src = self.readers.source.log_starts([(b.topic, b.partition) for b in books])
        remote = {(b.topic, b.partition): (self.flow.remote(b.topic), b.partition) for b in books}
        tgt_by_remote = self.readers.target.log_starts(list(remote.values()))
        for b in books:
            key = (b.topic, b.partition)
            s_start, t_start = src.get(key), tgt_by_remote.get(remote[key])
            if s_start is None or t_start is None:
                continue
            before = self.target_starts.get(key)
            self.target_starts[key] = t_start
            if before is not None and t_start > before:
                first = b.source_of(before)
                if first is not None and s_start <= first:  # the source still holds them: deleted on the target
                    self.tally.add(Finding("expired", b.topic, b.partition, first, before, t_start - before,
                                           "below the target's log start, still on the source (deleted on "
                                           "the target)", now))
            for gone in b.drop_below(s_start, t_start):
                if s_start > gone.u:
                    self.tally.counts[b.topic]["expired"] += gone.n

    def check_losses(self, now: float, *, hold_newest: bool = True) -> None:
        """Read the irregular windows. Windows in a row are read as one (two swapped records make
        three syncs in a row); the newest row is held for one round when it ends at the newest
        sync, as its next sync may still belong to it."""
        for b in list(self.books.values()):
            while b.pending:
                chain = [b.pending[0]]
                for w in b.pending[1:]:
                    if (not w.follows(chain[-1]) or w.d_b - chain[0].d_a > MAX_WINDOW
                            or _replay(w) or _replay(chain[-1])):
                        break
                    chain.append(w)
                last = chain[-1]
                if (hold_newest and len(chain) == len(b.pending) and (last.u_b, last.d_b) == b.last
                        and last.seen_round >= self.rounds):
                    break
                self._window(b, Window(chain[0].u_a, chain[0].d_a, last.u_b, last.d_b), self.clock())
                del b.pending[:len(chain)]
                self.progress.add(len(chain))

    def _window(self, b: PartitionBook, w: Window, now: float) -> None:
        # Read a little past the window when the target holds more than the source range: the
        # surplus is then either a replay of what follows (duplicates) or foreign.
        dd = w.d_b - w.d_a
        # the source may hold markers or compacted gaps where it was replayed: read twice the reach
        reach = w.u_b if w.u_b - w.u_a >= dd else max(w.u_b, w.u_a + 2 * dd + 10)
        compacted = self._is_compacted(b.topic)
        if compacted and not w.replay:  # past u_b: a target record copied from there is no newest of its key
            reach = max(reach, w.u_b + dd + 10)
        remote = self.flow.remote(b.topic)
        # A replay (u_b below u_a) repeats [u_b, ...): the source is read from there, so that what this
        # window's first copies and the copies after d_b share is counted whole
        lo = min(w.u_a, w.u_b)
        t = self.readers.target.read(remote, b.partition, w.d_a, w.d_b)
        s = self.readers.source.read(b.topic, b.partition, lo, reach)
        self.budgets["target"].spend(t.cost)
        self.budgets["source"].spend(s.cost)
        # where neither cleaner has run over the ranges read, a compacted topic's window is like any other
        cleaned = compacted and not (whole(s.records, max(lo, s.log_start), s.end)
                                     and whole(t.records, max(w.d_a, t.log_start), t.end))
        if cleaned:
            self._cleaned_window(b, w, s, t, now)
            return
        outcome = reconcile(s.records, t.records, aligned=True)
        # source records past u_b were read only to explain a surplus: one still missing belongs to the next
        # window, and a target record paired with one as "different" is simply not from the source
        diffs = []
        for d in outcome.differences:
            beyond = d.source_offset is not None and d.source_offset >= w.u_b
            before = d.source_offset is not None and d.source_offset < w.u_a
            if (beyond or before) and d.kind == MISSING:
                continue
            if beyond and d.kind == MISMATCHED and d.detail != "out of order":
                d = Difference(FOREIGN, None, d.target_offset, "no such record on the source")
            diffs.append(d)
        below_source = max(0, min(s.log_start, w.u_b) - w.u_a)
        if below_source:
            # target records matching no readable source record are copies of what retention or
            # deleteRecords has taken since; the rest of those offsets never reached the target
            foreign = [d for d in diffs if d.kind == FOREIGN][:below_source]
            diffs = [d for d in diffs if d not in foreign]
            self.tally.counts[b.topic]["expired"] += len(foreign)
            never = below_source - len(foreign)
            if never > 0:
                self.tally.add(Finding("expired", b.topic, b.partition, w.u_a + len(foreign), None, never,
                                       "deleted from the source before it was copied", now))
        below_target = max(0, t.log_start - w.d_a)
        if below_target:
            gone = [d for d in diffs if d.kind == MISSING][:below_target]
            diffs = [d for d in diffs if d not in gone]
            if gone:
                self.tally.add(Finding("expired", b.topic, b.partition, gone[0].source_offset, w.d_a, len(gone),
                                       "below the target's log start", now))
        # source records of this window that did not land; those below u_a (a replay from further
        # back) landed in the windows before, so they are not "unmatched" but copied again
        unmatched = {d.source_offset for d in outcome.differences if d.kind == MISSING and d.source_offset >= w.u_a}
        diffs = _ranges_of_duplicates(diffs)
        for d, count in diffs:
            self.tally.add(Finding(d.kind, b.topic, b.partition, d.source_offset, d.target_offset, count, d.detail,
                                   now))
        if not any(d.kind == DUPLICATED for d, _ in diffs):
            # a replay: what this window holds of [u_b, ...) is on the target again from d_b on
            matched = [r.offset for r in s.records if r.offset >= w.u_a and r.offset not in unmatched]
            end = max(matched) + 1 if matched else w.u_a
            replayed = [r.offset for r in s.records if w.u_b <= r.offset < end and r.offset not in unmatched]
            if replayed:
                self.tally.add(Finding(DUPLICATED, b.topic, b.partition, replayed[0], w.d_b, len(replayed),
                                       "copied again: the replicator went back to this offset", now))
        self.tally.verified(b.topic, outcome.verified, now)
        self.tally.loss_checked(max(w.u_b - w.u_a, 0), now)

    def _cleaned_window(self, b: PartitionBook, w: Window, s, t, now: float) -> None:
        """A window of a compacted topic where a cleaner has run on either side: compared by the newest
        value per key (``reconcile.by_key``), over the source offsets the target range stands for."""
        dd = w.d_b - w.d_a
        upto = w.u_a + dd if w.replay else w.u_b
        records = [r for r in s.records if w.u_a <= r.offset < upto]
        with_time = compare_times(s.records, t.records)
        copied = {r.identity(with_time) for r in t.records}
        # what the target range holds of [u_b, ...) (of a replay: all it holds) is copied again after d_b
        since = w.u_a if w.replay else w.u_b
        replayed = [r.offset for r in s.records if r.offset >= since and r.identity(with_time) in copied]
        target_whole = whole(t.records, max(w.d_a, t.log_start), t.end)
        outcome = by_key(records, t.records, target_whole=target_whole,
                         same_range=not w.replay and w.u_b - w.u_a >= dd and not replayed)
        for d in outcome.differences:
            self.tally.add(Finding(d.kind, b.topic, b.partition, d.source_offset, d.target_offset, 1, d.detail, now))
        if replayed:
            self.tally.add(Finding(DUPLICATED, b.topic, b.partition, replayed[0], w.d_b, len(replayed),
                                   "copied again: the replicator went back to this offset", now))
        self.tally.verified(b.topic, outcome.verified, now)
        self.tally.loss_checked(max(w.u_b - w.u_a, 0), now)

    def check_content(self, deadline: float | None) -> None:
        self.content.check(self.books, deadline, self.progress.add)

    # --- what the exporters read ---------------------------------------------------------
    def snapshot(self) -> dict:
        now = self.clock()
        return {
            "flow": self.flow.name,
            "counts": self.tally.totals(),
            "topics": {t: dict(c) for t, c in sorted(self.tally.counts.items())},
            "coverage": self.tally.coverage(now),
            "verified_last_hour": self.tally.checked_last_hour(now),
            "findings": [f.to_json() for f in self.tally.findings],
            "partitions": len(self.books),
            # per source partition, the newest synced source offset: what the counts reach up to
            "positions": {f"{t}/{p}": b.last[0] for (t, p), b in sorted(self.books.items()) if b.last},
            "unchecked_records": sum(b.unchecked_records() for b in self.books.values()),
            "pending_windows": sum(len(b.pending) for b in self.books.values()),
            "read_bytes": {"source": self.budgets["source"].spent, "target": self.budgets["target"].spent},
            "exactly_once": self.flow.exactly_once,
            "source_isolation": self.flow.source_isolation,
            "rounds": self.rounds,
            "undecodable_syncs": self.undecodable_syncs,
        }


def _not_on_source(flow: str, topic: str, partition: int) -> None:
    log.warning("audit of %s: an offset-sync names %s[%d], whose log start the source does not give: its "
                "syncs are left out until it does", flow, topic, partition, extra={"flow": flow})


def _ranges_of_duplicates(diffs: list[Difference]) -> list[tuple[Difference, int]]:
    """Each difference with its count: duplicates of consecutive records, copied again in a row, as one."""
    out: list[tuple[Difference, int]] = []
    for d in diffs:
        if out and d.kind == DUPLICATED and out[-1][0].kind == DUPLICATED:
            first, n = out[-1]
            if d.source_offset == first.source_offset + n and d.target_offset == first.target_offset + n:
                out[-1] = (first, n + 1)
                continue
        out.append((d, 1))
    return out


def _replay(w: Window) -> bool:
    """The replicator went back further than one record (a restart): read alone, as a replay, since
    merged with its neighbours the repeated records would lie before the merged window's source range
    (one record back is the middle of two records written in the other order)."""
    return w.u_b < w.u_a - 1
