"""The executor side of the exactly-once data path: one Kafka transaction per source partition.

Switched on per flow by ``B.exactly.once.source.support = enabled`` (MM2's worker
key on the target) or ``A->B.exactly.once.support = required`` (see
``FlowConfig.exactly_once``). Where ``writer.write_partition`` is at-least-once
(a replayed batch is written again), this writer makes a replay harmless:

* Every source partition has its own transactional producer with a stable
  ``transactional.id`` (``transactional_id``): flow, source topic, partition.
  ``init_transactions`` fences any earlier producer with that id (a task of a
  process killed with -9, a zombie Python worker of a stopped query) and aborts
  or completes its open transaction before this task reads anything.
* The progress lives on the target, in the same transaction as the records:
  the next source offset to copy is committed for the consumer group
  ``progress_group`` (``__`` prefix: MM2's default ``groups.exclude`` leaves it
  out of checkpoints and group sync) at the *mirror* topic and partition, with
  ``send_offsets_to_transaction``.
* Before writing, the task reads that committed progress (librdkafka's
  ``committed`` asks for stable offsets under ``isolation.level=read_committed``)
  and skips the source records below it: they are in a committed transaction
  already. Spark's checkpoint may lag the target after a kill; the target's
  progress is the truth.

A partition's transaction is committed when the task has written its last
record, and also every ``MAX_TRANSACTION_S`` seconds so that a large backlog
never runs into ``transaction.timeout.ms``. The runs returned to the driver are
those of ``writer.RUN_SCHEMA`` plus the number of records skipped; the
downstream offsets come from the delivery reports as before (commit markers make
them jump by one between transactions: a new run, which the offset-sync logic
handles).

A rejected record aborts the transaction and stops the batch with the same
message as the at-least-once writer; nothing of that partition's transaction is
visible to a ``read_committed`` consumer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa

from replicator.datapath.writer import (ERROR_MARKER, FLUSH_TIMEOUT_S, POLL_EVERY, RUN_SCHEMA,
                                        RUN_SCHEMA_DDL, WriterSpec, _Placements, arrow_rows, cannot_produce,
                                        cyclic_gc_paused, produce_after)

EOS_RUN_SCHEMA = RUN_SCHEMA.append(pa.field("skipped", pa.int64()))
EOS_RUN_SCHEMA_DDL = RUN_SCHEMA_DDL + ", skipped long"
#: commit a long-running partition's transaction this often (well under transaction.timeout.ms)
MAX_TRANSACTION_S = 10.0
TXN_TIMEOUT_S = 60.0
#: tries of one commit step (sending the progress, committing) that fails with a retriable error
COMMIT_ATTEMPTS = 5
# Only these reach the progress reader: it talks to the same target cluster as the producer.
_CONNECTION_KEYS = ("bootstrap.servers", "security.protocol", "ssl.", "sasl.", "socket.", "broker.address.",
                    "client.dns.lookup", "client.rack", "metadata.", "reconnect.", "oauthbearer")

# One progress reader per Python worker and target (not transactional: nothing to fence).
_READERS: dict[tuple, object] = {}


def progress_group(source: str, target: str) -> str:
    """The consumer group on the target holding a flow's exactly-once progress."""
    return f"__sparkmirror-eos-{source}-to-{target}"


def transactional_id(source: str, target: str, topic: str, partition: int) -> str:
    """Stable per source partition, so a restarted task fences the one it replaces.

    ':' appears neither in aliases nor in topic names, so the id is unambiguous.
    """
    return f"sparkmirror-eos:{source}->{target}:{topic}:{partition}"


@dataclass(frozen=True)
class EosWriterSpec:
    """WriterSpec plus where the progress lives; small and picklable."""

    writer: WriterSpec
    group: str


def _reader(spec: EosWriterSpec):
    from confluent_kafka import Consumer

    key = (spec.writer.producer_config, spec.group)
    reader = _READERS.get(key)
    if reader is None:
        conf = {k: v for k, v in spec.writer.producer_config if k.startswith(_CONNECTION_KEYS)}
        conf.update({"group.id": spec.group, "enable.auto.commit": "false", "isolation.level": "read_committed"})
        reader = _READERS[key] = Consumer(conf)
    return reader


class _PartitionTxn:
    """Writes one source partition's rows of this task in transactions; see the module doc."""

    def __init__(self, spec: EosWriterSpec, src_topic: str, partition: int, target: str) -> None:
        from confluent_kafka import KafkaException, Producer, TopicPartition

        w = spec.writer
        self.spec, self.src_topic, self.partition, self.target = spec, src_topic, partition, target
        self.reader = _reader(spec)
        conf = dict(w.producer_config)
        conf["transactional.id"] = transactional_id(w.source_alias, w.target_alias, src_topic, partition)
        conf.setdefault("transaction.timeout.ms", str(int(TXN_TIMEOUT_S * 1000)))
        self.producer = Producer(conf)
        self.in_txn = False
        self.txn_started = 0.0
        self.next_offset: int | None = None
        self.skipped = 0
        self.written = 0
        self.placements = _Placements()
        # Fences the previous owner of the id and settles its open transaction first...
        try:
            self.producer.init_transactions(TXN_TIMEOUT_S)
        except KafkaException as exc:
            raise RuntimeError(
                f"{ERROR_MARKER}: cannot start a transaction on cluster {w.target_alias} for {target} partition "
                f"{partition} (transactional.id {conf['transactional.id']}): {exc.args[0].str()}; exactly-once "
                "needs brokers with transactions and, with ACLs, WRITE and DESCRIBE on the transactional ids "
                "prefixed 'sparkmirror-eos:'") from None
        # ... so the committed progress read now is final.
        tp = self._committed_progress(TopicPartition(target, partition))
        if tp.error is not None:
            raise RuntimeError(f"{ERROR_MARKER}: cannot read the exactly-once progress of {target} partition "
                               f"{partition} (group {spec.group}) on cluster {w.target_alias}: {tp.error}")
        self.resume_at = tp.offset if tp.offset >= 0 else -1

    def _committed_progress(self, tp):
        """The group's committed offset of ``tp``, waiting out a coordinator that is still moving
        or loading (a fresh cluster's offsets topic answers NOT_COORDINATOR for a while)."""
        from confluent_kafka import KafkaError, KafkaException

        deadline = time.monotonic() + TXN_TIMEOUT_S
        while True:
            try:
                return self.reader.committed([tp], timeout=TXN_TIMEOUT_S)[0]
            except KafkaException as exc:
                err = exc.args[0]
                moving = err.retriable() or err.code() in (KafkaError.NOT_COORDINATOR,
                                                           KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                                           KafkaError.COORDINATOR_NOT_AVAILABLE)
                if not moving or time.monotonic() >= deadline:
                    raise RuntimeError(f"{ERROR_MARKER}: cannot read the exactly-once progress of {tp.topic} "
                                       f"partition {tp.partition} (group {self.spec.group}) on cluster "
                                       f"{self.spec.writer.target_alias}: {err.str()}") from None
                time.sleep(0.2)

    def write(self, offset: int, key, value, ts: int, hdr_list, size: int) -> None:
        if offset < self.resume_at:
            self.skipped += 1  # already in a committed transaction
            return
        from confluent_kafka import KafkaException

        producer = self.producer
        if not self.in_txn:
            producer.begin_transaction()
            self.in_txn = True
            self.txn_started = time.monotonic()
        on_delivery = self.placements.callback((self.src_topic, self.partition, offset, ts))
        self.placements.bytes += size
        try:
            producer.produce(self.target, value=value, key=key, partition=self.partition, timestamp=ts,
                             headers=hdr_list, on_delivery=on_delivery)
        except (BufferError, KafkaException) as first:
            try:
                produce_after(first, producer, self.target, value=value, key=key, partition=self.partition,
                              timestamp=ts, headers=hdr_list, on_delivery=on_delivery)
            except KafkaException as exc:
                raise cannot_produce(exc, self.spec.writer.source_alias, self.src_topic, self.partition, offset,
                                     self.spec.writer.target_alias, self.target, size) from None
        self.next_offset = offset + 1
        self.written += 1
        if self.written % POLL_EVERY == 0:
            self.placements.tick()
            producer.poll(0)
            if self.placements.error:
                self._raise_delivery_error()
            if time.monotonic() - self.txn_started > MAX_TRANSACTION_S:
                self.commit()

    def _raise_delivery_error(self) -> None:
        self._drain()
        raise RuntimeError(self.placements.error + f" (target cluster {self.spec.writer.target_alias})")

    def _drain(self) -> int:
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        producer = self.producer
        while len(producer) and time.monotonic() < deadline:
            self.placements.tick()
            producer.poll(0.01)
        return len(producer)

    def commit(self) -> None:
        """Records, then the progress (next source offset), in one transaction."""
        if not self.in_txn:
            return
        from confluent_kafka import TopicPartition

        remaining = self._drain()
        if self.placements.error:
            self._raise_delivery_error()
        if remaining:
            raise RuntimeError(f"{ERROR_MARKER}: {remaining} records not acknowledged by cluster "
                               f"{self.spec.writer.target_alias} within {FLUSH_TIMEOUT_S:.0f} s; the batch will be "
                               "replayed")
        progress = [TopicPartition(self.target, self.partition, self.next_offset)]
        # Each step is retried on its own: after a retriable error (a timeout) librdkafka resumes
        # the very call that failed. Committing after a failed progress write would make the
        # records visible without their progress, and a replay would write them again.
        self._settle("sending the progress of", lambda: self.producer.send_offsets_to_transaction(
            progress, self.reader.consumer_group_metadata(), TXN_TIMEOUT_S))
        self._settle("committing the transaction of", lambda: self.producer.commit_transaction(TXN_TIMEOUT_S))
        self.in_txn = False
        self.resume_at = self.next_offset

    def _settle(self, what: str, call) -> None:
        """``call`` one transaction step until it succeeds; what cannot succeed aborts the transaction.

        Nothing of an aborted transaction is visible: the batch fails and is replayed. A
        fatal error (a newer owner fenced this producer) leaves the transaction to that
        owner's ``init_transactions``, which completes or aborts records and progress
        together. Either way the target's progress stays the truth for the replay.
        """
        from confluent_kafka import KafkaException

        for attempt in range(COMMIT_ATTEMPTS):
            try:
                call()
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and attempt < COMMIT_ATTEMPTS - 1:
                    continue
                if err.txn_requires_abort():
                    try:
                        self.producer.abort_transaction(TXN_TIMEOUT_S)
                    except KafkaException:
                        pass  # the next owner's init_transactions aborts it
                    self.in_txn = False
                raise RuntimeError(f"{what} {self.target} partition {self.partition} on cluster "
                                   f"{self.spec.writer.target_alias} failed: {err.str()}; records and progress "
                                   "are committed together or not at all, the batch will be replayed") from None

    def abandon(self) -> None:
        """After an error: abort what is open (best effort; the next owner's init aborts it anyway)."""
        try:
            if self.in_txn:
                self.producer.abort_transaction(10)
        except Exception:
            pass
        self.in_txn = False
        self.close()

    def close(self) -> None:
        try:
            self.producer.close()
        except Exception:
            pass


def write_partition_eos(spec: EosWriterSpec, batches) -> "pa.RecordBatch":
    """mapInArrow body: write every row in per-source-partition transactions, yield the runs
    (with the cyclic garbage collector paused meanwhile: ``writer.cyclic_gc_paused``)."""
    with cyclic_gc_paused():
        runs = _write_partition_eos(spec, batches)
    yield runs


def _write_partition_eos(spec: EosWriterSpec, batches) -> "pa.RecordBatch":
    topic_map = dict(spec.writer.topic_map)
    done: list[_PartitionTxn] = []
    current: _PartitionTxn | None = None
    try:
        for rb in batches:
            if rb.num_rows == 0:
                continue
            topics, partitions, offsets, keys, values, stamps, headers = arrow_rows(rb)
            for i in range(rb.num_rows):
                src_topic, partition = topics[i], partitions[i]
                if current is None or current.partition != partition or current.src_topic != src_topic:
                    target = topic_map.get(src_topic)
                    if target is None:
                        raise RuntimeError(f"{ERROR_MARKER}: no target topic known for source topic {src_topic} "
                                           f"(cluster {spec.writer.source_alias})")
                    if current is not None:
                        current.commit()
                        current.close()
                        done.append(current)
                        current = None
                    current = _PartitionTxn(spec, src_topic, partition, target)
                hdrs = headers[i] if headers is not None else None
                key, value = keys[i], values[i]
                current.write(offsets[i], key, value, stamps[i] // 1000,
                              [(h["key"], h["value"]) for h in hdrs] if hdrs else None,
                              (len(key) if key else 0) + (len(value) if value else 0))
        if current is not None:
            current.commit()
            current.close()
            done.append(current)
            current = None
    except BaseException:
        if current is not None:
            current.abandon()
        raise
    rows = []
    for pt in done:
        if not pt.placements.runs:  # all skipped: one empty row still reports them
            rows.append((pt.src_topic, pt.partition, max(pt.resume_at, 0), -1, 0, 0, 0, 0, pt.skipped))
        for j, r in enumerate(pt.placements.runs):
            rows.append((r.topic, r.partition, r.u0, r.d0, r.n, pt.placements.bytes if j == 0 else 0,
                         r.max_latency, r.min_ts or 0,
                         pt.skipped if j == 0 else 0))
    columns = list(zip(*rows)) if rows else [()] * len(EOS_RUN_SCHEMA)
    return pa.RecordBatch.from_arrays([pa.array(list(col), f.type) for col, f in zip(columns, EOS_RUN_SCHEMA)],
                                     schema=EOS_RUN_SCHEMA)
