"""The direct data path: a PySpark streaming source whose tasks mirror offset ranges.

Spark's Kafka source hands every record to Python through the JVM: the Kafka
client decodes it, Spark copies it into an UnsafeRow, copies it again into an
Arrow vector and streams that to the Python worker — most of the replicator's CPU
on a catch-up (bench/NOTES.md has the profile).
This source keeps Spark for what it is good at — planning micro-batches,
checkpointing offsets in its write-ahead log, scheduling tasks, retrying
failed tasks, scaling out — and lets the record bytes go from the source cluster
to the target cluster inside one Python process:

* ``latestOffset`` (driver side, Spark's Python streaming runner) asks the source
  cluster for each assigned partition's last stable offset (``read_committed``),
  and takes at most about ``micro_batch_seconds`` (replicator.settings) of copying at
  the rate the batches before achieved (``BatchBudget``), and at most
  ``--max-records-per-batch`` records;
* ``partitions(start, end)`` groups the ranges with records into at most one task
  per core (``group_ranges``: by default ``spark.default.parallelism`` tasks of
  about equal record counts);
* ``read`` (executor, ``directcopy.mirror_ranges``) consumes exactly its ranges
  ``[start, end)`` with confluent-kafka, produces every record with the writer's
  placement tracking (``writer._Placements``), and yields the runs — where each record
  landed — as Arrow rows. The driver turns those into MM2 offset-syncs before Spark
  commits the batch, as on every micro-batch path.

A crash before the commit replays the same offset ranges from the write-ahead
log: duplicates, never loss. A range whose start was already deleted by retention
is reported (log line with the count), never skipped silently. A partition whose
end offset fell below the offset already copied (the topic was deleted and
re-created, or the log was truncated) is copied again from its earliest offset,
as MM2's consumer does (auto.offset.reset = earliest), and reported with both
offsets.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from replicator.datapath.directcopy import DIRECT_RUN_SCHEMA_DDL, EARLIEST, mirror_ranges
from replicator.datapath.directcopy import READER_CONSUMER_DEFAULTS  # noqa: F401 (bench/raw_mirror.py reads it here)
from replicator.datapath.writer import ERROR_MARKER, WriterSpec
from replicator.settings import ReplicatorSettings

#: A batch of fewer records says little about the copy rate (Spark's own per-batch work is
#: most of its time), and no batch is capped below this.
RATE_MIN_RECORDS = 50_000
#: The copy rate is the best of the last few measured batches: one slowed by a busy moment,
#: or by the start of the Python workers, does not shrink the ones after it.
RATE_BATCHES = 5


@dataclass(frozen=True)
class SourceSpec:
    """Everything the source needs on the driver and in the executors (picklable)."""

    writer: WriterSpec
    consumer_config: tuple[tuple[str, str], ...]  # librdkafka settings for the source cluster
    assignment: tuple[tuple[str, int], ...]  # source topic -> partition count
    starting: tuple[tuple[str, int, int], ...]  # (topic, partition, offset) for a fresh checkpoint
    max_records_per_batch: int | None = None
    tasks: int = 2  # Spark tasks per batch: the cores Spark has (spark.default.parallelism)
    admin_config: tuple[tuple[str, str], ...] = ()  # librdkafka settings of the source's admin client
    # A file on the driver whose existence means "the query is stopping": plan no new batch,
    # so the running one is the last and the query can be stopped between batches.
    stop_flag: str = ""
    # The batch budget (BatchBudget), from the run's settings.
    batch_seconds: float = ReplicatorSettings.micro_batch_seconds
    first_batch_records: int = ReplicatorSettings.micro_batch_first_records


# -- Spark's side -------------------------------------------------------------------------

def make_source_class(spec: SourceSpec, name: str):
    """A DataSource subclass bound to one flow's spec (registered under ``name``).

    The spec travels inside the pickled class, not in reader options, so settings
    such as SASL passwords never appear in Spark's plans, logs or UI.
    """
    from pyspark.sql.datasource import DataSource

    class MirrorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> str:
            return DIRECT_RUN_SCHEMA_DDL

        def streamReader(self, schema):
            return MirrorStreamReader(spec)

    MirrorSource.__qualname__ = MirrorSource.__name__ = f"MirrorSource_{name}"
    return MirrorSource


try:  # pyspark is an executor/driver dependency; the model must import without it
    from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover
    DataSourceStreamReader = object
    InputPartition = object


class RangeGroup(InputPartition):
    """One Spark task: offset ranges ``(topic, partition, start, end)`` of distinct partitions.

    Order is kept per partition because a partition is never split across tasks; one
    task carries several partitions so that a batch costs one Python task per core,
    not one per partition (each task costs a Python round trip, which a trickle batch would
    pay many times over; "Exact-size consumes, one task per core" in bench/NOTES.md).
    """

    def __init__(self, ranges: list[tuple[str, int, int, int]],
                 resets: dict[tuple[str, int], int] | None = None) -> None:
        self.ranges = ranges
        self.resets = resets or {}  # (topic, partition) -> the offset reached before its end fell below it


def group_ranges(ranges: list[tuple[str, int, int, int]], tasks: int) -> list[list[tuple[str, int, int, int]]]:
    """Split ranges into at most ``tasks`` groups of about equal record counts (largest first)."""
    def size(r):
        return r[3] - r[2] if r[2] >= 0 else r[3]

    groups: list[list] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    load = [0] * len(groups)
    for r in sorted(ranges, key=lambda r: (-size(r), r[0], r[1])):
        i = load.index(min(load))
        groups[i].append(r)
        load[i] += size(r)
    return [sorted(g) for g in groups if g]


class BatchBudget:
    """How many records the next micro-batch may take: about ``seconds`` of copying at the rate
    the batches before it achieved, ``first`` before any has said.

    A batch's rate is its planned records over the time from its plan to the next one (Spark
    plans the next batch as soon as one commits), so Spark's own per-batch work is in it and
    the estimate errs on the short side. Batches under ``min_records`` are not measured: a
    trickle's batches are mostly Spark's fixed cost and would say the copy is slow.
    """

    def __init__(self, seconds: float, first: int, min_records: int = RATE_MIN_RECORDS,
                 keep: int = RATE_BATCHES) -> None:
        self.seconds, self.first, self.min_records = seconds, first, min_records
        self.rates: list[float] = []  # records/s of the last ``keep`` measured batches
        self.keep = keep
        self._last: tuple[int, float] | None = None  # (records, monotonic time) of the newest plan

    def cap(self, now: float) -> int | None:
        """The next batch's largest size in records (None: no limit)."""
        if self.seconds <= 0:
            return None
        if self._last is not None:
            records, at = self._last
            self._last = None
            if records >= self.min_records and now > at:
                self.rates = (self.rates + [records / (now - at)])[-self.keep:]
        if not self.rates:
            return self.first
        return max(self.min_records, int(max(self.rates) * self.seconds))

    def planned(self, records: int, now: float) -> None:
        self._last = (records, now)


class MirrorStreamReader(DataSourceStreamReader):
    def __init__(self, spec: SourceSpec, budget: BatchBudget | None = None) -> None:
        from replicator.datapath import runner_exit

        runner_exit.install()  # constructed in pyspark's runner process: its stop stays quiet
        self.spec = spec
        self.budget = budget or BatchBudget(spec.batch_seconds, spec.first_batch_records)
        self._admin = None
        self._planned: dict[str, dict[str, int]] | None = None
        self._latest: dict[str, dict[str, int]] | None = None  # the end of the newest planned batch

    # offsets are {topic: {partition (str): offset}}; JSON keys are strings
    def _source_admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"log_level": "2", **dict(self.spec.admin_config)})
        return self._admin

    def _list(self, spec_factory, tps=None) -> dict[str, dict[str, int]]:
        from confluent_kafka import IsolationLevel, TopicPartition

        if tps is None:
            tps = [(t, p) for t, n in self.spec.assignment for p in range(n)]
        if not tps:
            return {}
        futures = self._source_admin().list_offsets({TopicPartition(t, p): spec_factory() for t, p in tps},
                                                    isolation_level=IsolationLevel.READ_COMMITTED,
                                                    request_timeout=30)
        out: dict[str, dict[str, int]] = {}
        for tp, fut in futures.items():
            out.setdefault(tp.topic, {})[str(tp.partition)] = fut.result().offset
        return out

    def initialOffset(self) -> dict:
        start: dict[str, dict[str, int]] = {t: {str(p): EARLIEST for p in range(n)} for t, n in self.spec.assignment}
        for t, p, off in self.spec.starting:
            if t in start:
                start[t][str(p)] = off
        return start

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        """The end of the next batch. Spark passes the batch's start (this signature tells it the
        source limits its batches); ``limit`` is Spark's read limit, all available here, as this
        source's own cap is not an option Spark knows of."""
        from confluent_kafka.admin import OffsetSpec

        if self._latest is not None and self.spec.stop_flag and os.path.exists(self.spec.stop_flag):
            # Stopping: nothing new, so Spark starts no further batch (the same end as the last
            # planned one is "no new data"); what is not planned stays for the next start.
            return self._latest
        try:
            latest = self._list(OffsetSpec.latest)
            now = time.monotonic()
            caps = [c for c in (self.budget.cap(now), self.spec.max_records_per_batch) if c]
            base = start if start is not None else self._planned
            records = None
            if base is not None and caps:
                base = self._numbered(base, latest, OffsetSpec.earliest)
                latest = _capped(base, latest, min(caps))
                records = _records(base, latest)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise RuntimeError(f"{ERROR_MARKER}: cannot read the offsets of source cluster "
                               f"{self.spec.writer.source_alias}: {first[:300]}") from None
        if records is not None:
            self.budget.planned(records, now)
        self._latest = latest
        return latest

    def _numbered(self, start: dict, latest: dict, earliest_spec) -> dict:
        """``start`` with a number for every partition of ``latest``: a partition the checkpoint
        has not seen yet (EARLIEST, or absent) starts at its log start offset."""
        unknown = [(t, int(p)) for t, per in latest.items() for p in per
                   if start.get(t, {}).get(p, EARLIEST) == EARLIEST]
        low = self._list(earliest_spec, unknown) if unknown else {}
        out = {t: dict(per) for t, per in start.items()}
        for t, p in unknown:
            out.setdefault(t, {})[str(p)] = low[t][str(p)]
        return out

    def partitions(self, start: dict, end: dict):
        self._planned = end
        assigned = {t for t, _n in self.spec.assignment}
        ranges = []
        resets: dict[tuple[str, int], int] = {}
        for topic, per in end.items():
            if topic not in assigned:
                # A replayed batch of a topic that has since been deleted or filtered out: it
                # cannot be read any more, and the topic refresh has said so in the log.
                continue
            for p, stop in per.items():
                first = start.get(topic, {}).get(p, EARLIEST)
                if first != EARLIEST and stop < first:
                    # Re-created or truncated: what it holds now starts at its log start.
                    resets[(topic, int(p))] = first
                    first = EARLIEST
                if first == EARLIEST or stop > first:
                    ranges.append((topic, int(p), first, stop))
        return [RangeGroup(g, {(t, p): resets[(t, p)] for t, p, _s, _e in g if (t, p) in resets})
                for g in group_ranges(ranges, self.spec.tasks)]

    def commit(self, end: dict) -> None:
        pass

    def read(self, partition: RangeGroup):
        yield from mirror_ranges(self.spec, partition.ranges, getattr(partition, "resets", None))


def _records(start: dict, end: dict) -> int:
    """Records from ``start`` to ``end`` over the partitions of ``end`` (none where end <= start)."""
    return sum(max(0, off - start.get(t, {}).get(p, off)) for t, per in end.items() for p, off in per.items())


def _capped(start: dict, latest: dict, cap: int) -> dict:
    """Advance every partition by a share of ``cap`` records (at least one each)."""
    behind = {(t, p): off - start.get(t, {}).get(p, off) for t, per in latest.items() for p, off in per.items()}
    total = sum(max(b, 0) for b in behind.values())
    if total <= cap:
        return latest
    out: dict[str, dict[str, int]] = {}
    for (t, p), b in behind.items():
        base = start.get(t, {}).get(p)
        if base is None or base == EARLIEST or b <= 0:
            out.setdefault(t, {})[p] = latest[t][p]
            continue
        share = max(1, b * cap // total)
        out.setdefault(t, {})[p] = base + min(b, share)
    return out
