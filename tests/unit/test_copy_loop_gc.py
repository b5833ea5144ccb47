"""The copy loops run with Python's cyclic garbage collector paused, and leave it as they found it.

Spark reuses its Python workers for task after task: a loop that left the collector off
would leave it off for everything the worker runs next, and one that turned it on would
override a worker that had it off. The producer and consumer here are the pairing test's
fakes; what is tested is the collector's state while records are produced and afterwards.
"""

from __future__ import annotations

import gc

import pytest

from replicator.datapath import writer
from replicator.datapath.writer import WriterSpec, write_partition
from tests.unit.test_delivery_pairing import RetriedRequestLandsLast, _SourcePartitions, _spark_rows


class _Watching(RetriedRequestLandsLast):
    """Records whether the collector was on at each produce; fails at record ``fail_at``."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(request=3)
        self.gc_on: list[bool] = []
        self.fail_at = fail_at

    def produce(self, *args, **kwargs):
        self.gc_on.append(gc.isenabled())
        if self.fail_at is not None and len(self.gc_on) > self.fail_at:
            raise RuntimeError("the producer broke")
        super().produce(*args, **kwargs)


@pytest.fixture
def gc_state():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


def _direct(monkeypatch, target):
    from replicator.datapath import directcopy, source

    wspec = WriterSpec("primary", "dr", (("test.target", f"gc-{id(target)}"),), (("orders", "primary.orders"),))
    spec = source.SourceSpec(wspec, (("test.source", f"gc-{id(target)}"),), (("orders", 2),), ())
    monkeypatch.setitem(writer._PRODUCERS, wspec.producer_config, target)
    monkeypatch.setitem(directcopy._CONSUMERS, spec.consumer_config, _SourcePartitions(end=110))
    return lambda: list(directcopy.mirror_ranges(spec, [("orders", 0, 100, 110), ("orders", 1, 104, 110)]))


def _arrow(monkeypatch, target):
    spec = WriterSpec("primary", "dr", (("test.target", f"gc-{id(target)}"),), (("orders", "primary.orders"),))
    monkeypatch.setitem(writer._PRODUCERS, spec.producer_config, target)
    return lambda: list(write_partition(spec, [_spark_rows("orders", 0, list(range(100, 110)))]))


@pytest.mark.parametrize("loop", [_direct, _arrow], ids=["direct source", "writer over Spark's Kafka source"])
@pytest.mark.parametrize("enabled_before", [True, False], ids=["collector on", "collector off"])
def test_the_copy_loop_pauses_the_collector_and_restores_it(monkeypatch, gc_state, loop, enabled_before):
    gc.enable() if enabled_before else gc.disable()
    target = _Watching()
    (runs,) = loop(monkeypatch, target)()
    assert sum(r["records"] for r in runs.to_pylist()) == len(target.gc_on) > 0
    assert not any(target.gc_on), "a record was produced with the cyclic collector on"
    assert gc.isenabled() == enabled_before


@pytest.mark.parametrize("loop", [_direct, _arrow], ids=["direct source", "writer over Spark's Kafka source"])
def test_a_failing_copy_loop_turns_the_collector_back_on(monkeypatch, gc_state, loop):
    gc.enable()
    target = _Watching(fail_at=4)
    with pytest.raises(RuntimeError, match="the producer broke"):
        loop(monkeypatch, target)()
    assert target.gc_on == [False] * 5
    assert gc.isenabled()
