"""Components that start in order and stop in reverse: the lifecycle of a long-running process.

A *component* is anything with ``start()`` and ``stop(timeout)``:

- ``start()`` either works or raises; a start that raises leaves nothing behind that
  ``stop`` would have to undo (the component cleans up its own half-done start);
- ``stop(timeout)`` ends what ``start`` began and returns within about ``timeout``
  seconds; it is only called on a component whose ``start`` returned.

``Components`` runs an ordered list of them, the order being the one in which they depend
on each other (a component uses only those before it):

- ``start()`` starts each in list order. When one raises, the ones already started are
  stopped in reverse order and the error is raised again: nothing of a failed start keeps
  running;
- ``stop()`` stops the started ones in reverse order, each with its own timeout. A stop
  that raises is logged and the others still stop; calling ``stop()`` again does nothing.

``AsyncComponents`` is the same for an asyncio program: its components' ``start`` and
``stop`` may be coroutines (``AsyncComponent``) or plain calls, both run on the event loop.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

#: The time a component is given to stop unless ``add`` says otherwise.
DEFAULT_STOP_TIMEOUT = 10.0


class Component(Protocol):
    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...


class AsyncComponent(Protocol):
    async def start(self) -> None: ...

    async def stop(self, timeout: float) -> None: ...


C = TypeVar("C")


@dataclass(frozen=True)
class _Entry:
    component: Any
    timeout: float
    name: str


class _Ordered:
    """What both coordinators share: the ordered list, the started prefix of it, the stop log."""

    def __init__(self, components: Iterable[Any] = (), *, timeout: float = DEFAULT_STOP_TIMEOUT,
                 logger: logging.Logger | None = None) -> None:
        self.timeout = timeout
        self._log = logger or log
        self._entries: list[_Entry] = []
        self._started: list[_Entry] = []
        for component in components:
            self.add(component)

    def add(self, component: C, *, timeout: float | None = None, name: str | None = None) -> C:
        """Append ``component`` (started after the ones before it, stopped before them); returns it."""
        self._entries.append(_Entry(component, self.timeout if timeout is None else timeout,
                                    name or type(component).__name__))
        return component

    @property
    def names(self) -> list[str]:
        """The components in start order."""
        return [e.name for e in self._entries]

    @property
    def started(self) -> list[str]:
        """The components started and not stopped yet, in start order."""
        return [e.name for e in self._started]

    def _to_start(self) -> list[_Entry]:
        # the started ones are always a prefix of the list: start goes in order, stop takes them all
        return self._entries[len(self._started):]

    def _stop_failed(self, entry: _Entry, exc: Exception) -> None:
        self._log.error("stopping %s failed", entry.name, exc_info=exc)


class Components(_Ordered):
    """An ordered list of ``Component``: started in order, stopped in reverse."""

    def start(self) -> None:
        """Start the components not started yet, in order; if one raises, stop the started ones and re-raise."""
        for entry in self._to_start():
            try:
                entry.component.start()
            except BaseException:
                self.stop()
                raise
            self._started.append(entry)

    def stop(self) -> None:
        """Stop the started components in reverse order; a failure is logged, not raised."""
        while self._started:
            entry = self._started.pop()
            try:
                entry.component.stop(entry.timeout)
            except Exception as exc:
                self._stop_failed(entry, exc)


async def _done(result: Any) -> None:
    if inspect.isawaitable(result):
        await result


class AsyncComponents(_Ordered):
    """``Components`` on an event loop: each start and stop may be a coroutine or a plain call."""

    async def start(self) -> None:
        """As ``Components.start``; a cancelled start unwinds as well."""
        for entry in self._to_start():
            try:
                await _done(entry.component.start())
            except BaseException:
                await self.stop()
                raise
            self._started.append(entry)

    async def stop(self) -> None:
        """As ``Components.stop``."""
        while self._started:
            entry = self._started.pop()
            try:
                await _done(entry.component.stop(entry.timeout))
            except Exception as exc:
                self._stop_failed(entry, exc)
