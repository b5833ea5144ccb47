"""The replicator's tuning, declared once: ``ReplicatorSettings``.

Each field carries its description, its command-line option or its environment variable,
and how its value is checked; ``replicator.command`` adds the options to the parser from
here, ``ReplicatorSettings.from_args`` builds the one object a run uses, and the service
passes it down to the Spark session, the flows and their data paths. Nothing else reads a
``SPARKMIRROR_*`` variable or keeps a tuning value in a module global, so two flows in one
process can run with different settings (as the tests do).

The environment variables are the knobs for tests and benchmarks that an operator rarely
needs; docs/configuration.md lists every field (``python -m replicator.settings`` writes that
table).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from sparkmirror.errors import UsageError

AUTO, REAL_TIME, MICRO_BATCH = "auto", "real-time", "micro-batch"
DATA_PATHS = (AUTO, REAL_TIME, MICRO_BATCH)
SOURCES = ("direct", "kafka")
#: Spark's real-time mode runs no shorter batch.
MIN_CHECKPOINT_INTERVAL_S = 5.0
#: The real-time checkpoint interval unless one is given. Each boundary pauses the copy for a
#: few tenths of a second (bench/NOTES.md, "Latency against load"). In local mode the writers
#: share the driver's JVM: a clean stop resumes at their acknowledged positions, and a kill -9
#: at the journal of them written every ACKNOWLEDGED_JOURNAL_S, so a boundary every five
#: minutes replays nothing more. On a Spark cluster neither is possible: a kill -9 replays up to
#: the interval, and a clean stop waits for the next boundary, within Kubernetes' 30-s grace.
LOCAL_CHECKPOINT_INTERVAL_S = 300.0
#: How often, in local mode, the writers' acknowledged positions are written beside the
#: real-time checkpoint: what a kill -9 copies again, at most (MM2: offset.flush.interval.ms, 60 s).
ACKNOWLEDGED_JOURNAL_S = 5.0
CLUSTER_CHECKPOINT_INTERVAL_S = 25.0
MAX_SHARDS = 16


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError("must be a whole number, 1 or more") from None
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("must be a number of seconds, 0 or more") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a number of seconds, 0 or more")
    return value


def _checkpoint_interval(value: Any) -> float:
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < MIN_CHECKPOINT_INTERVAL_S:
        raise ValueError(f"must be at least {MIN_CHECKPOINT_INTERVAL_S:g} seconds (the shortest real-time batch "
                         "Spark runs)")
    return seconds


def _shards(value: Any) -> int:
    n = int(value)
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"must be between 1 and {MAX_SHARDS}")
    return n


def _switch(text: str) -> bool:
    value = text.strip().lower()
    if value in ("auto", "on", "1", "true", "yes"):
        return True
    if value in ("off", "0", "false", "no"):
        return False
    raise ValueError("must be auto or off")


def _setting(default: Any, description: str, *, option: str | None = None, env: str | None = None,
             parse: Callable[[Any], Any] | None = None, example: str = "", cli: dict | None = None):
    """A field of ReplicatorSettings with everything said about it in one place. ``cli``: the
    extra ``add_argument`` keywords of its option (its help text is ``description``)."""
    return field(default=default, metadata={"description": description, "option": option, "env": env,
                                            "parse": parse, "example": example, "cli": cli or {}})


@dataclass(frozen=True)
class ReplicatorSettings:
    """How a ``sparkmirror replicate`` run copies: its data path and their tuning."""

    max_records_per_batch: int | None = _setting(
        None, "cap on records per micro-batch across all partitions (Spark maxOffsetsPerTrigger), on top of the "
              "~30 s of copying a batch takes at most anyway; keeps the flow in micro-batches",
        option="--max-records-per-batch", cli={"type": int})
    source_mode: str = _setting(
        "direct", "how records are read: 'direct' — Spark plans offset ranges and each task copies its range "
                  "with confluent-kafka, record bytes never enter the JVM; 'kafka' — Spark's "
                  "spark-sql-kafka-0-10 source feeds the writer through Arrow (slower; see BENCHMARKS.md); "
                  "exactly-once flows always use 'kafka' (default: %(default)s)",
        option="--source", cli={"choices": SOURCES, "dest": "source_mode"})
    data_path: str = _setting(
        AUTO, "'auto' (default) — a backlog in micro-batches, then Spark's real-time mode once caught up "
              "(one long-lived task per partition copies each record as it arrives: sub-second "
              "latency), unless the flow is exactly-once, --source kafka or --max-records-per-batch is "
              "given, or the writer cannot be built (no javac); 'micro-batch' — batches planned every "
              "trigger, one task per core; 'real-time' — real time from the start; the log says which "
              "path each flow takes and why",
        option="--data-path", cli={"choices": DATA_PATHS})
    real_time_checkpoint_interval: float | None = _setting(
        None, "how often a real-time query checkpoints its source offsets, in seconds (at least 5; default "
              "300 in local mode, 25 on a Spark cluster). Records are copied as they arrive whatever it is; "
              "each checkpoint pauses the copy for a few tenths of a second, so a longer interval has a "
              "shorter tail. In local mode a clean stop resumes exactly where the target acknowledged and "
              "a kill -9 where it had acknowledged 5 s before; on a cluster a kill -9 copies again up to "
              "that many seconds of records and a clean stop waits up to that long for the next checkpoint",
        option="--real-time-checkpoint-interval", parse=_checkpoint_interval,
        example="--real-time-checkpoint-interval 30", cli={"type": float, "metavar": "SECONDS"})
    real_time_shards: int = _setting(
        1, "how many real-time queries a flow's partitions are dealt over (default 1, at most 16; "
           "never more than the partitions). The queries start up to 1.5 s apart and checkpoint "
           "apart, so each checkpoint pauses only its share of the partitions",
        option="--real-time-shards", parse=_shards, example="--real-time-shards 3 (the default is 1)",
        cli={"type": int, "metavar": "N"})
    # A batch is Spark's unit of commit: a kill -9, a failed task or a clean stop that cannot wait
    # replays the running batch, and records that arrive meanwhile wait for the next one. Batches
    # of ~30 s keep all three about as long as MM2's offset flush; batches of a few seconds cost
    # rate in a JVM's first minute (bench/NOTES.md, "Micro-batches of ~30 s").
    micro_batch_seconds: float = _setting(
        30.0, "the most copying a micro-batch plans for, at the best rate of the batches before it; 0: a batch "
              "takes the whole backlog", env="SPARKMIRROR_MICRO_BATCH_SECONDS", parse=_non_negative)
    micro_batch_first_records: int = _setting(
        5_000_000, "the most records of a micro-batch planned before any batch has shown the copy's rate",
        env="SPARKMIRROR_MICRO_BATCH_FIRST_RECORDS", parse=_positive_int)
    catch_up_first_records: int = _setting(
        10_000, "with --data-path auto, a flow this many records behind at start catches up in micro-batches "
                "first", env="SPARKMIRROR_CATCH_UP_FIRST_RECORDS", parse=_positive_int)
    fall_back_after: float = _setting(
        60.0, "seconds a real-time flow must stay behind, not due to catch up, before auto moves it to "
              "micro-batches", env="SPARKMIRROR_FALL_BACK_AFTER_S", parse=_non_negative)
    fall_back_eta: float = _setting(
        60.0, "a real-time flow due to catch up within this many seconds does not fall back",
        env="SPARKMIRROR_FALL_BACK_ETA_S", parse=_non_negative)
    fall_back_hold: float = _setting(
        60.0, "seconds a flow stays in micro-batches after a fall-back before it returns to real time; "
              "doubles with each further fall-back, up to 16 minutes", env="SPARKMIRROR_FALL_BACK_HOLD_S",
        parse=_non_negative)
    driver_memory: str = _setting(
        "2g", "the local driver JVM's heap (spark.driver.memory; under spark-submit its own flags decide)",
        env="SPARKMIRROR_DRIVER_MEMORY", parse=str)
    class_data_archive: bool = _setting(
        True, "map the driver JVM's classes from the class-data archive `sparkmirror dev fetch` builds (Spark "
              "starts ~3 s sooner); off: start without it", env="SPARKMIRROR_CDS", parse=_switch)
    spark_log_level: str | None = _setting(
        None, "Spark's log level (e.g. WARN, INFO); unset: ERROR, with the loggers of faults sparkmirror reports "
              "itself in one line silenced", env="SPARKMIRROR_SPARK_LOG_LEVEL", parse=str)

    def __post_init__(self) -> None:
        """Options are checked here (environment variables are checked as they are read)."""
        for f in fields(self):
            parse, value = f.metadata["parse"], getattr(self, f.name)
            if f.metadata["option"] and parse is not None and value is not None:
                try:
                    parse(value)
                except (TypeError, ValueError) as exc:
                    shown = f"{value:g}" if isinstance(value, float) else value
                    raise UsageError(f"{_name(f)} {shown}: {exc}", hint=_hint(f)) from None

    @classmethod
    def from_args(cls, args: Any, environ: Mapping[str, str]) -> ReplicatorSettings:
        """The settings of a run: its command-line options (``args``, argparse's namespace; an
        option not given keeps its default) and the environment variables of this table."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.metadata["option"]:
                value = getattr(args, f.metadata["cli"].get("dest", f.name), None)
                if value is not None:
                    values[f.name] = value
            elif f.metadata["env"] and environ.get(f.metadata["env"]) not in (None, ""):
                text = environ[f.metadata["env"]]
                try:
                    values[f.name] = f.metadata["parse"](text)
                except (TypeError, ValueError) as exc:
                    raise UsageError(f"{f.metadata['env']}={text[:100]!r}: {exc}", hint=_hint(f)) from None
        return cls(**values)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ReplicatorSettings:
        """The defaults with this table's environment variables (for commands without the options)."""
        return cls.from_args(None, environ)

    def checkpoint_interval(self, local: bool) -> float:
        """The real-time checkpoint interval of a run in local mode (``local``) or on a cluster."""
        if self.real_time_checkpoint_interval is not None:
            return float(self.real_time_checkpoint_interval)
        return LOCAL_CHECKPOINT_INTERVAL_S if local else CLUSTER_CHECKPOINT_INTERVAL_S

    def real_time_trigger(self, local: bool) -> str:
        """The interval as Spark's real-time trigger takes it."""
        return f"{self.checkpoint_interval(local):g} seconds"


def _name(f) -> str:
    return f.metadata["option"] or f.metadata["env"]


def _hint(f) -> str:
    if f.metadata["example"]:
        return f"for example {f.metadata['example']}"
    return f"for example {_name(f)}={f.default} (the default)"


def add_options(parser, *names: str) -> None:
    """Add the command-line options of these fields to ``parser``, in this order."""
    by_name = {f.name: f for f in fields(ReplicatorSettings)}
    for name in names:
        f = by_name[name]
        parser.add_argument(f.metadata["option"], default=None if f.metadata["parse"] else f.default,
                            help=f.metadata["description"], **f.metadata["cli"])


def table() -> str:
    """The Markdown table of every setting (docs/configuration.md)."""
    rows = ["| setting | set by | default | what it does |", "| --- | --- | --- | --- |"]
    for f in fields(ReplicatorSettings):
        how = f"`{f.metadata['option']}`" if f.metadata["option"] else f"`{f.metadata['env']}` (environment)"
        default = "unset" if f.default is None else f"`{f.default}`"
        text = f.metadata["description"].replace("(default: %(default)s)", "").replace("|", "\\|").strip()
        rows.append(f"| `{f.name}` | {how} | {default} | {text} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table())
