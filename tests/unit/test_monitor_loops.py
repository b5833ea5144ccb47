"""monitor.loops: a failed round is logged (a warning, an error once ESCALATE_AFTER failed in a row)
and the loop goes on, on the event loop and in a thread alike."""

from __future__ import annotations

import asyncio
import logging
import threading

from monitor.collectors.cluster import ClusterUnavailable
from monitor.loops import ESCALATE_AFTER, RoundFailures, repeat, repeat_in_thread

log = logging.getLogger("tests.monitor.loops")


class Rounds:
    """Rounds that fail with the given exceptions in turn (None: the round works), then work."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.count = 0

    def __call__(self) -> None:
        self.count += 1
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome


def levels(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == log.name]


def test_failures_escalate_to_an_error_and_the_loop_carries_on(caplog):
    failures = [ValueError(f"bug {i}") for i in range(ESCALATE_AFTER + 1)]
    rounds = Rounds(*failures, None, ValueError("again"))

    async def round_() -> None:
        rounds()

    async def go():
        task = asyncio.create_task(repeat(round_, 0.001, RoundFailures("reading things", log, extra={"flow": "a->b"})))
        while rounds.count < len(failures) + 3:
            await asyncio.sleep(0.001)
        task.cancel()

    with caplog.at_level(logging.INFO, logger=log.name):
        asyncio.run(go())
    seen = levels(caplog)
    assert seen[0] == ("WARNING", "reading things failed")
    assert [level for level, _ in seen[:ESCALATE_AFTER + 1]] == \
        ["WARNING"] * (ESCALATE_AFTER - 1) + ["ERROR", "ERROR"]
    assert seen[ESCALATE_AFTER] == ("ERROR", f"reading things failed ({ESCALATE_AFTER + 1} rounds in a row)")
    assert seen[ESCALATE_AFTER + 1] == ("INFO", f"reading things works again after {ESCALATE_AFTER + 1} failed rounds")
    assert seen[ESCALATE_AFTER + 2] == ("WARNING", "reading things failed")  # a new streak starts low
    record = next(r for r in caplog.records if r.name == log.name)
    assert record.flow == "a->b" and isinstance(record.exc_info[1], ValueError)


def test_expected_failures_are_neither_logged_nor_counted(caplog):
    failures = RoundFailures("checking", log, expected=(ClusterUnavailable,))
    with caplog.at_level(logging.INFO, logger=log.name):
        for _ in range(ESCALATE_AFTER + 2):
            failures.failed(ClusterUnavailable("down"))
        failures.succeeded()
    assert levels(caplog) == [] and failures.in_a_row == 0


def test_the_pause_may_depend_on_how_long_the_round_took():
    took = []

    async def go():
        async def slow() -> None:
            await asyncio.sleep(0.02)

        def pause(seconds: float) -> float:
            took.append(seconds)
            return 0.0

        task = asyncio.create_task(repeat(slow, pause, RoundFailures("sleeping", log)))
        while len(took) < 2:
            await asyncio.sleep(0.005)
        task.cancel()

    asyncio.run(go())
    assert all(t >= 0.015 for t in took), took


def test_a_thread_loop_has_the_same_policy_waits_after_a_failure_and_stops_on_its_event(caplog):
    stop = threading.Event()
    rounds = Rounds(*[RuntimeError("broken")] * ESCALATE_AFTER)

    def round_() -> None:
        rounds()
        if rounds.count >= ESCALATE_AFTER + 2:
            stop.set()

    with caplog.at_level(logging.INFO, logger=log.name):
        thread = threading.Thread(target=repeat_in_thread,
                                  args=(round_, stop, RoundFailures("tail of t on c", log)),
                                  kwargs={"after_failure": 0.01})
        thread.start()
        thread.join(10)
    assert not thread.is_alive()
    assert [level for level, _ in levels(caplog)] == ["WARNING"] * (ESCALATE_AFTER - 1) + ["ERROR", "INFO"]
    assert rounds.count == ESCALATE_AFTER + 2
