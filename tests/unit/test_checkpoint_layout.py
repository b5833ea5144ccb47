"""A flow's checkpoints on disk: where each path's checkpoint resumes, the handover between
paths, a flow's partitions over several real-time queries (how they are dealt, where each
shard's checkpoint resumes, a checkpoint laid out for other shards) and the start offsets
handed to Spark."""

from __future__ import annotations

import json

import pytest

from replicator.datapath import checkpoint_layout as layout
from replicator.settings import MICRO_BATCH, REAL_TIME


def _batch(ckpt, n, offsets, committed=True):
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "commits").mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(n)).write_text('v1\n{"batchWatermarkMs":0,"conf":{}}\n' + json.dumps(offsets) + "\n")
    if committed:
        (ckpt / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def test_committed_offsets_are_the_newest_committed_batch(tmp_path):
    ckpt = tmp_path / "c"
    _batch(ckpt, 0, {"t": {"0": 5}})
    _batch(ckpt, 1, {"t": {"0": 9, "1": 3}})
    _batch(ckpt, 2, {"t": {"0": 20, "1": 8}}, committed=False)  # planned, never committed
    assert layout.committed_offsets(ckpt) == {"t": {"0": 9, "1": 3}}
    assert layout.committed_offsets(tmp_path / "none") is None


def test_a_real_time_batch_ended_where_the_next_entry_begins(tmp_path):
    """A real-time offset-log entry is where its batch began; the newest committed batch ended
    where the next entry (written as the next batch starts) begins."""
    ckpt = tmp_path / "rt"
    _batch(ckpt, 4, {"t": {"0": 100, "1": 7}})
    _batch(ckpt, 5, {"t": {"0": 180, "1": 9}}, committed=False)  # began after batch 4 committed
    assert layout.committed_offsets(ckpt, real_time=True) == {"t": {"0": 180, "1": 9}}
    assert layout.committed_offsets(ckpt) == {"t": {"0": 100, "1": 7}}  # a micro-batch entry: where 4 ended
    # the next batch not begun yet (stopped right after the checkpoint, or a crash): where batch 4 began
    (ckpt / "offsets" / "5").unlink()
    assert layout.committed_offsets(ckpt, real_time=True) == {"t": {"0": 100, "1": 7}}


def test_leaving_real_time_starts_where_its_newest_committed_batch_ended(tmp_path):
    """Real time -> micro-batches: nothing the committed batches copied is copied again."""
    flow_dir = tmp_path / "a-to-b"
    rt_dir = layout.checkpoint_dir(flow_dir, REAL_TIME)
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    _batch(rt_dir, 0, {"t": {"0": 0}})
    _batch(rt_dir, 1, {"t": {"0": 75_000}})
    _batch(rt_dir, 2, {"t": {"0": 150_000}}, committed=False)
    assert layout.prepare_checkpoint(flow_dir, MICRO_BATCH, "a->b") == {"t": {"0": 150_000}}


def test_a_fresh_flow_needs_no_handover(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    assert layout.read_marker(flow_dir)["path"] == REAL_TIME


def test_switching_paths_starts_where_the_other_path_committed_and_drops_the_stale_checkpoint(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    rt_dir = layout.checkpoint_dir(flow_dir, REAL_TIME)
    # A checkpoint from before there were two paths: micro-batches committed up to 40.
    _batch(flow_dir, 7, {"t": {"0": 40}})
    # An old real-time checkpoint, behind what the micro-batches copied since.
    _batch(rt_dir, 3, {"t": {"0": 10}})
    start = layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    assert start == {"t": {"0": 40}}
    assert not rt_dir.exists()
    # A crash before the real-time query's first batch: the handover is still known.
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 40}}
    # Once it has batches, it resumes from its own checkpoint.
    _batch(rt_dir, 0, {"t": {"0": 55}})
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    # And back to micro-batches: from the real-time query's newest committed batch.
    assert layout.prepare_checkpoint(flow_dir, MICRO_BATCH, "a->b") == {"t": {"0": 55}}
    assert not (flow_dir / "offsets").exists()
    assert layout.read_marker(flow_dir)["path"] == MICRO_BATCH


def test_starting_offsets_cover_every_assigned_partition():
    got = json.loads(layout.starting_offsets_json({"t": {"0": 40}}, {"t": 2, "u": 1}))
    assert got == {"t": {"0": 40, "1": -2}, "u": {"0": -2}}


def test_resume_offsets_outside_the_log_are_moved_and_reported():
    resume = {"t": {"0": 100, "1": 50, "2": 900, "3": -2}}
    marks = {("t", 0): (150, 200), ("t", 1): (0, 80), ("t", 2): (0, 10), ("t", 3): (5, 9)}
    adjusted, losses, resets = layout.adjust_resume(resume, marks)
    assert adjusted == {"t": {"0": 150, "1": 50, "2": 0, "3": -2}}
    assert losses == [("t", 0, 100, 149)]
    assert resets == [("t", 2, 900, 0)]


def test_restart_from_drops_the_checkpoint_and_remembers_where_to_start(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    rt_dir = layout.checkpoint_dir(flow_dir, REAL_TIME)
    _batch(rt_dir, 4, {"t": {"0": 100}})
    layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    layout.restart_from(flow_dir, REAL_TIME, {"t": {"0": 150}})
    assert not rt_dir.exists()
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 150}}


def test_a_stopped_query_resumes_at_the_acknowledged_positions_over_its_checkpoint(tmp_path):
    """Partitions the writers copied resume after their last acknowledged record; the others
    where the newest committed batch ended; nothing before what was committed."""
    ckpt = tmp_path / "rt"
    _batch(ckpt, 4, {"t": {"0": 100, "1": 7, "2": 30}})
    _batch(ckpt, 5, {"t": {"0": 180, "1": 9, "2": 30}}, committed=False)
    base = layout.resume_base(ckpt, started={"t": {"0": 0, "1": 0, "2": 0}})
    assert base == {"t": {"0": 180, "1": 9, "2": 30}}
    acknowledged = {("t", 0): 412, ("t", 1): 5, ("u", 0): 3}  # t/1: an older copy (a retried task): not behind
    assert layout.resume_after_stop(base, acknowledged) == {"t": {"0": 412, "1": 9, "2": 30}, "u": {"0": 3}}
    assert base == {"t": {"0": 180, "1": 9, "2": 30}}, "the base is not changed"


def test_without_a_committed_batch_the_resume_base_is_the_first_batch_start_or_the_query_start(tmp_path):
    ckpt = tmp_path / "rt"
    started = {"t": {"0": -2, "1": 40}}
    assert layout.resume_base(ckpt, started) == started  # no checkpoint yet
    _batch(ckpt, 0, {"t": {"0": 0, "1": 35}}, committed=False)  # an older run's first batch: Spark restarts there
    assert layout.resume_base(ckpt, started) == {"t": {"0": 0, "1": 35}}
    # an earliest (-2) start is overridden by what was acknowledged, and stays for the rest
    assert layout.resume_after_stop(started, {("t", 0): 17}) == {"t": {"0": 17, "1": 40}}


def _crashed_real_time_run(flow_dir):
    """A real-time run killed mid-batch: batch 4 committed, batch 5 running, a journal written."""
    layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    ckpt = layout.checkpoint_dir(flow_dir, REAL_TIME)
    shard = layout.shard_dir(ckpt, 0)
    _batch(shard, 4, {"t": {"0": 100, "1": 7, "2": 30}})
    _batch(shard, 5, {"t": {"0": 180, "1": 9, "2": 30}}, committed=False)
    # t/1: the checkpoint is ahead of the journal (it committed after the journal was written)
    assert layout.write_journal(ckpt, {("t", 0): 9_412, ("t", 1): 8, ("t", 2): 31}, started={})
    return ckpt


def test_after_a_crash_each_partition_resumes_at_the_newer_of_checkpoint_and_journal(tmp_path, caplog):
    flow_dir = tmp_path / "a-to-b"
    ckpt = _crashed_real_time_run(flow_dir)
    caplog.set_level("INFO", logger="sparkmirror.replicate")
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 9_412, "1": 9, "2": 31}}
    assert "not at its last checkpoint: 9233 records fewer copied again" in caplog.text
    # written down, the checkpoint and its journal dropped: a second crash before the next
    # journal resumes there again, never at the old checkpoint
    assert not ckpt.exists()
    assert layout.read_marker(flow_dir) == {"path": REAL_TIME, "start": {"t": {"0": 9_412, "1": 9, "2": 31}}}
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 9_412, "1": 9, "2": 31}}


def test_a_crashed_real_time_run_hands_its_journal_over_to_micro_batches(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    _crashed_real_time_run(flow_dir)
    assert layout.prepare_checkpoint(flow_dir, MICRO_BATCH, "a->b") == {"t": {"0": 9_412, "1": 9, "2": 31}}


def test_a_journal_is_only_read_beside_its_own_checkpoint(tmp_path):
    """Whatever drops the real-time checkpoint drops its journal; none is written without one;
    a journal left by a real-time run before a micro-batch one is never read."""
    flow_dir = tmp_path / "a-to-b"
    ckpt = _crashed_real_time_run(flow_dir)
    layout.restart_from(flow_dir, REAL_TIME, {"t": {"0": 5}})  # e.g. a partition moved to its log start
    assert not layout.write_journal(ckpt, {("t", 0): 9_999}, {}), "no checkpoint, no journal"
    assert layout.read_journal(ckpt) is None
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 5}}
    # the micro-batch path ran last: a real-time directory's journal says nothing about it
    flow_dir = tmp_path / "c-to-d"
    _crashed_real_time_run(flow_dir)
    layout.restart_from(flow_dir, MICRO_BATCH, {"t": {"0": 77}})
    shard = layout.shard_dir(layout.checkpoint_dir(flow_dir, REAL_TIME), 0)
    _batch(shard, 0, {"t": {"0": 1}})
    layout.write_journal(layout.checkpoint_dir(flow_dir, REAL_TIME), {("t", 0): 9_999}, {})
    assert layout.resume_from_journal(flow_dir, "c->d") is None


def test_a_partition_in_a_first_batch_resumes_at_its_acknowledged_position_or_its_start(tmp_path):
    """A shard's first batch is in its checkpoint only once it ended: its partitions resume at
    their acknowledged positions, and one with none where the query started it (-2: earliest)."""
    flow_dir = tmp_path / "a-to-b"
    layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    ckpt = layout.checkpoint_dir(flow_dir, REAL_TIME)
    layout.shard_dir(ckpt, 0).mkdir(parents=True)  # started, no batch ended yet
    started = {"t": {"0": 40, "1": 12, "2": -2}}
    assert layout.write_journal(ckpt, {("t", 0): 95}, started)
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 95, "1": 12, "2": -2}}


@pytest.mark.parametrize("text", ["", "{", '{"acknowledged": [1], "started": {}}', "[]",
                                  '{"acknowledged": {"t": {"0": "x"}}, "started": {}}', '{"acknowledged": {}}'])
def test_an_unreadable_journal_leaves_the_checkpoint_to_say(tmp_path, text):
    flow_dir = tmp_path / "a-to-b"
    ckpt = _crashed_real_time_run(flow_dir)
    (ckpt / layout.JOURNAL_FILE).write_text(text)
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    assert layout.committed_offsets(ckpt, real_time=True) == {"t": {"0": 180, "1": 9, "2": 30}}


@pytest.mark.parametrize("text, parsed", [
    ('{"t": {"0": 5, "1": -2}}', {"t": {"0": 5, "1": -2}}),
    ("earliest", {}), ("latest", {}), (None, {}), ("[1, 2]", {}),
])
def test_starting_offsets_are_read_back_from_sparks_json(text, parsed):
    assert layout.parse_starting_offsets(text) == parsed


def test_the_resume_point_after_a_stop_is_the_start_written_down(tmp_path):
    """A real-time query stopped at its acknowledged positions has no checkpoint left: the backlog
    estimate of the next start counts from the start written down, not from the log start."""
    flow_dir = tmp_path / "a-to-b"
    assert layout.resume_point(flow_dir) == {}
    layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    _batch(layout.checkpoint_dir(flow_dir, REAL_TIME), 4, {"t": {"0": 100}})
    assert layout.resume_point(flow_dir) == {"t": {"0": 100}}
    layout.restart_from(flow_dir, REAL_TIME, {"t": {"0": 23_186}})
    assert layout.resume_point(flow_dir) == {"t": {"0": 23_186}}


def test_partitions_are_dealt_round_robin_and_evenly():
    shards = layout.shard_assignment({"b": 2, "a": 5}, 3)
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
    assert layout.shard_assignment(assignment, shards) == expected


def test_committed_offsets_merge_every_shard(tmp_path):
    ckpt = tmp_path / "f.realtime"
    s0, s1 = layout.shard_dir(ckpt, 0), layout.shard_dir(ckpt, 1)
    _batch(s0, 3, {"t": {"0": 10, "2": 30}})
    _batch(s0, 4, {"t": {"0": 15, "2": 33}})  # where batch 3 ended
    _batch(s1, 7, {"t": {"1": 70}})
    _batch(s1, 8, {"t": {"1": 90}}, committed=False)
    assert layout.committed_offsets(ckpt, real_time=True) == {"t": {"0": 15, "1": 90, "2": 33}}
    # a shard that never committed a batch: where its first batch began
    s2 = layout.shard_dir(ckpt, 2)
    _batch(s2, 0, {"u": {"0": 5}}, committed=False)
    assert layout.committed_offsets(ckpt, real_time=True)["u"] == {"0": 5}
    # a shard with no batch at all says nothing for its partitions: no merged answer
    layout.shard_dir(ckpt, 3).mkdir()
    assert layout.committed_offsets(ckpt, real_time=True) is None
    assert layout.has_batches(ckpt)
    assert not layout.has_batches(tmp_path / "none")


def test_resume_base_lays_each_shard_over_where_the_run_started(tmp_path):
    ckpt = tmp_path / "f.realtime"
    _batch(layout.shard_dir(ckpt, 0), 2, {"t": {"0": 50}})
    layout.shard_dir(ckpt, 1).mkdir(parents=True)  # started, nothing planned yet
    started = {"t": {"0": 40, "1": 12}}
    assert layout.resume_base(ckpt, started) == {"t": {"0": 50, "1": 12}}
    assert started == {"t": {"0": 40, "1": 12}}


def test_a_checkpoint_from_before_shards_is_read_as_one(tmp_path):
    ckpt = tmp_path / "f.realtime"
    _batch(ckpt, 1, {"t": {"0": 5, "1": 6}})
    _batch(ckpt, 2, {"t": {"0": 9, "1": 8}})
    assert layout.shard_dirs(ckpt) == [ckpt]
    assert layout.committed_offsets(ckpt, real_time=True) == {"t": {"0": 9, "1": 8}}
    assert not layout.layout_matches(ckpt, layout.shard_assignment({"t": 2}, 1))


def test_a_checkpoint_laid_out_for_other_shards_restarts_where_each_shard_committed(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    ckpt = layout.checkpoint_dir(flow_dir, REAL_TIME)
    old = layout.shard_assignment({"t": 4}, 2)
    assert layout.lay_out_shards(flow_dir, old, None) is None  # new: nothing to resume
    assert layout.layout_matches(ckpt, old)
    _batch(layout.shard_dir(ckpt, 0), 5, {"t": {"0": 100, "2": 200}})
    _batch(layout.shard_dir(ckpt, 0), 6, {"t": {"0": 110, "2": 210}})
    _batch(layout.shard_dir(ckpt, 1), 4, {"t": {"1": 300, "3": 400}})
    _batch(layout.shard_dir(ckpt, 1), 5, {"t": {"1": 310, "3": 410}})
    assert layout.lay_out_shards(flow_dir, old, None) is None  # same shards: each resumes itself
    # the topic grew to 5 partitions: the shards hold others now
    new = layout.shard_assignment({"t": 5}, 2)
    start = layout.lay_out_shards(flow_dir, new, None)
    assert start == {"t": {"0": 110, "1": 310, "2": 210, "3": 410}}
    assert not layout.has_batches(ckpt) and layout.layout_matches(ckpt, new)
    # written down before any query starts: a crash now resumes there
    assert layout.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == start
    # the new partition, named by no shard, starts at its earliest offset
    json_all = layout.starting_offsets_json(start, {"t": 5})
    assert json.loads(layout.shard_starting_offsets(json_all, new[0])) == {"t": {"0": 110, "2": 210, "4": -2}}
    assert json.loads(layout.shard_starting_offsets(json_all, new[1])) == {"t": {"1": 310, "3": 410}}


def test_starting_offsets_that_name_no_partition_are_kept():
    assert layout.shard_starting_offsets("earliest", {"t": [0]}) == "earliest"
    assert layout.shard_starting_offsets("latest", {"t": [1]}) == "latest"
