"""The Prometheus alert rules: current file, promtool unit tests, runbooks, names from the specs.

promtool comes from Debian's prometheus package (scripts/install-system-deps.sh);
when it is missing these tests FAIL with that hint instead of skipping.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from alerts import config as mixin
import generate as generate_all
from alerts import generate, rules
from sparkmirror import metrics as m
from tests.support import prometheus as support
from tests.support.prometheus import require_binary

ROOT = Path(__file__).resolve().parents[2]
TESTS = sorted((ROOT / "alerts" / "tests").glob("*.yml"))
RUNBOOKS = ROOT / "docs" / "runbooks.md"
COMMITTED = yaml.safe_load(generate.RULES_PATH.read_text())

#: The conditions that must each have an alert, by that alert.
REQUIRED = {
    "heartbeats stopped": "SparkmirrorHeartbeatsStopped",
    "replication latency high": "SparkmirrorReplicationLatencyHigh",
    "lag high": "SparkmirrorLagHigh",
    "lag growing": "SparkmirrorLagGrowing",
    "checkpoints stale": "SparkmirrorCheckpointsStale",
    "data lost to retention": "SparkmirrorDataLost",
    "replicator down": "SparkmirrorReplicatorDown",
    "monitor down": "SparkmirrorMonitorDown",
    "cluster unreachable": "SparkmirrorClusterUnreachable",
    "flow in STALL": "SparkmirrorFlowStalled",
    "flow in ERR": "SparkmirrorFlowError",
    "partitions with no checkpoint": "SparkmirrorCheckpointsMissing",
    "undecodable records in internal topics": "SparkmirrorInternalRecordsUndecodable",
    "stale offset-syncs": "SparkmirrorOffsetSyncsStale",
    "records the replicator reports lost": "SparkmirrorReplicatorRecordsLost",
    "a consumer group cannot fail over now": "SparkmirrorFailoverNotReady",
    "retention may delete unreplicated records soon": "SparkmirrorRetentionHeadroomLow",
    "recovery-point error budget burning fast": "SparkmirrorRPOBudgetBurn",
    "recovery-point error budget burning slowly": "SparkmirrorRPOBudgetBurnSlow",
    "a flow paused on purpose (inhibits its flow alerts)": "SparkmirrorFlowPaused",
    "a flow paused for long": "SparkmirrorFlowPausedTooLong",
    "the audit found records missing or altered": "SparkmirrorReplicationAuditFailed",
    "the audit found records written twice": "SparkmirrorReplicationDuplicated",
}


def _committed_rules() -> list[dict]:
    """The alerting rules of the committed file (the recording rules are in _recordings)."""
    return [r for group in COMMITTED["groups"] for r in group["rules"] if "alert" in r]


def _recordings() -> list[dict]:
    return [r for group in COMMITTED["groups"] for r in group["rules"] if "record" in r]


def test_committed_rules_tests_and_dashboards_are_current():
    assert generate.stale() == [], "run: python -m alerts.generate"
    assert generate_all.stale() == [], "run: python -m generate"
    for entry in ("alerts.generate", "generate"):
        proc = subprocess.run([sys.executable, "-m", entry, "--check"], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_the_one_entry_notices_a_stale_or_left_over_dashboard(tmp_path, monkeypatch):
    from dashboards import generate as dashboards

    for path in dashboards.JSON_DIR.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    monkeypatch.setattr(dashboards, "JSON_DIR", tmp_path)
    assert generate_all.stale() == []
    (tmp_path / "sparkmirror-overview.json").write_text("{}")
    (tmp_path / "old.json").write_text("{}")
    assert sorted(Path(p).name for p in generate_all.stale()) == ["old.json", "sparkmirror-overview.json"]


def test_every_required_condition_has_a_rule():
    assert {r["alert"] for r in _committed_rules()} == set(REQUIRED.values())


def test_promtool_accepts_the_rule_file():
    proc = subprocess.run([require_binary("promtool"), "check", "rules", str(generate.RULES_PATH)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules.RULES) + len(_recordings())} rules found" in proc.stdout


def test_promtool_unit_tests_pass():
    assert TESTS, "no promtool tests in alerts/tests/"
    proc = subprocess.run([require_binary("promtool"), "test", "rules", *map(str, TESTS)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("SUCCESS") == len(TESTS), proc.stdout


def test_every_rule_is_tested_firing_and_not_firing():
    firing, quiet = set(), set()
    for path in TESTS:
        spec = yaml.safe_load(path.read_text())
        assert spec["rule_files"] in (["../sparkmirror-rules.yml"], [f"rules/{path.name}"]), \
            f"{path.name} must test the committed file, or its own rendering of it"
        for case in spec["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {r.name for r in rules.RULES}
    assert names - firing == set(), "rules never seen firing"
    assert names - quiet == set(), "rules never checked quiet"


def test_every_rule_has_severity_summary_description_and_runbook():
    headings = set(re.findall(r"^## (\S+)\s*$", RUNBOOKS.read_text(), flags=re.M))
    sections = re.split(r"^## ", RUNBOOKS.read_text(), flags=re.M)
    for rule in _committed_rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in rules.SEVERITIES
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}
        assert len(notes["summary"]) > 20 and len(notes["description"]) > 60
        assert notes["runbook_url"] == mixin.DEFAULT.runbook_url(name)
        assert name in headings, f"docs/runbooks.md has no section '## {name}'"
        body = next(s for s in sections if s.startswith(name))
        assert "Check:" in body and "Do:" in body, f"runbook of {name} must say what to check and do"
    severities = {r["alert"]: r["labels"]["severity"] for r in _committed_rules()}
    assert set(severities.values()) <= {"critical", "warning", "info"}
    assert severities["SparkmirrorHeartbeatsStopped"] == severities["SparkmirrorClusterUnreachable"] == \
        severities["SparkmirrorRPOBudgetBurn"] == "critical"
    assert severities["SparkmirrorRPOBudgetBurnSlow"] == "warning"


def test_rules_and_their_tests_use_only_metric_names_from_the_specs():
    known = set(m.BY_NAME) | {s.name + suffix for s in m.ALL if s.kind == "histogram"
                              for suffix in ("_bucket", "_sum", "_count")}
    used = {n for r in _committed_rules() + _recordings()
            for n in re.findall(r"(?<![:\w])sparkmirror_[a-z0-9_]+", r["expr"])}
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            used |= {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s["series"]).group(0) for s in case["input_series"]}
    assert used - known - {"up"} == set()
    assert f'up{{job="{mixin.MONITOR_JOB}"}}' in rules.BY_NAME["SparkmirrorMonitorDown"].expr


def test_for_overrides_change_only_the_duration():
    normal = rules.rule_file()["groups"][0]["rules"]
    fast = rules.rule_file(for_overrides={"SparkmirrorRPOBudgetBurn": "5s"})["groups"][0]["rules"]
    changed = [(a, b) for a, b in zip(normal, fast) if a != b]
    assert len(changed) == 1
    before, after = changed[0]
    assert after["for"] == "5s" and {**after, "for": before["for"]} == before
    with pytest.raises(ValueError, match="no such alert"):
        rules.rule_file(for_overrides={"Nope": "1s"})


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a markdown file's headings: lower case, punctuation dropped, spaces -> '-'."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", markdown, flags=re.M)}


def test_every_runbook_url_is_absolute_and_its_anchor_exists():
    """Links in a real notification (Alertmanager, PagerDuty, Grafana) must open: absolute URL of the
    released docs/runbooks.md, and a section that exists there."""
    anchors = _anchors(RUNBOOKS.read_text())
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(1)
    rendered = [yaml.safe_load(p.read_text()) for p in generate.TESTS_DIR.glob("*.yml")]
    expected = [a for spec in rendered for case in spec["tests"] for check in case.get("alert_rule_test", [])
                for a in check.get("exp_alerts") or []]
    urls = [r["annotations"]["runbook_url"] for r in _committed_rules()]
    urls += [a["exp_annotations"]["runbook_url"] for a in expected]
    assert len(urls) > len(rules.RULES)
    for url in urls:
        base, anchor = url.split("#")
        assert re.fullmatch(r"https://github\.com/[\w-]+/sparkmirror/blob/v[\w.]+/docs/runbooks\.md", base), url
        assert base.endswith(f"/blob/v{version}/docs/runbooks.md"), f"{url}: not the released version {version}"
        assert anchor in anchors, f"{url}: docs/runbooks.md has no such section"


def test_a_mixin_config_renders_rules_tests_and_dashboards(tmp_path):
    config = tmp_path / "mixin.yml"
    config.write_text(yaml.safe_dump({
        "runbook_base": "https://wiki.example.org/sm/runbooks.md", "selector": 'env="prod"',
        "monitor_job": "sm-monitor", "thresholds": {"lag_seconds": 900, "lag_for": "20m"},
        "rpo": {"lag_seconds": 60, "flows": {"lab->dr": None, "gold->dr": {"target": 0.9999}}}}))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "generate", "--config", str(config), "--output-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    every = [r for g in yaml.safe_load((out / "sparkmirror-rules.yml").read_text())["groups"] for r in g["rules"]]
    rendered = {r["alert"]: r for r in every if "alert" in r}
    assert {r["annotations"]["runbook_url"].split("#")[0] for r in rendered.values()} == \
        {"https://wiki.example.org/sm/runbooks.md"}
    lag = rendered["SparkmirrorLagHigh"]
    assert lag["expr"].startswith('(sparkmirror_flow_lag_seconds{env="prod"} > 900 unless on(flow) '
                                  'sparkmirror:flow_rpo_objective_seconds)') and lag["for"] == "20m"
    assert 'up{job="sm-monitor"}' in rendered["SparkmirrorMonitorDown"]["expr"]
    assert all('{env="prod"' in n or 'env="prod",' in n
               for r in every for n in re.findall(r"sparkmirror_\w+\{[^}]*\}", r["expr"]))
    # one objective per flow: gold->dr its own (60 s, inherited, at 99.99 %), lab->dr none, the rest the default
    objectives = [r["expr"] for r in every if r.get("record") == "sparkmirror:flow_rpo_objective_seconds"]
    budgets = [r["expr"] for r in every if r.get("record") == "sparkmirror:flow_rpo_error_budget:ratio"]
    assert objectives == ['max by (flow) (sparkmirror_flow_info{env="prod",flow="gold->dr"}) * 0 + 60',
                          'max by (flow) (sparkmirror_flow_info{env="prod",flow!="gold->dr",flow!="lab->dr"}) * 0 + 60']
    assert [b.rsplit(" + ", 1)[1] for b in budgets] == ["0.0001", "0.001"]
    tests = sorted(p.name for p in (out / "tests").glob("*.yml"))
    assert tests == sorted(p.name for p in generate.TESTS_DIR.glob("*.yml"))
    assert "https://wiki.example.org/sm/runbooks.md#" in (out / "tests" / tests[0]).read_text()
    overview = json.loads((out / "dashboards" / "sparkmirror-overview.json").read_text())
    assert "https://wiki.example.org/sm/runbooks.md#sparkmirrorlaghigh" in json.dumps(overview)
    assert 900 in [s["value"] for p in overview["panels"] if p["title"] == "Lag (seconds)"
                   for s in p["fieldConfig"]["defaults"]["thresholds"]["steps"]]


@pytest.mark.parametrize("content, message", [
    ({"runbook_base": "docs/runbooks.md"}, "must be an absolute http"),
    ({"thresholds": {"lag_secs": 5}}, "unknown threshold.*lag_secs"),
    ({"thresholds": {"lag_for": "ten minutes"}}, "not a Prometheus duration"),
    ({"thresholds": {"lag_seconds": "300"}}, "must be a int"),
    ({"selecter": "x"}, "unknown key.*selecter"),
    ({"selector": "env=prod"}, "must be PromQL label matchers"),
    ({"rpo": {"target": 99.9}}, "target must be a ratio between 0 and 1"),
    ({"rpo": {"lag_seconds": "30s"}}, "rpo.lag_seconds must be a number"),
    ({"rpo": {"flows": {"primary": None}}}, "not a flow name"),
    ({"rpo": {"window": "30d"}}, "unknown key.*window"),
    ({"rpo": {"period": "a month"}}, "not a duration"),
])
def test_a_bad_mixin_config_is_an_error_naming_the_file(tmp_path, content, message):
    config = tmp_path / "mixin.yml"
    config.write_text(yaml.safe_dump(content))
    proc = subprocess.run([sys.executable, "-m", "generate", "--config", str(config), "--output-dir",
                           str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert str(config) in proc.stderr and re.search(message, proc.stderr), proc.stderr


def test_check_notices_an_edited_test_file(tmp_path, monkeypatch):
    (tmp_path / "rules").mkdir()
    for path in [*generate.TESTS_DIR.glob("*.yml"), *generate.TESTS_DIR.glob("rules/*.yml")]:
        (tmp_path / path.relative_to(generate.TESTS_DIR)).write_text(path.read_text())
    monkeypatch.setattr(generate, "TESTS_DIR", tmp_path)
    assert generate.stale() == []
    edited = tmp_path / "heartbeats.yml"
    edited.write_text(edited.read_text().replace("#sparkmirrorheartbeatsstopped", "#nope"))
    assert [Path(p).name for p in generate.stale()] == ["heartbeats.yml"]


def test_a_missing_promtool_fails_the_test_instead_of_skipping(monkeypatch):
    monkeypatch.setattr(support.shutil, "which", lambda name: None)
    monkeypatch.setattr(support.os, "access", lambda path, mode: False)
    with pytest.raises(pytest.fail.Exception, match="promtool not found.*install-system-deps.sh"):
        require_binary("promtool")


def test_the_cluster_alert_inhibits_every_alert_that_carries_the_flows_clusters():
    """Every rule joined with the flow's source/target labels is a target of both inhibit rules of
    SparkmirrorClusterUnreachable in alerts/alertmanager.yml (equal: [source] and [target])."""
    config = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())
    joined = {r.name for r in rules.RULES if "group_left(source, target)" in r.expr}
    assert len(joined) >= 10
    by_side = {}
    for rule in config["inhibit_rules"]:
        if rule["source_matchers"] == ['alertname="SparkmirrorClusterUnreachable"']:
            (matcher,) = rule["target_matchers"]
            names = set(re.fullmatch(r'alertname=~"(.+)"', matcher).group(1).split("|"))
            by_side[tuple(rule["equal"])] = names
    assert set(by_side) == {("source",), ("target",)}
    assert by_side[("source",)] == by_side[("target",)] == joined
    cluster = rules.BY_NAME["SparkmirrorClusterUnreachable"].expr
    assert '"source", "$1", "cluster"' in cluster and '"target", "$1", "cluster"' in cluster
    lost = {"SparkmirrorDataLost", "SparkmirrorReplicatorRecordsLost", "SparkmirrorReplicationAuditFailed"}
    assert not lost & {n for r in config["inhibit_rules"] for m in r["target_matchers"]
                       for n in re.findall(r"Sparkmirror\w+", m)}, "lost or wrong data is never inhibited"


def test_every_rule_names_its_measured_quantity():
    """``measure`` (the value without the threshold) is what the live test evaluates for conditions
    it does not induce; it must be a part of the rule's own expression."""
    for rule in rules.RULES:
        assert rule.measure and rule.measure in rule.expr, rule.name


def test_one_incident_pages_once_heartbeats_stopped_inhibits_the_budget_burns():
    """The heartbeats page inhibits its flow's budget burns (a dead replicator burns the budget too),
    the fast burn the slow burn's ticket; every page goes out after a 5-s group_wait and tickets
    and info alerts have routes of their own."""
    config = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())

    def targets(source: str) -> set[str]:
        names = set()
        for rule in config["inhibit_rules"]:
            if rule["source_matchers"] == [f'alertname="{source}"'] and rule["equal"] == ["flow"]:
                for matcher in rule["target_matchers"]:
                    names |= set(re.fullmatch(r'alertname=~?"(.+)"', matcher).group(1).split("|"))
        return names

    assert {"SparkmirrorRPOBudgetBurn", "SparkmirrorRPOBudgetBurnSlow", "SparkmirrorReplicatorDown",
            "SparkmirrorLagHigh"} <= targets("SparkmirrorHeartbeatsStopped")
    assert targets("SparkmirrorRPOBudgetBurn") == {"SparkmirrorRPOBudgetBurnSlow"}
    route = config["route"]
    assert route["receiver"] == "pager" and route["group_wait"] == "5s"
    # the audit's page is never inhibited: it shares the flow's one page group instead
    assert route["group_by"] == ["flow", "cluster"]
    assert {tuple(r["matchers"]): r["receiver"] for r in route["routes"]} == {
        ('severity="warning"',): "tickets", ('severity="info"',): "info"}
    assert all("alertname" in r["group_by"] for r in route["routes"]), "one ticket per alert"


def test_the_shipped_intervals_page_a_dead_replicator_within_a_minute_at_worst():
    """The budget of docs/alerts.md (Time to page), from the shipped files: the heartbeat interval,
    the timeout and margin, the monitor's refresh, a scrape, an evaluation and the group_wait."""
    prometheus = yaml.safe_load((ROOT / "alerts" / "prometheus.yml").read_text())["global"]
    alertmanager = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())["route"]
    t = mixin.DEFAULT.thresholds
    seconds = {"s": 1, "m": 60}
    parse = lambda d: int(d[:-1]) * seconds[d[-1]]  # noqa: E731
    worst = (1 + 10 + t.heartbeats_stopped_margin_seconds + 5 + parse(prometheus["scrape_interval"])
             + parse(prometheus["evaluation_interval"]) + parse(t.heartbeats_stopped_for)
             + parse(alertmanager["group_wait"]))
    assert worst < 60, worst
