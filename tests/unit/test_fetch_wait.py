"""The real-time fetch wait chosen from a flow's rate (replicator.datapath.fetchwait)."""

from __future__ import annotations

from replicator.datapath import fetchwait, realtime
from replicator.datapath.fetchwait import (LONG_AFTER_S, LONG_WAIT_MS, SHORT_AFTER_S, SHORT_WAIT_MS, FetchWait)

CORES = 2
LOW = fetchwait.SHORT_BELOW_BYTES_PER_CORE * CORES * 0.5
HIGH = fetchwait.LONG_ABOVE_BYTES_PER_CORE * CORES * 1.5
BETWEEN = (fetchwait.SHORT_BELOW_BYTES_PER_CORE + fetchwait.LONG_ABOVE_BYTES_PER_CORE) / 2 * CORES


def _feed(fw: FetchWait, rate, seconds: float, start: float = 0.0):
    """One look a second for ``seconds``; the first change, as (time, wait), or None."""
    t = start
    while t <= start + seconds:
        new = fw.look(t, rate)
        if new is not None:
            fw.changed(new)
            return t, new
        t += 1.0
    return None


def test_a_low_rate_gets_the_short_wait_once_it_held_and_a_high_one_the_long_wait_sooner():
    assert FetchWait(CORES).wait_ms == SHORT_WAIT_MS, "a flow starts with the short wait"
    fw = FetchWait(CORES, LONG_WAIT_MS)
    assert _feed(fw, LOW, SHORT_AFTER_S - 1) is None
    assert _feed(fw, LOW, 2, start=SHORT_AFTER_S - 1 + 1)[1] == SHORT_WAIT_MS
    fw = FetchWait(CORES, SHORT_WAIT_MS)
    t, new = _feed(fw, HIGH, 60)
    assert new == LONG_WAIT_MS and t == LONG_AFTER_S


def test_between_the_thresholds_and_when_idle_the_wait_stays():
    for wait in (SHORT_WAIT_MS, LONG_WAIT_MS):
        fw = FetchWait(CORES, wait)
        assert _feed(fw, BETWEEN, 300) is None and fw.wait_ms == wait
        assert _feed(fw, 0.0, 300) is None, "a source that adds nothing decides nothing"
        assert _feed(fw, None, 300) is None, "no rate measured yet"


def test_a_rate_that_crosses_back_before_its_time_starts_the_count_again():
    fw = FetchWait(CORES, LONG_WAIT_MS)
    assert _feed(fw, LOW, SHORT_AFTER_S - 2) is None
    assert fw.look(SHORT_AFTER_S - 1, BETWEEN) is None  # back in the band: the count restarts
    assert _feed(fw, LOW, SHORT_AFTER_S - 2, start=SHORT_AFTER_S) is None
    assert _feed(fw, LOW, 5, start=2 * SHORT_AFTER_S - 1)[1] == SHORT_WAIT_MS


def test_the_thresholds_scale_with_the_cores():
    one, eight = FetchWait(1), FetchWait(8)
    rate = fetchwait.SHORT_BELOW_BYTES_PER_CORE * 2  # low for eight cores, high for one
    assert one.wanted(rate) == LONG_WAIT_MS
    assert eight.wanted(rate) == SHORT_WAIT_MS
    assert FetchWait(0).cores == 1


def test_a_configured_fetch_or_a_cluster_keeps_the_wait_fixed():
    assert fetchwait.adapts({"kafka.bootstrap.servers": "x"}, local=True)
    assert not fetchwait.adapts({}, local=False), "on a cluster a restart waits for a checkpoint"
    assert not fetchwait.adapts({"kafka.fetch.max.wait.ms": "100"}, local=True)
    assert not fetchwait.adapts({"kafka.fetch.min.bytes": "1"}, local=True)


def test_the_chosen_wait_reaches_the_source_options_unless_one_is_configured():
    assert realtime.source_options({})["kafka.fetch.max.wait.ms"] == str(LONG_WAIT_MS)
    assert realtime.source_options({}, SHORT_WAIT_MS)["kafka.fetch.max.wait.ms"] == str(SHORT_WAIT_MS)
    assert realtime.source_options({}, SHORT_WAIT_MS)["kafka.fetch.min.bytes"] == "65536"
    configured = {"kafka.fetch.max.wait.ms": "100"}
    assert realtime.source_options(configured, SHORT_WAIT_MS)["kafka.fetch.max.wait.ms"] == "100"


def test_behind_the_short_wait_never_comes_and_the_long_one_does():
    """Behind, every fetch fills at once whatever the wait: the short wait would only add a
    pause. A high rate while catching up from a cold start takes the long wait then, not once
    the flow has settled."""
    fw = FetchWait(CORES, LONG_WAIT_MS)
    assert _feed_behind(fw, LOW, 300) is None and fw.wait_ms == LONG_WAIT_MS
    assert _feed(fw, LOW, SHORT_AFTER_S - 1, start=301) is None, "caught up, the count starts then"
    fw = FetchWait(CORES, SHORT_WAIT_MS)
    assert _feed_behind(fw, HIGH, 300) == (LONG_AFTER_S, LONG_WAIT_MS)
    fw = FetchWait(CORES, SHORT_WAIT_MS)
    assert _feed_behind(fw, HIGH, LONG_AFTER_S - 1) is None
    assert _feed(fw, HIGH, 5, start=LONG_AFTER_S) == (LONG_AFTER_S, LONG_WAIT_MS), "caught up or not, one count"


def _feed_behind(fw: FetchWait, rate, seconds: float):
    for t in range(int(seconds) + 1):
        new = fw.look(float(t), rate, behind=True)
        if new is not None:
            fw.changed(new)
            return float(t), new
    return None
