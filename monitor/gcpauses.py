"""Python's garbage collector in the monitor: its longest pause, and keeping it short.

A collection stops every thread, the event loop included, so a long one shows as a slow
``/healthz`` and a long evaluation step that the evaluator did not cause. ``gc.callbacks``
is told when each collection starts and stops; ``GcPauses`` keeps the longest since it was
last asked. Installed once per process; the cost is two clock reads per collection.

At 10,000 partitions the monitor's state is a few hundred thousand long-lived objects,
and a full collection walks them all: 100-280 ms with every thread stopped. ``settle``
freezes them (``gc.freeze``: later collections skip them) once the state is built, and
again when the partitions watched have grown by a quarter since (new topics), after one
full collection that clears the garbage of the start-up. Below MIN_PARTITIONS a full
collection is short and nothing is frozen. What is frozen is freed as usual by reference
counting when it goes (a deleted topic's state); only garbage in reference cycles among
frozen objects would stay until the next freeze's collection.
"""

from __future__ import annotations

import gc
import threading
import time


class GcPauses:
    def __init__(self) -> None:
        self._started = 0.0
        self._longest = 0.0
        self._lock = threading.Lock()
        self._installed = False

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started:
            took = time.perf_counter() - self._started
            self._started = 0.0
            if took > self._longest:
                self._longest = took

    def install(self) -> None:
        with self._lock:
            if not self._installed:
                gc.callbacks.append(self._callback)
                self._installed = True

    def take_longest(self) -> float | None:
        """The longest pause since the last call (None when not installed)."""
        if not self._installed:
            return None
        longest, self._longest = self._longest, 0.0
        return longest


gc_pauses = GcPauses()


class GcSettler:
    """Freezes the long-lived state once it is built, and again after it grew by REFREEZE_GROWTH."""

    REFREEZE_GROWTH = 1.25
    MIN_PARTITIONS = 2000

    def __init__(self) -> None:
        self.frozen_at_size = 0
        self.freezes = 0

    def settle(self, size: int) -> bool:
        """``size``: partitions watched now. True when it froze (one full collection first)."""
        if size < self.MIN_PARTITIONS or size < self.frozen_at_size * self.REFREEZE_GROWTH:
            return False
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.frozen_at_size = size
        self.freezes += 1
        return True
