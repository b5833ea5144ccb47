"""CPU seconds and peak RSS of a process tree, sampled while a system runs.

psutil is used because summing /proc of a JVM plus its Python workers by hand is
exactly the kind of code worth not writing twice.
"""

from __future__ import annotations

import threading

import psutil


class TreeSampler(threading.Thread):
    """Samples the process trees rooted at ``pids`` every ``interval`` seconds."""

    def __init__(self, pids: list[int], interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.roots = [psutil.Process(p) for p in pids]
        self.interval = interval
        self.cpu: dict[int, float] = {}  # pid -> latest user+system seconds
        self.peak_rss = 0
        self._halt = threading.Event()

    def _tree(self) -> list[psutil.Process]:
        procs = []
        for root in self.roots:
            try:
                procs.append(root)
                procs.extend(root.children(recursive=True))
            except psutil.Error:
                pass
        return procs

    def sample(self) -> None:
        rss = 0
        for p in self._tree():
            try:
                t = p.cpu_times()
                self.cpu[p.pid] = t.user + t.system + t.children_user + t.children_system
                rss += p.memory_info().rss
            except psutil.Error:
                pass
        self.peak_rss = max(self.peak_rss, rss)

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self.sample()
        self._halt.set()
        self.join(5)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())
