"""What a task reports of its delivery reports besides the offset pairs: latency, bytes, the culprit.

Latency is the acknowledgement time minus the record's timestamp. Reports are handed over
only inside poll/flush, so the copy loops read the clock once per poll (``tick``), and a
run's latency is worked out from the oldest timestamp reported between two ticks. These
tests check that this gives the same maximum as taking every record's own latency.
"""

from __future__ import annotations

import random

from replicator.datapath import writer
from replicator.datapath.writer import _Placements, runs_batch


class _Msg:
    def __init__(self, offset: int, topic: str = "primary.orders", partition: int = 0, key=None, value=b"") -> None:
        self._o, self._t, self._p, self._k, self._v = offset, topic, partition, key, value

    def offset(self):
        return self._o

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def key(self):
        return self._k

    def value(self):
        return self._v


class _Err:
    def __init__(self, code: int) -> None:
        self._c = code

    def code(self):
        return self._c

    def str(self):
        return "Broker: Message size too large" if self._c == 10 else f"error {self._c}"


def test_latency_per_run_is_the_largest_of_every_records_own(monkeypatch):
    rng = random.Random(7)
    clock = [1_700_000_000.0]
    monkeypatch.setattr(writer.time, "time", lambda: clock[0])
    pl = _Placements()
    expected: dict[tuple[int, int], int] = {}  # (partition, run start) -> largest latency
    upstream = {0: 100, 1: 500}
    downstream = {0: 0, 1: 0}
    run_start = dict(upstream)
    for _tick in range(20):
        clock[0] += rng.uniform(0.001, 0.5)
        pl.tick()
        for _ in range(rng.randint(0, 30)):
            p = rng.choice((0, 1))
            if rng.random() < 0.05:  # a gap on the target: the next report starts a run
                downstream[p] += 3
                run_start[p] = upstream[p]
            ts = pl.now_ms - rng.randint(0, 60_000)
            pl.partition("orders", p).deliver(upstream[p], ts, None, _Msg(downstream[p], partition=p))
            key = (p, run_start[p])
            expected[key] = max(expected.get(key, 0), pl.now_ms - ts)
            upstream[p] += 1
            downstream[p] += 1
    got = {(r.partition, r.u0): r.max_latency for r in pl.runs}
    assert got == expected


def test_bytes_are_the_tasks_on_its_first_run():
    pl = _Placements()
    for u in range(3):
        pl.partition("orders", 0).deliver(u, 0, None, _Msg(u))
    pl.partition("orders", 1).deliver(0, 0, None, _Msg(7, partition=1))
    rows = runs_batch(pl.runs, 1234).to_pylist()
    assert [r["records"] for r in rows] == [3, 1]
    assert [r["bytes"] for r in rows] == [1234, 0]


def test_a_size_rejection_names_the_largest_record_of_the_failed_request():
    pl = _Placements()
    err = _Err(10)
    for u, size in ((40, 10), (41, 5_000_000), (42, 300)):
        pl.partition("orders", 3).deliver(u, 0, err, _Msg(-1, partition=3, key=b"k", value=b"v" * (size - 1)))
    assert "offset 41" in pl.error and "5000000 bytes" in pl.error, pl.error
    assert "source topic orders partition 3" in pl.error and "target topic primary.orders partition 3" in pl.error
