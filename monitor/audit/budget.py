"""The audit's read budget per cluster, and the order its content checks run in: pure.

``ReadBudget`` is a token bucket in bytes per second. A read's cost is known only
after it (the records it returned), so a read may overdraw the bucket; the next one
waits until it is positive again, which keeps the average at the rate. Loss windows
(``book.Window``) are read whatever the balance, as their syncs reveal them: they are
small, and a dropped record must be named within one round; the content checks then
wait for the bucket to refill.

One bucket per cluster is shared by every flow that reads it (as source or as target),
so a cluster is read at most at the budget however many flows touch it; the flows'
rounds run in threads of their own, hence the lock.

``ContentOrder`` walks the partitions round-robin, alternating each partition's
newest unchecked stretch (what was just copied) and its oldest (what retention will
take first), so every partition and both ends move even when the budget is far
smaller than the flow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: default read budget per cluster, bytes per second (docs/audit.md says why this figure)
DEFAULT_BUDGET = 512 * 1024


class ReadBudget:
    def __init__(self, bytes_per_second: float | None, *, burst_seconds: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = bytes_per_second
        self.capacity = None if bytes_per_second is None else bytes_per_second * burst_seconds
        self.clock = clock
        self._balance = self.capacity or 0.0
        self._at = clock()
        self.spent = 0
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self.clock()
        if self.rate is not None:
            self._balance = min(self.capacity, self._balance + (now - self._at) * self.rate)
        self._at = now

    def available(self) -> bool:
        if self.rate is None:
            return True
        with self._lock:
            self._refill()
            return self._balance > 0

    def spend(self, nbytes: int) -> None:
        with self._lock:
            self._refill()
            self.spent += nbytes
            if self.rate is not None:
                self._balance -= nbytes

    def seconds_until_available(self) -> float:
        if self.rate is None:
            return 0.0
        with self._lock:
            self._refill()
            return 0.0 if self._balance > 0 else -self._balance / self.rate


def cluster_budgets(clusters, bytes_per_second: float | None, **kw) -> dict[str, ReadBudget]:
    """One ReadBudget per cluster name, for every flow that reads it."""
    return {c: ReadBudget(bytes_per_second, **kw) for c in sorted(set(clusters))}


class BudgetShare:
    """One flow's side of a cluster's bucket: it spends on the bucket and counts its own reads
    (``spent``), where the bucket counts every flow's."""

    def __init__(self, bucket: ReadBudget) -> None:
        self.bucket = bucket
        self.spent = 0

    def available(self) -> bool:
        return self.bucket.available()

    def spend(self, nbytes: int) -> None:
        self.bucket.spend(nbytes)
        self.spent += nbytes


def flow_budgets(source: str, target: str, budget: float | None,
                 shared: dict[str, ReadBudget] | None) -> dict[str, BudgetShare]:
    """A flow's "source" and "target" sides: on ``shared``'s buckets of those clusters
    (``cluster_budgets``), or, without it, on buckets of the flow's own."""
    buckets = shared if shared is not None else {source: ReadBudget(budget), target: ReadBudget(budget)}
    return {"source": BudgetShare(buckets[source]), "target": BudgetShare(buckets[target])}


class ContentOrder:
    """Which partition's which end comes next: ``next(keys_with_work)`` -> (key, newest?)."""

    def __init__(self) -> None:
        self._turn = 0
        self._newest: dict = {}

    def peek(self, keys: list) -> tuple[object, bool] | None:
        """What ``next`` returns, without taking the turn."""
        if not keys:
            return None
        key = keys[self._turn % len(keys)]
        return key, self._newest.get(key, True)

    def next(self, keys: list) -> tuple[object, bool] | None:
        if not keys:
            return None
        key = keys[self._turn % len(keys)]
        self._turn += 1
        newest = self._newest.get(key, True)
        self._newest[key] = not newest
        return key, newest
