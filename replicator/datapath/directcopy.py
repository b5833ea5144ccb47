"""The direct source's executor side: a task copies its offset ranges from the source
cluster to the target with confluent-kafka, and returns where the records landed.

``mirror_ranges`` (called by ``source.MirrorStreamReader.read``) consumes exactly its ranges
``[start, end)``, produces every record with the writer's placement tracking
(``writer._Placements``) and yields the runs, plus a row for every range the source deleted
before it was copied and every partition copied again from its start
(``DIRECT_RUN_SCHEMA``). A range that ends in control records or compacted offsets ends on
the partition's EOF.
"""

from __future__ import annotations

import time
from functools import partial

import pyarrow as pa

from replicator.datapath.writer import (ERROR_MARKER, FLUSH_TIMEOUT_S, POLL_EVERY, RUN_SCHEMA, RUN_SCHEMA_DDL,
                                        _Placements, _producer, cyclic_gc_paused, produce_after, runs_batch)

# The writer's runs, plus rows that report records deleted on the source before they
# were copied: records = 0, upstream_start = first lost offset, lost = how many; and rows
# that report a partition copied again from its start: records = 0, upstream_start = its
# earliest offset, reset_from = the offset the copy had reached (above the partition's end).
DIRECT_RUN_SCHEMA = RUN_SCHEMA.append(pa.field("lost", pa.int64())).append(pa.field("reset_from", pa.int64()))
DIRECT_RUN_SCHEMA_DDL = RUN_SCHEMA_DDL + ", lost long, reset_from long"


EARLIEST = -2  # start offset of a partition the checkpoint has not seen yet
CONSUME_BATCH = 10_000
READ_TIMEOUT_S = 120.0  # no progress at all for this long: fail the task (Spark retries it)

_CONSUMERS: dict[tuple, object] = {}
# librdkafka settings for reading a backlog as fast as the target takes it; A.consumer.*
# settings in mm2.properties win.
READER_CONSUMER_DEFAULTS = {
    # short broker long-poll: a new range's fetch queues behind the previous one
    "fetch.wait.max.ms": "5",
    "queued.max.messages.kbytes": "65536",
    "fetch.max.bytes": "52428800",
    "max.partition.fetch.bytes": "10485760",
    # Once the prefetch queue is full librdkafka puts the next fetch off by this long; its
    # default of 1 s leaves the copy loop waiting for records once it drained the queue
    # ("Reader fetch back-off" in bench/NOTES.md).
    "fetch.queue.backoff.ms": "10",
}
FIXED_CONSUMER_SETTINGS = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "enable.partition.eof": "true",  # the end of a range that ends in control records
    "auto.offset.reset": "error",  # a deleted range is reported, never skipped silently
    "isolation.level": "read_committed",  # aborted transactions never reach the target
}


def _consumer(spec):
    from confluent_kafka import Consumer

    consumer = _CONSUMERS.get(spec.consumer_config)
    if consumer is None:
        conf = {
            "group.id": "sparkmirror-direct-reader",  # never joins or commits: partitions are assigned
            # Executors have no Python logger for librdkafka: without this an unreachable broker
            # prints a line per reconnect. A failing read still fails the task with its cause.
            "log_level": "2",
            **READER_CONSUMER_DEFAULTS,
            **dict(spec.consumer_config),
            # What the copy's correctness rests on, whatever A.consumer.* says (MM2's own
            # consumer default auto.offset.reset=earliest would skip deleted ranges silently):
            **FIXED_CONSUMER_SETTINGS,
        }
        consumer = Consumer(conf)
        _CONSUMERS[spec.consumer_config] = consumer
    return consumer


class _Range:
    """One partition's range in a task: where the copy is, where it ends, where it goes."""

    __slots__ = ("topic", "partition", "position", "end", "target", "deliver")

    def __init__(self, topic: str, partition: int, start: int, end: int, target: str, deliver) -> None:
        self.topic, self.partition, self.position, self.end = topic, partition, start, end
        self.target, self.deliver = target, deliver


def mirror_ranges(spec, ranges: list[tuple[str, int, int, int]], resets: dict[tuple[str, int], int] | None = None):
    """Copy source records ``[start, end)`` of each partition; yield where they landed (runs),
    with the cyclic garbage collector paused meanwhile (``writer.cyclic_gc_paused``).
    ``spec``: the flow's ``source.SourceSpec``."""
    with cyclic_gc_paused():
        runs = _mirror_ranges(spec, ranges, resets)
    yield runs


def _mirror_ranges(spec, ranges: list[tuple[str, int, int, int]],
                   resets: dict[tuple[str, int], int] | None = None) -> "pa.RecordBatch":
    """Copy source records ``[start, end)`` of each partition; return where they landed (runs).

    ``resets``: partitions copied again from their start, with the offset reached before
    (reported back to the driver, which logs them).
    """
    from confluent_kafka import TopicPartition

    wspec = spec.writer
    consumer = _consumer(spec)
    producer = _producer(wspec)
    placements = _Placements()
    states, restarted = _open_ranges(spec, ranges, resets, consumer, placements)
    losses: list[tuple[str, int, int, int]] = []  # (topic, partition, first lost offset, count)
    # the partitions still to copy; a finished one leaves, so its prefetched records are skipped
    open_ = {tp: st for tp, st in states.items() if st.position < st.end}
    consumer.assign([TopicPartition(t, p, open_[(t, p)].position) for t, p in sorted(open_)])
    try:
        nbytes = _copy(consumer, producer, placements, open_, losses, wspec)
    finally:
        consumer.unassign()
    # Wait for every report (also those of a failed request, to name its culprit).
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while len(producer) and time.monotonic() < deadline:
        placements.tick()
        producer.poll(0.01)
    _finish(placements, producer, wspec)
    return _with_reports(runs_batch(placements.runs, nbytes), losses, restarted)


def _open_ranges(spec, ranges, resets, consumer, placements):
    """Each range's copy state (an EARLIEST start resolved to the log start), and the partitions
    copied again from their start as (topic, partition, earliest offset, offset reached before)."""
    from confluent_kafka import TopicPartition

    wspec = spec.writer
    topic_map = dict(wspec.topic_map)
    restarted: list[tuple[str, int, int, int]] = []
    states: dict[tuple[str, int], _Range] = {}
    for topic, partition, start, stop in ranges:
        target = topic_map.get(topic)
        if target is None:
            raise RuntimeError(f"{ERROR_MARKER}: no target topic known for source topic {topic} "
                               f"(cluster {wspec.source_alias})")
        if start == EARLIEST:
            start = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[0]
        if resets and (topic, partition) in resets:
            restarted.append((topic, partition, start, resets[(topic, partition)]))
        states[(topic, partition)] = _Range(topic, partition, start, stop, target,
                                            placements.partition(topic, partition).deliver)
    return states, restarted


def _copy(consumer, producer, placements, open_: dict, losses: list, wspec) -> int:
    """Copy until every range of ``open_`` is done; returns the bytes copied. The loop runs once
    per record, so it does only what a record needs: its partition's state in one dict lookup, one
    positional ``produce`` (confluent-kafka parses keyword arguments per call, which costs about
    as much as a small record's produce), and a delivery callback that is a ``partial`` of the
    partition's ``deliver`` and the record's own offset and timestamp (``_PartitionPlacements``)."""
    from confluent_kafka import KafkaException, TopicPartition

    produce = producer.produce
    last_progress = time.monotonic()
    nbytes = 0
    while open_ and not placements.error:
        # Ask for exactly what is left: consume() returns as soon as that many arrived,
        # instead of waiting out its timeout for a full batch (a wait per task and batch).
        # Ranges with gaps (compaction, transaction markers) end on EOF.
        left = sum(st.end - st.position for st in open_.values())
        msgs = consumer.consume(min(CONSUME_BATCH, left), 0.1)
        if not msgs:
            if time.monotonic() - last_progress > READ_TIMEOUT_S:
                _raise_stalled(open_, wspec)
            continue
        last_progress = time.monotonic()
        placements.tick()
        n = 0
        reassign = False
        # a consume returns each partition's records in runs: its state is looked up when the
        # partition changes, and forgotten (at_p = None) whenever a partition leaves open_
        at_t = at_p = st = None
        for m in msgs:
            p = m.partition()
            t = m.topic()
            if p != at_p or t != at_t:
                st = open_.get((t, p))
                at_t, at_p = t, p
            if st is None:
                continue  # prefetched past its range, or an event of a finished partition
            err = m.error()
            if err is not None:
                reassign = _partition_event(err, m, st, consumer, losses, wspec)
                if st.position >= st.end:
                    del open_[(st.topic, st.partition)]
                    at_p = None
                if reassign:
                    break
                continue
            off = m.offset()
            if off >= st.end:
                st.position = st.end
                del open_[(st.topic, st.partition)]
                at_p = None
                continue
            st.position = off + 1
            key = m.key()
            value = m.value()
            size = (len(key) if key else 0) + (len(value) if value else 0)
            nbytes += size
            ts = m.timestamp()[1]
            on_delivery = partial(st.deliver, off, ts)
            headers = m.headers()
            try:
                # positional: topic, value, key, partition, on_delivery, callback, timestamp, headers
                produce(st.target, value, key, st.partition, on_delivery, None, ts, headers)
            except (BufferError, KafkaException) as first:
                try:
                    produce_after(first, producer, st.target, value=value, key=key, partition=st.partition,
                                  on_delivery=on_delivery, timestamp=ts, headers=headers)
                except KafkaException as exc:
                    _raise_produce_error(exc, wspec, st.topic, st.partition, off, st.target, size)
            if off + 1 >= st.end:
                del open_[(st.topic, st.partition)]
                at_p = None
            n += 1
            if n % POLL_EVERY == 0:
                producer.poll(0)
        producer.poll(0)
        if reassign and open_:
            consumer.assign([TopicPartition(t, p, st.position) for (t, p), st in sorted(open_.items())])
    return nbytes


def _partition_event(err, m, st: _Range, consumer, losses: list, wspec) -> bool:
    """An event of a partition still in its range: its end (EOF), or its position deleted by
    retention (the loss is noted; True: the consumer must be assigned again). Any other error
    fails the task."""
    from confluent_kafka import KafkaError, TopicPartition

    code = err.code()
    if code == KafkaError._PARTITION_EOF:
        st.position = max(st.position, m.offset())
        return False
    if code == KafkaError._AUTO_OFFSET_RESET or code == KafkaError.OFFSET_OUT_OF_RANGE:
        low, _high = consumer.get_watermark_offsets(TopicPartition(st.topic, st.partition), timeout=30)
        if low > st.position:
            losses.append((st.topic, st.partition, st.position, min(low, st.end) - st.position))
            st.position = low
        return True
    raise RuntimeError(f"{ERROR_MARKER}: reading source cluster {wspec.source_alias} topic "
                       f"{st.topic} partition {st.partition} at offset {st.position}: {err.str()}")


def _raise_stalled(open_: dict, wspec) -> None:
    t, p = min(open_)
    st = open_[(t, p)]
    raise RuntimeError(f"{ERROR_MARKER}: no record of source cluster {wspec.source_alias} topic {t} "
                       f"partition {p} read for {READ_TIMEOUT_S:.0f} s at offset {st.position} "
                       f"(range ends at {st.end}); the task will be retried")


def _with_reports(runs: "pa.RecordBatch", losses: list, restarted: list) -> "pa.RecordBatch":
    """The runs, then a row per range the source deleted and per partition copied again (DIRECT_RUN_SCHEMA)."""
    # (topic, partition, upstream_start, lost, reset_from) of the report rows
    reports = [(t, p, first, count, 0) for t, p, first, count in losses]
    reports += [(t, p, start, 0, before) for t, p, start, before in restarted]
    extra = {f.name: [] for f in RUN_SCHEMA}
    for topic, partition, first, *_rest in reports:
        for name in extra:
            extra[name].append({"topic": topic, "partition": partition, "upstream_start": first}.get(name, 0))
    return pa.RecordBatch.from_arrays(
        [pa.concat_arrays([runs.column(i), pa.array(extra[f.name], f.type)]) for i, f in enumerate(RUN_SCHEMA)]
        + [pa.array([0] * runs.num_rows + [r[3] for r in reports], pa.int64()),
           pa.array([0] * runs.num_rows + [r[4] for r in reports], pa.int64())],
        schema=DIRECT_RUN_SCHEMA)


def _raise_produce_error(exc, wspec, topic, partition, offset, target, size):
    raise RuntimeError(
        f"{ERROR_MARKER}: cannot produce record: {exc.args[0].str()} (source cluster {wspec.source_alias} "
        f"topic {topic} partition {partition} offset {offset} -> cluster {wspec.target_alias} topic {target}, "
        f"{size} bytes)") from None


def _finish(placements, producer, wspec) -> None:
    from replicator.datapath.writer import _PRODUCERS

    remaining = len(producer)
    if placements.error or remaining:
        _PRODUCERS.pop(wspec.producer_config, None)
    if placements.error:
        raise RuntimeError(placements.error + f" (target cluster {wspec.target_alias})")
    if remaining:
        raise RuntimeError(f"{ERROR_MARKER}: {remaining} records not acknowledged by cluster {wspec.target_alias} "
                           f"within {FLUSH_TIMEOUT_S:.0f} s; the batch will be replayed")
