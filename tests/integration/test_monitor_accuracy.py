"""How close the monitor's lag figures are to the truth, at its default settings.

A replicator with a lag known by construction (tests.support.copier: every
record copied exactly DELAY seconds after its timestamp, MM2 offset-syncs and
heartbeats written) runs between the session clusters while records arrive at
a steady rate. The monitor runs with its default options; /api/status and
/metrics are sampled every 0.5 s like a dashboard would. Every figure must be
within half a second of the truth, at any moment, not on average: flow and
partition lag in seconds, records lag (rate x 0.5 s), heartbeat latency. Then
the copier stops, and the lag in seconds must follow the wall clock second by
second (no steps of a refresh interval).
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import pytest

from monitor.watch import MonitorOptions
from tests.support.copier import DelayedCopier, SteadyProducer
from tests.support.kafka import create_topic
from tests.support.monitor import RunningMonitor, sample, write_mm2_config

pytestmark = pytest.mark.kafka

DELAY = 2.0          # seconds between a record's timestamp and its copy on the target
RATE = 200.0         # records per second, over PARTITIONS partitions
PARTITIONS = 2
TOLERANCE = 0.5      # seconds
STEADY_SECONDS = 25
STALLED_SECONDS = 8
#: STOP is due one heartbeat timeout after the last heartbeat arrived, reported within one refresh; the
#: last heartbeat arrived up to a heartbeat interval (1 s) before the copier stopped, the status is
#: sampled every 0.5 s.
STOP_SLACK = 2.0


def _default_options() -> dict:
    """The command line's defaults, but a free port (RunningMonitor's own defaults are test-fast)."""
    defaults = {f.name: getattr(MonitorOptions(), f.name) for f in dataclasses.fields(MonitorOptions)}
    return {k: v for k, v in defaults.items() if k not in ("host", "port", "topic_filter", "group_filter")}


OPTIONS = _default_options()


def _off(value: float | None, truth: float) -> float:
    """value - truth; a missing value is infinitely wrong."""
    return float("inf") if value is None else value - truth


def _report(name: str, errors: list[float]) -> str:
    errors = sorted(abs(e) for e in errors)
    p95 = errors[min(len(errors) - 1, int(0.95 * len(errors)))]
    line = f"{name}: n={len(errors)} error p50 {statistics.median(errors):.3f} p95 {p95:.3f} max {errors[-1]:.3f}"
    print(line)
    return line


def test_lag_seconds_within_half_a_second_at_default_settings_then_follows_a_stall(kafka_clusters, tmp_path,
                                                                                    unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    src, dst = f"p{unique}", f"d{unique}"
    topic = f"orders-{unique}"
    remote, heartbeats, syncs = f"{src}.{topic}", f"{src}.heartbeats", f"mm2-offset-syncs.{dst}.internal"
    create_topic(primary, topic, PARTITIONS)
    create_topic(dr, remote, PARTITIONS)
    create_topic(dr, heartbeats)
    create_topic(primary, syncs)
    config = write_mm2_config(tmp_path / "mm2.properties", {src: primary, dst: dr}, [(src, dst)],
                              {f"{src}->{dst}.topics": f".*-{unique}", "emit.checkpoints.enabled": "false"})
    name = f"{src}->{dst}"
    producer = SteadyProducer(primary, topic, PARTITIONS, RATE).start()
    copier = DelayedCopier(primary, dr, topic, remote, PARTITIONS, DELAY, syncs_topic=syncs,
                           heartbeats_topic=heartbeats, source_alias=src, target_alias=dst).start()
    try:
        with RunningMonitor(config, topics_exclude=[".*heartbeats"], **OPTIONS) as mon:
            # Warm-up: the copier has been running for longer than its delay, and the monitor's probe
            # has answered ten rounds (its consumer connects at the first one, which on a loaded
            # machine takes seconds).
            time.sleep(DELAY + 1)
            mon.wait_for(lambda s: s["flows"][0]["lag_probes_total"] >= 10 * PARTITIONS, 60, "ten rounds of probes")
            for _ in range(4):  # and each endpoint served a few times (the first /metrics loads its code)
                mon.flow(name), mon.metrics()
                time.sleep(0.5)

            flow_err, part_err, metric_err, records_err, latency_err = [], [], [], [], []
            per_partition = RATE / PARTITIONS * DELAY
            deadline = time.monotonic() + STEADY_SECONDS
            while time.monotonic() < deadline:
                flow = mon.flow(name)
                flow_err.append(_off(flow["lag"]["seconds"], DELAY))
                for p in flow["partitions"]:
                    part_err.append(_off(p["lag_seconds"], DELAY))
                    records_err.append(_off(p["lag_records"], per_partition) / RATE * PARTITIONS)
                latency = flow["heartbeat"]["latency"]["last_seconds"]
                if latency is not None:
                    latency_err.append(latency - DELAY)
                m = mon.metrics()
                metric_err.append(_off(sample(m, "sparkmirror_flow_lag_seconds", flow=name), DELAY))
                for p in range(PARTITIONS):
                    metric_err.append(_off(sample(m, "sparkmirror_partition_lag_seconds", flow=name,
                                                  topic=topic, partition=p), DELAY))
                time.sleep(0.5)
            lines = [_report("flow lag seconds (/api/status)", flow_err),
                     _report("partition lag seconds (/api/status)", part_err),
                     _report("lag seconds (/metrics)", metric_err),
                     _report("records lag (as seconds at the partition's rate)", records_err),
                     _report("heartbeat latency", latency_err)]
            for errors, line in zip((flow_err, part_err, metric_err, records_err, latency_err), lines):
                assert errors and max(abs(e) for e in errors) <= TOLERANCE, line

            # The replicator stops (records, syncs and heartbeats): the true lag is the age of the first
            # record it did not copy, and once no heartbeat arrived for the flow's heartbeat timeout the
            # flow is STOP (not STALL: that is a replicator whose heartbeats still arrive), at the latest
            # one refresh (--interval) later.
            timeout = flow["heartbeat"]["timeout_seconds"]
            copier.stop()
            stopped_at, oldest = time.time(), copier.first_missing_ms / 1000
            stalled, statuses = [], []
            deadline = time.monotonic() + max(STALLED_SECONDS, timeout + OPTIONS["interval"] + STOP_SLACK)
            while time.monotonic() < deadline and not (len(statuses) > 2 and statuses[-3][1] == "STOP"):
                asked = time.time()
                flow = mon.flow(name, detail="summary")
                answered = time.time()
                at = (asked + answered) / 2
                stalled.append((at, flow["lag"]["seconds"]))
                statuses.append((round(at - stopped_at, 1), flow["status"], flow["heartbeat"]["arrival_age_seconds"]))
                time.sleep(0.5)
            stall_err = [_off(value, at - oldest) for at, value in stalled]
            line = _report("stalled: lag seconds vs the wall clock", stall_err)
            assert max(abs(e) for e in stall_err) <= TOLERANCE, (line, stalled)
            steps = [(b_value - a_value) - (b_at - a_at) for (a_at, a_value), (b_at, b_value)
                     in zip(stalled, stalled[1:])]
            assert max(abs(s) for s in steps) <= TOLERANCE, ("lag seconds moved in steps", stalled)
            stop = next((i for i, (_, status, _) in enumerate(statuses) if status == "STOP"), None)
            assert stop is not None, f"never STOP after the replicator stopped (timeout {timeout} s): {statuses}"
            print(f"STOP {statuses[stop][0]} s after the stop (heartbeat timeout {timeout} s, interval "
                  f"{OPTIONS['interval']} s)")
            assert {status for _, status, _ in statuses[:stop]} <= {"OK", "WARN"}, statuses
            assert {status for _, status, _ in statuses[stop:]} == {"STOP"}, statuses
            assert statuses[stop][2] >= timeout, f"STOP before the heartbeat timeout: {statuses}"
            assert statuses[stop][0] <= timeout + OPTIONS["interval"] + STOP_SLACK, statuses
    finally:
        copier.stop()
        producer.close()
