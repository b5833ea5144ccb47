"""deploy/kubernetes/: current, valid against Kubernetes' own schemas and prometheus-operator's
CRD schemas, secure by default, and carrying exactly the project's rules and dashboards."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from alerts.rules import rule_file
from dashboards.generate import dashboards
from deploy import generate
from tests.support import crds

ROOT = Path(__file__).resolve().parents[2]
#: The Kubernetes release the manifests are validated against (kubernetes-validate's schemas).
KUBERNETES = "1.33.0"
CRD_KINDS = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}


def _objects(kind: str | None = None):
    return [(p, o) for p, o in generate.manifests() if kind is None or o["kind"] == kind]


def test_generated_manifests_are_current():
    assert generate.stale() == [], "run `python -m deploy.generate`"


def test_every_core_object_validates_against_the_kubernetes_schemas():
    checked = 0
    for path, obj in _objects():
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{path.relative_to(ROOT)} {obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
        checked += 1
    kinds = {o["kind"] for _, o in _objects()}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding"} <= kinds
    assert checked >= 10


@pytest.mark.parametrize("kind", sorted(CRD_KINDS))
def test_operator_objects_validate_against_the_prometheus_operator_crds(kind):
    schema = crds.crd_schema(CRD_KINDS[kind])
    objects = _objects(kind)
    assert objects, f"no {kind} generated"
    for path, obj in objects:
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=str)
        assert not errors, f"{path.relative_to(ROOT)}: {[e.message for e in errors][:5]}"
    # the schema is strict enough to catch a typo (it must be able to fail)
    broken = {**objects[0][1], "spec": {**objects[0][1]["spec"], "endpoints" if kind == "ServiceMonitor" else "groups": "x"}}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))


def test_prometheus_rule_is_the_rule_file_and_passes_promtool(tmp_path):
    [(_, rule)] = _objects("PrometheusRule")
    assert rule["spec"] == rule_file()
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dashboards_are_configmaps_the_grafana_sidecar_picks_up():
    maps = [o for _, o in _objects("ConfigMap") if o["metadata"]["labels"].get("grafana_dashboard") == "1"]
    import json

    got = {name: json.loads(text) for m in maps for name, text in m["data"].items()}
    assert got == dashboards()


def test_the_monitor_runs_locked_down_with_probes_and_resources():
    [(_, deployment)] = _objects("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    sc = container["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] and sc["runAsNonRoot"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    # the image's user is the pod's user, so the read-only image works as built
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(rf"useradd[^\n]*--uid {pod['securityContext']['runAsUser']}\b", dockerfile)
    # the Service and ServiceMonitor reach the container's port by name
    [(_, service)] = [(p, o) for p, o in _objects("Service") if o["metadata"]["name"] == "sparkmirror-monitor"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    monitors = {o["metadata"]["name"]: o for _, o in _objects("ServiceMonitor")}
    assert monitors["sparkmirror-monitor"]["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitors["sparkmirror-replicator"]["spec"]["endpoints"][0]["port"] == "metrics"


def test_the_example_mm2_properties_validates(tmp_path):
    """The ConfigMap's mm2.properties is a valid config once its Secret is mounted."""
    [(_, secret)] = [(p, o) for p, o in _objects("Secret")]
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    for name, text in secret["stringData"].items():
        (secrets / name).write_text(text)
    [(_, config)] = [(p, o) for p, o in _objects("ConfigMap") if o["metadata"]["name"] == "sparkmirror-mm2"]
    path = tmp_path / "mm2.properties"
    path.write_text(config["data"]["mm2.properties"].replace("/etc/sparkmirror/secrets", str(secrets)))
    from sparkmirror.configfile import load_config

    parsed = load_config(path)
    assert [f.name for f in parsed.enabled_flows()] == ["primary->dr"]
