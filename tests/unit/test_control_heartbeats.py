"""Heartbeat loop edge cases that need no cluster."""

from __future__ import annotations

import threading

from replicator.control.heartbeats import HeartbeatEmitter
from sparkmirror.errors import ClusterError
from replicator.model.config import parse_config


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
