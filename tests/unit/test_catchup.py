"""The replicator's catch-up estimate (pure: positions fed by hand)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from replicator.datapath.catchup import CatchUpTracker, Estimate, FallBehind, committed_offsets
from replicator.settings import ReplicatorSettings


def test_backlog_rate_and_eta_follow_the_copy():
    t = CatchUpTracker(smoothing=1.0)  # no smoothing: each step's rates exactly
    ends = {("a", 0): 50_000, ("a", 1): 50_000}
    first = t.update(0.0, ends, {("a", 0): 0, ("a", 1): 0}, copied_records=0, copied_bytes=0)
    assert first.backlog == 100_000 and t.active and first.eta is None  # no rate yet
    assert "ETA being measured" in first.line("a->b")
    # 10 s later 40,000 copied while the source added 10,000: gains 3,000/s on a 70,000 backlog
    ends = {("a", 0): 55_000, ("a", 1): 55_000}
    est = t.update(10.0, ends, {("a", 0): 20_000, ("a", 1): 20_000}, copied_records=40_000, copied_bytes=40_000_000)
    assert est.backlog == 70_000 and est.done == 40_000
    assert est.copy_rate == pytest.approx(4_000) and est.source_rate == pytest.approx(1_000)
    assert est.eta == pytest.approx(70_000 / 3_000)
    assert "40,000 of 110,000 records (36 %)" in est.line("a->b") and "ETA 24 s" in est.line("a->b")


def test_a_source_faster_than_the_copy_has_no_eta():
    t = CatchUpTracker(smoothing=1.0)
    t.update(0.0, {("a", 0): 20_000}, {("a", 0): 0}, 0, 0)
    est = t.update(1.0, {("a", 0): 22_000}, {("a", 0): 1_000}, 1_000, 1_000)
    assert est.eta is None and "not gaining" in est.line("a->b")


def test_caught_up_ends_the_catch_up_once():
    t = CatchUpTracker(smoothing=1.0)
    t.update(0.0, {("a", 0): 20_000}, {("a", 0): 0}, 0, 0)
    est = t.update(5.0, {("a", 0): 20_000}, {("a", 0): 20_000}, 20_000, 0)
    assert est.backlog == 0 and est.eta == 0.0
    assert t.finish(5.0) == 5.0 and t.finish(6.0) is None


def test_a_small_backlog_is_not_a_catch_up():
    t = CatchUpTracker()
    t.update(0.0, {("a", 0): 500}, {("a", 0): 0}, 0, 0)
    assert not t.active


def test_committed_offsets_from_sparks_progress():
    end = {"orders": {"0": 10, "1": 20}}
    query = SimpleNamespace(lastProgress={"sources": [{"endOffset": json.dumps(end)}]})
    assert committed_offsets(query) == {("orders", 0): 10, ("orders", 1): 20}
    query = SimpleNamespace(lastProgress={"sources": [{"endOffset": end}]})
    assert committed_offsets(query) == {("orders", 0): 10, ("orders", 1): 20}
    assert committed_offsets(SimpleNamespace(lastProgress=None)) is None
    assert committed_offsets(None) is None


def test_a_flow_keeping_pace_with_a_busy_source_is_not_catching_up():
    """At 75,000 records/s about one batch of records is always in flight: 10,000-20,000 to
    go is keeping pace, not a catch-up starting and ending every few seconds."""
    from replicator.datapath.catchup import CAUGHT_UP_SECONDS

    t = CatchUpTracker(smoothing=1.0)
    rate, copied = 75_000, 0
    t.update(0.0, {("a", 0): 0}, {("a", 0): 0}, 0, 0)
    for step in range(1, 30):
        end = rate * step
        in_flight = 8_000 if step % 2 else 20_000
        copied = end - in_flight
        t.update(float(step), {("a", 0): end}, {("a", 0): copied}, copied, copied * 1024)
        if step > 1:
            assert not t.active, step
    # a real backlog on the same busy source is a catch-up, and it ends within a few seconds of the source
    t.update(30.0, {("a", 0): rate * 30}, {("a", 0): rate * 30 - 2_000_000}, copied, copied * 1024)
    assert t.active
    assert t.caught_up_below() == rate * CAUGHT_UP_SECONDS
    # a quiet source: the absolute thresholds
    q = CatchUpTracker(smoothing=1.0)
    q.update(0.0, {("a", 0): 5_000}, {("a", 0): 0}, 0, 0)
    assert not q.active and q.caught_up_below() == 1_000


def test_a_backlog_written_all_at_once_is_a_catch_up():
    """A quiet source, then 29,900 records in one burst that the copy takes several looks to work
    through: the burst is the backlog, not a busy source that raises the bar above it."""
    t = CatchUpTracker()
    for step in range(5):
        t.update(float(step), {("a", 0): 100}, {("a", 0): 100}, 100, 100)
    t.update(5.0, {("a", 0): 30_000}, {("a", 0): 2_100}, 2_100, 2_100)
    t.update(6.0, {("a", 0): 30_000}, {("a", 0): 6_100}, 6_100, 6_100)
    assert t.active
    assert t.catching_up_above() == 10_000


def _est(backlog: int, copy_rate: float, eta: float | None, measured: bool = True) -> Estimate:
    return Estimate(backlog=backlog, done=0, done_bytes=0, copy_rate=copy_rate, source_rate=0.0, eta=eta,
                    bytes_per_record=1.0, measured=measured)


def test_a_real_time_flow_that_stays_behind_falls_back_after_the_wait():
    fb = FallBehind(after=60.0, eta_limit=60.0)
    assert not fb.look(0.0, _est(500_000, 60_000, None), 10_000, copying=True)  # behind, not gaining
    assert not fb.look(59.0, _est(900_000, 60_000, None), 10_000, copying=True)
    assert fb.look(60.0, _est(1_200_000, 60_000, None), 10_000, copying=True)
    # gaining, but not due within the limit, also counts
    fb.reset()
    assert not fb.look(100.0, _est(500_000, 80_000, 120.0), 10_000, copying=True)
    assert fb.look(160.0, _est(400_000, 80_000, 90.0), 10_000, copying=True)


@pytest.mark.parametrize("est, copying", [
    (_est(5_000, 60_000, None), True),  # a few seconds' records in flight: not behind
    (_est(500_000, 60_000, 30.0), True),  # behind, and caught up within the limit: a burst, real time copes
    # copied nothing since the last look (its smoothed rate still above 0): it waits for a cluster or a
    # restart, which micro-batches would not copy faster
    (_est(500_000, 2_000, None), False),
    (_est(500_000, 60_000, None, measured=False), True),  # no rate yet
])
def test_what_does_not_count_as_falling_behind_restarts_the_wait(est, copying):
    fb = FallBehind(after=60.0, eta_limit=60.0)
    assert not fb.look(0.0, _est(500_000, 60_000, None), 10_000, copying=True)
    assert not fb.look(50.0, est, 10_000, copying=copying)
    assert not fb.look(70.0, _est(500_000, 60_000, None), 10_000, copying=True)  # the wait began again
    assert fb.look(130.0, _est(500_000, 60_000, None), 10_000, copying=True)


class _Flow:
    """The few FlowReplicator members CatchUpReport reads (pure logic, no Spark)."""

    def __init__(self, data_path: str) -> None:
        self.name, self.assignment, self.query = "a->b", {"t": 1}, None
        self.stats = SimpleNamespace(records=0, bytes=0)
        self.source_admin = None
        self.may_fall_back = data_path == "auto"
        self.realtime, self.catching_up_first = True, False
        self.committed = 0
        self.falls: list = []
        self.settings = ReplicatorSettings()

    def copied_offsets(self):
        return {("t", 0): self.committed}

    def fall_back(self, backlog, copy_rate, source_rate, seconds):
        self.falls.append(backlog)
        self.realtime, self.catching_up_first = False, True


def _stepper(monkeypatch, flow: _Flow, after: float):
    """A CatchUpReport of ``flow`` whose source adds 20,000 records a second; ``step(second)``
    takes its look at that second (the flow's copy is advanced by the caller first)."""
    from replicator.datapath import catchup

    ends = {("t", 0): 100_000}
    monkeypatch.setattr(catchup, "source_end_offsets", lambda admin, assignment: dict(ends))
    clock = [0.0]
    monkeypatch.setattr(catchup.time, "monotonic", lambda: clock[0])
    report = catchup.CatchUpReport(flow, stream=io.StringIO())
    report.fall_behind = FallBehind(after=after, eta_limit=60.0)

    def step(second: int) -> None:
        clock[0] = float(second)
        ends[("t", 0)] += 20_000
        report.step()

    return step


@pytest.mark.parametrize("data_path, pause_every, falls", [
    ("auto", None, 1),
    ("auto", 5, 1),  # the copy pauses one look in five (a real-time batch boundary): still copying
    ("real-time", None, 0),
])
def test_the_progress_report_moves_an_auto_flow_that_cannot_keep_up(monkeypatch, data_path, pause_every, falls):
    """The source adds 20,000 records/s, real time copies ~10,000/s: once the backlog is a catch-up's
    worth (10 s of the source's records) and stays so for the wait, auto falls back, once;
    --data-path real-time stays (the user asked for it)."""
    flow = _Flow(data_path)
    step = _stepper(monkeypatch, flow, after=10.0)
    for second in range(30):
        if not (pause_every and second % pause_every == 0):
            flow.committed += 12_500
            flow.stats.records += 12_500
            flow.stats.bytes += 12_500
        step(second)
    assert len(flow.falls) == falls
    if falls:
        assert flow.falls[0] > 200_000 and not flow.realtime


def test_a_flow_that_stops_copying_does_not_fall_back(monkeypatch):
    """Behind and copying nothing for longer than COPYING_WITHIN_S (a cluster down): no fall-back."""
    flow = _Flow("auto")
    step = _stepper(monkeypatch, flow, after=20.0)
    for second in range(60):
        if second < 3:
            flow.committed += 10_000
            flow.stats.records += 10_000
        step(second)
    assert flow.falls == []
