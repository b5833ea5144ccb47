"""Which data path a flow runs on, and when it may switch: pure decisions, no Spark, Kafka or I/O.

``choose_path`` is the rule for one flow: real time unless the flow is exactly-once (one
transaction per source partition and micro-batch), ``--source kafka`` or
``--max-records-per-batch`` asks for micro-batches, the writer cannot be had here, or the
flow has more partitions than a real-time query runs (each is a task holding a slot for
as long as the query runs).

``PathPolicy`` is one flow's decision over time, as ``FlowReplicator`` asks for it: the rule,
then the task slots left for the flow, then under ``--data-path auto`` a backlog of
``catch_up_first_records`` or more is caught up in micro-batches first (more records per
second) and the flow goes real time once caught up. When real time cannot keep up
(catchup.FallBehind), auto falls back to micro-batches and holds them for
``fall_back_hold`` seconds, doubling with every further fall-back up to
FALL_BACK_HOLD_MAX_S, so a source faster than real time can copy does not switch the flow
back and forth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from replicator.settings import MICRO_BATCH, REAL_TIME, ReplicatorSettings
from sparkmirror.errors import SparkmirrorError

#: A flow with more partitions than this runs in micro-batches: each partition is a task
#: (a thread and a Kafka consumer) for as long as the query runs.
MAX_REALTIME_PARTITIONS = 256
#: Spare local task slots beyond today's partitions, for topics that appear or grow.
SLOT_HEADROOM = 16
#: The longest micro-batch hold after a fall-back from real time (see PathPolicy.fall_back).
FALL_BACK_HOLD_MAX_S = 960.0


@dataclass(frozen=True)
class Choice:
    path: str
    reason: str


def choose_path(requested: str, *, exactly_once: bool, source_mode: str, capped: bool, partitions: int,
                writer_unavailable: str | None) -> Choice:
    """The data path of one flow (``requested`` is --data-path)."""
    if requested == MICRO_BATCH:
        return Choice(MICRO_BATCH, "--data-path micro-batch")
    reasons = []
    if exactly_once:
        reasons.append("exactly-once commits one transaction per source partition and micro-batch")
    if source_mode == "kafka":
        reasons.append("--source kafka reads in micro-batches")
    if capped:
        reasons.append("--max-records-per-batch caps micro-batches")
    if writer_unavailable:
        reasons.append(f"the real-time writer is not available: {writer_unavailable}")
    if partitions > MAX_REALTIME_PARTITIONS:
        reasons.append(f"{partitions} partitions are more than {MAX_REALTIME_PARTITIONS}, the most a real-time "
                       "query runs (one long-lived task each)")
    if reasons:
        return Choice(MICRO_BATCH, "; ".join(reasons))
    return Choice(REAL_TIME, "records are copied as they arrive")


def local_slots(master: str | None) -> int | None:
    """Task slots of a ``local[N]``/``local[N,F]`` master; None for ``local[*]`` or a cluster."""
    if not master or not master.startswith("local"):
        return None
    if master == "local":
        return 1
    inner = master[master.find("[") + 1:master.rfind("]")]
    first = inner.split(",")[0].strip()
    return int(first) if first.isdigit() else None


class PathPolicy:
    """One flow's data path over time: what it runs on now (``path``), whether it could run in
    real time (``realtime_eligible``), whether it catches up in micro-batches before going real
    time (``catching_up_first``), and the hold after a fall-back. Times are ``time.monotonic()``
    seconds, given by the caller."""

    def __init__(self, settings: ReplicatorSettings, *, exactly_once: bool, flow_name: str) -> None:
        self.settings = settings
        self.data_path = settings.data_path  # --data-path: auto, real-time or micro-batch
        self.exactly_once = exactly_once
        self.flow_name = flow_name
        self.path = Choice(MICRO_BATCH, "not decided")
        self.realtime_eligible = False
        self.catching_up_first = False
        self.fell_back = 0  # times the flow left real time because it could not keep up
        self.realtime_not_before = 0.0  # after falling back: no real time before this

    @property
    def realtime(self) -> bool:
        return self.path.path == REAL_TIME

    @property
    def falls_back(self) -> bool:
        """Whether the flow leaves real time for micro-batches when real time cannot keep up."""
        return self.data_path == "auto"

    def choose(self, *, partitions: int, writer_unavailable: str | None, slots_free: int | None = None,
               backlog: Callable[[], int | None] = lambda: None) -> tuple[Choice, bool]:
        """Decide (again) the path; returns it and whether it changed. ``slots_free``: real-time task
        slots left for this flow (None: not limited here); ``backlog()``: records the copy is behind
        (None: unknown), asked only when auto could go real time. --data-path real-time on a flow
        that cannot run in real time raises."""
        s = self.settings
        choice = choose_path(self.data_path, exactly_once=self.exactly_once, source_mode=s.source_mode,
                             capped=bool(s.max_records_per_batch), partitions=partitions,
                             writer_unavailable=writer_unavailable)
        if choice.path == REAL_TIME and slots_free is not None and partitions > slots_free:
            choice = Choice(MICRO_BATCH, f"{partitions} partitions need as many task slots "
                            f"and {slots_free} are free (give the application more cores: local[N], or "
                            "more executors or spark.cores.max on a cluster)")
        self.realtime_eligible = choice.path == REAL_TIME
        self.catching_up_first = False
        if choice.path == REAL_TIME and self.data_path == "auto":
            behind = backlog()
            if behind is not None and behind >= s.catch_up_first_records:
                self.catching_up_first = True
                choice = Choice(MICRO_BATCH, f"{behind:,} records behind: catching up in "
                                "micro-batches first (more records per second), then real time")
        if self.data_path == REAL_TIME and choice.path != REAL_TIME:
            raise SparkmirrorError(f"flow {self.flow_name} cannot run on the real-time path: {choice.reason}",
                                   hint="use --data-path auto (the default) to fall back to micro-batches")
        changed = choice != self.path
        self.path = choice
        return choice, changed

    def expected(self, choice: Choice) -> bool:
        """Whether ``choice`` is what the flow was meant to run on (real time, micro-batches asked
        for, or a catch-up first), rather than a path it was pushed onto (worth a warning)."""
        return choice.path == REAL_TIME or self.data_path == MICRO_BATCH or self.catching_up_first

    def next_hold(self) -> float:
        """The micro-batch hold of the next fall-back: ``fall_back_hold`` doubling with every
        fall-back (1 min, 2 min, ... 16 min by default)."""
        return min(self.settings.fall_back_hold * 2 ** self.fell_back, FALL_BACK_HOLD_MAX_S)

    def fall_back(self, now: float) -> float:
        """Real time could not keep up: micro-batches until caught up, and not real time again for
        the returned hold (``next_hold``)."""
        hold = self.next_hold()
        self.fell_back += 1
        self.realtime_not_before = now + hold
        self.catching_up_first = True
        self.path = Choice(MICRO_BATCH, "real time could not keep up: catching up in micro-batches first")
        return hold

    def may_go_real_time(self, now: float) -> bool:
        """Whether a flow catching up in micro-batches may go real time now that it caught up."""
        return self.catching_up_first and now >= self.realtime_not_before

    def go_real_time(self) -> None:
        self.catching_up_first = False
        self.path = Choice(REAL_TIME, "caught up")
