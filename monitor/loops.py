"""The monitor's periodic loops: round after round, with one policy for a round that fails.

Every loop of the monitor (the polling collectors, the reachability checks, the
evaluator, the web config reload, the topic tails) repeats a *round*. A round that
raises is logged and the loop goes on with the next one: the failure is a warning,
and an error once ``ESCALATE_AFTER`` rounds in a row have failed (a blip is not worth
waking anyone, a loop that keeps failing is); the first round that works again says
so. Failures the loop's own code already reports (an unreachable cluster: the cluster
client records it in the state and logs the change) are ``expected``: neither logged
nor counted.

``RoundFailures`` is that policy; ``repeat`` runs a loop on the event loop with it,
``repeat_in_thread`` in a thread of its own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable

#: Rounds in a row that must fail before a loop's failure is logged as an error, not a warning.
ESCALATE_AFTER = 3


class RoundFailures:
    """Logs the failed rounds of one loop: ``what`` the loop does names it in each line."""

    def __init__(self, what: str, log: logging.Logger, *, extra: dict | None = None,
                 expected: tuple[type[BaseException], ...] = ()) -> None:
        self.what = what
        self.log = log
        self.extra = extra  # fields for every line (--log-format json), e.g. the flow
        self.expected = expected
        self.in_a_row = 0

    def succeeded(self) -> None:
        if self.in_a_row:
            self.log.info("%s works again after %d failed round%s", self.what, self.in_a_row,
                          "" if self.in_a_row == 1 else "s", extra=self.extra)
            self.in_a_row = 0

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, self.expected):
            return
        self.in_a_row += 1
        level = logging.ERROR if self.in_a_row >= ESCALATE_AFTER else logging.WARNING
        self.log.log(level, "%s failed%s", self.what, f" ({self.in_a_row} rounds in a row)" if self.in_a_row > 1
                     else "", exc_info=exc, extra=self.extra)


async def repeat(run_round: Callable[[], Awaitable[object]], pause: float | Callable[[float], float],
                 failures: RoundFailures) -> None:
    """Await ``run_round()``, then sleep ``pause`` seconds (or ``pause(seconds the round took)``), until cancelled."""
    while True:
        started = time.monotonic()
        try:
            await run_round()
        except Exception as exc:
            failures.failed(exc)
        else:
            failures.succeeded()
        took = time.monotonic() - started
        await asyncio.sleep(pause(took) if callable(pause) else pause)


def repeat_in_thread(run_round: Callable[[], object], stop: threading.Event, failures: RoundFailures, *,
                     after_failure: float = 1.0) -> None:
    """Call ``run_round()`` in this thread until ``stop`` is set; the round paces itself (a poll with a
    timeout). After a failed round it waits ``after_failure``: one that fails at once must not spin."""
    while not stop.is_set():
        try:
            run_round()
        except Exception as exc:
            failures.failed(exc)
            stop.wait(after_failure)
        else:
            failures.succeeded()
