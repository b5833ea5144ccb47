"""The same instruments through opentelemetry-sdk, pushed over OTLP/HTTP when configured.

Every MetricSpec becomes one OTel instrument with the same name (counters
without ``_total``, which an OTel->Prometheus path appends again), its UCUM
unit and help text: gauges are observable gauges, counters observable
counters (cumulative, read from the Evaluation like the Prometheus exporter),
and the heartbeat latency is a real histogram fed by every latency sample.

Export happens only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) is set; the standard OTEL_* variables
(headers, timeout, OTEL_METRIC_EXPORT_INTERVAL, OTEL_SERVICE_NAME,
OTEL_RESOURCE_ATTRIBUTES) apply. Without it no reader exists, so the
callbacks never run and the SDK costs nothing.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from sparkmirror import metrics as m
from monitor.evaluator import Evaluation
from monitor.exporters.samples import samples, served_specs

log = logging.getLogger(__name__)


def otlp_configured(environ=os.environ) -> bool:
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))


class OtelExporter:
    """OTel instruments over ``get_evaluation()``; ``readers`` default to OTLP when configured."""

    def __init__(self, get_evaluation: Callable[[], Evaluation | None], version: str = "",
                 readers: list[MetricReader] | None = None) -> None:
        self.get_evaluation = get_evaluation
        self.version = version
        if readers is None:
            readers = []
            if otlp_configured():
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
            if spec is m.HEARTBEAT_LATENCY:
                self._latency = meter.create_histogram(spec.base_name, explicit_bucket_boundaries_advisory=list(
                    spec.buckets or ()), **kwargs)
            elif spec.kind == "counter":
                meter.create_observable_counter(spec.base_name, callbacks=[self._callback(spec)], **kwargs)
            else:
                meter.create_observable_gauge(spec.base_name, callbacks=[self._callback(spec)], **kwargs)

    def record_latency(self, flow: str, seconds: float) -> None:
        """State listener: one heartbeat latency sample."""
        if self._latency is not None:
            self._latency.record(seconds, {"flow": flow})

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
            return [Observation(value, dict(zip(spec.labels, labels)))
                    for labels, value in self._by_spec().get(spec.name, ())]
        return observe

    def shutdown(self) -> None:
        try:
            self.provider.shutdown(timeout_millis=5000)
        except Exception as exc:  # a collector that is gone must not block the exit
            log.warning("OpenTelemetry shutdown: %s", exc)
