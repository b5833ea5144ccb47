"""sparkmirror.lifecycle: components start in order, unwind in reverse when one fails, stop in reverse."""

from __future__ import annotations

import asyncio
import logging

import pytest

from sparkmirror.lifecycle import AsyncComponents, Components


class Part:
    """A component that writes what is done to it into a shared list."""

    def __init__(self, name: str, calls: list, *, fail_start: bool = False, fail_stop: bool = False) -> None:
        self.name, self.calls, self.fail_start, self.fail_stop = name, calls, fail_start, fail_stop

    def start(self) -> None:
        self.calls.append(("start", self.name))
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")

    def stop(self, timeout: float) -> None:
        self.calls.append(("stop", self.name, timeout))
        if self.fail_stop:
            raise RuntimeError(f"{self.name} cannot stop")


class AsyncPart(Part):
    """The same with coroutines, pausing so that the event loop runs in between."""

    async def start(self) -> None:
        await asyncio.sleep(0)
        super().start()

    async def stop(self, timeout: float) -> None:
        await asyncio.sleep(0)
        super().stop(timeout)


def test_start_in_order_and_stop_in_reverse_each_with_its_timeout():
    calls = []
    components = Components([Part("a", calls)], timeout=3.0)
    components.add(Part("b", calls), timeout=1.5)
    components.add(Part("c", calls), name="the c")
    components.start()
    assert components.started == ["Part", "Part", "the c"]
    components.stop()
    assert calls == [("start", "a"), ("start", "b"), ("start", "c"),
                     ("stop", "c", 3.0), ("stop", "b", 1.5), ("stop", "a", 3.0)]
    assert components.started == []
    components.stop()  # again: nothing left to stop
    assert len(calls) == 6


def test_a_failure_in_the_middle_unwinds_the_started_ones_in_reverse_and_is_raised_again():
    calls = []
    components = Components([Part("a", calls), Part("b", calls), Part("c", calls, fail_start=True),
                             Part("d", calls)])
    with pytest.raises(RuntimeError, match="c cannot start"):
        components.start()
    # c's own start failed, so c is not stopped; d never started
    assert calls == [("start", "a"), ("start", "b"), ("start", "c"), ("stop", "b", 10.0), ("stop", "a", 10.0)]
    assert components.started == []
    components.stop()
    assert len(calls) == 5


def test_a_stop_that_raises_is_logged_and_the_others_still_stop(caplog):
    calls = []
    components = Components([Part("a", calls), Part("b", calls, fail_stop=True), Part("c", calls)])
    components.start()
    with caplog.at_level(logging.ERROR, logger="sparkmirror.lifecycle"):
        components.stop()
    assert [c[:2] for c in calls[3:]] == [("stop", "c"), ("stop", "b"), ("stop", "a")]
    [record] = caplog.records
    assert record.getMessage() == "stopping Part failed" and "b cannot stop" in str(record.exc_info[1])


def test_a_stop_failing_while_unwinding_does_not_hide_the_start_failure(caplog):
    calls = []
    components = Components([Part("a", calls), Part("b", calls, fail_stop=True), Part("c", calls, fail_start=True)])
    with caplog.at_level(logging.ERROR, logger="sparkmirror.lifecycle"), pytest.raises(RuntimeError, match="c cannot"):
        components.start()
    assert [c[:2] for c in calls] == [("start", "a"), ("start", "b"), ("start", "c"), ("stop", "b"), ("stop", "a")]
    assert len(caplog.records) == 1


def test_components_added_after_a_start_start_with_the_next_one():
    calls = []
    components = Components([Part("a", calls)])
    components.start()
    components.add(Part("b", calls))
    components.start()
    components.stop()
    assert [c[:2] for c in calls] == [("start", "a"), ("start", "b"), ("stop", "b"), ("stop", "a")]


def test_async_components_take_coroutines_and_plain_calls_alike(caplog):
    calls = []

    async def scenario():
        components = AsyncComponents([AsyncPart("a", calls), Part("b", calls), AsyncPart("c", calls, fail_stop=True),
                                      AsyncPart("d", calls, fail_start=True), Part("e", calls)], timeout=2.0)
        with pytest.raises(RuntimeError, match="d cannot start"):
            await components.start()
        assert components.started == []
        ok = AsyncComponents([AsyncPart("f", calls), Part("g", calls)])
        await ok.start()
        await ok.stop()

    with caplog.at_level(logging.ERROR, logger="sparkmirror.lifecycle"):
        asyncio.run(scenario())
    assert calls == [("start", "a"), ("start", "b"), ("start", "c"), ("start", "d"),
                     ("stop", "c", 2.0), ("stop", "b", 2.0), ("stop", "a", 2.0),
                     ("start", "f"), ("start", "g"), ("stop", "g", 10.0), ("stop", "f", 10.0)]
    assert [r.getMessage() for r in caplog.records] == ["stopping AsyncPart failed"]


def test_a_cancelled_start_unwinds_too():
    """Cancellation (SIGTERM while starting) is no Exception, and must not leave half a process running."""
    calls = []

    class Hangs(AsyncPart):
        async def start(self) -> None:
            await super().start()
            await asyncio.sleep(60)

    async def scenario():
        components = AsyncComponents([AsyncPart("a", calls), Hangs("b", calls)])
        task = asyncio.create_task(components.start())
        while ("start", "b") not in calls:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert calls == [("start", "a"), ("start", "b"), ("stop", "a", 10.0)]
