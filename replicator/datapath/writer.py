"""The executor side of the micro-batch data paths: write records to the target.

The direct source's tasks (``source.py``) produce the records they read through
this module's producer and placement tracking; with ``--source kafka``,
``write_partition`` is the ``mapInArrow`` body over Spark's Kafka source, which
gives one Spark partition per Kafka topic-partition, rows in offset order. Every
record goes with confluent-kafka to the renamed topic, same partition, same key,
value, headers (order and repeats kept) and the same timestamp, and
``_Placements`` learns from the delivery reports where each record landed. The
writer returns those placements as *runs* — stretches where both the
upstream and the downstream offsets are consecutive — so a contiguous batch of a
million records comes back to the driver as one row, and the driver derives the
exact MM2 offset-syncs from them.

Every record carries its own identity into its delivery callback (as Connect's
per-record callback does), so a record's downstream offset is paired with its own
upstream offset whatever order the reports arrive in. And the producer never
reorders a partition's records: ``writer_producer_config`` keeps one request in
flight when the user switches idempotence off.

Any delivery error stops the batch with an error naming cluster, topic,
partition and offset: a record is never skipped. The batch is then not committed
and will be replayed (at-least-once).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import pyarrow as pa

ERROR_MARKER = "SPARKMIRROR_WRITE_ERROR"
METADATA_WAIT_S = 60.0
POLL_EVERY = 256  # serve delivery reports every N records, not after each one
FLUSH_TIMEOUT_S = 300.0
_MSG_SIZE_TOO_LARGE = 10  # KafkaError.MSG_SIZE_TOO_LARGE (broker error code)

RUN_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("upstream_start", pa.int64()),
        ("downstream_start", pa.int64()),
        ("records", pa.int64()),
        ("bytes", pa.int64()),
        ("max_latency_ms", pa.int64()),
        ("min_timestamp_ms", pa.int64()),
    ]
)
RUN_SCHEMA_DDL = (
    "topic string, partition int, upstream_start long, downstream_start long, records long, "
    "bytes long, max_latency_ms long, min_timestamp_ms long"
)

# librdkafka defaults that suit a mirror writer; anything set in mm2.properties
# (B.producer.*) wins, except what writer_producer_config must fix.
WRITER_PRODUCER_DEFAULTS = {
    "enable.idempotence": "true",  # per-partition order survives retries
    "acks": "all",
    "linger.ms": "5",
    "batch.num.messages": "10000",
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": "1048576",
    "message.max.bytes": "4194304",
    # Executors have no Python logger for librdkafka: unreachable brokers would print a
    # line per reconnect attempt. The driver reports what a slow batch waits for instead,
    # and every delivery error still fails the batch with its cause.
    "log_level": "2",
}


def writer_producer_config(user: Mapping[str, object], exactly_once: bool = False) -> tuple[dict[str, str], list[str]]:
    """The target producer's librdkafka settings and a sentence for each user setting overridden.

    The defaults above, then the user's (translated) B.producer.* settings, then what
    order needs whatever the user said. Without idempotence, librdkafka keeps up to
    five requests in flight and retries: a failed request retried after a later one
    lands behind it and reorders the partition on the target. So with idempotence off
    one request is kept in flight (max.in.flight.requests.per.connection = 1, what
    Kafka Connect sets for MM2); exactly-once transactions need idempotence on.
    """
    conf = {**WRITER_PRODUCER_DEFAULTS, **{k: str(v) for k, v in user.items()}}
    notes = []
    if conf["enable.idempotence"].strip().lower() != "false":
        return conf, notes
    if exactly_once:
        conf["enable.idempotence"] = "true"
        notes.append("producer setting enable.idempotence = false is overridden with true: exactly-once "
                     "transactions need an idempotent producer")
        return conf, notes
    was = conf.get("max.in.flight")
    if was is None or was.strip() != "1":
        conf["max.in.flight"] = "1"
        notes.append("producer setting enable.idempotence = false: the writer keeps one request in flight "
                     "(max.in.flight.requests.per.connection = 1" + (f", not {was}" if was is not None else "")
                     + ", as Kafka Connect does) so that a retried request cannot land after a later one "
                     "and reorder a partition on the target")
    return conf, notes


# One producer per Python worker and target configuration: Spark reuses its
# Python workers across tasks and batches, and a producer's connections and
# metadata are worth keeping.
_PRODUCERS: dict[tuple, object] = {}


@dataclass(frozen=True)
class WriterSpec:
    """Everything an executor needs; small and picklable (shipped with the task)."""

    source_alias: str
    target_alias: str
    producer_config: tuple[tuple[str, str], ...]  # librdkafka settings for the target
    topic_map: tuple[tuple[str, str], ...]  # source topic -> target topic


class _Run:
    __slots__ = ("topic", "partition", "u0", "d0", "n", "max_latency", "min_ts")

    def __init__(self, topic: str, partition: int, u0: int, d0: int) -> None:
        self.topic, self.partition, self.u0, self.d0 = topic, partition, u0, d0
        self.n = 0
        self.max_latency = 0
        self.min_ts = None


_NO_TS = 1 << 62  # above any millisecond timestamp: "no record yet" for a running minimum


class _PartitionPlacements:
    """The delivery reports of one source partition's records, folded into runs.

    ``deliver(upstream, ts, err, msg)`` is the ``on_delivery`` of one record (bound to it
    with ``functools.partial``): the record's own upstream offset comes with its own
    report, so reports arriving out of produce order still pair correctly (they merely
    split runs). Per report only the run's next expected (upstream, downstream) pair and
    the oldest timestamp reported since the last ``tick`` are updated; a run's record count
    follows from where it ended, and its latency from that oldest timestamp: every report
    between two ticks is handed over at the same acknowledgement time (``now_ms``).
    """

    __slots__ = ("owner", "topic", "partition", "run", "u_next", "d_next", "oldest", "deliver")

    def __init__(self, owner: "_Placements", topic: str, partition: int) -> None:
        self.owner, self.topic, self.partition = owner, topic, partition
        self.run: _Run | None = None
        self.u_next = self.d_next = -1  # no record yet: the first report starts a run
        self.oldest = _NO_TS
        self.deliver = self._deliver  # bound once, not per record

    def _deliver(self, upstream: int, ts: int, err, msg) -> None:
        if err is not None:
            self.owner.rejected(err, msg, self.topic, self.partition, upstream)
            return
        downstream = msg.offset()
        if upstream != self.u_next or downstream != self.d_next:
            self._new_run(upstream, downstream)
        self.u_next = upstream + 1
        self.d_next = downstream + 1
        if ts < self.oldest:
            self.oldest = ts

    def _new_run(self, upstream: int, downstream: int) -> None:
        self.close()
        self.run = _Run(self.topic, self.partition, upstream, downstream)
        self.owner.all_runs.append(self.run)

    def fold(self) -> None:
        """The reports since the last tick into the current run's latency and oldest timestamp."""
        oldest, run = self.oldest, self.run
        if oldest == _NO_TS or run is None:
            return
        run.max_latency = max(run.max_latency, self.owner.now_ms - oldest)
        run.min_ts = oldest if run.min_ts is None else min(run.min_ts, oldest)
        self.oldest = _NO_TS

    def close(self) -> None:
        """Bring the current run up to date (it stays open for more reports)."""
        if self.run is not None:
            self.run.n = self.u_next - self.run.u0
            self.fold()


class _Placements:
    """Turns delivery reports into runs and remembers the first error.

    ``callback(record)`` is the ``on_delivery`` of one produced record, ``record`` being
    (source topic, partition, upstream offset, timestamp); ``partition(topic, p)`` gives the
    copy loops a partition's ``deliver`` to bind per record directly. Each report names its
    own record, so reports arriving out of produce order still pair correctly. Bytes are
    counted by the copy loops as they produce (a task with any failed record fails whole),
    into ``bytes``.
    """

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], _PartitionPlacements] = {}
        self.all_runs: list[_Run] = []
        self.error: str | None = None
        self.failed: tuple | None = None
        self.bytes = 0
        # Ack time for latency, refreshed (``tick``) before polls instead of read per record:
        # delivery reports are only ever handed over inside poll/flush.
        self.now_ms = int(time.time() * 1000)

    def tick(self) -> None:
        """A new acknowledgement time, for the reports the next polls hand over."""
        for part in self.partitions.values():
            part.fold()
        self.now_ms = int(time.time() * 1000)

    @property
    def runs(self) -> list[_Run]:
        """Every run so far, in the order they started, with all reports served until now."""
        for part in self.partitions.values():
            part.close()
        return self.all_runs

    def partition(self, topic: str, partition: int) -> _PartitionPlacements:
        part = self.partitions.get((topic, partition))
        if part is None:
            part = self.partitions[(topic, partition)] = _PartitionPlacements(self, topic, partition)
        return part

    def callback(self, record: tuple):
        src_topic, src_partition, upstream, ts = record
        return partial(self.partition(src_topic, src_partition).deliver, upstream, ts)

    def rejected(self, err, msg, src_topic: str, src_partition: int, upstream: int) -> None:
        # A rejected produce request fails every record batched with the culprit;
        # for a size rejection, name the largest of them: that is the one to fix.
        key, value = msg.key(), msg.value()
        size = (len(key) if key else 0) + (len(value) if value else 0)
        culprit = self.failed
        if culprit is None or (err.code() == _MSG_SIZE_TOO_LARGE and size > culprit[3]):
            self.failed = (err, src_topic, src_partition, size, upstream, msg.topic(), msg.partition())
            self.error = (
                f"{ERROR_MARKER}: the target rejected a record: {err.str()} "
                f"(source topic {src_topic} partition {src_partition} offset {upstream} -> "
                f"target topic {msg.topic()} partition {msg.partition()}, {size} bytes)"
            )


def produce_after(exc, producer, target: str, **record) -> None:
    """The slow path of producing one record, after ``producer.produce`` raised ``exc``.

    A full local queue is waited out (delivery callbacks served); a partition the
    producer's metadata does not know yet (the control plane grew the mirror topic a
    moment ago) is waited for, refreshing the metadata, up to METADATA_WAIT_S. Anything
    else, or that wait running out, raises the KafkaException for the caller to name
    the record. The fast path (the first ``produce``) stays inline in the callers.
    """
    from confluent_kafka import KafkaError, KafkaException

    metadata_deadline = None
    while True:
        if isinstance(exc, BufferError):
            producer.poll(0.05)
        elif exc.args[0].code() == KafkaError._UNKNOWN_PARTITION:
            now = time.monotonic()
            metadata_deadline = metadata_deadline or now + METADATA_WAIT_S
            if now >= metadata_deadline:
                raise exc
            try:
                producer.list_topics(target, timeout=5)
            except KafkaException:
                pass
            producer.poll(0.2)
        else:
            raise exc
        try:
            producer.produce(target, **record)
            return
        except (BufferError, KafkaException) as again:
            exc = again


class ArrowRows(NamedTuple):
    """The columns of one batch of the data path's rows, as Python lists, indexed by row."""

    topics: list
    partitions: list
    offsets: list
    keys: list
    values: list
    stamps: list  # microseconds (Spark's timestamps); Kafka's are stamps[i] // 1000 milliseconds
    headers: list | None  # None when no row of the batch has headers


def arrow_rows(rb: "pa.RecordBatch") -> ArrowRows:
    hcol = rb.column("headers")
    return ArrowRows(
        rb.column("topic").to_pylist(), rb.column("partition").to_pylist(), rb.column("offset").to_pylist(),
        rb.column("key").to_pylist(), rb.column("value").to_pylist(),
        rb.column("timestamp").cast(pa.int64()).to_pylist(),
        None if hcol.null_count == rb.num_rows else hcol.to_pylist(),
    )


def cannot_produce(exc, source_alias: str, src_topic: str, partition: int, offset: int, target_alias: str,
                   target: str, size: int) -> RuntimeError:
    """The task error for a record ``produce_after`` gave up on (``exc``, a KafkaException), naming the record."""
    return RuntimeError(
        f"{ERROR_MARKER}: cannot produce record: {exc.args[0].str()} (source cluster "
        f"{source_alias} topic {src_topic} partition {partition} offset {offset} -> "
        f"cluster {target_alias} topic {target}, {size} bytes)"
    )


def _producer(spec: WriterSpec):
    from confluent_kafka import Producer

    key = spec.producer_config
    producer = _PRODUCERS.get(key)
    if producer is None:
        conf = dict(spec.producer_config)
        producer = Producer(conf)
        _PRODUCERS[key] = producer
    return producer


@contextlib.contextmanager
def cyclic_gc_paused():
    """Python's cyclic garbage collector off for a copy loop, as it was before afterwards.

    A copy loop allocates container objects per record — the consumer's messages, the
    delivery callback (a ``partial``) and its arguments — and up to a million of them stay
    alive while their records wait in the producer's queue. The collector runs a young
    collection every 700 allocations and a full one whenever enough objects survived, each
    walking every live one: in a profile of a 100-byte catch-up it took more CPU than the
    interpreter's own loop. None of these objects is part of a reference cycle; reference
    counting frees each of them when its record is done, with or without the collector.
    Garbage in cycles made meanwhile (an exception's traceback) is collected once it is back on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def write_partition(spec: WriterSpec, batches) -> "pa.RecordBatch":
    """mapInArrow body: produce every row, yield the runs of where they landed."""
    with cyclic_gc_paused():
        runs = _write_partition(spec, batches)
    yield runs


def _write_partition(spec: WriterSpec, batches) -> "pa.RecordBatch":
    from confluent_kafka import KafkaException

    topic_map = dict(spec.topic_map)
    placements = _Placements()
    producer = _producer(spec)
    callback = placements.callback
    nbytes = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        topics, partitions, offsets, keys, values, stamps, headers = arrow_rows(rb)
        for i in range(rb.num_rows):
            src_topic = topics[i]
            target = topic_map.get(src_topic)
            if target is None:
                raise RuntimeError(
                    f"{ERROR_MARKER}: no target topic known for source topic {src_topic} "
                    f"(cluster {spec.source_alias})"
                )
            partition = partitions[i]
            ts = stamps[i] // 1000
            hdrs = headers[i] if headers is not None else None
            hdr_list = [(h["key"], h["value"]) for h in hdrs] if hdrs else None
            key, value = keys[i], values[i]
            size = (len(key) if key else 0) + (len(value) if value else 0)
            nbytes += size
            on_delivery = callback((src_topic, partition, offsets[i], ts))
            try:
                # positional (topic, value, key, partition, on_delivery, callback, timestamp, headers):
                # confluent-kafka's keyword parsing costs about as much as a small record's produce
                producer.produce(target, value, key, partition, on_delivery, None, ts, hdr_list)
            except (BufferError, KafkaException) as first:
                try:
                    produce_after(first, producer, target, value=value, key=key, partition=partition,
                                  timestamp=ts, headers=hdr_list, on_delivery=on_delivery)
                except KafkaException as exc:
                    raise cannot_produce(exc, spec.source_alias, src_topic, partition, offsets[i], spec.target_alias,
                                         target, size) from None
            if i % POLL_EVERY == 0:
                placements.tick()
                producer.poll(0)
                if placements.error:
                    break
        if placements.error:
            break
    # Wait for every report (also those of a failed request, to name its culprit).
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while len(producer) and time.monotonic() < deadline:
        placements.tick()
        producer.poll(0.01)
    remaining = len(producer)
    if placements.error or remaining:
        # An idempotent producer that saw a delivery error may be fenced; start afresh.
        _PRODUCERS.pop(spec.producer_config, None)
    if placements.error:
        raise RuntimeError(placements.error + f" (target cluster {spec.target_alias})")
    if remaining:
        raise RuntimeError(
            f"{ERROR_MARKER}: {remaining} records not acknowledged by cluster {spec.target_alias} "
            f"within {FLUSH_TIMEOUT_S:.0f} s; the batch will be replayed"
        )
    return runs_batch(placements.runs, nbytes)


def runs_batch(rows, nbytes: int = 0) -> "pa.RecordBatch":
    """The runs of one task as one Arrow batch (RUN_SCHEMA). ``bytes`` is the task's: on its
    first row, 0 on the others (the driver adds them up per batch)."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.topic for r in rows], pa.string()),
            pa.array([r.partition for r in rows], pa.int32()),
            pa.array([r.u0 for r in rows], pa.int64()),
            pa.array([r.d0 for r in rows], pa.int64()),
            pa.array([r.n for r in rows], pa.int64()),
            pa.array([nbytes if i == 0 else 0 for i in range(len(rows))], pa.int64()),
            pa.array([r.max_latency for r in rows], pa.int64()),
            pa.array([r.min_ts if r.min_ts is not None else 0 for r in rows], pa.int64()),
        ],
        schema=RUN_SCHEMA,
    )
