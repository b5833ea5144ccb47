"""The direct source's copy loop through the paths a plain copy never takes: a start at the log
start, a range the source deleted before it was copied, a range that ends in a gap (EOF), a
partition copied again from its start, and a read error."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from replicator.datapath import directcopy, source, writer
from replicator.datapath.directcopy import EARLIEST
from replicator.datapath.writer import WriterSpec
from tests.unit.test_delivery_pairing import RetriedRequestLandsLast, _Record


class _Event(_Record):
    """A consumer event of a partition (EOF, an offset out of range, a read error)."""

    def __init__(self, topic, partition, offset, code):
        super().__init__(topic, partition, offset)
        self.code = code

    def error(self):
        return KafkaError(self.code)


class _Log:
    """A consumer over partitions with a log start, a log end and offsets missing (a compacted or
    transactional log); reading below the log start gives an offset-out-of-range event."""

    def __init__(self, logs):
        self.logs = logs  # (topic, partition) -> (log start, log end, offsets that hold no record)
        self.assigned = []
        self.queued = []
        self.assigns = 0

    def assign(self, tps):
        self.assigns += 1
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]
        self.queued = []  # what was fetched for the old assignment is dropped, as librdkafka does

    def unassign(self):
        self.assigned = []

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        low, high, _gaps = self.logs[(tp.topic, tp.partition)]
        return low, high

    def consume(self, num_messages=1, timeout=-1):
        for t, p, at in self.assigned:
            low, high, gaps = self.logs[(t, p)]
            if at < low:
                self.queued.append(_Event(t, p, at, KafkaError.OFFSET_OUT_OF_RANGE))
                continue
            self.queued += [_Record(t, p, o) for o in range(at, high) if o not in gaps]
            self.queued.append(_Event(t, p, high, KafkaError._PARTITION_EOF))
        self.assigned = []
        out, self.queued = self.queued[:num_messages], self.queued[num_messages:]
        return out


def _copy(monkeypatch, logs, ranges, resets=None):
    wspec = WriterSpec("primary", "dr", (("test.target", f"events-{id(logs)}"),), (("orders", "primary.orders"),))
    spec = source.SourceSpec(wspec, (("test.source", f"events-{id(logs)}"),), (("orders", 3),), ())
    target = RetriedRequestLandsLast(request=1000)
    consumer = _Log(logs)
    monkeypatch.setitem(writer._PRODUCERS, wspec.producer_config, target)
    monkeypatch.setitem(directcopy._CONSUMERS, spec.consumer_config, consumer)
    (rows,) = directcopy.mirror_ranges(spec, ranges, resets)
    return rows.to_pylist(), target, consumer


def test_deleted_gapped_and_restarted_ranges_are_copied_and_reported(monkeypatch):
    logs = {("orders", 0): (0, 10, set()),  # read from its log start (EARLIEST)
            ("orders", 1): (25, 40, set()),  # 20..24 deleted by retention before they were copied
            ("orders", 2): (0, 12, {10, 11})}  # ends in two offsets without records (transaction markers)
    rows, target, consumer = _copy(monkeypatch, logs, [("orders", 0, EARLIEST, 10), ("orders", 1, 20, 40),
                                                       ("orders", 2, 5, 12)], resets={("orders", 0): 500})
    copied = {p: [r for r in rows if r["partition"] == p and r["records"]] for p in range(3)}
    assert [(r["upstream_start"], r["records"]) for r in copied[0]] == [(0, 10)]
    assert [(r["upstream_start"], r["records"]) for r in copied[1]] == [(25, 15)]
    assert [(r["upstream_start"], r["records"]) for r in copied[2]] == [(5, 5)]
    reports = [(r["partition"], r["upstream_start"], r["lost"], r["reset_from"]) for r in rows if not r["records"]]
    assert reports == [(1, 20, 5, 0), (0, 0, 0, 500)]
    assert len(target.log[("primary.orders", 1)]) == 15
    assert consumer.assigns == 2, "assigned again after the out-of-range event"


def test_a_read_error_fails_the_task_naming_the_partition(monkeypatch):
    class Broken(_Log):
        def consume(self, num_messages=1, timeout=-1):
            return [_Event("orders", 0, 3, KafkaError._TRANSPORT)]

    wspec = WriterSpec("primary", "dr", (("test.target", "broken"),), (("orders", "primary.orders"),))
    spec = source.SourceSpec(wspec, (("test.source", "broken"),), (("orders", 1),), ())
    monkeypatch.setitem(writer._PRODUCERS, wspec.producer_config, RetriedRequestLandsLast())
    monkeypatch.setitem(directcopy._CONSUMERS, spec.consumer_config, Broken({("orders", 0): (0, 9, set())}))
    with pytest.raises(RuntimeError, match=r"SPARKMIRROR_WRITE_ERROR: reading source cluster primary topic orders "
                                           r"partition 0 at offset 3: "):
        list(directcopy.mirror_ranges(spec, [("orders", 0, 3, 9)]))
