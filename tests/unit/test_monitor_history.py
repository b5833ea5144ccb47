"""The monitor's own history of each flow (monitor.history): merged steps, bounded memory, throughput."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import pytest

from monitor.history import POINTS, History

T0 = 1_800_000_000.0


def evaluation(at: float, *flows: tuple[str, float | None, int | None, int, int]):
    return SimpleNamespace(generated_at=at, flows=[
        SimpleNamespace(name=n, lag_seconds=s, lag_records=r, replicated_total=rep, source_total=src)
        for n, s, r, rep, src in flows])


def test_evaluations_within_one_step_merge_into_one_point_keeping_the_peak():
    h = History(step=10.0)
    h.record(evaluation(T0, ("a->b", 1.0, 10, 0, 0)))
    h.record(evaluation(T0 + 3, ("a->b", 9.0, 500, 100, 150)))   # the peak, between two points
    h.record(evaluation(T0 + 6, ("a->b", 2.0, 20, 300, 330)))
    h.record(evaluation(T0 + 12, ("a->b", None, None, 1_300, 1_330)))  # next step; lag unknown
    points = h.points("a->b")
    assert [(p.at, p.lag_seconds, p.lag_records) for p in points] == [(T0 + 6, 9.0, 500), (T0 + 12, None, None)]
    assert points[0].throughput is None
    assert points[1].throughput == pytest.approx(1_000 / 6) and points[1].produced == pytest.approx(1_000 / 6)


def test_an_older_evaluation_changes_nothing_and_a_flow_that_went_away_is_forgotten():
    h = History(step=1.0)
    h.record(evaluation(T0 + 5, ("a->b", 1.0, 1, 0, 0), ("c->d", 0.0, 0, 0, 0)))
    h.record(evaluation(T0 + 4, ("a->b", 50.0, 50, 0, 0), ("c->d", 0.0, 0, 0, 0)))
    assert [p.lag_seconds for p in h.points("a->b")] == [1.0]
    h.record(evaluation(T0 + 6, ("a->b", 1.0, 1, 0, 0)))
    assert h.flows() == ["a->b"] and h.points("c->d") == []


def test_a_day_of_evaluations_keeps_at_most_the_ring_and_stays_within_the_memory_bound():
    h = History(step=1.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(3 * POINTS):
            h.record(evaluation(T0 + i, ("a->b", 1e3 + i / 7, 10**9 + i, 10**12 + 1_000 * i, 10**12 + 1_001 * i)))
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    points = h.points("a->b")
    assert len(points) == POINTS and points[-1].at == T0 + 3 * POINTS - 1
    assert used < 400 * 1024, used
    doc = h.document()
    assert doc["points_max"] == POINTS and len(doc["flows"]["a->b"]) == POINTS
    assert doc["flows"]["a->b"][-1][3] == pytest.approx(1_000.0)


def test_a_history_needs_a_step_and_room():
    with pytest.raises(ValueError):
        History(step=0)


def test_the_evaluator_loop_fills_the_history_without_any_page_request():
    """The charts show the hours before a browser opened the page: the service's evaluator
    loop records every evaluation, and nothing here builds the HTTP app or asks for a page."""
    import asyncio

    from monitor.service import MonitorService
    from monitor.watch import MonitorOptions
    from sparkmirror.model.parse import parse_config

    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\n")
    service = MonitorService(config, MonitorOptions(interval=0.02, history_step=0.02))
    assert service.history.points("A->B") == []

    async def evaluate_for_a_while():
        loop = asyncio.create_task(service._evaluate_loop())
        await asyncio.sleep(0.5)
        loop.cancel()

    asyncio.run(evaluate_for_a_while())
    points = service.history.points("A->B")
    assert len(points) >= 3, points
    assert points == sorted(points, key=lambda p: p.at)
