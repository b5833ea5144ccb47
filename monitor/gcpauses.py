"""Python's garbage collector in the monitor: its longest pause, and keeping it short.

A collection stops every thread, the event loop included, so a long one shows as a slow
``/healthz`` and a long evaluation step that the evaluator did not cause. ``gc.callbacks``
is told when each collection starts and stops; ``GcPauses`` keeps the longest since it was
last asked. Installed once per process; the cost is two clock reads per collection.

A large monitor's state is many long-lived objects per partition, and a full collection
walks them all with every thread stopped (bench/NOTES.md, Monitor at scale). ``settle``
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
        self._started_cpu: float | None = None
        self._longest = 0.0
        self._longest_cpu: float | None = None
        self._lock = threading.Lock()
        self._installed = False

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            # The CPU time of full collections too (the long ones; a thread's CPU clock is a
            # system call, too dear for the thousands of young collections a second): on a busy
            # machine a pause's wall time is mostly its thread waiting for a core, GIL held.
            self._started = time.perf_counter()
            self._started_cpu = time.thread_time() if info.get("generation") == 2 else None
        elif self._started:
            took = time.perf_counter() - self._started
            self._started = 0.0
            if took > self._longest:
                self._longest = took
                self._longest_cpu = time.thread_time() - self._started_cpu if self._started_cpu is not None else None

    def install(self) -> None:
        with self._lock:
            if not self._installed:
                gc.callbacks.append(self._callback)
                self._installed = True

    def take_longest(self) -> float | None:
        """The longest pause since the last call (None when not installed)."""
        return self.take()[0]

    def take(self) -> tuple[float | None, float | None]:
        """(wall, CPU time) of the longest pause since the last call (None when not installed;
        the CPU time None when that pause was a young generation's)."""
        if not self._installed:
            return None, None
        longest, cpu = self._longest, self._longest_cpu
        self._longest, self._longest_cpu = 0.0, None
        return longest, cpu


gc_pauses = GcPauses()


class GcSettler:
    """Freezes the long-lived state once it is built, again after it grew by REFREEZE_GROWTH, and
    tops the freeze up once as many new long-lived results as a quarter of it were kept since.

    A refreeze thaws everything first and makes one full collection (the garbage of the
    start-up, or of deleted topics, must not be frozen): it walks the whole state. A top-up
    only collects what is not frozen (what a full collection walks anyway) and freezes what
    survived: the results the evaluator keeps for idle partitions are built after the state
    (their sample windows need two reads), and left unfrozen they made every later full
    collection walk them all again (bench/NOTES.md, Monitor at scale).
    """

    REFREEZE_GROWTH = 1.25
    TOP_UP_SHARE = 0.25
    MIN_PARTITIONS = 2000

    def __init__(self) -> None:
        self.frozen_at_size = 0
        self.freezes = 0
        self.top_ups = 0
        self._kept_since = 0

    def settle(self, size: int, kept: int = 0) -> bool:
        """``size``: partitions watched now; ``kept``: long-lived results built since the last
        call (``FlowState.idle_results_built``). True when it froze or topped up."""
        self._kept_since += kept
        if size < self.MIN_PARTITIONS:
            return False
        if size >= self.frozen_at_size * self.REFREEZE_GROWTH:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.frozen_at_size = size
            self.freezes += 1
            self._kept_since = 0
            return True
        if self._kept_since >= size * self.TOP_UP_SHARE:
            gc.collect()  # the frozen objects are not walked
            gc.freeze()
            self.top_ups += 1
            self._kept_since = 0
            return True
        return False
