"""The audit's pure logic: comparing ranges, the sync book, the budget, the state file."""

from __future__ import annotations

import json

import pytest

from monitor.audit import persist
from monitor.audit.book import PartitionBook, Segment, Window
from monitor.audit.budget import ContentOrder, ReadBudget
from monitor.audit.digest import CREATE_TIME, content_digest, seen
from monitor.audit.findings import Finding, Tally
from monitor.audit.reconcile import by_key, paired, reconcile, whole
from sparkmirror.errors import ConfigError


def rec(offset, value, key=b"k", headers=None, ts=1000, ts_type=CREATE_TIME):
    return seen(offset, key, value, headers, ts_type, ts)


def source(n, start=0):
    return [rec(start + i, b"v%d" % i) for i in range(n)]


def kinds(outcome):
    return [(d.kind, d.source_offset, d.target_offset) for d in outcome.differences]


# --- digests ----------------------------------------------------------------------------
def test_digest_tells_null_from_empty_and_fields_apart():
    assert content_digest(None, b"v", None) != content_digest(b"", b"v", None)
    assert content_digest(b"ab", b"c", None) != content_digest(b"a", b"bc", None)
    assert content_digest(b"k", b"v", [("h", b"1")]) != content_digest(b"k", b"v", [("h", b"2")])
    assert content_digest(b"k", b"v", [("a", b""), ("b", b"")]) != content_digest(b"k", b"v", [("b", b""), ("a", b"")])


# --- reconcile --------------------------------------------------------------------------
def test_a_faithful_copy_verifies_every_record():
    s = source(10, 100)
    t = [seen(500 + i, b"k", b"v%d" % i, None, CREATE_TIME, 1000) for i in range(10)]
    out = reconcile(s, t)
    assert out.verified == 10 and out.differences == []


def test_a_changed_value_is_mismatched_at_its_offsets():
    s = source(5, 10)
    t = [seen(20 + i, b"k", b"v%d" % i if i != 3 else b"X", None, CREATE_TIME, 1000) for i in range(5)]
    assert kinds(reconcile(s, t)) == [("mismatched", 13, 23)]


def test_a_changed_header_and_a_changed_timestamp_are_mismatched():
    s = [rec(0, b"a", headers=[("h", b"1")]), rec(1, b"b")]
    t = [rec(0, b"a", headers=[("h", b"2")]), rec(1, b"b", ts=1001)]
    out = reconcile(s, t)
    assert kinds(out) == [("mismatched", 0, 0), ("mismatched", 1, 1)]
    assert out.differences[1].detail == "timestamp differs"


def test_timestamps_count_only_where_both_sides_use_create_time():
    s = [rec(0, b"a", ts=1)]
    assert reconcile(s, [rec(0, b"a", ts=99, ts_type=2)]).verified == 1


def test_two_swapped_records_are_both_out_of_order():
    s = source(4)
    t = [s[0], s[2], s[1], s[3]]
    out = reconcile(s, t)
    assert kinds(out) == [("mismatched", 1, 2), ("mismatched", 2, 1)]
    assert {d.detail for d in out.differences} == {"out of order"}


def test_aligned_finds_the_dropped_record():
    s = source(10)
    t = [seen(i, b"k", b"v%d" % o, None, CREATE_TIME, 1000) for i, o in enumerate(o for o in range(10) if o != 6)]
    assert kinds(reconcile(s, t)) == [("missing", 6, None)]


def test_aligned_names_duplicates_by_their_source_offset():
    s = source(6)
    order = [0, 1, 2, 3, 2, 3, 4, 5]
    t = [seen(i, b"k", b"v%d" % o, None, CREATE_TIME, 1000) for i, o in enumerate(order)]
    out = reconcile(s, t)
    assert out.verified == 6 and kinds(out) == [("duplicated", 2, 4), ("duplicated", 3, 5)]


def test_aligned_tells_a_foreign_record_from_a_missing_one():
    s = source(4)
    t = [seen(0, b"k", b"v0", None, CREATE_TIME, 1000), seen(1, b"x", b"foreign", None, CREATE_TIME, 5),
         seen(2, b"k", b"v1", None, CREATE_TIME, 1000), seen(3, b"k", b"v2", None, CREATE_TIME, 1000)]
    assert kinds(reconcile(s, t, aligned=True)) == [("foreign", None, 1), ("missing", 3, None)]


def test_compacted_windows_compare_the_newest_value_per_key():
    s = [rec(0, b"a1", key=b"a"), rec(5, b"b2", key=b"b"), rec(7, b"a3", key=b"a"), rec(9, b"c1", key=b"c")]
    # the target kept older values of a (not compacted yet) but the newest agree; c differs; b is missing
    t = [rec(0, b"a1", key=b"a"), rec(1, b"a3", key=b"a"), rec(2, b"cX", key=b"c")]
    assert kinds(by_key(s, t, target_whole=True, same_range=True)) == [("missing", 5, None), ("mismatched", 9, 2)]


def test_a_compacted_window_cleaned_on_the_target_lacks_keys_without_a_finding():
    # the target's cleaner removed every record of the range (newer values lie past it): nothing is missing
    s = [rec(i, b"v%d" % i, key=b"k%d" % (i % 5)) for i in range(20)]
    out = by_key(s, [], target_whole=False, same_range=True)
    assert out.differences == [] and out.verified == 0
    # around a replay the target's newest value of a key may come from past the source range
    t = [rec(0, b"v0", key=b"k0"), rec(1, b"v99", key=b"k1")]
    assert kinds(by_key(s[:2], t, target_whole=True, same_range=False)) == []


def test_a_compacted_stretch_pairs_offsets_and_ignores_what_either_cleaner_took():
    s = [rec(i, b"v%d" % i, key=b"k%d" % (i % 5)) for i in range(100, 110)]
    # the target kept only the newest of each key (its cleaner ran past the range's end); the source all
    t = [rec(i + 400, b"v%d" % i, key=b"k%d" % (i % 5)) for i in range(105, 110)]
    out = paired(s, t, 400)
    assert out.verified == 5 and out.differences == []
    # the source cleaned, the target not: the same
    assert paired(s[7:], [rec(i + 400, b"v%d" % i, key=b"k%d" % (i % 5)) for i in range(100, 110)], 400).verified == 3
    altered = t[:2] + [rec(507, b"X", key=b"k2")] + t[3:]
    assert kinds(paired(s, altered, 400)) == [("mismatched", 107, 507)]


def test_whole_tells_a_range_with_every_offset_from_one_with_gaps():
    r = [rec(i, b"v") for i in (3, 4, 5)]
    assert whole(r, 3, 6) and whole([], 4, 4)
    assert not whole(r, 2, 6) and not whole(r, 3, 7) and not whole([], 3, 6) and not whole(r[:1] + r[2:], 3, 6)


# --- the book ---------------------------------------------------------------------------
def test_syncs_that_advance_alike_are_accounted_without_a_read_and_merge():
    b = PartitionBook("t", 0)
    assert b.add_sync(0, 0) == 0
    assert b.add_sync(100, 100) == 100
    assert b.add_sync(200, 200) == 100
    assert b.pending == [] and b.unchecked == [Segment(0, 0, 200)]


def test_a_source_gap_a_target_surplus_and_a_replay_are_windows_to_read():
    b = PartitionBook("t", 0)
    for u, d in [(0, 0), (10, 9), (20, 20), (15, 30)]:
        b.add_sync(u, d)
    assert b.pending == [Window(0, 0, 10, 9), Window(10, 9, 20, 20), Window(20, 20, 15, 30)]
    assert b.pending[2].replay and b.pending[2].source_end == 30


def test_every_window_of_an_exactly_once_target_is_read():
    b = PartitionBook("t", 0)
    b.add_sync(0, 0, gaps_on_target=True)
    b.add_sync(10, 10, gaps_on_target=True)
    assert b.pending == [Window(0, 0, 10, 10)] and b.unchecked == []


def test_a_target_that_went_back_restarts_the_book():
    b = PartitionBook("t", 0)
    b.add_sync(0, 0)
    b.add_sync(100, 100)
    b.add_sync(150, 3)
    assert b.restarts == 1 and b.last == (150, 3) and b.unchecked == [Segment(0, 0, 100)]


def test_content_work_comes_from_both_ends_and_translation_uses_anchors():
    b = PartitionBook("t", 0)
    b.add_sync(0, 10)
    b.add_sync(1000, 1010)
    assert b.take_newest(100) == Segment(900, 910, 100)
    assert b.take_oldest(100) == Segment(0, 10, 100)
    assert b.unchecked == [Segment(100, 110, 800)]
    assert b.source_of(510) == 500 and b.source_of(5) is None


def test_anchors_are_thinned_and_keep_the_newest():
    b = PartitionBook("t", 0)
    for i in range(500):
        b.add_sync(i * 10, i * 10)
    assert len(b.anchors) <= 65 and b.anchors[-1] == (4990, 4990) and b.anchors[0] == (0, 0)


def test_drop_below_cuts_what_either_log_no_longer_holds():
    b = PartitionBook("t", 0, unchecked=[Segment(0, 0, 50), Segment(60, 55, 40)])
    gone = b.drop_below(70, 0)
    assert gone == [Segment(0, 0, 50), Segment(60, 55, 10)] and b.unchecked == [Segment(70, 65, 30)]


def test_the_book_round_trips_through_json():
    b = PartitionBook("t", 3)
    for u, d in [(0, 0), (10, 9), (20, 19)]:
        b.add_sync(u, d)
    again = PartitionBook.from_json(json.loads(json.dumps(b.to_json())))
    assert again == b


# --- budget and order -------------------------------------------------------------------
def test_the_budget_holds_the_average_rate_and_allows_overdraft():
    now = [0.0]
    budget = ReadBudget(1000, burst_seconds=1, clock=lambda: now[0])
    assert budget.available()
    budget.spend(3000)  # one read may cost more than the balance
    assert not budget.available() and budget.seconds_until_available() == pytest.approx(2.0)
    now[0] = 2.5
    assert budget.available() and budget.spent == 3000
    assert ReadBudget(None).available()


def test_content_order_visits_every_partition_and_alternates_ends():
    order = ContentOrder()
    picks = [order.next(["a", "b"]) for _ in range(4)]
    assert picks == [("a", True), ("b", True), ("a", False), ("b", False)]
    assert order.next([]) is None


# --- tally and state file ---------------------------------------------------------------
def test_a_finding_is_counted_once_and_coverage_is_of_the_last_hour():
    t = Tally()
    f = Finding("missing", "t", 0, 5, None, 1, "x", 0.0)
    assert t.add(f) and not t.add(f)
    assert t.totals()["missing"] == 1
    t.replicated(100, 3600.0)
    t.loss_checked(100, 3600.0)
    t.verified("t", 25, 3600.0)
    assert t.coverage(3600.0) == {"loss": 1.0, "content": 0.25}
    assert t.coverage(3600.0 + 2 * 3600) == {"loss": None, "content": None}
    again = Tally.from_json(json.loads(json.dumps(t.to_json())))
    assert again.totals() == t.totals() and not again.add(f)


def test_the_state_file_keeps_each_flow_and_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "audit.json"
    assert persist.load(path, "a->b") is None
    persist.save(path, "a->b", {"positions": {"0": 5}})
    persist.save(path, "c->d", {"positions": {}})
    assert persist.load(path, "a->b") == {"positions": {"0": 5}}
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read"):
        persist.load(path, "a->b")
