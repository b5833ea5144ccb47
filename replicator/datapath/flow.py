"""One enabled flow A->B: its streaming query, started, supervised, restarted and stopped.

The query reads in Spark's real-time mode (the default once caught up), in
micro-batches over the direct source (a backlog first, or a flow that cannot run in
real time), or over Spark's Kafka source (``--source kafka``, exactly-once flows);
``pathpolicy.PathPolicy`` decides. In micro-batches (``foreachBatch``) the executors
write the batch's records and return where they landed as runs; the driver hands
them to the flow's OffsetSyncWriter (replicator.datapath.offsetsyncs_writer), which
counts them and writes their offset-syncs, and only then lets Spark commit the
batch. A crash before the commit replays the batch: duplicates, never loss. In
real-time mode the JVM writer writes the offset-syncs itself and this module only
folds its counters into the stats and metrics. A failed query is restarted from
its checkpoint after a backoff; a slow batch is reported with what it waits for.

The source topic set is fixed per query (``assign``): the control plane creates
mirror topics *before* their records can be read, then restarts the query with
the new assignment on the same checkpoint; new partitions start from their
earliest offset.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from replicator.datapath import checkpoint_layout as layout, realtime
from replicator.datapath.eos_writer import EOS_RUN_SCHEMA_DDL, EosWriterSpec, progress_group, write_partition_eos
from replicator.datapath.isr import short_of_replicas
from replicator.datapath.offsetsyncs_writer import OffsetSyncWriter
from replicator.datapath.pathpolicy import Choice, PathPolicy
from replicator.metrics import metrics
from replicator.settings import REAL_TIME, ReplicatorSettings
from replicator.datapath.writer import ERROR_MARKER, RUN_SCHEMA_DDL, WriterSpec, write_partition, writer_producer_config
from sparkmirror.errors import SparkmirrorError
from replicator.kafkaclients import client_conf, watermarks

log = logging.getLogger("sparkmirror.replicate")

GRACEFUL_STOP_S = 10.0


def stop_grace(real_time: bool, interval: float, local: bool = True) -> float:
    """The longest a clean stop lets a query's running batch finish: GRACEFUL_STOP_S. A real-time
    query in local mode stops at once at its writers' acknowledged positions (its tasks get as
    long to end); on a cluster, where the driver cannot read those, it waits long enough for its
    next checkpoint (every ``interval`` seconds) to come (realtime.stop_wait_seconds)."""
    return realtime.stop_wait_seconds(GRACEFUL_STOP_S, interval) if real_time and not local else GRACEFUL_STOP_S

#: A failed query is restarted from its checkpoint after this many seconds, doubling to the cap.
RESTART_BACKOFF_S = (5.0, 60.0)
#: A batch running longer than this is reported (and again every as long), naming the cluster it waits for.
SLOW_BATCH_S = 20.0
# Write errors that replaying the batch can never fix: the flow stops on them (the
# record is named; nothing after it is committed). Every other failure — a broker
# down, a deleted topic, a lost Spark task — restarts the query from its checkpoint.
PERMANENT_WRITE_ERRORS = ("size too large", "invalid record", "authorization failed", "policy violation",
                          "corrupt", "no target topic known", "invalid timestamp",
                          # the same from the real-time path's Java producer (exception class names)
                          "recordtoolargeexception", "invalidrecordexception", "authorizationexception",
                          "policyviolationexception", "invalidtimestampexception")


def summarize_spark_error(text: str) -> str:
    """One line a person can act on from a py4j/Spark error text (which can run to pages)."""
    stage = re.search(r"Job aborted due to stage failure: (Task \S+ in stage \S+ failed \d+ times)", text)
    cause = None
    for pattern in (r"Python worker exited unexpectedly \(crashed\)[^\n]*", r"(?:KafkaException|KafkaError)[^\n]*",
                    r"^\w*(?:Error|Exception): [^\n]+"):
        found = re.findall(pattern, text, re.M)
        found = [f for f in found if "Traceback" not in f and "Py4J" not in f]
        if found:
            cause = found[-1].strip()
            break
    if stage:
        return f"{stage.group(1)} ({cause})" if cause else stage.group(1)
    if cause:
        return cause
    lines = [l.strip() for l in text.splitlines() if l.strip() and "Traceback" not in l]
    return lines[0] if lines else ""


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


@dataclass
class FlowStats:
    batches: int = 0
    records: int = 0
    bytes: int = 0
    busy_seconds: float = 0.0
    max_latency_ms: int = 0
    offset_syncs: int = 0
    last_batch_at: float | None = None
    started_at: float = field(default_factory=time.time)
    last: dict = field(default_factory=dict)
    rt_seen: tuple = (0, 0, 0)  # the real-time writers' totals (records, bytes, syncs) last folded in
    rt_window: list = field(default_factory=lambda: [0, 0, 0, 0])  # since the last real-time batch boundary


class FlowReplicator:
    """One flow's streaming query, given by the service: the flow's FlowConfig, its clusters'
    admin clients, ``topics`` (discover(), plan(), ensure(): the mirror topics, see
    replicator.control.topics.TopicSync) and ``starting_offsets(assignment, checkpoint_dir)``
    (the Spark ``startingOffsets`` of a query without a checkpoint: where MM2 or an earlier run
    left off). It reports its figures to replicator.metrics."""

    def __init__(self, config, flow, spark, checkpoint_root: Path, settings: ReplicatorSettings, *,
                 source_admin, target_admin, topics, starting_offsets):
        self.config = config
        self.settings = settings
        #: The path the query runs on, decided by choose_path before it starts.
        self._paths = PathPolicy(settings, exactly_once=flow.exactly_once, flow_name=f"{flow.source}->{flow.target}")
        self.copy_tasks: int | None = None  # direct source tasks per batch (default: Spark's parallelism)
        self._counters: realtime.Counters | None = None
        self._started_at: dict[str, dict[str, int]] = {}  # the running query's startingOffsets
        self._handover_start: dict | None = None
        self._last_rt_batch: int | None = None
        self._rt_batch_started = time.monotonic()  # when the running real-time batch began
        self._rt_copied_at = time.monotonic()  # when the real-time writers last reported copied records
        self.source_mode = settings.source_mode
        self.flow = flow
        self.spark = spark
        self.checkpoint_dir = Path(checkpoint_root) / f"{flow.source}-to-{flow.target}"
        self.max_records_per_batch = settings.max_records_per_batch
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.topics = topics
        self._resume_offsets = starting_offsets
        self.policy = flow.policy
        self.offset_syncs = OffsetSyncWriter(config, flow)
        self.assignment: dict[str, int] = {}
        self.query = None
        self.stats = FlowStats()
        self.failure: str | None = None
        self.stopping = False
        self._closed = False  # close() was called: never start the query again
        self._lock = threading.Lock()
        # Starting, stopping and restarting the query: the supervisor (the service's main loop)
        # and the topic refresh thread both do it.
        self._query_lock = threading.RLock()
        self._restart_at: float | None = None
        self._restart_delay = RESTART_BACKOFF_S[0]
        self._batch_running: tuple[int, float] | None = None  # (batch id, monotonic start)
        self._slow_reported_at = 0.0
        self._last_job_seen = -1
        self._source_options = self._spark_source_options()
        # The direct source plans no new batch while this file exists (see _stop_query).
        self._stop_flag = Path(tempfile.gettempdir()) / f"sparkmirror-{os.getpid()}-{flow.source}-to-{flow.target}.stopping"
        self._overrides_logged = False

    @property
    def name(self) -> str:
        return f"{self.flow.source}->{self.flow.target}"

    @property
    def partitions(self) -> int:
        return sum(self.assignment.values())

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

    @property
    def may_fall_back(self) -> bool:
        """auto leaves real time for micro-batches when real time cannot keep up (catchup.FallBehind)."""
        return self._paths.falls_back and not self._closed

    def fall_back(self, backlog: int, copy_rate: float, source_rate: float, seconds: float) -> None:
        """The progress loop saw the real-time query stay behind: catch up in micro-batches, then real
        time again once caught up, but not before a hold that doubles with every fall-back (1 min,
        2 min, ... 16 min), so a source faster than real time can copy does not switch back and forth."""
        if not self.may_fall_back or not self.realtime:
            return
        with self._query_lock:
            if self._closed or self._restart_at is not None or not self.realtime:
                return
            now, hold = time.monotonic(), self._paths.next_hold()
            log.warning("flow %s: real time cannot keep up: %s records behind for %.0f s, copying %s records/s "
                        "while the source adds %s: catching up in micro-batches (more records per second), "
                        "then real time again once caught up, not before %.0f s from now",
                        self.name, f"{backlog:,}", seconds, f"{copy_rate:,.0f}", f"{source_rate:,.0f}", hold)
            self._stop_query()  # the micro-batches start where the real-time writers got to (a checkpoint on a cluster)
            self._paths.fall_back(now)
            self._start_query()

    def caught_up(self) -> None:
        """The progress loop saw the backlog gone: a flow that caught up in micro-batches goes real time."""
        if self._closed or not self._paths.may_go_real_time(time.monotonic()):
            return  # not catching up, or fell back from real time lately: micro-batches a while longer
        with self._query_lock:
            if self._closed or self._restart_at is not None:
                return
            log.info("flow %s: caught up: switching to the real-time data path", self.name)
            self._stop_query()  # between micro-batches: the real-time query starts where the last one ended
            self._paths.go_real_time()
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
                                self.policy.format_remote_topic(self.flow.source, t), self.flow.target)
                self.assignment = discovered
        return changed

    # -- the streaming query -----------------------------------------------------------
    def _spark_source_options(self) -> dict[str, str]:
        from sparkmirror.model.clients import spark_kafka_options

        opts = spark_kafka_options(self.config.client_config(self.flow.source, "consumer", self.flow),
                                   cluster=self.flow.source)
        # Aborted transactions never reach the target.
        opts["kafka.isolation.level"] = "read_committed"
        return opts

    def _writer_spec(self) -> WriterSpec:
        conf = client_conf(self.config, self.flow.target, "producer", self.flow)
        conf.pop("logger", None)  # not picklable; executors log through Spark
        conf.pop("error_cb", None)
        merged, overridden = writer_producer_config(conf, exactly_once=self.flow.exactly_once)
        if overridden and not self._overrides_logged:
            self._overrides_logged = True
            for note in overridden:
                log.warning("flow %s: cluster %s: %s", self.name, self.flow.target, note)
        topic_map = tuple((t, self.policy.format_remote_topic(self.flow.source, t)) for t in sorted(self.assignment))
        return WriterSpec(self.flow.source, self.flow.target, tuple(sorted(merged.items())), topic_map)

    def _writer_fn(self, spec: WriterSpec):
        """At-least-once (write_partition) or, with exactly-once on, eos_writer's transactions."""
        if not self.flow.exactly_once:
            return partial(write_partition, spec)
        return partial(write_partition_eos, EosWriterSpec(spec, progress_group(self.flow.source, self.flow.target)))

    def start_query(self) -> None:
        with self._query_lock:
            self._start_query()

    def _start_query(self) -> None:
        self.stopping = False
        self._stop_flag.unlink(missing_ok=True)
        if not self.assignment:
            log.info("flow %s: no source topic matches yet; waiting for the next topic refresh", self.name)
            return
        path = self.path.path
        self._handover_start = layout.prepare_checkpoint(self.checkpoint_dir, path, self.name)
        if path == REAL_TIME:
            self._start_realtime_query()
            return
        spec = self._writer_spec()
        if self.source_mode == "direct" and not self.flow.exactly_once:  # eos_writer needs Spark's Kafka source
            df = self._direct_source(spec)
            writer_fn = None
        else:
            df = self._spark_kafka_source()
            writer_fn = self._writer_fn(spec)
        handler = partial(self._on_batch, writer_fn)
        self.query = (
            df.writeStream.queryName(f"sparkmirror {self.name}")
            .option("checkpointLocation", str(self.checkpoint_dir))
            .foreachBatch(handler)
            .start()
        )
        metrics().started(self.name, sum(self.assignment.values()))
        log.info("flow %s: streaming %d topics (%d partitions) -> %s, checkpoint %s", self.name,
                 len(self.assignment), sum(self.assignment.values()), self.flow.target, self.checkpoint_dir)
        if self.flow.exactly_once:
            log.info("flow %s: exactly-once (%s): one transaction per source partition and batch, progress in "
                     "consumer group %s on %s; read the mirror topics with isolation.level=read_committed",
                     self.name, self.flow.exactly_once_reason(), progress_group(self.flow.source, self.flow.target),
                     self.flow.target)

    def _start_realtime_query(self) -> None:
        user = dict(self.config.client_config(self.flow.target, "producer", self.flow))
        producer_conf, overridden = realtime.java_producer_config(user)
        if overridden and not self._overrides_logged:
            self._overrides_logged = True
            for note in overridden:
                log.warning("flow %s: cluster %s: %s", self.name, self.flow.target, note)
        syncs_conf = self.offset_syncs.java_producer_config()
        topic_map = {t: self.policy.format_remote_topic(self.flow.source, t) for t in self.assignment}
        try:
            limits = realtime.target_message_limits(self.target_admin,
                                                    sorted(set(topic_map.values())))
        except Exception as exc:  # the broker still rejects what is too large; the writer then says so
            log.warning("flow %s: could not read the target topics' max.message.bytes on %s (%s): records too "
                        "large for them are only found by the broker", self.name, self.flow.target, exc)
            limits = {}
        capped = realtime.cap_batch_size(producer_conf, limits)
        if capped:
            log.warning("flow %s: cluster %s: %s", self.name, self.flow.target, capped)
        ckpt = layout.checkpoint_dir(self.checkpoint_dir, REAL_TIME)
        self._check_realtime_resume(ckpt)
        shards = layout.shard_assignment(self.assignment, self.settings.real_time_shards)
        interval = self.settings.real_time_checkpoint_interval
        relaid = layout.lay_out_shards(self.checkpoint_dir, shards, self._handover_start)
        if relaid is not None:
            self._handover_start = relaid
            log.info("flow %s: its partitions are now dealt over %d real-time %s; each starts where its newest "
                     "committed batch ended", self.name, len(shards), "query" if len(shards) == 1 else "queries")
        if self._handover_start:
            starting = layout.starting_offsets_json(self._handover_start, self.assignment)
        elif all(layout.has_batches(layout.shard_dir(ckpt, i)) for i in range(len(shards))):
            starting = "earliest"  # ignored: every query resumes from its own checkpoint
        else:
            starting = self._resume_offsets(self.assignment, ckpt)
        self._started_at = layout.parse_starting_offsets(starting)
        self._counters = realtime.Counters(self.spark, self.name)
        self._counters.reset()
        self._last_rt_batch = None
        self._rt_batch_started = self._rt_copied_at = time.monotonic()
        queries = []
        began = time.monotonic()
        try:
            for i, shard in enumerate(shards):
                # The queries start apart, so that their checkpoint boundaries (where their tasks
                # pause) keep apart.
                wait = began + i * realtime.stagger_seconds(len(shards), interval) - time.monotonic()
                if i and wait > 0:
                    time.sleep(wait)
                own = layout.shard_dir(ckpt, i)
                df = self._spark_kafka_source(own, shard=shard, real_time=True,
                                              starting=layout.shard_starting_offsets(starting, shard))
                name = f"sparkmirror {self.name}" + (f" [{i + 1}/{len(shards)}]" if len(shards) > 1 else "")
                queries.append(realtime.start_query(
                    self.spark, df, name=name, ckpt=own, flow=self.name, target=self.flow.target,
                    producer_config=producer_conf, syncs_producer_config=syncs_conf,
                    syncs_topic=self.offset_syncs.topic, topic_map=topic_map,
                    offset_lag_max=self.flow.offset_lag_max, trigger=self.settings.real_time_trigger,
                    max_message_bytes=limits))
        except Exception:
            realtime.ShardedQuery(queries).stop()
            raise
        self.query = realtime.ShardedQuery(queries)
        metrics().started(self.name, self.partitions)
        spread = ("" if len(shards) == 1 else
                  f" over {len(shards)} queries started {realtime.stagger_seconds(len(shards), interval):.1f} s apart")
        fetch = realtime.source_options(self._source_options)
        log.info("flow %s: streaming %d topics (%d partitions) -> %s in real time (one task per partition%s, "
                 "checkpoint every %s, source fetches of fetch.min.bytes %s or fetch.max.wait.ms %s), checkpoint %s",
                 self.name, len(self.assignment), self.partitions, self.flow.target, spread, self.settings.real_time_trigger,
                 fetch["kafka.fetch.min.bytes"], fetch["kafka.fetch.max.wait.ms"], ckpt)

    def _check_realtime_resume(self, ckpt: Path) -> None:
        """Move partitions whose resume offset is outside the source log (see layout.adjust_resume)."""
        resume = (layout.committed_offsets(ckpt, real_time=True) if layout.has_batches(ckpt)
                  else self._handover_start)
        if not resume:
            return
        tps = [(t, int(p)) for t, per in resume.items() if t in self.assignment for p in per]
        marks = watermarks(self.config, self.flow.source, self.flow, tps)
        adjusted, losses, resets = layout.adjust_resume(resume, marks)
        for topic, partition, first, last in losses:
            lost = last - first + 1
            log.warning("flow %s: DATA LOSS: %d records of source cluster %s topic %s partition %d (offsets %d..%d) "
                        "were deleted there before they were replicated; copying goes on from offset %d (raise "
                        "retention on the source or replicate faster)", self.name, lost, self.flow.source, topic,
                        partition, first, last, last + 1)
            metrics().lost(self.name, lost)
        for topic, partition, old, new in resets:
            log.warning("flow %s: source cluster %s topic %s partition %d was re-created or truncated: its end offset "
                        "fell below offset %d, which the copy had reached; copying it again from its earliest offset "
                        "%d, as MM2 does", self.name, self.flow.source, topic, partition, old, new)
        if losses or resets:
            layout.restart_from(self.checkpoint_dir, REAL_TIME, adjusted)
            self._handover_start = adjusted

    def _starting_offsets(self, ckpt: Path) -> str:
        if self._handover_start:
            return layout.starting_offsets_json(self._handover_start, self.assignment)
        return self._resume_offsets(self.assignment, ckpt)

    def _direct_source(self, wspec: WriterSpec):
        from replicator.datapath.source import SourceSpec, make_source_class

        conf = client_conf(self.config, self.flow.source, "consumer", self.flow)
        conf.pop("logger", None)
        conf.pop("error_cb", None)
        start = self._starting_offsets(self.checkpoint_dir)
        starting = () if start == "earliest" else tuple(
            (t, int(p), int(o)) for t, per in sorted(json.loads(start).items()) for p, o in sorted(per.items()))
        admin_conf = client_conf(self.config, self.flow.source, "admin", self.flow)
        admin_conf.pop("logger", None)
        admin_conf.pop("error_cb", None)
        spec = SourceSpec(wspec, tuple(sorted((k, str(v)) for k, v in conf.items())),
                          tuple(sorted(self.assignment.items())), starting, self.max_records_per_batch,
                          tasks=max(1, self.copy_tasks or self.spark.sparkContext.defaultParallelism),
                          admin_config=tuple(sorted((k, str(v)) for k, v in admin_conf.items())),
                          stop_flag=str(self._stop_flag), batch_seconds=self.settings.micro_batch_seconds,
                          first_batch_records=self.settings.micro_batch_first_records)
        name = "sparkmirror_" + "".join(c if c.isalnum() else "_" for c in self.name)
        self.spark.dataSource.register(make_source_class(spec, name))
        return self.spark.readStream.format(name).load()

    def _spark_kafka_source(self, ckpt: Path | None = None, shard: dict[str, list[int]] | None = None,
                            starting: str | None = None, real_time: bool = False):
        assign = json.dumps(shard if shard is not None else {t: list(range(n)) for t, n in self.assignment.items()})
        reader = self.spark.readStream.format("kafka")
        if starting is None:
            starting = self._starting_offsets(ckpt or self.checkpoint_dir)
            self._started_at = layout.parse_starting_offsets(starting)
        options = realtime.source_options(self._source_options) if real_time else self._source_options
        for k, v in options.items():
            reader = reader.option(k, v)
        reader = (
            reader.option("assign", assign)
            # MM2's or an earlier run's progress when there is no Spark checkpoint yet (takeover)
            .option("startingOffsets", starting)
            .option("includeHeaders", "true")
            # Spark's data-loss check trips on legitimate offset gaps (compaction,
            # transaction markers); sparkmirror detects loss itself (see monitor).
            .option("failOnDataLoss", "false")
        )
        if self.max_records_per_batch and ckpt is None:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_records_per_batch))
        return reader.load()

    def stop_query(self) -> None:
        with self._query_lock:
            self._stop_query()

    def _stop_query(self) -> None:
        self.stopping = True
        q, self.query = self.query, None
        if q is not None and self.realtime and self._counters is not None and self._counters.available:
            self._stop_realtime_at_acknowledged(q)
        elif q is not None and self.realtime:
            self._stop_realtime_at_boundaries(q)
        elif q is not None:
            # Prefer stopping between batches: a stop mid-batch abandons the batch (it is
            # replayed later, so duplicates) and makes Spark log the interruption as an error.
            # The direct source sees the flag and plans no new batch, so the running one is
            # the last (Spark's Kafka source keeps planning: there the wait is only a grace).
            self._stop_flag.touch()
            deadline = time.monotonic() + stop_grace(False, self.settings.real_time_checkpoint_interval, local=False)
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
                log.debug("flow %s: stop: %s", self.name, exc)
            self._stop_flag.unlink(missing_ok=True)
            if self._counters is not None:
                self._poll_realtime()
                self._counters.reset()

    def _stop_realtime_at_boundaries(self, q) -> None:
        """Stop real-time queries whose writers run elsewhere (a cluster): each right after its
        next checkpoint, so that what the next start copies again is a few milliseconds' worth.

        A real-time query's tasks never end by themselves; each shard's boundary comes at its own
        time, so each is stopped as its batch changes, and those that pass none within the grace
        are stopped where they are (their records since their checkpoint are copied again:
        duplicates, never loss)."""
        from replicator.datapath.spark import quiet_stop_noise, wait_jobs_done

        shards = q.queries
        grace = stop_grace(True, self.settings.real_time_checkpoint_interval, local=False)
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
                        quiet_stop_noise(self.spark, True, self.settings)
                        quieted = True
                    try:
                        sq.stop()
                    except Exception as exc:
                        log.debug("flow %s: stop: %s", self.name, exc)
                else:
                    still.append((sq, batch))
            waiting = still
            if waiting:
                time.sleep(0.02)
        if not late:
            log.info("flow %s: real-time %s stopped right after %s checkpoint", self.name,
                     "query" if len(shards) == 1 else f"queries ({len(shards)})",
                     "its" if len(shards) == 1 else "each one's")
        else:
            log.info("flow %s: %d of %d real-time queries stopped before their next checkpoint (none within %.0f "
                     "s): the records they copied since %s will be copied again on restart (duplicates, never "
                     "loss)", self.name, len(late), len(shards), grace, ", ".join(late))
        # their tasks run to the end of their batch; a new query's start or Spark's stop waits
        deadline = time.monotonic() + self.settings.real_time_checkpoint_interval + 2
        for run_id in run_ids:
            wait_jobs_done(self.spark, run_id, max(0.1, deadline - time.monotonic()))
        if not self._closed:
            quiet_stop_noise(self.spark, False, self.settings)
        if self._counters is not None:
            self._poll_realtime()
            self._counters.reset()

    def _stop_realtime_at_acknowledged(self, q) -> None:
        """Stop a real-time query now and have it resume exactly where the target acknowledged.

        The writers run in this JVM (local mode) and know, from their delivery reports, the offset
        before which every record of each partition is on the target. Once the query's tasks have
        ended and the producers are flushed, that is final: the flow's next start resumes there
        (``layout.restart_from``), so a stop neither waits for a checkpoint nor copies anything
        twice. If the tasks do not end or a flush fails, the query resumes from its checkpoint
        instead (duplicates, never loss).
        """
        from replicator.datapath.spark import quiet_stop_noise

        started = time.monotonic()
        quiet_stop_noise(self.spark, True, self.settings)
        run_ids = _run_ids(q)
        try:
            q.stop()
        except Exception as exc:
            log.debug("flow %s: stop: %s", self.name, exc)
        problem = self._resume_at_acknowledged(run_ids)
        if not self._closed:
            quiet_stop_noise(self.spark, False, self.settings)
        if problem is None:
            log.info("flow %s: real-time query stopped in %.1f s; it resumes where the target acknowledged every "
                     "record, so nothing is copied twice", self.name, time.monotonic() - started)
        else:
            log.info("flow %s: real-time query stopped; %s, so it resumes from its checkpoint: the records copied "
                     "since are copied again (duplicates, never loss)", self.name, problem)
        self._poll_realtime()
        self._counters.reset()

    def _resume_at_acknowledged(self, run_ids: list[str] | None) -> str | None:
        """Once the real-time queries ``run_ids`` (stopped or failed) have no task left, have the
        flow resume at its writers' acknowledged positions; returns why that could not be done, or None."""
        from replicator.datapath.spark import wait_jobs_done

        if not run_ids:
            return "its run id is unknown"
        for run_id in run_ids:
            try:  # a stopped query's real-time tasks would otherwise read on to the end of their batch
                self.spark.sparkContext.cancelJobGroup(run_id)
            except Exception as exc:
                log.debug("flow %s: cancelling the tasks of %s: %s", self.name, run_id, exc)
        deadline = time.monotonic() + GRACEFUL_STOP_S
        for run_id in run_ids:
            if not wait_jobs_done(self.spark, run_id, max(0.1, deadline - time.monotonic())):
                return f"its tasks did not end within {GRACEFUL_STOP_S:.0f} s"
        problem = self._counters.flush_all(GRACEFUL_STOP_S)
        if problem is not None:
            return problem
        ckpt = layout.checkpoint_dir(self.checkpoint_dir, REAL_TIME)
        resume = layout.resume_after_stop(layout.resume_base(ckpt, self._started_at), self._counters.positions())
        layout.restart_from(self.checkpoint_dir, REAL_TIME, resume)
        return None

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
            q = self.query
            if q is None:
                return
            active = q.isActive
            running = self._batch_running
            slow = (active and running is not None
                    and time.monotonic() - max(running[1], self._slow_reported_at) >= SLOW_BATCH_S)
            if slow:
                self._slow_reported_at = time.monotonic()
        if active:
            if slow:  # outside the lock: the probe takes seconds when a cluster is down
                self._report_slow_batch(*running)
            if self.realtime:
                self._poll_realtime()
            return
        with self._query_lock:
            if q is not self.query:
                return  # restarted meanwhile by the topic refresh
            exc = q.exception()
            if exc is None:
                return
            msg = self._failure_message(exc)
            if any(p in msg.lower() for p in PERMANENT_WRITE_ERRORS):
                raise SparkmirrorError(f"flow {self.name} stopped: {msg}",
                                       hint="nothing after this record was committed; fix the cause and restart with the same --checkpoint-dir")
            self.query = None
            self.failure = msg
            if isinstance(q, realtime.ShardedQuery):
                # the other shards still run: stopped now, all restart together from what is copied
                from replicator.datapath.spark import quiet_stop_noise

                quiet_stop_noise(self.spark, True, self.settings)
                q.stop()
                if not self._closed:
                    quiet_stop_noise(self.spark, False, self.settings)
            if self.realtime and self._counters is not None and self._counters.available:
                problem = self._resume_at_acknowledged(_run_ids(q))
                if problem is not None:
                    log.info("flow %s: %s; the restart replays from the checkpoint", self.name, problem)
                resume = ("restarting where the target acknowledged every record" if problem is None
                          else "the failed batch was not committed, restarting from the checkpoint")
            else:
                resume = "the failed batch was not committed, restarting from the checkpoint"
            self._restart_at = time.monotonic() + self._restart_delay
            down = self._unreachable_clusters() or self._short_of_replicas()
            log.warning("flow %s: the streaming query failed: %s;%s %s in %.0f s", self.name, msg,
                        f" waiting: {', '.join(down)};" if down else "", resume, self._restart_delay)

    def _poll_realtime(self) -> None:
        """Fold what the real-time writers copied since the last look into the stats and metrics.

        In local mode the writers share the driver's JVM and report records, bytes, offset-syncs
        and latency every half second; on a cluster only Spark's per-batch progress (input rows)
        reaches the driver.
        """
        c = self._counters
        q = self.query
        if c is None:
            return
        now = time.time()
        st = self.stats
        totals = c.read()
        progress = None
        try:
            progress = q.lastProgress if q is not None else None
        except Exception:
            pass
        batch_id = progress.get("batchId") if progress else None
        new_batch = batch_id is not None and batch_id != self._last_rt_batch
        if totals is not None and totals[0] >= st.rt_seen[0]:
            records, nbytes, syncs = (totals[i] - st.rt_seen[i] for i in range(3))
            st.rt_seen = totals[:3]
            max_latency = totals[3]
        elif new_batch:  # executors in other JVMs: the batch's input rows are what was copied
            records, nbytes, syncs, max_latency = int(progress.get("numInputRows") or 0), 0, 0, 0
        else:
            records = nbytes = syncs = max_latency = 0
        if records or syncs:
            self._rt_copied_at = time.monotonic()
            st.records += records
            st.bytes += nbytes
            st.offset_syncs += syncs
            st.max_latency_ms = max(st.max_latency_ms, max_latency)
            st.last_batch_at = now
            st.rt_window = [w + v for w, v in zip(st.rt_window, (records, nbytes, syncs))] + [max(st.rt_window[3], max_latency)]
            metrics().copied(self.name, records, nbytes, syncs, max_latency, now)
        if new_batch:
            seconds = (progress.get("durationMs") or {}).get("triggerExecution", 0) / 1000
            if self._last_rt_batch is not None:
                st.batches += 1
                metrics().batch_done(self.name, seconds)
                self._restart_delay = RESTART_BACKOFF_S[0]
                r, b, s, lat = st.rt_window
                if r:
                    log.info("flow %s real-time batch %d: %d records, %.1f MB, %.0f records/s over %.1f s, max "
                             "source->target latency %.2f s, %d offset-syncs", self.name, self._last_rt_batch, r,
                             b / 1e6, r / seconds if seconds else 0.0, seconds, lat / 1000, s)
            st.rt_window = [0, 0, 0, 0]
            self._last_rt_batch = batch_id
            self._rt_batch_started = time.monotonic()
        # A real-time batch ends every checkpoint interval once its writers have every record
        # acknowledged: one that runs far longer waits for a cluster; say which, as for micro-batches.
        running_for = time.monotonic() - self._rt_batch_started
        if running_for >= self.settings.real_time_checkpoint_interval + SLOW_BATCH_S \
                and time.monotonic() - self._slow_reported_at >= SLOW_BATCH_S:
            self._slow_reported_at = time.monotonic()
            self._report_slow_batch(0 if self._last_rt_batch is None else self._last_rt_batch + 1,
                                    self._rt_batch_started)
        elif time.monotonic() - max(self._rt_copied_at, self._slow_reported_at) >= SLOW_BATCH_S:
            # Batches keep ending on time while the source is away (the reader finds nothing new):
            # when nothing was copied for a while, look whether a cluster is down and say so.
            self._slow_reported_at = time.monotonic()
            down = self._unreachable_clusters()
            if down:
                log.warning("flow %s: nothing copied for %.0f s, waiting: %s; copying resumes by itself when it "
                            "answers (nothing is skipped)", self.name, time.monotonic() - self._rt_copied_at,
                            "; ".join(down))

    def copied_offsets(self) -> dict[tuple[str, int], int] | None:
        """Where the copy has got to per source partition (for the catch-up estimate)."""
        from replicator.datapath.catchup import committed_offsets

        if self.realtime and self._counters is not None:
            positions = self._counters.positions()
            if positions:
                committed = committed_offsets(self.query) or {}
                committed.update(positions)
                return committed
        return committed_offsets(self.query)

    def _unreachable_clusters(self) -> list[str]:
        down = []
        for alias, adm in ((self.flow.source, self.source_admin), (self.flow.target, self.target_admin)):
            try:
                adm.list_topics(timeout=3)
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                down.append(f"cluster {alias} unreachable ({first})")
        return down

    def _short_of_replicas(self) -> list[str]:
        """Mirror topic partitions on the target that refuse acks=all writes (too few in-sync replicas)."""
        with self._lock:
            mirrors = [self.policy.format_remote_topic(self.flow.source, t) for t in self.assignment]
        return short_of_replicas(self.target_admin, self.flow.target, mirrors)

    def _report_slow_batch(self, batch_id: int, started: float) -> None:
        """Say what a long batch waits for: the writer keeps retrying, the reader keeps fetching."""
        down = self._unreachable_clusters() or self._short_of_replicas()
        what = "; ".join(down) if down else f"clusters {self.flow.source} and {self.flow.target} answer; the batch is slow"
        (log.warning if down else log.info)("flow %s: batch %d running for %.0f s, waiting: %s; its records are retried until delivered or "
                    "the batch fails and is replayed (nothing is skipped)", self.name, batch_id,
                    time.monotonic() - started, what)

    def _try_restart(self) -> None:
        if self._closed:
            return
        try:
            self.refresh_topics()
            self._stop_query()
            self._start_query()
        except Exception as exc:
            self._restart_delay = min(self._restart_delay * 2, RESTART_BACKOFF_S[1])
            self._restart_at = time.monotonic() + self._restart_delay
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            log.warning("flow %s: not restarted yet, waiting for clusters %s and %s (%s); next attempt in %.0f s",
                        self.name, self.flow.source, self.flow.target, text, self._restart_delay)
            return
        self._restart_at = None
        log.info("flow %s: restarted after the failure (%s)", self.name, self.failure)

    @staticmethod
    def _failure_message(exc) -> str:
        text = str(exc)
        idx = text.find(ERROR_MARKER)
        if idx >= 0:
            return text[idx + len(ERROR_MARKER) + 2:].splitlines()[0]
        own = re.search(r"batch \d+ failed: [^\n]*", text)
        if own:
            return own.group(0)
        return summarize_spark_error(text) or repr(exc)

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
        if writer_fn is None:  # direct source: the tasks already mirrored their ranges
            runs = df.toArrow().to_pylist()
        else:
            ddl = EOS_RUN_SCHEMA_DDL if self.flow.exactly_once else RUN_SCHEMA_DDL
            runs = df.mapInArrow(writer_fn, ddl).toArrow().to_pylist()
        batch = self.offset_syncs.read_runs(runs, batch_id)
        self.offset_syncs.send(batch.syncs)
        records, nbytes, max_latency, syncs = batch.records, batch.bytes, batch.max_latency_ms, batch.syncs
        retried = self._failed_task_attempts()
        if retried:
            log.warning("flow %s batch %d: %d Spark task attempts failed and were retried (a lost Python worker or "
                        "executor); a retried task writes its partition's records again: duplicates, never loss",
                        self.name, batch_id, retried)
        duration = time.monotonic() - started
        st = self.stats
        st.batches += 1
        st.records += records
        st.bytes += nbytes
        st.busy_seconds += duration
        st.offset_syncs += len(syncs)
        st.max_latency_ms = max(st.max_latency_ms, max_latency)
        st.last_batch_at = time.time()
        self._restart_delay = RESTART_BACKOFF_S[0]  # a committed batch: the next failure waits briefly again
        st.last = {"batch": batch_id, "records": records, "bytes": nbytes, "seconds": duration,
                   "max_latency_ms": max_latency}
        metrics().batch(self.name, records, nbytes, len(syncs), duration, max_latency, st.last_batch_at)
        if log.isEnabledFor(logging.DEBUG) and self.query is not None:
            # where the previous trigger's time went (Spark's own breakdown): -v shows it
            try:
                last = self.query.lastProgress
                if last:
                    log.debug("flow %s batch %s: Spark trigger durations (ms): %s", self.name, last.get("batchId"),
                              json.dumps(last.get("durationMs"), sort_keys=True))
            except Exception:
                pass
        if records:
            log.info(
                "flow %s batch %d: %d records, %.1f MB, %.0f records/s, %.2f s, max source->target latency %.2f s, %d offset-syncs",
                self.name, batch_id, records, nbytes / 1e6, records / duration if duration else 0.0, duration,
                max_latency / 1000, len(syncs),
            )

    def _failed_task_attempts(self) -> int:
        """Failed task attempts in this batch's Spark jobs (the query's job group), from Spark's status tracker."""
        try:
            sc = self.spark.sparkContext
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
            log.debug("flow %s: task failure count unavailable: %s", self.name, exc)
            return 0

    def summary(self) -> str:
        st = self.stats
        elapsed = max(time.time() - st.started_at, 1e-9)
        return (f"flow {self.name}: {st.records} records, {st.bytes / 1e6:.1f} MB in {st.batches} batches, "
                f"{st.records / elapsed:.0f} records/s over {elapsed:.0f} s, max latency {st.max_latency_ms / 1000:.2f} s, "
                f"{st.offset_syncs} offset-syncs")
