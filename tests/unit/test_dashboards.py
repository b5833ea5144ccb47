"""The Grafana dashboards: current JSON, import-ready structure, names from sparkmirror.metrics.

Evaluating every expression against a real Prometheus is in
tests/integration/test_prometheus_stack.py; here each expression is parsed by
promtool (a recording rule per expression) and checked against the metric specs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from alerts.rules import RULES
from dashboards import generate, layout, queries
from sparkmirror import metrics as m
from tests.support.prometheus import require_binary

ROOT = Path(__file__).resolve().parents[2]
MODELS = generate.dashboards()
BY_UID = {model["uid"]: model for model in MODELS.values()}
OVERVIEW, DRILLDOWN = BY_UID["sparkmirror-overview"], BY_UID["sparkmirror-drilldown"]
EXPRESSIONS = generate.panel_expressions(MODELS)

#: Exported metrics no panel or alert needs, and why.
NOT_SHOWN = {
    m.HEARTBEAT_LAST_TIMESTAMP.name: "the same fact as heartbeat age, for clients that want a timestamp",
    m.MONITOR_INFO.name: "version and granularity labels, for ad-hoc queries",
}

_NAME = re.compile(r"\bsparkmirror_[a-z0-9_]+")


def _metric_names(expr: str) -> set[str]:
    names = set()
    for name in _NAME.findall(expr):
        for suffix in ("_bucket", "_sum", "_count"):
            base = name.removesuffix(suffix)
            if base != name and base in m.BY_NAME and m.BY_NAME[base].kind == "histogram":
                name = base
        names.add(name)
    return names


def _panels(model: dict) -> list[dict]:
    return list(generate._panels(model["panels"]))


def test_committed_json_is_current():
    assert generate.stale() == [], "run: python -m dashboards.generate"
    proc = subprocess.run([sys.executable, "-m", "dashboards.generate", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_check_notices_a_stale_or_extra_file(tmp_path):
    generate.write(tmp_path)
    assert generate.stale(tmp_path) == []
    path = tmp_path / "sparkmirror-overview.json"
    path.write_text(path.read_text().replace('"Heartbeat age"', '"Heartbeat age (edited)"'))
    (tmp_path / "old.json").write_text("{}")
    assert generate.stale(tmp_path) == ["sparkmirror-overview.json", "old.json"]


def test_current_schema_version_and_datasource_as_a_variable():
    for model in MODELS.values():
        assert model["schemaVersion"] == layout.SCHEMA_VERSION >= 39
        assert "rows" not in model and "time_options" not in model["timepicker"]
        variables = {v["name"]: v for v in model["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        for panel in _panels(model):
            if panel["type"] in ("row", "text"):
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], f"{panel['title']} has no query"
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"]


def test_template_variables_for_flow_topic_and_group():
    def variables(model):
        return {v["name"]: v for v in model["templating"]["list"]}

    assert set(variables(OVERVIEW)) == {"datasource", "flow"}
    assert set(variables(DRILLDOWN)) == {"datasource", "flow", "topic", "group", "k"}
    for model in MODELS.values():
        for name, variable in variables(model).items():
            if name in queries.variable_queries():
                assert variable["query"] == queries.variable_queries()[name]
                assert variable["multi"] and variable["includeAll"] and variable["allValue"] == ".*"
                assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    # every variable an expression uses is defined on its dashboard
    for item in EXPRESSIONS:
        used = set(re.findall(r"\$(\w+)", item.expr)) - {"__rate_interval", "__range"}
        assert used <= set(variables(BY_UID[item.dashboard])), f"{item.panel}: {used}"
        assert "$" not in queries.instantiate(item.expr)


def test_overview_has_one_row_per_flow_with_health_heartbeat_lag_and_loss_panels():
    rows = [p for p in OVERVIEW["panels"] if p["type"] == "row"]
    assert [r["repeat"] for r in rows] == ["flow"]
    row_y = rows[0]["gridPos"]["y"]
    in_row = {p["title"] for p in OVERVIEW["panels"] if p["type"] != "row" and p["gridPos"]["y"] > row_y}
    assert {"Health", "Heartbeat age", "Heartbeat latency", "Lag (records)", "Lag (seconds)", "Throughput",
            "Data lost (time range)"} <= in_row
    latency = next(p for p in _panels(OVERVIEW) if p["title"] == "Heartbeat latency")
    assert [t["legendFormat"] for t in latency["targets"]] == ["p50", "p95", "p99"]


def test_the_slo_dashboard_shows_budget_burn_rates_lag_percentiles_and_the_bad_periods_per_flow():
    from alerts import slo

    model = BY_UID["sparkmirror-slo"]
    rows = [p for p in model["panels"] if p["type"] == "row"]
    assert [r["repeat"] for r in rows] == ["flow"]
    by_title = {p["title"]: p for p in _panels(model) if p["type"] != "row"}
    assert set(by_title) == {"Objective", "Budget left", "Now", "Burn rate per window", "Lag percentiles",
                             "Periods that burned the budget"}
    burns = [t["expr"] for t in by_title["Burn rate per window"]["targets"]]
    assert burns == [f'{slo.burn_rate(w)}{{flow=~"$flow"}}' for w in slo.WINDOWS]
    assert by_title["Budget left"]["targets"][0]["expr"] == f'{slo.BUDGET_REMAINING}{{flow=~"$flow"}}'
    assert [t["legendFormat"] for t in by_title["Lag percentiles"]["targets"]] == [
        "{{flow}} p50 over 5m", "{{flow}} p99 over 5m", "{{flow}} p50 over 1h", "{{flow}} p99 over 1h"]
    # the page's and the ticket's limits drawn on the burn rates
    steps = [s["value"] for s in by_title["Burn rate per window"]["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert steps[1:] == [6, 14.4]


def test_overview_shows_the_firing_alerts_and_links_every_runbook():
    """The alert panels come from the same mixin config as the rules: every alert, its absolute runbook."""
    from alerts import config as mixin

    firing = next(p for p in _panels(OVERVIEW) if p["title"] == "Firing alerts")
    names = re.search(r'alertname=~"([^"]+)"', firing["targets"][0]["expr"]).group(1).split("|")
    assert names == [r.name for r in RULES]
    runbooks = next(p for p in _panels(OVERVIEW) if p["title"] == "Runbooks")
    for rule in RULES:
        assert f"[{rule.name}]({mixin.DEFAULT.runbook_url(rule.name)})" in runbooks["options"]["content"]
    custom = mixin.Config(runbook_base="https://wiki.example.org/sm/runbooks.md")
    text = next(p for p in _panels(generate.dashboards(custom)["sparkmirror-overview.json"])
                if p["title"] == "Runbooks")["options"]["content"]
    assert "https://wiki.example.org/sm/runbooks.md#sparkmirrorheartbeatsstopped" in text


def test_drilldown_panels():
    titles = {p["title"] for p in _panels(DRILLDOWN)}
    assert {"Top $k partitions by lag (records)", "Top $k partitions by lag (seconds)", "Checkpoint age per group",
            "Checkpoint lag per group", "Batch cadence: offset-sync age"} <= titles
    topk = [t for p in _panels(DRILLDOWN) for t in p["targets"] if t["expr"].startswith("topk(")]
    assert topk and all(t["instant"] and t["format"] == "table" for t in topk)


def test_panels_fit_the_grid_without_overlap():
    for model in MODELS.values():
        taken: set[tuple[int, int]] = set()
        ids = [p["id"] for p in _panels(model)]
        assert len(ids) == len(set(ids))
        for panel in _panels(model):
            pos = panel["gridPos"]
            assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, panel["title"]
            cells = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                     for y in range(pos["y"], pos["y"] + pos["h"])}
            assert not cells & taken, f"{model['uid']}: {panel['title']} overlaps another panel"
            taken |= cells


def test_every_metric_name_comes_from_the_specs():
    texts = [item.expr for item in EXPRESSIONS] + list(queries.variable_queries().values())
    unknown = {name for text in texts for name in _metric_names(text)} - set(m.BY_NAME)
    assert not unknown, f"not in sparkmirror/metrics.py: {unknown}"


def test_every_exported_metric_is_on_a_dashboard_or_in_an_alert():
    used = {name for item in EXPRESSIONS for name in _metric_names(item.expr)}
    used |= {name for rule in RULES for name in _metric_names(rule.expr)}
    missing = set(m.BY_NAME) - used - set(NOT_SHOWN)
    assert not missing, f"exported but never shown or alerted on: {missing}"
    assert not set(NOT_SHOWN) & used, "NOT_SHOWN lists a metric that is now used"


def test_every_panel_expression_parses(tmp_path):
    """promtool parses each expression (as a recording rule) with the variables filled in."""
    rules = [{"record": f"dashboard:expr_{i}", "expr": queries.instantiate(item.expr)}
             for i, item in enumerate(EXPRESSIONS)]
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    proc = subprocess.run([require_binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout


def test_instantiate_replaces_only_template_variables():
    expr = 'topk($k, x{flow=~"$flow",topic=~"$topic"}[$__rate_interval]) + y[$__range] + "$flowing"'
    assert queries.instantiate(expr, {"k": "3"}) == \
        'topk(3, x{flow=~".*",topic=~".*"}[1m]) + y[1h] + "$flowing"'


def test_status_mappings_name_every_status_code():
    mapping = layout.status_mappings()[0]["options"]
    assert {int(code): option["text"] for code, option in mapping.items()} == \
        {code: status for status, code in m.STATUS_CODES.items()}


def test_no_legacy_step_defaults_that_distort_rates():
    """grafanalib writes maxDataPoints 100 and intervalFactor 2: on a 15-minute range that is a 9 s
    minimum step doubled, so $__rate_interval spans minutes and short spikes vanish."""
    for model in MODELS.values():
        for panel in _panels(model):
            assert "maxDataPoints" not in panel, panel["title"]
            for target in panel.get("targets") or []:
                assert target.get("intervalFactor", 1) == 1, panel["title"]


def test_no_panel_mixes_seconds_with_counts_or_records_with_bytes_on_one_axis():
    for model in MODELS.values():
        for panel in _panels(model):
            names = {n for t in panel.get("targets") or [] for n in _metric_names(t["expr"])}
            units = {m.BY_NAME[n].unit for n in names}
            assert len(units - {""}) <= 1, f"{panel['title']}: {units}"
            assert "seconds" not in units or units == {"seconds"}, f"{panel['title']}: {units}"
