"""The consumer-group collector's requests: which cluster client and which admin child each uses."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from monitor.collectors.groups import GroupOffsetCollector


class _Client:
    """Records each call by the method's name; answers as a cluster with group g on topic t."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.calls: list[str] = []

    async def call(self, fn, *args):
        self.calls.append(fn.__name__)
        return fn(*args)

    def consumer_groups(self):
        return ["g"]

    def consumer_groups_beside_offsets(self):
        return ["g"]

    def committed_offsets(self, groups):
        return {g: {(self.topic, 0): 5} for g in groups}


class _State:
    def __init__(self) -> None:
        part = SimpleNamespace(target_topic="a.t", partition=0)
        self.flows = {"a->b": SimpleNamespace(partitions={("t", 0): part})}
        self.source_offsets = self.target_offsets = None

    def clock(self) -> float:
        return 0.0

    def set_group_offsets(self, flow, offsets, started) -> None:
        self.source_offsets = offsets

    def set_target_group_offsets(self, flow, offsets) -> None:
        self.target_offsets = offsets


def test_the_targets_groups_are_listed_beside_the_group_offsets_not_in_the_reachability_child():
    """ListGroups on a target that is down waits out its timeout: asked in the child that also runs
    the target's DescribeCluster, it held up the monitor's "cluster unreachable" past a 30-s outage."""
    source, target, state = _Client("t"), _Client("a.t"), _State()
    flow = SimpleNamespace(name="a->b", watches_group=lambda g, f: True)
    collector = GroupOffsetCollector(flow, source, state, SimpleNamespace(group_filter=None), target=target)
    asyncio.run(collector.refresh())
    assert target.calls == ["consumer_groups_beside_offsets", "committed_offsets"]
    assert source.calls == ["consumer_groups", "committed_offsets"]
    assert state.target_offsets == {"g": {("a.t", 0): 5}} and state.source_offsets == {"g": {("t", 0): 5}}
