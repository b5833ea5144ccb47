"""The same instruments through opentelemetry-sdk, pushed over OTLP/HTTP when configured.

Every MetricSpec becomes one OTel instrument with the same name (counters
without ``_total``, which an OTel->Prometheus path appends again), its UCUM
unit and help text: gauges are observable gauges, counters observable
counters (cumulative, read from the Evaluation like the Prometheus exporter),
and the heartbeat latency is a real histogram fed by every latency sample. An
OTel histogram records samples, not the cumulative bucket counts the Prometheus
exporter reads, so the exporter takes the samples the state kept since its last
read (``latency_samples``, ``monitor.windows.LatencySamples``) whenever a reader
collects: before any instrument is read, each sample once. Nothing pushes into
the exporter.

OTel has no infinite gauge value (the SDK drops one with a warning at every
collection): where the Prometheus exporter says +Inf (a catch-up that never
ends, retention that never deletes), the OTel instrument has no point for that
series; /api/status says which.

Export happens only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) is set; the standard OTEL_* variables
(headers, timeout, OTEL_METRIC_EXPORT_INTERVAL, OTEL_SERVICE_NAME,
OTEL_RESOURCE_ATTRIBUTES) apply. Without it no reader exists, so the
callbacks never run and the SDK costs nothing.
"""

from __future__ import annotations

import logging
import math
import os
from collections import defaultdict
from collections.abc import Callable

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from sparkmirror import metrics as m
from monitor.evaluator.results import Evaluation
from monitor.exporters.samples import samples, served_specs

log = logging.getLogger(__name__)


def otlp_configured(environ=os.environ) -> bool:
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))


def otel_exports(readers: list[MetricReader] | None = None) -> bool:
    """Whether an OtelExporter made with ``readers`` has any (the default: OTLP when configured)."""
    return bool(readers) if readers is not None else otlp_configured()


class OtelExporter:
    """OTel instruments over ``get_evaluation()``; ``readers`` default to OTLP when configured."""

    def __init__(self, get_evaluation: Callable[[], Evaluation | None], version: str = "",
                 readers: list[MetricReader] | None = None,
                 latency_samples: Callable[[], tuple[list[tuple[str, float]], int]] | None = None) -> None:
        self.get_evaluation = get_evaluation
        self.latency_samples = latency_samples
        self.latency_samples_dropped = 0
        self.version = version
        if readers is None:
            readers = []
            if otel_exports():
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

                readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
                log.info("pushing metrics over OTLP/HTTP to %s", os.environ.get(
                    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
        self.enabled = bool(readers)
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "sparkmirror-monitor"),
                                    "service.version": version})
        self.provider = MeterProvider(metric_readers=readers, resource=resource)
        meter = self.provider.get_meter("sparkmirror.monitor", version)
        self._cache: tuple[Evaluation, dict[str, list[tuple[tuple[str, ...], float]]]] | None = None
        self._latency = None
        for spec in served_specs("partition"):
            kwargs = {"unit": spec.otel_unit, "description": spec.help}
            if spec is m.FLOW_LAG_OBSERVED:
                continue  # Prometheus only: an OTel backend takes percentiles of the flow lag gauge itself
            if spec is m.HEARTBEAT_LATENCY:
                self._latency = meter.create_histogram(spec.base_name, explicit_bucket_boundaries_advisory=list(
                    spec.buckets or ()), **kwargs)
            elif spec.kind == "counter":
                meter.create_observable_counter(spec.base_name, callbacks=[self._callback(spec)], **kwargs)
            else:
                meter.create_observable_gauge(spec.base_name, callbacks=[self._callback(spec)], **kwargs)

    def record_latency(self, flow: str, seconds: float) -> None:
        """One heartbeat latency sample into the histogram."""
        if self._latency is not None:
            self._latency.record(seconds, {"flow": flow})

    def _take_latency_samples(self) -> None:
        """Record the samples kept since the last read. Called by every observable callback: the SDK
        runs those before it reads the instruments, so the samples count in this very collection."""
        if self.latency_samples is None:
            return
        samples, dropped = self.latency_samples()
        for flow, seconds in samples:
            self.record_latency(flow, seconds)
        if dropped:
            self.latency_samples_dropped += dropped
            log.warning("%d heartbeat latency samples are missing from the OpenTelemetry histogram: more arrived "
                        "between two collections than are kept", dropped)

    def _by_spec(self) -> dict[str, list[tuple[tuple[str, ...], float]]]:
        ev = self.get_evaluation()
        if ev is None:
            return {}
        if self._cache is None or self._cache[0] is not ev:
            grouped: dict[str, list[tuple[tuple[str, ...], float]]] = defaultdict(list)
            for spec, labels, value in samples(ev, self.version):
                grouped[spec.name].append((labels, value))
            self._cache = (ev, grouped)
        return self._cache[1]

    def _callback(self, spec: m.MetricSpec):
        def observe(_options: CallbackOptions):
            self._take_latency_samples()
            return [Observation(value, dict(zip(spec.labels, labels)))
                    for labels, value in self._by_spec().get(spec.name, ()) if math.isfinite(value)]
        return observe

    def shutdown(self, timeout: float = 5.0) -> None:
        try:
            self.provider.shutdown(timeout_millis=int(timeout * 1000))
        except Exception as exc:  # a collector that is gone must not block the exit
            log.warning("OpenTelemetry shutdown: %s", exc)
