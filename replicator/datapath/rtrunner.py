"""The real-time data path's runner: one flow's partitions over one or more real-time queries.

``RealTimeRunner`` deals the flow's partitions over ``--real-time-shards`` queries (one Spark
checkpoint each, see checkpoint_layout), starts them apart so their checkpoint boundaries
keep apart, and stops them with as little copied twice as the deployment allows: in local mode
the writers share the driver's JVM, so a stop ends the tasks, flushes the producers and has the
next start resume exactly where the target acknowledged every record, and every few seconds
those positions are written beside the checkpoint, so a kill -9 copies again only seconds' worth
(checkpoint_layout.write_journal); on a cluster each query is stopped right after its next
checkpoint. ``RealTimeProgress`` folds what the writers copied into the flow's stats and
metrics and reports a batch that waits for a cluster.
"""

from __future__ import annotations

import logging
import threading
import time

from replicator.datapath import checkpoint_layout as layout, realtime
from replicator.datapath.catchup import committed_offsets
from replicator.datapath.runner import (GRACEFUL_STOP_S, SLOW_BATCH_S, RunnerContext, kafka_source, local_mode,
                                        stop_grace)
from replicator.kafkaclients import watermarks
from replicator.metrics import metrics
from replicator.settings import ACKNOWLEDGED_JOURNAL_S, REAL_TIME

log = logging.getLogger("sparkmirror.replicate")


def _run_ids(query: realtime.ShardedQuery) -> list[str] | None:
    """The run ids (Spark job groups) of a flow's real-time queries; None when the JVM cannot say."""
    try:
        return query.run_ids
    except Exception:
        return None


def _progress_batch(query) -> int | None:
    try:
        progress = query.lastProgress
    except Exception:
        return None
    return progress.get("batchId") if progress else None


def checkpoint_interval(ctx: RunnerContext) -> float:
    """The flow's real-time checkpoint interval: its setting, else the default of local mode or
    of a cluster (replicator.settings)."""
    return ctx.settings.checkpoint_interval(local_mode(ctx.spark))


#: How often the progress line comes in local mode, where the writers' counters are read every
#: half second: independent of the checkpoint interval, which may be a minute.
PROGRESS_S = 10.0


class RealTimeProgress:
    """What the real-time writers copied since the last look, folded into the flow's stats and metrics.

    In local mode the writers share the driver's JVM and report records, bytes, offset-syncs
    and latency every half second, and a progress line comes every PROGRESS_S however long the
    checkpoint interval (or with each batch, when batches are shorter); on a cluster only Spark's
    per-batch progress (input rows) reaches the driver, so the line comes at each batch's end. A batch ends every checkpoint interval once
    its writers have every record acknowledged; one that runs far longer, or a copy that stops,
    is reported with what it waits for.
    """

    def __init__(self, ctx: RunnerContext, counters: realtime.Counters, mirrors: list[str]) -> None:
        self.ctx, self.counters, self.mirrors = ctx, counters, mirrors
        self.interval = checkpoint_interval(ctx)
        self._slow_reported_at = 0.0
        self._lock = threading.Lock()  # the supervisor and a stop both fold
        self.begin()

    def begin(self) -> None:
        """The queries start now: no batch seen yet."""
        self.last_batch: int | None = None
        # the running batch began; records last copied; the window of the next progress line began
        self.batch_started = self.copied_at = self.window_started = time.monotonic()

    def poll(self, query) -> None:
        with self._lock:
            progress = None
            try:
                progress = query.lastProgress if query is not None else None
            except Exception:
                pass
            batch_id = progress.get("batchId") if progress else None
            new_batch = batch_id is not None and batch_id != self.last_batch
            self._fold(progress if new_batch else None)
            if new_batch:
                self._batch_ended(batch_id, progress)
            elif self.counters.available and time.monotonic() - self.window_started >= PROGRESS_S:
                self._report(time.monotonic() - self.window_started)
        self._watch()

    def _fold(self, new_batch_progress) -> None:
        st = self.ctx.stats
        totals = self.counters.read()
        if totals is not None and totals[0] >= st.rt_seen[0]:
            records, nbytes, syncs = (totals[i] - st.rt_seen[i] for i in range(3))
            st.rt_seen = totals[:3]
            max_latency = totals[3]
        elif new_batch_progress is not None:  # executors in other JVMs: the batch's input rows are what was copied
            records, nbytes, syncs, max_latency = int(new_batch_progress.get("numInputRows") or 0), 0, 0, 0
        else:
            records = nbytes = syncs = max_latency = 0
        if records or syncs:
            now = time.time()
            self.copied_at = time.monotonic()
            st.records += records
            st.bytes += nbytes
            st.offset_syncs += syncs
            st.max_latency_ms = max(st.max_latency_ms, max_latency)
            st.last_batch_at = now
            st.rt_window = ([w + v for w, v in zip(st.rt_window, (records, nbytes, syncs))]
                            + [max(st.rt_window[3], max_latency)])
            metrics().copied(self.ctx.name, records, nbytes, syncs, max_latency, now)

    def _batch_ended(self, batch_id: int, progress: dict) -> None:
        st, name = self.ctx.stats, self.ctx.name
        seconds = (progress.get("durationMs") or {}).get("triggerExecution", 0) / 1000
        if self.last_batch is not None:
            st.batches += 1
            metrics().batch_done(name, seconds)
            self.ctx.backoff.reset()
            if self.counters.available and self.interval > PROGRESS_S:  # the counters' lines come between
                log.info("flow %s real-time batch %d checkpointed after %.1f s", name, self.last_batch, seconds)
            else:
                self._report(seconds, f" batch {self.last_batch}")
        st.rt_window = [0, 0, 0, 0]
        self.window_started = time.monotonic()
        self.last_batch = batch_id
        self.batch_started = time.monotonic()

    def _report(self, seconds: float, batch: str = "") -> None:
        """The progress line of what was copied since the last one (nothing when nothing was)."""
        st = self.ctx.stats
        r, b, s, lat = st.rt_window
        if r:
            log.info("flow %s real-time%s: %d records, %.1f MB, %.0f records/s over %.1f s, max source->target "
                     "latency %.2f s, %d offset-syncs", self.ctx.name, batch, r, b / 1e6,
                     r / seconds if seconds else 0.0, seconds, lat / 1000, s)
        st.rt_window = [0, 0, 0, 0]
        self.window_started = time.monotonic()

    def _watch(self) -> None:
        """Say what a batch waits for when it runs far past its checkpoint interval, as for
        micro-batches; and, since batches keep ending on time while the source is away (the reader
        finds nothing new), look whether a cluster is down when nothing was copied for a while."""
        now = time.monotonic()
        if now - self.batch_started >= self.interval + SLOW_BATCH_S \
                and now - self._slow_reported_at >= SLOW_BATCH_S:
            self._slow_reported_at = now
            self.ctx.probe.report_slow_batch(0 if self.last_batch is None else self.last_batch + 1,
                                             self.batch_started, self.mirrors)
        elif now - max(self.copied_at, self._slow_reported_at) >= SLOW_BATCH_S:
            self._slow_reported_at = now
            down = self.ctx.probe.unreachable()
            if down:
                log.warning("flow %s: nothing copied for %.0f s, waiting: %s; copying resumes by itself when it "
                            "answers (nothing is skipped)", self.ctx.name, time.monotonic() - self.copied_at,
                            "; ".join(down))


class RealTimeRunner:
    """One flow's real-time queries, one per shard, started and stopped together."""

    path = REAL_TIME

    def __init__(self, ctx: RunnerContext, assignment: dict[str, int]) -> None:
        self.ctx = ctx
        self.assignment = dict(assignment)
        self.query: realtime.ShardedQuery | None = None
        self.ckpt = layout.checkpoint_dir(ctx.flow_dir, REAL_TIME)
        self._handover: dict | None = None  # where the queries start instead of their checkpoints
        self._started_at: dict[str, dict[str, int]] = {}  # the queries' startingOffsets
        self.counters = realtime.Counters(ctx.spark, ctx.name)
        self.interval = checkpoint_interval(ctx)
        self.progress = RealTimeProgress(ctx, self.counters, [ctx.mirror(t) for t in self.assignment])
        # the journal is written beside the running query only: a stop takes the query under it
        self._journal_lock = threading.Lock()
        self._journaled: dict[tuple[str, int], int] = {}
        self._journaled_at = 0.0

    @property
    def partitions(self) -> int:
        return sum(self.assignment.values())

    def start(self) -> None:
        ctx = self.ctx
        self._handover = layout.prepare_checkpoint(ctx.flow_dir, REAL_TIME, ctx.name)
        writer = self._writer_settings()
        self._check_resume()
        shards = layout.shard_assignment(self.assignment, ctx.settings.real_time_shards)
        relaid = layout.lay_out_shards(ctx.flow_dir, shards, self._handover)
        if relaid is not None:
            self._handover = relaid
            log.info("flow %s: its partitions are now dealt over %d real-time %s; each starts where its newest "
                     "committed batch ended", ctx.name, len(shards), "query" if len(shards) == 1 else "queries")
        if self._handover:
            starting = layout.starting_offsets_json(self._handover, self.assignment)
        elif all(layout.has_batches(layout.shard_dir(self.ckpt, i)) for i in range(len(shards))):
            starting = "earliest"  # ignored: every query resumes from its own checkpoint
        else:
            starting = ctx.resume_offsets(self.assignment, self.ckpt)
        self._started_at = layout.parse_starting_offsets(starting)
        self.counters.reset()
        self._journaled, self._journaled_at = {}, time.monotonic()
        self.progress.begin()
        self.query = self._start_shards(shards, starting, writer)
        metrics().started(ctx.name, self.partitions)
        interval = self.interval
        spread = ("" if len(shards) == 1 else
                  f" over {len(shards)} queries started {realtime.stagger_seconds(len(shards), interval):.1f} s apart")
        fetch = realtime.source_options(ctx.source_options, ctx.fetch_wait_ms)
        log.info("flow %s: streaming %d topics (%d partitions) -> %s in real time (one task per partition%s, "
                 "checkpoint every %s, source fetches of fetch.min.bytes %s or fetch.max.wait.ms %s), checkpoint %s",
                 ctx.name, len(self.assignment), self.partitions, ctx.flow.target, spread,
                 f"{interval:g} seconds", fetch["kafka.fetch.min.bytes"], fetch["kafka.fetch.max.wait.ms"],
                 self.ckpt)

    def _writer_settings(self) -> dict:
        """The JVM writer's settings: the target producer's, the offset-syncs producer's, the mirror
        topics and their record size limits."""
        ctx = self.ctx
        user = dict(ctx.config.client_config(ctx.flow.target, "producer", ctx.flow))
        producer_conf, overridden = realtime.java_producer_config(user)
        ctx.log_notes(overridden)
        topic_map = {t: ctx.mirror(t) for t in self.assignment}
        try:
            limits = realtime.target_message_limits(ctx.target_admin, sorted(set(topic_map.values())))
        except Exception as exc:  # the broker still rejects what is too large; the writer then says so
            log.warning("flow %s: could not read the target topics' max.message.bytes on %s (%s): records too "
                        "large for them are only found by the broker", ctx.name, ctx.flow.target, exc)
            limits = {}
        capped = realtime.cap_batch_size(producer_conf, limits)
        if capped:
            log.warning("flow %s: cluster %s: %s", ctx.name, ctx.flow.target, capped)
        return dict(target=ctx.flow.target, producer_config=producer_conf,
                    syncs_producer_config=ctx.offset_syncs.java_producer_config(), syncs_topic=ctx.offset_syncs.topic,
                    topic_map=topic_map, offset_lag_max=ctx.flow.offset_lag_max,
                    trigger=f"{self.interval:g} seconds", max_message_bytes=limits)

    def _start_shards(self, shards: list[dict[str, list[int]]], starting: str, writer: dict) -> realtime.ShardedQuery:
        ctx = self.ctx
        stagger = realtime.stagger_seconds(len(shards), self.interval)
        queries = []
        began = time.monotonic()
        try:
            for i, shard in enumerate(shards):
                # The queries start apart, so that their checkpoint boundaries (where their tasks
                # pause) keep apart.
                wait = began + i * stagger - time.monotonic()
                if i and wait > 0:
                    time.sleep(wait)
                own = layout.shard_dir(self.ckpt, i)
                df = kafka_source(ctx, shard, layout.shard_starting_offsets(starting, shard), real_time=True)
                name = f"sparkmirror {ctx.name}" + (f" [{i + 1}/{len(shards)}]" if len(shards) > 1 else "")
                queries.append(realtime.start_query(ctx.spark, df, name=name, ckpt=own, flow=ctx.name, **writer))
        except Exception:
            realtime.ShardedQuery(queries).stop()
            raise
        return realtime.ShardedQuery(queries)

    def _check_resume(self) -> None:
        """Move partitions whose resume offset is outside the source log (see checkpoint_layout.adjust_resume)."""
        ctx = self.ctx
        resume = (layout.committed_offsets(self.ckpt, real_time=True) if layout.has_batches(self.ckpt)
                  else self._handover)
        if not resume:
            return
        tps = [(t, int(p)) for t, per in resume.items() if t in self.assignment for p in per]
        marks = watermarks(ctx.config, ctx.flow.source, ctx.flow, tps)
        adjusted, losses, resets = layout.adjust_resume(resume, marks)
        for topic, partition, first, last in losses:
            lost = last - first + 1
            log.warning("flow %s: DATA LOSS: %d records of source cluster %s topic %s partition %d (offsets %d..%d) "
                        "were deleted there before they were replicated; copying goes on from offset %d (raise "
                        "retention on the source or replicate faster)", ctx.name, lost, ctx.flow.source, topic,
                        partition, first, last, last + 1)
            metrics().lost(ctx.name, lost)
        for topic, partition, old, new in resets:
            log.warning("flow %s: source cluster %s topic %s partition %d was re-created or truncated: its end offset "
                        "fell below offset %d, which the copy had reached; copying it again from its earliest offset "
                        "%d, as MM2 does", ctx.name, ctx.flow.source, topic, partition, old, new)
        if losses or resets:
            layout.restart_from(ctx.flow_dir, REAL_TIME, adjusted)
            self._handover = adjusted

    def check(self) -> None:
        self.progress.poll(self.query)
        self._journal()

    def _journal(self) -> None:
        """Every ACKNOWLEDGED_JOURNAL_S, write the writers' acknowledged positions beside the
        running query's checkpoint (local mode), for a start after a kill -9 to resume there."""
        if not self.counters.available or time.monotonic() - self._journaled_at < ACKNOWLEDGED_JOURNAL_S:
            return
        with self._journal_lock:
            if self.query is None:
                return
            self._journaled_at = time.monotonic()
            positions = self.counters.positions()
            if positions and positions != self._journaled \
                    and layout.write_journal(self.ckpt, positions, self._started_at):
                self._journaled = positions

    def copied_offsets(self) -> dict[tuple[str, int], int] | None:
        positions = self.counters.positions()
        if positions:
            committed = committed_offsets(self.query) or {}
            committed.update(positions)
            return committed
        return committed_offsets(self.query)

    def stop(self, closing: bool) -> None:
        with self._journal_lock:
            q, self.query = self.query, None
        if q is None:
            return
        if self.counters.available:
            self._stop_at_acknowledged(q, closing)
        else:
            self._stop_at_boundaries(q, closing)
        self.progress.poll(None)
        self.counters.reset()

    def failed(self, closing: bool) -> str:
        """The other shards still run: stopped now, all restart together from what is copied."""
        from replicator.datapath.spark import quiet_stop_noise

        with self._journal_lock:
            q, self.query = self.query, None
        quiet_stop_noise(self.ctx.spark, True, self.ctx.settings)
        q.stop()
        if not closing:
            quiet_stop_noise(self.ctx.spark, False, self.ctx.settings)
        if not self.counters.available:
            return "the failed batch was not committed, restarting from the checkpoint"
        problem = self._resume_at_acknowledged(_run_ids(q))
        if problem is not None:
            log.info("flow %s: %s; the restart replays from the checkpoint, or from the newer positions its journal "
                     "says the target acknowledged", self.ctx.name, problem)
            return "the failed batch was not committed, restarting from the checkpoint"
        return "restarting where the target acknowledged every record"

    def _stop_at_boundaries(self, q: realtime.ShardedQuery, closing: bool) -> None:
        """Stop real-time queries whose writers run elsewhere (a cluster): each right after its
        next checkpoint, so that what the next start copies again is a few milliseconds' worth.

        A real-time query's tasks never end by themselves; each shard's boundary comes at its own
        time, so each is stopped as its batch changes, and those that pass none within the grace
        are stopped where they are (their records since their checkpoint are copied again:
        duplicates, never loss)."""
        from replicator.datapath.spark import quiet_stop_noise, wait_jobs_done

        ctx = self.ctx
        shards = q.queries
        grace = stop_grace(True, self.interval, local=False)
        deadline = time.monotonic() + grace
        waiting = [(sq, _progress_batch(sq)) for sq in shards]
        run_ids = _run_ids(q) or []
        quieted = False
        late = []
        while waiting:
            still = []
            for sq, batch in waiting:
                try:
                    passed = not sq.isActive or _progress_batch(sq) != batch
                except Exception:
                    passed = True
                if passed or time.monotonic() >= deadline:
                    if not passed:
                        late.append("its start" if batch is None else f"batch {batch}")
                    if not quieted:  # a stopped query's tasks end with errors Spark logs; expected here
                        quiet_stop_noise(ctx.spark, True, ctx.settings)
                        quieted = True
                    try:
                        sq.stop()
                    except Exception as exc:
                        log.debug("flow %s: stop: %s", ctx.name, exc)
                else:
                    still.append((sq, batch))
            waiting = still
            if waiting:
                time.sleep(0.02)
        if not late:
            log.info("flow %s: real-time %s stopped right after %s checkpoint", ctx.name,
                     "query" if len(shards) == 1 else f"queries ({len(shards)})",
                     "its" if len(shards) == 1 else "each one's")
        else:
            log.info("flow %s: %d of %d real-time queries stopped before their next checkpoint (none within %.0f "
                     "s): the records they copied since %s will be copied again on restart (duplicates, never "
                     "loss)", ctx.name, len(late), len(shards), grace, ", ".join(late))
        # their tasks run to the end of their batch; a new query's start or Spark's stop waits
        deadline = time.monotonic() + self.interval + 2
        for run_id in run_ids:
            wait_jobs_done(ctx.spark, run_id, max(0.1, deadline - time.monotonic()))
        if not closing:
            quiet_stop_noise(ctx.spark, False, ctx.settings)

    def _stop_at_acknowledged(self, q: realtime.ShardedQuery, closing: bool) -> None:
        """Stop a real-time query now and have it resume exactly where the target acknowledged.

        The writers run in this JVM (local mode) and know, from their delivery reports, the offset
        before which every record of each partition is on the target. Once the query's tasks have
        ended and the producers are flushed, that is final: the flow's next start resumes there
        (``checkpoint_layout.restart_from``), so a stop neither waits for a checkpoint nor copies
        anything twice. If the tasks do not end or a flush fails, the query resumes from its
        checkpoint instead (duplicates, never loss).
        """
        from replicator.datapath.spark import quiet_stop_noise

        ctx = self.ctx
        started = time.monotonic()
        quiet_stop_noise(ctx.spark, True, ctx.settings)
        run_ids = _run_ids(q)
        try:
            q.stop()
        except Exception as exc:
            log.debug("flow %s: stop: %s", ctx.name, exc)
        problem = self._resume_at_acknowledged(run_ids)
        if not closing:
            quiet_stop_noise(ctx.spark, False, ctx.settings)
        if problem is None:
            log.info("flow %s: real-time query stopped in %.1f s; it resumes where the target acknowledged every "
                     "record, so nothing is copied twice", ctx.name, time.monotonic() - started)
        else:
            log.info("flow %s: real-time query stopped; %s, so it resumes from its checkpoint: the records copied "
                     "since are copied again (duplicates, never loss)", ctx.name, problem)

    def _resume_at_acknowledged(self, run_ids: list[str] | None) -> str | None:
        """Once the real-time queries ``run_ids`` (stopped or failed) have no task left, have the
        flow resume at its writers' acknowledged positions; returns why that could not be done, or None."""
        from replicator.datapath.spark import wait_jobs_done

        spark = self.ctx.spark
        if not run_ids:
            return "its run id is unknown"
        for run_id in run_ids:
            try:  # a stopped query's real-time tasks would otherwise read on to the end of their batch
                spark.sparkContext.cancelJobGroup(run_id)
            except Exception as exc:
                log.debug("flow %s: cancelling the tasks of %s: %s", self.ctx.name, run_id, exc)
        deadline = time.monotonic() + GRACEFUL_STOP_S
        for run_id in run_ids:
            if not wait_jobs_done(spark, run_id, max(0.1, deadline - time.monotonic())):
                return f"its tasks did not end within {GRACEFUL_STOP_S:.0f} s"
        problem = self.counters.flush_all(GRACEFUL_STOP_S)
        if problem is not None:
            return problem
        resume = layout.resume_after_stop(layout.resume_base(self.ckpt, self._started_at), self.counters.positions())
        layout.restart_from(self.ctx.flow_dir, REAL_TIME, resume)
        return None
