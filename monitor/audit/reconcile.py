"""Compare a source range with the target range it was copied to: pure, no I/O.

The ranges come from the offset-syncs (``book``), so both start at the same record.
Equal lengths are compared position by position (a changed byte or two records
swapped show at their exact offsets). Unequal lengths are aligned on the records'
identities with difflib: a source record with no partner is missing (or out of
order when it sits elsewhere in the target), a target record with no partner is a
duplicate when it repeats a source record and foreign when it matches none.

Compacted topics: each side's cleaner removes, on its own schedule, every record of a
key older than a newer one of that key, wherever in the log the newer one lies, so a
range may have lost records at its start, its end or inside, or all of them, on one
side only. What still holds:

- a one-to-one stretch pairs offsets (``paired``): a record held on both sides at
  paired offsets must be the same; one held on one side only was cleaned on the other;
- a window (``by_key``): a key held in the range on both sides has the same newest
  value on both (a cleaner that removed a key's newest in the range removed all of that
  key's older ones with it); a key held on the source only is missing only where the
  target range lost nothing to its cleaner (every offset still there).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from monitor.audit.digest import Seen, compare_times

MISSING, MISMATCHED, DUPLICATED, FOREIGN = "missing", "mismatched", "duplicated", "foreign"


@dataclass(frozen=True)
class Difference:
    kind: str
    source_offset: int | None
    target_offset: int | None
    detail: str


@dataclass
class Outcome:
    verified: int = 0
    differences: list[Difference] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for d in self.differences if d.kind == kind)


def _what_differs(s: Seen, t: Seen, with_time: bool) -> str:
    if s.digest != t.digest:
        return "key differs" if s.key != t.key else "value or headers differ"
    return "timestamp differs" if with_time and s.timestamp != t.timestamp else "differs"


def reconcile(source: list[Seen], target: list[Seen], *, aligned: bool = False) -> Outcome:
    """Ranges of a topic whose records stay where they were written (not compacted, or where no
    cleaner has run on either side). ``aligned``: never position by position (a window whose offsets
    did not advance alike may hold a foreign record and lack one, and still be of equal length)."""
    with_time = compare_times(source, target)
    if len(source) == len(target) and not aligned:
        return _positional(source, target, with_time)
    return _aligned(source, target, with_time)


def _positional(source: list[Seen], target: list[Seen], with_time: bool) -> Outcome:
    out = Outcome()
    elsewhere = {t.identity(with_time) for t in target}
    for s, t in zip(source, target):
        if s.identity(with_time) == t.identity(with_time):
            out.verified += 1
        elif s.identity(with_time) in elsewhere:
            out.differences.append(Difference(MISMATCHED, s.offset, t.offset, "out of order"))
        else:
            out.differences.append(Difference(MISMATCHED, s.offset, t.offset, _what_differs(s, t, with_time)))
    return out


def _aligned(source: list[Seen], target: list[Seen], with_time: bool) -> Outcome:
    out = Outcome()
    a = [s.identity(with_time) for s in source]
    b = [t.identity(with_time) for t in target]
    first_of = {}
    for s, ident in zip(source, a):
        first_of.setdefault(ident, s.offset)
    in_target = set(b)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    unmatched_source: list[int] = []
    unmatched_target: list[int] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.verified += i2 - i1
            continue
        pairs = min(i2 - i1, j2 - j1) if op == "replace" else 0
        for k in range(pairs):  # the same place on both sides: altered, unless either record is found elsewhere
            i, j = i1 + k, j1 + k
            if a[i] not in in_target and b[j] not in first_of:
                s, t = source[i], target[j]
                out.differences.append(Difference(MISMATCHED, s.offset, t.offset, _what_differs(s, t, with_time)))
            else:
                unmatched_source.append(i)
                unmatched_target.append(j)
        unmatched_source.extend(range(i1 + pairs, i2))
        unmatched_target.extend(range(j1 + pairs, j2))
    moved = {b[j] for j in unmatched_target} & {a[i] for i in unmatched_source}
    where = {b[j]: target[j].offset for j in unmatched_target}
    for i in unmatched_source:
        s = source[i]
        if a[i] in moved:
            out.differences.append(Difference(MISMATCHED, s.offset, where[a[i]], "out of order"))
        else:
            out.differences.append(Difference(MISSING, s.offset, None, "not on the target"))
    for j in unmatched_target:
        t = target[j]
        if b[j] in moved:
            continue  # reported once, at its source offset
        if b[j] in first_of:
            out.differences.append(Difference(DUPLICATED, first_of[b[j]], t.offset, "copied again"))
        else:
            out.differences.append(Difference(FOREIGN, None, t.offset, "no such record on the source"))
    out.differences.sort(key=lambda d: (d.source_offset if d.source_offset is not None else -1,
                                        d.target_offset if d.target_offset is not None else -1))
    return out


def paired(source: list[Seen], target: list[Seen], shift: int) -> Outcome:
    """A one-to-one stretch of a compacted topic: source offset o was copied to o + ``shift``."""
    out = Outcome()
    with_time = compare_times(source, target)
    at = {t.offset: t for t in target}
    for s in source:
        t = at.get(s.offset + shift)
        if t is None:
            continue  # cleaned on the target since the copy (or on the source, for the converse)
        if s.identity(with_time) == t.identity(with_time):
            out.verified += 1
        else:
            out.differences.append(Difference(MISMATCHED, s.offset, t.offset, _what_differs(s, t, with_time)))
    return out


def by_key(source: list[Seen], target: list[Seen], *, target_whole: bool, same_range: bool) -> Outcome:
    """A window of a compacted topic. ``target_whole``: the target range still holds every offset
    (nothing cleaned there), so a source key it lacks was not copied. ``same_range``: the target
    range holds copies of exactly the source range (no replay, no surplus), so a key held on both
    sides must agree on its newest value; otherwise only equal newest values are counted."""
    out = Outcome()
    with_time = compare_times(source, target)
    newest_target = {t.key: t for t in target}
    newest_source = {s.key: s for s in source}
    for key, s in sorted(newest_source.items(), key=lambda kv: kv[1].offset):
        t = newest_target.get(key)
        if t is None:
            if target_whole:
                out.differences.append(Difference(MISSING, s.offset, None, "key not on the target"))
        elif s.identity(with_time) == t.identity(with_time):
            out.verified += 1
        elif same_range:
            out.differences.append(Difference(MISMATCHED, s.offset, t.offset,
                                              "newest value of the key differs: " + _what_differs(s, t, with_time)))
    return out


def whole(records: list[Seen], lo: int, hi: int) -> bool:
    """Whether ``records`` hold every offset of [lo, hi): nothing cleaned, no marker, no gap."""
    if hi <= lo:
        return not records
    return len(records) == hi - lo and records[0].offset == lo and records[-1].offset == hi - 1
