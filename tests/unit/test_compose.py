"""docker-compose.yml: it parses, every file it mounts or builds from exists, and its
pieces agree with the project (Kafka version, rule file, monitor job, dashboards path,
a valid mm2.properties). Prometheus' and Alertmanager's configs are checked by their
own tools (promtool, amtool from the Debian packages).

Docker itself is not needed: nothing is started here.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import yaml

from alerts import generate as alerts_generate
from alerts import rules
from alerts.config import MONITOR_JOB, REPLICATOR_JOB
from dashboards import generate as dashboards_generate
from sparkmirror.artifacts import KAFKA_VERSION
from sparkmirror.model.parse import parse_config
from tests.support.prometheus import require_binary

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _bind_mounts(service: dict) -> list[tuple[Path, str]]:
    """(host path, container path) of the service's bind mounts (short and long syntax)."""
    mounts = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            if volume.get("type") != "bind":
                continue
            source, target = volume["source"], volume["target"]
        if source.startswith((".", "/")):
            mounts.append((ROOT / source, target))
    return mounts


def _mount(service: str, container_path: str) -> Path:
    return next(host for host, target in _bind_mounts(SERVICES[service]) if target == container_path)


def test_the_stack_has_both_clusters_the_replicator_monitor_prometheus_alertmanager_grafana():
    assert {"kafka-primary", "kafka-dr", "replicator", "monitor", "prometheus", "alertmanager",
            "grafana"} <= set(SERVICES)


def test_every_mounted_or_built_file_exists():
    mounts = [(name, host) for name, service in SERVICES.items() for host, _ in _bind_mounts(service)]
    assert len(mounts) >= 6
    for name, host in mounts:
        assert host.exists(), f"{name} mounts {host.relative_to(ROOT)}, which does not exist"
    for name, config in COMPOSE.get("configs", {}).items():
        assert "content" in config or (ROOT / config["file"]).exists(), f"config {name}"
    for name, service in SERVICES.items():
        for config in service.get("configs", []):
            assert config["source"] in COMPOSE["configs"], f"{name} uses an undefined config"
        for volume in service.get("volumes", []):
            if isinstance(volume, str) and not volume.startswith((".", "/")):
                assert volume.split(":")[0] in COMPOSE.get("volumes", {}), f"{name}: undefined volume"
        build = service.get("build")
        if build is not None:
            context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
            dockerfile = context / ("Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile"))
            assert dockerfile.exists(), f"{name} builds from a missing {dockerfile}"


def test_dockerfile_copies_only_what_exists():
    copies = re.findall(r"^COPY\s+(.+?)\s+\S+\s*$", (ROOT / "Dockerfile").read_text(), flags=re.M)
    sources = [s for line in copies for s in line.split()]
    # every top-level package the wheel carries (pyproject's package list), or the image lacks a module
    packages = {name.rstrip("*") for name in
                tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert {"pyproject.toml"} | packages <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"


def test_two_kraft_clusters_on_the_official_image_at_the_tested_kafka_version():
    for name in ("kafka-primary", "kafka-dr"):
        service = SERVICES[name]
        assert service["image"] == f"apache/kafka:{KAFKA_VERSION}"
        env = service["environment"]
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"1@{name}:9093"
        assert f"PLAINTEXT://{name}:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert SERVICES["kafka-primary"]["environment"]["CLUSTER_ID"] != SERVICES["kafka-dr"]["environment"]["CLUSTER_ID"]
    for name in ("topics", "traffic"):
        assert SERVICES[name]["image"] == f"apache/kafka:{KAFKA_VERSION}"


def test_mm2_properties_is_valid_and_points_at_the_compose_clusters():
    config = parse_config(COMPOSE["configs"]["mm2"]["content"], "docker-compose.yml#configs.mm2")
    assert {c: v.bootstrap_servers for c, v in config.clusters.items()} == {
        "primary": "kafka-primary:9092", "dr": "kafka-dr:9092"}
    assert [(f.source, f.target) for f in config.enabled_flows()] == [("primary", "dr")]
    for name, subcommand in (("replicator", "replicate"), ("monitor", "monitor")):
        service = SERVICES[name]
        target = next(c["target"] for c in service["configs"] if c["source"] == "mm2")
        assert service["command"][:2] == [subcommand, target]


def test_prometheus_loads_the_generated_rules_and_scrapes_the_monitor_under_the_alerted_job():
    assert _mount("prometheus", "/etc/prometheus/rules/sparkmirror-rules.yml") == alerts_generate.RULES_PATH
    config = yaml.safe_load(_mount("prometheus", "/etc/prometheus/prometheus.yml").read_text())
    assert "/etc/prometheus/rules/*.yml" in config["rule_files"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    listen = SERVICES["monitor"]["command"][SERVICES["monitor"]["command"].index("--listen") + 1]
    assert jobs[MONITOR_JOB]["static_configs"][0]["targets"] == [f"monitor:{listen.rsplit(':', 1)[1]}"]
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]


def test_prometheus_keeps_the_31_days_a_30_day_objective_is_computed_over():
    command = SERVICES["prometheus"]["command"]
    retention = [a.split("=", 1)[1] for a in command if a.startswith("--storage.tsdb.retention.time=")]
    assert retention and retention[0].endswith("d") and int(retention[0][:-1]) >= 31
    # a command replaces the image's own: the config file it is given must still be the mounted one
    assert "--config.file=/etc/prometheus/prometheus.yml" in command


def test_prometheus_scrapes_the_replicators_own_metrics_where_it_listens():
    """The drill-down's replicator row and SparkmirrorReplicatorRecordsLost need the replicator's /metrics;
    it must listen beyond the container's loopback for Prometheus to reach it."""
    config = yaml.safe_load(_mount("prometheus", "/etc/prometheus/prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    command = SERVICES["replicator"]["command"]
    listen = command[command.index("--metrics-listen") + 1]
    assert listen.startswith("0.0.0.0:")
    assert jobs[REPLICATOR_JOB]["static_configs"][0]["targets"] == [f"replicator:{listen.rsplit(':', 1)[1]}"]


def test_promtool_accepts_the_prometheus_config_with_the_rules(tmp_path):
    config = yaml.safe_load((ROOT / "alerts" / "prometheus.yml").read_text())
    config["rule_files"] = [str(alerts_generate.RULES_PATH)]  # the container path, on this machine
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([require_binary("promtool"), "check", "config", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = sum("record" in r for g in rules.rule_file()["groups"] for r in g["rules"])
    assert f"SUCCESS: {len(rules.RULES) + recorded} rules found" in proc.stdout


def test_amtool_accepts_the_alertmanager_config():
    amtool = require_binary("amtool")
    path = _mount("alertmanager", "/etc/alertmanager/alertmanager.yml")
    proc = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = yaml.safe_load(path.read_text())
    named = set(re.findall(r"Sparkmirror\w+", yaml.safe_dump(config["inhibit_rules"])))
    assert named and named <= set(rules.BY_NAME), f"inhibit rules name unknown alerts: {named - set(rules.BY_NAME)}"


def test_grafana_provisions_the_datasource_and_the_generated_dashboards():
    datasources = yaml.safe_load(
        next(_mount("grafana", "/etc/grafana/provisioning/datasources").glob("*.yml")).read_text())
    prometheus = next(d for d in datasources["datasources"] if d["type"] == "prometheus")
    assert prometheus["url"] == "http://prometheus:9090" and prometheus["isDefault"]
    providers = yaml.safe_load(
        next(_mount("grafana", "/etc/grafana/provisioning/dashboards").glob("*.yml")).read_text())
    path = providers["providers"][0]["options"]["path"]
    assert _mount("grafana", path) == dashboards_generate.JSON_DIR
    home = SERVICES["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(path + "/") and (dashboards_generate.JSON_DIR / Path(home).name).exists()


def test_published_ports_do_not_collide():
    ports = [p.split(":")[0] for s in SERVICES.values() for p in s.get("ports", [])]
    assert len(ports) == len(set(ports))
