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

Two scenarios act while the stack runs: *replicator killed* stops a live copier
(tests.support.copier: records, offset-syncs and heartbeats as a replicator writes them) once the
monitor rates the flow OK, and is timed from that moment; *hours behind while probes are slow*
has the source broker throttle the monitor's fetches (a client quota on its consumers'
``client.id``), so the probes that read the oldest missing record's timestamp are slow and
mostly still in flight while the position moves on, and checks that the flow's lag alerts fire and
never restart their ``for``. The same page with the real Spark replicator (SIGTERM) is timed in
tests/integration/test_alerting_e2e.py.

The scaled rules are rendered without recovery-point objectives (``rpo: null``), so the fixed lag
alerts apply to every flow here; the burn-rate alerts have their own proofs (alerts/cases/rpo.yml,
test_prometheus_stack.py).

*Time to page with the shipped settings*: the killed flow's monitor runs with its default refresh,
and a second Prometheus and Alertmanager scrape it with the intervals of alerts/prometheus.yml,
the group timers of alerts/alertmanager.yml and the committed rule file as it is. The time from
the kill to that webhook's page must stay under a minute, and never come before the flow's
heartbeat timeout plus the page's margin; the longest silence the flow's heartbeats had before the
kill (the fast Prometheus samples the arrival age every second) is recorded beside it, with both
in test-artifacts/alert-timing-shipped.json.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import pytest
import yaml
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from alerts import config as mixin
from alerts.config import MONITOR_JOB
from alerts.generate import RULES_PATH, write_rules
from alerts.rules import RULES
from devenv.kafka import free_port
from sparkmirror import artifacts
from sparkmirror.objectives import Objectives
from sparkmirror.model.records import Heartbeat
from tests.support.copier import DelayedCopier, SteadyProducer
from tests.support.kafka import create_topic
from tests.support.monitor import Flow, commit_group, flow_of, produce_raw, write_mm2_config
from tests.support.prometheus import AlertmanagerServer, MonitorProcess, PrometheusServer, WebhookReceiver

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "alerts.md"
#: Committed `for` durations and the heartbeat grace, divided by this (1m -> 2 s, 120 s grace -> 4 s).
#: Not more: the grace must stay above the monitor's own request timeout and refresh, as in
#: production (at 60 the page beat the cluster alert it should be inhibited by).
SCALE = 30
TIMEOUT_SECONDS = 150
#: How long after the kill the shipped stack's page may take: a minute is the promise, the rest slack
#: for a loaded machine (the test fails above a minute anyway).
SHIPPED_WAIT_SECONDS = 90
#: The killed flow's heartbeat timeout: 2 x emit.heartbeats.interval.seconds (1 s), at least 10 s.
HEARTBEAT_TIMEOUT_SECONDS = 10
PAGE, CLUSTER = "SparkmirrorHeartbeatsStopped", "SparkmirrorClusterUnreachable"
LAG_ALERTS = {"SparkmirrorLagHigh", "SparkmirrorLagGrowing"}
#: The flow that falls behind: its records are this old when written (late data), and are written
#: faster than they are copied.
HOURS_BEHIND = 3


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
    #: called every second while the stack runs (acts on the scenario, records what it saw); a
    #: scenario that acts mid-run is ``armed`` until it did, and its times count from then
    tick: Callable[["Scenario", PrometheusServer], None] | None = None
    armed: bool = False
    stop: list[Callable[[], object]] = field(default_factory=list)
    seen: dict = field(default_factory=dict)  # what ``tick`` recorded, for the scenario's own test

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
        except KafkaException:
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

    # 7. The replicator is killed mid-stream: a live copier (records, offset-syncs, heartbeats) stops
    # once the monitor rates the flow OK, while the producer goes on.
    u = os.urandom(4).hex()
    (work / "killed").mkdir()
    f = Flow(kafka_clusters, work / "killed", u)
    producer = SteadyProducer(primary, f.topic, 1, rate=20)
    copier = DelayedCopier(primary, dr, f.topic, f.remote, 1, delay=0.2, syncs_topic=f.syncs,
                           heartbeats_topic=f.heartbeats, source_alias=f.src, target_alias=f.dst, sync_every=10)
    out["replicator killed"] = Scenario(
        "replicator killed mid-stream (timed from the kill)", fire={PAGE},
        silent={"SparkmirrorReplicatorDown", "SparkmirrorFlowStalled", "SparkmirrorDataLost", CLUSTER},
        inhibited={"SparkmirrorReplicatorDown"},
        # the monitor's default refresh: it is part of the time to page the shipped stack measures
        monitor=MonitorProcess(work / "killed" / "monitor", f.config, "--metadata-interval", "2"),
        flow=f.name, cluster=f.src, tick=_kill_once_ok, armed=True, stop=[copier.stop, producer.close])
    out["replicator killed"].seen["copier"] = copier
    producer.start()
    copier.start()

    # 8. A flow falling hours behind while the lag probes are slow: records written now but stamped
    # hours ago (late data) arrive faster than they are copied, so the position moves at every refresh,
    # and the source throttles the monitor's fetches, so the probe of the new position is slow and
    # mostly still in flight. The lag alerts must fire and keep their `for` running.
    u = os.urandom(4).hex()
    (work / "slow").mkdir()
    f = Flow(kafka_clusters, work / "slow", u, partitions=2)
    client_id = f"slow-probes-{u}"
    write_mm2_config(f.config, {f.src: primary, f.dst: dr}, [(f.src, f.dst)], {
        f"{f.name}.topics": f".*-{u}", "emit.heartbeats.interval.seconds": "1",
        f"{f.src}.consumer.client.id": client_id})
    _throttle_fetches(primary, client_id, bytes_per_second=1024)
    behind = FallingBehind(f, HOURS_BEHIND * 3600)
    out["hours behind, slow probes"] = Scenario(
        "a flow falling hours behind while the lag probes are slow", fire=set(LAG_ALERTS),
        silent={PAGE, "SparkmirrorReplicatorDown", "SparkmirrorFlowStalled", "SparkmirrorDataLost", CLUSTER},
        monitor=_monitor(work / "slow" / "monitor", f.config), flow=f.name, cluster=f.src,
        tick=behind.observe, stop=[behind.stop])
    out["hours behind, slow probes"].seen["behind"] = behind
    behind.start()
    return out


def _kill_once_ok(s: Scenario, _prometheus: PrometheusServer) -> None:
    """Stop the copier (the replicator dies) once the monitor rated the flow OK with live heartbeats
    and Prometheus has scraped a heartbeat seen (the silence before the kill is measured from it: the
    monitor can rate the flow OK between two scrapes)."""
    if not s.armed:
        return
    flow = flow_of(s.monitor.status(), s.flow)
    if flow["status"] == "OK" and (flow["heartbeat"]["age_seconds"] or 99) < 5:
        since = int(time.monotonic() - s.seen["monitor_started"]) + 1
        arrival = f'sparkmirror_heartbeat_arrival_age_seconds{{flow="{s.flow}"}}'
        seen = f'sparkmirror_heartbeat_seen{{flow="{s.flow}"}} == 1'
        longest = _prometheus.query(f"max_over_time(({arrival} and {seen})[{since}s:1s])")
        if not longest:
            return  # not scraped yet: the next tick
        s.seen["copier"].stop()
        s.started, s.armed = time.monotonic(), False
        s.seen["ok_before_the_kill"] = flow["status"]
        s.seen["longest_silence_before_the_kill"] = float(longest[0]["value"][1])


def _throttle_fetches(bootstrap: str, client_id: str, bytes_per_second: int) -> None:
    """A fetch quota for one client.id (kafka-configs --entity-type clients): the broker delays the
    fetch responses of that client to keep it under ``bytes_per_second``."""
    cmd = [artifacts.java_binary(), "-Xmx256m", "-cp", artifacts.ensure(artifacts.KAFKA).classpath(),
           "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
           "--entity-name", client_id, "--add-config", f"consumer_byte_rate={bytes_per_second}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


class FallingBehind:
    """Writes 4 records a second to every partition, stamped ``behind`` seconds ago and one second
    apart (the record at offset ``o`` of a partition is stamped ``base + o`` seconds), copies 2 of
    them, and heartbeats: the flow is alive, its position moves at every refresh, and its records
    lag grows. ``observe`` notes, from the monitor's status, whether a partition's seconds lag came
    from a probe of an earlier position (its oldest unreplicated record is older than the one at the
    position: the probe of the current position is still in flight), and the lag alerts' activeAt
    in Prometheus (a restarted ``for`` shows as a new activeAt)."""

    def __init__(self, flow: Flow, behind: float) -> None:
        self.flow, self.partitions = flow, 2
        self.base_ms = int((time.time() - behind) * 1000)
        self.written = [0] * self.partitions
        self.copied = [0] * self.partitions
        self.stale_probe_ticks = self.ticks = 0
        self.active_at: dict[str, set[str]] = {name: set() for name in LAG_ALERTS}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="falling-behind", daemon=True)

    def _run(self) -> None:
        f = self.flow
        for p in range(self.partitions):
            f.sync(p, 0, 0)
        while not self._stop.is_set():
            for p in range(self.partitions):
                f.produce_source(p, [self.base_ms + (self.written[p] + i) * 1000 for i in range(4)])
                self.written[p] += 4
                f.copy(p, 2, self.base_ms + self.copied[p] * 1000)
                self.copied[p] += 2
            hb = Heartbeat(f.dst, f.src, int(time.time() * 1000))
            produce_raw(f.dr, f.heartbeats, [{"key": hb.encode_key(), "value": hb.encode_value()}])
            self._stop.wait(1)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def observe(self, s: Scenario, prometheus: PrometheusServer) -> None:
        flow = flow_of(json.loads(s.monitor.get("/api/status?detail=partitions")), s.flow)
        self.ticks += 1
        for part in flow["partitions"]:
            oldest, position = part["oldest_unreplicated_timestamp_ms"], part["position"]
            if oldest is not None and position is not None and oldest < self.base_ms + position * 1000:
                self.stale_probe_ticks += 1
                break
        for alert in prometheus.api("alerts")["alerts"]:
            name = alert["labels"].get("alertname")
            if name in LAG_ALERTS and alert["labels"].get("flow") == s.flow:
                self.active_at[name].add(alert["activeAt"])


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", duration))


def _rules(work: Path) -> Path:
    """The committed rules, every ``for``, the heartbeat grace and the heartbeats page's wait for a
    failing cluster's own page scaled down by ``SCALE`` and the
    heartbeats page's margin dropped (the order in which alerts fire, which inhibition depends on,
    stays the production one)."""
    t = mixin.DEFAULT.thresholds
    config = replace(mixin.DEFAULT, thresholds=replace(t, heartbeat_grace_seconds=t.heartbeat_grace_seconds // SCALE,
                                                       heartbeat_cluster_wait_seconds=t.heartbeat_cluster_wait_seconds
                                                       // SCALE,
                                                       heartbeats_stopped_margin_seconds=0),
                     rpo=Objectives(default=None))
    return write_rules(work / "rules.yml", config,
                       for_overrides={r.name: f"{max(1, _seconds(r.for_) // SCALE)}s" for r in RULES if r.for_})


class ShippedStack:
    """Prometheus and Alertmanager as shipped (alerts/prometheus.yml's intervals, alerts/alertmanager.yml's
    grouping, timers and inhibition, the committed rule file), scraping one monitor."""

    def __init__(self, work: Path, monitor: MonitorProcess) -> None:
        self.intervals = yaml.safe_load((ROOT / "alerts" / "prometheus.yml").read_text())["global"]
        self.route = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())
        self.webhook = WebhookReceiver().start()
        route = self.route["route"]
        self.alertmanager = AlertmanagerServer(
            work / "alertmanager-shipped", self.webhook.url, group_by=tuple(route["group_by"]),
            group_wait=route["group_wait"], group_interval=route["group_interval"],
            repeat_interval=route["repeat_interval"], inhibit_rules=self.route["inhibit_rules"])
        self.prometheus = PrometheusServer(
            work / "prometheus-shipped", {MONITOR_JOB: [monitor.address]}, [RULES_PATH],
            alertmanager=self.alertmanager.url, scrape_interval=self.intervals["scrape_interval"],
            evaluation_interval=self.intervals["evaluation_interval"])

    def start(self) -> None:
        self.alertmanager.start()
        self.prometheus.start()

    def page(self, flow: str, after: float):
        return self.webhook.wait_for(lambda n: any(a["status"] == "firing" for a in n.alerts(alertname=PAGE, flow=flow)),
                                     timeout=0, after=after)

    def stop(self) -> None:
        for stop in (self.prometheus.stop, self.alertmanager.stop, self.webhook.stop):
            stop()


@pytest.fixture(scope="module")
def scenarios(kafka_clusters, tmp_path_factory, artifacts_dir):
    work = tmp_path_factory.mktemp("alert-scenarios")
    t0 = time.monotonic()
    built = _build(kafka_clusters, work)
    timeline = {"built": time.monotonic() - t0}
    committed = yaml.safe_load((ROOT / "alerts" / "alertmanager.yml").read_text())
    webhook = WebhookReceiver().start()
    alertmanager = AlertmanagerServer(work / "alertmanager", webhook.url, group_by=tuple(committed["route"]["group_by"]),
                                      inhibit_rules=committed["inhibit_rules"])
    prometheus = PrometheusServer(work / "prometheus", {MONITOR_JOB: [s.monitor.address for s in built.values()]},
                                  [_rules(work)], alertmanager=alertmanager.url)
    killed = built["replicator killed"]
    shipped = ShippedStack(work, killed.monitor)
    try:
        alertmanager.start()
        prometheus.start()
        shipped.start()
        timeline["stack up"] = time.monotonic() - t0
        for s in built.values():
            s.monitor.start()
            s.started = s.seen["monitor_started"] = time.monotonic()
        timeline["monitors up"] = time.monotonic() - t0
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            for s in built.values():
                if s.tick is not None:
                    s.tick(s, prometheus)
            _observe(built.values(), webhook, alertmanager)
            if not killed.armed and "shipped_page" not in killed.seen:
                page = shipped.page(killed.flow, after=killed.started)
                if page is not None:
                    killed.seen["shipped_page"] = round(page.received_monotonic - killed.started, 1)
            for s in built.values():
                if not s.armed and s.fire <= s.notified and s.inhibited <= s.suppressed:
                    timeline.setdefault(f"{s.title[:40]} done", time.monotonic() - t0)
            if not killed.armed:
                timeline.setdefault("kill", killed.started - t0)
            done = all(not s.armed and s.fire <= s.notified and s.inhibited <= s.suppressed
                       for s in built.values())
            if done and ("shipped_page" in killed.seen or time.monotonic() > killed.started + SHIPPED_WAIT_SECONDS):
                break
            time.sleep(1)
        # the silent ones had their chance: every expected alert fired, and one more group_wait passed
        time.sleep(3)
        _observe(built.values(), webhook, alertmanager)
        shipped_timing = {
            "alert": PAGE, "kill_to_page_seconds": killed.seen.get("shipped_page"),
            "heartbeat_timeout_seconds": HEARTBEAT_TIMEOUT_SECONDS,
            "margin_seconds": mixin.DEFAULT.thresholds.heartbeats_stopped_margin_seconds,
            "longest_silence_before_the_kill_seconds": killed.seen.get("longest_silence_before_the_kill"),
            "scrape_interval": shipped.intervals["scrape_interval"],
            "evaluation_interval": shipped.intervals["evaluation_interval"],
            "group_wait": shipped.route["route"]["group_wait"], "monitor_interval_seconds": 5.0}
        killed.seen["shipped_timing"] = shipped_timing
        (artifacts_dir / "alert-timing-shipped.json").write_text(json.dumps(shipped_timing, indent=2) + "\n")
        timeline["end"] = time.monotonic() - t0
        print(f"\nshipped time to page: {shipped_timing}")
        print("suppressed after (s): " + str({t: sc.seen.get("suppressed after") for t, sc in built.items()}))
        print("set-up timeline (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timeline.items()))
        behind = built["hours behind, slow probes"].seen["behind"]
        (artifacts_dir / "alert-scenarios.md").write_text(
            table(built.values()) + f"\n\nhours behind, slow probes: a partition's seconds lag came from a probe of an "
            f"earlier position at {behind.stale_probe_ticks} of {behind.ticks} ticks; lag alerts' activeAt: "
            f"{ {k: sorted(v) for k, v in behind.active_at.items()} }\n")
        yield built
    finally:
        for s in built.values():
            if s.beats is not None:
                s.beats.stop_heartbeats()
            for stop in s.stop:
                stop()
            s.monitor.stop()
        prometheus.stop()
        alertmanager.stop()
        webhook.stop()
        shipped.stop()


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
                s.seen.setdefault("suppressed after", {}).setdefault(
                    alert["labels"]["alertname"], round(time.monotonic() - s.started, 1))


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
                                  "retention headroom low", "replicator killed", "hours behind, slow probes"])
def test_scenario_pages_what_it_must_and_nothing_else(scenarios, name):
    s = scenarios[name]
    assert s.fire <= s.notified, f"{name}: not notified {s.fire - s.notified}; notified {s.notified}"
    assert not s.silent & s.notified, f"{name}: notified although it must not be: {s.silent & s.notified}"
    assert s.inhibited <= s.suppressed, f"{name}: not seen inhibited in Alertmanager: {s.inhibited - s.suppressed}"


def test_replicator_killed_was_ok_before_the_kill(scenarios):
    s = scenarios["replicator killed"]
    assert not s.armed, "the monitor never rated the live flow OK, so the copier was never stopped"
    assert s.seen["ok_before_the_kill"] == "OK"


def test_a_killed_replicator_pages_within_a_minute_with_the_shipped_settings(scenarios):
    """Measured at the receiver with the shipped intervals, group_wait and rules: never before the
    timeout and margin (a silence that short is a hiccup, not a page), always within a minute."""
    timing = scenarios["replicator killed"].seen["shipped_timing"]
    after = timing["kill_to_page_seconds"]
    assert after is not None, f"no page from the shipped stack within {SHIPPED_WAIT_SECONDS} s of the kill: {timing}"
    assert timing["heartbeat_timeout_seconds"] + timing["margin_seconds"] - 1 <= after < 60, timing
    longest = timing["longest_silence_before_the_kill_seconds"]
    assert longest is not None and longest < timing["heartbeat_timeout_seconds"] + timing["margin_seconds"], timing


def test_lag_alerts_keep_their_for_while_probes_are_slow(scenarios):
    """The probes were slow (the partitions' seconds lag came from a probe of an earlier position at
    times), and the lag alerts, once pending, never restarted: one activeAt each."""
    behind = scenarios["hours behind, slow probes"].seen["behind"]
    assert behind.stale_probe_ticks >= 3, (
        f"the probes were never seen in flight ({behind.stale_probe_ticks} of {behind.ticks} ticks): "
        "the fetch quota did not slow them")
    for name, active_at in behind.active_at.items():
        assert len(active_at) == 1, f"{name} restarted its `for`: activeAt {sorted(active_at)}"


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
