"""Heartbeat loop edge cases that need no cluster."""

from __future__ import annotations

import threading

from replicator.control.heartbeats import HeartbeatEmitter
from replicator.model.config import parse_config


def test_negative_interval_switches_heartbeats_off():
    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\nemit.heartbeats.interval.seconds = -1\n")
    emitter = HeartbeatEmitter(config, config.flow("A", "B"))
    done = threading.Event()
    threading.Thread(target=lambda: (emitter.run(threading.Event()), done.set()), daemon=True).start()
    assert done.wait(5), "with interval -1 the loop must return at once, not spin"
    assert emitter.sent == emitter.failed == 0
