"""The flows' recovery-point objectives in the monitor (monitor.rpo), their declaration
(sparkmirror.objectives, ``--objectives``), and a steady healthy delay reading OK."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from monitor.evaluator import EvaluatorSettings, evaluate
from monitor.rpo import RpoTracker, percentile
from sparkmirror.objectives import Objective, ObjectiveError, Objectives, load
from tests.support.evaluator import beat, make_state, offsets


def _ev(at: float, *flows: tuple[str, float | None, int]):
    return SimpleNamespace(generated_at=at, flows=[SimpleNamespace(name=n, lag_seconds=s, lag_unknown_partitions=u)
                                                   for n, s, u in flows])


def test_budget_left_counts_time_above_the_objective_and_unknown_lag_as_bad():
    tracker = RpoTracker(Objectives(Objective(lag_seconds=30, target=0.999, period="30d")))
    at = 1000.0
    for lag, unknown in [(1, 0)] * 10 + [(45, 0)] * 6 + [(0, 1)] * 6 + [(2, 0)] * 2:
        tracker.record(_ev(at, ("a->b", lag, unknown)))
        at += 5
    doc = tracker.document("a->b", at - 5)
    # 6 samples above 30 s and 6 of unknown lag, 5 s each: 60 s of the 2592 s budget
    assert doc["bad_seconds"] == 60.0 and doc["good_seconds"] == 55.0
    assert doc["budget_left_ratio"] == round(1 - 60 / 2592, 4)
    assert doc["objective"] == {"lag_seconds": 30.0, "target": 0.999, "period": "30d",
                                "text": "lag <= 30s for 99.9% of 30d", "budget_seconds": 2592.0}
    assert doc["meeting_objective"] is True
    # percentiles over the known samples only; the unknown ones are counted
    five = doc["lag_percentiles"]["5m"]
    assert five["samples"] == 24 and five["unknown_samples"] == 6
    assert (five["p50_seconds"], five["p99_seconds"]) == (1, 45)


def test_percentiles_are_nearest_rank_and_windows_forget():
    assert percentile([], 0.5) is None
    assert percentile([3, 1, 2], 0.5) == 2 and percentile(list(range(1, 101)), 0.99) == 99
    tracker = RpoTracker()
    tracker.record(_ev(0.0, ("a->b", 100.0, 0)))
    tracker.record(_ev(3700.0, ("a->b", 1.0, 0)))
    lag = tracker.document("a->b", 3700.0)["lag_percentiles"]
    assert lag["1h"]["samples"] == 1 and lag["1h"]["p99_seconds"] == 1.0


def test_a_flow_without_an_objective_shows_its_percentiles_and_no_budget(tmp_path):
    config = tmp_path / "mixin.yml"
    config.write_text('rpo:\n  lag_seconds: 60\n  flows:\n    "lab->dr": null\n    "gold->dr": {target: 0.9999}\n')
    objectives = load(config)
    assert objectives.for_flow("lab->dr") is None
    assert objectives.for_flow("gold->dr") == Objective(lag_seconds=60, target=0.9999)
    assert objectives.for_flow("other->dr") == Objective(lag_seconds=60)
    tracker = RpoTracker(objectives)
    tracker.record(_ev(0.0, ("lab->dr", 500.0, 0)))
    doc = tracker.document("lab->dr", 0.0)
    assert doc["objective"] is None and "budget_left_ratio" not in doc
    assert doc["lag_percentiles"]["5m"]["p50_seconds"] == 500.0


@pytest.mark.parametrize("text, message", [
    ("rpo:\n  target: 99.9\n", "rpo: target must be a ratio"),
    ("rpo:\n  flows:\n    primary: null\n", "not a flow name"),
    ("rpo: [1]\n", "must be a mapping"),
    (": : :\n", "cannot read the mixin config"),
])
def test_a_bad_objectives_file_names_the_file_and_the_key(tmp_path, text, message):
    config = tmp_path / "mixin.yml"
    config.write_text(text)
    with pytest.raises(ObjectiveError, match=message) as caught:
        load(config)
    assert str(config) in str(caught.value)


def test_the_monitor_command_refuses_a_bad_objectives_file_with_exit_2(tmp_path):
    from argparse import ArgumentParser

    from monitor import options
    from sparkmirror.errors import ConfigError

    config = tmp_path / "mixin.yml"
    config.write_text("rpo:\n  lag_seconds: -1\n")
    parser = ArgumentParser()
    options.add_arguments(parser)
    args = parser.parse_args(["--objectives", str(config)])
    with pytest.raises(ConfigError, match=r"--objectives .*mixin.yml: rpo: lag_seconds must be above 0"):
        options.options_from_args(args)
    config.write_text("rpo:\n  lag_seconds: 45\n")
    assert options.options_from_args(parser.parse_args(["--objectives", str(config)])).objectives.default == \
        Objective(lag_seconds=45)


def test_a_healthy_flow_at_a_steady_delay_reads_ok_in_at_least_95_percent_of_refreshes():
    """One record a second copied 2.3 s later: the heartbeats partition reads 2 records behind 70 % of
    the time and 3 the rest. Refreshes every 5.05 s sweep that second in runs (2, 2, ..., 2, 3, 3, 3,
    2, ...), as a monitor's clock drifts against the replicator's. The flow stays OK; the old trend
    rule called every window from a 2 to a 3 growing lag, about half of them."""
    state, clock = make_state(window=10)
    ok = total = 0
    for i in range(400):
        clock.now += 5.05
        produced = math.floor(clock.now) + 1             # records 0 .. floor(now), one a second
        copied = math.floor(clock.now - 2.3) + 1         # each 2.3 s after it was written
        beat(state, clock, latency=2.3)
        offsets(state, clock, start=0, end=produced, target_end=copied, sync=(0, 0), topic="heartbeats")
        flow = evaluate(state, clock.now, EvaluatorSettings(window=10)).flows[0]
        if i >= 10:  # a full window
            total += 1
            ok += flow.status == "OK"
    assert ok / total >= 0.95, f"OK in {ok} of {total} refreshes"


def test_the_status_page_shows_budget_left_objective_and_percentiles():
    from monitor.exporters.page import rpo_text

    tracker = RpoTracker()
    for i in range(12):
        tracker.record(_ev(1000.0 + 5 * i, ("a->b", 40.0 if i == 11 else 2.0, 0)))
    value, detail, cls = rpo_text(tracker.document("a->b", 1055.0))
    assert value == "100.0% budget left"
    assert detail.startswith("lag <= 30s for 99.9% of 30d (since the monitor started); lag 5m: p50 ")
    assert cls == "late"  # the newest sample is above the objective
    assert rpo_text(None) == ("—", "not evaluated yet", "")
