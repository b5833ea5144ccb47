"""Checkpoint rules and translation precision, as pure logic.

The precision check replays what the data path does for a partition of 1,001,000
records (MM2's emission rule, syncs sent per batch) into the OffsetSyncStore the
checkpoint loop uses, and into a Python port of Apache MM2 4.1's own
OffsetSyncStore (64 syncs per partition, kept by its invariants B and C) as the
reference: the same syncs, the same groups 1k, 100k and 1M records behind.
"""

from __future__ import annotations

import pytest

from replicator.control.checkpoints import checkpoint_topic, is_more_recent, translate_group
from sparkmirror.model.filters import TopicFilter
from sparkmirror.model.offsets import OffsetSyncStore
from sparkmirror.model.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.mm2_store import MM2OffsetSyncStore, data_path_syncs


@pytest.fixture(scope="module")
def million():
    records, shift = 1_001_000, 37
    syncs = data_path_syncs(records, batch=7_919, shift=shift)
    ours = OffsetSyncStore(100)
    mm2 = MM2OffsetSyncStore()
    for s in syncs:
        ours.add(s)
        mm2.add(s.upstream_offset, s.downstream_offset)
    return records, shift, syncs, ours, mm2


@pytest.mark.parametrize("behind", [1_000, 100_000, 1_000_000])
def test_translation_of_a_group_far_behind_is_within_offset_lag_max(million, behind):
    records, shift, syncs, ours, mm2 = million
    committed = records - behind
    truth = committed + shift
    translated = ours.translate("orders", 0, committed)
    mm2_translated = mm2.translate(committed)
    print(f"\n{behind:>9} behind: sparkmirror re-reads {truth - translated}, Apache MM2 (same {len(syncs)} syncs) "
          f"re-reads {truth - mm2_translated if mm2_translated is not None else 'n/a (no checkpoint)'}")
    assert translated <= truth  # never ahead: no record skipped
    assert truth - translated <= 100
    assert ours.memory_entries("orders", 0) <= ours.max_entries
    # The reference really is lossy this far back (503, 73,607 and 999 records here), which is
    # the point of the store.
    assert mm2_translated is None or truth - mm2_translated > 100


def test_every_committed_offset_translates_never_ahead_and_within_bound(million):
    records, shift, _, ours, _ = million
    for committed in range(0, records + 1, 997):
        translated = ours.translate("orders", 0, committed)
        truth = min(committed, records) + shift
        assert translated is not None and truth - 100 <= translated <= truth, committed


def test_store_rebuilt_from_the_same_syncs_translates_the_same(million):
    """After a restart the reader replays the offset-syncs topic: same syncs, same answers."""
    records, _, syncs, ours, _ = million
    rebuilt = OffsetSyncStore(100)
    for s in syncs:
        rebuilt.add(s)
    for committed in (0, 1, 4_321, 500_000, records - 1, records):
        assert rebuilt.translate("orders", 0, committed) == ours.translate("orders", 0, committed)


def test_checkpoint_topic_names_follow_mm2():
    default = DefaultReplicationPolicy()
    assert checkpoint_topic(default, "A", "B", "orders") == "A.orders"
    assert checkpoint_topic(default, "A", "B", "C.orders") == "A.C.orders"
    assert checkpoint_topic(default, "A", "B", "B.orders") == "orders"  # came from B: its original name there
    assert checkpoint_topic(DefaultReplicationPolicy("_"), "A", "B", "orders") == "A_orders"
    identity = IdentityReplicationPolicy(source_cluster_alias="A")
    assert checkpoint_topic(identity, "A", "B", "orders") == "orders"


def _cp(up: int, down: int) -> Checkpoint:
    return Checkpoint("g", "A.orders", 0, up, down)


def test_checkpoints_are_monotonic_like_mm2():
    assert is_more_recent(_cp(10, 10), None)
    assert is_more_recent(_cp(20, 11), _cp(10, 10))  # moved forward downstream
    assert not is_more_recent(_cp(20, 10), _cp(10, 10))  # same downstream: nothing new
    assert not is_more_recent(_cp(30, 9), _cp(20, 10))  # would step back downstream
    assert is_more_recent(_cp(5, 5), _cp(20, 10))  # the group rewound upstream


def test_translate_group_filters_and_renames():
    store = OffsetSyncStore(100)
    store.add(OffsetSync("orders", 0, 0, 500))
    store.add(OffsetSync("orders", 0, 100, 600))
    store.add(OffsetSync("orders", 1, 50, 50))
    committed = {
        ("orders", 0): (100, "meta"),
        ("orders", 1): (10, ""),  # before the first sync: no checkpoint
        ("orders", 2): (10, ""),  # no syncs at all
        ("payments", 0): (100, ""),  # not replicated by the topic filter
    }
    out = translate_group("g", committed, store.translate, TopicFilter(["orders"], []),
                          lambda t: f"A.{t}")
    assert out == {("A.orders", 0): Checkpoint("g", "A.orders", 0, 100, 600, "meta")}
