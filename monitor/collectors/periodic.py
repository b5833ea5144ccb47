"""The refresh loop every polling collector shares."""

from __future__ import annotations

import logging
import time
from typing import Awaitable, Callable

from monitor.collectors.cluster import ClusterUnavailable
from monitor.loops import RoundFailures, repeat
from monitor.state import MonitorState


async def refresh_forever(refresh: Callable[[], Awaitable[None]], interval: float, state: MonitorState,
                          flow: str, collector: str, what: str, log: logging.Logger,
                          idle_ratio: float = 0.0, idle_max: float = float("inf")) -> None:
    """Call ``refresh`` every ``interval`` seconds and record how long each round took.

    ``idle_ratio``: after a round, wait at least that many times as long as it took (but
    never more than ``idle_max`` on that account), so a
    refresh that got slow (many partitions, a loaded cluster) spaces itself out instead of
    running back to back.

    An unreachable cluster is already shown by the cluster client; any other failure is
    logged as ``what`` failed (monitor.loops) and the loop goes on.
    """
    async def timed() -> None:
        started = time.monotonic()
        try:
            await refresh()
        finally:
            state.record_duration(flow, collector, time.monotonic() - started)

    await repeat(timed, lambda took: max(0.05, interval - took, min(idle_ratio * took, idle_max)),
                 RoundFailures(what, log, extra={"flow": flow}, expected=(ClusterUnavailable,)))
