"""Exporters over a hand-built Evaluation: Prometheus text, OTel instruments, OTLP push, HTTP routes."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiohttp.test_utils import TestClient, TestServer
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families

from sparkmirror import metrics
from monitor.evaluator import EvaluatorSettings, evaluate
from monitor.exporters.http import HttpSources, build_app
from monitor.exporters.otel import OtelExporter
from monitor.exporters.prometheus import build_registry, render
from monitor.exporters.samples import served_specs
from monitor.history import History
from monitor.facts import Probe, TopicRetention
from monitor.state import OffsetsRow
from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.evaluator import FLOW, T0, beat, make_state


def evaluation(granularity: str = "partition"):
    state, clock = make_state()
    beat(state, clock, 0.03)
    rows = [OffsetsRow("orders", 0, "a.orders", 0, 17, 10, (0, 0)), OffsetsRow("orders", 1, "a.orders", 0, 5, 5, (4, 4))]
    state.record_offsets(FLOW, rows, at=clock.now - 5)  # two samples: a catch-up rate (nothing moved)
    state.record_offsets(FLOW, rows, at=clock.now)
    state.record_probe(FLOW, ("orders", 0), Probe(10, 10, int((T0 - 42) * 1000), 17, T0))
    state.add_checkpoint(FLOW, Checkpoint("billing", "a.orders", 0, 3, 3), int((T0 - 5) * 1000))
    state.set_group_offsets(FLOW, {"billing": {("orders", 0): 6}})
    state.add_sync(FLOW, OffsetSync("orders", 0, 0, 0), int((T0 - 1) * 1000))
    state.add_sync(FLOW, OffsetSync("orders", 0, 9, 9), int((T0 - 1) * 1000))
    state.set_target_group_offsets(FLOW, {"billing": {("a.orders", 0): 9}})  # consuming on b: could fail back
    state.set_record_timestamps(FLOW, {("orders", 0, 3): int((T0 - 60) * 1000),
                                       ("orders", 0, 5): int((T0 - 58) * 1000)}, set())
    state.set_retention(FLOW, {"orders": TopicRetention(3_600_000, None, True)})
    state.record_duration(FLOW, "offsets", 0.012)
    state.cluster_ok("a")
    state.decode_error("b", "a.heartbeats", "heartbeat")
    return evaluate(state, clock.now, EvaluatorSettings(granularity=granularity)), state


def prometheus_samples(ev) -> dict:
    text = render(build_registry(lambda: ev, "1.2.3")).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_prometheus_exposes_the_defined_metrics_with_their_values():
    from monitor.rpo import RpoTracker

    ev, _ = evaluation()
    RpoTracker().annotate(ev)  # as the monitor does: the lag histogram is fed by every evaluation
    # as the monitor does: the audit's newest snapshot per flow (monitor.audit.engine.snapshot)
    ev.extra["audit"] = {FLOW: {"topics": {"orders": {"verified": 90, "missing": 2, "mismatched": 1,
                                                      "duplicated": 0, "expired": 0, "unverifiable": 0}},
                                "coverage": {"loss": 1.0, "content": 0.25}, "exactly_once": True}}
    s = prometheus_samples(ev)
    names = {name for name, _ in s}
    served = served_specs("partition")
    for spec in served:
        assert (spec.name + "_bucket" if spec.kind == "histogram" else spec.name) in names, spec.name
    served_names = {s.name for s in served} | {h.name + x for x in ("_bucket", "_count", "_sum")
                                               for h in (metrics.HEARTBEAT_LATENCY, metrics.FLOW_LAG_OBSERVED)}
    assert {n[:-len("_total")] + "_total" if n.endswith("_total") else n for n in names} <= served_names
    assert s[("sparkmirror_partition_lag_records", (("flow", FLOW), ("partition", "0"), ("topic", "orders")))] == 7
    assert s[("sparkmirror_partition_lag_seconds", (("flow", FLOW), ("partition", "0"), ("topic", "orders")))] == 42
    assert s[("sparkmirror_topic_lag_records", (("flow", FLOW), ("topic", "orders")))] == 7
    assert s[("sparkmirror_flow_lag_seconds", (("flow", FLOW),))] == 42
    lag = "sparkmirror_flow_lag_observed_seconds"  # the one evaluation's 42 s: above 30, at most 60
    assert (s[(lag + "_bucket", (("flow", FLOW), ("le", "30.0")))], s[(lag + "_bucket", (("flow", FLOW), ("le", "60.0")))],
            s[(lag + "_count", (("flow", FLOW),))], s[(lag + "_sum", (("flow", FLOW),))]) == (0, 1, 1, 42)
    # 7 records behind and nothing copied in the window: not catching up (+Inf), caught up where no lag
    assert s[("sparkmirror_flow_catchup_eta_seconds", (("flow", FLOW),))] == float("inf")
    assert s[("sparkmirror_flow_catchup_records_per_second", (("flow", FLOW),))] == 0
    assert s[("sparkmirror_partition_catchup_eta_seconds", (("flow", FLOW), ("partition", "1"), ("topic", "orders")))] == 0
    assert s[("sparkmirror_flow_status", (("flow", FLOW), ("status", "OK")))] == 1
    assert s[("sparkmirror_checkpoint_lag_records",
              (("flow", FLOW), ("group", "billing"), ("partition", "0"), ("topic", "orders")))] == 3
    assert s[("sparkmirror_decode_errors_total",
              (("cluster", "b"), ("record_type", "heartbeat"), ("topic", "a.heartbeats")))] == 1
    assert s[("sparkmirror_heartbeat_latency_seconds_bucket", (("flow", FLOW), ("le", "0.05")))] == 1
    assert s[("sparkmirror_heartbeat_latency_seconds_bucket", (("flow", FLOW), ("le", "0.025")))] == 0
    assert s[("sparkmirror_heartbeat_latency_seconds_count", (("flow", FLOW),))] == 1
    assert s[("sparkmirror_monitor_info", (("granularity", "partition"), ("version", "1.2.3")))] == 1
    assert ("sparkmirror_cluster_up", (("cluster", "b"),)) not in s  # never asked yet: no sample
    assert s[("sparkmirror_audit_records_missing_total", (("flow", FLOW), ("topic", "orders")))] == 2
    assert s[("sparkmirror_audit_records_mismatched_total", (("flow", FLOW), ("topic", "orders")))] == 1
    assert s[("sparkmirror_audit_coverage_ratio", (("flow", FLOW), ("kind", "content")))] == 0.25
    assert s[("sparkmirror_audit_exactly_once", (("flow", FLOW),))] == 1


def test_granularity_drops_finer_labels():
    topic_names = {name for name, _ in prometheus_samples(evaluation("topic")[0])}
    assert "sparkmirror_topic_lag_records" in topic_names
    assert not {n for n in topic_names if n.startswith("sparkmirror_partition_")}
    assert "sparkmirror_checkpoint_lag_records" not in topic_names
    assert "sparkmirror_group_checkpoint_lag_records" in topic_names
    flow_names = {name for name, _ in prometheus_samples(evaluation("flow")[0])}
    assert not {n for n in flow_names if n.startswith("sparkmirror_topic_")}
    assert "sparkmirror_data_lost_records_total" not in flow_names
    assert "sparkmirror_flow_lag_records" in flow_names


def test_otel_instruments_carry_the_same_names_and_values(caplog):
    ev, _ = evaluation()
    reader = InMemoryMetricReader()
    otel = OtelExporter(lambda: ev, "1.2.3", readers=[reader])
    otel.record_latency(FLOW, 0.03)
    data = reader.get_metrics_data()
    points = {}
    units = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                units[metric.name] = metric.unit
                for dp in metric.data.data_points:
                    points[(metric.name, tuple(sorted(dp.attributes.items())))] = dp
    assert units["sparkmirror_flow_lag_seconds"] == "s"
    assert units["sparkmirror_decode_errors"] == "1"
    assert points[("sparkmirror_flow_lag_records", (("flow", FLOW),))].value == 7
    assert points[("sparkmirror_decode_errors",
                   (("cluster", "b"), ("record_type", "heartbeat"), ("topic", "a.heartbeats")))].value == 1
    hist = points[("sparkmirror_heartbeat_latency_seconds", (("flow", FLOW),))]
    assert hist.count == 1 and list(hist.explicit_bounds) == list(metrics.LATENCY_BUCKETS)
    expected = {s.base_name for s in served_specs("partition")}
    assert {name for name, _ in points} <= expected
    # +Inf (a catch-up that never ends) has no OTel value: no point, and no SDK warning about it
    assert ("sparkmirror_flow_catchup_eta_seconds", (("flow", FLOW),)) not in points
    assert points[("sparkmirror_partition_catchup_eta_seconds",
                   (("flow", FLOW), ("partition", "1"), ("topic", "orders")))].value == 0
    assert not [r for r in caplog.records if "non-finite" in r.getMessage() or "inf" in r.getMessage().split()]
    otel.shutdown()


def test_otlp_push_only_when_the_endpoint_is_set(monkeypatch):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    received: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ev, _ = evaluation()
    try:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
        assert OtelExporter(lambda: ev).enabled is False
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        otel = OtelExporter(lambda: ev, "1.2.3")
        assert otel.enabled
        otel.provider.force_flush(10_000)
        otel.shutdown()
    finally:
        server.shutdown()
    assert received and received[0][0] == "/v1/metrics"
    request = ExportMetricsServiceRequest.FromString(received[0][1])
    names = {m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"sparkmirror_flow_lag_records", "sparkmirror_partition_lag_seconds"} <= names
    resource = {a.key: a.value.string_value for a in request.resource_metrics[0].resource.attributes}
    assert resource["service.name"] == "sparkmirror-monitor"


def test_http_routes():
    ev, _ = evaluation()
    healthy = [True]

    async def fresh():
        return ev

    history = History(step=1.0)
    history.record(ev)
    sources = HttpSources(fresh, build_registry(lambda: ev), lambda: (healthy[0], {"x": 1}), "1.2.3",
                          history=history)

    async def scenario():
        client = TestClient(TestServer(build_app(sources)))
        await client.start_server()
        try:
            r = await client.get("/metrics")
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert "sparkmirror_flow_lag_records" in await r.text()
            r = await client.get("/api/status")
            doc = json.loads(await r.text())
            assert doc["status"] == "OK" and doc["monitor"]["version"] == "1.2.3"
            flow = doc["flows"][0]
            assert flow["partitions"] == []  # summary: only partitions that are not OK
            assert [p["partition"] for p in flow["top_partitions"]] == [0]
            assert flow["lag"] == {"records": 7, "seconds": 42.0, "unknown_partitions": 0}
            r = await client.get("/api/status?detail=partitions")
            assert len(json.loads(await r.text())["flows"][0]["partitions"]) == 2
            assert (await client.get("/api/status?top=x")).status == 400
            r = await client.get("/")
            assert r.status == 200 and "sparkmirror monitor" in await r.text()
            assert 'class="chart lag-seconds"' in await r.text()  # drawn from the monitor's history
            r = await client.get("/api/history")
            doc = json.loads(await r.text())
            assert doc["step_seconds"] == 1.0 and doc["flows"][FLOW] == [[round(ev.generated_at, 3), 42.0, 7, None, None]]
            assert (await client.get("/healthz")).status == 200
            healthy[0] = False
            r = await client.get("/healthz")
            assert r.status == 503 and json.loads(await r.text())["status"] == "unhealthy"
        finally:
            await client.close()

    asyncio.run(scenario())


def _flow_samples(state, clock, settings=EvaluatorSettings()) -> dict:
    s = prometheus_samples(evaluate(state, clock.now, settings))
    return {name: value for (name, labels), value in s.items() if labels == (("flow", FLOW),)}


def test_heartbeat_series_exist_from_start_up_with_unknown_said_explicitly():
    """Before any heartbeat (replicator never started, heartbeats topic missing) the page's series
    exist: seen 0, age counting from the monitor's start, the expectation and the flow's timeout."""
    state, clock = make_state()
    clock.now += 95
    s = _flow_samples(state, clock)
    assert s["sparkmirror_heartbeat_seen"] == 0
    assert s["sparkmirror_heartbeat_age_seconds"] == 95
    assert s["sparkmirror_heartbeats_expected"] == 1
    assert s["sparkmirror_heartbeat_timeout_seconds"] == 10  # 2 x emit.heartbeats.interval.seconds, >= 10 s
    assert "sparkmirror_heartbeat_last_timestamp_seconds" not in s
    beat(state, clock, 0.5)
    clock.now += 3
    s = _flow_samples(state, clock)
    assert s["sparkmirror_heartbeat_seen"] == 1
    assert s["sparkmirror_heartbeat_age_seconds"] == 3.5
    assert s["sparkmirror_heartbeat_last_timestamp_seconds"] == clock.now - 3.5
    assert s["sparkmirror_heartbeat_arrival_age_seconds"] == 3  # the latency is not in it


def test_heartbeat_timeout_follows_the_flows_interval_and_expected_is_0_when_disabled():
    state, clock = make_state("emit.heartbeats.interval.seconds = 30\n")
    assert _flow_samples(state, clock)["sparkmirror_heartbeat_timeout_seconds"] == 60
    assert _flow_samples(state, clock, EvaluatorSettings(heartbeat_timeout=7))[
        "sparkmirror_heartbeat_timeout_seconds"] == 7
    state, clock = make_state("emit.heartbeats.enabled = false\n")
    clock.now += 1000
    s = _flow_samples(state, clock)
    assert s["sparkmirror_heartbeats_expected"] == 0
    assert s["sparkmirror_heartbeat_seen"] == 0


def test_flow_info_names_the_flows_clusters():
    ev, _ = evaluation()
    s = prometheus_samples(ev)
    assert s[("sparkmirror_flow_info", (("flow", FLOW), ("source", "a"), ("target", "b")))] == 1


def test_series_not_ok_exports_only_partitions_and_group_partitions_that_are_not_ok():
    from monitor.cardinality import synthetic_evaluation

    def partition_labels(series: str) -> dict:
        s = prometheus_samples(synthetic_evaluation(partitions=200, topics=10, groups=3, series=series))
        return {n: {dict(labels)["partition"] for (name, labels) in s if name == n}
                for n in ("sparkmirror_partition_status_code", "sparkmirror_checkpoint_lag_records")}

    every = partition_labels("all")
    assert len(every["sparkmirror_partition_status_code"]) == 20  # 20 partitions per topic, 10 topics
    not_ok = partition_labels("not-ok")
    # 1% of the partitions are STALL and their group partitions stale: partition 0 of topics 0 and 5
    assert not_ok == {"sparkmirror_partition_status_code": {"0"}, "sparkmirror_checkpoint_lag_records": {"0"}}
    assert partition_labels("topic") == {"sparkmirror_partition_status_code": set(),
                                         "sparkmirror_checkpoint_lag_records": set()}


def test_the_cardinality_count_is_what_the_exporter_serves_and_docs_alerts_has_it():
    from pathlib import Path

    from monitor import cardinality

    for series in metrics.SERIES_MODES:
        ev = cardinality.synthetic_evaluation(partitions=300, topics=10, groups=4, series=series)
        assert cardinality.series_count(ev) == len(prometheus_samples(ev)), series
    docs = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text()
    assert cardinality.markdown_table() in docs, "run python -m monitor.cardinality and update docs/alerts.md"


def _odd_names_state():
    """A flow whose topic names need escaping in the text format, some partitions behind."""
    from monitor.state import MonitorState, OffsetsRow
    from monitor.watch import watched_flows
    from sparkmirror.model.parse import parse_config
    from sparkmirror.model.records import Heartbeat

    config = parse_config("clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n"
                          "a->b.enabled = true\n", "mm2.properties")
    now = 1_800_000_000.0
    state = MonitorState(watched_flows(config), ["a", "b"], clock=lambda: now - 60)
    state.add_heartbeat("a->b", Heartbeat("b", "a", int(now * 1000) - 300), now)
    state.record_offsets("a->b", [OffsetsRow(f'odd "topic" \\ {i // 10}\n', i % 10, f"a.t{i // 10}", 0, 10,
                                             10 - i % 3, (0, 0)) for i in range(40)], now)
    state.cluster_ok("a")
    state.decode_error("b", "a.heartbeats", "heartbeat")
    return state, now


def _expected_families(ev, version: str) -> list[tuple[str, str, str, dict]]:
    """(family, type, help, {(sample name, labels): value}) of every metric the monitor serves at the
    evaluation's granularity, in sparkmirror/metrics.py's order, from the samples() mapping."""
    from monitor.exporters.samples import histogram, samples

    values: dict[str, dict] = {spec.name: {} for spec in served_specs(ev.granularity)}
    for spec, labels, value in samples(ev, version):
        if spec.name in values:
            values[spec.name][(spec.name, frozenset(zip(spec.labels, labels)))] = value
    hist = metrics.HEARTBEAT_LATENCY
    for flow in ev.flows:
        buckets, total = histogram(flow)
        for le, count in buckets:
            values[hist.name][(hist.name + "_bucket", frozenset({("flow", flow.name), ("le", le)}))] = count
        values[hist.name][(hist.name + "_count", frozenset({("flow", flow.name)}))] = buckets[-1][1]
        values[hist.name][(hist.name + "_sum", frozenset({("flow", flow.name)}))] = total
    lag = metrics.FLOW_LAG_OBSERVED  # the monitor's RpoTracker keeps it; the evaluation carries it
    for flow, observed in (ev.extra.get("lag_histograms") or {}).items():
        if observed:
            buckets, total = observed
            for le, count in buckets:
                values[lag.name][(lag.name + "_bucket", frozenset({("flow", flow), ("le", le)}))] = count
            values[lag.name][(lag.name + "_count", frozenset({("flow", flow)}))] = buckets[-1][1]
            values[lag.name][(lag.name + "_sum", frozenset({("flow", flow)}))] = total
    return [(spec.base_name if spec.kind == "counter" else spec.name, spec.kind, spec.help, values[spec.name])
            for spec in served_specs(ev.granularity)]


def _parsed_families(text: str) -> list[tuple[str, str, str, dict]]:
    out = []
    for family in text_string_to_metric_families(text):
        found = {(s.name, frozenset(s.labels.items())): s.value for s in family.samples}
        assert len(found) == len(family.samples), f"{family.name}: a series twice"
        out.append((family.name, family.type, family.documentation, found))
    return out


def test_the_exposition_parses_with_prometheus_client_and_carries_every_served_family_and_sample():
    """/metrics is written by the monitor itself (not by prometheus-client's generate_latest: see
    monitor.exporters.prometheus): prometheus-client's own parser reads every family the monitor
    serves back from it, in sparkmirror/metrics.py's order with its type and help, and exactly the
    samples of samples() with their values, label values that need escaping included."""
    from monitor import cardinality
    from monitor.evaluator import EvaluatorSettings, evaluate

    cases = [(f"exporters-{g}", evaluation(g)[0]) for g in ("partition", "topic", "flow")]
    state, now = _odd_names_state()
    cases += [(f"odd-names-{g}", evaluate(state, now, EvaluatorSettings(granularity=g)))
              for g in ("partition", "topic", "flow")]
    cases += [(f"series-{s}", cardinality.synthetic_evaluation(partitions=200, topics=4, groups=2, series=s))
              for s in metrics.SERIES_MODES]
    for name, ev in cases:
        registry = build_registry(lambda: ev, "1.2.3")
        text = render(registry)
        assert render(registry) is text, name  # one text per evaluation
        assert _parsed_families(text.decode()) == _expected_families(ev, "1.2.3"), name
    odd = render(build_registry(lambda: cases[3][1], "1.2.3")).decode().splitlines()
    # the text as it was written before (label names in order, escapes, counters' _total, numbers)
    assert 'sparkmirror_data_lost_records_total{flow="a->b",topic="odd \\"topic\\" \\\\ 0\\n"} 0.0' in odd
    assert 'sparkmirror_topic_lag_records{flow="a->b",topic="odd \\"topic\\" \\\\ 0\\n"} 9.0' in odd
    assert odd[odd.index("# TYPE sparkmirror_decode_errors_total counter") + 1] == \
        'sparkmirror_decode_errors_total{cluster="b",record_type="heartbeat",topic="a.heartbeats"} 1.0'
    assert render(build_registry(lambda: None)) == b""  # before the first evaluation


def test_the_exposition_of_changed_figures_is_what_a_fresh_render_writes():
    """render() keeps each partition's lines while its figures stay the same: after partitions
    move, catch up, fall behind or go away, the text must be the one written from scratch, and
    still carry exactly the evaluation's samples."""
    from monitor.evaluator import EvaluatorSettings, evaluate
    from monitor.exporters.prometheus import exposition
    from monitor.state import MonitorState, OffsetsRow
    from monitor.watch import watched_flows
    from sparkmirror.model.parse import parse_config

    config = parse_config("clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n"
                          "a->b.enabled = true\n", "mm2.properties")
    state = MonitorState(watched_flows(config), ["a", "b"])
    evaluations = []
    registry = build_registry(lambda: evaluations[-1], "1.2.3")
    now = 1_800_000_000.0
    for step in range(6):
        rows = [OffsetsRow(f"t{i // 10}", i % 10, f"a.t{i // 10}", 0, 10 + (step if i < 5 else 0),
                           10 - (i % 3 if step % 2 else 0), (0, 0)) for i in range(40 - step)]
        state.record_offsets("a->b", rows, now + step)
        series = "not-ok" if step == 4 else "all"
        evaluations.append(evaluate(state, now + step, EvaluatorSettings(granularity="partition", series=series)))
        text = render(registry)
        assert text == exposition(evaluations[-1], "1.2.3"), step
        assert _parsed_families(text.decode()) == _expected_families(evaluations[-1], "1.2.3"), step
    assert len(registry.partition_lines) == 40 - 5  # the lines of partitions gone went with them


def _latency_points(reader) -> dict:
    """flow -> the heartbeat latency histogram point of one collection."""
    points, data = {}, reader.get_metrics_data()
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == metrics.HEARTBEAT_LATENCY.base_name:
                    points.update({dp.attributes["flow"]: dp for dp in metric.data.data_points})
    return points


def test_the_otel_histogram_takes_every_latency_sample_from_the_state_once(monkeypatch):
    """The state keeps the heartbeat latency samples; the OTel exporter takes them when a reader
    collects. Nothing pushes into the exporter, and no sample is lost or counted twice."""
    from monitor.service import MonitorService
    from monitor.watch import MonitorOptions
    from sparkmirror.model.parse import parse_config
    from sparkmirror.model.records import Heartbeat

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\n")
    reader = InMemoryMetricReader()
    service = MonitorService(config, MonitorOptions(), otel_readers=[reader])
    now = 1_800_000_000.0

    def beats(*latencies: float) -> None:
        for latency in latencies:
            service.state.add_heartbeat("A->B", Heartbeat("A", "B", int(now * 1000)), now + latency)

    assert "A->B" not in _latency_points(reader)  # nothing yet
    beats(0.25, 0.5, 4.0)
    hist = _latency_points(reader)["A->B"]
    assert hist.count == 3 and hist.sum == pytest.approx(4.75)
    assert _latency_points(reader)["A->B"].count == 3  # read again: the same samples, not counted twice
    beats(0.125)
    # a heartbeat without an append time has no latency: no sample
    service.state.add_heartbeat("A->B", Heartbeat("A", "B", int(now * 1000)), None)
    hist = _latency_points(reader)["A->B"]
    assert hist.count == 4 and hist.sum == pytest.approx(4.875)
    # the Prometheus side reads the same samples from the evaluation's cumulative buckets
    assert service.evaluate_now().flows[0].heartbeat.latency_count == 4
    service.otel.shutdown()
    # without an OTel reader nothing takes the samples, so the state keeps none
    assert MonitorService(config, MonitorOptions()).state.latency_samples is None


def test_latency_samples_beyond_the_limit_are_dropped_counted_and_logged(caplog):
    from monitor.windows import LatencySamples

    ev, _ = evaluation()
    kept = LatencySamples(limit=2)
    reader = InMemoryMetricReader()
    otel = OtelExporter(lambda: ev, "1.2.3", readers=[reader], latency_samples=kept.take)
    for seconds in (0.5, 1.0, 2.0, 4.0, 8.0):
        kept.add(FLOW, seconds)
    with caplog.at_level("WARNING", logger="monitor.exporters.otel"):
        hist = _latency_points(reader)[FLOW]
        assert hist.count == 2 and hist.sum == pytest.approx(1.5)  # the first two; three dropped
        assert otel.latency_samples_dropped == 3 and kept.dropped_total == 3
        ours = [r for r in caplog.records if r.name == "monitor.exporters.otel"]
        assert [r.getMessage() for r in ours] == [
            "3 heartbeat latency samples are missing from the OpenTelemetry histogram: more arrived between two "
            "collections than are kept"]
        kept.add(FLOW, 0.25)  # room again after the collection took them
        assert _latency_points(reader)[FLOW].count == 3
        assert len([r for r in caplog.records if r.name == "monitor.exporters.otel"]) == 1
    otel.shutdown()


def test_the_exposition_on_the_event_loop_runs_in_short_steps_and_writes_the_same_text():
    """/metrics renders on the event loop, pausing every STEP_SECONDS of work; the text is the
    same as in one go, and scrapes of the same evaluation share one render."""
    import asyncio
    import itertools

    from monitor import cardinality, pacing
    from monitor.exporters import prometheus
    from monitor.exporters.prometheus import exposition, exposition_steps, render_on_loop

    ev = cardinality.synthetic_evaluation(partitions=2_000, topics=20, groups=2, series="all")
    whole = exposition(ev, "1.2.3")
    ticks = itertools.count()
    steps = exposition_steps(ev, "1.2.3", clock=lambda: next(ticks) * pacing.STEP_SECONDS)
    pauses = 0
    while True:
        try:
            next(steps)
            pauses += 1
        except StopIteration as done:
            assert done.value == whole
            break
    assert pauses >= 2_000 // (2 * pacing._CHECK_EVERY)  # a clock that says "late" at every read

    registry = build_registry(lambda: ev, "1.2.3")
    renders = []
    real = prometheus.exposition_steps

    def counted(*args, **kwargs):
        renders.append(1)
        return real(*args, **kwargs)

    prometheus.exposition_steps = counted
    try:
        async def scrape_three_at_once():
            return await asyncio.gather(*(render_on_loop(registry) for _ in range(3)))

        bodies = asyncio.run(scrape_three_at_once())
    finally:
        prometheus.exposition_steps = real
    assert bodies == [whole] * 3 and len(renders) == 1
    assert render(registry) is bodies[0]  # and kept for the next scrape of the same evaluation
