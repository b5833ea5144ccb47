"""The offset-syncs of one partition turned into the audit's work: pure, no I/O.

A sync (U, D) says that source offset U landed at target offset D. Two syncs in a row,
(Ua, Da) then (Ub, Db), bound a window: source [Ua, Ub) went to target [Da, Db).

- ``Ub - Ua == Db - Da`` on a target without transactions: one record per offset on
  both sides, so no record of the window was lost or doubled. It costs nothing to
  account for and becomes a ``Segment`` waiting for its content check.
- The source advanced further (compaction, transaction markers, aborted records,
  records deleted before the copy, or a record dropped), the target advanced further
  (a replay, a foreign record, transaction markers on an exactly-once target), or the
  source went back (a restart that replays): a ``Window`` to read on both sides.
- The target went back (a re-created or truncated mirror topic): the book starts
  again from that sync and says so.

One-to-one segments that touch merge, so the book stays small however many syncs
went by; a thinned list of anchors keeps target offsets translatable to source ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: anchors kept per partition, as many as MM2's own sync store keeps
ANCHORS = 64


@dataclass
class Segment:
    """Source [u, u+n) is target [d, d+n), record for record; content not yet compared."""

    u: int
    d: int
    n: int

    def to_json(self) -> list[int]:
        return [self.u, self.d, self.n]


@dataclass
class Window:
    """Source [u_a, u_b) went to target [d_a, d_b); ``replay``: the source went back at u_b."""

    u_a: int
    d_a: int
    u_b: int
    d_b: int
    seen_round: int = field(default=-1, compare=False)  # the engine's round that saw its closing sync

    @property
    def replay(self) -> bool:
        return self.u_b < self.u_a

    @property
    def source_end(self) -> int:
        """Where the source range ends: for a replay, as far as the target range reaches."""
        return self.u_a + (self.d_b - self.d_a) if self.replay else self.u_b

    def to_json(self) -> list[int]:
        return [self.u_a, self.d_a, self.u_b, self.d_b]

    def follows(self, other: "Window") -> bool:
        return self.u_a == other.u_b and self.d_a == other.d_b


@dataclass
class PartitionBook:
    topic: str
    partition: int
    last: tuple[int, int] | None = None       # the newest sync seen
    first: tuple[int, int] | None = None      # the first sync seen: nothing before it is verifiable
    pending: list[Window] = field(default_factory=list)
    unchecked: list[Segment] = field(default_factory=list)
    anchors: list[tuple[int, int]] = field(default_factory=list)
    restarts: int = 0                         # times the target went back

    def add_sync(self, u: int, d: int, *, gaps_on_target: bool = False) -> int:
        """Take one sync in; returns the source records the window it closes accounts for
        by distance alone (0 when the window must be read, or nothing closed)."""
        if self.last is None:
            self.last = self.first = (u, d)
            self._anchor(u, d)
            return 0
        ua, da = self.last
        if (u, d) == (ua, da):
            return 0
        if d < da:
            self.restarts += 1
            self.last = (u, d)
            self.anchors = []
            self._anchor(u, d)
            return 0
        self.last = (u, d)
        self._anchor(u, d)
        du, dd = u - ua, d - da
        if du == dd and not gaps_on_target:
            self._unchecked(Segment(ua, da, du))
            return du
        self.pending.append(Window(ua, da, u, d))
        return 0

    def _anchor(self, u: int, d: int) -> None:
        self.anchors.append((u, d))
        if len(self.anchors) > ANCHORS:
            # drop every other anchor of the older half: spacing grows with age, as in MM2's store
            half = len(self.anchors) // 2
            self.anchors = self.anchors[:half:2] + self.anchors[half:]

    def _unchecked(self, seg: Segment) -> None:
        if seg.n <= 0:
            return
        if self.unchecked:
            tail = self.unchecked[-1]
            if tail.u + tail.n == seg.u and tail.d + tail.n == seg.d:
                tail.n += seg.n
                return
        self.unchecked.append(seg)

    def add_unchecked(self, seg: Segment) -> None:
        """A stretch a read showed to be one-to-one, in order of u (a replay's may not be)."""
        self._unchecked(seg)
        self.unchecked.sort(key=lambda s: s.u)

    def source_of(self, target_offset: int) -> int | None:
        """The source offset a target offset holds, by the nearest anchor at or below it
        (one-to-one assumed from there), or None when no anchor is that low."""
        best = None
        for u, d in self.anchors:
            if d <= target_offset and (best is None or d > best[1]):
                best = (u, d)
        return None if best is None else best[0] + (target_offset - best[1])

    # --- content work -------------------------------------------------------------------
    def unchecked_records(self) -> int:
        return sum(s.n for s in self.unchecked)

    def take_newest(self, most: int) -> Segment | None:
        if not self.unchecked:
            return None
        tail = self.unchecked[-1]
        n = min(most, tail.n)
        chunk = Segment(tail.u + tail.n - n, tail.d + tail.n - n, n)
        tail.n -= n
        if tail.n == 0:
            self.unchecked.pop()
        return chunk

    def take_oldest(self, most: int) -> Segment | None:
        if not self.unchecked:
            return None
        head = self.unchecked[0]
        n = min(most, head.n)
        chunk = Segment(head.u, head.d, n)
        head.u, head.d, head.n = head.u + n, head.d + n, head.n - n
        if head.n == 0:
            self.unchecked.pop(0)
        return chunk

    def drop_below(self, source_start: int, target_start: int) -> list[Segment]:
        """Remove the unchecked stretches no longer readable on either side; returns them."""
        gone, kept = [], []
        for s in self.unchecked:
            cut = max(source_start - s.u, target_start - s.d, 0)
            if cut > 0:
                gone.append(Segment(s.u, s.d, min(cut, s.n)))
            if cut < s.n:
                kept.append(Segment(s.u + cut, s.d + cut, s.n - cut) if cut else s)
        self.unchecked = kept
        return gone

    # --- state file ---------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "last": self.last, "first": self.first,
                "pending": [w.to_json() for w in self.pending], "unchecked": [s.to_json() for s in self.unchecked],
                "anchors": self.anchors, "restarts": self.restarts}

    @classmethod
    def from_json(cls, data: dict) -> "PartitionBook":
        return cls(data["topic"], int(data["partition"]),
                   tuple(data["last"]) if data.get("last") else None,
                   tuple(data["first"]) if data.get("first") else None,
                   [Window(*w) for w in data.get("pending", [])], [Segment(*s) for s in data.get("unchecked", [])],
                   [tuple(a) for a in data.get("anchors", [])], int(data.get("restarts", 0)))
