"""The slow-batch probe's reading of target metadata: which partitions refuse acks=all writes."""

from types import SimpleNamespace

from replicator.datapath.isr import describe, short_partitions


def part(leader, isrs):
    return SimpleNamespace(leader=leader, isrs=isrs)


def test_partitions_below_min_insync_and_leaderless_are_named_by_reason():
    parts = {0: part(1, [1, 2, 3]), 1: part(2, [2, 3]), 2: part(-1, []), 3: part(3, [3, 2]), 4: part(1, [1])}
    assert short_partitions(parts, 3) == {"2 in-sync": [1, 3], "no leader": [2], "1 in-sync": [4]}
    assert short_partitions(parts, 2) == {"no leader": [2], "1 in-sync": [4]}
    assert short_partitions({0: part(1, [1, 2, 3])}, 2) == {}


def test_one_phrase_names_cluster_topic_partitions_and_the_setting():
    lines = describe("dr", "primary.orders", {"2 in-sync": [1, 3], "no leader": [2]}, 3)
    assert lines == [
        "cluster dr topic primary.orders partitions 1, 3 with 2 in-sync replicas, fewer than its "
        "min.insync.replicas 3 (the target refuses acks=all writes there until a replica is back in sync)",
        "cluster dr topic primary.orders partition 2 without a leader",
    ]
    assert "with 1 in-sync replica," in describe("dr", "t", {"1 in-sync": [0]}, 2)[0]
