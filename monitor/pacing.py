"""Python work on the monitor's event loop, in short steps.

The monitor's heavy Python work (evaluating every partition, comparing the end offsets
read, writing the /metrics text) runs on the event loop as generators that yield every
STEP_SECONDS of work, with the loop free in between: /healthz, the other collectors and
requests get through at least that often. Worker threads are kept for what releases the
GIL (librdkafka calls, file reads): Python work in a thread holds the GIL against the
loop in 5 ms slices for as long as it runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Protocol, TypeVar

#: The work between two pauses of a stepped generator: the event loop answers /healthz,
#: /metrics and the collectors at least this often (plus one item's work).
STEP_SECONDS = 0.004
#: Items (partitions, groups) between two reads of the clock.
_CHECK_EVERY = 32


class Pacer:
    """Says when the running step has used its time, so every pass over the partitions pauses
    by time, not by count: a pass that is cheap for idle partitions runs in few steps, one
    that is costly (partitions whose figures moved, a garbage collection in the middle) in
    many. The clock is read every _CHECK_EVERY items; a step's time counts from the first
    read after the pause, so the time spent paused is not charged to the next step."""

    __slots__ = ("clock", "budget", "until", "count", "paused")

    def __init__(self, clock: Callable[[], float], budget: float) -> None:
        self.clock, self.budget = clock, budget
        self.until, self.count, self.paused = clock() + budget, 0, False

    def due(self) -> bool:
        self.count += 1
        if self.count % _CHECK_EVERY:
            return False
        now = self.clock()
        if self.paused:
            self.until, self.paused = now + self.budget, False
            return False
        if now >= self.until:
            self.paused = True
            return True
        return False


T = TypeVar("T")


def finish(steps: Generator[None, None, T]) -> T:
    """Drive ``steps`` to its end in one go (no event loop); its value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


class StepMeter(Protocol):
    """Told when each step of a stepped generator starts and ends (the pauses are in neither)."""

    def started(self) -> None: ...

    def ended(self) -> None: ...


async def run_in_steps(steps: Generator[None, None, T], meter: StepMeter | None = None) -> T:
    """Drive ``steps`` to its end, letting the event loop run at each pause; its value."""
    while True:
        if meter is not None:
            meter.started()
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        finally:
            if meter is not None:
                meter.ended()
        await asyncio.sleep(0)
