"""Heartbeat loop edge cases that need no cluster."""

from __future__ import annotations

import threading

from replicator.control.heartbeats import HeartbeatEmitter
from sparkmirror.errors import ClusterError
from sparkmirror.model.parse import parse_config


def test_negative_interval_switches_heartbeats_off():
    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\nemit.heartbeats.interval.seconds = -1\n")
    emitter = HeartbeatEmitter(config, config.flow("A", "B"))
    done = threading.Event()
    threading.Thread(target=lambda: (emitter.run(threading.Event()), done.set()), daemon=True).start()
    assert done.wait(5), "with interval -1 the loop must return at once, not spin"
    assert emitter.sent == emitter.failed == 0


def test_heartbeats_start_once_prepare_works_after_a_failure():
    """A heartbeats topic that cannot be made at first (target down, no ACL yet) is tried again,
    as the control-plane loops do, instead of leaving heartbeats off for the life of the process."""
    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\nemit.heartbeats.interval.seconds = 1\n")
    emitter = HeartbeatEmitter(config, config.flow("A", "B"))
    emitter.prepare_retry_seconds = 0.01
    prepares, emitted = [], threading.Event()

    def prepare():
        prepares.append(1)
        if len(prepares) == 1:
            raise ClusterError("cluster B unreachable")

    emitter.prepare = prepare
    emitter.emit_once = emitted.set
    stop = threading.Event()
    runner = threading.Thread(target=emitter.run, args=(stop,), daemon=True)
    runner.start()
    try:
        assert emitted.wait(10), "heartbeats stayed off after one failed prepare()"
        assert len(prepares) == 2
    finally:
        stop.set()
        runner.join(10)


class _SilentProducer:
    """A producer that takes heartbeats and never reports on them (what one did after its cluster's outage)."""

    def __init__(self) -> None:
        self.queued, self.purged = 0, False

    def produce(self, *args, **kwargs) -> None:
        self.queued += 1

    def poll(self, timeout) -> int:
        return 0

    def __len__(self) -> int:
        return self.queued

    def purge(self) -> None:
        self.purged, self.queued = True, 0

    def flush(self, timeout) -> int:
        return self.queued


def test_a_producer_that_stops_reporting_is_replaced(monkeypatch, caplog):
    """Heartbeats waiting with no delivery report for longer than the limit: a new producer takes
    over (the waiting heartbeats are dropped), so a producer stuck after an outage does not stop
    heartbeats, and page, for good. A producer with nothing waiting is never replaced."""
    from replicator.control import heartbeats

    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\nemit.heartbeats.interval.seconds = 1\n")
    clock = [1000.0]
    monkeypatch.setattr(heartbeats.time, "monotonic", lambda: clock[0])
    made: list[_SilentProducer] = []

    def new_producer():
        made.append(_SilentProducer())
        return made[-1]

    emitter = HeartbeatEmitter(config, config.flow("A", "B"))
    emitter._new_producer = new_producer
    emitter._producer = new_producer()
    emitter._last_report = clock[0]
    for _ in range(30):  # 29 s of heartbeats nobody reports on: not yet
        emitter.emit_once()
        clock[0] += 1.0
    assert len(made) == 1 and emitter.replaced == 0
    clock[0] += 1.0
    emitter.emit_once()
    assert len(made) == 2 and emitter.replaced == 1 and made[0].purged
    assert made[1].queued == 1  # this round's heartbeat went to the new producer
    assert "no delivery report for 31 s; replacing the producer" in caplog.text

    for _ in range(59):  # still no report (the cluster is simply down): the next wait is twice as long
        clock[0] += 1.0
        emitter.emit_once()
    assert len(made) == 2
    clock[0] += 1.0
    emitter.emit_once()
    assert len(made) == 3

    idle = _SilentProducer()  # nothing waiting: an old last report means nothing
    emitter._producer, emitter._last_report = idle, clock[0] - 3600
    emitter._replace_if_stuck()
    assert emitter._producer is idle
