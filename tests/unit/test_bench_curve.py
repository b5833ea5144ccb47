"""The latency-against-load benchmark's own arithmetic: the probe's settling figures and the
report's table and plot, on hand-made runs (the measurements themselves run in bench/)."""

from __future__ import annotations

import re

from bench.report import _curve_table, curve_svg
from bench.steady import _percentiles, warm_up_figures


def _run(system: str, load: float, p50: float, p99: float, **extra) -> dict:
    return {"system": system, "load": load, "records_per_s": 10_000 * load, "p50_latency_s": p50,
            "p99_latency_s": p99, "p999_latency_s": p99 * 2, "max_latency_s": p99 * 3,
            "heartbeat_p99_latency_s": p99, "settled_s": 2, "settled_fast_s": 5, "cpu_s_per_gb": 9.0, **extra}


def test_settling_under_a_second_and_under_100_ms_are_the_ends_of_the_last_slower_seconds():
    # arrival second -> worst latency: 1.5 s at second 100, 0.3 s at 104, then all fast
    warm = {100: 1500, 101: 400, 102: 90}
    measured = {103: (10, 80), 104: (10, 300), 105: (10, 20)}
    figures = warm_up_figures([1500, 400, 90], warm, measured)
    assert figures["settled_s"] == 1  # under 1 s for good from the end of second 100
    assert figures["settled_fast_s"] == 5  # under 0.1 s for good from the end of second 104


def test_p999_is_the_nearest_rank_of_a_thousand():
    latencies = list(range(1, 1001))  # 1..1000 ms
    figures = _percentiles(latencies)
    assert (figures["p50_s"], figures["p99_s"], figures["p999_s"], figures["max_s"]) == (0.501, 0.991, 1.0, 1.0)


def test_the_curve_table_has_one_row_per_load_and_system_with_the_medians_of_the_repeats():
    rows = [_run("raw", 0.5, 0.02, 0.08), _run("mm2", 0.1, 0.012, 0.021), _run("mm2", 0.1, 0.014, 0.041),
            _run("mm2", 0.1, 0.013, 0.031), _run("raw", 0.1, 0.013, 0.024)]
    table = _curve_table(rows)
    body = [line for line in table[2:]]
    # by load, then raw, MM2 and sparkmirror before the variants, whatever order the runs came in
    assert [line.split(" | ")[:2] for line in body] == [["| 10%", "raw"], ["| 10%", "mm2"], ["| 50%", "raw"]]
    mm2 = body[1].split(" | ")
    assert mm2[3:6] == ["0.013", "0.031", "0.021–0.041"]  # p50 and p99 medians, the p99 spread


def test_the_plot_draws_a_p50_and_a_p99_line_per_system_on_a_log_scale():
    rows = [_run("raw", load, 0.01, 0.02) for load in (0.1, 0.25, 0.5)] + \
           [_run("sparkmirror", load, 0.02, p99) for load, p99 in ((0.1, 0.04), (0.25, 0.2), (0.5, 3.0))]
    svg = curve_svg(rows)
    assert svg.count("<polyline") == 4 and ">raw<" in svg and ">sparkmirror<" in svg
    assert "0.01 s" in svg and "10 s" in svg  # decades from below the fastest to above the slowest
    # sparkmirror's p99 line climbs (smaller y is higher) as the load grows
    solid = [p for p in re.findall(r'<polyline points="([^"]+)"[^>]*stroke-width="2"/>', svg)]
    ys = [float(pt.split(",")[1]) for pt in solid[-1].split()]
    assert ys == sorted(ys, reverse=True) and len(ys) == 3
    assert curve_svg([]) == ""


def test_the_curve_goals_compare_sparkmirror_with_mm2_at_each_load():
    from bench.report import _curve_goals

    rows = [_run("mm2", 0.1, 0.013, 0.040), _run("sparkmirror", 0.1, 0.017, 0.035),
            _run("mm2", 0.25, 0.014, 0.030), _run("sparkmirror", 0.25, 0.021, 0.029),
            _run("mm2", 0.5, 0.02, 0.2, settled_s=30), _run("sparkmirror", 0.5, 0.03, 0.31, settled_s=41)]
    goals = {goal: (shown, met) for goal, shown, met in _curve_goals(rows)}
    assert goals["at <= 25 % load: p99 <= MM2's"] == ("10%: 0.035 s (MM2 0.04 s); 25%: 0.029 s (MM2 0.03 s)", "yes")
    assert goals["at <= 25 % load: p50 <= MM2's + 5 ms"][1] == "no"  # 25 %: 21 ms against 14 + 5
    assert goals["at 50 % load: p99 <= 1.5x MM2's"] == ("50%: 0.31 s (MM2 0.2 s)", "no")
    assert goals["at every load: under 1 s for good <= MM2's + 10 s"][1] == "no"  # 41 s against 30 + 10
    assert _curve_goals([_run("raw", 0.1, 0.01, 0.02)]) == []
