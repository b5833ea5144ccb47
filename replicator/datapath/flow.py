"""One enabled flow A->B: its streaming query, its batches and its offset-syncs.

Per micro-batch (``foreachBatch``): the executors write the batch's records with
``write_partition`` and return where they landed as runs; the driver turns the runs
into MM2 offset-syncs (MM2's emission rule, exact downstream offsets from the
delivery reports), sends them together with the pending newest sync of every
partition, and only then lets Spark commit the batch. A crash before the commit
replays the batch: duplicates, never loss.

The source topic set is fixed per query (``assign``): the control plane creates
mirror topics *before* their records can be read, then restarts the query with
the new assignment on the same checkpoint; Spark starts new partitions from the
earliest offset.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from replicator.control.clients import admin, client_conf, producer
from replicator.control.offsetsyncs_reader import spark_starting_offsets
from replicator.control.topics import TopicSync, ensure_internal_topic
from replicator.datapath.progress import metrics
from replicator.datapath.writer import ERROR_MARKER, RUN_SCHEMA_DDL, WriterSpec, write_partition
from replicator.errors import ClusterError, SparkmirrorError
from replicator.model.offsets import OffsetSyncEmitter

log = logging.getLogger("sparkmirror.replicate")

GRACEFUL_STOP_S = 10.0

# librdkafka defaults that suit a mirror writer; anything set in mm2.properties
# (B.producer.*) wins.
WRITER_PRODUCER_DEFAULTS = {
    "enable.idempotence": "true",  # per-partition order survives retries
    "acks": "all",
    "linger.ms": "5",
    "batch.num.messages": "10000",
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": "1048576",
    "message.max.bytes": "4194304",
}


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


class FlowReplicator:
    def __init__(self, config, flow, spark, checkpoint_root: Path, max_records_per_batch: int | None = None):
        self.config = config
        self.flow = flow
        self.spark = spark
        self.checkpoint_dir = Path(checkpoint_root) / f"{flow.source}-to-{flow.target}"
        self.max_records_per_batch = max_records_per_batch
        self.source_admin = admin(config, flow.source, flow)
        self.target_admin = admin(config, flow.target, flow)
        self.topics = TopicSync(flow, self.source_admin, self.target_admin)
        self.emitter = OffsetSyncEmitter(flow.offset_lag_max)
        self.policy = flow.policy
        if flow.offset_syncs_topic_location == "target":
            self.syncs_cluster, self.syncs_topic = flow.target, self.policy.offset_syncs_topic(flow.source)
        else:
            self.syncs_cluster, self.syncs_topic = flow.source, self.policy.offset_syncs_topic(flow.target)
        self.syncs_producer = producer(config, self.syncs_cluster, flow, **{"enable.idempotence": True, "acks": "all", "linger.ms": 0})
        self.assignment: dict[str, int] = {}
        self.query = None
        self.stats = FlowStats()
        self.failure: str | None = None
        self.stopping = False
        self._lock = threading.Lock()
        self._source_options = self._spark_source_options()

    @property
    def name(self) -> str:
        return f"{self.flow.source}->{self.flow.target}"

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
                self.assignment = discovered
        return changed

    def ensure_internal_topics(self) -> None:
        adm = self.source_admin if self.syncs_cluster == self.flow.source else self.target_admin
        ensure_internal_topic(adm, self.syncs_cluster, self.syncs_topic,
                                          self.flow.offset_syncs_topic_replication_factor)

    # -- the streaming query -----------------------------------------------------------
    def _spark_source_options(self) -> dict[str, str]:
        from replicator.model.clients import spark_kafka_options

        opts = spark_kafka_options(self.config.client_config(self.flow.source, "consumer", self.flow),
                                   cluster=self.flow.source)
        # Aborted transactions never reach the target.
        opts["kafka.isolation.level"] = "read_committed"
        return opts

    def _writer_spec(self) -> WriterSpec:
        conf = client_conf(self.config, self.flow.target, "producer", self.flow)
        conf.pop("logger", None)  # not picklable; executors log through Spark
        merged = {**WRITER_PRODUCER_DEFAULTS, **{k: str(v) for k, v in conf.items()}}
        topic_map = tuple((t, self.policy.format_remote_topic(self.flow.source, t)) for t in sorted(self.assignment))
        return WriterSpec(self.flow.source, self.flow.target, tuple(sorted(merged.items())), topic_map)

    def start_query(self) -> None:
        self.stopping = False
        if not self.assignment:
            log.info("flow %s: no source topic matches yet; waiting for the next topic refresh", self.name)
            return
        spec = self._writer_spec()
        assign = json.dumps({t: list(range(n)) for t, n in self.assignment.items()})
        reader = self.spark.readStream.format("kafka")
        for k, v in self._source_options.items():
            reader = reader.option(k, v)
        reader = (
            reader.option("assign", assign)
            # MM2's or an earlier run's progress when there is no Spark checkpoint yet (takeover)
            .option("startingOffsets", spark_starting_offsets(self.config, self.flow, self.assignment,
                                                              self.checkpoint_dir))
            .option("includeHeaders", "true")
            # Spark's data-loss check trips on legitimate offset gaps (compaction,
            # transaction markers); sparkmirror detects loss itself (see monitor).
            .option("failOnDataLoss", "false")
        )
        if self.max_records_per_batch:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_records_per_batch))
        df = reader.load()
        writer_fn = partial(write_partition, spec)
        handler = partial(self._on_batch, writer_fn)
        self.query = (
            df.writeStream.queryName(f"sparkmirror {self.name}")
            .option("checkpointLocation", str(self.checkpoint_dir))
            .foreachBatch(handler)
            .start()
        )
        metrics().partitions.labels(self.name).set(sum(self.assignment.values()))
        log.info("flow %s: streaming %d topics (%d partitions) -> %s, checkpoint %s", self.name,
                 len(self.assignment), sum(self.assignment.values()), self.flow.target, self.checkpoint_dir)

    def stop_query(self) -> None:
        self.stopping = True
        q, self.query = self.query, None
        if q is not None:
            # Prefer stopping between batches: a stop mid-batch abandons the batch (it is
            # replayed later, so duplicates) and makes Spark log the interruption as an error.
            deadline = time.monotonic() + GRACEFUL_STOP_S
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

    def restart_query(self) -> None:
        self.stop_query()
        self.start_query()

    def check_query(self) -> None:
        """Raise a SparkmirrorError if the query died (for example a rejected record)."""
        q = self.query
        if q is None or q.isActive:
            return
        exc = q.exception()
        if exc is None:
            return
        text = str(exc)
        idx = text.find(ERROR_MARKER)
        if idx >= 0:
            msg = text[idx + len(ERROR_MARKER) + 2:].splitlines()[0]
        else:
            msg = text.strip().splitlines()[0] if text.strip() else repr(exc)
        raise SparkmirrorError(f"flow {self.name} stopped: {msg}",
                               hint="nothing after this record was committed; fix the cause and restart with the same --checkpoint-dir")

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
            first = next((l for l in text.splitlines() if l.strip()), repr(exc))
            raise RuntimeError(f"batch {batch_id} failed: {first[:500]}") from None

    def _write_batch(self, writer_fn, df, batch_id: int) -> None:
        started = time.monotonic()
        runs = df.mapInArrow(writer_fn, RUN_SCHEMA_DDL).toArrow().to_pylist()
        runs.sort(key=lambda r: (r["topic"], r["partition"], r["upstream_start"]))
        syncs = []
        records = nbytes = 0
        max_latency = 0
        for r in runs:
            records += r["records"]
            nbytes += r["bytes"]
            max_latency = max(max_latency, r["max_latency_ms"])
            syncs.extend(self.emitter.record_run(r["topic"], r["partition"], r["upstream_start"],
                                                 r["downstream_start"], r["records"]))
        syncs.extend(self.emitter.take_pending())
        self._send_syncs(syncs)
        duration = time.monotonic() - started
        st = self.stats
        st.batches += 1
        st.records += records
        st.bytes += nbytes
        st.busy_seconds += duration
        st.offset_syncs += len(syncs)
        st.max_latency_ms = max(st.max_latency_ms, max_latency)
        st.last_batch_at = time.time()
        st.last = {"batch": batch_id, "records": records, "bytes": nbytes, "seconds": duration,
                   "max_latency_ms": max_latency}
        metrics().batch(self.name, records, nbytes, len(syncs), duration, max_latency, st.last_batch_at)
        if records:
            log.info(
                "flow %s batch %d: %d records, %.1f MB, %.0f records/s, %.2f s, max source->target latency %.2f s, %d offset-syncs",
                self.name, batch_id, records, nbytes / 1e6, records / duration if duration else 0.0, duration,
                max_latency / 1000, len(syncs),
            )

    def _send_syncs(self, syncs) -> None:
        if not syncs:
            return
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)

        for s in syncs:
            while True:
                try:
                    self.syncs_producer.produce(self.syncs_topic, key=s.encode_key(), value=s.encode_value(),
                                                on_delivery=on_delivery)
                    break
                except BufferError:
                    self.syncs_producer.poll(0.1)
        left = self.syncs_producer.flush(60)
        if errors or left:
            raise ClusterError(
                f"writing offset-syncs to {self.syncs_topic} failed: {errors[0] if errors else f'{left} not acknowledged'}",
                cluster=self.syncs_cluster, topic=self.syncs_topic,
            )

    def summary(self) -> str:
        st = self.stats
        elapsed = max(time.time() - st.started_at, 1e-9)
        return (f"flow {self.name}: {st.records} records, {st.bytes / 1e6:.1f} MB in {st.batches} batches, "
                f"{st.records / elapsed:.0f} records/s over {elapsed:.0f} s, max latency {st.max_latency_ms / 1000:.2f} s, "
                f"{st.offset_syncs} offset-syncs")
