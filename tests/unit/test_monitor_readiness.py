"""Failover readiness and retention headroom (monitor.readiness), on hand-built states (no Kafka)."""

from __future__ import annotations

import math

import pytest

from sparkmirror import metrics as m
from monitor import readiness
from monitor.exporters.api import status_document
from monitor.exporters.samples import samples
from monitor.facts import Probe, TopicRetention
from monitor.state import OffsetsRow
from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.evaluator import FLOW, T0, beat, make_state, offsets, run

MS = 1000


def groups_of(ev) -> dict:
    return {g.group: g for g in ev.flows[0].groups}


def replicated(state, clock, *, end=100, target_end=100, first_sync=(0, 0)):
    """orders[0]: source [0, end), target [0, target_end), one run of syncs on D = U."""
    beat(state, clock)
    offsets(state, clock, end=end, target_end=target_end, sync=(end - 1, target_end - 1))
    state.add_sync(FLOW, OffsetSync("orders", 0, *first_sync), int(T0 * MS))
    state.add_sync(FLOW, OffsetSync("orders", 0, end - 1, target_end - 1), int(T0 * MS))


def checkpoint(state, group, upstream, downstream, partition=0):
    state.add_checkpoint(FLOW, Checkpoint(group, "a.orders", partition, upstream, downstream), int(T0 * MS))


def exported(ev) -> dict:
    return {(spec.name, labels): value for spec, labels, value in samples(ev, "test")}


# --- failover readiness ----------------------------------------------------------------

def test_group_ahead_of_its_checkpoint_can_fail_over_and_says_what_it_would_reread():
    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "billing", 50, 50)
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 80}})
    assert readiness.timestamps_needed(state.flows[FLOW]) == {("orders", 0, 50), ("orders", 0, 79)}
    fo = groups_of(run(state, clock))["billing"].failover
    # Timestamps not read yet: the records are known, the time span is not.
    assert (fo.ready, fo.reread_records, fo.reread_seconds) == (True, 30, None)
    assert fo.summary == "can fail over now: would re-read 30 records (time span not known yet)"
    state.set_record_timestamps(FLOW, {("orders", 0, 50): int((T0 - 10) * MS),
                                       ("orders", 0, 79): int((T0 - 6.9) * MS)}, set())
    g = groups_of(run(state, clock))["billing"]
    assert (g.failover.ready, g.failover.reread_records, g.failover.reread_seconds) == (True, 30, 3.1)
    assert g.failover.summary == "can fail over now: would re-read 30 records (3.1 s)"
    assert g.status == "OK"


def test_reread_over_the_limits_is_not_ready():
    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "billing", 50, 50)
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 80}})
    state.set_record_timestamps(FLOW, {("orders", 0, 50): int((T0 - 400) * MS),
                                       ("orders", 0, 79): int(T0 * MS)}, set())
    g = groups_of(run(state, clock))["billing"]
    assert not g.failover.ready and g.failover.blockers == ["reread-seconds"]
    assert g.failover.summary == "cannot fail over: would re-read records spanning 6.7 min (limit 5.0 min)"
    assert g.status == "WARN" and g.failover.summary in g.reasons
    g = groups_of(run(state, clock, failover_max_reread_seconds=None, failover_max_reread_records=20))["billing"]
    assert g.failover.blockers == ["reread-records"]
    assert g.failover.summary == "cannot fail over: would re-read 30 records (limit 20)"
    flow = run(state, clock, failover_max_reread_seconds=None).flows[0]
    assert flow.groups[0].failover.ready and flow.failover_groups_not_ready == 0


def test_caught_up_group_has_nothing_to_reread_and_needs_no_timestamps():
    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "billing", 100, 100)
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 100}})
    assert readiness.timestamps_needed(state.flows[FLOW]) == set()
    fo = groups_of(run(state, clock))["billing"].failover
    assert (fo.ready, fo.reread_records, fo.reread_seconds, fo.summary) == (
        True, 0, 0.0, "can fail over now: nothing to re-read")


def test_no_checkpoint_yet_is_not_ready_but_a_new_group_is_not_warn_within_the_grace_period():
    state, clock = make_state()
    replicated(state, clock)
    state.set_group_offsets(FLOW, {"new": {("orders", 0): 30}})
    g = groups_of(run(state, clock))["new"]
    assert not g.failover.ready and g.failover.blockers == ["no-checkpoint"]
    assert g.failover.summary == "cannot fail over: orders[0]: no checkpoint yet"
    assert g.status == "OK"  # MM2 checkpoints a new group within its emit interval
    ev = run(state, clock)
    assert ev.flows[0].failover_groups_not_ready == 1
    values = exported(ev)
    assert values[(m.FAILOVER_READY.name, (FLOW, "new"))] == 0.0
    assert {r: values[(m.FAILOVER_BLOCKED.name, (FLOW, "new", r))] for r in m.FAILOVER_REASONS} == {
        r: float(r == "no-checkpoint") for r in m.FAILOVER_REASONS}
    assert values[(m.FAILOVER_REREAD_RECORDS.name, (FLOW, "new"))] == 0.0  # nothing checkpointed to re-read
    clock.now += 51  # past the checkpoint timeout (2 x 10 s + 30 s)
    assert groups_of(run(state, clock))["new"].status == "WARN"


def test_group_behind_its_checkpoint_would_skip_unconsumed_records():
    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "rewound", 70, 70)
    state.set_group_offsets(FLOW, {"rewound": {("orders", 0): 40}})  # offsets reset back after the checkpoint
    g = groups_of(run(state, clock))["rewound"]
    fo = g.failover
    assert (fo.ready, fo.blockers, fo.skipped_records, fo.reread_records) == (False, ["would-skip"], 30, 0)
    assert "would skip 30 records the group has not consumed" in fo.summary
    assert g.status == "WARN"
    assert exported(run(state, clock))[(m.FAILOVER_SKIPPED_RECORDS.name, (FLOW, "rewound"))] == 30.0


def test_a_checkpoint_newer_than_the_committed_offset_read_is_progress_not_a_reset():
    # Committed offsets are read every 30 s, checkpoints arrive every few seconds: a group that
    # keeps committing is checkpointed past the offset last read. That is not "would skip".
    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "busy", 40, 40)
    state.set_group_offsets(FLOW, {"busy": {("orders", 0): 40}}, read_started=clock.now - 0.2)
    clock.now += 3
    checkpoint(state, "busy", 70, 70)  # the group committed 70 after the read
    g = groups_of(run(state, clock))["busy"]
    assert (g.failover.ready, g.failover.blockers, g.failover.skipped_records) == (True, [], 0)
    assert g.failover.summary == "can fail over now: nothing to re-read"
    assert g.status == "OK"
    # The next read tells progress from a reset: the group is back at 40 after the checkpoint.
    clock.now += 1
    state.set_group_offsets(FLOW, {"busy": {("orders", 0): 40}}, read_started=clock.now - 0.2)
    g = groups_of(run(state, clock))["busy"]
    assert (g.failover.blockers, g.failover.skipped_records) == (["would-skip"], 30)
    assert g.status == "WARN"


def test_group_behind_the_offset_sync_window_cannot_get_a_checkpoint():
    state, clock = make_state()
    # The oldest sync the monitor knows is at upstream 60: committed offset 50 cannot be translated.
    replicated(state, clock, first_sync=(60, 60))
    state.set_group_offsets(FLOW, {"slow": {("orders", 0): 50}, "older": {("orders", 0): 50}})
    checkpoint(state, "older", 40, 40)  # written while 40 could still be translated
    groups = groups_of(run(state, clock))
    assert groups["slow"].failover.blockers == ["behind-offset-syncs"]
    assert "older than every offset-sync" in groups["slow"].failover.summary
    # A checkpoint from before still works: re-read counted in source offsets (no translation).
    older = groups["older"].failover
    assert (older.ready, older.reread_records) == (True, 10)


def test_checkpoint_past_the_end_of_the_mirror_partition():
    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "billing", 90, 150)  # the mirror was re-created and holds 100 records
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 95}})
    fo = groups_of(run(state, clock))["billing"].failover
    assert fo.blockers == ["past-target-end"] and "past the end of the mirror partition (100" in fo.summary


def test_nothing_consumed_and_nothing_replicated_is_ready():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, start=0, end=0, target_end=0, sync=None)
    state.set_group_offsets(FLOW, {"idle": {("orders", 0): 0}})
    assert groups_of(run(state, clock))["idle"].failover.ready


def test_several_blockers_are_all_listed_and_the_group_result_is_in_the_status_document():
    state, clock = make_state()
    replicated(state, clock)
    state.record_offsets(FLOW, [OffsetsRow("orders", p, "a.orders", 0, 100, 100, (99, 99)) for p in (0, 1)],
                         at=clock.now)
    checkpoint(state, "g", 70, 70)
    state.set_group_offsets(FLOW, {"g": {("orders", 0): 40, ("orders", 1): 10}})
    clock.now += 100
    fo = groups_of(run(state, clock))["g"].failover
    assert fo.blockers == ["no-checkpoint", "would-skip"]
    doc = status_document(run(state, clock))["flows"][0]
    failover = doc["groups"][0]["failover"]
    assert failover["ready"] is False and failover["blockers"] == ["no-checkpoint", "would-skip"]
    assert [p["partition"] for p in failover["blocked_partitions"]] == [0, 1]
    assert doc["failover"] == {"groups_not_ready": 1}


# --- retention headroom --------------------------------------------------------------

HOUR_MS = 3_600_000
WEEK = TopicRetention(7 * 24 * HOUR_MS, None, True)


def lagging(state, clock, oldest_age: float, caught_up: int = 0):
    """orders[0] 10 records behind, the oldest unreplicated one written ``oldest_age`` s ago; and
    ``caught_up`` more partitions with nothing to copy."""
    rows = [OffsetsRow("orders", 0, "a.orders", 0, 20, 10, (0, 0))]
    rows += [OffsetsRow("orders", p, "a.orders", 0, 5, 5, (0, 0)) for p in range(1, caught_up + 1)]
    state.record_offsets(FLOW, rows, at=clock.now)
    state.record_probe(FLOW, ("orders", 0), Probe(10, 10, int((clock.now - oldest_age) * MS), 20, clock.now))


def test_headroom_is_oldest_unreplicated_timestamp_plus_retention_minus_now():
    state, clock = make_state()
    beat(state, clock)
    lagging(state, clock, 600)
    state.set_retention(FLOW, {"orders": TopicRetention(HOUR_MS, None, True)})
    ev = run(state, clock)
    p = ev.flows[0].partitions[0]
    assert p.retention_headroom_seconds == pytest.approx(3000)
    assert p.status == "OK" and ev.flows[0].retention_low_partitions == 0  # warn below min(1 h, 30 min)
    values = exported(ev)
    assert values[(m.PARTITION_RETENTION_HEADROOM.name, (FLOW, "orders", "0"))] == pytest.approx(3000)
    assert values[(m.TOPIC_RETENTION_HEADROOM.name, (FLOW, "orders"))] == pytest.approx(3000)
    assert values[(m.FLOW_RETENTION_HEADROOM.name, (FLOW,))] == pytest.approx(3000)


def test_low_headroom_warns_with_a_reason_before_any_data_is_lost():
    state, clock = make_state()
    beat(state, clock)
    lagging(state, clock, 7 * 24 * 3600 - 1200, caught_up=1)  # 20 minutes left of a week; a full week
    state.set_retention(FLOW, {"orders": WEEK})
    flow = run(state, clock).flows[0]
    low, fine = flow.partitions
    assert low.status == "WARN" and low.retention_headroom_seconds == pytest.approx(1200)
    assert "may delete records not yet on the target in 20.0 min" in low.reasons[0]
    assert fine.status == "OK" and fine.retention_headroom_seconds == pytest.approx(7 * 24 * 3600)
    assert flow.status == "WARN" and flow.retention_low_partitions == 1
    assert flow.reasons == ["1 partitions may soon lose records not yet on the target to retention; "
                            "lowest: orders[0] in 20.0 min"]
    assert flow.retention_headroom_seconds == pytest.approx(1200)
    assert exported(run(state, clock))[(m.FLOW_RETENTION_LOW.name, (FLOW,))] == 1.0
    # The warning threshold is the monitor's setting.
    assert run(state, clock, retention_headroom_warn=600).flows[0].retention_low_partitions == 0


def test_short_retention_warns_at_half_of_it_not_whenever_there_is_lag():
    state, clock = make_state()
    beat(state, clock)
    state.set_retention(FLOW, {"orders": TopicRetention(20 * 60 * 1000, None, True)})  # 20 minutes
    lagging(state, clock, 60)
    assert run(state, clock).flows[0].retention_low_partitions == 0   # 19 min left, warn below 10 min
    lagging(state, clock, 11 * 60)
    assert run(state, clock).flows[0].retention_low_partitions == 1


@pytest.mark.parametrize("retention", [TopicRetention(None, None, True),      # retention.ms = -1
                                       TopicRetention(HOUR_MS, None, False)])  # cleanup.policy = compact
def test_unlimited_retention_is_reported_as_such(retention):
    state, clock = make_state()
    beat(state, clock)
    lagging(state, clock, 10 * 24 * 3600)
    state.set_retention(FLOW, {"orders": retention})
    ev = run(state, clock)
    flow = ev.flows[0]
    p = flow.partitions[0]
    assert (p.retention_headroom_seconds, p.retention_unlimited, p.status) == (None, True, "OK")
    assert (flow.retention_headroom_seconds, flow.retention_unlimited) == (None, True)
    values = exported(ev)
    assert values[(m.PARTITION_RETENTION_HEADROOM.name, (FLOW, "orders", "0"))] == math.inf
    assert values[(m.FLOW_RETENTION_HEADROOM.name, (FLOW,))] == math.inf
    doc = status_document(ev)["flows"][0]
    assert doc["retention"] == {"headroom_seconds": None, "unlimited": True, "low_partitions": 0}
    assert doc["topics"][0]["retention_unlimited"] is True


def test_headroom_unknown_until_retention_and_the_oldest_record_are_read():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, end=20, target_end=10, sync=(0, 0))  # lagging, not probed yet
    ev = run(state, clock)
    assert (ev.flows[0].retention_headroom_seconds, ev.flows[0].retention_unlimited) == (None, False)
    assert not [k for k in exported(ev) if "retention_headroom" in k[0]]
    state.set_retention(FLOW, {"orders": WEEK})
    p = run(state, clock).flows[0].partitions[0]
    assert (p.retention_headroom_seconds, p.retention_unlimited) == (None, False)


def test_a_partition_with_lost_records_keeps_err_and_shows_the_headroom_of_what_is_left():
    state, clock = make_state()
    beat(state, clock)
    offsets(state, clock, start=15, end=20, target_end=10, sync=(0, 0))
    state.record_probe(FLOW, ("orders", 0), Probe(10, 15, int((clock.now - 3590) * MS), 20, clock.now))
    state.set_retention(FLOW, {"orders": TopicRetention(HOUR_MS, None, True)})
    p = run(state, clock).flows[0].partitions[0]
    assert p.status == "ERR" and p.retention_headroom_seconds == pytest.approx(10)


def test_retention_settings_from_describe_configs():
    from monitor.collectors.retention import parse_retention

    assert parse_retention({"retention.ms": "604800000", "retention.bytes": "-1", "cleanup.policy": "delete"}) \
        == TopicRetention(604800000, None, True)
    assert parse_retention({"retention.ms": "-1", "cleanup.policy": "compact,delete"}) == \
        TopicRetention(None, None, True)
    assert parse_retention({"retention.ms": "1000", "cleanup.policy": "compact"}).deletes is False


# --- in words on the status page ---------------------------------------------------------

def test_status_page_says_whether_each_group_can_fail_over_and_the_retention_headroom():
    from monitor.exporters.page import fragment

    state, clock = make_state()
    replicated(state, clock)
    checkpoint(state, "billing", 50, 50)
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 80}, "new": {("orders", 0): 30}})
    state.set_record_timestamps(FLOW, {("orders", 0, 50): int((T0 - 10) * MS),
                                       ("orders", 0, 79): int((T0 - 6.9) * MS)}, set())
    state.set_retention(FLOW, {"orders": TopicRetention(HOUR_MS, None, True)})
    html = fragment(status_document(run(state, clock)), None)
    assert '<td class="failover ready">can fail over now: would re-read 30 records (3.1 s)</td>' in html
    assert '<td class="failover not-ready">cannot fail over: orders[0]: no checkpoint yet</td>' in html
    assert 'retention headroom</span><span class="value">1 h 0 min</span>' in html
