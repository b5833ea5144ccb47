"""The alert and dashboard path on real Prometheus + Alertmanager (Debian packages).

A harness test of the stack, not of the monitor: a small prometheus_client
exporter started here serves every metric of ``sparkmirror.metrics`` for a healthy
flow, a broken one (every alert condition true), a slow one, one paused on
purpose five hours ago, one paused when the stack starts (its heartbeats and lag
age from then on) and two that a test breaks at once, in place of the real
monitor and replicator. Against it, a real Prometheus (1 s scrape and evaluation) proves that

- every PromQL expression of every dashboard panel parses and returns data, and
  every template variable lists values;
- every alert rule of the committed rule file loads, evaluates without error,
  and its expression returns data once its condition is induced;
- the page (heartbeats stopped) travels Prometheus -> Alertmanager -> webhook
  within its ``for`` plus the scrape and evaluation intervals and the group
  wait, and its resolution arrives too;
- through a second Alertmanager running the committed alerts/alertmanager.yml
  as it is (only its receivers point at this test's webhook): one incident
  (heartbeats stopped, budget burning, the audit finding records missing on
  one flow) pages once while another flow's page still arrives, and a flow
  paused on purpose pages nobody while the warning for a forgotten pause
  (the test config's ``flow_paused_warn_seconds``) opens a ticket.

The rule file is the committed one except that the page's ``for`` is shortened
to a few seconds (same expression, same annotations) and the burn-rate limits of
the recovery-point objectives are lowered (a fresh flow's windows count from when
recording began, so the committed 14.4x needs the broken flow bad for a minute,
the 1x over 3 days for four) and a pause warns after 20 s, so the test stays fast.
Every fake flow has the default objective: the fixed lag alerts, the fallback for flows without one,
must stay inactive although their lag condition is induced.
The measured times are written to test-artifacts/alert-timing.json.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from dataclasses import replace

from alerts import config as mixin
from alerts.config import MONITOR_JOB
from alerts.generate import write_rules
from alerts import slo
from alerts.rules import build
from dashboards import queries
from dashboards.generate import panel_expressions
from devenv.kafka import free_port
from sparkmirror import metrics as m
from tests.support.prometheus import AlertmanagerServer, PrometheusServer, WebhookReceiver
from tests.support.waiting import wait_until

HEALTHY, BROKEN = "primary->dr", "broken->dr"
#: A healthy flow paused on purpose five hours ago (sparkmirror ctl pause): it raises the pause alerts.
PAUSED = "paused->dr"
#: A flow whose replicator runs (heartbeats arrive) but falls behind its objective when a test says so.
SLOW = "slow->dr"
#: Paused on purpose when the stack starts: its heartbeats age and its lag grows from then on, so its
#: heartbeats page and budget burn fire in Prometheus while the pause inhibits them.
PAUSING = "pausing->dr"
#: Healthy until the one-incident test stops its heartbeats, burns its budget and has the audit find
#: records missing on it; OTHER's heartbeats stop at the same time (a different flow's page).
INCIDENT, OTHER = "incident->dr", "other->dr"
FLOWS = (HEALTHY, BROKEN, SLOW, PAUSED, PAUSING, INCIDENT, OTHER)
#: Flows no alert may be active for unless a test induces it.
QUIET_FLOWS = frozenset({HEALTHY, SLOW, PAUSED, INCIDENT, OTHER})
PAGE = "SparkmirrorHeartbeatsStopped"
CLUSTER_ALERT = "SparkmirrorClusterUnreachable"
#: Alerts of the broken flow the inhibition test waits for (their `for` shortened to seconds here).
INHIBITED = frozenset({"SparkmirrorHeartbeatsStopped", "SparkmirrorReplicatorDown", "SparkmirrorFlowError",
                       "SparkmirrorFlowStalled", "SparkmirrorOffsetSyncsStale"})
ALERTMANAGER_CONFIG = Path(__file__).resolve().parents[2] / "alerts" / "alertmanager.yml"
PAGE_FOR_SECONDS = 5
HEARTBEAT_TIMEOUT = 30  # the fake flows' sparkmirror_heartbeat_timeout_seconds
#: Shortened like the page's: the cluster alert must fire to inhibit the broken flow's alerts.
CLUSTER_FOR_SECONDS = 1
SCRAPE_SECONDS = EVALUATION_SECONDS = 1
#: The burn rates' limits in this test's rules, and the burn alerts (their `for` shortened too).
BURN_LIMIT = 0.01
BURNS = frozenset({"SparkmirrorRPOBudgetBurn", "SparkmirrorRPOBudgetBurnSlow"})
#: Rules whose condition is induced but that stay quiet on purpose, and the ``unless`` that keeps them
#: so: the fixed lag alerts are the fallback for flows without an objective (both flows have one);
#: the fast burn of a flow whose heartbeats page fires is that page's incident.
QUIET = {"SparkmirrorLagHigh": f" unless on(flow) {slo.OBJECTIVE}",
         "SparkmirrorLagGrowing": f" unless on(flow) {slo.OBJECTIVE}",
         "SparkmirrorRPOBudgetBurn": ' unless on(flow) max_over_time(ALERTS{alertname="SparkmirrorHeartbeatsStopped"}[5m])'}
#: A forgotten pause warns after this long here (4 h in the committed rules): a configured limit of
#: the test's mixin config, as a deployment sets its own.
PAUSE_WARN_SECONDS = 20
FAST_BURNS = replace(mixin.DEFAULT, thresholds=replace(
    mixin.DEFAULT.thresholds, rpo_fast_burn=BURN_LIMIT, rpo_slow_burn=BURN_LIMIT, rpo_steady_burn=BURN_LIMIT,
    flow_paused_warn_seconds=PAUSE_WARN_SECONDS))
#: The rules as this stack's Prometheus has them.
RULES = build(FAST_BURNS)
GROUP_WAIT_SECONDS = GROUP_INTERVAL_SECONDS = 1


class FakeMonitor:
    """Every sparkmirror metric, for a healthy flow and a broken one, changing with time.

    The broken flow (and its unreachable cluster) makes every alert condition
    true; counters grow with time so rate(), increase() and deriv() have data.
    """

    LABELS = {
        "flow": FLOWS, "cluster": ("primary", "dr", "broken"), "status": m.STATUSES,
        "topic": ("orders",), "partition": ("0",), "group": ("billing",), "collector": ("offsets",),
        "record_type": ("heartbeat",), "version": ("harness",), "granularity": ("partition",),
        "source": ("primary", "broken"), "target": ("dr",), "reason": m.FAILOVER_REASONS,
        "kind": ("loss", "content"),
    }
    #: The flows' clusters (sparkmirror_flow_info): the broken flow's source is the unreachable cluster.
    CLUSTERS = {**{flow: ("primary", "dr") for flow in FLOWS}, BROKEN: ("broken", "dr")}

    def __init__(self) -> None:
        self.started = time.time()
        self.heartbeat_age = {flow: 1.0 for flow in FLOWS}
        self.lag_seconds = {flow: 0.5 for flow in FLOWS}
        self.audit_missing_since: dict[str, float] = {}  # flow -> when the audit began finding records missing
        self.lock = threading.Lock()

    def set_heartbeat_age(self, flow: str, seconds: float) -> None:
        with self.lock:
            self.heartbeat_age[flow] = seconds

    def set_lag_seconds(self, flow: str, seconds: float) -> None:
        with self.lock:
            self.lag_seconds[flow] = seconds

    def find_records_missing(self, flow: str) -> None:
        """From now on the audit counts records of the flow missing on the target (3 a second)."""
        with self.lock:
            self.audit_missing_since[flow] = time.time()

    def describe(self):
        return []

    def collect(self):
        now = time.time()
        t = now - self.started
        for spec in m.ALL:
            family = _family(spec)
            for labels in _combinations(spec.labels, self.LABELS):
                if spec is m.FLOW_INFO and self.CLUSTERS[labels["flow"]] != (labels["source"], labels["target"]):
                    continue
                broken = labels.get("flow") == BROKEN or labels.get("cluster") == "broken"
                values = list(labels.values())
                if spec.kind == "histogram":
                    bound = 120.0 if broken else 0.05  # every heartbeat in one bucket
                    buckets = [(repr(b), t if b >= bound else 0.0) for b in spec.buckets] + [("+Inf", t)]
                    family.add_metric(values, buckets, t * bound)
                else:
                    family.add_metric(values, self._value(spec, labels, broken, now, t))
            yield family

    def _value(self, spec, labels, broken: bool, now: float, t: float) -> float:
        flow = labels.get("flow")
        with self.lock:
            age = 1000.0 if broken else self.heartbeat_age.get(flow, 1.0)
            lag = 1000.0 if broken else self.lag_seconds.get(flow, 0.5)
            missing_since = self.audit_missing_since.get(flow)
        if flow == PAUSING:  # nothing crosses since the pause (20 s behind then): no heartbeat arrives,
            age, lag = t + 0.5, t + 20  # the oldest record waits, and the budget burns before the page would
        # the broken flow is in every bad status at once, so that every status rule has its condition
        bad = labels.get("status") in ("STALL", "STOP", "ERR")
        table = {
            m.FLOW_INFO: 1.0,
            m.CLUSTER_UP: 0.0 if broken else 1.0,
            m.CLUSTER_ERRORS: 2 * t if broken else 0.0,
            m.FLOW_STATUS: float(bad if broken else labels.get("status") == "OK"),
            m.FLOW_PARTITIONS: 3.0 if (bad if broken else labels.get("status") == "OK") else 0.0,
            m.REPLICATOR_UP: 0.0 if broken else 1.0,
            m.HEARTBEAT_AGE: age,
            m.HEARTBEAT_ARRIVAL_AGE: age,
            m.GROUP_CHECKPOINT_STALE: 1.0 if broken else 0.0,
            m.HEARTBEAT_SEEN: 1.0,
            m.HEARTBEATS_EXPECTED: 1.0,
            m.HEARTBEAT_TIMEOUT: float(HEARTBEAT_TIMEOUT),
            m.HEARTBEAT_LAST_TIMESTAMP: now - age,
            m.OFFSET_SYNC_AGE: 6000.0 if broken else 2.0,
            m.FLOW_LAG_RECORDS: 1000 + 100 * t if broken else 10.0,
            m.TOPIC_LAG_RECORDS: 1000 + 100 * t if broken else 10.0,
            m.PARTITION_LAG_RECORDS: 1000 + 100 * t if broken else 10.0,
            m.FLOW_LAG_SECONDS: lag,
            m.FLOW_LAG_UNKNOWN_PARTITIONS: 1.0 if broken else 0.0,
            m.TOPIC_LAG_SECONDS: 1000.0 if broken else 0.5,
            m.PARTITION_LAG_SECONDS: 1000.0 if broken else 0.5,
            m.DATA_LOST_RECORDS: 5 * t if broken else 0.0,
            m.REPLICATOR_RECORDS_LOST: 5 * t if broken else 0.0,
            m.DECODE_ERRORS: 2 * t if broken else 0.0,
            m.PARTITION_STATUS_CODE: float(m.STATUS_CODES["ERR" if broken else "OK"]),
            m.CHECKPOINT_AGE: 5000.0 if broken else 5.0,
            m.CHECKPOINT_LAG: 100.0 if broken else 0.0,
            m.GROUP_CHECKPOINT_AGE: 5000.0 if broken else 0.0,
            m.GROUP_CHECKPOINT_LAG: 100.0 if broken else 0.0,
            m.GROUP_CHECKPOINT_MISSING: 1.0 if broken else 0.0,
            m.LAST_EVALUATION: now,
            m.FAILOVER_READY: 0.0 if broken else 1.0,
            m.FAILOVER_BLOCKED: 1.0 if broken else 0.0,
            m.FAILOVER_GROUPS_NOT_READY: 1.0 if broken else 0.0,
            m.FLOW_RETENTION_HEADROOM: 60.0 if broken else 86400.0,
            m.TOPIC_RETENTION_HEADROOM: 60.0 if broken else 86400.0,
            m.PARTITION_RETENTION_HEADROOM: 60.0 if broken else 86400.0,
            m.FLOW_RETENTION_LOW: 3.0 if broken else 0.0,
            m.FLOW_CATCHUP_ETA: float("inf") if broken else 5.0,
            m.PARTITION_CATCHUP_ETA: float("inf") if broken else 5.0,
            m.FLOW_CATCHUP_RATE: -100.0 if broken else 2.0,
            m.PARTITION_CATCHUP_RATE: -100.0 if broken else 2.0,
            m.AUDIT_MISSING: 5 * t if broken else (3 * (now - missing_since) if missing_since else 0.0),
            m.AUDIT_MISMATCHED: 2 * t if broken else 0.0,
            m.AUDIT_DUPLICATED: 3 * t if broken else 0.0,
            m.AUDIT_COVERAGE: 1.0,
            m.REPLICATOR_FLOW_PAUSED: float(flow in (PAUSED, PAUSING)),
            m.REPLICATOR_FLOW_PAUSED_SINCE: {PAUSED: now - 5 * 3600, PAUSING: self.started}.get(flow, now),
        }
        if spec in table:
            return table[spec]
        return 10 * t if spec.kind == "counter" else 0.01  # throughput counters, durations, info


def _family(spec: m.MetricSpec):
    if spec.kind == "counter":
        return CounterMetricFamily(spec.base_name, spec.help, labels=list(spec.labels))
    if spec.kind == "histogram":
        return HistogramMetricFamily(spec.name, spec.help, labels=list(spec.labels))
    return GaugeMetricFamily(spec.name, spec.help, labels=list(spec.labels))


def _combinations(names: tuple[str, ...], values: dict[str, tuple[str, ...]]):
    combos: list[dict[str, str]] = [{}]
    for name in names:
        combos = [{**c, name: v} for c in combos for v in values[name]]
    return combos


class Stack:
    def __init__(self, fake, prometheus, alertmanager, webhook, shipped, pager) -> None:
        self.fake, self.prometheus, self.alertmanager, self.webhook = fake, prometheus, alertmanager, webhook
        #: the committed alertmanager.yml as it is (routes, group_by, timers, inhibition), and its receivers
        self.shipped, self.pager = shipped, pager


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    base = tmp_path_factory.mktemp("prometheus-stack")
    fake = FakeMonitor()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(fake)
    exporter_port = free_port()
    server, _thread = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    dead_monitor = f"127.0.0.1:{free_port()}"  # a monitor target nobody listens on: MonitorDown
    rules = write_rules(base / "rules.yml", FAST_BURNS, for_overrides={
        PAGE: f"{PAGE_FOR_SECONDS}s", CLUSTER_ALERT: f"{CLUSTER_FOR_SECONDS}s",
        **{name: "2s" for name in INHIBITED if name != PAGE},
        # after the page, as in production: a dead flow's budget needs minutes to burn past 14.4x
        **{name: f"{PAGE_FOR_SECONDS + 3}s" for name in BURNS}})
    webhook = WebhookReceiver().start()
    committed = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    alertmanager = AlertmanagerServer(base / "alertmanager", webhook.url, group_wait=f"{GROUP_WAIT_SECONDS}s",
                                      group_interval=f"{GROUP_INTERVAL_SECONDS}s",
                                      group_by=tuple(committed["route"]["group_by"]),
                                      inhibit_rules=committed["inhibit_rules"])
    pager = WebhookReceiver().start()
    shipped = AlertmanagerServer.shipped(base / "alertmanager-shipped", pager.url)
    prometheus = PrometheusServer(
        base / "prometheus", {MONITOR_JOB: [f"127.0.0.1:{exporter_port}", dead_monitor]}, [rules],
        alertmanager=[alertmanager.url, shipped.url], scrape_interval=f"{SCRAPE_SECONDS}s",
        evaluation_interval=f"{EVALUATION_SECONDS}s")
    try:
        alertmanager.start()
        shipped.start()
        prometheus.start()
        yield Stack(fake, prometheus, alertmanager, webhook, shipped, pager)
    finally:
        prometheus.stop()
        alertmanager.stop()
        shipped.stop()
        webhook.stop()
        pager.stop()
        server.shutdown()
        server.server_close()


def test_every_dashboard_expression_parses_and_returns_data(stack):
    expressions = panel_expressions()
    assert len(expressions) >= 30
    empty = []
    for item in expressions:
        expr = queries.instantiate(item.expr)
        if not stack.prometheus.wait_for_data(expr, timeout=15):
            empty.append(f"{item.dashboard} / {item.panel} / {item.ref_id}: {expr}")
    assert not empty, "dashboard expressions without data:\n" + "\n".join(empty)
    # the overview's alert table lists every rule's alerts: the audit's page of the broken flow among them
    (table,) = [item for item in expressions if item.panel == "Firing alerts"]
    listed = wait_until(lambda: {(r["metric"]["alertname"], r["metric"].get("flow")) for r in stack.prometheus.query(
        queries.instantiate(table.expr))} >= {("SparkmirrorReplicationAuditFailed", BROKEN)}, 15, interval=0.5,
        what="the audit's alert in the overview's Firing alerts table")
    assert listed
    health = {r["metric"]["flow"]: float(r["value"][1]) for r in stack.prometheus.query(
        queries.instantiate(queries.flow_status_code().expr))}
    assert health == {**{flow: m.STATUS_CODES["OK"] for flow in FLOWS}, BROKEN: m.STATUS_CODES["ERR"]}


def test_every_template_variable_lists_values(stack):
    stack.prometheus.wait_for_data(m.FLOW_STATUS.name)
    for name, query in queries.variable_queries().items():
        selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", query).groups()
        values = stack.prometheus.label_values(label, queries.instantiate(selector))
        assert values, f"variable {name}: {query} lists nothing"
    assert stack.prometheus.label_values("flow", m.FLOW_STATUS.name) == sorted(FLOWS)


def test_every_alert_rule_loads_and_fires_on_its_induced_condition(stack):
    empty = []
    for rule in RULES:
        expr = rule.expr
        if rule.name in QUIET:  # its condition, without what keeps it quiet
            assert QUIET[rule.name] in expr, rule.name
            expr = expr.replace(QUIET[rule.name], "")
        result = stack.prometheus.wait_for_data(expr, timeout=15)
        if not result:
            empty.append(f"{rule.name}: {expr}")
    assert not empty, "alert expressions without data although the condition is induced:\n" + "\n".join(empty)
    loaded: dict[str, dict] = {}

    def evaluated() -> bool:  # the rule manager evaluates on its own clock: wait until each rule has been
        loaded.clear()
        loaded.update((r["name"], r) for r in stack.prometheus.rules() if r["type"] == "alerting")
        return all(r["state"] != "inactive" for name, r in loaded.items() if name not in QUIET)

    wait_until(evaluated, 10, interval=0.5, what="every alert rule evaluated with its condition induced",
               details=lambda: f"states: { {name: r['state'] for name, r in loaded.items()} }")
    assert set(loaded) == {r.name for r in RULES}
    for name, rule in loaded.items():
        assert rule["health"] == "ok", f"{name}: {rule.get('lastError')}"
        if name in QUIET:
            assert rule["state"] == "inactive" and not stack.prometheus.query(rule["query"]), \
                f"{name} is active although{QUIET[name]}"
            continue
        assert rule["state"] in ("pending", "firing"), f"{name} is {rule['state']} with its condition induced"
        flows = {a["labels"].get("flow") for a in rule["alerts"]}
        if name.startswith("SparkmirrorFlowPaused"):
            assert PAUSED in flows and flows <= {PAUSED, PAUSING}, f"{name} is active for {flows}"
        else:
            assert not QUIET_FLOWS & flows, f"{name} is active for a healthy flow"


def test_every_recording_rule_evaluates_with_data_and_the_sli_tells_the_flows_apart(stack):
    """The objectives' recording rules on the real Prometheus: each returns a series per flow; the
    healthy flow (0.5 s behind, every partition known) is good, the broken one (1000 s behind, a
    partition unknown) bad, and its budget is going."""
    recorded = [r for r in stack.prometheus.rules() if r["type"] == "recording"]
    names = {r["name"] for r in recorded}
    assert names >= {slo.OBJECTIVE, slo.BUDGET, slo.GOOD, slo.SINCE, slo.BUDGET_REMAINING, slo.PERIOD_ERRORS,
                     *map(slo.errors, slo.WINDOWS), *map(slo.burn_rate, slo.WINDOWS)}
    assert all(r["health"] == "ok" for r in recorded), [(r["name"], r.get("lastError")) for r in recorded]
    for name in sorted(names):
        result = stack.prometheus.wait_for_data(name, timeout=15)
        assert {r["metric"]["flow"] for r in result} == set(FLOWS), f"{name}: {result}"
    good = {r["metric"]["flow"]: float(r["value"][1]) for r in stack.prometheus.query(slo.GOOD)}
    assert {flow: good[flow] for flow in (HEALTHY, BROKEN, SLOW, PAUSED)} == {HEALTHY: 1.0, BROKEN: 0.0, SLOW: 1.0,
                                                                             PAUSED: 1.0}

    def budget() -> dict:
        return {r["metric"]["flow"]: float(r["value"][1]) for r in stack.prometheus.query(slo.BUDGET_REMAINING)}

    left = wait_until(lambda: (b := budget()) and b[BROKEN] < 1.0 and b, 15, interval=0.5,
                      what="the broken flow's budget going", details=lambda: str(budget()))
    assert left[HEALTHY] == 1.0 and left[BROKEN] < 1.0


def test_heartbeats_stopped_pages_through_alertmanager_and_resolves(stack, artifacts_dir):
    prom, webhook = stack.prometheus, stack.webhook
    prom.wait_for_data(m.HEARTBEAT_AGE.name)
    assert not prom.query(f'ALERTS{{alertname="{PAGE}",flow="{HEALTHY}"}}'), "page active before inducing it"

    def page(status: str):
        return lambda n: any(a["status"] == status for a in n.alerts(alertname=PAGE, flow=HEALTHY))

    induced = time.monotonic()
    # a dead replicator: no heartbeat arrives, and the flow falls behind its objective (its budget burns)
    stack.fake.set_heartbeat_age(HEALTHY, 10 * HEARTBEAT_TIMEOUT)
    stack.fake.set_lag_seconds(HEALTHY, 1000.0)
    fired = webhook.wait_for(page("firing"), timeout=60, after=induced)
    assert fired is not None, f"no firing page within 60 s; alertmanager log:\n{stack.alertmanager.log_tail()}"
    detection = fired.received_monotonic - induced
    alert = fired.alerts(alertname=PAGE, flow=HEALTHY)[0]
    assert alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["runbook_url"].endswith("#sparkmirrorheartbeatsstopped")
    assert HEALTHY in alert["annotations"]["summary"]

    # one incident, one page: the budget burns past the page's limit, and no second page goes out
    burning = f'{slo.burn_rate("1h")}{{flow="{HEALTHY}"}} > {BURN_LIMIT} and {slo.burn_rate("5m")} > {BURN_LIMIT}'
    assert prom.wait_for_data(burning, timeout=15), "the dead flow's budget does not burn"
    time.sleep(2 + 2 * EVALUATION_SECONDS + GROUP_WAIT_SECONDS + 1)  # the burn alert's `for`, then Alertmanager
    burns = [(a["labels"]["alertname"], n.status) for n in webhook.notifications if n.received_monotonic >= induced
             for a in n.alerts(flow=HEALTHY) if a["labels"]["alertname"] in BURNS]
    assert burns == [], f"the budget burn paged besides the heartbeats page: {burns}"

    recovered = time.monotonic()
    stack.fake.set_heartbeat_age(HEALTHY, 1.0)
    stack.fake.set_lag_seconds(HEALTHY, 0.5)
    resolved = webhook.wait_for(page("resolved"), timeout=60, after=recovered)
    assert resolved is not None, f"no resolved notification within 60 s:\n{stack.alertmanager.log_tail()}"
    resolution = resolved.received_monotonic - recovered

    timing = {
        "alert": PAGE, "for_seconds": PAGE_FOR_SECONDS, "scrape_interval_seconds": SCRAPE_SECONDS,
        "evaluation_interval_seconds": EVALUATION_SECONDS, "group_wait_seconds": GROUP_WAIT_SECONDS,
        "group_interval_seconds": GROUP_INTERVAL_SECONDS,
        "detection_seconds": round(detection, 2), "resolve_seconds": round(resolution, 2),
    }
    (artifacts_dir / "alert-timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    print(f"\nalert timing: {timing}")
    # never before its `for`; within for + one scrape + one evaluation + Alertmanager's group wait
    # (plus slack for process scheduling on a loaded machine)
    assert detection >= PAGE_FOR_SECONDS
    assert detection <= PAGE_FOR_SECONDS + SCRAPE_SECONDS + 2 * EVALUATION_SECONDS + GROUP_WAIT_SECONDS + 5
    assert resolution <= SCRAPE_SECONDS + 2 * EVALUATION_SECONDS + GROUP_INTERVAL_SECONDS + 5


def test_a_flow_fallen_behind_its_objective_pages_once_with_the_budget_left(stack):
    """The replicator of SLOW runs (heartbeats arrive) but the flow is 1000 s behind its 30-s objective:
    the fast burn pages once through Alertmanager, its notification says how much budget is left, and
    the slow burn's ticket of the same incident is inhibited."""
    webhook = stack.webhook
    started = time.monotonic()
    stack.fake.set_lag_seconds(SLOW, 1000.0)
    try:
        fired = webhook.wait_for(lambda n: any(a["status"] == "firing" for a in n.alerts(
            alertname="SparkmirrorRPOBudgetBurn", flow=SLOW)), timeout=60, after=started)
        assert fired is not None, f"no budget-burn page within 60 s:\n{stack.alertmanager.log_tail()}"
        alert = fired.alerts(alertname="SparkmirrorRPOBudgetBurn", flow=SLOW)[0]
        assert alert["labels"]["severity"] == "critical"
        assert alert["annotations"]["runbook_url"].endswith("#sparkmirrorrpobudgetburn")
        left = re.search(r"Budget left over the period: ([\d.]+)%\.", alert["annotations"]["description"])
        assert left and 0 < float(left.group(1)) < 100, alert["annotations"]["description"]

        def slow_burn_suppressed() -> bool:
            return any(a["labels"]["alertname"] == "SparkmirrorRPOBudgetBurnSlow" and a["labels"].get("flow") == SLOW
                       and a["status"]["state"] == "suppressed" for a in stack.alertmanager.alerts())

        wait_until(slow_burn_suppressed, 30, interval=0.5, what="the slow burn of the same flow inhibited",
                   details=lambda: str(stack.alertmanager.alerts()))
        time.sleep(2 * GROUP_INTERVAL_SECONDS + 1)
        sent = [(a["labels"]["alertname"], a["status"]) for n in webhook.notifications
                if n.received_monotonic >= started for a in n.alerts(flow=SLOW)]
        assert sent == [("SparkmirrorRPOBudgetBurn", "firing")], sent
    finally:
        stack.fake.set_lag_seconds(SLOW, 0.5)


def test_an_unreachable_cluster_pages_once_and_inhibits_the_alerts_of_its_flows(stack):
    """The committed Alertmanager config: cluster ``broken`` is down, every alert of the flow from it
    (labels source/target from sparkmirror_flow_info) is suppressed by the cluster's alert and never
    notified; the data-loss alerts are not (the gap is real); the healthy flow is untouched."""
    flow_alerts = INHIBITED
    def sent():
        alerts = stack.alertmanager.alerts()
        broken = {a["labels"]["alertname"]: a for a in alerts if a["labels"].get("flow") == BROKEN}
        cluster = [a for a in alerts if a["labels"]["alertname"] == CLUSTER_ALERT
                   and a["labels"]["cluster"] == "broken"]
        return (alerts, broken, cluster) if cluster and flow_alerts <= set(broken) else None

    alerts, broken, cluster = wait_until(
        sent, 60, interval=0.5, what=f"{CLUSTER_ALERT} for cluster broken and {sorted(flow_alerts)} of its flow",
        details=lambda: f"alerts at Alertmanager: {stack.alertmanager.alerts()}")
    assert cluster and cluster[0]["status"]["state"] == "active", alerts
    assert flow_alerts <= set(broken), f"not sent by Prometheus: {flow_alerts - set(broken)}"
    for name in flow_alerts:
        alert = broken[name]
        assert alert["labels"]["source"] == "broken" and alert["labels"]["target"] == "dr"
        assert alert["status"]["state"] == "suppressed" and alert["status"]["inhibitedBy"], f"{name}: {alert}"
    assert broken["SparkmirrorDataLost"]["status"]["state"] == "active"
    time.sleep(2 * GROUP_WAIT_SECONDS + 1)
    notified = {(a["labels"]["alertname"], a["labels"].get("flow")) for n in stack.webhook.notifications
                for a in n.alerts() if a["status"] == "firing"}
    assert (CLUSTER_ALERT, None) in notified
    assert not {(name, BROKEN) for name in flow_alerts} & notified, notified


AUDIT = "SparkmirrorReplicationAuditFailed"
BURN = "SparkmirrorRPOBudgetBurn"


def _pages(stack: Stack, flow: str, after: float = 0.0) -> list:
    """Notifications the shipped Alertmanager sent to its pager receiver for ``flow``'s group."""
    return [n for n in stack.pager.notifications if n.received_monotonic >= after and n.receiver == "pager"
            and n.group_labels.get("flow") == flow]


def test_one_incident_pages_once_and_another_flows_page_still_arrives(stack):
    """The shipped alertmanager.yml as it is (its group_by, group_wait, inhibition): INCIDENT's heartbeats
    stop, its budget burns past the page's limit and the audit finds its records missing, all at once;
    OTHER's heartbeats stop too. The pager receives one notification for INCIDENT, whose Alertmanager
    group holds the heartbeats page and the audit's (never inhibited, paged with it, not after it),
    and one for OTHER. promtool cannot show this: it tests rules, not Alertmanager."""
    prom = stack.prometheus
    started = time.monotonic()
    for flow in (INCIDENT, OTHER):
        stack.fake.set_heartbeat_age(flow, 10 * HEARTBEAT_TIMEOUT)
    stack.fake.set_lag_seconds(INCIDENT, 1000.0)
    try:
        firing = f'ALERTS{{alertname="{PAGE}",alertstate="firing",flow="{INCIDENT}"}}'
        assert prom.wait_for_data(firing, timeout=30), f"{PAGE} of {INCIDENT} does not fire"
        # the audit notices the gap as the page goes out (a finding that comes later joins the same group)
        stack.fake.find_records_missing(INCIDENT)
        burning = f'{slo.burn_rate("1h")}{{flow="{INCIDENT}"}} > {BURN_LIMIT} and {slo.burn_rate("5m")} > {BURN_LIMIT}'
        assert prom.wait_for_data(burning, timeout=15), "the incident's budget does not burn"
        assert prom.wait_for_data(f'ALERTS{{alertname="{AUDIT}",alertstate="firing",flow="{INCIDENT}"}}', 15)

        def grouped():
            for group in stack.shipped.groups():
                if group["labels"] == {"flow": INCIDENT} and group["receiver"]["name"] == "pager":
                    names = {a["labels"]["alertname"] for a in group["alerts"]}
                    if {PAGE, AUDIT} <= names:
                        return group
            return None

        group = wait_until(grouped, 20, interval=0.5, what=f"{PAGE} and {AUDIT} of {INCIDENT} in one pager group",
                           details=lambda: json.dumps(stack.shipped.groups())[:3000])
        states = {a["labels"]["alertname"]: a["status"]["state"] for a in group["alerts"]}
        assert states[PAGE] == states[AUDIT] == "active", states
        other = stack.pager.wait_for(lambda n: n.receiver == "pager" and n.group_labels.get("flow") == OTHER
                                     and any(a["status"] == "firing" for a in n.alerts(alertname=PAGE)),
                                     timeout=30, after=started)
        assert other is not None, f"no page for {OTHER}:\n{stack.shipped.log_tail()}"
        # past the group's wait for the last of them, and more: still the one notification
        time.sleep(5 + 2 * EVALUATION_SECONDS + 3)
        pages = _pages(stack, INCIDENT, after=started)
        assert len(pages) == 1, [(n.received_monotonic - started, [a["labels"]["alertname"] for a in n.alerts()])
                                 for n in pages]
        (page,) = pages
        sent = {a["labels"]["alertname"] for a in page.alerts() if a["status"] == "firing"}
        assert PAGE in sent and not sent & BURNS, sent
        assert all(a["labels"]["severity"] == "critical" for a in page.alerts())
        print(f"\none incident: one page for {INCIDENT} after {page.received_monotonic - started:.1f} s with "
              f"{sorted(sent)}; group at Alertmanager: {states}; {OTHER} paged after "
              f"{other.received_monotonic - started:.1f} s")
    finally:
        for flow in (INCIDENT, OTHER):
            stack.fake.set_heartbeat_age(flow, 1.0)
        stack.fake.set_lag_seconds(INCIDENT, 0.5)


def test_a_paused_flow_pages_nobody_and_a_forgotten_pause_opens_a_ticket(stack):
    """PAUSING was paused when the stack started: no heartbeat arrives and its lag grows since, so the
    conditions of its heartbeats page and of its fast budget burn are true; the rules leave out a flow
    paused within the last minute (heartbeats) or 10 minutes (burn), and Alertmanager inhibits its other
    flow alerts under SparkmirrorFlowPaused. Neither Alertmanager sends a critical notification for it,
    while past the test config's flow_paused_warn_seconds the shipped one opens the ticket (its 30-s
    group_wait)."""
    prom = stack.prometheus
    assert prom.wait_for_data(f'ALERTS{{alertname="SparkmirrorFlowPaused",alertstate="firing",flow="{PAUSING}"}}', 30)
    paused_clauses = {PAGE: " unless on(flow) max_over_time(sparkmirror_replicator_flow_paused[1m]) == 1",
                      BURN: " unless on(flow) max_over_time(sparkmirror_replicator_flow_paused[10m]) == 1"}
    for name, clause in paused_clauses.items():
        expr = {r.name: r.expr for r in RULES}[name]
        assert clause in expr, name
        condition = f'({expr.replace(clause, "").replace(QUIET.get(name, "@"), "")}) and on(flow) ' \
                    f'{m.REPLICATOR_FLOW_PAUSED.name}{{flow="{PAUSING}"}}'
        assert prom.wait_for_data(condition, timeout=60), f"{name}'s condition is not true for {PAUSING}"
    ticket = stack.pager.wait_for(lambda n: n.receiver == "tickets" and any(
        a["status"] == "firing" for a in n.alerts(alertname="SparkmirrorFlowPausedTooLong", flow=PAUSING)),
        timeout=90)
    assert ticket is not None, f"no ticket for the forgotten pause:\n{stack.shipped.log_tail()}"
    alert = ticket.alerts(alertname="SparkmirrorFlowPausedTooLong", flow=PAUSING)[0]
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["runbook_url"].endswith("#sparkmirrorflowpausedtoolong")
    time.sleep(2 * EVALUATION_SECONDS + 5)  # a page sent as the conditions held would have come by now
    fired = prom.query(f'max_over_time(ALERTS{{flow="{PAUSING}",severity="critical"}}[10m])')
    assert not fired, f"critical alerts active for the paused flow: {fired}"
    critical = [(n.receiver, a["labels"]["alertname"]) for receiver in (stack.pager, stack.webhook)
                for n in receiver.notifications for a in n.alerts(flow=PAUSING)
                if a["labels"].get("severity") == "critical"]
    assert critical == [], f"a paused flow paged: {critical}"
    print(f"\npaused flow: heartbeats-page and fast-burn conditions true, no critical alert, no page; ticket "
          f"{alert['annotations']['summary']!r}")
