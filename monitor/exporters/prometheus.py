"""Prometheus exposition of the latest Evaluation: the text /metrics serves.

Every scrape is rendered from the newest Evaluation, so series of partitions,
topics or groups that are gone simply stop being exported (no stale label sets
pile up), and counters come from the state's own running totals.

The monitor writes the text format itself, from the same ``samples()`` the OTel
exporter reads, and once per evaluation. prometheus-client's ``generate_latest``
over a collector would build a Metric and a Sample object for every series and sort
each one's labels on every scrape, in one piece the event loop cannot interrupt;
at the partition counts the monitor is built for that was most of a scrape's cost
(bench/NOTES.md, Monitor at scale). Only prometheus-client's number formatting is
used; tests read the text back with prometheus-client's own parser.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator

from prometheus_client.utils import floatToGoString

from sparkmirror import metrics as m
from monitor.evaluator.results import Evaluation
from monitor.pacing import STEP_SECONDS, Pacer, finish, run_in_steps
from monitor.exporters.samples import (histogram, partition_figures, partition_level, partition_samples, samples,
                                      served_specs)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Exposition:
    """The /metrics text of ``get_evaluation()`` (None before the first evaluation: empty), kept
    for every scrape of the same evaluation."""

    def __init__(self, get_evaluation: Callable[[], Evaluation | None], version: str = "") -> None:
        self.get_evaluation = get_evaluation
        self.version = version
        self.rendered: tuple[Evaluation, bytes] | None = None  # the newest evaluation's text
        self.partition_lines: dict = {}  # see exposition_steps
        self.rendering: tuple[Evaluation, asyncio.Future] | None = None  # see render_on_loop


def build_registry(get_evaluation: Callable[[], Evaluation | None], version: str = "") -> Exposition:
    """The monitor's /metrics source: its own Exposition; nothing is registered with prometheus-client."""
    return Exposition(get_evaluation, version)


def render(source: Exposition) -> bytes:
    """The exposition text of the newest evaluation, in one go."""
    ev = source.get_evaluation()
    if ev is None:
        return b""
    cached = source.rendered
    if cached is not None and cached[0] is ev:
        return cached[1]  # another scrape of the same evaluation
    body = finish(exposition_steps(ev, source.version, source.partition_lines))
    source.rendered = (ev, body)
    return body


async def render_on_loop(source: Exposition) -> bytes:
    """``render`` on the event loop, in steps of at most ~STEP_SECONDS each with the loop free in
    between: no worker thread holds the GIL against the loop's other work (the evaluation, the
    collectors) for a whole large exposition. Scrapes of the same evaluation share one render."""
    ev = source.get_evaluation()
    if ev is None:
        return b""
    cached = source.rendered
    if cached is not None and cached[0] is ev:
        return cached[1]
    running = source.rendering
    if running is None or running[0] is not ev:
        running = (ev, asyncio.ensure_future(_render_in_steps(source, ev)))
        source.rendering = running
    return await asyncio.shield(running[1])


async def _render_in_steps(source: Exposition, ev: Evaluation) -> bytes:
    body = await run_in_steps(exposition_steps(ev, source.version, source.partition_lines))
    source.rendered = (ev, body)
    return body


def exposition(ev: Evaluation, version: str = "", partition_lines: dict | None = None) -> bytes:
    """``exposition_steps`` in one go."""
    return finish(exposition_steps(ev, version, partition_lines))


def exposition_steps(ev: Evaluation, version: str = "", partition_lines: dict | None = None,
                     clock: Callable[[], float] = time.perf_counter) -> Generator[None, None, bytes]:
    """The Prometheus text format (0.0.4) of the evaluation's samples: for each served metric,
    ``# HELP`` and ``# TYPE`` and a line per series, labels in name order.

    Each metric's label names are sorted once and each series is one formatted line.
    ``partition_lines`` (kept by the caller between renders) holds each partition's lines with
    the figures they show: a partition whose figures did not change since the previous render
    (most of them, most of the time) costs a comparison, not five formatted lines.

    Yields whenever a step has worked for STEP_SECONDS (by ``clock``), as the evaluation does.
    """
    pacer = Pacer(clock, STEP_SECONDS)
    specs = served_specs(ev.granularity)
    lines: dict[str, list[str]] = {spec.name: [] for spec in specs}
    layout = {spec.name: _layout(spec) for spec in specs}

    def line(spec: m.MetricSpec, labels: tuple[str, ...], value: float) -> str:
        name, order = layout[spec.name]
        return f"{name}{_labels(spec.labels, labels, order)} {floatToGoString(value)}\n"

    for spec, labels, value in samples(ev, version, partitions=False):
        out = lines.get(spec.name)
        if out is not None:
            out.append(line(spec, labels, value))
        if pacer.due():
            yield
    if partition_level(ev):
        # Updated in place: an unchanged partition keeps its entry, key included, and an entry
        # holds only tuples of strings and numbers, which the garbage collector stops tracking:
        # the partitions' lines are not walked by every full collection.
        kept = partition_lines if partition_lines is not None else {}
        seen = 0
        only_not_ok = ev.series == "not-ok"
        for flow in ev.flows:
            for p in flow.partitions:
                if only_not_ok and p.status == "OK":
                    continue
                seen += 1
                key, figures = (flow.name, p.topic, p.partition), partition_figures(p)
                hit = kept.get(key)
                if hit is None or hit[0] != figures:
                    hit = kept[key] = (figures, tuple((spec.name, line(spec, labels, value))
                                                      for spec, labels, value in partition_samples(flow.name, p)
                                                      if spec.name in lines))
                for name, text in hit[1]:
                    lines[name].append(text)
                if pacer.due():
                    yield
        if len(kept) != seen:  # partitions gone (or now OK with series=not-ok): their lines go
            shown = {(flow.name, p.topic, p.partition) for flow in ev.flows for p in flow.partitions
                     if not (only_not_ok and p.status == "OK")}
            for key in [key for key in kept if key not in shown]:
                del kept[key]
    if m.HEARTBEAT_LATENCY.name in lines:
        for flow in ev.flows:
            _histogram_lines(lines[m.HEARTBEAT_LATENCY.name], m.HEARTBEAT_LATENCY.name, flow.name, *histogram(flow))
    if m.FLOW_LAG_OBSERVED.name in lines:  # fed by every evaluation (monitor.rpo)
        for flow_name, lag in sorted((ev.extra.get("lag_histograms") or {}).items()):
            if lag is not None:
                _histogram_lines(lines[m.FLOW_LAG_OBSERVED.name], m.FLOW_LAG_OBSERVED.name, flow_name, *lag)
    text = []
    for spec in specs:
        name = layout[spec.name][0]
        help_text = spec.help.replace("\\", r"\\").replace("\n", r"\n")
        text.append(f"# HELP {name} {help_text}\n# TYPE {name} {spec.kind}\n")
        text.extend(lines[spec.name])
    return "".join(text).encode()


def _histogram_lines(out: list[str], name: str, flow: str, buckets: list[tuple[str, float]], total: float) -> None:
    base = _escape(flow)
    for le, count in buckets:
        out.append(f'{name}_bucket{{flow="{base}",le="{le}"}} {floatToGoString(count)}\n')
    out.append(f'{name}_count{{flow="{base}"}} {floatToGoString(buckets[-1][1])}\n')
    out.append(f'{name}_sum{{flow="{base}"}} {floatToGoString(total)}\n')


def _layout(spec: m.MetricSpec) -> tuple[str, list[int]]:
    """(the exposed name, label positions in name order) of a metric."""
    name = spec.base_name + "_total" if spec.kind == "counter" else spec.name
    return name, sorted(range(len(spec.labels)), key=lambda i: spec.labels[i])


def _labels(names: tuple[str, ...], values: tuple[str, ...], order: list[int]) -> str:
    if not names:
        return ""
    return "{" + ",".join(f'{names[i]}="{_escape(values[i])}"' for i in order) + "}"


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')
    return value
