"""The longest pause of Python's garbage collector, for the monitor's own diagnostics.

A collection stops every thread, the event loop included, so a long one shows as a slow
``/healthz`` and a long evaluation step that the evaluator did not cause. ``gc.callbacks``
is told when each collection starts and stops; this keeps the longest since it was last
asked. Installed once per process; the cost is two clock reads per collection.
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
