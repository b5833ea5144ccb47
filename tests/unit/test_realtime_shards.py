"""A flow's partitions over several real-time queries: how they are dealt, where each shard's
checkpoint resumes, a checkpoint laid out for other shards, and the queries seen as one."""

from __future__ import annotations

import json

import pytest

from replicator.datapath import realtime
from replicator.datapath.realtime import REAL_TIME
from tests.unit.test_realtime_path import _batch  # one Spark offset-log and commit-log entry


def test_partitions_are_dealt_round_robin_and_evenly():
    shards = realtime.shard_assignment({"b": 2, "a": 5}, 3)
    assert shards == [{"a": [0, 3], "b": [1]}, {"a": [1, 4]}, {"a": [2], "b": [0]}]
    every = sorted((t, p) for sh in shards for t, ps in sh.items() for p in ps)
    assert every == [("a", p) for p in range(5)] + [("b", p) for p in range(2)]


@pytest.mark.parametrize("assignment, shards, expected", [
    ({"t": 2}, 3, [{"t": [0]}, {"t": [1]}]),  # never more queries than partitions
    ({"t": 4}, 1, [{"t": [0, 1, 2, 3]}]),
    ({}, 3, []),
    ({"t": 0}, 3, []),
])
def test_shard_count_is_bounded_by_the_partitions(assignment, shards, expected):
    assert realtime.shard_assignment(assignment, shards) == expected


def test_committed_offsets_merge_every_shard(tmp_path):
    ckpt = tmp_path / "f.realtime"
    s0, s1 = realtime.shard_dir(ckpt, 0), realtime.shard_dir(ckpt, 1)
    _batch(s0, 3, {"t": {"0": 10, "2": 30}})
    _batch(s0, 4, {"t": {"0": 15, "2": 33}})  # where batch 3 ended
    _batch(s1, 7, {"t": {"1": 70}})
    _batch(s1, 8, {"t": {"1": 90}}, committed=False)
    assert realtime.committed_offsets(ckpt, real_time=True) == {"t": {"0": 15, "1": 90, "2": 33}}
    # a shard that never committed a batch: where its first batch began
    s2 = realtime.shard_dir(ckpt, 2)
    _batch(s2, 0, {"u": {"0": 5}}, committed=False)
    assert realtime.committed_offsets(ckpt, real_time=True)["u"] == {"0": 5}
    # a shard with no batch at all says nothing for its partitions: no merged answer
    realtime.shard_dir(ckpt, 3).mkdir()
    assert realtime.committed_offsets(ckpt, real_time=True) is None
    assert realtime.has_batches(ckpt)
    assert not realtime.has_batches(tmp_path / "none")


def test_resume_base_lays_each_shard_over_where_the_run_started(tmp_path):
    ckpt = tmp_path / "f.realtime"
    _batch(realtime.shard_dir(ckpt, 0), 2, {"t": {"0": 50}})
    realtime.shard_dir(ckpt, 1).mkdir(parents=True)  # started, nothing planned yet
    started = {"t": {"0": 40, "1": 12}}
    assert realtime.resume_base(ckpt, started) == {"t": {"0": 50, "1": 12}}
    assert started == {"t": {"0": 40, "1": 12}}


def test_a_checkpoint_from_before_shards_is_read_as_one(tmp_path):
    ckpt = tmp_path / "f.realtime"
    _batch(ckpt, 1, {"t": {"0": 5, "1": 6}})
    _batch(ckpt, 2, {"t": {"0": 9, "1": 8}})
    assert realtime.shard_dirs(ckpt) == [ckpt]
    assert realtime.committed_offsets(ckpt, real_time=True) == {"t": {"0": 9, "1": 8}}
    assert not realtime.layout_matches(ckpt, realtime.shard_assignment({"t": 2}, 1))


def test_a_checkpoint_laid_out_for_other_shards_restarts_where_each_shard_committed(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    ckpt = realtime.checkpoint_dir(flow_dir, REAL_TIME)
    old = realtime.shard_assignment({"t": 4}, 2)
    assert realtime.lay_out_shards(flow_dir, old, None) is None  # new: nothing to resume
    assert realtime.layout_matches(ckpt, old)
    _batch(realtime.shard_dir(ckpt, 0), 5, {"t": {"0": 100, "2": 200}})
    _batch(realtime.shard_dir(ckpt, 0), 6, {"t": {"0": 110, "2": 210}})
    _batch(realtime.shard_dir(ckpt, 1), 4, {"t": {"1": 300, "3": 400}})
    _batch(realtime.shard_dir(ckpt, 1), 5, {"t": {"1": 310, "3": 410}})
    assert realtime.lay_out_shards(flow_dir, old, None) is None  # same shards: each resumes itself
    # the topic grew to 5 partitions: the shards hold others now
    new = realtime.shard_assignment({"t": 5}, 2)
    start = realtime.lay_out_shards(flow_dir, new, None)
    assert start == {"t": {"0": 110, "1": 310, "2": 210, "3": 410}}
    assert not realtime.has_batches(ckpt) and realtime.layout_matches(ckpt, new)
    # written down before any query starts: a crash now resumes there
    assert realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == start
    # the new partition, named by no shard, starts at its earliest offset
    json_all = realtime.starting_offsets_json(start, {"t": 5})
    assert json.loads(realtime.shard_starting_offsets(json_all, new[0])) == {"t": {"0": 110, "2": 210, "4": -2}}
    assert json.loads(realtime.shard_starting_offsets(json_all, new[1])) == {"t": {"1": 310, "3": 410}}


def test_starting_offsets_that_name_no_partition_are_kept():
    assert realtime.shard_starting_offsets("earliest", {"t": [0]}) == "earliest"
    assert realtime.shard_starting_offsets("latest", {"t": [1]}) == "latest"


class _Query:
    """A stand-in for pyspark's StreamingQuery: only the attributes ShardedQuery reads."""

    def __init__(self, name, batch, end, rows=0, active=True, exc=None):
        self.name, self.runId, self.isActive, self._exc = name, f"run-{name}", active, exc
        self.lastProgress = None if batch is None else {
            "batchId": batch, "numInputRows": rows,
            "sources": [{"description": "KafkaV2", "endOffset": json.dumps(end)}]}
        self.stopped = False

    def exception(self):
        return self._exc

    def stop(self):
        self.stopped = True
        self.isActive = False


def test_the_queries_seen_as_one():
    a = _Query("a", 7, {"t": {"0": 10}}, rows=5)
    b = _Query("b", 6, {"t": {"1": 20}}, rows=3)
    q = realtime.ShardedQuery([a, b])
    progress = q.lastProgress
    assert progress["batchId"] == 6  # the slowest shard's: a batch that hangs anywhere shows
    assert progress["numInputRows"] == 8
    assert progress["sources"][0]["endOffset"] == {"t": {"0": 10, "1": 20}}
    assert q.run_ids == ["run-a", "run-b"] and q.isActive and q.exception() is None
    assert realtime.ShardedQuery([a, _Query("c", None, {})]).lastProgress is None  # one has not reported yet
    q.stop()
    assert a.stopped and b.stopped


def test_one_failed_or_ended_shard_fails_them_all():
    boom = RuntimeError("broker gone")
    q = realtime.ShardedQuery([_Query("a", 1, {}), _Query("b", 1, {}, active=False, exc=boom)])
    assert not q.isActive and q.exception() is boom
    ended = realtime.ShardedQuery([_Query("a", 1, {}), _Query("b", 1, {}, active=False)])
    assert "ended by itself" in str(ended.exception())
    # all stopped (by the flow): nothing to report
    assert realtime.ShardedQuery([_Query("a", 1, {}, active=False)]).exception() is None


def test_queries_start_apart_but_never_far():
    assert realtime.stagger_seconds(1, 5.0) == 0.0
    assert realtime.stagger_seconds(4, 5.0) == 1.25  # spread over the interval
    assert realtime.stagger_seconds(3, 5.0) == realtime.MAX_STAGGER_S
    assert realtime.stagger_seconds(3, 60.0) == realtime.MAX_STAGGER_S  # the last shard does not wait 40 s
