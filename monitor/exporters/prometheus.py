"""Prometheus exposition of the latest Evaluation (prometheus-client).

A custom collector renders every scrape from the newest Evaluation, so series
of partitions, topics or groups that are gone simply stop being exported (no
stale label sets pile up), and counters come from the state's own running
totals. The registry is the monitor's own, never the global one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from monitor import metrics as m
from monitor.evaluator import Evaluation
from monitor.exporters.samples import histogram, samples, served_specs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class EvaluationCollector:
    """prometheus-client collector over ``get_evaluation()`` (None before the first one)."""

    def __init__(self, get_evaluation: Callable[[], Evaluation | None], version: str = "") -> None:
        self.get_evaluation = get_evaluation
        self.version = version

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: families depend on the evaluation

    def collect(self) -> Iterator[Metric]:
        ev = self.get_evaluation()
        if ev is None:
            return
        families = {spec.name: _family(spec) for spec in served_specs(ev.granularity)}
        for spec, labels, value in samples(ev, self.version):
            family = families.get(spec.name)
            if family is not None:
                family.add_metric(list(labels), value)
        hist = families[m.HEARTBEAT_LATENCY.name]
        for flow in ev.flows:
            buckets, total = histogram(flow)
            hist.add_metric([flow.name], buckets, total)
        yield from families.values()


def _family(spec: m.MetricSpec) -> Metric:
    if spec.kind == "counter":
        return CounterMetricFamily(spec.base_name, spec.help, labels=list(spec.labels))
    if spec.kind == "histogram":
        return HistogramMetricFamily(spec.name, spec.help, labels=list(spec.labels))
    return GaugeMetricFamily(spec.name, spec.help, labels=list(spec.labels))


def build_registry(get_evaluation: Callable[[], Evaluation | None], version: str = "") -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EvaluationCollector(get_evaluation, version))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
