"""A flow's real-time queries, one per shard: seen by the flow as one query, and started
apart. (How the partitions are dealt over them and where each shard's checkpoint resumes:
test_checkpoint_layout.py.)"""

from __future__ import annotations

import json

from replicator.datapath import realtime


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
