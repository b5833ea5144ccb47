"""Each record's downstream offset comes from its own delivery report, in whatever order reports arrive,
and a producer without idempotence keeps one request in flight so that nothing is reordered.

A producer without idempotence and with several requests in flight can have a failed
request retried and land after a later one: the target then holds the records out of
source order and their delivery reports arrive out of produce order. The runs the
writer returns (and so the offset-syncs the driver derives) must pair every upstream
offset with the downstream offset of that same record.

The target here is a fake: what is tested is the pairing logic, which sees nothing of a
producer but the order of its delivery reports.
"""

from __future__ import annotations

import pyarrow as pa

from replicator.datapath import writer
from replicator.datapath.writer import WriterSpec, write_partition, writer_producer_config


class _Delivered:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class RetriedRequestLandsLast:
    """Groups produced records into requests of ``request`` records; the first request fails
    once and is retried after the second one was acknowledged (what a non-idempotent
    producer with max.in.flight > 1 does). Reports come in acknowledgement order."""

    def __init__(self, request: int = 3) -> None:
        self.request = request
        self.pending: list[tuple] = []
        self.log: dict[tuple[str, int], list[bytes]] = {}

    # confluent-kafka's signature and argument order (the direct source passes them by position)
    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None, callback=None, timestamp=0,
                headers=None):
        self.pending.append((topic, partition, value, on_delivery or callback))

    def poll(self, timeout=0.0):
        if not timeout:  # the writer's poll(0) inside its loop: requests still in flight
            return 0
        requests = [self.pending[i:i + self.request] for i in range(0, len(self.pending), self.request)]
        if len(requests) > 1:
            requests[0], requests[1] = requests[1], requests[0]
        self.pending = []
        for req in requests:
            for topic, partition, value, on_delivery in req:
                log = self.log.setdefault((topic, partition), [])
                log.append(value)
                on_delivery(None, _Delivered(topic, partition, len(log) - 1))
        return 0

    def __len__(self) -> int:
        return len(self.pending)


def _spark_rows(topic: str, partition: int, offsets) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_pydict({
        "key": [None] * n, "value": [b"v%d" % o for o in offsets], "topic": [topic] * n,
        "partition": [partition] * n, "offset": list(offsets),
        "timestamp": [1_700_000_000_000_000] * n, "headers": [None] * n,
    }, schema=pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                         ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us")),
                         ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))]))


def test_reports_out_of_produce_order_pair_each_record_with_its_own_offset(monkeypatch):
    spec = WriterSpec("primary", "dr", (("test.target", "reordering"),), (("orders", "primary.orders"),))
    target = RetriedRequestLandsLast(request=3)
    monkeypatch.setitem(writer._PRODUCERS, spec.producer_config, target)
    upstream = list(range(100, 110))
    (runs,) = write_partition(spec, [_spark_rows("orders", 0, upstream)])
    landed = target.log[("primary.orders", 0)]
    assert landed[:3] == [b"v103", b"v104", b"v105"]  # the retried request landed after the next one
    pairs = {}
    for r in runs.to_pylist():
        for i in range(r["records"]):
            pairs[r["upstream_start"] + i] = r["downstream_start"] + i
    assert sorted(pairs) == upstream
    for u, d in pairs.items():
        assert landed[d] == b"v%d" % u, f"upstream {u} paired with downstream {d}, which holds {landed[d]!r}"


class _Record:
    """A consumed source record, as confluent-kafka's Message shows it."""

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def error(self):
        return None

    def key(self):
        return None

    def value(self):
        return b"v%d" % self._o

    def timestamp(self):
        return (1, 1_700_000_000_000 + self._o)

    def headers(self):
        return None


class _SourcePartitions:
    """A consumer of the assigned partitions' records from their assigned offsets, all at once."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.assigned = []

    def assign(self, tps):
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def unassign(self):
        self.assigned = []

    def consume(self, num_messages=1, timeout=-1):
        out = [_Record(t, p, o) for t, p, start in self.assigned for o in range(start, self.end)]
        self.assigned = []
        return out[:num_messages]


def test_direct_source_pairs_each_record_with_its_own_report_when_reports_arrive_out_of_order(monkeypatch):
    from replicator.datapath import directcopy, source

    wspec = WriterSpec("primary", "dr", (("test.target", "reordering-direct"),), (("orders", "primary.orders"),))
    spec = source.SourceSpec(wspec, (("test.source", "direct"),), (("orders", 2),), ())
    target = RetriedRequestLandsLast(request=3)
    monkeypatch.setitem(writer._PRODUCERS, wspec.producer_config, target)
    monkeypatch.setitem(directcopy._CONSUMERS, spec.consumer_config, _SourcePartitions(end=110))
    (rows,) = directcopy.mirror_ranges(spec, [("orders", 0, 100, 110), ("orders", 1, 104, 110)])
    for partition, upstream in ((0, range(100, 110)), (1, range(104, 110))):
        landed = target.log[("primary.orders", partition)]
        pairs = {}
        for r in rows.to_pylist():
            if r["partition"] == partition:
                for i in range(r["records"]):
                    pairs[r["upstream_start"] + i] = r["downstream_start"] + i
        assert sorted(pairs) == list(upstream)
        for u, d in pairs.items():
            assert landed[d] == b"v%d" % u, f"upstream {u} paired with downstream {d}, which holds {landed[d]!r}"
    assert target.log[("primary.orders", 0)][:3] == [b"v103", b"v104", b"v105"]  # reordered on the target


def test_idempotence_off_keeps_one_request_in_flight_whatever_the_user_set():
    from sparkmirror.model.clients import librdkafka_config

    for extra, was in (({}, None), ({"max.in.flight.requests.per.connection": "5"}, "5")):
        user = librdkafka_config({"bootstrap.servers": "b:9092", "enable.idempotence": "false", **extra}, "producer")
        conf, notes = writer_producer_config(user)
        assert conf["enable.idempotence"] == "false" and conf["max.in.flight"] == "1"
        assert len(notes) == 1 and "max.in.flight.requests.per.connection = 1" in notes[0]
        assert (f"not {was}" in notes[0]) == (was is not None)


def test_idempotent_and_exactly_once_producers_keep_their_settings_or_get_idempotence():
    conf, notes = writer_producer_config({"max.in.flight": "5"})
    assert conf["enable.idempotence"] == "true" and conf["max.in.flight"] == "5" and notes == []
    conf, notes = writer_producer_config({"enable.idempotence": "false", "max.in.flight": "1"})
    assert conf["max.in.flight"] == "1" and notes == []  # already what order needs: nothing to say
    conf, notes = writer_producer_config({"enable.idempotence": "False"}, exactly_once=True)
    assert conf["enable.idempotence"] == "true" and "exactly-once" in notes[0]


def test_librdkafka_runs_the_writer_producer_with_one_request_in_flight():
    """librdkafka's own dump of its effective settings (debug=conf), taken at creation."""
    import logging

    from confluent_kafka import Producer

    lines = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = logging.getLogger("test.librdkafka.conf")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    conf, _notes = writer_producer_config({"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": "false",
                                           "max.in.flight": "5"})
    conf.pop("log_level")
    producer = Producer({**conf, "debug": "conf", "logger": logger})
    producer.poll(0.1)
    effective = [line.split("]:", 1)[-1].strip() for line in lines if "CONF" in line or " = " in line]
    assert "max.in.flight.requests.per.connection = 1" in effective, effective
    assert "enable.idempotence = false" in effective
