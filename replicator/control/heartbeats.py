"""Heartbeats, with MM2's semantics.

For every ordered cluster pair X->Y whose ``emit.heartbeats.enabled`` is true —
including pairs whose replication is disabled — a Heartbeat(X, Y, now) goes into
the ``heartbeats`` topic on Y every ``emit.heartbeats.interval.seconds``. In a
one-way A->B setup, the B->A pair writes into A's ``heartbeats`` and the A->B flow
carries it to B as ``A.heartbeats``: a monitor on B reads end-to-end latency
from it.
"""

from __future__ import annotations

import logging
import threading
import time

from replicator.kafkaclients import admin, producer
from replicator.control.loop import run_loop
from replicator.control.topics import ensure_internal_topic
from replicator.metrics import metrics
from sparkmirror.model.records import Heartbeat

log = logging.getLogger("sparkmirror.heartbeats")

#: A producer that has had heartbeats waiting this long (or ten intervals, if longer) without a
#: single delivery report, success or failure, is replaced by a new one. Once, after its cluster
#: came back from an outage, the producer of the heartbeats into that cluster delivered nothing
#: more for minutes while every other client of it worked, and the monitor paged on stopped
#: heartbeats over a healthy flow. Heartbeats are disposable: the waiting ones are dropped.
STUCK_AFTER_S = 30.0


class HeartbeatEmitter:
    #: Seconds between attempts of a failing ``prepare()``; None: the control loops' default.
    prepare_retry_seconds: float | None = None

    def __init__(self, config, flow) -> None:
        self.flow = flow
        self.topic = flow.policy.heartbeats_topic()
        self.interval = float(flow.emit_heartbeats_interval_seconds)
        self._admin = admin(config, flow.target, flow)
        self._new_producer = lambda: producer(config, flow.target, flow, **{"linger.ms": 0, "acks": "all"})
        self._producer = self._new_producer()
        self.sent = 0
        self.failed = 0
        self.replaced = 0  # producers replaced because they stopped reporting
        self._last_error_logged = 0.0
        self._last_report = time.monotonic()  # the newest delivery report (success or failure), or the start
        # how long heartbeats may wait unreported before the producer is replaced: doubles with every
        # replacement that brings no report either (the cluster is simply down), back once one comes
        self._stuck_base = max(STUCK_AFTER_S, 10 * self.interval)
        self._stuck_after = self._stuck_base

    def prepare(self) -> None:
        ensure_internal_topic(self._admin, self.flow.target, self.topic,
                                        self.flow.heartbeats_topic_replication_factor)

    def emit_once(self) -> None:
        hb = Heartbeat(self.flow.source, self.flow.target, int(time.time() * 1000))
        # Written to the heartbeats topic of this pair's target, they are what the reverse flow
        # (target->source) copies back: label them with that flow, the monitor's flow label.
        sent_metric = metrics().heartbeats.labels(f"{self.flow.target}->{self.flow.source}")

        def on_delivery(err, msg):
            self._last_report = time.monotonic()
            if err is None:
                self._stuck_after = self._stuck_base
                self.sent += 1
                sent_metric.inc()
            else:
                self.failed += 1
                now = time.monotonic()
                if now - self._last_error_logged > 60:
                    self._last_error_logged = now
                    log.warning("heartbeat %s->%s not delivered to %s on %s: %s", self.flow.source,
                                self.flow.target, self.topic, self.flow.target, err)

        self._replace_if_stuck()
        try:
            # Partition 0, as MirrorHeartbeatTask writes it.
            self._producer.produce(self.topic, key=hb.encode_key(), value=hb.encode_value(), partition=0,
                                   timestamp=hb.timestamp_ms, on_delivery=on_delivery)
        except BufferError:
            pass  # the target is unreachable and the queue is full; keep trying
        self._producer.poll(0)

    def _replace_if_stuck(self) -> None:
        waiting = len(self._producer)
        if not waiting:
            self._last_report = time.monotonic()  # nothing outstanding: nothing can be late
            return
        silent = time.monotonic() - self._last_report
        if silent < self._stuck_after:
            return
        log.warning("heartbeats %s->%s: %d waiting in the producer for %s on %s and no delivery report for %.0f s; "
                    "replacing the producer (the waiting heartbeats are dropped)", self.flow.source,
                    self.flow.target, waiting, self.topic, self.flow.target, silent)
        old = self._producer
        self._producer = self._new_producer()
        self.replaced += 1
        self._last_report = time.monotonic()
        self._stuck_after = min(2 * self._stuck_after, 10 * self._stuck_base)
        try:
            old.purge()
            old.flush(0)
        except Exception as exc:  # a client that no longer answers: it is dropped either way
            log.debug("heartbeats: dropping the old producer: %r", exc)

    def run(self, stop: threading.Event) -> None:
        """Emit every ``interval`` seconds until ``stop``, in the control loops' ``run_loop``: a
        heartbeats topic that cannot be made yet (target down, ACL not granted) is tried again."""
        if self.interval <= 0:
            # MM2 schedules nothing for a negative interval: -1 switches heartbeats off.
            log.info("heartbeats %s->%s off (emit.heartbeats.interval.seconds = %.0f)", self.flow.source,
                     self.flow.target, self.interval)
            return

        def prepare() -> None:
            self.prepare()
            log.info("heartbeats %s->%s every %.0f s into %s on %s", self.flow.source, self.flow.target,
                     self.interval, self.topic, self.flow.target)

        run_loop(f"heartbeats {self.flow.source}->{self.flow.target}", self.interval, self.emit_once, stop,
                 prepare, close=lambda: self._producer.flush(5), retry_seconds=self.prepare_retry_seconds)
