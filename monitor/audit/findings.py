"""What the audit found and counted, per topic: pure bookkeeping.

``Tally`` holds the counts behind the metrics (verified, missing, mismatched,
duplicated, expired, unverifiable per topic), the first findings in full, and a
ledger by minute of records replicated and checked, from which the coverage of the
last hour is read.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass

COUNTS = ("verified", "missing", "mismatched", "duplicated", "expired", "unverifiable")
#: kind of finding -> the count it adds to
COUNTED_AS = {"missing": "missing", "mismatched": "mismatched", "foreign": "mismatched",
              "duplicated": "duplicated", "expired": "expired", "unverifiable": "unverifiable"}
#: findings kept in full per flow; the counts go on
FINDINGS_KEPT = 200
HOUR_MINUTES = 60


@dataclass(frozen=True)
class Finding:
    kind: str                 # missing, mismatched, foreign, duplicated, expired, unverifiable
    topic: str                # the source topic
    partition: int
    source_offset: int | None
    target_offset: int | None
    count: int                # records from those offsets on (a range: 1 or more)
    detail: str
    first_seen: float         # epoch seconds

    def key(self) -> tuple:
        return self.kind, self.topic, self.partition, self.source_offset, self.target_offset

    def to_json(self) -> dict:
        return asdict(self)


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))
        self.findings: list[Finding] = []
        self._keys: set[tuple] = set()
        self.ledger: dict[int, list[int]] = {}   # minute -> [replicated, loss checked, content checked]

    def add(self, finding: Finding) -> bool:
        """Count a finding (once: a finding seen again is not counted again)."""
        if finding.key() in self._keys:
            return False
        self._keys.add(finding.key())
        self.counts[finding.topic][COUNTED_AS[finding.kind]] += finding.count
        if len(self.findings) < FINDINGS_KEPT:
            self.findings.append(finding)
        return True

    def verified(self, topic: str, n: int, now: float) -> None:
        self.counts[topic]["verified"] += n
        self._note(now, 2, n)

    def replicated(self, n: int, now: float) -> None:
        self._note(now, 0, n)

    def loss_checked(self, n: int, now: float) -> None:
        self._note(now, 1, n)

    def _note(self, now: float, column: int, n: int) -> None:
        if n <= 0:
            return
        minute = int(now // 60)
        self.ledger.setdefault(minute, [0, 0, 0])[column] += n
        for old in [m for m in self.ledger if m <= minute - HOUR_MINUTES]:
            del self.ledger[old]

    def coverage(self, now: float) -> dict[str, float | None]:
        """Checked records over replicated records of the last hour (None: nothing replicated)."""
        since = int(now // 60) - HOUR_MINUTES
        rows = [v for m, v in self.ledger.items() if m > since]
        replicated = sum(r[0] for r in rows)
        if replicated == 0:
            return {"loss": None, "content": None}
        return {"loss": min(1.0, sum(r[1] for r in rows) / replicated),
                "content": min(1.0, sum(r[2] for r in rows) / replicated)}

    def checked_last_hour(self, now: float) -> int:
        since = int(now // 60) - HOUR_MINUTES
        return sum(v[2] for m, v in self.ledger.items() if m > since)

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(COUNTS, 0)
        for c in self.counts.values():
            for k, v in c.items():
                out[k] += v
        return out

    def to_json(self) -> dict:
        return {"counts": dict(self.counts), "findings": [f.to_json() for f in self.findings],
                "keys": [list(k) for k in self._keys], "ledger": {str(k): v for k, v in self.ledger.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "Tally":
        t = cls()
        for topic, c in data.get("counts", {}).items():
            t.counts[topic].update(c)
        t.findings = [Finding(**f) for f in data.get("findings", [])]
        t._keys = {tuple(k) for k in data.get("keys", [])}
        t.ledger = {int(k): v for k, v in data.get("ledger", {}).items()}
        return t
