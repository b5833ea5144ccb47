"""Catch-up rate and time to catch up (monitor.catchup), and how the evaluator fills them in."""

from __future__ import annotations

import math

import pytest

from monitor import catchup
from monitor.catchup import CatchUp
from tests.support.evaluator import FLOW, beat, make_state, offsets, run


def window(*rows):
    """(seconds, position, source end) rows -> samples."""
    return list(rows)


def test_a_backlog_shrinking_at_a_net_rate_has_the_eta_lag_over_net_rate():
    # copies 1,000 records/s while the source adds 200/s: the 40,000 behind shrink by 800/s
    c = catchup.partition(window((0, 0, 50_000), (10, 10_000, 52_000)), lag=42_000)
    assert c.state == catchup.CATCHING_UP
    assert c.copy_rate == 1_000 and c.source_rate == 200 and c.net_rate == 800
    assert c.eta_seconds == pytest.approx(42_000 / 800)


def test_a_source_as_fast_as_the_copy_is_not_catching_up_without_a_division():
    same = catchup.partition(window((0, 0, 50_000), (10, 1_000, 51_000)), lag=50_000)
    assert same.state == catchup.NOT_CATCHING_UP and same.eta_seconds is None and same.net_rate == 0
    faster = catchup.partition(window((0, 0, 50_000), (10, 1_000, 53_000)), lag=52_000)
    assert faster.state == catchup.NOT_CATCHING_UP and faster.eta_seconds is None and faster.net_rate == -200
    stopped = catchup.partition(window((0, 7, 50_000), (10, 7, 50_000)), lag=49_993)
    assert stopped.state == catchup.NOT_CATCHING_UP and stopped.copy_rate == 0 and stopped.eta_seconds is None
    assert "not catching up" in catchup.text(faster)


def test_a_small_backlog_under_steady_traffic_is_keeping_up_whatever_the_noise_in_the_net_rate():
    # lag 30 while copy and source both move ~100/s (the net rate is -1/s of noise)
    c = catchup.partition(window((0, 0, 30), (10, 990, 1_000)), lag=30)
    assert c.state == catchup.KEEPING_UP
    assert c.eta_seconds == pytest.approx(30 / 99)


def test_no_lag_is_caught_up_and_unknown_lag_or_too_few_samples_is_unknown():
    assert catchup.partition(window((0, 5, 5), (10, 9, 9)), lag=0) == CatchUp(catchup.CAUGHT_UP, 0.4, 0.4, 0.0)
    assert catchup.partition(window((0, 5, 9)), lag=0).eta_seconds == 0.0
    assert catchup.partition(window((0, 0, 9), (10, 5, 9)), lag=None).state == catchup.UNKNOWN
    assert catchup.partition(window((0, 0, 9)), lag=9).state == catchup.UNKNOWN
    assert catchup.partition(window((0, None, 9), (10, 5, 9)), lag=4).state == catchup.UNKNOWN
    assert catchup.partition(window((10, 0, 9), (10, 5, 9)), lag=4).state == catchup.UNKNOWN  # no time passed


def test_a_position_going_back_is_no_negative_copy_rate():
    c = catchup.partition(window((0, 500, 1_000), (10, 0, 1_000)), lag=1_000)
    assert c.copy_rate == 0 and c.state == catchup.NOT_CATCHING_UP


def test_a_flow_is_caught_up_when_its_slowest_partition_is():
    fast = CatchUp(catchup.CATCHING_UP, 100.0, 10.0, 20.0)
    slow = CatchUp(catchup.CATCHING_UP, 50.0, 40.0, 300.0)
    done = CatchUp(catchup.CAUGHT_UP, 5.0, 5.0, 0.0)
    flow = catchup.combine([fast, slow, done, CatchUp(catchup.UNKNOWN)])
    assert flow == CatchUp(catchup.CATCHING_UP, 155.0, 55.0, 300.0)
    stuck = catchup.combine([fast, CatchUp(catchup.NOT_CATCHING_UP, 0.0, 3.0, None)])
    assert stuck.state == catchup.NOT_CATCHING_UP and stuck.eta_seconds is None and stuck.net_rate == 87.0
    assert catchup.combine([]).state == catchup.UNKNOWN
    assert catchup.combine([done, done]).eta_seconds == 0.0


def test_the_evaluator_measures_the_rate_over_the_partitions_sample_window():
    state, clock = make_state(window=3)
    # the source holds 10,000 records and adds 100 per 5 s refresh; the copy moves 1,100 per refresh
    for i in range(3):
        beat(state, clock)
        offsets(state, clock, end=10_000 + 100 * i, target_end=1 + 1_100 * i, sync=(0, 0))
        clock.now += 5
    clock.now -= 5
    ev = run(state, clock)
    p, f = ev.flows[0].partitions[0], ev.flows[0]
    assert p.lag_records == 10_200 - 2_201
    assert p.catchup_state == catchup.CATCHING_UP
    assert p.copy_rate == pytest.approx(220.0) and p.source_rate == pytest.approx(20.0)
    assert p.catchup_eta_seconds == pytest.approx((10_200 - 2_201) / 200.0)
    assert (f.catchup_state, f.catchup_eta_seconds) == (p.catchup_state, p.catchup_eta_seconds)
    assert f.catchup_rate == pytest.approx(200.0)


def test_a_flow_whose_source_outruns_the_copy_has_no_eta_and_an_infinite_metric():
    from sparkmirror import metrics as m
    from monitor.exporters.samples import samples

    state, clock = make_state(window=3)
    for i in range(3):
        beat(state, clock)
        offsets(state, clock, end=10_000 + 1_000 * i, target_end=1 + 10 * i, sync=(0, 0))
        clock.now += 5
    ev = run(state, clock)
    f = ev.flows[0]
    assert f.catchup_state == catchup.NOT_CATCHING_UP and f.catchup_eta_seconds is None
    exported = {(spec.name, labels): v for spec, labels, v in samples(ev)}
    assert math.isinf(exported[(m.FLOW_CATCHUP_ETA.name, (FLOW,))])
    assert exported[(m.FLOW_CATCHUP_RATE.name, (FLOW,))] == pytest.approx(2.0 - 200.0)
    assert math.isinf(exported[(m.PARTITION_CATCHUP_ETA.name, (FLOW, "orders", "0"))])


def test_the_status_page_says_the_time_to_catch_up_in_words():
    from monitor.exporters.page import catchup_figure

    shown = catchup_figure({"state": "catching-up", "copy_rate": 1000.0, "source_rate": 200.0, "net_rate": 800.0,
                            "eta_seconds": 125.0})
    assert "2 min 5 s" in shown and "net 800.0 rec/s" in shown
    assert "not catching up" in catchup_figure({"state": "not-catching-up", "copy_rate": 0.0, "source_rate": 3.0})
    assert "caught up" in catchup_figure({"state": "caught-up"})
    assert "not measured" in catchup_figure({})


def test_the_top_partitions_say_when_each_is_caught_up():
    from monitor.exporters.page import top_partitions_table

    rows = [{"topic": "orders", "partition": 0, "status": "OK", "lag_records": 900, "lag_seconds": 30.0,
             "catchup_state": "catching-up", "catchup_eta_seconds": 95.0},
            {"topic": "orders", "partition": 1, "status": "STALL", "lag_records": 50, "lag_seconds": 80.0,
             "catchup_state": "not-catching-up", "catchup_eta_seconds": None}]
    table = top_partitions_table({"top_partitions": rows})
    assert "caught up in</th>" in table
    assert '<td class="num">1 min 35 s</td>' in table and '<td class="num">not gaining</td>' in table
