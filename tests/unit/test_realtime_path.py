"""The real-time path's pure decisions: which path a flow takes, and the checkpoint handover."""

from __future__ import annotations

import json

import pytest

from replicator.datapath import realtime
from replicator.datapath.realtime import MICRO_BATCH, REAL_TIME
from replicator.settings import MAX_SHARDS, ReplicatorSettings


def choose(requested="auto", **kw):
    args = dict(exactly_once=False, source_mode="direct", capped=False, partitions=12, writer_unavailable=None)
    args.update(kw)
    return realtime.choose_path(requested, **args)


def test_auto_takes_real_time_for_a_plain_flow():
    assert choose().path == REAL_TIME


@pytest.mark.parametrize("kw, words", [
    ({"exactly_once": True}, "exactly-once"),
    ({"source_mode": "kafka"}, "--source kafka"),
    ({"capped": True}, "--max-records-per-batch"),
    ({"writer_unavailable": "no 'javac'"}, "no 'javac'"),
    ({"partitions": realtime.MAX_REALTIME_PARTITIONS + 1}, "partitions"),
])
def test_auto_falls_back_to_micro_batches_and_says_why(kw, words):
    c = choose(**kw)
    assert c.path == MICRO_BATCH
    assert words in c.reason


def test_micro_batch_when_asked():
    assert choose("micro-batch").path == MICRO_BATCH


@pytest.mark.parametrize("master, slots", [("local[4]", 4), ("local[40,4]", 40), ("local", 1), ("local[*]", None),
                                           ("local[*,4]", None), ("spark://h:7077", None), (None, None)])
def test_local_slots(master, slots):
    assert realtime.local_slots(master) == slots


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
    assert realtime.committed_offsets(ckpt) == {"t": {"0": 9, "1": 3}}
    assert realtime.committed_offsets(tmp_path / "none") is None


def test_a_real_time_batch_ended_where_the_next_entry_begins(tmp_path):
    """A real-time offset-log entry is where its batch began; the newest committed batch ended
    where the next entry (written as the next batch starts) begins."""
    ckpt = tmp_path / "rt"
    _batch(ckpt, 4, {"t": {"0": 100, "1": 7}})
    _batch(ckpt, 5, {"t": {"0": 180, "1": 9}}, committed=False)  # began after batch 4 committed
    assert realtime.committed_offsets(ckpt, real_time=True) == {"t": {"0": 180, "1": 9}}
    assert realtime.committed_offsets(ckpt) == {"t": {"0": 100, "1": 7}}  # a micro-batch entry: where 4 ended
    # the next batch not begun yet (stopped right after the checkpoint, or a crash): where batch 4 began
    (ckpt / "offsets" / "5").unlink()
    assert realtime.committed_offsets(ckpt, real_time=True) == {"t": {"0": 100, "1": 7}}


def test_leaving_real_time_starts_where_its_newest_committed_batch_ended(tmp_path):
    """Real time -> micro-batches: nothing the committed batches copied is copied again."""
    flow_dir = tmp_path / "a-to-b"
    rt_dir = realtime.checkpoint_dir(flow_dir, REAL_TIME)
    assert realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    _batch(rt_dir, 0, {"t": {"0": 0}})
    _batch(rt_dir, 1, {"t": {"0": 75_000}})
    _batch(rt_dir, 2, {"t": {"0": 150_000}}, committed=False)
    assert realtime.prepare_checkpoint(flow_dir, MICRO_BATCH, "a->b") == {"t": {"0": 150_000}}


def test_a_fresh_flow_needs_no_handover(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    assert realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    assert realtime.read_marker(flow_dir)["path"] == REAL_TIME


def test_switching_paths_starts_where_the_other_path_committed_and_drops_the_stale_checkpoint(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    rt_dir = realtime.checkpoint_dir(flow_dir, REAL_TIME)
    # A checkpoint from before there were two paths: micro-batches committed up to 40.
    _batch(flow_dir, 7, {"t": {"0": 40}})
    # An old real-time checkpoint, behind what the micro-batches copied since.
    _batch(rt_dir, 3, {"t": {"0": 10}})
    start = realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    assert start == {"t": {"0": 40}}
    assert not rt_dir.exists()
    # A crash before the real-time query's first batch: the handover is still known.
    assert realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 40}}
    # Once it has batches, it resumes from its own checkpoint.
    _batch(rt_dir, 0, {"t": {"0": 55}})
    assert realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") is None
    # And back to micro-batches: from the real-time query's newest committed batch.
    assert realtime.prepare_checkpoint(flow_dir, MICRO_BATCH, "a->b") == {"t": {"0": 55}}
    assert not (flow_dir / "offsets").exists()
    assert realtime.read_marker(flow_dir)["path"] == MICRO_BATCH


def test_starting_offsets_cover_every_assigned_partition():
    got = json.loads(realtime.starting_offsets_json({"t": {"0": 40}}, {"t": 2, "u": 1}))
    assert got == {"t": {"0": 40, "1": -2}, "u": {"0": -2}}


def test_java_producer_keeps_order_without_idempotence():
    conf, notes = realtime.java_producer_config({"enable.idempotence": "false", "bootstrap.servers": "x:1"})
    assert conf["max.in.flight.requests.per.connection"] == "1"
    assert notes and "one request in flight" in notes[0]
    conf, notes = realtime.java_producer_config({"bootstrap.servers": "x:1"})
    assert conf["enable.idempotence"] == "true" and conf["acks"] == "all" and not notes


def test_resume_offsets_outside_the_log_are_moved_and_reported():
    resume = {"t": {"0": 100, "1": 50, "2": 900, "3": -2}}
    marks = {("t", 0): (150, 200), ("t", 1): (0, 80), ("t", 2): (0, 10), ("t", 3): (5, 9)}
    adjusted, losses, resets = realtime.adjust_resume(resume, marks)
    assert adjusted == {"t": {"0": 150, "1": 50, "2": 0, "3": -2}}
    assert losses == [("t", 0, 100, 149)]
    assert resets == [("t", 2, 900, 0)]


def test_restart_from_drops_the_checkpoint_and_remembers_where_to_start(tmp_path):
    flow_dir = tmp_path / "a-to-b"
    rt_dir = realtime.checkpoint_dir(flow_dir, REAL_TIME)
    _batch(rt_dir, 4, {"t": {"0": 100}})
    realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    realtime.restart_from(flow_dir, REAL_TIME, {"t": {"0": 150}})
    assert not rt_dir.exists()
    assert realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b") == {"t": {"0": 150}}


def test_batch_size_is_capped_by_the_smallest_target_topic_limit():
    conf, _ = realtime.java_producer_config({})
    assert realtime.cap_batch_size(conf, {}) is None
    assert realtime.cap_batch_size(conf, {"a.big": 2_000_000, "a.default": 1_048_588}) is None
    assert conf["batch.size"] == "1048576"
    note = realtime.cap_batch_size(conf, {"a.big": 2_000_000, "a.small": 2000, "a.mid": 50_000})
    assert conf["batch.size"] == "2000"
    assert "a.small" in note and "1048576" in note and "2000" in note
    # the user's own smaller batch.size stays
    conf, _ = realtime.java_producer_config({"batch.size": "1000"})
    assert realtime.cap_batch_size(conf, {"a.small": 2000}) is None and conf["batch.size"] == "1000"


def test_checkpoint_interval_option_sets_the_trigger_and_a_clean_stop_waits_for_one_boundary():
    default = ReplicatorSettings()
    assert realtime.stop_wait_seconds(10.0, default.real_time_checkpoint_interval) == \
        max(10.0, default.real_time_checkpoint_interval + 2)
    thirty = ReplicatorSettings(real_time_checkpoint_interval=30)
    assert thirty.real_time_trigger == "30 seconds"
    # a 30-s interval: the stop waits long enough for the next boundary, not only 10 s
    assert realtime.stop_wait_seconds(10.0, thirty.real_time_checkpoint_interval) == 32.0
    seven = ReplicatorSettings(real_time_checkpoint_interval=7.5)
    assert seven.real_time_trigger == "7.5 seconds" and realtime.stop_wait_seconds(10.0, 7.5) == 10.0


@pytest.mark.parametrize("field, value, flag", [
    *[("real_time_checkpoint_interval", seconds, "--real-time-checkpoint-interval")
      for seconds in (4.9, 0, -5, float("nan"), float("inf"))],  # below Spark's minimum, or no number
    *[("real_time_shards", n, "--real-time-shards") for n in (0, -1, MAX_SHARDS + 1)],
])
def test_real_time_options_out_of_range_are_a_usage_error(field, value, flag):
    from sparkmirror.errors import UsageError

    with pytest.raises(UsageError) as info:
        ReplicatorSettings(**{field: value})
    assert info.value.exit_code == 2 and flag in str(info.value)


def test_real_time_options_out_of_range_stop_the_command_before_spark(tmp_path, capsys):
    """Through the command line: exit 2, one line naming the option."""
    from sparkmirror_cli.main import main

    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
                      "a->b.enabled = true\n")
    assert main(["replicate", str(config), "--real-time-shards", "17", "--metrics-listen", "off"]) == 2
    assert "--real-time-shards 17: must be between 1 and 16" in capsys.readouterr().err


def test_a_stopped_query_resumes_at_the_acknowledged_positions_over_its_checkpoint(tmp_path):
    """Partitions the writers copied resume after their last acknowledged record; the others
    where the newest committed batch ended; nothing before what was committed."""
    ckpt = tmp_path / "rt"
    _batch(ckpt, 4, {"t": {"0": 100, "1": 7, "2": 30}})
    _batch(ckpt, 5, {"t": {"0": 180, "1": 9, "2": 30}}, committed=False)
    base = realtime.resume_base(ckpt, started={"t": {"0": 0, "1": 0, "2": 0}})
    assert base == {"t": {"0": 180, "1": 9, "2": 30}}
    acknowledged = {("t", 0): 412, ("t", 1): 5, ("u", 0): 3}  # t/1: an older copy (a retried task): not behind
    assert realtime.resume_after_stop(base, acknowledged) == {"t": {"0": 412, "1": 9, "2": 30}, "u": {"0": 3}}
    assert base == {"t": {"0": 180, "1": 9, "2": 30}}, "the base is not changed"


def test_without_a_committed_batch_the_resume_base_is_the_first_batch_start_or_the_query_start(tmp_path):
    ckpt = tmp_path / "rt"
    started = {"t": {"0": -2, "1": 40}}
    assert realtime.resume_base(ckpt, started) == started  # no checkpoint yet
    _batch(ckpt, 0, {"t": {"0": 0, "1": 35}}, committed=False)  # an older run's first batch: Spark restarts there
    assert realtime.resume_base(ckpt, started) == {"t": {"0": 0, "1": 35}}
    # an earliest (-2) start is overridden by what was acknowledged, and stays for the rest
    assert realtime.resume_after_stop(started, {("t", 0): 17}) == {"t": {"0": 17, "1": 40}}


@pytest.mark.parametrize("text, parsed", [
    ('{"t": {"0": 5, "1": -2}}', {"t": {"0": 5, "1": -2}}),
    ("earliest", {}), ("latest", {}), (None, {}), ("[1, 2]", {}),
])
def test_starting_offsets_are_read_back_from_sparks_json(text, parsed):
    assert realtime.parse_starting_offsets(text) == parsed


def test_a_stop_waits_for_a_checkpoint_only_where_the_driver_cannot_read_the_writers():
    from replicator.datapath.flow import GRACEFUL_STOP_S, stop_grace

    assert stop_grace(real_time=True, interval=60.0, local=True) == GRACEFUL_STOP_S
    assert stop_grace(real_time=True, interval=60.0, local=False) == 62.0
    assert stop_grace(real_time=False, interval=60.0, local=False) == GRACEFUL_STOP_S


def test_the_resume_point_after_a_stop_is_the_start_written_down(tmp_path):
    """A real-time query stopped at its acknowledged positions has no checkpoint left: the backlog
    estimate of the next start counts from the start written down, not from the log start."""
    flow_dir = tmp_path / "a-to-b"
    assert realtime.resume_point(flow_dir) == {}
    realtime.prepare_checkpoint(flow_dir, REAL_TIME, "a->b")
    _batch(realtime.checkpoint_dir(flow_dir, REAL_TIME), 4, {"t": {"0": 100}})
    assert realtime.resume_point(flow_dir) == {"t": {"0": 100}}
    realtime.restart_from(flow_dir, REAL_TIME, {"t": {"0": 23_186}})
    assert realtime.resume_point(flow_dir) == {"t": {"0": 23_186}}


def test_real_time_source_fetches_wait_for_64_kb_or_20_ms_unless_the_config_says_otherwise():
    from sparkmirror.model.clients import spark_kafka_options

    plain = realtime.source_options(spark_kafka_options({"bootstrap.servers": "a:9092"}))
    assert plain["kafka.fetch.min.bytes"] == "65536"
    assert plain["kafka.fetch.max.wait.ms"] == "20"
    assert plain["kafka.bootstrap.servers"] == "a:9092"
    own = realtime.source_options(spark_kafka_options({"bootstrap.servers": "a:9092", "fetch.min.bytes": "1"}))
    assert own["kafka.fetch.min.bytes"] == "1"
    assert own["kafka.fetch.max.wait.ms"] == "20"
