"""A hand-built monitor state for the evaluator's unit tests: one flow a->b, a clock
the test moves, and helpers that record heartbeats and offsets and evaluate (no Kafka)."""

from __future__ import annotations

from monitor.evaluator import EvaluatorSettings, evaluate
from monitor.state import MonitorState, OffsetsRow
from monitor.watch import watched_flows
from sparkmirror.model.parse import parse_config
from sparkmirror.model.records import Heartbeat

T0 = 1_800_000_000.0
FLOW = "a->b"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def make_state(extra: str = "", window: int = 3) -> tuple[MonitorState, Clock]:
    config = parse_config("clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n"
                          "a->b.enabled = true\nemit.heartbeats.interval.seconds = 1\n"
                          "emit.checkpoints.interval.seconds = 10\n" + extra, "mm2.properties")
    clock = Clock()
    state = MonitorState(watched_flows(config), ["a", "b"], window=window, clock=clock)
    return state, clock


def beat(state: MonitorState, clock: Clock, latency: float | None = 0.05) -> None:
    state.add_heartbeat(FLOW, Heartbeat("b", "a", int((clock.now - (latency or 0)) * 1000)),
                        clock.now if latency is not None else None)


def offsets(state, clock, *, start=0, end=10, target_end=10, sync=(0, 0), topic="orders", partition=0):
    state.record_offsets(FLOW, [OffsetsRow(topic, partition, f"a.{topic}", start, end, target_end, sync)],
                         at=clock.now)


def run(state, clock, **settings):
    return evaluate(state, clock.now, EvaluatorSettings(window=3, **settings))
