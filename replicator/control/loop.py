"""The one loop every driver-side task of the replicator runs in: heartbeats, checkpoints,
group offset sync, topic config and ACL sync, and the data path's topic refresh and
catch-up progress (replicator.service starts them all).

``prepare()`` (make a topic, read a first state) is tried until it works or the run
stops, every ``PREPARE_RETRY_SECONDS``: a target that is down at start-up, or an ACL
granted later, delays a task but never switches it off. The first failure is logged
at error level, the repeats at debug (the same failure every ten seconds tells an
operator nothing new), and the recovery once. Then ``step()`` runs once per
``interval``; a failed round is logged and the next one tries again, so a loop never
takes the run down. A cluster that cannot answer for a moment (a broker of three
killed, a group coordinator moving) fails a round or two: such failures are warnings
until they last ``ROUND_FAILURES_ERROR`` rounds and ``ROUND_FAILURE_ERROR_SECONDS``
in a row, then errors; the recovery is said once. A failure that is no cluster error
(a bug) is an error at once, with its traceback. ``close()`` runs when the loop ends,
however it ends.
"""

from __future__ import annotations

import logging
import threading
import time

from sparkmirror.errors import ClusterError, SparkmirrorError

log = logging.getLogger("sparkmirror.control")

PREPARE_RETRY_SECONDS = 10.0
#: A loop's failing rounds are errors once they last this many rounds and seconds in a row.
ROUND_FAILURES_ERROR = 3
ROUND_FAILURE_ERROR_SECONDS = 30.0


def run_loop(name: str, interval: float, step, stop: threading.Event, prepare=None,
             ready: threading.Event | None = None, close=None, retry_seconds: float | None = None,
             wait_first: bool = False) -> None:
    """``prepare()`` until it works, then ``step()`` every ``interval`` seconds until ``stop``, then ``close()``.

    ``ready`` is set once ``prepare()`` worked (other loops may wait for it);
    ``retry_seconds``: the wait between attempts of ``prepare()`` (``PREPARE_RETRY_SECONDS``);
    ``wait_first``: the first round comes one ``interval`` after the start, not at once (the
    start-up already did one, e.g. the first topic refresh).
    """
    try:
        _prepare(name, stop, prepare, PREPARE_RETRY_SECONDS if retry_seconds is None else retry_seconds)
        if ready is not None:
            ready.set()  # also when the run stopped first: nobody waits for a loop that will not run
        if wait_first:
            stop.wait(interval)
        _rounds(name, interval, step, stop)
    finally:
        if close is not None:
            try:
                close()
            except Exception as exc:
                log.debug("%s: close: %r", name, exc)


def _prepare(name: str, stop: threading.Event, prepare, retry_seconds: float) -> None:
    """Returns once ``prepare()`` worked (or there is none), or the run stopped."""
    failures = 0
    while prepare is not None and not stop.is_set():
        try:
            prepare()
        except Exception as exc:
            failures += 1
            if failures > 1:
                log.debug("%s: still cannot start (attempt %d): %r", name, failures, exc)
            elif isinstance(exc, SparkmirrorError):
                log.error("%s: cannot start yet: %s (retrying every %.0f s)", name, exc, retry_seconds)
            else:
                log.exception("%s: cannot start yet: %r (retrying every %.0f s)", name, exc, retry_seconds)
            stop.wait(retry_seconds)
            continue
        if failures:
            log.info("%s: started after %d failed attempt%s", name, failures, "" if failures == 1 else "s")
        return


def _rounds(name: str, interval: float, step, stop: threading.Event) -> None:
    failed, failing_since = 0, 0.0
    while not stop.is_set():
        started = time.monotonic()
        try:
            step()
        except Exception as exc:
            failed, failing_since = failed + 1, failing_since if failed else started
            _say_failed(name, exc, failed, started - failing_since)
        else:
            if failed:
                log.info("%s: working again after %d failed round%s (%.0f s)", name, failed,
                         "" if failed == 1 else "s", started - failing_since)
            failed = 0
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def _say_failed(name: str, exc: Exception, failed: int, for_seconds: float) -> None:
    """A cluster error is a warning until it lasts; another error of ours is an error; anything else
    (a bug, a client failure) an error with its traceback. The loop lives on in every case."""
    if isinstance(exc, ClusterError):
        lasting = failed >= ROUND_FAILURES_ERROR and for_seconds >= ROUND_FAILURE_ERROR_SECONDS
        log.log(logging.ERROR if lasting else logging.WARNING, "%s: round failed: %s%s", name, exc,
                f" ({failed} rounds in a row, {for_seconds:.0f} s)" if failed > 1 else "")
    elif isinstance(exc, SparkmirrorError):
        log.error("%s: round failed: %s", name, exc)
    else:
        log.exception("%s: round failed: %r", name, exc)
