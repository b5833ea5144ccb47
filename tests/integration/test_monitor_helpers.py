"""Helpers for the monitor's integration tests (no tests here).

``RunningMonitor`` runs a real MonitorService on its own event loop in a thread
and talks to it over HTTP like Prometheus would. ``write_mm2_config`` writes an
mm2.properties whose cluster aliases carry the test's unique suffix, so every
internal topic name (``p<u>.heartbeats``, ``mm2-offset-syncs.d<u>.internal``,
``p<u>.checkpoints.internal``) is the test's own on the shared session clusters.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from monitor.service import MonitorService
from monitor.watch import MonitorOptions
from replicator.model.config import load_config
from replicator.model.filters import GroupFilter, TopicFilter


def write_mm2_config(path: Path, clusters: dict[str, str], flows: list[tuple[str, str]],
                     extra: dict[str, str] | None = None) -> Path:
    lines = [f"clusters = {', '.join(clusters)}"]
    lines += [f"{alias}.bootstrap.servers = {bootstrap}" for alias, bootstrap in clusters.items()]
    lines += [f"{a}->{b}.enabled = true" for a, b in flows]
    lines += [f"{k} = {v}" for k, v in (extra or {}).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


class RunningMonitor:
    """A MonitorService on a private event loop; HTTP on a free port."""

    def __init__(self, config_path: Path, *, topics_exclude=(), otel_readers=None, **options) -> None:
        defaults = dict(port=0, interval=0.5, groups_interval=1.0, metadata_interval=2.0, timeout=3.0, window=4,
                        topic_filter=TopicFilter((".*",), tuple(topics_exclude)),
                        group_filter=GroupFilter((".*",), ()))
        defaults.update(options)
        self.service = MonitorService(load_config(config_path), MonitorOptions(**defaults),
                                      otel_readers=otel_readers)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="monitor-loop", daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.service.start(), self.loop).result(30)
        self.url = f"http://127.0.0.1:{self.service.port}"

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes, float]:
        started = time.monotonic()
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as resp:
                return resp.status, resp.read(), time.monotonic() - started
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), time.monotonic() - started

    def status(self, detail: str = "partitions") -> dict:
        code, body, _ = self.get(f"/api/status?detail={detail}")
        assert code == 200, body
        return json.loads(body)

    def flow(self, name: str, detail: str = "partitions") -> dict:
        return next(f for f in self.status(detail)["flows"] if f["name"] == name)

    def metrics(self) -> dict[tuple[str, frozenset], float]:
        code, body, _ = self.get("/metrics")
        assert code == 200
        out = {}
        for family in text_string_to_metric_families(body.decode()):
            for s in family.samples:
                out[(s.name, frozenset(s.labels.items()))] = s.value
        return out

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "condition", interval: float = 0.2):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.status()
            value = predicate(last)
            if value:
                return value
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what}; last status: {json.dumps(last, indent=1)[:4000]}")

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> "RunningMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def produce_raw(bootstrap: str, topic: str, records: list[dict]) -> None:
    """Produce key/value/partition/timestamp dicts and wait for every delivery."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


def partition_of(flow: dict, topic: str, partition: int) -> dict:
    return next(p for p in flow["partitions"] if p["topic"] == topic and p["partition"] == partition)


def sample(metrics: dict, name: str, **labels) -> float | None:
    return metrics.get((name, frozenset((k, str(v)) for k, v in labels.items())))
