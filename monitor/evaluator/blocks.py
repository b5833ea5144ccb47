"""A flow's partitions evaluated topic by topic, each topic's work kept while nothing in it moved.

A large flow is mostly idle topics whose partitions are all caught up: their results, their
topic's result and their share of the flow's totals are the same at every evaluation but for
the time of the read. Each topic's evaluation is kept as a ``TopicBlock``; the next evaluation
reuses a block whole when it was *quiet* (every partition caught up and idle, OK, nothing to
say) and the state has not touched the topic since (``FlowState.touched``: a read that changed
a partition's figures, a probe, partitions added or dropped). So an evaluation costs the
topics that moved, plus one refresh of each kept partition's read time.

A block that is not quiet is evaluated again every time, its idle partitions' results still
reused one by one (``partitions.idle_signature``).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from monitor import catchup
from monitor.evaluator.partitions import LowHeadroom, partition_results, retention_headroom
from monitor.evaluator.results import OK, PAUSED, STOP, PartitionResult, TopicResult
from monitor.evaluator.topics import topic_result
from monitor.facts import FlowState, PartitionState
from monitor.options import EvaluatorSettings
from monitor.pacing import Pacer
from monitor.windows import POSITION
from sparkmirror.metrics import STATUSES


@dataclass
class TopicBlock:
    """One topic's evaluation: its partitions' results and what the flow's totals take from them."""

    keys: tuple                       # the topic's partition keys, in order
    states: list[PartitionState]      # the state the results were built from, key by key
    results: list[PartitionResult]
    idle: dict                        # key -> (idle signature, result): reusable one by one
    topic: TopicResult
    quiet: bool                       # reusable whole while the topic is not touched
    built_for: tuple                  # (partitions_changed, retention, settings) it was built under
    by_status: dict[str, int]
    held: int = 0                     # partitions waiting on an open source transaction
    unknown: int = 0                  # partitions whose records lag is unknown
    lag_sum: int | None = None        # records lag of those where it is known; None: none known
    secs_max: float | None = None
    low: LowHeadroom = field(default_factory=LowHeadroom)
    moved: bool = False               # a partition's position moved within its sample window
    pace: catchup.CatchUp = catchup.CatchUp(catchup.UNKNOWN)
    pace_unknown: bool = False        # a partition's catch-up is unknown


def topic_order(fs: FlowState, keys: list) -> list[tuple[str, tuple]]:
    """(topic, its keys) in key order; rebuilt only when partitions came or went."""
    order = fs.topics_order
    if order is None or order[0] is not keys:
        grouped: dict[str, list] = {}
        for key in keys:
            grouped.setdefault(key[0], []).append(key)
        order = fs.topics_order = (keys, [(t, tuple(k)) for t, k in grouped.items()])
    return order[1]


def topic_blocks(fs: FlowState, keys: list, now: float, stopped: bool, stop_reason: str, paused: str,
                 settings: EvaluatorSettings, resumed_at: float | None,
                 pacer: Pacer) -> Generator[None, None, list[TopicBlock]]:
    """Every topic's block, in order, reused where quiet and untouched (see the module docstring)."""
    previous, blocks = fs.topic_blocks, {}
    touched = fs.touched
    for topic, topic_keys in topic_order(fs, keys):
        built_for = (fs.partitions_changed, fs.retention.get(topic), settings)
        block = previous.get(topic)
        if block is not None and block.quiet and topic not in touched and block.keys == topic_keys \
                and _same(block.built_for, built_for):
            for result, part in zip(block.results, block.states):
                result.read_at = part.read_at
        else:
            touched.discard(topic)  # before the pass: a touch during it is seen next time
            block = yield from _evaluate(fs, topic, topic_keys, block.idle if block is not None else {}, built_for,
                                         now, stopped, stop_reason, paused, settings, resumed_at, pacer)
        blocks[topic] = block
        if pacer.due():
            yield
    fs.topic_blocks = blocks
    return list(blocks.values())


def _same(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1] == b[1] and (a[2] is b[2] or a[2] == b[2])


def _evaluate(fs: FlowState, topic: str, keys: tuple, idle: dict, built_for: tuple, now: float, stopped: bool,
              stop_reason: str, paused: str, settings: EvaluatorSettings, resumed_at: float | None,
              pacer: Pacer) -> Generator[None, None, TopicBlock]:
    results, states, kept, idle_count = yield from partition_results(fs, keys, idle, now, stopped or bool(paused),
                                                                 paused or stop_reason, settings, resumed_at, pacer)
    if paused:
        for p in results:  # what the pause explains is not a stopped copy
            if p.status == STOP:
                p.status = PAUSED
    low = yield from retention_headroom(results, fs, now, settings, pacer)
    by_status = {s: 0 for s in STATUSES}
    held = unknown = 0
    lag_sum, secs_max, pace_unknown, moved = None, None, False, False
    for p in results:
        by_status[p.status] += 1
        held += p.open_transaction
        if p.lag_records is None:
            unknown += 1
        else:
            lag_sum = p.lag_records + (lag_sum or 0)
        if p.lag_seconds is not None and (secs_max is None or p.lag_seconds > secs_max):
            secs_max = p.lag_seconds
        pace_unknown = pace_unknown or p.catchup_state == catchup.UNKNOWN
        if pacer.due():
            yield
    for part in states:
        window = part.window
        if len(window) >= 2 and window[-1][POSITION] != window[0][POSITION]:
            moved = True
            break
        if pacer.due():
            yield
    pace = catchup.combine((p.catchup_state, p.copy_rate, p.source_rate, p.catchup_eta_seconds)
                           for p in results if p.catchup_state != catchup.UNKNOWN)
    result = topic_result(topic, results, fs.lost_total.get(topic, 0))
    quiet = idle_count == len(results) == len(keys) and by_status[OK] == len(results) \
        and all(not p.reasons and p.lag_records == 0 for p in results)
    return TopicBlock(keys, states, results, kept, result, quiet, built_for, by_status, held, unknown, lag_sum,
                      secs_max, low, moved, pace, pace_unknown)
