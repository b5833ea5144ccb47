"""Turns the collected state into statuses and numbers: the monitor's evaluator stage.

Pure logic: ``evaluate(state, now, settings)`` reads a MonitorState and returns
an Evaluation; it performs no I/O and changes nothing but its memory of idle
topics' and partitions' results (``FlowState.topic_blocks``), so it is unit-tested with
hand-built states. The exporters only ever read an Evaluation.

The rules are Burrow's, adapted to replication (the partition's *replicated
position* plays the consumer offset) and documented for users in
docs/monitor-status.md; keep the two in step. They are evaluated per partition
(``partitions``), per topic (``topics``), per consumer group (``groups``) and per
flow (``flows``, which runs the others); ``results`` holds what they return.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator

from monitor.evaluator.flows import flow_result
from monitor.evaluator.results import ClusterResult, Evaluation, worst
from monitor.options import EvaluatorSettings  # the options the evaluator reads, declared there
from monitor.pacing import STEP_SECONDS, Pacer, finish
from monitor.state import MonitorState

__all__ = ["Evaluation", "EvaluatorSettings", "evaluate", "evaluate_steps"]


def evaluate(state: MonitorState, now: float, settings: EvaluatorSettings = EvaluatorSettings()) -> Evaluation:
    return finish(evaluate_steps(state, now, settings))


def evaluate_steps(state: MonitorState, now: float, settings: EvaluatorSettings = EvaluatorSettings(),
                   clock: Callable[[], float] = time.perf_counter) -> Generator[None, None, Evaluation]:
    """``evaluate`` in steps: yields whenever a step has worked for STEP_SECONDS (by ``clock``),
    in every pass over the partitions and groups, and returns the Evaluation.

    The monitor drives it on its event loop and lets other work run at each pause, so a
    large state never blocks the loop for long. Each partition is evaluated whole; the
    state may change between two steps, which only means that later partitions are
    evaluated from slightly newer figures.
    """
    pacer = Pacer(clock, STEP_SECONDS)
    # The clusters' health and the decode-error counts as the evaluation starts: what is reported
    # while it is paused shows in the next one, whole. A record counted here was read before any
    # flow below is evaluated, so a flow never lags behind the garbage read next to its records.
    clusters = [ClusterResult(h.alias, h.up, h.error, h.last_ok_at, h.errors_total) for h in state.clusters.values()]
    decode_errors = dict(state.decode_errors)
    health = {c.alias: c for c in clusters}
    flows = []
    for fs in list(state.flows.values()):
        flows.append((yield from flow_result(state, fs, now, settings, pacer, health)))
        yield
    return Evaluation(now, state.started_at, worst(f.status for f in flows), flows, clusters,
                      decode_errors, settings.granularity, series=settings.series)
