"""The one way the tests wait: poll a condition until it holds or a deadline passes.

``wait_until(condition, timeout)`` calls ``condition()`` every ``interval`` seconds and
returns its first truthy value. When ``timeout`` seconds have passed without one, the
wait fails with an AssertionError that says what it waited for (``what``), for how long,
and the last value or exception the condition gave; ``details()`` adds what else helps
(a log's tail). ``alive()``, asked after every poll that found nothing, ends the wait at
once when it is falsy: a process that exited will never make the condition true.

A condition that may fail while the system settles (a topic just created, a server not
listening yet) names those exceptions in ``ignoring``; they count as "not yet" and the
last one is shown, any other exception fails the test at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: exception types, or a function saying which exceptions mean "not yet"
Ignoring = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]

_SHOWN = 1500  # characters of the last value's repr in a failure message


def wait_until(condition: Callable[[], T], timeout: float, *, interval: float = 0.5, what: str = "the condition",
               ignoring: Ignoring = (), alive: Callable[[], object] | None = None,
               details: Callable[[], str] | None = None) -> T:
    """Poll ``condition()`` until it returns a truthy value, and return that value.

    The condition runs at least once, and once more at the deadline. ``interval``: seconds
    between two polls. ``what``: what the wait is for, in the failure message. ``ignoring``:
    exception types (or a predicate on the exception) that count as "not yet". ``alive``:
    checked after each poll that found nothing; once falsy, the wait fails at once.
    ``details``: called when the wait fails, its text appended to the message.
    """
    started = time.monotonic()
    deadline = started + timeout
    polls = 0
    last_value: object = None
    last_error: BaseException | None = None
    while True:
        polls += 1
        try:
            value = condition()
        except BaseException as exc:
            if not _ignored(exc, ignoring):
                raise
            last_error = exc
        else:
            if value:
                return value
            last_value, last_error = value, None
        if alive is not None and not alive():
            raise AssertionError(_message(f"gave up waiting for {what} after {time.monotonic() - started:.1f} s "
                                          f"of {timeout:g} s: what it waits on is no longer running", polls, last_value,
                                          last_error, details)) from last_error
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(_message(f"timed out after {timeout:g} s waiting for {what}", polls, last_value,
                                          last_error, details)) from last_error
        time.sleep(min(interval, remaining))


def _ignored(exc: BaseException, ignoring: Ignoring) -> bool:
    if isinstance(ignoring, (type, tuple)):
        return isinstance(exc, ignoring)
    return isinstance(exc, Exception) and bool(ignoring(exc))


def _message(head: str, polls: int, last_value: object, last_error: BaseException | None,
             details: Callable[[], str] | None) -> str:
    if last_error is not None:
        last = f"last exception: {type(last_error).__name__}: {last_error}"
    else:
        shown = repr(last_value)
        last = f"last value: {shown[:_SHOWN]}{' ...' if len(shown) > _SHOWN else ''}"
    text = f"{head} ({polls} polls); {last}"
    if details is not None:
        try:
            text += f"\n{details()}"
        except Exception as exc:  # the message must not hide the timeout
            text += f"\n(no details: {type(exc).__name__}: {exc})"
    return text
