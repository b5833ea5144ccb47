"""Dashboards, alert rules and the pager path against live replication.

Everything is real: the replicator (``sparkmirror replicate``, a Spark job) copies
a unique topic between the session clusters; ``sparkmirror monitor`` (a process)
watches the flow; Prometheus (Debian package, 1 s scrape and evaluation) scrapes
the monitor as job ``sparkmirror-monitor`` and the replicator's own /metrics,
evaluates the generated rules and sends alerts to Alertmanager (Debian package),
which notifies the webhook receiver of this test.

One scenario (module fixture) runs once, and the tests judge what it recorded:

1. *replicating*: a consumer group commits on the source (so the replicator
   checkpoints it) and one record that is not a heartbeat lands in the flow's
   heartbeats topic (bad input, so the decode-error panel has a series);
2. *replicator stopped* (SIGTERM once caught up): heartbeats stop; a producer keeps
   writing records stamped an hour ago (late-arriving data: the oldest record not
   yet on the target is then an hour old, which is what ``SparkmirrorLagHigh``
   measures, without waiting five minutes), so lag grows; records of one
   partition are deleted before they were copied (data loss);
3. *replicator restarted* with the same checkpoint directory: heartbeats resume;
4. *monitor stopped*: Prometheus cannot scrape it.

Between 1 and 2, *replicator starved*: a producer writes records stamped now while the replicator's
processes (driver, Spark JVM) get the CPU 4 s in every 26 (SIGSTOP, SIGCONT), so it copies late but
its heartbeats still arrive well within their timeout: the flow breaches its recovery-point
objective without stopping (only when its test is selected: it is marked ``slow``, and
test_prometheus_stack.py proves the burn-rate pages in every run). A second Prometheus and Alertmanager, started once the flow is caught
up in phase 1 (they record it within its objective first), run the
shipped settings as they are (alerts/prometheus.yml's scrape and evaluation intervals,
alerts/alertmanager.yml's routes, grouping and timers, the committed rules' ``for``) with the
objective of this test's mixin config, 10 s at 99.99 % (one bad sample in an hour is a 14.4x
burn: a tight objective keeps the phase short; the default 30 s at 99.9 % needs a minute of
bad samples more, 30 s more to breach). The fast burn must page once at that pager, with the budget left in the
notification; the time from the first breach the monitor reported to the page at the receiver
goes to test-artifacts/rpo-page-shipped.json.

Every PromQL expression of every dashboard panel (template variables instantiated
with ``dashboards.queries.instantiate``: all flows, topics and groups) and every
template variable is evaluated in each phase until it returns data. Alert rules
whose condition the scenario induces (heartbeats stopped, replicator down, lag
high, lag growing, data lost, monitor down) must return data in the phase that
induces it and none while replicating; the others (latency high, checkpoints
stale, cluster unreachable: minutes of slowness, a ten-minute-old checkpoint or
a dead cluster are not induced here) have their measured quantity evaluated
instead (``AlertRule.measure``: the rule's value without its threshold). Which expression returned data in which phase is written to
test-artifacts/live-queries.json.

The page (``SparkmirrorHeartbeatsStopped``) is timed from the replicator's SIGTERM
and from the moment its condition became true (the last heartbeat's timestamp
plus the flow's heartbeat timeout, which the monitor exports and the rule compares with) to the webhook, and its resolution from the
restart and from the moment the monitor saw heartbeats again; figures go to
test-artifacts/alert-timing-live.json. The rule file is the generated one with
only that rule's ``for`` shortened from 1m to 5s (``for_overrides`` of the
alerts generator), so the test takes about three minutes rather than four.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from alerts import config as mixin
from alerts import slo, thresholds
from alerts.config import MONITOR_JOB
from alerts.generate import write_rules
from alerts.rules import RULES
from sparkmirror.objectives import section as objectives_section
from dashboards import queries
from dashboards.generate import panel_expressions
from tests.support.kafka import create_topic
from tests.support.monitor import commit_group, flow_of, produce_raw, replication_config
from tests.support.prometheus import (SHIPPED_ALERTMANAGER, AlertmanagerServer, MonitorProcess, PrometheusServer,
                                      PromQLError, WebhookReceiver)
from tests.support.replicator import Replicator, descendants

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PAGE = "SparkmirrorHeartbeatsStopped"
PAGE_FOR_SECONDS = 5
SCRAPE_SECONDS = EVALUATION_SECONDS = 1
GROUP_WAIT_SECONDS = GROUP_INTERVAL_SECONDS = 1
MONITOR_INTERVAL_SECONDS = 1
#: The monitor's heartbeat timeout (sparkmirror_heartbeat_timeout_seconds, which the page compares the
#: heartbeat age with, and sparkmirror_replicator_up): a Spark micro-batch on this 2-core machine can
#: take longer than the default 2 x 1 s, and the first batches after Spark's start much longer (with
#: the page's `for` shortened to seconds, a 10 s timeout paged during the start-up).
HEARTBEAT_TIMEOUT_SECONDS = 30
#: The page's grace for a flow whose heartbeats were never seen: Spark on this 2-core machine can take
#: more than the default 2 minutes to deliver the first heartbeat after the monitor started.
HEARTBEAT_GRACE_SECONDS = 300
REPLICATOR_JOB = "sparkmirror-replicator"
#: The page waits this long beyond the heartbeat timeout (alerts/thresholds.py).
MARGIN_SECONDS = thresholds.DEFAULT.heartbeats_stopped_margin_seconds
PARTITIONS = 3
LATE_BY_SECONDS = 3600
#: Rules the scenario makes true, and the phase that does it.
INDUCED = {
    "SparkmirrorHeartbeatsStopped": "replicator stopped",
    "SparkmirrorReplicatorDown": "replicator stopped",
    "SparkmirrorLagHigh": "replicator stopped",
    "SparkmirrorLagGrowing": "replicator stopped",
    "SparkmirrorDataLost": "replicator stopped",
    "SparkmirrorMonitorDown": "monitor stopped",
}
#: The flow has the default recovery-point objective, so the fixed lag alerts (the fallback for
#: flows without one) are induced as conditions but must stay quiet: their expression is evaluated
#: without its "unless the flow has an objective", and must return nothing with it.
FALLBACK = {"SparkmirrorLagHigh", "SparkmirrorLagGrowing"}
PHASES = ("replicating", "replicator stopped", "replicator restarted", "monitor stopped")
#: The starved phase: the objective of its mixin config, the CPU the replicator gets, how long to wait.
STARVED_OBJECTIVE = {"lag_seconds": 10, "target": 0.9999, "period": "30d"}
#: Each stop leaves the lag above the objective for longer than a scrape interval (10 s), so every
#: cycle has a bad sample whatever the scrape's phase (a 16-s stop in a 20-s cycle could alias with
#: the 10-s scrapes and never be seen); the heartbeats' silence stays under their 40-s page.
STARVED_RUN_SECONDS, STARVED_STOP_SECONDS = 4.0, 22.0
STARVED_PAGE_TIMEOUT_SECONDS = 150
BURN = "SparkmirrorRPOBudgetBurn"
SHIPPED_PROMETHEUS = Path(__file__).resolve().parents[2] / "alerts" / "prometheus.yml"

@dataclass
class Check:
    """One expression evaluated against the live Prometheus, and where it first returned data."""

    kind: str  # panel | variable | rule
    name: str
    expr: str
    phases: tuple[str, ...] = PHASES  # where it may be counted
    induced: bool | None = None
    phase: str | None = None
    seconds_into_test: float | None = None
    series: int = 0
    example: dict | None = None
    error: str | None = None

    @property
    def pending(self) -> bool:
        return self.phase is None and self.error is None


class LiveQueries:
    def __init__(self, prometheus: PrometheusServer, started: float) -> None:
        self.prometheus, self.started = prometheus, started
        self.checks: list[Check] = []
        for item in panel_expressions():
            self.checks.append(Check("panel", f"{item.dashboard} / {item.panel} / {item.ref_id}",
                                     queries.instantiate(item.expr)))
        for name, query in queries.variable_queries().items():
            self.checks.append(Check("variable", name, queries.instantiate(query)))
        for rule in RULES:
            if rule.name in INDUCED:
                expr = rule.expr.replace(f" unless on(flow) {slo.OBJECTIVE}", "") if rule.name in FALLBACK else rule.expr
                self.checks.append(Check("rule", rule.name, expr, (INDUCED[rule.name],), induced=True))
            else:
                self.checks.append(Check("rule", rule.name, rule.measure, induced=False))
        self.fallback_with_objective: dict[str, list] = {}  # fixed lag alerts that fired for this flow
        self.quiet: dict[str, list] = {}  # induced rule -> what it returned while replicating

    def _evaluate(self, check: Check) -> list:
        if check.kind == "variable":
            selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", check.expr).groups()
            return [{"metric": {label: v}} for v in self.prometheus.label_values(label, selector)]
        return self.prometheus.query(check.expr)

    def sweep(self, phase: str) -> list[Check]:
        """Evaluate every pending check allowed in ``phase``; returns those still pending."""
        for check in self.checks:
            if not check.pending or phase not in check.phases:
                continue
            try:
                result = self._evaluate(check)
            except PromQLError as exc:
                check.error = str(exc)
                continue
            if result:
                check.phase, check.series = phase, len(result)
                check.seconds_into_test = round(time.monotonic() - self.started, 1)
                check.example = result[0]
        return [c for c in self.checks if c.pending and phase in c.phases]

    def check_quiet(self) -> None:
        """Induced rules must not be true while the flow replicates normally."""
        for rule in RULES:
            if rule.name in INDUCED:
                self.quiet[rule.name] = self.prometheus.query(rule.expr)

    def document(self) -> dict:
        by_kind = {k: [c for c in self.checks if c.kind == k] for k in ("panel", "variable", "rule")}
        return {
            "template_values": queries.EVALUATION_DEFAULTS,
            "summary": {
                "panel_expressions": len(by_kind["panel"]),
                "panel_expressions_with_live_data": sum(c.phase is not None for c in by_kind["panel"]),
                "template_variables": len(by_kind["variable"]),
                "template_variables_with_live_values": sum(c.phase is not None for c in by_kind["variable"]),
                "alert_rules": len(by_kind["rule"]),
                "alert_rules_induced_with_live_data": sum(bool(c.induced and c.phase) for c in by_kind["rule"]),
                "alert_rules_without_threshold_with_live_data": sum(
                    bool(not c.induced and c.phase) for c in by_kind["rule"]),
                "phases": list(PHASES),
            },
            "checks": [asdict(c) for c in self.checks],
            "induced_rules_while_replicating": {k: len(v) for k, v in self.quiet.items()},
        }


class LateProducer:
    """Writes a few records a second to every partition, stamped ``late_by`` seconds ago."""

    def __init__(self, bootstrap: str, topic: str, late_by: float = LATE_BY_SECONDS) -> None:
        self.bootstrap, self.topic, self.late_by = bootstrap, topic, late_by
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="late-producer", daemon=True)
        self.errors: list[BaseException] = []
        self.sent = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            stamp = int((time.time() - self.late_by) * 1000)
            try:
                produce_raw(self.bootstrap, self.topic, [{"key": b"late", "value": b"late", "partition": p,
                                                          "timestamp": stamp} for p in range(PARTITIONS)] * 3)
            except BaseException as exc:  # reported by stop()
                self.errors.append(exc)
                return
            self.sent += 3 * PARTITIONS
            self._stop.wait(1.0)

    def start(self) -> "LateProducer":
        self._thread.start()
        return self

    def stop(self) -> list[BaseException]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        return self.errors


class Starver:
    """Gives a process tree the CPU ``run`` seconds in every ``run + stop`` (SIGSTOP, SIGCONT): it does
    all its work, late. ``stop()`` always leaves every process running."""

    def __init__(self, pid: int, run: float, stop: float) -> None:
        self.pids = [pid, *descendants(pid)]  # the Spark JVM runs in a session of its own
        self.run, self.pause = run, stop
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="starver", daemon=True)
        self.cycles = 0

    def _signal(self, signum: int) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._signal(signal.SIGSTOP)
                self._stop.wait(self.pause)
                self._signal(signal.SIGCONT)
                self.cycles += 1
                self._stop.wait(self.run)
        finally:
            self._signal(signal.SIGCONT)

    def start(self) -> "Starver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._signal(signal.SIGCONT)


def _page(flow: str, status: str):
    return lambda n: any(a["status"] == status for a in n.alerts(alertname=PAGE, flow=flow))


def _active_at(prometheus: PrometheusServer, flow: str) -> float | None:
    """When Prometheus' rule evaluation first found the page's condition true (its activeAt)."""
    for alert in prometheus.api("alerts")["alerts"]:
        if alert["labels"].get("alertname") == PAGE and alert["labels"].get("flow") == flow:
            return datetime.fromisoformat(alert["activeAt"]).timestamp()
    return None


def _delete_to_end(bootstrap: str, topic: str, partition: int) -> int:
    """deleteRecords up to the partition's end offset (as retention would); returns that offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{time.time_ns()}"})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, end)]).values():
        future.result(30)
    return end


class Scenario:
    """The live stack and the four phases; each phase records what it saw, the tests judge it."""

    def __init__(self, kafka_clusters, work: Path) -> None:
        self.started = time.monotonic()
        self.work = work
        u = uuid.uuid4().hex[:8]
        self.u, self.primary, self.dr = u, kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
        self.topic, self.group, self.flow = f"orders-{u}", f"billing-{u}", f"p{u}->d{u}"
        self.config = replication_config(work / "mm2.properties", self.primary, self.dr, u)
        self.replicator = Replicator(self.config, work / "checkpoints", work / "replicator-1.log")
        self.metrics_port = self.replicator.metrics_port
        self.webhook = WebhookReceiver().start()
        self.alertmanager = AlertmanagerServer(work / "alertmanager", self.webhook.url,
                                               group_wait=f"{GROUP_WAIT_SECONDS}s",
                                               group_interval=f"{GROUP_INTERVAL_SECONDS}s")
        self.monitor = MonitorProcess(work / "monitor", self.config, "--interval", str(MONITOR_INTERVAL_SECONDS),
                                      "--groups-interval", "1", "--metadata-interval", "2",
                                      "--heartbeat-timeout", str(HEARTBEAT_TIMEOUT_SECONDS), "--topics", self.topic)
        config = replace(mixin.DEFAULT, thresholds=replace(mixin.DEFAULT.thresholds,
                                                           heartbeat_grace_seconds=HEARTBEAT_GRACE_SECONDS))
        rules = write_rules(work / "rules.yml", config, for_overrides={PAGE: f"{PAGE_FOR_SECONDS}s"})
        self.prometheus = PrometheusServer(
            work / "prometheus",
            {MONITOR_JOB: [self.monitor.address], REPLICATOR_JOB: [f"127.0.0.1:{self.metrics_port}"]},
            [rules], alertmanager=self.alertmanager.url, scrape_interval=f"{SCRAPE_SECONDS}s",
            evaluation_interval=f"{EVALUATION_SECONDS}s")
        self.late = LateProducer(self.primary, self.topic)
        self.queries = LiveQueries(self.prometheus, self.started)
        self.timing: dict = {}
        self.shipped_prometheus = self.shipped_alertmanager = self.pager = None
        self.starved: dict = {"problems": []}  # the starved phase: timing, the pages, what went wrong
        self.fired: dict | None = None
        self.resolved: dict | None = None
        self.problems: list[str] = []
        self.alertmanager_log = ""

    def flow_status(self) -> dict:
        return flow_of(self.monitor.status(), self.flow)

    def run(self, starve: bool = True) -> None:
        self.start()
        self.replicating(starve)
        if starve:
            self.replicator_starved()
        self.replicator_stopped()
        self.replicator_restarted()
        self.monitor_stopped()

    def start(self) -> None:
        create_topic(self.primary, self.topic, PARTITIONS)
        produce_raw(self.primary, self.topic, [{"key": b"k%d" % i, "value": b"first", "partition": i % PARTITIONS}
                                               for i in range(30)])
        commit_group(self.primary, self.group, self.topic, {p: 5 for p in range(PARTITIONS)})
        self.replicator.start()  # first: Spark takes the longest to start
        self.alertmanager.start()
        self.prometheus.start()
        self.monitor.start()

    def replicating(self, shipped: bool = True) -> None:
        """Caught up, live heartbeats, a checkpointed group; then every expression that has data now."""
        self.monitor.wait_for(lambda s: (f := flow_of(s, self.flow))["lag"]["records"] == 0 and f["groups"]
                              and f["heartbeat"]["age_seconds"] is not None and f["heartbeat"]["age_seconds"] < 5,
                              240, "a caught-up flow with live heartbeats and the group's checkpoints")
        if shipped:
            self.start_shipped()
        self.timing["replicating_after_seconds"] = round(time.monotonic() - self.started, 1)
        # bad input for the decode-error panel: a record that is not a heartbeat, in this flow's own topic
        produce_raw(self.dr, f"p{self.u}.heartbeats", [{"key": b"not-a-heartbeat", "value": b"garbage"}])
        produce_raw(self.primary, self.topic, [{"key": b"k%d" % i, "value": b"more", "partition": i % PARTITIONS}
                                               for i in range(300)])
        commit_group(self.primary, self.group, self.topic, {p: 50 for p in range(PARTITIONS)})
        # a group consuming the mirror topic on the target, whose fail-back readiness the monitor reports
        commit_group(self.dr, f"dr-readers-{self.u}", f"p{self.u}.{self.topic}", {p: 5 for p in range(PARTITIONS)})
        self.prometheus.wait_for_data("sparkmirror_replicator_batches_total", timeout=30)
        deadline, last_pending, steady_since = time.monotonic() + 25, None, time.monotonic()
        while time.monotonic() < deadline:  # until the pending set stops shrinking
            pending = {c.name for c in self.queries.sweep("replicating")}
            if pending != last_pending:
                last_pending, steady_since = pending, time.monotonic()
            elif time.monotonic() - steady_since > 3:
                break
            time.sleep(1)
        self.monitor.wait_for(lambda s: (f := flow_of(s, self.flow))["lag"]["records"] == 0
                              and f["heartbeat"]["age_seconds"] < 5, 60, "caught up before the stop")
        self.queries.sweep("replicating")
        self.queries.check_quiet()
        # the real replicator's hiccups: the longest silence of its heartbeats once the first arrived
        since = int(time.monotonic() - self.started) + 1
        arrival, seen = (f'{name}{{flow="{self.flow}"}}' for name in (
            "sparkmirror_heartbeat_arrival_age_seconds", "sparkmirror_heartbeat_seen"))
        longest = self.prometheus.query(f"max_over_time(({arrival} and {seen} == 1)[{since}s:1s])")
        self.timing["longest_heartbeat_silence_while_replicating_seconds"] = \
            round(float(longest[0]["value"][1]), 1) if longest else None
        if self.webhook.wait_for(_page(self.flow, "firing"), timeout=0):
            self.problems.append(f"{PAGE} fired while replicating")

    def start_shipped(self) -> None:
        """The shipped Prometheus and Alertmanager for the starved phase, once the flow is caught up (they
        record it within its objective before the starvation)."""
        work = self.work / "shipped"
        work.mkdir(parents=True, exist_ok=True)
        self.shipped_intervals = yaml.safe_load(SHIPPED_PROMETHEUS.read_text())["global"]
        config = replace(mixin.DEFAULT, rpo=objectives_section(STARVED_OBJECTIVE))
        rules = write_rules(work / "rules.yml", config)  # the committed rules' `for`s, this objective
        self.pager = WebhookReceiver().start()
        self.shipped_alertmanager = AlertmanagerServer.shipped(work / "alertmanager", self.pager.url)
        self.shipped_prometheus = PrometheusServer(
            work / "prometheus",
            {MONITOR_JOB: [self.monitor.address], REPLICATOR_JOB: [f"127.0.0.1:{self.metrics_port}"]},
            [rules], alertmanager=self.shipped_alertmanager.url,
            scrape_interval=self.shipped_intervals["scrape_interval"],
            evaluation_interval=self.shipped_intervals["evaluation_interval"])
        self.shipped_alertmanager.start()
        self.shipped_prometheus.start()

    def stop_shipped(self) -> None:
        for server in (self.shipped_prometheus, self.shipped_alertmanager, self.pager):
            if server is not None:
                server.stop()

    def replicator_starved(self) -> None:
        """The replicator starved of CPU while records stamped now keep coming; the shipped stack pages."""
        shipped_prometheus, prometheus, pager = (self.shipped_intervals, self.shipped_prometheus, self.pager)
        alertmanager = self.shipped_alertmanager
        steady = LateProducer(self.primary, self.topic, late_by=0)
        starver = None
        started = time.monotonic()
        breach_wall = fired = None
        try:
            steady.start()
            # within its objective so far, as the shipped Prometheus recorded it: the breach is the starvation's
            self.starved["good_before_starving"] = bool(prometheus.wait_for_data(
                f'min_over_time({slo.GOOD}{{flow="{self.flow}"}}[5m]) == 1', timeout=30))
            starver = Starver(self.replicator.proc.pid, STARVED_RUN_SECONDS, STARVED_STOP_SECONDS).start()
            starved_wall = time.time()
            deadline = started + STARVED_PAGE_TIMEOUT_SECONDS
            while fired is None and time.monotonic() < deadline:
                if breach_wall is None:
                    lag = self.flow_status()["lag"]["seconds"]
                    if lag is not None and lag > STARVED_OBJECTIVE["lag_seconds"]:
                        breach_wall = time.time()
                fired = pager.wait_for(lambda n: n.receiver == "pager" and any(
                    a["status"] == "firing" for a in n.alerts(alertname=BURN, flow=self.flow)), timeout=1.0)
            if fired is not None:
                time.sleep(5)  # one more group_wait: anything else paged for the flow would show
            self.starved.update({
                "objective": STARVED_OBJECTIVE, "run_seconds": STARVED_RUN_SECONDS,
                "stop_seconds": STARVED_STOP_SECONDS, "starve_cycles": starver.cycles,
                "scrape_interval": shipped_prometheus["scrape_interval"],
                "evaluation_interval": shipped_prometheus["evaluation_interval"],
                "group_wait": yaml.safe_load(SHIPPED_ALERTMANAGER.read_text())["route"]["group_wait"],
                "fast_burn_for": mixin.DEFAULT.thresholds.rpo_fast_burn_for,
                "heartbeats_stopped_fired": bool(prometheus.query(
                    f'max_over_time(ALERTS{{alertname="{PAGE}",flow="{self.flow}"}}[10m])')),
                "starved_to_breach_seconds": breach_wall and round(breach_wall - starved_wall, 1),
                "breach_to_page_seconds": fired and breach_wall and round(fired.received_at - breach_wall, 1),
                "starved_to_page_seconds": fired and round(fired.received_at - starved_wall, 1),
                "phase_seconds": round(time.monotonic() - started, 1),
            })
            self.starved["pages"] = [n.payload for n in pager.notifications if n.receiver == "pager"]
            if fired is None:
                self.starved["problems"].append(f"no {BURN} page within {STARVED_PAGE_TIMEOUT_SECONDS} s; "
                                                f"alertmanager:\n{alertmanager.log_tail()}")
        finally:
            if starver is not None:
                starver.stop()
            self.starved["problems"] += [f"steady producer: {e!r}" for e in steady.stop()]
            self.stop_shipped()
        # caught up again before the stop phase, which times the page from a healthy flow
        self.monitor.wait_for(lambda s: (f := flow_of(s, self.flow))["lag"]["records"] == 0
                              and f["heartbeat"]["age_seconds"] < 5, 90, "caught up after the starvation")

    def replicator_stopped(self) -> None:
        """SIGTERM; late records keep coming, some are deleted before being copied; wait for the page."""
        stopped_at, stopped_wall = time.monotonic(), time.time()
        self.timing["replicator_exit_code"] = self.replicator.terminate()
        self.late.start()
        time.sleep(1.5)
        self.timing["deleted_records_before_offset"] = _delete_to_end(self.primary, self.topic, PARTITIONS - 1)
        fired = None
        while fired is None and time.monotonic() < stopped_at + 150:
            self.queries.sweep("replicator stopped")
            fired = self.webhook.wait_for(_page(self.flow, "firing"), timeout=1.0, after=stopped_at)
        last_heartbeat_ms = self.flow_status()["heartbeat"]["last_timestamp_ms"]
        active_at = _active_at(self.prometheus, self.flow)
        deadline = time.monotonic() + 30  # the other induced conditions, if the page came first
        while self.queries.sweep("replicator stopped") and time.monotonic() < deadline:
            time.sleep(1)
        for rule in RULES:
            if rule.name in FALLBACK:
                self.queries.fallback_with_objective[rule.name] = self.prometheus.query(rule.expr)
        self.problems += [f"late producer: {e!r}" for e in self.late.stop()]
        self.timing["late_records_produced"] = self.late.sent
        if fired is None:
            self.problems.append(f"no firing {PAGE} within 150 s of the stop")
            return
        self.fired = fired.payload
        condition_at = last_heartbeat_ms / 1000 + HEARTBEAT_TIMEOUT_SECONDS + MARGIN_SECONDS
        self.timing.update({
            "replicator_stopped_at": round(stopped_wall, 3),
            "last_heartbeat_at": last_heartbeat_ms / 1000,
            "condition_true_at": round(condition_at, 3),
            "prometheus_pending_at": active_at and round(active_at, 3),
            "fired_received_at": round(fired.received_at, 3),
            "detection_from_stop_seconds": round(fired.received_monotonic - stopped_at, 2),
            "detection_from_condition_seconds": round(fired.received_at - condition_at, 2),
            "detection_from_pending_seconds": active_at and round(fired.received_at - active_at, 2),
        })

    def replicator_restarted(self) -> None:
        """The same checkpoint directory and metrics port; wait for the resolved notification."""
        self.replicator = Replicator(self.config, self.work / "checkpoints", self.work / "replicator-2.log",
                                     extra_args=["--metrics-listen", f"127.0.0.1:{self.metrics_port}"])
        self.replicator.metrics_port = self.metrics_port  # the last --metrics-listen wins
        restarted_at, restarted_wall = time.monotonic(), time.time()
        self.replicator.start()
        recovered_wall = resolved = None
        while resolved is None and time.monotonic() < restarted_at + 180:
            if recovered_wall is None:
                age = self.flow_status()["heartbeat"]["age_seconds"]
                if age is not None and age < HEARTBEAT_TIMEOUT_SECONDS:
                    recovered_wall = time.time()
            self.queries.sweep("replicator restarted")
            resolved = self.webhook.wait_for(_page(self.flow, "resolved"), timeout=0.5, after=restarted_at)
        self.queries.sweep("replicator restarted")
        if resolved is None:
            self.problems.append(f"no resolved {PAGE} within 180 s of the restart")
            return
        self.resolved = resolved.payload
        self.timing.update({
            "replicator_restarted_at": round(restarted_wall, 3),
            "heartbeats_seen_again_at": recovered_wall and round(recovered_wall, 3),
            "resolved_received_at": round(resolved.received_at, 3),
            "resolve_from_restart_seconds": round(resolved.received_monotonic - restarted_at, 2),
            "resolve_from_heartbeats_seconds": recovered_wall and round(resolved.received_at - recovered_wall, 2),
        })

    def monitor_stopped(self) -> None:
        self.monitor.stop()
        self.prometheus.wait_for_data(f'up{{job="{MONITOR_JOB}"}} == 0', timeout=15)
        deadline = time.monotonic() + 10
        while self.queries.sweep("monitor stopped") and time.monotonic() < deadline:
            time.sleep(0.5)
        self.alertmanager_log = self.alertmanager.log_tail(60)

    def stop(self) -> None:
        for stop in (self.late.stop, self.replicator.terminate, self.monitor.stop, self.prometheus.stop,
                     self.alertmanager.stop, self.webhook.stop, self.stop_shipped):
            try:
                stop()
            except Exception as exc:  # keep stopping the others
                self.problems.append(f"stopping: {stop.__qualname__}: {exc!r}")
        self.timing["scenario_seconds"] = round(time.monotonic() - self.started, 1)


@pytest.fixture(scope="module")
def live(kafka_clusters, tmp_path_factory, artifacts_dir, request):
    scenario = Scenario(kafka_clusters, tmp_path_factory.mktemp("alerting-e2e"))
    # the starved phase (about 2 minutes) only for its own test, which runs with -m slow
    starve = any(item.name == test_a_starved_replicator_breaching_its_objective_pages_once_with_the_budget_left.__name__
                 for item in request.session.items)
    try:
        scenario.run(starve)
    finally:
        scenario.stop()
        _write_artifacts(scenario, artifacts_dir)
    return scenario


def _write_artifacts(s: Scenario, artifacts_dir: Path) -> None:
    doc = {"flow": s.flow, "topic": s.topic, "group": s.group, **s.queries.document()}
    (artifacts_dir / "live-queries.json").write_text(json.dumps(doc, indent=2) + "\n")
    timing = {
        "alert": PAGE, "rule_threshold_seconds": HEARTBEAT_TIMEOUT_SECONDS,
        "for_seconds": PAGE_FOR_SECONDS, "for_in_committed_rules": thresholds.DEFAULT.heartbeats_stopped_for,
        "scrape_interval_seconds": SCRAPE_SECONDS, "evaluation_interval_seconds": EVALUATION_SECONDS,
        "group_wait_seconds": GROUP_WAIT_SECONDS, "group_interval_seconds": GROUP_INTERVAL_SECONDS,
        "monitor_interval_seconds": MONITOR_INTERVAL_SECONDS, **s.timing, "problems": s.problems,
    }
    (artifacts_dir / "alert-timing-live.json").write_text(json.dumps(timing, indent=2) + "\n")
    starved = {k: v for k, v in s.starved.items() if k != "pages"}
    (artifacts_dir / "rpo-page-shipped.json").write_text(json.dumps(starved, indent=2) + "\n")
    print(f"\nstarved replicator, shipped settings: {json.dumps(starved)}")
    print(f"\nlive alert timing: {json.dumps(timing)}\nlive queries: {json.dumps(doc['summary'])}")


def _missing(checks) -> str:
    return "\n".join(f"{c.name}: {c.expr}" + (f" -> {c.error}" if c.error else " -> no data") for c in checks)


def test_every_dashboard_panel_expression_returns_live_data(live):
    panels = [c for c in live.queries.checks if c.kind == "panel"]
    assert len(panels) >= 30
    assert not [c for c in panels if c.error], _missing(c for c in panels if c.error)
    assert [c for c in panels if "sparkmirror_audit_" in c.expr], "the audit's panels are checked too"
    empty = [c for c in panels if c.phase is None]
    assert not empty, "dashboard expressions that never returned live data:\n" + _missing(empty)


def test_every_template_variable_lists_live_values(live):
    variables = {c.name: c for c in live.queries.checks if c.kind == "variable"}
    assert set(variables) == {"flow", "topic", "group"}
    assert variables["flow"].example == {"metric": {"flow": live.flow}}
    assert variables["topic"].example == {"metric": {"topic": live.topic}}
    assert variables["group"].example == {"metric": {"group": live.group}}


def test_every_alert_rule_returns_data_when_induced_and_not_before(live):
    rules = [c for c in live.queries.checks if c.kind == "rule"]
    assert {c.name for c in rules} == {r.name for r in RULES}
    assert not [c for c in rules if c.error], _missing(c for c in rules if c.error)
    empty = [c for c in rules if c.phase is None]
    assert not empty, "alert expressions without live data (induced ones in their phase):\n" + _missing(empty)
    for c in rules:
        if c.induced:
            assert c.phase == INDUCED[c.name], (c.name, c.phase)
            assert c.example["metric"].get("flow", live.flow) == live.flow
    assert not any(live.queries.quiet.values()), f"induced rules true while replicating: {live.queries.quiet}"
    assert set(live.queries.fallback_with_objective) == FALLBACK
    assert not any(live.queries.fallback_with_objective.values()), \
        f"fixed lag alerts true for a flow with an objective: {live.queries.fallback_with_objective}"
    assert sum(bool(c.induced) for c in rules) >= 3


def test_heartbeats_stopped_pages_and_resolves_live(live):
    t = live.timing
    assert not live.problems, f"{live.problems}\nalertmanager:\n{live.alertmanager_log}"
    alert = next(a for a in live.fired["alerts"] if a["labels"].get("alertname") == PAGE)
    assert alert["labels"]["severity"] == "critical"
    assert alert["labels"]["flow"] == live.flow
    assert alert["annotations"]["runbook_url"].endswith("#sparkmirrorheartbeatsstopped")
    assert live.flow in alert["annotations"]["summary"]
    assert t["replicator_exit_code"] == 0
    # Never before the threshold and the `for`; after the condition became true, within the `for`
    # plus the pipeline: the monitor's refresh, one scrape, one evaluation (+1 for the phase of
    # the rule group's clock) and Alertmanager's group wait, with 15 s of slack: a 2-core CI
    # machine running Spark, two brokers and Prometheus stalls for seconds (the bound checks the
    # pipeline, not its speed; the measured figures are written to test-artifacts).
    assert t["detection_from_stop_seconds"] >= HEARTBEAT_TIMEOUT_SECONDS + MARGIN_SECONDS + PAGE_FOR_SECONDS - 1
    assert t["detection_from_condition_seconds"] >= PAGE_FOR_SECONDS - 0.5
    assert t["detection_from_condition_seconds"] <= (PAGE_FOR_SECONDS + MONITOR_INTERVAL_SECONDS + SCRAPE_SECONDS
                                                     + 2 * EVALUATION_SECONDS + GROUP_WAIT_SECONDS + 15)
    # From Prometheus' first true evaluation: the `for` plus one evaluation interval, then Alertmanager.
    assert PAGE_FOR_SECONDS - 0.5 <= t["detection_from_pending_seconds"] <= (
        PAGE_FOR_SECONDS + EVALUATION_SECONDS + GROUP_WAIT_SECONDS + 15)
    # Resolved once the restarted replicator's heartbeats reach the target again.
    assert t["resolved_received_at"] is not None
    if t["heartbeats_seen_again_at"] is None:
        # The resolved notification can beat the test's own status poll (1 s cadence) to the
        # restarted heartbeats; then there is no second reference point to time it from.
        return
    assert t["resolve_from_heartbeats_seconds"] <= (MONITOR_INTERVAL_SECONDS + SCRAPE_SECONDS
                                                    + 2 * EVALUATION_SECONDS + GROUP_INTERVAL_SECONDS + 15)


@pytest.mark.slow
def test_a_starved_replicator_breaching_its_objective_pages_once_with_the_budget_left(live):
    """The real replicator, starved of CPU, falls behind its 10-s objective while its heartbeats keep
    arriving: with the shipped intervals, grouping and group_wait the fast burn pages once at the pager,
    its description says how much of the budget is left, and nothing else pages for the flow."""
    s = live.starved
    assert s.get("good_before_starving"), f"the flow was not within its objective before the starvation: {s}"
    assert not s["problems"] and s.get("pages"), f"no page: {s}"
    pages = [n for n in s["pages"] if n.get("groupLabels", {}).get("flow") == live.flow]
    assert len(pages) == 1, [[a["labels"]["alertname"] for a in n["alerts"]] for n in pages]
    (alert,) = [a for a in pages[0]["alerts"] if a["status"] == "firing"]
    assert alert["labels"]["alertname"] == BURN and alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["runbook_url"].endswith("#sparkmirrorrpobudgetburn")
    left = re.search(r"Budget left over the period: ([\d.]+)%\.", alert["annotations"]["description"])
    assert left and 0 < float(left.group(1)) < 100, alert["annotations"]["description"]
    assert not s["heartbeats_stopped_fired"], "the starved replicator's heartbeats paged: not slowed, stopped"
    # the burn's `for` after its first bad evaluation, never before; then one evaluation and the group_wait
    assert s["breach_to_page_seconds"] is not None and s["breach_to_page_seconds"] >= 60 - 10, s
    print(f"\nRPO page with the shipped settings: {s['breach_to_page_seconds']} s from the first breach the "
          f"monitor reported, {s['starved_to_page_seconds']} s from the starvation; budget left {left.group(1)} %")
