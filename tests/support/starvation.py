"""How long a process's threads waited for a core: the kernel's run-queue wait, sampled over time.

``/proc/<pid>/task/<tid>/schedstat`` holds, per thread, the nanoseconds it ran and the
nanoseconds it was runnable but waited on a run queue. On an idle machine a process that
wants a core gets one at once; on an oversubscribed one (a loaded CI machine, two cores
shared by brokers, JVMs and the test itself) its work is held back by that much. A
measurement of the process's timeliness can then tell "late because of the machine" from
"late because of the process" (jHiccup draws the same line for the JVM).
"""

from __future__ import annotations

import bisect
import os
import threading
import time


def run_queue_wait(pid: int) -> float:
    """Seconds the live threads of ``pid`` have waited on a run queue so far (0 if it is gone)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total / 1e9


class StarvationMeter:
    """Samples ``run_queue_wait(pid)`` every ``every`` seconds in a thread; ``waited(t0, t1)`` says
    how much of it fell between two wall-clock moments."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every = pid, every
        self._at: list[float] = []
        self._wait: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"starvation-{pid}", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = run_queue_wait(self.pid)
            # a thread that ended takes its count with it: the sum never goes down here
            self._wait.append(max(wait, self._wait[-1]) if self._wait else wait)
            self._at.append(time.time())
            self._stop.wait(self.every)

    def _value(self, at: float) -> float:
        i = bisect.bisect_right(self._at, at)
        return self._wait[i - 1] if i else (self._wait[0] if self._wait else 0.0)

    def waited(self, start: float, end: float) -> float:
        """Run-queue wait of the process's threads, summed, between ``start`` and ``end`` (to the
        sampling step)."""
        return max(0.0, self._value(end) - self._value(start))

    def __enter__(self) -> "StarvationMeter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
