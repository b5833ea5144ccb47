"""One enabled flow A->B: which data path its query runs on, and its query started,
supervised, restarted and stopped.

``FlowReplicator`` is a small state machine over the flow's path policy
(``pathpolicy.PathPolicy``: real time, or micro-batches for a backlog and for flows that
cannot run in real time) and one runner per start of the query (``runner.Runner``:
``microbatch.DirectSourceRunner``, ``microbatch.KafkaSourceRunner`` for ``--source kafka``
and exactly-once flows, ``rtrunner.RealTimeRunner``). It starts the runner its path calls
for, stops it before the next one starts (a change of path, a topic refresh, a fall-back
from real time, the end of the run), and supervises it: a query that failed for a reason a
replay can fix is restarted from its checkpoint after a backoff (the failed batch was never
committed: duplicates, never loss); a permanent write error stops the run.

A paused flow (``pause``, from the control API) has no query: it copies nothing until
``resume``. The pause is a file next to the flow's checkpoint (``replicator.datapath.pause``), so it
outlives a restart or a kill -9; its stop is the clean stop of a run's end (the running
batch finishes; a real-time query stops at the writers' acknowledged positions).

The source topic set is fixed per query (``assign``): the control plane creates
mirror topics *before* their records can be read, then restarts the query with
the new assignment on the same checkpoint; new partitions start from their
earliest offset.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from pathlib import Path

from replicator.datapath import checkpoint_layout as layout
from replicator.datapath import fetchwait
from replicator.datapath.microbatch import DirectSourceRunner, KafkaSourceRunner
from replicator.datapath.offsetsyncs_writer import OffsetSyncWriter
from replicator.datapath.pathpolicy import Choice, PathPolicy
from replicator.datapath.pause import clear_pause, read_pause, write_pause
from replicator.datapath.rtrunner import RealTimeRunner
from replicator.datapath.runner import (GRACEFUL_STOP_S, Backoff, ClusterProbe, FlowStats, Once, Runner,
                                        RunnerContext, failure_message, is_permanent, kerberos_login_error,
                                        local_mode, spark_source_options, stop_grace)
from replicator.kafkaclients import watermarks
from replicator.settings import REAL_TIME, ReplicatorSettings
from sparkmirror.errors import SparkmirrorError

log = logging.getLogger("sparkmirror.replicate")

__all__ = ["FlowReplicator", "FlowStats", "GRACEFUL_STOP_S", "stop_grace"]  # replicator.service reads stop_grace here


def _cores() -> int:
    """The cores this process may run on (a container's CPU set, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Pausable:
    """FlowReplicator's pause and resume (the pause file: replicator.datapath.pause)."""

    def pause(self, by: str) -> bool:
        """Stop copying until ``resume``, across restarts; False if it was paused already."""
        with self._query_lock:
            if self.paused is not None:
                return False
            self.paused, self._restart_at = write_pause(self.checkpoint_dir, by), None
            self._stop_query()
            return True

    def resume(self) -> bool:
        """Copy again from where the pause stopped; False if it was not paused."""
        with self._query_lock:
            if self.paused is None:
                return False
            clear_pause(self.checkpoint_dir)
            self.paused = None
            if not self._closed and self.spark is not None:  # before Spark is up, the run's start starts it
                try:
                    self._start_query()
                except Exception as exc:
                    # the pause is gone, so nothing else would start it: the supervisor retries, as
                    # after a failed query
                    self.failure = failure_message(exc)
                    self._restart_at = time.monotonic() + self._backoff.delay
                    log.warning("flow %s: resumed, but its query did not start: %s; next attempt in %.0f s",
                                self.name, self.failure, self._backoff.delay)
            return True


class _FetchWaitFollower:
    """FlowReplicator's real-time fetch wait, chosen from the flow's rate (fetchwait)."""

    @property
    def fetch_wait(self) -> fetchwait.FetchWait | None:
        """The real-time fetch wait the flow's rate chooses; None where it is fixed (fetchwait.adapts)."""
        if self.spark is None or not fetchwait.adapts(self._source_options, local_mode(self.spark)):
            return None
        return self._fetch_wait

    def refetch(self, wait_ms: int, source_bytes_per_s: float) -> None:
        """The progress loop saw the source's rate ask for another fetch wait long enough: the
        real-time query restarts with it (locally where the target acknowledged: nothing copied twice)."""
        with self._query_lock:
            if self._closed or self._restart_at is not None or not self.realtime or self.query is None:
                return
            before = self._fetch_wait.wait_ms
            self._fetch_wait.changed(wait_ms)
            rate = (f"{source_bytes_per_s / 1e6:.1f} MB/s" if source_bytes_per_s >= 1e6
                    else f"{source_bytes_per_s / 1e3:.1f} KB/s")
            log.info("flow %s: the source adds %s, so real-time fetches wait at most %d ms instead of %d "
                     "(%s): restarting its real-time query", self.name, rate, wait_ms, before,
                     "fewer fetches while the cores are busy" if wait_ms > before else "records wait less for company")
            self._stop_query()
            self._start_query()


class FlowReplicator(_Pausable, _FetchWaitFollower):
    """One flow's streaming query, given by the service: the flow's FlowConfig, its clusters'
    admin clients, ``topics`` (discover(), plan(), ensure(): the mirror topics, see
    replicator.control.topics.TopicSync) and ``starting_offsets(assignment, checkpoint_dir)``
    (the Spark ``startingOffsets`` of a query without a checkpoint: where MM2 or an earlier run
    left off). It reports its figures to replicator.metrics."""

    def __init__(self, config, flow, spark, checkpoint_root: Path, settings: ReplicatorSettings, *,
                 source_admin, target_admin, topics, starting_offsets):
        self.config, self.flow, self.settings = config, flow, settings
        self.spark = spark  # set by SparkApp once the session is up
        self.copy_tasks: int | None = None  # direct source tasks per batch (default: Spark's parallelism)
        self.checkpoint_dir = Path(checkpoint_root) / f"{flow.source}-to-{flow.target}"
        self.source_admin, self.target_admin, self.topics = source_admin, target_admin, topics
        self._resume_offsets = starting_offsets
        self.offset_syncs = OffsetSyncWriter(config, flow)
        self.assignment: dict[str, int] = {}
        self.stats = FlowStats()
        self.failure: str | None = None
        #: The path the query runs on, decided by choose_path before it starts.
        self._paths = PathPolicy(settings, exactly_once=flow.exactly_once, flow_name=self.name)
        self._runner: Runner | None = None  # the query's runner, kept after a failure until the next start
        self._backoff = Backoff()
        self._notes = Once()
        self._probe = ClusterProbe(self.name, flow, source_admin, target_admin)
        self._closed = False  # close() was called: never start the query again
        self._lock = threading.Lock()  # the assignment
        # Starting, stopping and restarting the query: the supervisor (the service's main loop),
        # the topic refresh thread and the progress loop all do it.
        self._query_lock = threading.RLock()
        self._restart_at: float | None = None
        self._source_options = spark_source_options(config, flow)
        self._fetch_wait = fetchwait.FetchWait(_cores())  # followed only where fetchwait.adapts says
        # The direct source plans no new batch while this file exists (see MicroBatchRunner.stop).
        self._stop_flag = (Path(tempfile.gettempdir())
                           / f"sparkmirror-{os.getpid()}-{flow.source}-to-{flow.target}.stopping")
        self.paused: dict | None = read_pause(self.checkpoint_dir)  # on disk: replicator.datapath.pause

    @property
    def name(self) -> str:
        return f"{self.flow.source}->{self.flow.target}"

    @property
    def partitions(self) -> int:
        return sum(self.assignment.values())

    @property
    def query(self):
        """The running streaming query, or None."""
        return self._runner.query if self._runner is not None else None

    # -- the data path (pathpolicy) --------------------------------------------------
    @property
    def path(self) -> Choice:
        return self._paths.path

    @property
    def data_path(self) -> str:
        return self._paths.data_path

    @property
    def realtime(self) -> bool:
        return self._paths.realtime

    @property
    def realtime_eligible(self) -> bool:
        return self._paths.realtime_eligible

    @property
    def catching_up_first(self) -> bool:
        """auto: in micro-batches until caught up, then real time."""
        return self._paths.catching_up_first

    @property
    def may_fall_back(self) -> bool:
        """auto leaves real time for micro-batches when real time cannot keep up (catchup.FallBehind)."""
        return self._paths.falls_back and not self._closed

    def choose_path(self, writer_unavailable: str | None, slots_free: int | None = None) -> Choice:
        """Decide (again) which data path the query runs on; ``slots_free``: real-time task slots
        left for this flow (None: not limited here)."""
        choice, changed = self._paths.choose(partitions=self.partitions, writer_unavailable=writer_unavailable,
                                             slots_free=slots_free, backlog=self._backlog_estimate)
        if changed:
            (log.info if self._paths.expected(choice) else log.warning)(
                "flow %s: %s data path: %s", self.name, choice.path, choice.reason)
        return choice

    def _backlog_estimate(self) -> int | None:
        """Records between where the copy resumes (its newest committed batch, else where a stop or
        a path switch left it, else the log start) and the source's end, over the assigned
        partitions; None when the source cannot say."""
        committed = layout.resume_point(self.checkpoint_dir)
        tps = [(t, p) for t, n in sorted(self.assignment.items()) for p in range(n)]
        try:
            marks = watermarks(self.config, self.flow.source, self.flow, tps)
        except Exception as exc:
            log.debug("flow %s: backlog estimate: %s", self.name, exc)
            return None
        backlog = 0
        for (t, p), (low, high) in marks.items():
            at = committed.get(t, {}).get(str(p), low)
            backlog += max(0, high - max(at, low))
        return backlog

    def fall_back(self, backlog: int, copy_rate: float, source_rate: float, seconds: float) -> None:
        """The progress loop saw the real-time query stay behind: catch up in micro-batches, then real
        time again once caught up, but not before a hold that doubles with every fall-back, so a
        source faster than real time can copy does not switch back and forth."""
        if not self.may_fall_back or not self.realtime:
            return
        with self._query_lock:
            if self._closed or self._restart_at is not None or not self.realtime:
                return
            hold = self._paths.fall_back(time.monotonic())
            log.warning("flow %s: real time cannot keep up: %s records behind for %.0f s, copying %s records/s "
                        "while the source adds %s: catching up in micro-batches (more records per second), "
                        "then real time again once caught up, not before %.0f s from now",
                        self.name, f"{backlog:,}", seconds, f"{copy_rate:,.0f}", f"{source_rate:,.0f}", hold)
            self._stop_query()  # the micro-batches start where the real-time writers got to (a checkpoint on a cluster)
            self._start_query()

    def caught_up(self) -> None:
        """The progress loop saw the backlog gone: a flow that caught up in micro-batches goes real time."""
        if self._closed or not self._paths.may_go_real_time(time.monotonic()):
            return  # not catching up, or fell back from real time lately: micro-batches a while longer
        with self._query_lock:
            if self._closed or self._restart_at is not None:
                return
            self._paths.go_real_time()
            log.info("flow %s: caught up: switching to the real-time data path", self.name)
            self._stop_query()  # between micro-batches: the real-time query starts where the last one ended
            self._start_query()

    # -- topics ---------------------------------------------------------------------
    def refresh_topics(self) -> bool:
        """Create/grow mirror topics; True when the query's assignment must change."""
        discovered = self.topics.discover()
        self.topics.ensure(self.topics.plan(discovered))
        with self._lock:
            changed = discovered != self.assignment
            if changed:
                added = sorted(set(discovered) - set(self.assignment))
                grown = sorted(t for t in discovered if t in self.assignment and discovered[t] != self.assignment[t])
                gone = sorted(set(self.assignment) - set(discovered))
                if self.assignment:
                    log.info("flow %s: topic set changed (new: %s, grown: %s, gone: %s)", self.name,
                             added or "-", grown or "-", gone or "-")
                for t in gone:
                    log.warning("flow %s: source topic %s is gone from cluster %s (deleted, or no longer "
                                "matched by the topic filter); it is no longer replicated, its mirror %s on "
                                "%s is kept, the other topics keep flowing", self.name, t, self.flow.source,
                                self._mirror(t), self.flow.target)
                self.assignment = discovered
        return changed

    def _mirror(self, topic: str) -> str:
        return self.flow.policy.format_remote_topic(self.flow.source, topic)

    # -- the query: one runner per start ---------------------------------------------
    def _new_runner(self) -> Runner:
        ctx = RunnerContext(
            name=self.name, config=self.config, flow=self.flow, settings=self.settings, spark=self.spark,
            flow_dir=self.checkpoint_dir, offset_syncs=self.offset_syncs, stats=self.stats, backoff=self._backoff,
            probe=self._probe, notes=self._notes, resume_offsets=self._resume_offsets,
            source_options=self._source_options, target_admin=self.target_admin, copy_tasks=self.copy_tasks,
            stop_flag=self._stop_flag,
            fetch_wait_ms=self.fetch_wait.wait_ms if self.fetch_wait is not None else None)
        if self._paths.path.path == REAL_TIME:
            return RealTimeRunner(ctx, self.assignment)
        # an exactly-once flow's eos_writer needs Spark's Kafka source
        if self.settings.source_mode == "direct" and not self.flow.exactly_once:
            return DirectSourceRunner(ctx, self.assignment)
        return KafkaSourceRunner(ctx, self.assignment)

    def start_query(self) -> None:
        with self._query_lock:
            self._start_query()

    def _start_query(self) -> None:
        if self.paused is not None:
            log.info("flow %s: paused by %s: no query runs until it is resumed", self.name, self.paused.get("by"))
            return
        if not self.assignment:
            log.info("flow %s: no source topic matches yet; waiting for the next topic refresh", self.name)
            return
        self._runner = self._new_runner()
        self._runner.start()

    def stop_query(self) -> None:
        with self._query_lock:
            self._stop_query()

    def _stop_query(self) -> None:
        if self._runner is not None:
            self._runner.stop(self._closed)

    def close(self) -> None:
        """Stop the query for good (the run is stopping): a topic refresh or the supervisor that
        comes after this starts nothing again."""
        with self._query_lock:
            self._closed = True
            self._stop_query()

    def restart_query(self) -> None:
        with self._query_lock:
            if self._closed:
                return
            self._stop_query()
            self._start_query()
            self._restart_at = None

    def copied_offsets(self) -> dict[tuple[str, int], int] | None:
        """Where the copy has got to per source partition (for the catch-up estimate)."""
        runner = self._runner
        return runner.copied_offsets() if runner is not None else None

    # -- supervision ------------------------------------------------------------------
    def check_query(self) -> None:
        """Supervise the query (called every half second by the service).

        A query that failed for a reason a replay can fix (a broker down, a deleted
        topic, a lost Spark task) is restarted from its checkpoint after a backoff,
        once the topic refresh succeeds again (it re-creates a deleted mirror topic
        and drops a deleted source topic); the failed batch was never committed, so
        it is copied again: duplicates, never loss. A permanent write error (a
        record the target rejects) raises a SparkmirrorError and stops the run.
        """
        with self._query_lock:
            if self._restart_at is not None:
                if time.monotonic() >= self._restart_at:
                    self._try_restart()
                return
            runner = self._runner
            q = runner.query if runner is not None else None
            if q is None:
                return
            active = q.isActive
        if active:
            runner.check()  # outside the lock: the probe takes seconds when a cluster is down
            return
        with self._query_lock:
            if runner is not self._runner or q is not runner.query:
                return  # restarted meanwhile by the topic refresh
            exc = q.exception()
            if exc is not None:
                self._failed(runner, failure_message(exc))

    def _failed(self, runner: Runner, msg: str) -> None:
        if kerberos_login_error(msg):
            raise SparkmirrorError(f"flow {self.name} stopped: a Kerberos login of its Spark clients failed: {msg}",
                                   hint="check the keyTab and principal in sasl.jaas.config of this flow's clusters "
                                        "(`kinit -kt KEYTAB PRINCIPAL` says why) and that the keytab holds the "
                                        "principal's current key")
        if is_permanent(msg):
            raise SparkmirrorError(f"flow {self.name} stopped: {msg}",
                                   hint="nothing after this record was committed; fix the cause and restart "
                                        "with the same --checkpoint-dir")
        self.failure = msg
        resume = runner.failed(self._closed)
        delay = self._backoff.delay
        self._restart_at = time.monotonic() + delay
        with self._lock:
            mirrors = [self._mirror(t) for t in self.assignment]
        down = self._probe.waiting(mirrors)
        log.warning("flow %s: the streaming query failed: %s;%s %s in %.0f s", self.name, msg,
                    f" waiting: {', '.join(down)};" if down else "", resume, delay)

    def _try_restart(self) -> None:
        if self._closed:
            return
        try:
            self.refresh_topics()
            self._stop_query()
            self._start_query()
        except Exception as exc:
            delay = self._backoff.grow()
            self._restart_at = time.monotonic() + delay
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            log.warning("flow %s: not restarted yet, waiting for clusters %s and %s (%s); next attempt in %.0f s",
                        self.name, self.flow.source, self.flow.target, text, delay)
            return
        self._restart_at = None
        log.info("flow %s: restarted after the failure (%s)", self.name, self.failure)

    def summary(self) -> str:
        return self.stats.summary(self.name)
