"""The tests' own replicator, with faults to inject where a test wants them.

``FaultyCopier.copy()`` copies every record of a source topic written since its last
call to the mirror topic: same partition, key, value, headers and timestamp, in
order. It writes MM2's offset-syncs (``sparkmirror.model.records.OffsetSync``) into
the flow's offset-syncs topic on the source, by MM2's own rule (OffsetSyncWriter's
``PartitionState.update``): the first record of a partition, a target offset
``offset.lag.max`` or more past the last sync's, an upstream offset that does not
follow the previous one, or a target offset that went back; otherwise the newest sync
waits and is written at the end of the call, as MM2's periodic flush does.

Faults, each at (partition, source offset): ``drop`` (never written), ``value`` (one
byte of the value changed), ``header`` (a header's value changed), ``swap`` (the
record and the next one written in the other order), ``twice`` ((partition, offset,
n): those n records written again right after the n-th), ``delete_source``
((partition, a, b): after copying up to a, ``deleteRecords`` up to b on the source,
so [a, b) is never copied).

``transactional_id``: the target is written in transactions of ``transaction`` records, as
an exactly-once replicator writes it (a commit marker after each); every ``abort_every``-th
transaction is first written and aborted, then written again and committed (an aborted
retry), so the mirror holds markers and aborted records that read_committed never shows.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from sparkmirror.model.records import OffsetSync


class _SyncState:
    """MM2's PartitionState: when an offset-sync is written at once."""

    def __init__(self) -> None:
        self.last_sync_d = -1
        self.prev_u = -1
        self.prev_d = -1

    def update(self, u: int, d: int, lag_max: int) -> bool:
        now = (self.last_sync_d == -1 or d - (self.last_sync_d + 1) >= lag_max or u - self.prev_u != 1
               or d < self.prev_d)
        if now:
            self.last_sync_d = d
        self.prev_u, self.prev_d = u, d
        return now


class FaultyCopier:
    def __init__(self, source: str, target: str, topic: str, remote: str, partitions: int, syncs_topic: str, *,
                 offset_lag_max: int = 100, drop=(), value=(), header=(), swap=(), twice=(),
                 delete_source=None, transactional_id: str | None = None, transaction: int = 200,
                 abort_every: int = 0) -> None:
        self.source, self.target = source, target
        self.topic, self.remote, self.partitions, self.syncs_topic = topic, remote, partitions, syncs_topic
        self.lag_max = offset_lag_max
        self.drop, self.value, self.header, self.swap = set(drop), set(value), set(header), set(swap)
        self.twice = {(p, o): n for p, o, n in twice}
        self.delete_source = delete_source
        self.positions = [0] * partitions
        self.states = [_SyncState() for _ in range(partitions)]
        self.written: dict[tuple[int, int], list[int]] = {}  # (partition, source offset) -> target offsets
        conf = {"bootstrap.servers": target, "linger.ms": 5, "enable.idempotence": True}
        if transactional_id:
            conf["transactional.id"] = transactional_id
        self._producer = Producer(conf)
        self.transaction, self.abort_every = transaction, abort_every
        self.transactions = 0
        if transactional_id:
            self._producer.init_transactions(30)
        self._transactional = bool(transactional_id)
        self._syncs = Producer({"bootstrap.servers": source, "linger.ms": 5})

    def close(self) -> None:
        self._producer.flush(30)
        self._syncs.flush(30)

    # --- reading ----------------------------------------------------------------------
    def _read(self, partition: int, start: int, end: int) -> list:
        if start >= end:
            return []
        c = Consumer({"bootstrap.servers": self.source, "group.id": "faulty-copier", "enable.auto.commit": False,
                      "enable.partition.eof": True, "isolation.level": "read_committed",
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(self.topic, partition, start)])
        out, deadline = [], time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                for m in c.consume(1000, timeout=0.5):
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            return out
                        continue
                    if m.offset() < end:
                        out.append(m)
                    if m.offset() >= end - 1:
                        return out
        finally:
            c.close()
        raise TimeoutError(f"reading {self.topic}[{partition}] {start}..{end}")

    def _high(self, partition: int) -> int:
        c = Consumer({"bootstrap.servers": self.source, "group.id": "faulty-copier"})
        try:
            return c.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=10)[1]
        finally:
            c.close()

    # --- copying ----------------------------------------------------------------------
    def copy(self) -> int:
        """Copy what was written since the last call; returns the records written."""
        total = 0
        for p in range(self.partitions):
            end = self._high(p)
            start = self.positions[p]
            deletion = self.delete_source if self.delete_source and self.delete_source[0] == p else None
            if deletion and start <= deletion[1] < end:
                messages = self._read(p, start, deletion[1])
                total += self._write(p, messages)
                admin = AdminClient({"bootstrap.servers": self.source})
                for f in admin.delete_records([TopicPartition(self.topic, p, deletion[2])]).values():
                    f.result(30)
                messages = self._read(p, deletion[2], end)
            else:
                messages = self._read(p, start, end)
            total += self._write(p, messages)
            self.positions[p] = end
        self.close()
        return total

    def _sequence(self, partition: int, messages: list) -> list:
        seq = []
        for m in messages:
            o = m.offset()
            if (partition, o) in self.drop:
                continue
            value, headers = m.value(), list(m.headers() or [])
            if (partition, o) in self.value:
                value = bytes([value[0] ^ 0x01]) + value[1:]
            if (partition, o) in self.header:
                headers = [(headers[0][0], b"changed")] + headers[1:] if headers else [("h", b"added")]
            seq.append([o, m.key(), value, headers, m.timestamp()[1]])
        i = 0
        while i < len(seq) - 1:
            if (partition, seq[i][0]) in self.swap:
                seq[i], seq[i + 1] = seq[i + 1], seq[i]
                i += 1  # the record moved on is not swapped again
            i += 1
        out = []
        for i, entry in enumerate(seq):
            out.append(entry)
            for (p, o), n in self.twice.items():
                if p == partition and entry[0] == o + n - 1:
                    out.extend(e for e in seq[max(0, i - n + 1):i + 1] if e[0] >= o)
        return out

    def _write(self, partition: int, messages: list) -> int:
        seq = self._sequence(partition, messages)
        landed: list[int | None] = [None] * len(seq)

        def delivered(i):
            def cb(err, msg):
                if err is None:
                    landed[i] = msg.offset()
            return cb

        def send(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                _o, key, value, headers, ts = seq[i]
                self._producer.produce(self.remote, value, key=key, partition=partition, headers=headers or None,
                                       timestamp=ts, on_delivery=delivered(i))
                self._producer.poll(0)

        if not self._transactional:
            send(0, len(seq))
        for lo in range(0, len(seq), self.transaction) if self._transactional else ():
            hi = min(len(seq), lo + self.transaction)
            self.transactions += 1
            if self.abort_every and self.transactions % self.abort_every == 0:
                self._producer.begin_transaction()
                send(lo, hi)
                self._producer.flush(60)  # on the log, then aborted: an aborted retry
                self._producer.abort_transaction(30)
            self._producer.begin_transaction()
            send(lo, hi)
            self._producer.commit_transaction(60)
        self._producer.flush(60)
        if any(d is None for d in landed):
            raise RuntimeError(f"{self.remote}[{partition}]: not every record was acknowledged")
        state, pending = self.states[partition], None
        for (u, *_), d in zip(seq, landed):
            self.written.setdefault((partition, u), []).append(d)
            if state.update(u, d, self.lag_max):
                self._sync(partition, u, d)
                pending = None
            else:
                pending = (u, d)
        if pending is not None:  # MM2's periodic flush of the newest delayed sync
            self._sync(partition, *pending)
        self._syncs.flush(30)
        return len(seq)

    def _sync(self, partition: int, u: int, d: int) -> None:
        s = OffsetSync(self.topic, partition, u, d)
        self._syncs.produce(self.syncs_topic, s.encode_value(), key=s.encode_key(), partition=0)
