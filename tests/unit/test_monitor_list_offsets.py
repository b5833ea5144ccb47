"""ListOffsets split by partition leader (monitor.collectors.cluster.ClusterClient.list_offsets).

librdkafka's offsets_for_times fails as a whole when one partition's leader does not answer.
The fake consumer here plays that rule (pure logic: which partitions are asked together);
the behaviour against a really dead broker is test_multibroker's.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from monitor.collectors.cluster import OFFSETS_CLIENT_RETRIES, ClusterClient


class AllOrNothing:
    """offsets_for_times that times out as a whole if it includes a partition led by a dead broker."""

    def __init__(self, leaders: dict, dead: set[int]) -> None:
        self.leaders, self.dead = leaders, dead
        self.calls: list[list[tuple[str, int]]] = []

    def offsets_for_times(self, tps, timeout):
        asked = [(tp.topic, tp.partition) for tp in tps]
        self.calls.append(asked)
        if any(self.leaders.get(tp) in self.dead for tp in asked):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get offsets: Local: Timed out"))
        return [TopicPartition(t, p, 100 + p) for t, p in asked]


@pytest.fixture
def client():
    c = ClusterClient("primary", {"bootstrap.servers": "h:1"}, {"bootstrap.servers": "h:1"}, state=None)
    yield c
    c.shutdown()


def test_a_dead_leader_costs_only_its_own_partitions(client):
    partitions = [("orders", p) for p in range(6)]
    client._leaders = {tp: 1 + tp[1] % 3 for tp in partitions}  # brokers 1, 2, 3 lead two each
    fake = AllOrNothing(client._leaders, dead={2})
    client._offsets_consumer = lambda committed: fake
    assert client.list_offsets(partitions, "latest") == {("orders", 0): 100, ("orders", 3): 103,
                                                         ("orders", 2): 102, ("orders", 5): 105}
    assert sorted(map(sorted, fake.calls)) == [[("orders", 0), ("orders", 3)], [("orders", 1), ("orders", 4)],
                                               [("orders", 2), ("orders", 5)]]


def test_every_leader_failing_is_the_clusters_error(client):
    partitions = [("orders", p) for p in range(4)]
    client._leaders = {tp: 1 + tp[1] % 2 for tp in partitions}
    client._offsets_consumer = lambda committed: AllOrNothing(client._leaders, dead={1, 2})
    with pytest.raises(KafkaException, match="Timed out"):
        client.list_offsets(partitions, "latest")


def test_before_any_metadata_one_request_asks_everything(client):
    partitions = [("orders", p) for p in range(3)]
    fake = AllOrNothing({}, dead=set())
    client._offsets_consumer = lambda committed: fake
    assert client.list_offsets(partitions, "earliest") == {("orders", 0): 100, ("orders", 1): 101, ("orders", 2): 102}
    assert fake.calls == [partitions]


def test_a_client_whose_partitions_keep_failing_is_replaced(client, caplog):
    caplog.set_level("INFO")
    partitions = [("orders", p) for p in range(6)]
    client._leaders = {tp: 1 + tp[1] % 3 for tp in partitions}
    made: list[AllOrNothing] = []

    def new_consumer(**_overrides):
        # the first client never gets broker 2's partitions again; a new one does
        made.append(AllOrNothing(client._leaders, dead={2} if not made else set()))
        return made[-1]

    client.consumer = new_consumer
    for _ in range(OFFSETS_CLIENT_RETRIES):
        assert len(client.list_offsets(partitions, "latest")) == 4
    assert "ListOffsets failed for some partitions 5 times in a row" in caplog.text
    assert len(client.list_offsets(partitions, "latest")) == 6
    assert len(made) == 2
    # a good answer resets the count: failures must come in a row
    assert client._offsets_failures == {}


def test_the_questions_are_built_once_per_partition_list_and_leader_map(client, monkeypatch):
    import monitor.collectors.cluster as cluster

    monkeypatch.setattr(cluster, "LIST_OFFSETS_CHUNK", 500)  # the counts below are in calls of 500
    partitions = [("orders", p) for p in range(1200)]
    client._leaders = {tp: 1 + tp[1] % 2 for tp in partitions}
    seen: list[list] = []  # the question lists themselves (kept alive: no id is reused)

    class Recording(AllOrNothing):
        def offsets_for_times(self, tps, timeout):
            seen.append(tps)
            return super().offsets_for_times(tps, timeout)

    fake = Recording(client._leaders, dead=set())
    client._offsets_consumer = lambda committed: fake
    first = client.list_offsets(partitions, "latest")
    assert len(first) == 1200 and len(fake.calls) == 4  # two leaders, 600 each: chunks of 500 and 100
    assert sorted(len(c) for c in fake.calls) == [100, 100, 500, 500]
    assert client.list_offsets(partitions, "latest") == first
    assert {id(q) for q in seen[4:8]} == {id(q) for q in seen[:4]}  # the same question objects again
    # another stamp, another list or new leaders: new questions, with the right answers
    assert client.list_offsets(partitions, "earliest") == first
    assert not {id(q) for q in seen[8:]} & {id(q) for q in seen[:4]}
    client._leaders = {tp: 1 for tp in partitions}
    assert client.list_offsets(partitions, "latest") == first
    assert sorted(len(c) for c in fake.calls[12:]) == [200, 500, 500]
    fewer = partitions[:10]
    assert client.list_offsets(fewer, "latest") == {tp: 100 + tp[1] for tp in fewer}
