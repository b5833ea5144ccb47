"""Helpers for the monitor's integration tests.

``RunningMonitor`` runs a real MonitorService on its own event loop in a thread
and talks to it over HTTP like Prometheus would. ``write_mm2_config`` writes an
mm2.properties whose cluster aliases carry the test's unique suffix, so every
internal topic name (``p<u>.heartbeats``, ``mm2-offset-syncs.d<u>.internal``,
``p<u>.checkpoints.internal``) is the test's own on the shared session clusters.
``Flow`` is such a flow whose replicator the test plays (it writes the mirror's
records and MM2's internal records itself); ``replication_config`` one for a real
replicator.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from monitor.service import MonitorService
from monitor.watch import MonitorOptions
from sparkmirror.configfile import load_config
from sparkmirror.model.filters import GroupFilter, TopicFilter
from sparkmirror.model.records import Heartbeat, OffsetSync
from tests.support.kafka import create_topic
from tests.support.waiting import wait_until
from tests.support.web import fetch


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
        """(status, body, seconds the answer took)."""
        started = time.monotonic()
        resp = fetch(self.url + path, timeout=timeout)
        return resp.status, resp.body, time.monotonic() - started

    def status(self, detail: str = "partitions") -> dict:
        code, body, _ = self.get(f"/api/status?detail={detail}")
        assert code == 200, body
        return json.loads(body)

    def flow(self, name: str, detail: str = "partitions") -> dict:
        return next(f for f in self.status(detail)["flows"] if f["name"] == name)

    def metrics(self) -> dict[tuple[str, frozenset], float]:
        code, body, _ = self.get("/metrics")
        assert code == 200
        return parse_metrics(body)

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "condition", interval: float = 0.2):
        """Poll /api/status until ``predicate(status)`` is truthy; return its value or fail naming ``what``."""
        last: list[dict] = []

        def holds():
            last[:] = [self.status()]
            return predicate(last[0])

        def details() -> str:
            status = last[0] if last else None
            return f"{status_digest(status)}\nlast status: {json.dumps(status, indent=1)[:4000]}"

        return wait_until(holds, timeout, interval=interval, what=what, details=details)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> "RunningMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def status_digest(status: dict | None) -> str:
    """What a failed wait needs first: each flow's status and reasons, and every partition that is
    not OK with its lag, position basis and reasons (the JSON after it is cut at 4,000 characters)."""
    if not status:
        return "no status"
    lines = []
    for flow in status.get("flows", []):
        lines.append(f"flow {flow.get('name')}: {flow.get('status')} {flow.get('reasons')}")
        for p in flow.get("partitions", []):
            if p.get("status") != "OK":
                lines.append(f"  {p.get('topic')}-{p.get('partition')}: {p.get('status')} lag {p.get('lag_records')} "
                             f"records / {p.get('lag_seconds')} s, position {p.get('position')} "
                             f"({p.get('position_basis')}), source {p.get('source_start')}..{p.get('source_end')}, "
                             f"target end {p.get('target_end')}: {p.get('reasons')}")
    return "\n".join(lines)


def parse_metrics(body: bytes) -> dict[tuple[str, frozenset], float]:
    """A /metrics page as {(sample name, labels): value}; read with ``sample``."""
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


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


class Flow:
    """One synthetic flow p<u> -> d<u> between the session clusters."""

    def __init__(self, clusters, tmp_path, unique, partitions: int = 1, extra: dict | None = None) -> None:
        self.primary, self.dr = clusters.primary.bootstrap, clusters.dr.bootstrap
        self.src, self.dst = f"p{unique}", f"d{unique}"
        self.name = f"{self.src}->{self.dst}"
        self.topic = f"orders-{unique}"
        self.remote = f"{self.src}.{self.topic}"
        self.heartbeats = f"{self.src}.heartbeats"
        self.syncs = f"mm2-offset-syncs.{self.dst}.internal"
        self.checkpoints = f"{self.src}.checkpoints.internal"
        create_topic(self.primary, self.topic, partitions)
        create_topic(self.dr, self.remote, partitions)
        create_topic(self.dr, self.heartbeats)
        create_topic(self.primary, self.syncs)
        create_topic(self.dr, self.checkpoints)
        self.config = write_mm2_config(tmp_path / "mm2.properties", {self.src: self.primary, self.dst: self.dr},
                                       [(self.src, self.dst)], {
                                           f"{self.name}.topics": f".*-{unique}",
                                           f"{self.name}.groups": f".*-{unique}",
                                           "emit.heartbeats.interval.seconds": "1",
                                           "emit.checkpoints.interval.seconds": "1",
                                       })
        self._beating = threading.Event()
        self._beat_thread: threading.Thread | None = None
        self.last_heartbeat_ms = 0

    def produce_source(self, partition: int, timestamps_ms: list[int]) -> None:
        produce_raw(self.primary, self.topic, [{"key": b"k", "value": b"v%d" % i, "partition": partition,
                                                "timestamp": ts} for i, ts in enumerate(timestamps_ms)])

    def copy(self, partition: int, count: int, timestamp_ms: int) -> None:
        produce_raw(self.dr, self.remote, [{"key": b"k", "value": b"m", "partition": partition,
                                            "timestamp": timestamp_ms}] * count)

    def sync(self, partition: int, upstream: int, downstream: int) -> None:
        s = OffsetSync(self.topic, partition, upstream, downstream)
        produce_raw(self.primary, self.syncs, [{"key": s.encode_key(), "value": s.encode_value()}])

    def start_heartbeats(self, every: float = 0.3) -> None:
        self._beating.set()

        def beat():
            while self._beating.is_set():
                self.last_heartbeat_ms = int(time.time() * 1000)
                hb = Heartbeat(self.dst, self.src, self.last_heartbeat_ms)
                produce_raw(self.dr, self.heartbeats, [{"key": hb.encode_key(), "value": hb.encode_value()}])
                time.sleep(every)

        self._beat_thread = threading.Thread(target=beat, daemon=True)
        self._beat_thread.start()

    def stop_heartbeats(self) -> None:
        self._beating.clear()
        if self._beat_thread:
            self._beat_thread.join(10)


def replication_config(path, primary: str, dr: str, u: str):
    """A one-way flow p<u> -> d<u> of topic orders-<u>: every internal topic name is this test's own."""
    src, dst = f"p{u}", f"d{u}"
    return write_mm2_config(path, {src: primary, dst: dr}, [(src, dst)], {
        f"{src}->{dst}.topics": f"orders-{u}",
        f"{src}->{dst}.groups": f".*-{u}",
        "replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "emit.heartbeats.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.groups.interval.seconds": "2",
        "refresh.topics.interval.seconds": "5",
        "sync.topic.acls.enabled": "false",
    })


def commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` for ``group``, waiting out a group coordinator still loading or moving (a
    freshly started broker answers the first commits with NOT_COORDINATOR or LOAD_IN_PROGRESS)."""
    retriable = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                 KafkaError.COORDINATOR_NOT_AVAILABLE}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wait_until(lambda: consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                                           asynchronous=False) or True, 60, interval=0.5,
                   what=f"group {group}'s commit on {bootstrap}",
                   ignoring=lambda exc: isinstance(exc, KafkaException) and exc.args[0].code() in retriable)
    finally:
        consumer.close()


class CommittingGroup:
    """A consumer group that reads ``topic`` and commits every ``every`` seconds in a thread, as
    an application keeping up with the topic does (``with CommittingGroup(...) as g:``)."""

    def __init__(self, bootstrap: str, group: str, topic: str, every: float = 0.3) -> None:
        self.bootstrap, self.group, self.topic, self.every = bootstrap, group, topic, every
        self.commits = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"group-{group}", daemon=True)

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([self.topic])
            last = time.monotonic()
            while not self._stop.is_set():
                consumer.poll(0.1)
                if time.monotonic() - last >= self.every:
                    last = time.monotonic()
                    try:
                        consumer.commit(asynchronous=False)
                        self.commits += 1
                    except KafkaException as exc:
                        if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed since the last
                            raise
        except BaseException as exc:  # reported by __exit__
            self.errors.append(exc)
        finally:
            consumer.close()

    def __enter__(self) -> "CommittingGroup":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self.errors, self.errors


def false_skips(status: dict, flow: str) -> list[str]:
    """Failover summaries of ``flow``'s groups that say a failover would skip records."""
    return [g["failover"]["summary"] for g in flow_of(status, flow)["groups"]
            if g.get("failover") and "would-skip" in g["failover"]["blockers"]]


def flow_of(status: dict, name: str) -> dict:
    return next(f for f in status["flows"] if f["name"] == name)
