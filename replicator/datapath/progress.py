"""The replicator's own figures, served on the driver for Prometheus and the monitor.

Per flow: batches, records, bytes, offset-syncs written, the duration of each
batch and the newest source-to-target latency. Names come from monitor.metrics,
the one list of every metric sparkmirror exports. ``--metrics-listen`` (default
127.0.0.1:9465) chooses the address; ``off`` disables it.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from monitor import metrics as m
from replicator.errors import UsageError

log = logging.getLogger("sparkmirror.replicate")


def parse_listen(value: str) -> tuple[str, int] | None:
    if value.lower() in ("off", "none", "0", ""):
        return None
    host, _, port = value.rpartition(":")
    try:
        return (host or "127.0.0.1", int(port))
    except ValueError:
        raise UsageError(f"--metrics-listen {value!r} is not HOST:PORT", hint="for example 127.0.0.1:9465, or off") from None


class ReplicatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry

        def counter(spec):
            return Counter(spec.base_name, spec.help, spec.labels, registry=r)

        def gauge(spec):
            return Gauge(spec.name, spec.help, spec.labels, registry=r)

        self.batches = counter(m.REPLICATOR_BATCHES)
        self.records = counter(m.REPLICATOR_RECORDS)
        self.bytes = counter(m.REPLICATOR_BYTES)
        self.offset_syncs = counter(m.REPLICATOR_OFFSET_SYNCS)
        self.heartbeats = counter(m.REPLICATOR_HEARTBEATS_SENT)
        self.batch_duration = Histogram(m.REPLICATOR_BATCH_DURATION.name, m.REPLICATOR_BATCH_DURATION.help,
                                        m.REPLICATOR_BATCH_DURATION.labels,
                                        buckets=m.REPLICATOR_BATCH_DURATION.buckets, registry=r)
        self.latency = gauge(m.REPLICATOR_LATENCY_MAX)
        self.last_batch = gauge(m.REPLICATOR_LAST_BATCH)
        self.partitions = gauge(m.REPLICATOR_PARTITIONS)

    def serve(self, listen: tuple[str, int] | None) -> None:
        if listen is None:
            return
        host, port = listen
        try:
            start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise UsageError(f"cannot serve replicator metrics on {host}:{port}: {exc.strerror}",
                             hint="choose another --metrics-listen HOST:PORT, or 'off'") from None
        log.info("replicator metrics on http://%s:%d/metrics", host, port)

    def batch(self, flow: str, records: int, nbytes: int, syncs: int, seconds: float, max_latency_ms: int,
              finished_at: float) -> None:
        self.batches.labels(flow).inc()
        self.records.labels(flow).inc(records)
        self.bytes.labels(flow).inc(nbytes)
        self.offset_syncs.labels(flow).inc(syncs)
        self.batch_duration.labels(flow).observe(seconds)
        if records:
            self.latency.labels(flow).set(max_latency_ms / 1000)
        self.last_batch.labels(flow).set(finished_at)


#: The process-wide instance; flows and heartbeat emitters report into it.
METRICS: ReplicatorMetrics | None = None


def metrics() -> ReplicatorMetrics:
    global METRICS
    if METRICS is None:
        METRICS = ReplicatorMetrics()
    return METRICS
