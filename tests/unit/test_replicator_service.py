"""The replicate run's components: the order its docstring documents, and a failed start unwound."""

from __future__ import annotations

import re

from replicator import service
from replicator.service import ReplicatorService
from sparkmirror.model.parse import parse_config

CONFIG = ("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
          "a->b.enabled = true\nb->a.enabled = true\n")


def test_the_components_start_in_the_documented_order(tmp_path):
    config = parse_config(CONFIG)
    svc = ReplicatorService(config, tmp_path)
    components = svc.components(config.enabled_flows())
    documented = re.findall(r"^\d+\. [^`\n]*``(\w+)``", service.__doc__, re.M)
    started = [type(e.component).__name__ for e in components._entries]
    # one _FlowRun per enabled flow, where the docstring names it once
    assert [n for i, n in enumerate(started) if n != "_FlowRun" or started[i - 1] != "_FlowRun"] == documented
    assert components.names[-3:-1] == ["flow a->b", "flow b->a"]


def test_a_component_that_fails_to_start_stops_the_ones_before_it_in_reverse(tmp_path, monkeypatch):
    config = parse_config(CONFIG)
    svc = ReplicatorService(config, tmp_path)
    calls = []
    for name in ("_StartUp", "_MetricsEndpoint", "_HeartbeatTopics"):
        cls = getattr(service, name)
        monkeypatch.setattr(cls, "start", lambda self, n=name: calls.append(f"start {n}"))
        monkeypatch.setattr(cls, "stop", lambda self, timeout, n=name: calls.append(f"stop {n}"))

    def fails(self):
        calls.append("start _Flows")
        raise RuntimeError("cluster b cannot be reached")

    monkeypatch.setattr(service._Flows, "start", fails)
    components = svc.components(config.enabled_flows())
    try:
        components.start()
    except RuntimeError as exc:
        assert "cannot be reached" in str(exc)
    else:
        raise AssertionError("the failed start was not raised")
    assert calls == ["start _StartUp", "start _MetricsEndpoint", "start _HeartbeatTopics", "start _Flows",
                     "stop _HeartbeatTopics", "stop _MetricsEndpoint", "stop _StartUp"]
    assert components.started == []
