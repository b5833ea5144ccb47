"""How fast a partition (or a flow) catches up, and when it will be caught up.

Pure arithmetic over the positions the monitor already samples: each partition
keeps a short window of samples (``--window`` of them, one per ``--interval``:
the trend window of the STALL rule), each with the replicated position and the
source end offset. Over that window

    copy rate   = (newest position - oldest position) / elapsed
    source rate = (newest end offset - oldest end offset) / elapsed
    net rate    = copy rate - source rate   (how fast the backlog shrinks)

and the time to catch up is the records lag divided by the net rate. States:

- ``caught-up``: no lag; ETA 0.
- ``keeping-up``: the backlog is no more than the copy moved over the window (a
  record waits less than the window; under steady traffic the lag never reaches
  0, and the net rate is noise around 0). ETA = lag / copy rate: the time to copy
  what waits now.
- ``catching-up``: the net rate is positive; ETA = lag / net rate.
- ``not-catching-up``: lag, and the copy does not gain on the source (net rate
  <= 0); no ETA (``None``; +Inf on /metrics). Never a division by zero or by a
  negative rate.
- ``unknown``: lag unknown, or fewer than two samples of a known position.

A flow is caught up when its slowest partition is: its ETA is the largest of
its partitions' ETAs, ``not-catching-up`` if any lagging partition is; its
rates are the sums of its partitions' rates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from monitor.readiness import seconds_text

CAUGHT_UP = "caught-up"
KEEPING_UP = "keeping-up"
CATCHING_UP = "catching-up"
NOT_CATCHING_UP = "not-catching-up"
UNKNOWN = "unknown"

#: Worst last: the flow's state is the worst of its lagging partitions'.
STATES: tuple[str, ...] = (UNKNOWN, CAUGHT_UP, KEEPING_UP, CATCHING_UP, NOT_CATCHING_UP)
_RANK = {state: i for i, state in enumerate(STATES)}


class CatchUp(NamedTuple):
    """(state, copy rate, source rate, ETA): a plain tuple, cheap to make for 10,000 partitions."""

    state: str
    copy_rate: float | None = None     # records/s the replicated position advanced
    source_rate: float | None = None   # records/s the source end offset advanced
    eta_seconds: float | None = None   # None: unknown, or not catching up

    @property
    def net_rate(self) -> float | None:
        """Records/s the backlog shrinks (negative: it grows); None when unknown."""
        if self.copy_rate is None or self.source_rate is None:
            return None
        return self.copy_rate - self.source_rate


def rates(samples: Sequence[tuple[float, int | None, int | None]]) -> tuple[float, float, float] | None:
    """(copy rate, source rate, elapsed seconds) over ``(at, position, source end)`` samples, oldest first.

    Only samples with a known position and end count (the oldest and the newest of
    them); None with fewer than two or no time between them. A position or end
    that went backwards (topic re-created) gives rate 0, never a negative copy.
    """
    if len(samples) < 2:
        return None
    (t0, p0, e0), (t1, p1, e1) = samples[0], samples[-1]
    if p0 is None or e0 is None or p1 is None or e1 is None:  # rare: scan for the known ones
        known = [s for s in samples if s[1] is not None and s[2] is not None]
        if len(known) < 2:
            return None
        (t0, p0, e0), (t1, p1, e1) = known[0], known[-1]
    elapsed = t1 - t0
    if elapsed <= 0:
        return None
    return max(0, p1 - p0) / elapsed, max(0, e1 - e0) / elapsed, elapsed


def partition(samples: Sequence[tuple[float, int | None, int | None]], lag: int | None) -> CatchUp:
    """The catch-up of one partition with records lag ``lag`` now, from its sample window."""
    if lag is None:
        return CatchUp(UNKNOWN)
    measured = rates(samples)
    if lag == 0:
        return CatchUp(CAUGHT_UP, *(measured[:2] if measured else (None, None)), 0.0)
    if measured is None:
        return CatchUp(UNKNOWN)
    copy, source, elapsed = measured
    if copy > 0 and lag <= copy * elapsed:
        return CatchUp(KEEPING_UP, copy, source, lag / copy)
    net = copy - source
    if net > 0:
        return CatchUp(CATCHING_UP, copy, source, lag / net)
    return CatchUp(NOT_CATCHING_UP, copy, source, None)


def combine(parts: Iterable[tuple[str, float | None, float | None, float | None]]) -> CatchUp:
    """A flow's catch-up from its partitions' (CatchUp or plain tuples; see the module docstring)."""
    rank = _RANK
    worst, copy, source, eta, measured = -1, 0.0, 0.0, 0.0, False  # one pass: 10,000 partitions are common
    for state, copy_rate, source_rate, eta_seconds in parts:
        if state == UNKNOWN:
            continue
        worst = max(worst, rank[state])
        if copy_rate is not None:
            measured = True
            copy += copy_rate
            source += source_rate or 0.0
        if eta_seconds is not None and eta_seconds > eta:
            eta = eta_seconds
    if worst < 0:
        return CatchUp(UNKNOWN)
    state = STATES[worst]
    return CatchUp(state, copy if measured else None, source if measured else None,
                   None if state == NOT_CATCHING_UP else eta)


def text(c: CatchUp) -> str:
    """In words, for reasons and the status page."""
    if c.state == CAUGHT_UP:
        return "caught up"
    if c.state == KEEPING_UP:
        return f"keeping up: the backlog is copied in about {seconds_text(c.eta_seconds)}"
    if c.state == CATCHING_UP:
        return (f"catching up at {c.net_rate:,.1f} records/s net: caught up in about "
                f"{seconds_text(c.eta_seconds)}")
    if c.state == NOT_CATCHING_UP:
        return (f"not catching up: copying {c.copy_rate:,.1f} records/s while the source adds "
                f"{c.source_rate:,.1f} records/s")
    return "catch-up rate not measured yet"
