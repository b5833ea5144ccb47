"""Failback readiness (monitor.failback) on hand-built states, and what the exporters make of it."""

from __future__ import annotations

from monitor.exporters.api import flow_document
from monitor.exporters.samples import samples
from monitor.failback import failback_results
from monitor.state import OffsetsRow
from sparkmirror import metrics as m
from sparkmirror.model.records import OffsetSync
from tests.support.evaluator import FLOW, T0, beat, make_state, run


def _state(extra: str = "", *, start=0, end=100, target_end=60, syncs=((0, 0), (10, 10), (20, 20), (35, 30))):
    state, clock = make_state(extra)
    beat(state, clock)
    mirror = "orders" if "Identity" in extra else "a.orders"
    state.record_offsets(FLOW, [OffsetsRow("orders", 0, mirror, start, end, target_end, syncs[-1])], at=clock.now)
    for u, d in syncs:
        state.add_sync(FLOW, OffsetSync("orders", 0, u, d), int(T0 * 1000))
    return state, clock, mirror


def _one(state, group="billing"):
    results = failback_results(state.flows[FLOW])
    assert [g.group for g in results] == [group]
    return results[0]


def test_a_commit_at_a_sync_or_inside_a_one_to_one_window_fails_back_exactly():
    state, _clock, mirror = _state()
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 15}})
    g = _one(state)
    assert g.ready and g.reread_records == 0 and "exactly" in g.summary
    assert (g.partitions[0].offset, g.partitions[0].basis) == (15, "exact (one-to-one window)")
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 20}})
    assert _one(state).partitions[0].offset == 20


def test_past_a_gap_it_resumes_at_the_earlier_bound_and_never_below_the_source_commit():
    state, _clock, mirror = _state()
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 25}})  # between (20, 20) and (35, 30)
    g = _one(state)
    assert g.ready and (g.partitions[0].offset, g.partitions[0].basis, g.reread_records) == \
        (21, "earlier bound", 4)
    assert "re-reads at most 4 records" in g.summary
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 24}})  # read that far on the source before
    p = _one(state).partitions[0]
    assert (p.offset, p.basis, p.reread_records) == (24, "pre-failover commit", 1)


def test_a_commit_older_than_every_kept_sync_or_a_truncated_source_is_not_ready():
    state, _clock, mirror = _state(syncs=((40, 40), (50, 50)), target_end=60)
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 30}})
    g = _one(state)
    assert not g.ready and g.partitions[0].offset is None
    assert "no offset-sync the monitor keeps covers offset 30" in g.summary
    state, clock, mirror = _state(end=12)  # the source now ends before the answer
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 15}})
    g = _one(state)
    assert not g.ready and "ends at 12 on the source, before offset 15" in g.partitions[0].blocker
    state, clock, mirror = _state(start=18)  # retention deleted what it would resume at
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 15}})
    assert "retention deleted" in _one(state).partitions[0].blocker


def test_no_one_to_one_window_under_identity_or_exactly_once():
    for extra in ("replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n",
                  "a->b.exactly.once.support = required\n"):
        state, _clock, mirror = _state(extra)
        state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 15}})
        p = _one(state).partitions[0]
        assert (p.offset, p.basis) == (11, "earlier bound"), extra


def test_commits_on_other_topics_are_not_this_flows_and_the_gauge_and_status_say_it():
    state, clock, mirror = _state()
    state.set_target_group_offsets(FLOW, {"billing": {(mirror, 0): 15}, "other": {("dr-own", 0): 3}})
    ev = run(state, clock)
    f = ev.flows[0]
    assert [g.group for g in f.failback] == ["billing"]
    served = {(spec.name, labels): v for spec, labels, v in samples(ev)}
    assert served[(m.FAILBACK_READY.name, (FLOW, "billing"))] == 1.0
    doc = flow_document(f)["failback"]
    assert [(g["group"], g["ready"], g["summary"], g["reread_records"]) for g in doc] == [
        ("billing", True, "can fail back to a now: exactly, re-reads nothing", 0)]
    assert doc[0]["partitions"] == [{"target_topic": mirror, "topic": "orders", "partition": 0, "committed": 15,
                                     "offset": 15, "basis": "exact (one-to-one window)", "reread_records": 0,
                                     "blocker": None}]
