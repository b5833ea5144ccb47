"""What a data path's runner is, what it is given, and what the runners share.

A runner runs one flow's streaming query on one data path, from its start to its stop or
failure: ``microbatch.DirectSourceRunner`` and ``microbatch.KafkaSourceRunner`` (micro-batches
over the direct source, or over Spark's Kafka source, exactly-once included) and
``rtrunner.RealTimeRunner`` (Spark's real-time mode). ``FlowReplicator`` makes a new one for
each start of the query and hands it everything in a ``RunnerContext``; a runner never reaches
back into the flow. Also here: a failure's one-line summary and which failures a replay cannot
fix, the restart backoff, the flow's counters, the probe that says what a slow batch waits
for, and Spark's Kafka source as both the Kafka micro-batch and the real-time path read it.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from replicator.datapath import realtime
from replicator.datapath.isr import short_of_replicas
from replicator.datapath.offsetsyncs_writer import OffsetSyncWriter
from replicator.datapath.writer import ERROR_MARKER
from replicator.settings import ReplicatorSettings

log = logging.getLogger("sparkmirror.replicate")

GRACEFUL_STOP_S = 10.0
#: A failed query is restarted from its checkpoint after this many seconds, doubling to the cap.
RESTART_BACKOFF_S = (5.0, 60.0)
#: A batch running longer than this is reported (and again every as long), naming the cluster it waits for.
SLOW_BATCH_S = 20.0
# Write errors that replaying the batch can never fix: the flow stops on them (the
# record is named; nothing after it is committed). Every other failure — a broker
# down, a deleted topic, a lost Spark task — restarts the query from its checkpoint.
PERMANENT_WRITE_ERRORS = ("size too large", "invalid record", "authorization failed", "policy violation",
                          "corrupt", "no target topic known", "invalid timestamp",
                          # the same from the real-time path's Java producer (exception class names)
                          "recordtoolargeexception", "invalidrecordexception", "authorizationexception",
                          "policyviolationexception", "invalidtimestampexception")


def stop_grace(real_time: bool, interval: float, local: bool = True) -> float:
    """The longest a clean stop lets a query's running batch finish: GRACEFUL_STOP_S. A real-time
    query in local mode stops at once at its writers' acknowledged positions (its tasks get as
    long to end); on a cluster, where the driver cannot read those, it waits long enough for its
    next checkpoint (every ``interval`` seconds) to come (realtime.stop_wait_seconds)."""
    return realtime.stop_wait_seconds(GRACEFUL_STOP_S, interval) if real_time and not local else GRACEFUL_STOP_S


def summarize_spark_error(text: str) -> str:
    """One line a person can act on from a py4j/Spark error text (which can run to pages)."""
    stage = re.search(r"Job aborted due to stage failure: (Task \S+ in stage \S+ failed \d+ times)", text)
    cause = None
    for pattern in (r"Python worker exited unexpectedly \(crashed\)[^\n]*", r"(?:KafkaException|KafkaError)[^\n]*",
                    r"^\w*(?:Error|Exception): [^\n]+"):
        found = re.findall(pattern, text, re.M)
        found = [f for f in found if "Traceback" not in f and "Py4J" not in f]
        if found:
            cause = found[-1].strip()
            break
    if stage:
        return f"{stage.group(1)} ({cause})" if cause else stage.group(1)
    if cause:
        return cause
    lines = [l.strip() for l in text.splitlines() if l.strip() and "Traceback" not in l]
    return lines[0] if lines else ""


def failure_message(exc) -> str:
    """A failed query's exception in one line: the writer's own error, a batch's, or Spark's summarised."""
    text = str(exc)
    idx = text.find(ERROR_MARKER)
    if idx >= 0:
        return text[idx + len(ERROR_MARKER) + 2:].splitlines()[0]
    own = re.search(r"batch \d+ failed: [^\n]*", text)
    if own:
        return own.group(0)
    return summarize_spark_error(text) or repr(exc)


def is_permanent(message: str) -> bool:
    """Whether a failure is a write error replaying the batch can never fix (PERMANENT_WRITE_ERRORS)."""
    return any(p in message.lower() for p in PERMANENT_WRITE_ERRORS)


#: A Java client's Kerberos login that no retry can fix: the keytab holds no current key of the
#: principal, or no key at all, or the realm has no such principal. A KDC that does not answer
#: ("Cannot contact any KDC", "Receive timed out") is not among them: it may come back.
KERBEROS_LOGIN_ERRORS = ("checksum failed", "pre-authentication information was invalid",
                         "client not found in kerberos database", "unable to obtain password from user",
                         "cannot locate principal", "does not contain the principal")


def kerberos_login_error(message: str) -> bool:
    """Whether a failure is a Java client's Kerberos login that replaying can never fix."""
    text = message.lower()
    return "loginexception" in text and any(p in text for p in KERBEROS_LOGIN_ERRORS)


@dataclass
class FlowStats:
    batches: int = 0
    records: int = 0
    bytes: int = 0
    busy_seconds: float = 0.0
    max_latency_ms: int = 0
    offset_syncs: int = 0
    last_batch_at: float | None = None
    started_at: float = field(default_factory=time.time)
    last: dict = field(default_factory=dict)
    rt_seen: tuple = (0, 0, 0)  # the real-time writers' totals (records, bytes, syncs) last folded in
    rt_window: list = field(default_factory=lambda: [0, 0, 0, 0])  # since the last real-time progress line

    def summary(self, name: str) -> str:
        elapsed = max(time.time() - self.started_at, 1e-9)
        return (f"flow {name}: {self.records} records, {self.bytes / 1e6:.1f} MB in {self.batches} batches, "
                f"{self.records / elapsed:.0f} records/s over {elapsed:.0f} s, max latency "
                f"{self.max_latency_ms / 1000:.2f} s, {self.offset_syncs} offset-syncs")


class Backoff:
    """How long a failed query waits before its restart: RESTART_BACKOFF_S[0] again once a batch
    committed (``reset``), doubling with every restart that fails (``grow``) up to RESTART_BACKOFF_S[1]."""

    def __init__(self) -> None:
        self.delay = RESTART_BACKOFF_S[0]

    def reset(self) -> None:
        self.delay = RESTART_BACKOFF_S[0]

    def grow(self) -> float:
        self.delay = min(self.delay * 2, RESTART_BACKOFF_S[1])
        return self.delay


class Once:
    """Whether something was done yet for this flow (the producer overrides are logged once,
    by whichever runner has them first, not at every restart)."""

    def __init__(self) -> None:
        self.done = False

    def first(self) -> bool:
        was, self.done = self.done, True
        return not was


class ClusterProbe:
    """What a flow's batch waits for when it is slow or failed: a cluster that does not answer,
    or mirror partitions on the target that refuse acks=all writes (too few in-sync replicas)."""

    def __init__(self, name: str, flow, source_admin, target_admin) -> None:
        self.name, self.flow = name, flow
        self.source_admin, self.target_admin = source_admin, target_admin

    def unreachable(self) -> list[str]:
        down = []
        for alias, adm in ((self.flow.source, self.source_admin), (self.flow.target, self.target_admin)):
            try:
                adm.list_topics(timeout=3)
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                down.append(f"cluster {alias} unreachable ({first})")
        return down

    def waiting(self, mirrors: list[str]) -> list[str]:
        """Clusters down, else target partitions of ``mirrors`` short of in-sync replicas; [] when neither."""
        return self.unreachable() or short_of_replicas(self.target_admin, self.flow.target, mirrors)

    def report_slow_batch(self, batch_id: int, started: float, mirrors: list[str]) -> None:
        """Say what a long batch waits for: the writer keeps retrying, the reader keeps fetching."""
        down = self.waiting(mirrors)
        what = ("; ".join(down) if down
                else f"clusters {self.flow.source} and {self.flow.target} answer; the batch is slow")
        (log.warning if down else log.info)("flow %s: batch %d running for %.0f s, waiting: %s; its records are "
                                            "retried until delivered or the batch fails and is replayed (nothing "
                                            "is skipped)", self.name, batch_id, time.monotonic() - started, what)


@dataclass(frozen=True)
class RunnerContext:
    """Everything a runner is given by its flow for one start of the query."""

    name: str  # "A->B"
    config: object  # the MM2 configuration (sparkmirror.model)
    flow: object  # the flow's FlowConfig
    settings: ReplicatorSettings
    spark: object  # the SparkSession
    flow_dir: Path  # the flow's micro-batch checkpoint; checkpoint_layout finds the rest beside it
    offset_syncs: OffsetSyncWriter
    stats: FlowStats  # the flow's counters, filled by whichever runner runs
    backoff: Backoff  # reset by a committed batch
    probe: ClusterProbe
    notes: Once  # the producer overrides logged yet
    resume_offsets: Callable  # (assignment, checkpoint) -> startingOffsets of a query without a checkpoint
    source_options: dict  # Spark's Kafka source options for the source cluster
    target_admin: object
    copy_tasks: int | None  # direct source tasks per batch (None: Spark's default parallelism)
    stop_flag: Path  # while it exists the direct source plans no new batch
    fetch_wait_ms: int | None = None  # the real-time source's rate-chosen fetch wait (None: the default)

    def mirror(self, topic: str) -> str:
        return self.flow.policy.format_remote_topic(self.flow.source, topic)

    def log_notes(self, notes: list[str]) -> None:
        if notes and self.notes.first():
            for note in notes:
                log.warning("flow %s: cluster %s: %s", self.name, self.flow.target, note)


class Runner(Protocol):
    """One flow's streaming query on one data path, started once."""

    path: str  # the data path it runs: MICRO_BATCH or REAL_TIME
    query: object | None  # the running streaming query; None before the start and once stopped or failed

    def start(self) -> None:
        """Start the query where the flow's checkpoints say."""

    def stop(self, closing: bool) -> None:
        """Stop the query the way its path copies least twice; ``closing``: the run is ending."""

    def check(self) -> None:
        """One supervision look while the query is active: slow batches, the writers' counters."""

    def failed(self, closing: bool) -> str:
        """The query failed for a reason a replay can fix: leave what the restart needs; returns how
        it resumes (for the log)."""

    def copied_offsets(self) -> dict[tuple[str, int], int] | None:
        """Where the copy has got to per source partition (the catch-up estimate), or None."""


def local_mode(spark) -> bool:
    """Whether the session runs in local mode: the writers then share the driver's JVM."""
    master = getattr(getattr(spark, "sparkContext", None), "master", None)
    return master is None or str(master).startswith("local")


def spark_source_options(config, flow) -> dict[str, str]:
    """Spark's Kafka source options for a flow's source cluster."""
    from sparkmirror.model.clients import spark_kafka_options

    opts = spark_kafka_options(config.client_config(flow.source, "consumer", flow), cluster=flow.source)
    # Aborted transactions never reach the target.
    opts["kafka.isolation.level"] = "read_committed"
    return opts


def kafka_source(ctx: RunnerContext, assign: dict[str, list[int]], starting: str, *, real_time: bool = False,
                 max_offsets: int | None = None):
    """Spark's Kafka source over the partitions ``assign``, from ``starting`` when there is no checkpoint."""
    reader = ctx.spark.readStream.format("kafka")
    options = realtime.source_options(ctx.source_options, ctx.fetch_wait_ms) if real_time else ctx.source_options
    for k, v in options.items():
        reader = reader.option(k, v)
    reader = (
        reader.option("assign", json.dumps(assign))
        # MM2's or an earlier run's progress when there is no Spark checkpoint yet (takeover)
        .option("startingOffsets", starting)
        .option("includeHeaders", "true")
        # Spark's data-loss check trips on legitimate offset gaps (compaction,
        # transaction markers); sparkmirror detects loss itself (see monitor).
        .option("failOnDataLoss", "false")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()
