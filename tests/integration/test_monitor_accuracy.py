"""How close the monitor's lag figures are to the truth, at its default settings.

A replicator with a lag known by construction (tests.support.copier: every
record copied exactly DELAY seconds after its timestamp, MM2 offset-syncs and
heartbeats written) runs between the session clusters while records arrive at
a steady rate. The monitor runs as `sparkmirror monitor` does in production, in
a process of its own with its default options (in this process it would share
the interpreter's lock with the copier, the producer and the test's parsing);
/api/status and /metrics are sampled every 0.5 s like a dashboard would. Every figure must be
within half a second of the truth, at any moment, not on average: flow and
partition lag in seconds, records lag (rate x 0.5 s), heartbeat latency. The
truth is the copier's: DELAY by construction, and read back from the
producer's and the copier's timelines at the moment the monitor answered, so
that a copier the machine held back (a loaded CI machine) is not counted as
the monitor's error. Nor is the machine's own delay of the monitor: an error
beyond half a second passes only when the monitor's threads had waited at
least that much longer for a core just before (the kernel's run-queue wait,
``tests.support.starvation``; a few ms a second on an idle machine). Then
the copier stops, and the lag in seconds must follow the wall clock second by
second (no steps of a refresh interval).
"""

from __future__ import annotations

import json
import statistics
import time

import pytest

from monitor.watch import MonitorOptions
from tests.support.copier import DelayedCopier, SteadyProducer
from tests.support.kafka import create_topic
from tests.support.monitor import parse_metrics, sample, write_mm2_config
from tests.support.prometheus import MonitorProcess
from tests.support.starvation import StarvationMeter

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
STARVED_WINDOW = 1.0


#: the default --interval (the monitor runs with every option at its default)
INTERVAL = MonitorOptions().interval


class Monitor(MonitorProcess):
    """``sparkmirror monitor`` with its defaults, read as a dashboard reads it."""

    def flow(self, name: str, detail: str = "partitions") -> dict:
        """The flow in /api/status, with the status's ``generated_at`` (the moment its figures are of)."""
        status = json.loads(self.get(f"/api/status?detail={detail}"))
        return {**next(f for f in status["flows"] if f["name"] == name), "generated_at": status["generated_at"]}

    def metrics(self) -> dict:
        return parse_metrics(self.get("/metrics"))


def _off(value: float | None, truth: float) -> float:
    """value - truth; a missing value is infinitely wrong."""
    return float("inf") if value is None else value - truth


def _report(name: str, errors: list[float]) -> str:
    errors = sorted(abs(e) for e in errors)
    p95 = errors[min(len(errors) - 1, int(0.95 * len(errors)))]
    line = f"{name}: n={len(errors)} error p50 {statistics.median(errors):.3f} p95 {p95:.3f} max {errors[-1]:.3f}"
    print(line)
    return line


def _judge(name: str, errors: list[tuple[float, float]], starved: StarvationMeter) -> None:
    """Every error within TOLERANCE; beyond it only by as long as the monitor's threads waited for a
    core in the STARVED_WINDOW before (summed over threads, so an upper bound of the delay: an
    oversubscribed machine held the monitor back by at most that much). On an idle machine the
    wait is a few ms a second, so the bound is the goal itself."""
    assert errors, f"{name}: no samples"
    line = _report(name, [e for e, _ in errors])
    beyond = [(round(e, 3), round(starved.waited(at - STARVED_WINDOW, at), 3)) for e, at in errors
              if abs(e) > TOLERANCE]
    unexcused = [(e, wait) for e, wait in beyond if abs(e) > TOLERANCE + wait]
    if beyond:
        print(f"  {len(beyond)} beyond {TOLERANCE} s, with the monitor's run-queue wait before: {beyond}")
    assert not unexcused, (line, "(error, the monitor's run-queue wait just before):", unexcused)


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
        with Monitor(tmp_path / "monitor", config, "--topics-exclude", ".*heartbeats") as mon, \
                StarvationMeter(mon._proc.pid) as starved:
            # Warm-up: the copier has been running for longer than its delay, and the monitor's probe
            # has answered ten rounds (its consumer connects at the first one, which on a loaded
            # machine takes seconds).
            time.sleep(DELAY + 1)
            mon.wait_for(lambda s: s["flows"][0]["lag_probes_total"] >= 10 * PARTITIONS, 60, "ten rounds of probes")
            for _ in range(4):  # and each endpoint served a few times (the first /metrics loads its code)
                mon.flow(name), mon.metrics()
                time.sleep(0.5)

            flows, scrapes = [], []
            deadline = time.monotonic() + STEADY_SECONDS
            while time.monotonic() < deadline:
                flows.append(mon.flow(name))
                asked = time.time()
                m = mon.metrics()
                scrapes.append(((asked + time.time()) / 2, m))
                time.sleep(0.5)
            time.sleep(DELAY + 1)  # the copier has read every record written before the last answer

            def lag(p: int, at: float) -> float:
                return copier.true_seconds_lag(producer, p, at)

            flow_err, part_err, metric_err, records_err, latency_err = [], [], [], [], []  # (error, at)
            for flow in flows:
                at = flow["generated_at"]
                flow_err.append((_off(flow["lag"]["seconds"], max(lag(p, at) for p in range(PARTITIONS))), at))
                for p in flow["partitions"]:
                    part_err.append((_off(p["lag_seconds"], lag(p["partition"], at)), at))
                    truth = copier.true_records_lag(producer, p["partition"], at)
                    records_err.append((_off(p["lag_records"], truth) / RATE * PARTITIONS, at))
                latency, truth = flow["heartbeat"]["latency"]["last_seconds"], copier.true_heartbeat_latency(at)
                if latency is not None and truth is not None:
                    latency_err.append((latency - truth, at))
            for at, m in scrapes:
                metric_err.append((_off(sample(m, "sparkmirror_flow_lag_seconds", flow=name),
                                        max(lag(p, at) for p in range(PARTITIONS))), at))
                for p in range(PARTITIONS):
                    metric_err.append((_off(sample(m, "sparkmirror_partition_lag_seconds", flow=name,
                                                   topic=topic, partition=p), lag(p, at)), at))
            waits = sorted(starved.waited(f["generated_at"] - STARVED_WINDOW, f["generated_at"]) for f in flows)
            print(f"monitor's run-queue wait in the {STARVED_WINDOW} s before each answer: p50 "
                  f"{statistics.median(waits):.3f} s, max {waits[-1]:.3f} s")
            truths = [max(lag(p, f["generated_at"]) for p in range(PARTITIONS)) for f in flows]
            print(f"true lag over the window: min {min(truths):.3f} s, max {max(truths):.3f} s (by construction "
                  f"{DELAY} s)")
            for errors, name_ in ((flow_err, "flow lag seconds (/api/status)"),
                                  (part_err, "partition lag seconds (/api/status)"),
                                  (metric_err, "lag seconds (/metrics)"),
                                  (records_err, "records lag (as seconds at the partition's rate)"),
                                  (latency_err, "heartbeat latency")):
                _judge(name_, errors, starved)

            # The replicator stops (records, syncs and heartbeats): the true lag is the age of the first
            # record it did not copy, and once no heartbeat arrived for the flow's heartbeat timeout the
            # flow is STOP (not STALL: that is a replicator whose heartbeats still arrive), at the latest
            # one refresh (--interval) later.
            timeout = flow["heartbeat"]["timeout_seconds"]
            copier.stop()
            stopped_at, oldest = time.time(), copier.first_missing_ms / 1000
            stalled, statuses = [], []
            deadline = time.monotonic() + max(STALLED_SECONDS, timeout + INTERVAL + STOP_SLACK)
            while time.monotonic() < deadline and not (len(statuses) > 2 and statuses[-3][1] == "STOP"):
                asked = time.time()
                flow = mon.flow(name, detail="summary")
                answered = time.time()
                at = (asked + answered) / 2
                stalled.append((at, flow["lag"]["seconds"]))
                statuses.append((round(at - stopped_at, 1), flow["status"], flow["heartbeat"]["arrival_age_seconds"]))
                time.sleep(0.5)
            _judge("stalled: lag seconds vs the wall clock", [(_off(value, at - oldest), at) for at, value in stalled],
                   starved)
            steps = [((b_value - a_value) - (b_at - a_at), b_at) for (a_at, a_value), (b_at, b_value)
                     in zip(stalled, stalled[1:])]
            _judge("stalled: lag seconds' steps between two answers, less the time between them", steps, starved)
            stop = next((i for i, (_, status, _) in enumerate(statuses) if status == "STOP"), None)
            assert stop is not None, f"never STOP after the replicator stopped (timeout {timeout} s): {statuses}"
            print(f"STOP {statuses[stop][0]} s after the stop (heartbeat timeout {timeout} s, interval "
                  f"{INTERVAL} s)")
            assert {status for _, status, _ in statuses[:stop]} <= {"OK", "WARN"}, statuses
            assert {status for _, status, _ in statuses[stop:]} == {"STOP"}, statuses
            assert statuses[stop][2] >= timeout, f"STOP before the heartbeat timeout: {statuses}"
            assert statuses[stop][0] <= timeout + INTERVAL + STOP_SLACK, statuses
    finally:
        copier.stop()
        producer.close()
