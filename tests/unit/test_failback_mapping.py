"""Failing back: a DR-side committed offset mapped to the primary (sparkmirror.model.failback).

The syncs come from MM2's emission rule (OffsetSyncEmitter) over copies with gaps in the
source (compaction, transaction markers), so the bounds are checked against what a real
replicator writes: never ahead of the first unread record, at most offset.lag.max records
re-read, exact inside one-to-one windows."""

from __future__ import annotations

import random

import pytest

from sparkmirror.model import failback as fb
from sparkmirror.model.offsets import OffsetSyncEmitter
from sparkmirror.model.records import Checkpoint, OffsetSync


def _copy(upstream_offsets: list[int], lag_max: int, flush_every: int = 50) -> tuple[list[OffsetSync], list[int]]:
    """Copy records at ``upstream_offsets`` to a target from offset 0; the syncs written, and per
    downstream offset the upstream offset of its record."""
    emitter, syncs = OffsetSyncEmitter(lag_max), []
    for d, u in enumerate(upstream_offsets):
        sync = emitter.record("t", 0, u, d)
        if sync is not None:
            syncs.append(sync)
        if d % flush_every == flush_every - 1:
            syncs.extend(emitter.take_pending())
    syncs.extend(emitter.take_pending())
    return syncs, list(upstream_offsets)


def _with_gaps(n: int, rng: random.Random) -> list[int]:
    """``n`` upstream offsets with compaction holes and transaction markers between them."""
    out, u = [], 0
    for _ in range(n):
        out.append(u)
        u += 1 + (rng.randrange(1, 30) if rng.random() < 0.03 else 0) + (1 if rng.random() < 0.02 else 0)
    return out


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lag_max", [0, 7, 100])
def test_never_skips_and_rereads_at_most_lag_max(seed, lag_max):
    rng = random.Random(seed)
    ups = _with_gaps(2000, rng)
    syncs, at = _copy(ups, lag_max)
    pairs = fb.clean_syncs(syncs)[("t", 0)]
    for c in range(0, len(ups) + 1):
        m = fb.map_back(pairs, c, one_to_one_windows=True)
        assert isinstance(m, fb.Mapped), c
        # The group read every record below c on the mirror: the first unread one is at[c].
        truth = at[c] if c < len(ups) else ups[-1] + 1
        assert m.offset <= truth, f"c={c}: resuming at {m.offset} would skip up to {truth}"
        reread = sum(1 for u in ups if m.offset <= u < truth)
        assert reread <= lag_max, f"c={c}: {reread} records re-read"
        assert reread <= m.reread
        if m.basis != fb.EARLIER_BOUND:
            assert m.offset == truth or reread == 0, c


def test_exact_inside_a_one_to_one_window_and_not_across_a_gap():
    # records 0..99 copied to 0..99, then a compaction hole: 150.. copied to 100..
    ups = list(range(100)) + list(range(150, 400))
    syncs, _ = _copy(ups, 30, flush_every=1000)
    pairs = fb.clean_syncs(syncs)[("t", 0)]
    inside = fb.map_back(pairs, 40, one_to_one_windows=True)
    assert (inside.offset, inside.basis, inside.reread) == (40, fb.EXACT_WINDOW, 0)
    # an exactly-once target may have markers of its own: a window proves nothing there
    bound = fb.map_back(pairs, 40, one_to_one_windows=False)
    assert bound.basis == fb.EARLIER_BOUND and bound.offset <= 40 and 40 - bound.offset <= 30
    # just past the hole: the sync after the gap is exact
    after = fb.map_back(pairs, 100, one_to_one_windows=True)
    assert (after.offset, after.basis) == (150, fb.EXACT_SYNC)
    # the window holding the hole (the sync before it to the one after) is not one-to-one
    last_before = max(p for p in pairs if p[1] < 100)
    c = last_before[1] + 1
    if c < 100:
        m = fb.map_back(pairs, c, one_to_one_windows=True)
        assert m.basis == fb.EARLIER_BOUND and m.offset == last_before[0] + 1


def test_an_offset_before_every_surviving_sync_is_not_covered():
    pairs = [(500, 10), (600, 110)]
    assert fb.map_back(pairs, 9, one_to_one_windows=True) == fb.NotCovered((500, 10))
    plan = fb.plan_mirror("primary.t", 0, 9, "t", pairs, pre_failover=480, one_to_one_windows=True)
    assert plan.refused and "offset 10" in plan.refused and plan.primary_offset is None
    assert any("pre-failover commit 480" in c for c in plan.choices)
    assert any("earliest" in c for c in plan.choices)
    empty = fb.plan_mirror("primary.t", 0, 9, "t", [], pre_failover=None, one_to_one_windows=True)
    assert "no offset-sync of t[0] survives" in empty.refused


def test_never_below_the_pre_failover_commit():
    pairs = [(0, 0), (300, 100)]  # not one-to-one: 40 maps to the earlier bound 1
    plan = fb.plan_mirror("primary.t", 0, 40, "t", pairs, pre_failover=250, one_to_one_windows=True)
    assert (plan.primary_offset, plan.basis) == (250, fb.PRE_FAILOVER)
    plan = fb.plan_mirror("primary.t", 0, 100, "t", pairs, pre_failover=250, one_to_one_windows=True)
    assert (plan.primary_offset, plan.basis, plan.check) == (300, fb.EXACT_SYNC, (300, 100))


def test_clean_syncs_drops_what_a_truncated_target_or_a_rewind_made_untrue():
    s = [OffsetSync("t", 0, u, d) for u, d in [(0, 0), (10, 10), (20, 20), (20, 20), (5, 25), (30, 50), (31, 3)]]
    # (5, 25): the replicator re-read from 5 after a restart; (31, 3): the target went back
    assert fb.clean_syncs(s[:6])[("t", 0)] == [(0, 0), (5, 25), (30, 50)]
    assert fb.clean_syncs(s)[("t", 0)] == [(31, 3)]


def test_reverse_checkpoints_older_is_safe_newer_is_refused():
    cp = Checkpoint("g", "dr.orders", 0, 40, 38, "")
    exact = fb.plan_reverse("orders", 0, 40, "dr.orders", cp, pre_failover=None)
    assert (exact.primary_offset, exact.basis, exact.reread) == (38, fb.CHECKPOINT, 0)
    older = fb.plan_reverse("orders", 0, 55, "dr.orders", cp, pre_failover=None)
    assert (older.primary_offset, older.basis, older.reread) == (38, fb.STALE_CHECKPOINT, 15)
    ahead = fb.plan_reverse("orders", 0, 30, "dr.orders", cp, pre_failover=None)
    assert ahead.refused and "would skip" in ahead.refused
    none = fb.plan_reverse("orders", 0, 30, "dr.orders", None, pre_failover=12)
    assert none.refused and any("pre-failover commit 12" in c for c in none.choices)


def test_records_on_the_dr_side_only_are_counted_and_named():
    plan = fb.plan_dr_only("orders", 2, 70, 0, 80)
    assert (plan.dr_only, plan.dr_only_range, plan.primary_offset) == (80, (0, 79), None)
    assert plan.as_json()["dr_only_offsets"] == [0, 79]
    mirror = fb.plan_mirror("orders", 0, 130, "orders", [(0, 0), (119, 119)], pre_failover=None,
                            one_to_one_windows=False)
    # after the newest sync (119, 119): 5 more copies (120..124, the primary's 120..124), then dr's own
    copies, own = fb.split_dr_tail([(o, f"A{o}") for o in range(120, 125)] + [(o, f"D{o}") for o in range(125, 140)],
                                   [f"A{u}" for u in range(120, 128)])
    assert (copies, own) == (list(range(120, 125)), list(range(125, 140)))
    fb.mark_dr_tail(mirror, (119, 119), copies, own)
    assert (mirror.dr_only, mirror.dr_only_range, mirror.primary_offset) == (15, (125, 139), 120)
    assert mirror.reread == 5  # the copies 120..124 it read on dr are read again on the primary


def test_under_identity_dr_records_between_the_copies_are_dr_s_own():
    # dr's producers wrote D1, D2 between the copies of A120 and A121; the group read up to 124
    copies, own = fb.split_dr_tail([(120, "A120"), (121, "D1"), (122, "D2"), (123, "A121"), (124, "A122")],
                                   ["A120", "A121", "A122", "A123"])
    assert (copies, own) == ([120, 123, 124], [121, 122])
    plan = fb.plan_mirror("orders", 0, 124, "orders", [(0, 0), (119, 119)], pre_failover=None,
                          one_to_one_windows=False)
    fb.mark_dr_tail(plan, (119, 119), copies, own)
    assert (plan.primary_offset, plan.reread, plan.dr_only, plan.dr_only_range) == (120, 2, 2, (121, 122))


def test_under_identity_a_window_that_only_looks_one_to_one_maps_to_its_earlier_bound():
    # primary: records at 100, 101, 102, transaction markers at 103 and 104, a record at 105. Under
    # Identity two records produced on dr landed after the copy of 100: the mirror holds
    # 100 A100, 101 D1, 102 D2, 103 A101, 104 A102, 105 A105, and MM2 synced only (100,100) and
    # (105,105). A group committed at 103 on dr has not read A101 yet.
    pairs = [(100, 100), (105, 105)]
    plain = fb.trusts_sync_windows(exactly_once=False, identity=False)
    identity = fb.trusts_sync_windows(exactly_once=False, identity=True)
    assert (plain, identity, fb.trusts_sync_windows(exactly_once=True, identity=False)) == (True, False, False)
    assert fb.map_back(pairs, 103, one_to_one_windows=plain).offset == 103  # exact where the copy is 1:1
    mapped = fb.map_back(pairs, 103, one_to_one_windows=identity)
    assert (mapped.offset, mapped.basis) == (101, fb.EARLIER_BOUND)  # A101 is read again, not skipped
