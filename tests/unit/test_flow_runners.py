"""A flow's state machine over its path policy and its runners, and each runner on its own,
with stand-ins for Spark's queries and the JVM writers' counters (no Spark, no Kafka)."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from replicator.datapath import checkpoint_layout as layout
from replicator.datapath import flow as flow_module
from replicator.datapath import microbatch, rtrunner, runner
from replicator.datapath.flow import FlowReplicator
from replicator.datapath.microbatch import DirectSourceRunner, KafkaSourceRunner
from replicator.datapath.rtrunner import RealTimeProgress, RealTimeRunner
from replicator.datapath.runner import RESTART_BACKOFF_S, Backoff, FlowStats, Once, RunnerContext
from replicator.settings import MICRO_BATCH, REAL_TIME, ReplicatorSettings
from sparkmirror.errors import SparkmirrorError
from sparkmirror.model.parse import parse_config

CONFIG = ("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
          "a->b.enabled = true\n")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    for module in (flow_module, microbatch, rtrunner, runner):
        monkeypatch.setattr(module.time, "monotonic", c)
    return c


class FakeQuery:
    """The attributes of a pyspark StreamingQuery the runners and the flow read."""

    def __init__(self, name="q", batch=None, exc=None, active=True):
        self.name, self.runId, self.isActive, self._exc = name, f"run-{name}", active, exc
        self.lastProgress = None if batch is None else {"batchId": batch, "numInputRows": 0, "sources": []}
        self.status = {"isTriggerActive": False}
        self.stopped = 0

    def exception(self):
        return self._exc

    def stop(self):
        self.stopped += 1
        self.isActive = False

    def fail(self, exc):
        self.isActive, self._exc = False, exc


class FakeRunner:
    """A runner that records what the flow asked of it."""

    def __init__(self, path, calls):
        self.path, self.calls, self.query = path, calls, None

    def start(self):
        self.calls.append(("start", self.path))
        self.query = FakeQuery(self.path)

    def stop(self, closing):
        self.calls.append(("stop", self.path, closing))
        self.query = None

    def check(self):
        self.calls.append(("check", self.path))

    def failed(self, closing):
        self.calls.append(("failed", self.path, closing))
        self.query = None
        return "restarting from the checkpoint"

    def copied_offsets(self):
        return {("t", 0): 7}


def make_flow(tmp_path: Path, monkeypatch, **settings) -> tuple[FlowReplicator, list]:
    config = parse_config(CONFIG)
    fr = FlowReplicator(config, config.flow("a", "b"), None, tmp_path, ReplicatorSettings(**settings),
                        source_admin=None, target_admin=None,
                        topics=SimpleNamespace(discover=lambda: {"t": 2}, plan=lambda d: d, ensure=lambda p: None),
                        starting_offsets=None)
    fr.assignment = {"t": 2}
    fr._backlog_estimate = lambda: 0
    fr._probe = SimpleNamespace(waiting=lambda mirrors: [], unreachable=lambda: [])
    calls: list = []
    monkeypatch.setattr(fr, "_new_runner", lambda: FakeRunner(fr.path.path, calls))
    return fr, calls


# -- the flow: a state machine over the policy and the runners ------------------------------

def test_the_flow_starts_the_runner_its_path_calls_for_and_supervises_it(tmp_path, monkeypatch, clock):
    fr, calls = make_flow(tmp_path, monkeypatch)
    fr.choose_path(None)
    fr.assignment = {}
    fr.start_query()
    assert calls == [] and fr.query is None and fr.copied_offsets() is None  # no topic yet: nothing to run
    fr.assignment = {"t": 2}
    fr.start_query()
    assert calls == [("start", REAL_TIME)] and fr.query is not None
    fr.check_query()
    assert calls[-1] == ("check", REAL_TIME)
    assert fr.copied_offsets() == {("t", 0): 7}


def test_a_failed_query_is_restarted_after_a_backoff_that_grows_while_restarts_fail(tmp_path, monkeypatch, clock,
                                                                                     caplog):
    fr, calls = make_flow(tmp_path, monkeypatch, data_path=MICRO_BATCH)
    fr.choose_path(None)
    fr.start_query()
    fr.query.fail(RuntimeError("batch 3 failed: broker down"))
    with caplog.at_level(logging.WARNING, "sparkmirror.replicate"):
        fr.check_query()
    assert calls[-1] == ("failed", MICRO_BATCH, False) and fr.failure == "batch 3 failed: broker down"
    assert "the streaming query failed: batch 3 failed: broker down; restarting from the checkpoint in 5 s" \
        in caplog.text
    fr.check_query()
    assert calls[-1][0] == "failed", "nothing before the backoff"
    fr.topics.discover = lambda: (_ for _ in ()).throw(OSError("cluster a down"))
    delays = []
    for _ in range(5):
        clock.now = fr._restart_at
        fr.check_query()
        delays.append(fr._restart_at - clock.now)
    assert delays == [10.0, 20.0, 40.0, 60.0, 60.0]
    fr.topics.discover = lambda: {"t": 2}
    clock.now = fr._restart_at
    fr.check_query()
    assert fr._restart_at is None and calls[-2:] == [("stop", MICRO_BATCH, False), ("start", MICRO_BATCH)]
    assert fr._backoff.delay == 60.0, "only a committed batch brings the backoff down again"


def test_a_permanent_write_error_stops_the_run(tmp_path, monkeypatch, clock):
    fr, calls = make_flow(tmp_path, monkeypatch, data_path=MICRO_BATCH)
    fr.choose_path(None)
    fr.start_query()
    fr.query.fail(RuntimeError("SPARKMIRROR_WRITE_ERROR: Broker: Message size too large"))
    with pytest.raises(SparkmirrorError, match="flow a->b stopped"):
        fr.check_query()
    assert calls == [("start", MICRO_BATCH)]


def test_falling_back_and_catching_up_swap_the_runners(tmp_path, monkeypatch, clock):
    fr, calls = make_flow(tmp_path, monkeypatch, fall_back_hold=60.0)
    fr.choose_path(None)
    fr.start_query()
    fr.fall_back(500_000, 10_000.0, 20_000.0, 60.0)
    assert calls == [("start", REAL_TIME), ("stop", REAL_TIME, False), ("start", MICRO_BATCH)]
    assert fr.catching_up_first and not fr.realtime
    fr.fall_back(500_000, 10_000.0, 20_000.0, 60.0)  # not real time: nothing to leave
    clock.now += 59
    fr.caught_up()
    assert len(calls) == 3, "held in micro-batches"
    clock.now += 1
    fr.caught_up()
    assert calls[3:] == [("stop", MICRO_BATCH, False), ("start", REAL_TIME)] and fr.realtime
    assert not fr.catching_up_first


def test_a_new_fetch_wait_restarts_a_local_real_time_query_and_nothing_else(tmp_path, monkeypatch, clock):
    from replicator.datapath.fetchwait import LONG_WAIT_MS, SHORT_WAIT_MS

    fr, calls = make_flow(tmp_path, monkeypatch)
    assert fr.fetch_wait is None, "no session yet"
    fr.spark = SimpleNamespace(sparkContext=SimpleNamespace(master="spark://host:7077"))
    assert fr.fetch_wait is None, "on a cluster a restart waits for a checkpoint: fixed"
    fr.spark = SimpleNamespace(sparkContext=SimpleNamespace(master="local[*,4]"))
    assert fr.fetch_wait.wait_ms == SHORT_WAIT_MS
    fr.choose_path(None)
    fr.start_query()
    fr.refetch(LONG_WAIT_MS, 80e6)
    assert calls == [("start", REAL_TIME), ("stop", REAL_TIME, False), ("start", REAL_TIME)]
    assert fr.fetch_wait.wait_ms == LONG_WAIT_MS
    fr.fall_back(500_000, 10_000.0, 20_000.0, 60.0)
    del calls[:]
    fr.refetch(SHORT_WAIT_MS, 1e6)
    assert calls == [], "micro-batches fetch on their own: the next real-time start takes the wait"
    fr._source_options = {**fr._source_options, "kafka.fetch.max.wait.ms": "100"}
    assert fr.fetch_wait is None, "a configured wait is fixed"


def test_a_runner_is_stopped_its_own_way_whatever_the_path_became(tmp_path, monkeypatch, clock):
    """A topic that grew past the task slots moves the flow to micro-batches while its real-time
    query runs: that query still stops as a real-time one."""
    fr, calls = make_flow(tmp_path, monkeypatch)
    fr.choose_path(None)
    fr.start_query()
    fr.choose_path(None, slots_free=1)
    assert fr.path.path == MICRO_BATCH
    fr.restart_query()
    assert calls == [("start", REAL_TIME), ("stop", REAL_TIME, False), ("start", MICRO_BATCH)]


def test_a_closed_flow_starts_nothing_again(tmp_path, monkeypatch, clock):
    fr, calls = make_flow(tmp_path, monkeypatch)
    fr.choose_path(None)
    fr.start_query()
    fr.close()
    assert calls[-1] == ("stop", REAL_TIME, True) and not fr.may_fall_back
    fr.restart_query()
    fr.fall_back(1, 1.0, 2.0, 60.0)
    fr._try_restart()
    assert calls == [("start", REAL_TIME), ("stop", REAL_TIME, True)]


@pytest.mark.parametrize("settings, exactly_once, expected", [
    ({}, False, RealTimeRunner),
    ({"data_path": MICRO_BATCH}, False, DirectSourceRunner),
    ({"data_path": MICRO_BATCH, "source_mode": "kafka"}, False, KafkaSourceRunner),
    ({}, True, KafkaSourceRunner),  # exactly-once: micro-batches over Spark's Kafka source
])
def test_each_path_has_its_runner_and_no_runner_holds_the_flow(tmp_path, settings, exactly_once, expected):
    text = CONFIG + ("a->b.exactly.once.support = required\n" if exactly_once else "")
    config = parse_config(text)
    fr = FlowReplicator(config, config.flow("a", "b"), None, tmp_path, ReplicatorSettings(**settings),
                        source_admin=None, target_admin=None, topics=None, starting_offsets=None)
    fr.assignment = {"t": 2}
    fr._backlog_estimate = lambda: 0
    fr.choose_path(None)
    made = fr._new_runner()
    assert type(made) is expected
    for member in ("path", "query", "start", "stop", "check", "failed", "copied_offsets"):
        assert hasattr(made, member), member
    assert fr not in _reachable(made), "a runner keeps no reference back to its flow"
    if fr.offset_syncs.producer is not None:
        fr.offset_syncs.producer.flush(0)


def _reachable(start, depth: int = 6) -> list:
    """Objects reachable from ``start`` (not through modules or classes)."""
    seen, out, frontier = {id(start)}, [], [start]
    for _ in range(depth):
        nxt = []
        for obj in frontier:
            for ref in gc.get_referents(obj):
                if id(ref) in seen or isinstance(ref, (type, type(gc))):
                    continue
                seen.add(id(ref))
                out.append(ref)
                nxt.append(ref)
        frontier = nxt
    return out


# -- the runners on their own -------------------------------------------------------------

class FakeProbe:
    def __init__(self):
        self.slow = []

    def report_slow_batch(self, batch_id, started, mirrors):
        self.slow.append((batch_id, started, mirrors))

    def unreachable(self):
        return []

    def waiting(self, mirrors):
        return []


def context(tmp_path: Path, **kw) -> RunnerContext:
    config = parse_config(CONFIG)
    fields = dict(name="a->b", config=config, flow=config.flow("a", "b"), settings=ReplicatorSettings(),
                  spark=None, flow_dir=tmp_path / "a-to-b", offset_syncs=None, stats=FlowStats(), backoff=Backoff(),
                  probe=FakeProbe(), notes=Once(), resume_offsets=None, source_options={}, target_admin=None,
                  copy_tasks=None, stop_flag=tmp_path / "stopping")
    fields.update(kw)
    return RunnerContext(**fields)


def test_a_micro_batch_stop_waits_for_the_running_batch_with_the_stop_flag_up(tmp_path):
    ctx = context(tmp_path)
    mb = DirectSourceRunner(ctx, {"t": 2})
    q = mb.query = FakeQuery()
    seen = []

    class Status(dict):
        def get(self, key, default=None):
            seen.append(ctx.stop_flag.exists())
            return len(seen) < 3  # the batch runs for two more looks

    q.status = Status()
    mb.stop(closing=False)
    assert seen == [True, True, True] and q.stopped == 1 and mb.query is None and mb.stopping
    assert not ctx.stop_flag.exists()
    mb.stop(closing=True)  # nothing left to stop
    assert q.stopped == 1


def test_a_written_batch_adds_to_the_stats_and_brings_the_backoff_down(tmp_path):
    ctx = context(tmp_path)
    ctx.backoff.grow()
    mb = KafkaSourceRunner(ctx, {"t": 2})
    mb._count(4, records=1000, nbytes=10_000, max_latency=250, syncs=3, duration=0.5)
    st = ctx.stats
    assert (st.batches, st.records, st.bytes, st.offset_syncs, st.max_latency_ms) == (1, 1000, 10_000, 3, 250)
    assert st.last["batch"] == 4 and ctx.backoff.delay == RESTART_BACKOFF_S[0]


def test_a_failed_batch_is_one_line_and_a_stop_says_it_abandoned_the_batch(tmp_path):
    mb = DirectSourceRunner(context(tmp_path), {"t": 2})

    def boom(*a):
        raise RuntimeError("Traceback (most recent call last):\n  ...\nKafkaException: broker gone\nmore")

    mb._write_batch = boom
    with pytest.raises(RuntimeError, match=r"^batch 7 failed: KafkaException: broker gone$"):
        mb._on_batch(None, None, 7)
    mb.stopping = True
    with pytest.raises(RuntimeError, match="batch abandoned: the query is stopping"):
        mb._on_batch(None, None, 7)
    assert mb.failed(False) == microbatch.RESUME_FROM_CHECKPOINT


def test_a_slow_micro_batch_is_reported_once_every_while(tmp_path, clock):
    ctx = context(tmp_path)
    mb = DirectSourceRunner(ctx, {"t": 1})
    mb._batch_running = (5, clock.now)
    clock.now += runner.SLOW_BATCH_S - 1
    mb.check()
    assert ctx.probe.slow == []
    clock.now += 1
    mb.check()
    mb.check()
    assert len(ctx.probe.slow) == 1 and ctx.probe.slow[0][0] == 5 and ctx.probe.slow[0][2] == ["a.t"]


class FakeCounters:
    def __init__(self, available=True):
        self.available = available
        self.totals = (0, 0, 0, 0) if available else None
        self.acknowledged: dict = {}
        self.resets = 0
        self.flush_problem = None

    def read(self):
        return self.totals

    def positions(self):
        return dict(self.acknowledged)

    def flush_all(self, timeout):
        return self.flush_problem

    def reset(self):
        self.resets += 1
        self.acknowledged = {}


def test_real_time_progress_folds_the_writers_counters_and_counts_batches(tmp_path):
    ctx = context(tmp_path)
    ctx.backoff.grow()
    counters = FakeCounters()
    progress = RealTimeProgress(ctx, counters, ["a.t"])
    q = FakeQuery(batch=0)
    counters.totals = (100, 1000, 2, 40)
    progress.poll(q)
    assert (ctx.stats.records, ctx.stats.bytes, ctx.stats.offset_syncs, ctx.stats.batches) == (100, 1000, 2, 0)
    counters.totals = (250, 2500, 3, 10)
    q.lastProgress = {"batchId": 1, "durationMs": {"triggerExecution": 5000}}
    progress.poll(q)
    assert (ctx.stats.records, ctx.stats.batches, ctx.stats.max_latency_ms) == (250, 1, 40)
    assert ctx.backoff.delay == RESTART_BACKOFF_S[0] and ctx.stats.rt_window == [0, 0, 0, 0]


def test_real_time_progress_lines_come_every_few_seconds_whatever_the_checkpoint_interval(tmp_path, caplog):
    from replicator.datapath import rtrunner

    ctx = context(tmp_path)
    counters = FakeCounters()
    progress = RealTimeProgress(ctx, counters, ["a.t"])
    q = FakeQuery(batch=0)
    progress.poll(q)
    caplog.set_level("INFO", logger="sparkmirror.replicate")
    counters.totals = (300, 3000, 3, 25)
    progress.poll(q)
    assert "records/s" not in caplog.text  # not yet: the line's window is a few seconds
    progress.window_started -= rtrunner.PROGRESS_S
    progress.poll(q)  # no batch ended (a minute-long checkpoint interval): the line comes anyway
    assert "flow a->b real-time: 300 records" in caplog.text and "records/s over 10." in caplog.text
    assert ctx.stats.rt_window == [0, 0, 0, 0] and ctx.stats.batches == 0
    caplog.clear()
    q.lastProgress = {"batchId": 1, "durationMs": {"triggerExecution": 60000}}
    progress.poll(q)
    assert "batch 0 checkpointed after 60.0 s" in caplog.text and "records/s" not in caplog.text
    # batches shorter than the line's window: each batch's end carries the line, as on a cluster
    short = RealTimeProgress(context(tmp_path, settings=ReplicatorSettings(real_time_checkpoint_interval=5)),
                             counters, ["a.t"])
    q = FakeQuery(batch=0)
    short.poll(q)
    caplog.clear()
    counters.totals = (400, 4000, 4, 10)
    q.lastProgress = {"batchId": 1, "durationMs": {"triggerExecution": 5000}}
    short.poll(q)
    assert "real-time batch 0: 100 records" in caplog.text and "records/s over 5.0 s" in caplog.text


def test_real_time_progress_on_a_cluster_counts_each_batchs_input_rows(tmp_path):
    ctx = context(tmp_path)
    progress = RealTimeProgress(ctx, FakeCounters(available=False), ["a.t"])
    q = FakeQuery(batch=3)
    q.lastProgress["numInputRows"] = 70
    progress.poll(q)
    progress.poll(q)  # the same batch: counted once
    assert ctx.stats.records == 70


def _spark(monkeypatch):
    from replicator.datapath import spark as spark_module

    monkeypatch.setattr(spark_module, "quiet_stop_noise", lambda spark, quiet, settings: None)
    monkeypatch.setattr(spark_module, "wait_jobs_done", lambda spark, group, timeout: True)
    cancelled = []
    return SimpleNamespace(sparkContext=SimpleNamespace(cancelJobGroup=cancelled.append)), cancelled


def _real_time(tmp_path, monkeypatch, counters):
    spark, cancelled = _spark(monkeypatch)
    rt = RealTimeRunner(context(tmp_path, spark=spark), {"t": 2})
    rt.counters = rt.progress.counters = counters
    layout.prepare_checkpoint(rt.ctx.flow_dir, REAL_TIME, "a->b")
    rt._started_at = {"t": {"0": 10, "1": 20}}
    return rt, cancelled


def test_a_local_real_time_stop_resumes_where_the_target_acknowledged(tmp_path, monkeypatch):
    counters = FakeCounters()
    rt, cancelled = _real_time(tmp_path, monkeypatch, counters)
    shards = [FakeQuery("s0"), FakeQuery("s1")]
    rt.query = rtrunner.realtime.ShardedQuery(shards)
    counters.acknowledged = {("t", 0): 412}
    rt.stop(closing=True)
    assert all(q.stopped for q in shards) and cancelled == ["run-s0", "run-s1"] and counters.resets == 1
    assert layout.read_marker(rt.ctx.flow_dir) == {"path": REAL_TIME, "start": {"t": {"0": 412, "1": 20}}}


def test_a_failed_real_time_query_restarts_from_what_was_acknowledged_else_its_checkpoint(tmp_path, monkeypatch):
    counters = FakeCounters()
    rt, _ = _real_time(tmp_path, monkeypatch, counters)
    rt.query = rtrunner.realtime.ShardedQuery([FakeQuery("s0")])
    counters.acknowledged = {("t", 1): 30}
    assert rt.failed(closing=False) == "restarting where the target acknowledged every record"
    assert rt.query is None and layout.read_marker(rt.ctx.flow_dir)["start"] == {"t": {"0": 10, "1": 30}}
    rt.query = rtrunner.realtime.ShardedQuery([FakeQuery("s0")])
    counters.flush_problem = "the time ran out"
    assert rt.failed(closing=False) == microbatch.RESUME_FROM_CHECKPOINT
    elsewhere = FakeCounters(available=False)
    rt, _ = _real_time(tmp_path / "cluster", monkeypatch, elsewhere)
    rt.query = rtrunner.realtime.ShardedQuery([FakeQuery("s0")])
    assert rt.failed(closing=False) == microbatch.RESUME_FROM_CHECKPOINT


class BoundaryQuery(FakeQuery):
    """A real-time query whose batch ends after ``looks`` looks at its progress."""

    def __init__(self, name, batch, looks):
        super().__init__(name)
        self.batch, self.looks = batch, looks

    @property
    def lastProgress(self):
        self.looks -= 1
        return {"batchId": self.batch if self.looks >= 0 else self.batch + 1}

    @lastProgress.setter
    def lastProgress(self, value):
        pass


def test_a_real_time_stop_on_a_cluster_stops_each_query_after_its_next_checkpoint(tmp_path, monkeypatch, caplog):
    rt, _ = _real_time(tmp_path, monkeypatch, FakeCounters(available=False))
    shards = [BoundaryQuery("s0", 4, looks=2), BoundaryQuery("s1", 9, looks=5)]
    rt.query = rtrunner.realtime.ShardedQuery(shards)
    with caplog.at_level(logging.INFO, "sparkmirror.replicate"):
        rt.stop(closing=False)
    assert [q.stopped for q in shards] == [1, 1] and all(q.looks < 0 for q in shards)
    assert "real-time queries (2) stopped right after each one's checkpoint" in caplog.text
    assert layout.read_marker(rt.ctx.flow_dir) == {"path": REAL_TIME, "start": {}}, \
        "nothing written down: the next start resumes from the checkpoints"


def test_a_resume_whose_query_does_not_start_is_retried_not_left_stopped(tmp_path, monkeypatch, clock, caplog):
    fr, calls = make_flow(tmp_path, monkeypatch, data_path=MICRO_BATCH)
    fr.spark = object()  # Spark is up: resume starts the query itself
    fr.choose_path(None)
    fr.start_query()
    assert fr.pause("ops") and fr.query is None
    starts = {"fail": True}

    def runner():
        made = FakeRunner(fr.path.path, calls)
        if starts.pop("fail", False):
            made.start = lambda: (_ for _ in ()).throw(RuntimeError("cluster b: broker not available"))
        return made

    monkeypatch.setattr(fr, "_new_runner", runner)
    with caplog.at_level(logging.WARNING, "sparkmirror.replicate"):
        assert fr.resume() is True
    assert fr.paused is None and fr.query is None and "broker not available" in fr.failure
    assert "resumed, but its query did not start" in caplog.text
    clock.now = fr._restart_at
    fr.check_query()  # the supervisor's next round after the backoff
    assert fr.query is not None and fr.query.isActive and fr._restart_at is None


def test_a_kerberos_login_no_retry_can_fix_stops_the_flow_and_an_unreachable_kdc_does_not():
    from replicator.datapath.runner import kerberos_login_error

    stale = ("Task 0 in stage 0.0 failed 4 times (KafkaException: javax.security.auth.login.LoginException: "
             "Checksum failed)")
    unknown = "KafkaException: javax.security.auth.login.LoginException: Client not found in Kerberos database (6)"
    no_kdc = ("KafkaException: javax.security.auth.login.LoginException: Cannot contact any KDC for realm "
              "'EXAMPLE.COM'")
    assert kerberos_login_error(stale) and kerberos_login_error(unknown)
    assert not kerberos_login_error(no_kdc)
    assert not kerberos_login_error("KafkaException: Checksum failed on a record batch")  # not a login
