"""Scenario proof of the alerting path: which alerts page, which stay silent, how fast.

Everything is real but the replicator, whose effects are written by hand (mirror records,
offset-syncs, heartbeats) so no Spark starts: the session's two Kafka clusters, one
``sparkmirror monitor`` process per scenario (each with its own cluster aliases, so flows
and clusters are distinct), one Prometheus (Debian package, 1 s scrape and evaluation)
evaluating the generated rules, and one Alertmanager with the committed inhibit rules and
grouping (alerts/alertmanager.yml), notifying this test's webhook.

The rules are the committed ones with every ``for`` and the heartbeat grace divided by 30
(1m -> 2 s; the order in which alerts fire, which inhibition depends on, is kept), so the
scenarios take well under a minute together; in production the times are about 30 x longer. For each scenario the test asserts the alerts that must
be notified, those that must not be (silent, or inhibited: then they must be active in
Alertmanager and suppressed), and measures the time from the monitor's start to the first
notification. The table goes to test-artifacts/alert-scenarios.md; docs/alerts.md carries it
(``SPARKMIRROR_UPDATE_DOCS=1`` rewrites it there from the run; otherwise the test checks the
documented outcomes are the measured ones).

The replicator-killed scenario (real Spark replicator, SIGTERM) is timed in
tests/integration/test_alerting_e2e.py.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from alerts import config as mixin
from alerts.config import MONITOR_JOB
from alerts.generate import write_rules
from alerts.rules import RULES
from replicator.devenv.kafka import free_port
from replicator.model.records import Heartbeat
from tests.integration.test_monitor_helpers import produce_raw, write_mm2_config
from tests.integration.test_monitor_lag import Flow
from tests.integration.test_status_page import commit_group
from tests.support.kafka import create_topic
from tests.support.prometheus import AlertmanagerServer, MonitorProcess, PrometheusServer, WebhookReceiver

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "alerts.md"
#: Committed `for` durations and the heartbeat grace, divided by this (1m -> 2 s, 120 s grace -> 4 s).
#: Not more: the grace must stay above the monitor's own request timeout and refresh, as in
#: production (at 60 the page beat the cluster alert it should be inhibited by).
SCALE = 30
TIMEOUT_SECONDS = 150
PAGE, CLUSTER = "SparkmirrorHeartbeatsStopped", "SparkmirrorClusterUnreachable"


@dataclass
class Scenario:
    title: str
    fire: set[str]                 # must be notified
    silent: set[str]               # must not be notified
    inhibited: set[str] = field(default_factory=set)  # of those: must be active and suppressed in Alertmanager
    monitor: MonitorProcess | None = None
    flow: str = ""
    cluster: str = ""              # the scenario's cluster alerts carry this cluster label
    started: float = 0.0
    fired_after: dict[str, float] = field(default_factory=dict)
    notified: set[str] = field(default_factory=set)
    suppressed: set[str] = field(default_factory=set)
    beats: Flow | None = None      # writes the flow's heartbeats (a live replicator's, by hand)

    def owns(self, labels: dict) -> bool:
        return labels.get("flow") == self.flow or (bool(self.cluster) and labels.get("cluster") == self.cluster)


def _delete_records(bootstrap: str, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, before)]).values():
        future.result(30)


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """commit_group, retried while a freshly started cluster still loads its group coordinator."""
    for attempt in range(30):
        try:
            return commit_group(bootstrap, group, topic, offsets)
        except KafkaException as exc:
            if attempt == 29:  # COORDINATOR_LOAD_IN_PROGRESS is not flagged retriable
                raise
            time.sleep(1)


def _monitor(workdir: Path, config: Path) -> MonitorProcess:
    return MonitorProcess(workdir, config, "--interval", "1", "--groups-interval", "1", "--metadata-interval", "2",
                          "--timeout", "3")


def _build(kafka_clusters, work: Path) -> dict[str, Scenario]:
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    now_ms = int(time.time() * 1000)
    out: dict[str, Scenario] = {}

    # 1. The replicator never started: records wait on the source, no heartbeat ever arrives.
    u = os.urandom(4).hex()
    (work / "never").mkdir()
    f = Flow(kafka_clusters, work / "never", u)
    f.produce_source(0, [now_ms] * 5)
    out["replicator never started"] = Scenario(
        "replicator never started", fire={PAGE}, silent={"SparkmirrorReplicatorDown", CLUSTER},
        inhibited={"SparkmirrorReplicatorDown"}, monitor=_monitor(work / "never" / "monitor", f.config), flow=f.name)

    # 2. Heartbeats disabled by config, an hour-old heartbeat left on the target, everything copied.
    u = os.urandom(4).hex()
    (work / "disabled").mkdir()
    f = Flow(kafka_clusters, work / "disabled", u)
    write_mm2_config(f.config, {f.src: primary, f.dst: dr}, [(f.src, f.dst)], {
        f"{f.name}.topics": f".*-{u}", "emit.heartbeats.enabled": "false"})
    old = Heartbeat(f.dst, f.src, now_ms - 3_600_000)
    produce_raw(dr, f.heartbeats, [{"key": old.encode_key(), "value": old.encode_value(), "timestamp": old.timestamp_ms}])
    f.produce_source(0, [now_ms] * 5)
    f.copy(0, 5, now_ms)
    f.sync(0, 0, 0)
    out["heartbeats disabled by config"] = Scenario(
        "heartbeats disabled by config (old heartbeat on the target)", fire=set(),
        silent={PAGE, "SparkmirrorReplicatorDown"}, monitor=_monitor(work / "disabled" / "monitor", f.config),
        flow=f.name)

    # 3. One cluster down: the flow's source answers nowhere; the target is fine.
    u = os.urandom(4).hex()
    (work / "down").mkdir()
    src, dst = f"gone{u}", f"d{u}"
    config = write_mm2_config(work / "down" / "mm2.properties", {src: f"127.0.0.1:{free_port()}", dst: dr},
                              [(src, dst)], {f"{src}->{dst}.topics": f".*-{u}",
                                             "emit.heartbeats.interval.seconds": "1"})
    out["one cluster down"] = Scenario(
        "one cluster down (one page, the flow's alerts inhibited)", fire={CLUSTER},
        silent={PAGE, "SparkmirrorReplicatorDown", "SparkmirrorFlowError"},
        inhibited={PAGE, "SparkmirrorReplicatorDown"}, monitor=_monitor(work / "down" / "monitor", config),
        flow=f"{src}->{dst}", cluster=src)

    # 4. Retention deleted records before they were copied, and the monitor started after that.
    u = os.urandom(4).hex()
    (work / "lost").mkdir()
    f = Flow(kafka_clusters, work / "lost", u)
    f.produce_source(0, [now_ms] * 100)
    f.copy(0, 10, now_ms)
    f.sync(0, 0, 0)
    _delete_records(primary, f.topic, 50)  # offsets 10..49 never reached the target
    f.start_heartbeats()
    out["loss before the monitor started"] = Scenario(
        "records deleted before replication, monitor started after the loss", fire={"SparkmirrorDataLost"},
        silent={PAGE, "SparkmirrorFlowError"}, inhibited={"SparkmirrorFlowError"},
        monitor=_monitor(work / "lost" / "monitor", f.config), flow=f.name)
    out["loss before the monitor started"].beats = f

    # 5. A consumer group that cannot fail over: it commits on the source, no checkpoint exists.
    u = os.urandom(4).hex()
    (work / "group").mkdir()
    f = Flow(kafka_clusters, work / "group", u)
    f.produce_source(0, [now_ms] * 20)
    f.copy(0, 20, now_ms)
    f.sync(0, 0, 0)
    _commit(primary, f"billing-{u}", f.topic, {0: 10})
    f.start_heartbeats()
    out["group cannot fail over"] = Scenario(
        "a consumer group that cannot fail over (no checkpoint)",
        fire={"SparkmirrorCheckpointsMissing", "SparkmirrorFailoverNotReady"},
        silent={PAGE, "SparkmirrorReplicatorDown"}, monitor=_monitor(work / "group" / "monitor", f.config),
        flow=f.name)
    out["group cannot fail over"].beats = f

    # 6. Retention is about to delete records the replicator has not copied: a topic keeping records
    # 1 hour, its 5 records written 55 minutes ago and still waiting (5 minutes of headroom). The flow is
    # also far behind and stalled, which their own alerts say; nothing is lost yet.
    u = os.urandom(4).hex()
    (work / "retention").mkdir()
    f = Flow(kafka_clusters, work / "retention", u)
    short = f"short-{u}"
    create_topic(primary, short, config={"retention.ms": "3600000"})
    create_topic(dr, f"{f.src}.{short}")
    produce_raw(primary, short, [{"key": b"k", "value": b"v", "timestamp": now_ms - 55 * 60_000}] * 5)
    f.start_heartbeats()
    out["retention headroom low"] = Scenario(
        "retention about to delete unreplicated records",
        fire={"SparkmirrorRetentionHeadroomLow", "SparkmirrorLagHigh", "SparkmirrorFlowStalled"},
        silent={PAGE, "SparkmirrorDataLost"}, monitor=_monitor(work / "retention" / "monitor", f.config),
        flow=f.name)
    out["retention headroom low"].beats = f
    return out


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", duration))


def _rules(work: Path) -> Path:
    """The committed rules, every ``for`` and the heartbeat grace scaled down by ``SCALE`` (the
    order in which alerts fire, which inhibition depends on, stays the production one)."""
    t = mixin.DEFAULT.thresholds
    config = replace(mixin.DEFAULT, thresholds=replace(t, heartbeat_grace_seconds=t.heartbeat_grace_seconds // SCALE))
    return write_rules(work / "rules.yml", config,
                       for_overrides={r.name: f"{max(1, _seconds(r.for_) // SCALE)}s" for r in RULES if r.for_})


@pytest.fixture(scope="module")
def scenarios(kafka_clusters, tmp_path_factory, artifacts_dir):
    work = tmp_path_factory.mktemp("alert-scenarios")
    built = _build(kafka_clusters, work)
    committed = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())
    webhook = WebhookReceiver().start()
    alertmanager = AlertmanagerServer(work / "alertmanager", webhook.url, group_by=tuple(committed["route"]["group_by"]),
                                      inhibit_rules=committed["inhibit_rules"])
    prometheus = PrometheusServer(work / "prometheus", {MONITOR_JOB: [s.monitor.address for s in built.values()]},
                                  [_rules(work)], alertmanager=alertmanager.url)
    try:
        alertmanager.start()
        prometheus.start()
        for s in built.values():
            s.monitor.start()
            s.started = time.monotonic()
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            _observe(built.values(), webhook, alertmanager)
            done = all(s.fire <= s.notified and s.inhibited <= s.suppressed for s in built.values())
            if done:
                break
            time.sleep(1)
        # the silent ones had their chance: every expected alert fired, and one more group_wait passed
        time.sleep(3)
        _observe(built.values(), webhook, alertmanager)
        (artifacts_dir / "alert-scenarios.md").write_text(table(built.values()) + "\n")
        yield built
    finally:
        for s in built.values():
            if s.beats is not None:
                s.beats.stop_heartbeats()
            s.monitor.stop()
        prometheus.stop()
        alertmanager.stop()
        webhook.stop()


def _observe(scenarios, webhook: WebhookReceiver, alertmanager: AlertmanagerServer) -> None:
    for n in list(webhook.notifications):
        for alert in n.alerts():
            for s in scenarios:
                name = alert["labels"]["alertname"]
                if alert["status"] == "firing" and s.owns(alert["labels"]):
                    s.notified.add(name)
                    s.fired_after.setdefault(name, round(n.received_monotonic - s.started, 1))
    for alert in alertmanager.alerts():
        for s in scenarios:
            if s.owns(alert["labels"]) and alert["status"]["state"] == "suppressed":
                s.suppressed.add(alert["labels"]["alertname"])


def table(scenarios) -> str:
    rows = ["| scenario | paged / notified | silent | of those inhibited | time to notification |",
            "| --- | --- | --- | --- | --- |"]
    for s in scenarios:
        fired = ", ".join(sorted(s.notified)) or "nothing"
        silent = ", ".join(sorted(s.silent - s.notified)) or "-"
        inhibited = ", ".join(sorted(s.suppressed & s.silent)) or "-"
        timing = ", ".join(f"{s.fired_after[n]:.0f} s" for n in sorted(s.notified)) or "-"
        rows.append(f"| {s.title} | {fired} | {silent} | {inhibited} | {timing} |")
    return "\n".join(rows)


_START, _END = "<!-- alert-scenarios:start -->", "<!-- alert-scenarios:end -->"


@pytest.mark.parametrize("name", ["replicator never started", "heartbeats disabled by config", "one cluster down",
                                  "loss before the monitor started", "group cannot fail over",
                                  "retention headroom low"])
def test_scenario_pages_what_it_must_and_nothing_else(scenarios, name):
    s = scenarios[name]
    assert s.fire <= s.notified, f"{name}: not notified {s.fire - s.notified}; notified {s.notified}"
    assert not s.silent & s.notified, f"{name}: notified although it must not be: {s.silent & s.notified}"
    assert s.inhibited <= s.suppressed, f"{name}: not seen inhibited in Alertmanager: {s.inhibited - s.suppressed}"


def test_docs_alerts_md_has_the_scenario_table_of_the_run(scenarios):
    measured = table(scenarios.values())
    docs = DOCS.read_text()
    if os.environ.get("SPARKMIRROR_UPDATE_DOCS"):
        block = re.compile(re.escape(_START) + ".*?" + re.escape(_END), re.S)
        DOCS.write_text(block.sub(lambda _: f"{_START}\n{measured}\n{_END}", docs))
        docs = DOCS.read_text()

    def outcomes(text: str) -> list[list[str]]:  # every column but the measured times
        return [row.split(" | ")[:-1] for row in text.splitlines() if row.startswith("| ")]

    documented = docs.split(_START)[1].split(_END)[0].strip()
    assert outcomes(documented) == outcomes(measured), \
        "docs/alerts.md's scenario table differs from this run (SPARKMIRROR_UPDATE_DOCS=1 rewrites it)"
