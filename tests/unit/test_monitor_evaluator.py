"""The evaluator's rules and the state's bookkeeping, on hand-built states (no Kafka)."""

from __future__ import annotations

import dataclasses

import pytest

from monitor import lag
from monitor.collectors.timelag import needs_probe
from monitor.evaluator import EvaluatorSettings, evaluate
from monitor.facts import Probe
from monitor.state import MonitorState, OffsetsRow
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync
from tests.support.evaluator import FLOW, T0, beat, make_state, offsets, run


def only_partition(ev):
    return ev.flows[0].partitions[0]


# --- position arithmetic -------------------------------------------------------------

@pytest.mark.parametrize("sync, target_end, start, end, expected", [
    ((0, 0), 10, 0, 10, lag.Position(10, lag.BASIS_SYNC)),            # idle and caught up: exact
    ((4, 4), 10, 0, 15, lag.Position(10, lag.BASIS_SYNC)),            # stale sync, target end carries it
    ((100, 0), 5, 0, 200, lag.Position(105, lag.BASIS_SYNC)),         # renumbered target
    ((9, 9), 12, 0, 10, lag.Position(10, lag.BASIS_SYNC)),            # never past the source end
    (None, 0, 3, 10, lag.Position(3, lag.BASIS_EMPTY_MIRROR)),        # nothing copied yet
    (None, None, 3, 10, lag.Position(3, lag.BASIS_NO_MIRROR)),
    (None, 5, 0, 10, lag.Position(None, lag.UNKNOWN_NO_SYNC)),
    ((9, 9), 9, 0, 10, lag.Position(None, lag.UNKNOWN_SYNC_AHEAD)),   # target truncated
    ((0, 0), 1, None, None, lag.Position(None, lag.UNKNOWN_NO_OFFSETS)),
])
def test_replicated_position(sync, target_end, start, end, expected):
    assert lag.replicated_position(sync, target_end, start, end) == expected


def test_target_with_transaction_markers_never_under_counts_lag():
    # Source records 0-20; the replicator copied 0-19 in two transactions: target offsets 0-9, a
    # commit marker at 10, 11-20, a marker at 21 (end 22), and flushed its newest sync (19, 20).
    # Record 20 is not on the target: counting T - D as records would call the partition caught up.
    assert lag.replicated_position((19, 20), 22, 0, 21) == lag.Position(21, lag.BASIS_SYNC)
    assert lag.replicated_position((19, 20), 22, 0, 21, target_has_gaps=True) == \
        lag.Position(20, lag.BASIS_SYNC_ONLY)
    state, clock = make_state("b.exactly.once.source.support = enabled\n")
    offsets(state, clock, end=21, target_end=22, sync=(19, 20))
    p = only_partition(run(state, clock))
    assert (p.position, p.lag_records, p.position_basis) == (20, 1, "offset-sync-only")
    # ... and the monitor's sync store translates group offsets like the replicator's, without
    # interpolating along syncs the markers may have put off one line.
    assert state.flows[FLOW].sync_store.interpolate is False
    assert make_state()[0].flows[FLOW].sync_store.interpolate is True


def test_records_lag_never_negative_and_not_counting_deleted_offsets():
    assert lag.records_lag(12, 0, 10) == 0
    assert lag.records_lag(4, 7, 10) == 3
    assert lag.records_lag(None, 0, 10) is None
    assert lag.lost_range(4, 7) == (4, 7) and lag.lost_range(7, 7) is None


# --- partitions ----------------------------------------------------------------------

def test_caught_up_partition_is_ok_with_zero_lag():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=10, target_end=10, sync=(0, 0))
    p = only_partition(run(state, clock))
    assert (p.status, p.lag_records, p.lag_seconds, p.position) == ("OK", 0, 0.0, 10)


def test_seconds_lag_from_the_probed_record():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=17, target_end=10, sync=(0, 0))
    assert only_partition(run(state, clock)).lag_seconds is None  # not probed yet
    state.record_probe(FLOW, ("orders", 0), Probe(10, 10, int((T0 - 42) * 1000), 17, T0))
    clock.now += 3
    p = only_partition(run(state, clock))
    assert (p.lag_records, p.lag_seconds, p.oldest_unreplicated_timestamp_ms) == (7, 45.0, int((T0 - 42) * 1000))


def test_probe_past_a_gap_corrects_the_lag_and_eof_means_caught_up():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=20, target_end=10, sync=(0, 0))
    state.record_probe(FLOW, ("orders", 0), Probe(10, 15, int(T0 * 1000), 20, T0))  # offsets 10-14 compacted
    assert only_partition(run(state, clock)).lag_records == 5
    state.record_probe(FLOW, ("orders", 0), Probe(10, None, None, 20, T0))  # only transaction markers left
    p = only_partition(run(state, clock))
    assert (p.lag_records, p.lag_seconds, p.status) == (0, 0.0, "OK")


def test_while_the_next_probe_is_in_flight_seconds_lag_keeps_its_last_known_value_aging():
    """The position moved since the last probe: the partition (and so the flow) keeps a figure."""
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=20, target_end=10, sync=(0, 0))
    state.record_probe(FLOW, ("orders", 0), Probe(10, 10, int((T0 - 5) * 1000), 20, T0))
    clock.now += 0.25
    offsets(state, clock, end=22, target_end=12, sync=(0, 0))  # moved; the probe of 12 is not back yet
    assert needs_probe(state.flows[FLOW].partitions[("orders", 0)])
    clock.now += 0.5
    ev = run(state, clock)
    p = only_partition(ev)
    # An upper bound: the oldest record missing now is no older than the one found at 10.
    assert (p.lag_records, p.lag_seconds) == (10, 5.75) and ev.flows[0].lag_seconds == 5.75
    clock.now += 1
    assert only_partition(run(state, clock)).lag_seconds == 6.75  # aging with the clock
    state.record_probe(FLOW, ("orders", 0), Probe(12, 12, int((T0 - 4) * 1000), 22, clock.now))
    assert only_partition(run(state, clock)).lag_seconds == pytest.approx(5.75)  # corrected by the new probe
    assert not needs_probe(state.flows[FLOW].partitions[("orders", 0)])


def test_an_older_probe_never_replaces_a_newer_one():
    state, clock = make_state()
    offsets(state, clock, end=20, target_end=12, sync=(0, 0))
    newer = Probe(12, 12, int(T0 * 1000), 20, T0 + 1)
    state.record_probe(FLOW, ("orders", 0), newer)
    state.record_probe(FLOW, ("orders", 0), Probe(10, 10, int(T0 * 1000), 20, T0))
    state.record_probe(FLOW, ("orders", 0), Probe(15, 15, int(T0 * 1000), 20, T0 + 2))  # ahead: another log
    assert state.flows[FLOW].partitions[("orders", 0)].probe == newer


def test_a_position_moving_inside_a_gap_keeps_the_probe_exact():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=20, target_end=10, sync=(0, 0))
    state.record_probe(FLOW, ("orders", 0), Probe(10, 15, int((T0 - 3) * 1000), 20, T0))  # 10-14 compacted
    offsets(state, clock, end=20, target_end=11, sync=(12, 10))  # a sync inside the gap: position 13
    p = only_partition(run(state, clock))
    assert (p.position, p.lag_records, p.lag_seconds) == (13, 5, 3.0)


def test_lag_appearing_on_a_caught_up_partition_ages_from_the_last_read_that_saw_it_caught_up():
    state, clock = make_state()
    beat(state, clock)
    for _ in range(8):  # caught up and idle for 2 s
        offsets(state, clock, end=10, target_end=10, sync=(0, 0))
        clock.now += 0.25
    offsets(state, clock, end=13, target_end=10, sync=(0, 0))  # 3 new records, not probed yet
    assert needs_probe(state.flows[FLOW].partitions[("orders", 0)])
    clock.now += 0.25
    p = only_partition(run(state, clock))
    assert (p.lag_records, p.lag_seconds) == (3, 0.5)  # written after the caught-up read: at most 0.5 s old


def test_trend_samples_are_taken_once_per_status_interval_not_per_read():
    config_state, clock = make_state()
    state = MonitorState(list(config_state.flows[FLOW].watch for _ in [0]), ["a", "b"], window=3,
                         sample_every=5.0, clock=clock)
    for _ in range(21):  # 5 s of reads every 0.25 s
        offsets(state, clock, end=20, target_end=10, sync=(0, 0))
        clock.now += 0.25
    window = state.flows[FLOW].partitions[("orders", 0)].window
    assert [s[0] - T0 for s in window] == [0.0, 5.0]
    assert only_partition(run(state, clock)).status != "STALL"


def test_a_trend_sample_after_an_unsampled_read_carries_that_read_s_figures():
    """Reads come more often than trend samples: a read that moved the figures between two samples,
    followed by reads that found them unchanged, must reach the window (the next sample is of the
    partition as it is, not a copy of the previous sample), or a copy that moved looks stalled and
    a growing source looks idle."""
    config_state, clock = make_state()
    state = MonitorState(list(config_state.flows[FLOW].watch for _ in [0]), ["a", "b"], window=3,
                         sample_every=1.0, clock=clock)
    offsets(state, clock, end=20, target_end=10, sync=(0, 0))  # sampled
    clock.now += 0.4
    offsets(state, clock, end=30, target_end=15, sync=(0, 0))  # moved, too soon for a sample
    for _ in range(5):  # unchanged reads; one of them is due for a sample
        clock.now += 0.2
        state.record_offsets(FLOW, [], at=clock.now, unchanged=[("orders", 0)])
        offsets(state, clock, end=30, target_end=15, sync=(0, 0))
    window = state.flows[FLOW].partitions[("orders", 0)].window
    assert [s[1:] for s in window] == [(10, 10, 20), (15, 15, 30)]  # (position, lag, source end)


def test_trend_samples_are_not_tracked_by_the_garbage_collector():
    """A monitor of 10,000 partitions keeps 100,000 samples: as tracked objects, every full
    collection walked them all with every thread stopped. Tuples of numbers are untracked once
    they survive a collection."""
    import gc

    state, clock = make_state(window=3)
    for i in range(4):
        offsets(state, clock, end=20 + i, target_end=10, sync=(0, 0))
        clock.now += 5
    window = state.flows[FLOW].partitions[("orders", 0)].window
    gc.collect()
    assert len(window) == 3 and not any(gc.is_tracked(s) for s in window)


def test_stall_when_position_does_not_move_for_the_window_with_lag():
    state, clock = make_state()
    for _ in range(3):
        beat(state, clock)
        offsets(state, clock, end=20, target_end=10, sync=(0, 0))
        clock.now += 1
    beat(state, clock)
    p = only_partition(run(state, clock))
    assert p.status == "STALL" and "unchanged" in p.reasons[0]
    assert run(state, clock).flows[0].status == "STALL"


def test_a_replicator_that_comes_back_gets_a_full_window_before_stall_or_growing_lag():
    # The replicator is down (or not started yet): no heartbeat for longer than the timeout, the
    # position does not move and the lag grows. That is STOP, not STALL.
    state, clock = make_state()
    for i in range(12):
        offsets(state, clock, end=20 + i, target_end=10, sync=(0, 0))
        clock.now += 1
    assert only_partition(run(state, clock)).status == "STOP"
    # It starts: heartbeats arrive again, and it has not reached this partition yet. The samples
    # taken while it was down say nothing about the running replicator: it is not STALL, and the
    # lag that grew meanwhile is no growing-lag WARN.
    for i in range(3):
        beat(state, clock)
        offsets(state, clock, end=32, target_end=10, sync=(0, 0))
        p = only_partition(run(state, clock))
        assert (p.status, p.reasons) == ("OK", [])
        if i < 2:  # nor are the copy and source rates those of the time it was down
            assert (p.catchup_state, p.copy_rate, p.source_rate) == ("unknown", None, None)
        clock.now += 1
    # A full window since it came back without the position moving: STALL.
    beat(state, clock)
    offsets(state, clock, end=32, target_end=10, sync=(0, 0))
    p = only_partition(run(state, clock))
    assert p.status == "STALL" and "unchanged for 2s (3 refreshes)" in p.reasons[0]


def test_only_a_silence_longer_than_the_timeout_restarts_the_trend_window():
    # Heartbeats every second, then one 8-s gap (a long micro-batch): under the 10-s timeout, so
    # the flow never stopped and its samples from before the gap still count.
    state, clock = make_state()
    for i in range(3):
        beat(state, clock)
        offsets(state, clock, end=20, target_end=10, sync=(0, 0))
        clock.now += 1 if i < 2 else 8
    beat(state, clock)
    assert only_partition(run(state, clock)).status == "STALL"
    hb = state.flows[FLOW].heartbeat
    assert hb.resumed_after(10.0) is None and hb.resumed_after(5.0) == clock.now


def test_heartbeat_silences_keep_the_newest_arrival_after_each_longer_silence():
    state, clock = make_state()
    for gap in (12, 1, 3, 1, 1, 2):  # arrivals at +12, +13, +16, +17, +18, +20
        clock.now += gap
        beat(state, clock)
    hb = state.flows[FLOW].heartbeat
    assert hb.silences == [(T0 + 12, 12), (T0 + 16, 3), (T0 + 20, 2)]
    assert hb.resumed_after(10) == T0 + 12 and hb.resumed_after(2.5) == T0 + 16
    assert hb.resumed_after(1.5) == T0 + 20 and hb.resumed_after(20) is None
    state.add_heartbeat(FLOW, Heartbeat("b", "a", int((clock.now - 5) * 1000)), None)  # an older one, read later
    assert hb.silences[-1] == (T0 + 20, 2)


def test_warn_when_lag_grows_in_every_refresh_while_moving():
    state, clock = make_state()
    for i in range(3):
        beat(state, clock)
        offsets(state, clock, end=20 + 10 * i, target_end=10 + i, sync=(0, 0))
        clock.now += 1
    beat(state, clock)
    p = only_partition(run(state, clock))
    assert p.status == "WARN" and "grew" in p.reasons[0]


def test_lag_that_shrinks_or_is_not_yet_a_full_window_is_ok():
    state, clock = make_state()
    for i in range(3):
        beat(state, clock)
        offsets(state, clock, end=30, target_end=10 + 5 * i, sync=(0, 0))
        clock.now += 1
    beat(state, clock)
    assert only_partition(run(state, clock)).status == "OK"
    state2, clock2 = make_state()
    beat(state2, clock2)
    offsets(state2, clock2, end=30, target_end=10, sync=(0, 0))
    assert only_partition(run(state2, clock2)).status == "OK"


def _trend_status(lags, window=10):
    """The partition's status and reasons after one refresh per entry of ``lags`` (records lag, the
    replicator moving: heartbeats every refresh), evaluated with a ``window``-refresh trend."""
    state, clock = make_state(window=window)
    copied = 100
    for i, lag_now in enumerate(lags):
        beat(state, clock)
        offsets(state, clock, end=copied + lag_now, target_end=copied, sync=(0, 0))
        copied += 1
        if i < len(lags) - 1:
            clock.now += 5
    p = only_partition(evaluate(state, clock.now, EvaluatorSettings(window=window)))
    return p.status, p.reasons


@pytest.mark.parametrize("lags", [
    [0] * 9 + [1],       # a caught-up partition that just received one record
    [2] * 9 + [3],       # one record a second copied 2.3 s late: 2 or 3 records at random
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],  # it was caught up at the start of the window
    [5, 6, 6, 6, 6, 7, 7, 7, 7, 8],  # three small steps in nine: jitter, not sustained growth
])
def test_a_lag_that_steps_within_its_jitter_or_was_caught_up_is_not_growing(lags):
    assert _trend_status(lags) == ("OK", [])


def test_lag_growing_over_most_of_the_window_warns_and_says_what_was_seen():
    status, reasons = _trend_status([10, 40, 70, 70, 100, 130, 160, 190, 220, 250])
    assert status == "WARN"
    assert reasons == ["lag grew in 8 of the last 9 refreshes and never fell over 45s (10 -> 250 records)"]


def test_a_lag_that_grows_but_falls_once_is_not_growing():
    assert _trend_status([10, 40, 70, 60, 100, 130, 160, 190, 220, 250]) == ("OK", [])


def test_records_no_offset_sync_covers_are_said_at_once_and_warned_about_after_the_grace():
    """MM2 sends a mirror partition's first offset-sync after the records it covers (with its next
    offset commit when its sync producer is busy): a healthy MM2 is not WARN in that moment."""
    from monitor.evaluator.partitions import NO_SYNC_GRACE_SECONDS
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=30, target_end=10, sync=None)
    p = only_partition(run(state, clock))
    assert p.status == "OK" and "waiting for the first offset-sync" in p.reasons[0] and p.lag_records is None
    clock.now += NO_SYNC_GRACE_SECONDS - 1
    beat(state, clock)
    offsets(state, clock, end=31, target_end=11, sync=None)  # more records, still no sync: same since
    assert only_partition(run(state, clock)).status == "OK"
    clock.now += 2
    beat(state, clock)
    p = only_partition(run(state, clock))
    assert p.status == "WARN" and "no offset-sync" in p.reasons[0] and p.lag_records is None
    offsets(state, clock, end=31, target_end=11, sync=(30, 10))
    offsets(state, clock, end=32, target_end=0, sync=None)  # emptied: a later unknown starts its own grace
    offsets(state, clock, end=33, target_end=1, sync=None)
    assert only_partition(run(state, clock)).status == "OK"


def held_partition_state(highs):
    """Records 0-4 committed and copied (position 5); a refresh per entry of ``highs`` (high watermarks)."""
    state, clock = make_state()
    for high in highs:
        beat(state, clock)
        state.record_offsets(FLOW, [OffsetsRow("orders", 0, "a.orders", 0, 5, 5, (4, 4), high)], at=clock.now)
        clock.now += 5
    beat(state, clock)
    return state, clock


def test_partition_held_by_an_open_source_transaction_is_explained():
    # A transaction opened at offset 5 never ends: the last stable offset stays 5, the high
    # watermark is 8. A read_committed replicator can copy nothing more, and has copied all it can.
    state, clock = held_partition_state([8, 8, 8])
    f = run(state, clock).flows[0]
    p = f.partitions[0]
    assert (p.status, p.lag_records, p.open_transaction) == ("WARN", 0, True)
    assert p.reasons[0].startswith("open transaction on the source: the last stable offset 5 is 3 offsets "
                                   "behind the high watermark 8 and has not moved for 10s")
    assert f.reasons == ["1 partitions wait on an open transaction on the source (not a replicator fault)"]
    assert f.replicator_up


def test_transactions_that_end_or_move_within_the_window_are_normal_traffic():
    state, clock = held_partition_state([8, 8])  # not a full window yet
    assert only_partition(run(state, clock)).status == "OK"
    state, clock = held_partition_state([5, 5, 5])  # nothing open
    assert only_partition(run(state, clock)).status == "OK"
    state, clock = make_state()
    for stable in (5, 8, 11):  # always one open at the end, but a new one each time
        beat(state, clock)
        state.record_offsets(FLOW, [OffsetsRow("orders", 0, "a.orders", 0, stable, stable,
                                               (stable - 1, stable - 1), stable + 3)], at=clock.now)
        clock.now += 5
    p = only_partition(run(state, clock))
    assert (p.status, p.open_transaction) == ("OK", False)


def test_data_loss_is_err_and_counted_once():
    state, clock = make_state()
    beat(state, clock)
    for _ in range(3):
        offsets(state, clock, start=7, end=10, target_end=4, sync=(0, 0))
    assert state.flows[FLOW].lost_total["orders"] == 3
    offsets(state, clock, start=9, end=12, target_end=4, sync=(0, 0))  # two more deleted
    assert state.flows[FLOW].lost_total["orders"] == 5
    ev = run(state, clock)
    p = only_partition(ev)
    assert (p.status, p.lost_records, p.lag_records) == ("ERR", 5, 3)
    assert ev.flows[0].status == "ERR" and ev.flows[0].lost_total == {"orders": 5}
    offsets(state, clock, start=9, end=12, target_end=7, sync=(9, 4))  # replicator skipped ahead
    assert only_partition(run(state, clock)).status == "OK"
    assert state.flows[FLOW].lost_total["orders"] == 5


def test_deleting_a_trailing_commit_marker_the_probe_saw_empty_is_no_data_loss():
    # Records 0-9 in a transaction, its commit marker at 10: all 10 records copied, position 10.
    state, clock = make_state()
    offsets(state, clock, end=11, target_end=10, sync=(9, 9))
    key = ("orders", 0)
    state.record_probe(FLOW, key, Probe(10, None, None, 11, clock.now, empty_to=11))
    assert only_partition(run(state, clock)).lag_records == 0
    clock.now += 5
    offsets(state, clock, start=11, end=11, target_end=10, sync=(9, 9))  # deleteRecords(11), a Streams purge
    p = only_partition(run(state, clock))
    assert (p.status, p.lost_records, p.lag_records) == ("OK", 0, 0)
    assert state.flows[FLOW].lost_total[("orders")] == 0
    # Without the probe's evidence the offset could have been a record: counted as lost.
    assert lag.lost_range(10, 11) == (10, 11) and lag.lost_range(10, 11, 11) is None
    assert lag.lost_range(10, 15, 11) == (11, 15)


def test_counters_follow_position_and_source_end():
    state, clock = make_state()
    offsets(state, clock, end=10, target_end=5, sync=(0, 0))
    offsets(state, clock, end=15, target_end=8, sync=(0, 0))
    offsets(state, clock, end=15, target_end=15, sync=(0, 0))
    fs = state.flows[FLOW]
    assert (fs.replicated_total, fs.source_total) == (10, 5)


# --- flows ---------------------------------------------------------------------------

def test_heartbeats_that_stop_arriving_turn_flow_and_lagging_partitions_stop():
    state, clock = make_state()
    beat(state, clock)
    state.record_offsets(FLOW, [OffsetsRow("orders", 0, "a.orders", 0, 20, 10, (0, 0)),
                                OffsetsRow("orders", 1, "a.orders", 0, 5, 5, (4, 4))], at=clock.now)
    clock.now += 9.9
    assert run(state, clock).flows[0].status != "STOP"
    clock.now += 0.2  # the default timeout: 2 x emit.heartbeats.interval.seconds, at least 10 s
    f = run(state, clock).flows[0]
    assert f.status == "STOP" and f.heartbeat.stopped and not f.replicator_up
    assert "no heartbeat arrived in a.heartbeats on b for 10.1s" in f.reasons[0]
    assert [p.status for p in f.partitions] == ["STOP", "OK"]  # a caught-up partition has nothing to stop
    assert run(state, clock, heartbeat_timeout=30).flows[0].status != "STOP"
    assert run(state, clock, heartbeat_timeout=2).flows[0].status == "STOP"


def test_slow_flow_whose_heartbeats_keep_arriving_is_not_stop_but_warn_when_very_late():
    # Every heartbeat takes 15 s to cross (a loaded MM2, long micro-batches), but one arrives
    # every second: the newest heartbeat is always 15 s old, far over 2 x the interval.
    state, clock = make_state()
    offsets(state, clock)
    for _ in range(20):
        clock.now += 1
        beat(state, clock, latency=15.0)
    f = run(state, clock).flows[0]
    assert f.heartbeat.age_seconds == pytest.approx(15.0) and f.heartbeat.arrival_age_seconds == 0.0
    assert f.status == "OK" and not f.heartbeat.stopped and f.replicator_up
    f = run(state, clock, heartbeat_latency_warn=10).flows[0]
    assert f.status == "WARN" and f.replicator_up
    assert f.reasons == ["heartbeats arrive, but the newest was emitted 15s ago (replication latency over 10s)"]


def test_old_heartbeats_already_on_the_target_at_start_are_stop_after_the_timeout():
    state, clock = make_state()
    offsets(state, clock)
    beat(state, clock, latency=None)  # read from the backlog: arrival unknown, at most its timestamp
    state.add_heartbeat(FLOW, Heartbeat("b", "a", int((clock.now - 3600) * 1000)), None)
    clock.now += 5
    f = run(state, clock).flows[0]
    assert f.status == "OK" and f.heartbeat.arrival_age_seconds == pytest.approx(5)
    clock.now += 5.1
    f = run(state, clock).flows[0]
    assert f.status == "STOP" and "for 10.1s" in f.reasons[0]


def test_no_heartbeat_ever_is_stop_after_the_timeout_from_start():
    state, clock = make_state()
    offsets(state, clock)
    assert run(state, clock).flows[0].status == "OK"
    clock.now += 10.5
    f = run(state, clock).flows[0]
    assert f.status == "STOP" and "since the monitor started" in f.reasons[0]


def test_heartbeats_disabled_never_stop_and_liveness_comes_from_progress():
    state, clock = make_state("emit.heartbeats.enabled = false\n")
    offsets(state, clock, end=20, target_end=10, sync=(0, 0))
    clock.now += 100
    offsets(state, clock, end=20, target_end=12, sync=(0, 0))
    f = run(state, clock).flows[0]
    assert f.status == "OK" and not f.heartbeat.expected and f.replicator_up


def test_unreachable_cluster_is_err_and_beats_stop():
    state, clock = make_state()
    offsets(state, clock)
    state.cluster_failed("b", "Connection refused")
    clock.now += 10
    ev = run(state, clock)
    assert ev.status == "ERR" and "cluster b unreachable: Connection refused" in ev.flows[0].reasons[0]
    assert [c.up for c in ev.clusters] == [None, False]


def test_heartbeat_latency_histogram_and_age():
    state, clock = make_state()
    for latency in (0.003, 0.2, 0.2, 7.0):
        beat(state, clock, latency)
    beat(state, clock, latency=None)  # backlog record: age only, no latency sample
    clock.now += 0.5
    hb = run(state, clock).flows[0].heartbeat
    assert hb.latency_count == 4 and hb.received_total == 5
    assert abs(hb.latency_sum - 7.403) < 0.01 and abs(hb.age_seconds - 0.5) < 0.01
    assert hb.bucket_counts[0] == 1 and sum(hb.bucket_counts) == 4


# --- checkpoints -----------------------------------------------------------------------

def test_checkpoint_lag_age_missing_and_pending():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=100, target_end=100, sync=(0, 0))
    state.add_sync(FLOW, OffsetSync("orders", 0, 0, 0), int(T0 * 1000))
    state.add_sync(FLOW, OffsetSync("orders", 0, 99, 99), int(T0 * 1000))
    state.add_checkpoint(FLOW, Checkpoint("moving", "a.orders", 0, 50, 50), int((T0 - 100) * 1000))
    state.add_checkpoint(FLOW, Checkpoint("idle", "a.orders", 0, 40, 41), int((T0 - 100) * 1000))
    state.add_checkpoint(FLOW, Checkpoint("gone", "a.orders", 0, 10, 10), int(T0 * 1000))
    state.set_group_offsets(FLOW, {"moving": {("orders", 0): 80}, "idle": {("orders", 0): 40},
                                   "new": {("orders", 0): 30}})
    groups = {g.group: g for g in run(state, clock).flows[0].groups}
    moving = groups["moving"].partitions[0]
    # 30 records to re-read on failover, but no sync between 50 and 80: MM2's translation of 80 is
    # that of 50, so no newer checkpoint is due.
    assert (moving.translated, moving.lag_records, moving.state, moving.age_seconds) == (80, 30, "ok", 100)
    idle = groups["idle"].partitions[0]
    # The group has not moved since its checkpoint: current, even if old and imprecise.
    assert (idle.lag_records, idle.state, groups["idle"].status) == (0, "ok", "OK")
    assert groups["gone"].partitions[0].state == "no-commit"
    assert groups["new"].partitions[0].state == "pending"  # grace period after the group appears
    clock.now += 51  # checkpoint timeout: 2 x 10 s + the 30 s groups interval
    groups = {g.group: g for g in run(state, clock).flows[0].groups}
    assert groups["new"].partitions[0].state == "missing" and groups["new"].missing == 1


def checkpoint_scenario():
    """Syncs every 100 records up to 300; MM2 checkpointed the group at 150 -> 101 long ago."""
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=300, target_end=301, sync=(300, 300))
    for u in (0, 100, 200, 300):
        state.add_sync(FLOW, OffsetSync("orders", 0, u, u), int((T0 - 3600) * 1000))
    state.add_checkpoint(FLOW, Checkpoint("g", "a.orders", 0, 150, 101), int((T0 - 3600) * 1000))
    return state, clock


def test_idle_group_with_an_old_imprecise_checkpoint_is_not_stale():
    # MM2 writes a checkpoint only when the translation changes: an idle group gets no new one,
    # however old the last is and however many records a failover would re-read.
    state, clock = checkpoint_scenario()
    state.set_group_offsets(FLOW, {"g": {("orders", 0): 150}})
    clock.now += 3600
    g = run(state, clock).flows[0].groups[0]
    assert g.partitions[0].lag_records == 49 and g.partitions[0].age_seconds == pytest.approx(7200)
    assert (g.status, g.stale, g.due_seconds, g.age_seconds) == ("OK", 0, 0.0, 0.0)


def test_group_moving_between_two_syncs_is_not_stale():
    state, clock = checkpoint_scenario()
    for committed in (150, 160, 170, 199):  # MM2 still translates each to 101: nothing to write
        state.set_group_offsets(FLOW, {"g": {("orders", 0): committed}})
        clock.now += 100
    g = run(state, clock).flows[0].groups[0]
    assert (g.status, g.partitions[0].state, g.partitions[0].due_seconds) == ("OK", "ok", None)


def test_group_past_a_sync_without_a_new_checkpoint_is_stale_after_the_timeout():
    state, clock = checkpoint_scenario()
    state.set_group_offsets(FLOW, {"g": {("orders", 0): 150}})
    clock.now += 100
    state.set_group_offsets(FLOW, {"g": {("orders", 0): 210}})  # passed the sync at 200: due now
    clock.now += 20
    state.set_group_offsets(FLOW, {"g": {("orders", 0): 230}})  # still moving: due since the first pass
    clock.now += 30
    g = run(state, clock).flows[0].groups[0]
    assert (g.status, g.partitions[0].state, g.due_seconds) == ("OK", "ok", pytest.approx(50))
    clock.now += 0.5  # checkpoint timeout: 2 x 10 s + the 30 s groups interval
    g = run(state, clock).flows[0].groups[0]
    assert (g.status, g.partitions[0].state, g.stale) == ("WARN", "stale", 1)
    assert "moved past an offset-sync more than 50s ago and no checkpoint followed" in g.reasons[0]
    assert g.age_seconds == pytest.approx(3600 + 150.5)  # the due partition's checkpoint age
    state.add_checkpoint(FLOW, Checkpoint("g", "a.orders", 0, 230, 201), int(clock.now * 1000))
    g = run(state, clock).flows[0].groups[0]
    assert (g.status, g.stale, g.due_seconds) == ("OK", 0, 0.0)


def test_checkpoints_disabled_skip_group_evaluation():
    state, clock = make_state("emit.checkpoints.enabled = false\n")
    offsets(state, clock)
    state.set_group_offsets(FLOW, {"g": {("orders", 0): 3}})
    clock.now += 1000
    state.add_heartbeat(FLOW, Heartbeat("b", "a", int(clock.now * 1000)), clock.now)
    f = run(state, clock).flows[0]
    assert f.groups == [] and f.status == "OK"


def test_decode_error_is_first_only_once_per_topic():
    state, _ = make_state()
    assert state.decode_error("b", "a.heartbeats", "heartbeat") is True
    assert state.decode_error("b", "a.heartbeats", "heartbeat") is False
    assert state.decode_error("a", "mm2-offset-syncs.b.internal", "offset-sync") is True
    assert state.decode_errors[("b", "a.heartbeats", "heartbeat")] == 2


def test_a_partition_that_failed_alone_keeps_its_figures_and_unwatched_ones_go():
    state, clock = make_state()
    state.record_offsets(FLOW, [OffsetsRow("orders", 0, "a.orders", 0, 10, 4, (0, 0)),
                                OffsetsRow("orders", 1, "a.orders", 0, 5, 5, (4, 4))], at=clock.now)
    state.record_offsets(FLOW, [OffsetsRow("orders", 1, "a.orders", 0, 6, 6, (4, 4))], at=clock.now,
                         keep={("orders", 0)})
    parts = state.flows[FLOW].partitions
    assert parts[("orders", 0)].source_end == 10 and parts[("orders", 1)].source_end == 6
    state.record_offsets(FLOW, [OffsetsRow("orders", 1, "a.orders", 0, 6, 6, (4, 4))], at=clock.now)
    assert list(parts) == [("orders", 1)]


def test_one_failed_request_among_successes_does_not_flip_cluster_up():
    """One slow broker failing one of several calls must not make sparkmirror_cluster_up 0 (and page)
    until the next refresh: a cluster that answered is down only after consecutive failures over time."""
    from monitor.facts import DOWN_AFTER_FAILURES, DOWN_AFTER_SECONDS

    state, clock = make_state()
    state.cluster_ok("b")
    for _ in range(5):  # every refresh: one call times out, the others succeed
        clock.now += 5
        assert state.cluster_failed("b", "request timed out") is False
        state.cluster_ok("b")
        assert [c.up for c in run(state, clock).clusters] == [None, True]
    # every call fails: still up until both the count and the time say otherwise
    started = clock.now = clock.now + 1  # the first failure of the run
    for _ in range(DOWN_AFTER_FAILURES - 1):
        assert state.cluster_failed("b", "Connection refused") is False
        clock.now += 1
    assert run(state, clock).clusters[1].up is True
    clock.now = started + DOWN_AFTER_SECONDS - 0.5
    assert state.cluster_failed("b", "Connection refused") is False  # enough failures, not long enough
    clock.now = started + DOWN_AFTER_SECONDS + 1
    assert state.cluster_failed("b", "Connection refused") is True
    ev = run(state, clock)
    assert ev.clusters[1].up is False and "cluster b unreachable: Connection refused" in ev.flows[0].reasons[0]
    assert ev.clusters[1].errors_total == 5 + DOWN_AFTER_FAILURES + 1
    state.cluster_ok("b")
    assert run(state, clock).clusters[1].up is True


def test_a_cluster_reported_down_while_an_evaluation_is_paused_shows_in_the_next_one_whole():
    """The clusters' list and the flows' statuses of one evaluation agree: a cluster the collectors
    report down between two of its steps is down in neither (and in both of the next)."""
    from monitor import evaluator
    from monitor.facts import DOWN_AFTER_FAILURES, DOWN_AFTER_SECONDS

    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock)
    state.cluster_ok("b")
    steps = evaluator.evaluate_steps(state, clock.now, EvaluatorSettings(window=3), clock=lambda: 0.0)
    next(steps)  # the flow is evaluated; the evaluation pauses before it lists the clusters
    started = clock.now
    for _ in range(DOWN_AFTER_FAILURES):
        state.cluster_failed("b", "Connection refused")
        clock.now += 1
    clock.now = started + DOWN_AFTER_SECONDS + 1
    assert state.cluster_failed("b", "Connection refused") is True
    with pytest.raises(StopIteration) as done:
        next(steps)
    paused = done.value.value
    assert [c.up for c in paused.clusters] == [None, True]
    assert not any("unreachable" in r for r in paused.flows[0].reasons), paused.flows[0].reasons
    after = run(state, clock)
    assert [c.up for c in after.clusters] == [None, False]
    assert after.flows[0].status == "ERR" and "cluster b unreachable" in after.flows[0].reasons[0]


def test_garbage_read_while_an_evaluation_is_paused_waits_for_the_next_one():
    """An evaluation's decode-error counts are as old as its flows: a heartbeat read just before
    garbage in the same partition is in every evaluation that counts that garbage."""
    from monitor import evaluator

    state, clock = make_state()
    offsets(state, clock)
    steps = evaluator.evaluate_steps(state, clock.now, EvaluatorSettings(window=3), clock=lambda: 0.0)
    next(steps)  # the flow is evaluated; the evaluation pauses
    beat(state, clock)  # read in this order from one partition
    state.decode_error("b", "a.heartbeats", Heartbeat.RECORD_TYPE)
    with pytest.raises(StopIteration) as done:
        next(steps)
    paused = done.value.value
    assert (paused.flows[0].heartbeat.received_total, paused.decode_errors) == (0, {})
    after = run(state, clock)
    assert after.flows[0].heartbeat.received_total == 1
    assert after.decode_errors == {("b", "a.heartbeats", Heartbeat.RECORD_TYPE): 1}


def test_cluster_down_counts_from_when_the_failed_requests_were_sent():
    """Requests that each waited a whole timeout for a stopped broker say the cluster has been
    failing since they were sent: the cluster is down DOWN_AFTER_SECONDS after the outage began,
    not one request timeout later. A request sent before the last success does not reach back."""
    from monitor.facts import DOWN_AFTER_FAILURES, DOWN_AFTER_SECONDS

    timeout = 10.0
    state, clock = make_state()
    state.cluster_ok("b")
    outage = clock.now = clock.now + 1
    # one request a second, each failing after the timeout
    sent = outage
    clock.now = outage + timeout
    for i in range(DOWN_AFTER_FAILURES):
        assert state.cluster_failed("b", "All broker connections are down", sent_at=sent + i) is False
    clock.now = outage + DOWN_AFTER_SECONDS + 0.1
    assert state.cluster_failed("b", "All broker connections are down",
                                sent_at=clock.now - timeout) is True
    assert run(state, clock).clusters[1].up is False
    # back: a slow request sent during the outage fails after the success; the next failures count
    # from the success, not from that request
    clock.now += 5
    state.cluster_ok("b")
    back = clock.now
    for _ in range(DOWN_AFTER_FAILURES):
        clock.now += 1
        assert state.cluster_failed("b", "request timed out", sent_at=back - 20) is False
    clock.now = back + DOWN_AFTER_SECONDS + 0.1
    assert state.cluster_failed("b", "request timed out", sent_at=back - 20) is True


def _stepped(state, now, clock):
    from monitor import evaluator

    steps = evaluator.evaluate_steps(state, now, EvaluatorSettings(window=3), clock=clock)
    pauses = 0
    while True:
        try:
            next(steps)
            pauses += 1
        except StopIteration as done:
            return done.value, pauses


def test_evaluation_in_steps_pauses_by_time_in_every_pass_and_gives_the_same_result():
    from monitor import pacing

    state, clock = make_state()
    beat(state, clock)
    rows = [OffsetsRow(f"t{i // 100}", i % 100, f"a.t{i // 100}", 0, 10, 10 - i % 2, (0, 0)) for i in range(2500)]
    state.record_offsets(FLOW, rows, at=clock.now)
    whole = run(state, clock)

    # A clock that reads a whole step's time later at every read: a step never does more than
    # one stretch of _CHECK_EVERY items before it pauses, in every pass over a topic's partitions
    # (the partitions themselves, retention headroom, the topic's totals, its sample windows).
    ticks = iter(range(10**9))
    slow, pauses_slow = _stepped(state, clock.now, lambda: next(ticks) * pacing.STEP_SECONDS)
    per_pass = 2500 // (2 * pacing._CHECK_EVERY)  # at least every other clock read pauses
    assert pauses_slow >= 4 * per_pass - 25  # (a stretch may straddle two of the 25 topics)

    # A clock that stands still: the work never runs out of time, so it pauses only between flows.
    frozen, pauses_frozen = _stepped(state, clock.now, lambda: 0.0)
    assert pauses_frozen == len(state.flows)

    for stepped in (slow, frozen):
        assert stepped.flows[0].lag_records == whole.flows[0].lag_records == 1250
        assert [p.lag_records for p in stepped.flows[0].partitions] == [p.lag_records for p in whole.flows[0].partitions]
        assert [(t.topic, t.lag_records, t.status) for t in stepped.flows[0].topics] == \
            [(t.topic, t.lag_records, t.status) for t in whole.flows[0].topics]
        assert stepped.flows[0].partitions_by_status == whole.flows[0].partitions_by_status


def test_offsets_recorded_in_steps_while_an_evaluation_is_paused_between_partitions():
    """The monitor records a refresh in steps on its event loop, as it evaluates: a refresh that
    adds and drops partitions while an evaluation is paused in any of its passes over them must
    not break that evaluation, and gives the same state as recorded in one go."""
    from monitor import evaluator, pacing
    from monitor.pacing import Pacer

    kept = [("old", p) for p in range(300)]
    rows = [OffsetsRow("new", p, "a.new", 0, 20, 15, (0, 0)) for p in range(300)]
    for ahead in range(0, 80, 4):  # how many steps the evaluation took before the refresh came
        state, clock = make_state()
        beat(state, clock)
        state.record_offsets(FLOW, [OffsetsRow("old", p, "a.old", 0, 10, 10, (0, 0)) for p in range(600)],
                             at=clock.now)
        clock.now += 1
        # the source grew, the copy did not move: the evaluation's pass looking for a moved copy
        # goes over every partition
        state.record_offsets(FLOW, [OffsetsRow("old", p, "a.old", 0, 12, 10, (0, 0)) for p in range(600)],
                             at=clock.now)
        ticks = iter(range(10**9))
        tick = lambda: next(ticks) * pacing.STEP_SECONDS  # every clock read is a step's time later
        evaluation = evaluator.evaluate_steps(state, clock.now, EvaluatorSettings(window=3), clock=tick)
        result = None
        for _ in range(ahead):
            try:
                next(evaluation)
            except StopIteration as done:
                result = done.value
                break
        clock.now += 1
        refresh = state.record_offsets_steps(FLOW, rows, clock.now, unchanged=kept,
                                             pacer=Pacer(tick, pacing.STEP_SECONDS))
        pauses = 0
        for _ in refresh:  # each pause of the refresh lets the evaluation take one step, and back
            pauses += 1
            if result is None:
                try:
                    next(evaluation)
                except StopIteration as done:
                    result = done.value
        result = result or _all_steps(evaluation)
        assert pauses >= 4 and result.flows[0].partitions, ahead
        parts = state.flows[FLOW].partitions
        assert sorted(parts) == sorted(kept + [("new", p) for p in range(300)])
        assert all(parts[key].read_at == clock.now for key in kept)
        assert sum(p.lag_records for p in run(state, clock).flows[0].partitions) == 300 * 2 + 300 * 5


def _all_steps(steps):
    """A stepped generator's value (monitor.pacing), driven without an event loop."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def test_a_refresh_recomputes_only_the_partitions_whose_figures_changed():
    from monitor.collectors.offsets import EndOffsetCollector
    from monitor.watch import MonitorOptions

    state, clock = make_state()
    collector = EndOffsetCollector(state.flows[FLOW].watch, None, None, state, MonitorOptions(), None)
    watched = [("orders", p, "a.orders", True) for p in range(3)]
    starts = {("orders", p): 0 for p in range(3)}
    syncs = {("orders", p): (0, 0) for p in range(3)}
    ends = {("orders", p): 10 for p in range(3)}
    target_ends = {("a.orders", p): 10 for p in range(3)}
    rows, unread, unchanged = _all_steps(collector._compare(watched, starts, syncs, ends, target_ends))
    assert len(rows) == 3 and not unread and not unchanged
    state.record_offsets(FLOW, rows, at=clock.now)
    clock.now += 0.2
    ends[("orders", 1)] = 12
    del target_ends[("a.orders", 2)]  # failed alone this time
    rows, unread, unchanged = _all_steps(collector._compare(watched, starts, syncs, ends, target_ends))
    assert [(r.partition, r.source_end) for r in rows] == [(1, 12)]
    assert unread == {("orders", 2)} and unchanged == [("orders", 0)]
    state.record_offsets(FLOW, rows, at=clock.now, keep=unread, unchanged=unchanged)
    parts = state.flows[FLOW].partitions
    assert [round(parts[("orders", p)].read_at - T0, 3) for p in range(3)] == [0.2, 0.2, 0.0]
    assert parts[("orders", 1)].source_end == 12 and len(parts) == 3


def test_reused_results_of_idle_partitions_are_what_a_fresh_evaluation_gives():
    """The evaluator keeps caught-up idle partitions' results while nothing about them moves:
    every evaluation must still equal one made from scratch, as partitions fall behind,
    catch up and are read again."""
    import dataclasses

    from monitor.state import OffsetsRow
    from tests.support.evaluator import FLOW, beat, make_state, run

    state, clock = make_state(window=3)
    state.sample_every = 3.0  # as the monitor runs: positions read more often than the window samples

    def fresh():
        fs = state.flows[FLOW]
        kept, fs.topic_blocks = fs.topic_blocks, {}
        touched = set(fs.touched)
        try:
            return run(state, clock)
        finally:
            fs.topic_blocks, fs.touched = kept, touched

    for step in range(8):
        beat(state, clock)
        rows = [OffsetsRow("orders", p, "a.orders", 0, 100 + (step * 10 if p == 0 else 0),
                           100 - (5 if p == 1 and step in (3, 4) else 0), (0, 0)) for p in range(4)]
        state.record_offsets(FLOW, rows, at=clock.now)
        got, want = run(state, clock), fresh()
        assert [dataclasses.asdict(p) for p in got.flows[0].partitions] == \
            [dataclasses.asdict(p) for p in want.flows[0].partitions], step
        clock.now += 1.0
    assert any(b.idle for b in state.flows[FLOW].topic_blocks.values()), "idle partitions are kept"


@pytest.mark.parametrize("seed", [2, 7, 11])
def test_kept_topic_evaluations_are_what_a_fresh_evaluation_gives(seed):
    """The evaluator keeps each quiet topic's whole evaluation while the state does not touch it:
    over random reads (partitions falling behind and catching up, read again unchanged, probed,
    dropped and added, retention changed, heartbeats stopping), every evaluation must equal one
    made from scratch, partitions, topics and the flow's figures alike."""
    import random

    from monitor.facts import Probe, TopicRetention
    from monitor.state import OffsetsRow
    from tests.support.evaluator import FLOW, beat, make_state, run

    rng = random.Random(seed)
    state, clock = make_state(window=3)
    state.sample_every = 1.0
    fs = state.flows[FLOW]
    ends = {(t, p): 100 for t in ("a", "b", "c", "d") for p in range(3)}
    copied = dict(ends)

    def fresh():
        kept, touched = fs.topic_blocks, set(fs.touched)
        fs.topic_blocks = {}
        try:
            return run(state, clock)
        finally:
            fs.topic_blocks, fs.touched = kept, touched

    def figures(ev):
        f = ev.flows[0]
        return ([dataclasses.asdict(p) for p in f.partitions], [dataclasses.asdict(t) for t in f.topics],
                f.status, f.reasons, f.lag_records, f.lag_seconds, f.partitions_by_status, f.catchup_state,
                f.copy_rate, f.retention_headroom_seconds, f.retention_low_partitions, f.replicator_up)

    reused = 0
    for step in range(60):
        if step < 40 or step % 7:
            beat(state, clock)  # then silences: the flow stops
        for key in ends:
            if key[0] == "d" and step > 3:
                copied[key] = ends[key]
                continue  # one topic catches up and stays still: its evaluation is kept
            if rng.random() < 0.15:
                ends[key] += rng.randrange(1, 20)
            if rng.random() < 0.3:
                copied[key] = ends[key]
        if step == 20:
            del ends[("b", 2)], copied[("b", 2)]
        if step == 30:
            ends[("e", 0)] = copied[("e", 0)] = 5
        if step % 10 == 5:
            state.set_retention(FLOW, {"a": TopicRetention(rng.choice([60_000, 86_400_000]), None, True)})
        # read with new figures, or again with the same (either way the collector may report it)
        recorded = {k: (p.source_end, p.target_end) for k, p in fs.partitions.items()}
        changed = [k for k in ends if recorded.get(k) != (ends[k], copied[k]) or rng.random() < 0.1]
        rows = [OffsetsRow(t, p, f"a.{t}", 0, ends[(t, p)], copied[(t, p)], (0, 0)) for t, p in changed]
        state.record_offsets(FLOW, rows, at=clock.now, unchanged=[k for k in ends if k not in changed])
        for (t, p), part in fs.partitions.items():
            pos = part.position.offset
            if pos is not None and pos < ends[(t, p)] and rng.random() < 0.5:
                state.record_probe(FLOW, (t, p), Probe(pos, pos, int((clock.now - 30) * 1000), ends[(t, p)],
                                                       clock.now))
        kept_before = {t for t, b in fs.topic_blocks.items() if b.quiet and t not in fs.touched}
        got, want = run(state, clock), fresh()
        reused += len(kept_before)
        assert figures(got) == figures(want), step
        clock.now += rng.choice([0.2, 0.5, 1.0])
    assert reused >= 40, "quiet topics were kept whole"


def test_partitions_are_sorted_again_only_when_they_came_or_went():
    """The evaluation goes over the partitions in order; the order is kept between evaluations
    and rebuilt when a refresh added or dropped partitions, never stale."""
    state, clock = make_state()
    beat(state, clock)
    state.record_offsets(FLOW, [OffsetsRow("b", p, "a.b", 0, 10, 10, (0, 0)) for p in range(3)], at=clock.now)
    fs = state.flows[FLOW]
    first = evaluate(state, clock.now, EvaluatorSettings())
    order = fs.partitions_order[2]
    clock.now += 1
    state.record_offsets(FLOW, [OffsetsRow("b", p, "a.b", 0, 11, 11, (0, 0)) for p in range(3)], at=clock.now)
    evaluate(state, clock.now, EvaluatorSettings())
    assert fs.partitions_order[2] is order  # same partitions: not sorted again
    clock.now += 1
    # one partition gone, two come (one sorting first): the same count, another set
    rows = [OffsetsRow("a", 0, "a.a", 0, 5, 5, (0, 0)), OffsetsRow("b", 0, "a.b", 0, 11, 11, (0, 0)),
            OffsetsRow("c", 0, "a.c", 0, 5, 5, (0, 0))]
    state.record_offsets(FLOW, rows, at=clock.now)
    later = evaluate(state, clock.now, EvaluatorSettings())
    assert [(p.topic, p.partition) for p in first.flows[0].partitions] == [("b", 0), ("b", 1), ("b", 2)]
    assert [(p.topic, p.partition) for p in later.flows[0].partitions] == [("a", 0), ("b", 0), ("c", 0)]


def test_each_loops_rounds_of_the_last_minute_are_counted_with_their_median_and_worst(monkeypatch):
    import monitor.state as state_module

    state, clock = make_state()
    now = [1000.0]
    monkeypatch.setattr(state_module.time, "monotonic", lambda: now[0])
    for seconds in (0.9, 0.1, 0.3, 0.2, 0.5):  # the first one more than a minute ago
        state.record_duration(FLOW, "offsets", seconds)
        now[0] += 61 if seconds == 0.9 else 1
    assert state.recent_rounds(FLOW) == {"offsets": (4, 0.2, 0.5)}
    assert state.flows[FLOW].collector_seconds["offsets"] == 0.5  # the last round, as before
    result = evaluate(state, clock.now, EvaluatorSettings()).flows[0]
    assert result.collector_last_minute == {"offsets": (4, 0.2, 0.5)}


def test_a_topic_with_a_partition_of_unknown_position_has_no_lag_figure_not_zero():
    """One partition caught up, the other's mirror holds records no offset-sync accounts for yet
    (MM2 sends a partition's first sync late when its offset-sync producer is busy): the topic
    must not read 0 behind, as if caught up."""
    state, clock = make_state()
    beat(state, clock)
    rows = [OffsetsRow("orders", 0, "a.orders", 0, 150, 150, None),
            OffsetsRow("orders", 1, "a.orders", 0, 150, 150, (0, 0))]
    state.record_offsets(FLOW, rows, at=clock.now)
    ev = run(state, clock)
    assert [p.lag_records for p in ev.flows[0].partitions] == [None, 0]
    (topic,) = ev.flows[0].topics
    assert (topic.lag_records, topic.lag_seconds, topic.status) == (None, None, "OK")  # (a warning after the grace)
    state.record_offsets(FLOW, [dataclasses.replace(rows[0], sync=(0, 0)), rows[1]], at=clock.now)
    (topic,) = run(state, clock).flows[0].topics
    assert (topic.lag_records, topic.lag_seconds) == (0, 0.0)


def test_a_flow_with_a_partition_of_unknown_lag_says_so_and_is_not_caught_up():
    """The flow's figures stay a sum over the partitions whose position is known (its lag alerts
    keep firing on those), but they say how many are left out, and the flow is not called caught
    up while one of them may be behind."""
    state, clock = make_state()
    beat(state, clock)
    rows = [OffsetsRow("orders", 0, "a.orders", 0, 150, 150, None),
            OffsetsRow("orders", 1, "a.orders", 0, 150, 150, (0, 0))]
    for _ in range(3):  # a window of samples: rates are measured
        state.record_offsets(FLOW, rows, at=clock.now)
        clock.now += 1.0
    flow = run(state, clock).flows[0]
    assert (flow.lag_records, flow.lag_unknown_partitions) == (0, 1)
    assert flow.catchup_state == "unknown"
    state.record_offsets(FLOW, [dataclasses.replace(rows[0], sync=(0, 0)), rows[1]], at=clock.now)
    flow = run(state, clock).flows[0]
    assert (flow.lag_records, flow.lag_unknown_partitions, flow.catchup_state) == (0, 0, "caught-up")
