"""The micro-batch data paths: one flow's ``foreachBatch`` query, over the direct source or
over Spark's Kafka source.

``DirectSourceRunner`` reads through the direct source (``source.py``): its tasks mirror
their offset ranges themselves and return where the records landed as runs.
``KafkaSourceRunner`` reads through Spark's Kafka source (``--source kafka``, and every
exactly-once flow) and hands the rows to the Python writer (``writer.py``, or
``eos_writer.py``'s transactions) through Arrow. Either way the driver hands the batch's
runs to the flow's OffsetSyncWriter, which counts them and writes their offset-syncs, and
only then lets Spark commit the batch: a crash before the commit replays the batch,
duplicates, never loss. A stop waits for the running batch to end (the direct source plans
no new one once asked to stop).
"""

from __future__ import annotations

import json
import logging
import time
from functools import partial

from replicator.datapath import checkpoint_layout as layout
from replicator.datapath.catchup import committed_offsets
from replicator.datapath.eos_writer import EOS_RUN_SCHEMA_DDL, EosWriterSpec, progress_group, write_partition_eos
from replicator.datapath.runner import SLOW_BATCH_S, RunnerContext, kafka_source, stop_grace, summarize_spark_error
from replicator.datapath.writer import ERROR_MARKER, RUN_SCHEMA_DDL, WriterSpec, write_partition, writer_producer_config
from replicator.kafkaclients import client_conf
from replicator.metrics import metrics
from replicator.settings import MICRO_BATCH

log = logging.getLogger("sparkmirror.replicate")

RESUME_FROM_CHECKPOINT = "the failed batch was not committed, restarting from the checkpoint"


class MicroBatchRunner:
    """What both micro-batch paths share: the query with its batch handler, the stats a written
    batch adds to, the slow-batch report and the stop between batches. A subclass says where
    the rows come from (``_source``)."""

    path = MICRO_BATCH

    def __init__(self, ctx: RunnerContext, assignment: dict[str, int]) -> None:
        self.ctx = ctx
        self.assignment = dict(assignment)
        self.query = None
        self.stopping = False  # a batch that fails now was abandoned by the stop
        self._handover: dict | None = None  # where the path starts when its checkpoint has no batch
        self._batch_running: tuple[int, float] | None = None  # (batch id, monotonic start)
        self._slow_reported_at = 0.0
        self._last_job_seen = -1

    @property
    def partitions(self) -> int:
        return sum(self.assignment.values())

    def _mirrors(self) -> list[str]:
        return [self.ctx.mirror(t) for t in self.assignment]

    def _source(self, spec: WriterSpec):
        """The streaming DataFrame and the writer its rows go through (None: the source writes)."""
        raise NotImplementedError

    def start(self) -> None:
        ctx = self.ctx
        ctx.stop_flag.unlink(missing_ok=True)
        self._handover = layout.prepare_checkpoint(ctx.flow_dir, MICRO_BATCH, ctx.name)
        df, writer_fn = self._source(self._writer_spec())
        self.query = (
            df.writeStream.queryName(f"sparkmirror {ctx.name}")
            .option("checkpointLocation", str(ctx.flow_dir))
            .foreachBatch(partial(self._on_batch, writer_fn))
            .start()
        )
        metrics().started(ctx.name, self.partitions)
        log.info("flow %s: streaming %d topics (%d partitions) -> %s, checkpoint %s", ctx.name,
                 len(self.assignment), self.partitions, ctx.flow.target, ctx.flow_dir)

    def _starting_offsets(self) -> str:
        """Spark's startingOffsets for a checkpoint without batches: the handover, else where MM2
        or an earlier run left off."""
        if self._handover:
            return layout.starting_offsets_json(self._handover, self.assignment)
        return self.ctx.resume_offsets(self.assignment, self.ctx.flow_dir)

    def _writer_spec(self) -> WriterSpec:
        ctx = self.ctx
        conf = client_conf(ctx.config, ctx.flow.target, "producer", ctx.flow)
        conf.pop("logger", None)  # not picklable; executors log through Spark
        conf.pop("error_cb", None)
        merged, overridden = writer_producer_config(conf, exactly_once=ctx.flow.exactly_once)
        ctx.log_notes(overridden)
        topic_map = tuple((t, ctx.mirror(t)) for t in sorted(self.assignment))
        return WriterSpec(ctx.flow.source, ctx.flow.target, tuple(sorted(merged.items())), topic_map)

    def stop(self, closing: bool) -> None:
        """Prefer stopping between batches: a stop mid-batch abandons the batch (it is replayed
        later, so duplicates) and makes Spark log the interruption as an error. The direct source
        sees the stop flag and plans no new batch, so the running one is the last (Spark's Kafka
        source keeps planning: there the wait is only a grace)."""
        self.stopping = True
        q, self.query = self.query, None
        if q is None:
            return
        self.ctx.stop_flag.touch()
        deadline = time.monotonic() + stop_grace(False, self.ctx.settings.checkpoint_interval(False), local=False)
        while time.monotonic() < deadline:
            try:
                if not q.isActive or not q.status.get("isTriggerActive"):
                    break
            except Exception:
                break
            time.sleep(0.02)
        try:
            q.stop()
        except Exception as exc:  # stopping mid-batch abandons it; it will be replayed
            log.debug("flow %s: stop: %s", self.ctx.name, exc)
        self.ctx.stop_flag.unlink(missing_ok=True)

    def check(self) -> None:
        running = self._batch_running
        if running is not None and time.monotonic() - max(running[1], self._slow_reported_at) >= SLOW_BATCH_S:
            self._slow_reported_at = time.monotonic()
            self.ctx.probe.report_slow_batch(*running, self._mirrors())

    def failed(self, closing: bool) -> str:
        self.query = None
        return RESUME_FROM_CHECKPOINT

    def copied_offsets(self) -> dict[tuple[str, int], int] | None:
        return committed_offsets(self.query)

    # -- one micro-batch (runs on the driver, inside Spark's foreachBatch) ---------------
    def _on_batch(self, writer_fn, df, batch_id: int) -> None:
        try:
            self._write_batch(writer_fn, df, batch_id)
        except Exception as exc:
            # Re-raise with one short line: Spark wraps and pattern-matches the message of a
            # failed foreachBatch, and a multi-page py4j traceback makes that overflow.
            # Raising (never returning) keeps the batch uncommitted: it will be replayed.
            text = str(exc)
            idx = text.find(ERROR_MARKER)
            if idx >= 0:
                raise RuntimeError(text[idx:].splitlines()[0]) from None
            if self.stopping:
                raise RuntimeError("batch abandoned: the query is stopping") from None
            raise RuntimeError(f"batch {batch_id} failed: {(summarize_spark_error(text) or repr(exc))[:500]}") from None

    def _write_batch(self, writer_fn, df, batch_id: int) -> None:
        started = time.monotonic()
        self._batch_running = (batch_id, started)
        try:
            self._write_batch_runs(writer_fn, df, batch_id, started)
        finally:
            self._batch_running = None

    def _write_batch_runs(self, writer_fn, df, batch_id: int, started: float) -> None:
        ctx = self.ctx
        if writer_fn is None:  # direct source: the tasks already mirrored their ranges
            runs = df.toArrow().to_pylist()
        else:
            ddl = EOS_RUN_SCHEMA_DDL if ctx.flow.exactly_once else RUN_SCHEMA_DDL
            runs = df.mapInArrow(writer_fn, ddl).toArrow().to_pylist()
        batch = ctx.offset_syncs.read_runs(runs, batch_id)
        ctx.offset_syncs.send(batch.syncs)
        retried = self._failed_task_attempts()
        if retried:
            log.warning("flow %s batch %d: %d Spark task attempts failed and were retried (a lost Python worker or "
                        "executor); a retried task writes its partition's records again: duplicates, never loss",
                        ctx.name, batch_id, retried)
        self._count(batch_id, batch.records, batch.bytes, batch.max_latency_ms, len(batch.syncs),
                    time.monotonic() - started)

    def _count(self, batch_id: int, records: int, nbytes: int, max_latency: int, syncs: int, duration: float) -> None:
        """Add a written batch to the flow's stats and metrics, and log it."""
        ctx, st = self.ctx, self.ctx.stats
        st.batches += 1
        st.records += records
        st.bytes += nbytes
        st.busy_seconds += duration
        st.offset_syncs += syncs
        st.max_latency_ms = max(st.max_latency_ms, max_latency)
        st.last_batch_at = time.time()
        ctx.backoff.reset()  # a committed batch: the next failure waits briefly again
        st.last = {"batch": batch_id, "records": records, "bytes": nbytes, "seconds": duration,
                   "max_latency_ms": max_latency}
        metrics().batch(ctx.name, records, nbytes, syncs, duration, max_latency, st.last_batch_at)
        if log.isEnabledFor(logging.DEBUG) and self.query is not None:
            # where the previous trigger's time went (Spark's own breakdown): -v shows it
            try:
                last = self.query.lastProgress
                if last:
                    log.debug("flow %s batch %s: Spark trigger durations (ms): %s", ctx.name, last.get("batchId"),
                              json.dumps(last.get("durationMs"), sort_keys=True))
            except Exception:
                pass
        if records:
            log.info("flow %s batch %d: %d records, %.1f MB, %.0f records/s, %.2f s, max source->target latency "
                     "%.2f s, %d offset-syncs", ctx.name, batch_id, records, nbytes / 1e6,
                     records / duration if duration else 0.0, duration, max_latency / 1000, syncs)

    def _failed_task_attempts(self) -> int:
        """Failed task attempts in this batch's Spark jobs (the query's job group), from Spark's status tracker."""
        try:
            sc = self.ctx.spark.sparkContext
            group = sc.getLocalProperty("spark.jobGroup.id")
            if not group:
                return 0
            tracker = sc.statusTracker()
            failed = 0
            newest = self._last_job_seen
            for job_id in tracker.getJobIdsForGroup(group):
                if job_id <= self._last_job_seen:
                    continue
                newest = max(newest, job_id)
                job = tracker.getJobInfo(job_id)
                for stage_id in (job.stageIds if job else ()):
                    stage = tracker.getStageInfo(stage_id)
                    failed += stage.numFailedTasks if stage else 0
            self._last_job_seen = newest
            return failed
        except Exception as exc:  # only a report; never fail a written batch over it
            log.debug("flow %s: task failure count unavailable: %s", self.ctx.name, exc)
            return 0


class DirectSourceRunner(MicroBatchRunner):
    """Micro-batches over the direct source: Spark plans and checkpoints offset ranges; each task
    reads its ranges with confluent-kafka and produces them itself (record bytes never enter the JVM)."""

    def _source(self, spec: WriterSpec):
        from replicator.datapath.source import SourceSpec, make_source_class

        ctx = self.ctx
        conf = client_conf(ctx.config, ctx.flow.source, "consumer", ctx.flow)
        conf.pop("logger", None)
        conf.pop("error_cb", None)
        start = self._starting_offsets()
        starting = () if start == "earliest" else tuple(
            (t, int(p), int(o)) for t, per in sorted(json.loads(start).items()) for p, o in sorted(per.items()))
        admin_conf = client_conf(ctx.config, ctx.flow.source, "admin", ctx.flow)
        admin_conf.pop("logger", None)
        admin_conf.pop("error_cb", None)
        s = ctx.settings
        source = SourceSpec(spec, tuple(sorted((k, str(v)) for k, v in conf.items())),
                            tuple(sorted(self.assignment.items())), starting, s.max_records_per_batch,
                            tasks=max(1, ctx.copy_tasks or ctx.spark.sparkContext.defaultParallelism),
                            admin_config=tuple(sorted((k, str(v)) for k, v in admin_conf.items())),
                            stop_flag=str(ctx.stop_flag), batch_seconds=s.micro_batch_seconds,
                            first_batch_records=s.micro_batch_first_records)
        name = "sparkmirror_" + "".join(c if c.isalnum() else "_" for c in ctx.name)
        ctx.spark.dataSource.register(make_source_class(source, name))
        return ctx.spark.readStream.format(name).load(), None


class KafkaSourceRunner(MicroBatchRunner):
    """Micro-batches over Spark's Kafka source: at least once through ``writer.write_partition``,
    or, for an exactly-once flow, one transaction per source partition and batch (``eos_writer``)."""

    def _source(self, spec: WriterSpec):
        ctx = self.ctx
        assign = {t: list(range(n)) for t, n in self.assignment.items()}
        df = kafka_source(ctx, assign, self._starting_offsets(), max_offsets=ctx.settings.max_records_per_batch)
        if not ctx.flow.exactly_once:
            return df, partial(write_partition, spec)
        return df, partial(write_partition_eos, EosWriterSpec(spec, progress_group(ctx.flow.source, ctx.flow.target)))

    def start(self) -> None:
        super().start()
        flow = self.ctx.flow
        if flow.exactly_once:
            log.info("flow %s: exactly-once (%s): one transaction per source partition and batch, progress in "
                     "consumer group %s on %s; read the mirror topics with isolation.level=read_committed",
                     self.ctx.name, flow.exactly_once_reason(), progress_group(flow.source, flow.target), flow.target)
