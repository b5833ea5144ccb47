"""The low-latency data path: Spark's real-time mode with a JVM writer.

In real-time mode (Spark 4.1+) a query runs one long-lived task per Kafka partition
that copies each record as it arrives; the "batch" is only how often the source
offsets are checkpointed (``--real-time-checkpoint-interval``). The records go through
``MirrorForeachWriter`` (``replicator/jvm/``, built by ``jvmwriter``), which produces
each one with the same partition, key, value, headers and timestamp and writes MM2's
offset-syncs from the delivery reports. A failure replays from the last checkpointed
batch: duplicates, never loss.

Which path a flow takes: ``pathpolicy``; where each path's checkpoint lives and how a
flow hands over between them: ``checkpoint_layout``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from replicator.datapath.fetchwait import LONG_WAIT_MS

log = logging.getLogger("sparkmirror.replicate")


#: How the real-time source's consumers fetch unless the source cluster's consumer settings say
#: otherwise (``A.consumer.fetch.min.bytes``, ``A.consumer.fetch.max.wait.ms``). Each real-time
#: task's consumer reads one partition, so with Kafka's defaults (a fetch returns with its first
#: byte) a busy partition is fetched on every round trip, a few records at a time: work for the
#: source broker and for the cores the copy needs. Waiting for 64 KB, or 20 ms at most, takes
#: fewer, fuller fetches for less CPU and a shorter tail ("Real-time source fetches" in
#: bench/NOTES.md); a quiet partition's record waits up to 20 ms more, or 5 ms while the flow's
#: rate is low (``fetchwait``).
SOURCE_FETCH_DEFAULTS = {"kafka.fetch.min.bytes": "65536", "kafka.fetch.max.wait.ms": str(LONG_WAIT_MS)}


def source_options(configured: dict[str, str], wait_ms: int | None = None) -> dict[str, str]:
    """A real-time query's Kafka source options: the configured ones over SOURCE_FETCH_DEFAULTS,
    with ``wait_ms`` (the rate-chosen fetch wait, ``fetchwait``) unless a wait is configured."""
    options = {**SOURCE_FETCH_DEFAULTS, **configured}
    if wait_ms is not None and "kafka.fetch.max.wait.ms" not in configured:
        options["kafka.fetch.max.wait.ms"] = str(wait_ms)
    return options


# A flow's partitions can be dealt over several real-time queries (``--real-time-shards``): each
# query's checkpoint boundary pauses its tasks for a moment, and with several, started apart, a
# boundary pauses only its share of the partitions (bench/NOTES.md: one is the default).
#: At most this far apart the shards' queries start: a boundary's pause and the catch-up after it
#: take a few tenths of a second, so boundaries this far apart do not overlap, and the last shard
#: of a long interval does not wait most of it before it copies anything.
MAX_STAGGER_S = 1.5


def stagger_seconds(shards: int, interval: float) -> float:
    """How long after one another a flow's real-time queries start (``interval``: their
    checkpoint interval in seconds)."""
    return min(interval / max(1, shards), MAX_STAGGER_S) if shards > 1 else 0.0


def stop_wait_seconds(grace: float, interval: float) -> float:
    """How long a clean stop waits for a real-time batch boundary: at least ``grace``, and long
    enough for one boundary to come (a stop at a boundary copies nothing twice on restart)."""
    return max(grace, interval + 2.0)


# -- the JVM writer ----------------------------------------------------------------------------
def writer_available() -> str | None:
    """None when real-time mode and its writer can be had here, else why not."""
    try:
        from pyspark.sql.streaming.readwriter import DataStreamWriter
        import inspect

        if "realTime" not in inspect.signature(DataStreamWriter.trigger).parameters:
            return "this pyspark has no real-time trigger (Spark 4.2 or newer is needed)"
    except Exception as exc:  # pragma: no cover - pyspark always importable here
        return f"pyspark: {exc}"
    from replicator.datapath import jvmwriter

    try:
        jvmwriter.ensure_jar()
    except jvmwriter.Unavailable as exc:
        return str(exc)
    return None


def java_producer_config(user: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The target producer's Java settings: order-keeping defaults, the user's, then what order needs."""
    # The micro-batch writer's batching, in the Java producer's terms: without it (batch.size
    # 16 KB, linger.ms 0) a busy partition goes out as many tiny batches, and the CPU that costs
    # the writer and the brokers shows as tail latency ("Writer batching" in bench/NOTES.md).
    conf = {"enable.idempotence": "true", "acks": "all", "linger.ms": "5", "batch.size": "1048576",
            "buffer.memory": "134217728", "max.request.size": "4194304", "compression.type": "none"}
    conf.update({k: str(v) for k, v in user.items()})
    for k in ("key.serializer", "value.serializer"):
        conf.pop(k, None)
    notes = []
    if conf["enable.idempotence"].strip().lower() == "false":
        was = conf.get("max.in.flight.requests.per.connection")
        if was is None or was.strip() != "1":
            conf["max.in.flight.requests.per.connection"] = "1"
            notes.append("producer setting enable.idempotence = false: the writer keeps one request in flight "
                         "(max.in.flight.requests.per.connection = 1" + (f", not {was}" if was else "")
                         + ", as Kafka Connect does) so that a retried request cannot land after a later one "
                         "and reorder a partition on the target")
    return conf, notes


def target_message_limits(admin_client, topics: list[str], timeout: float = 30.0) -> dict[str, int]:
    """Each target topic's ``max.message.bytes`` (its own or the broker's default); topics that
    cannot be described are left out (their records are then only checked by the broker)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not topics:
        return {}
    futures = admin_client.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                            request_timeout=timeout)
    out = {}
    for res, fut in futures.items():
        try:
            entry = fut.result(timeout + 5).get("max.message.bytes")
        except Exception as exc:
            log.debug("describing max.message.bytes of %s: %s", res.name, exc)
            continue
        if entry is not None and entry.value is not None and str(entry.value).isdigit():
            out[res.name] = int(entry.value)
    return out


def cap_batch_size(conf: dict[str, str], limits: dict[str, int]) -> str | None:
    """Lower the producer's batch.size to the smallest target topic's max.message.bytes.

    The Java producer splits a batch the broker rejects as too large into batches of
    ``batch.size`` bytes (kafka-clients before 4.2, KAFKA-8350): when a topic's limit is
    below ``batch.size`` a split batch is rejected again, forever, and the writer hangs.
    Batches no larger than the smallest limit never hit that. Returns the note to log.
    """
    if not limits:
        return None
    topic, smallest = min(limits.items(), key=lambda kv: kv[1])
    current = int(conf.get("batch.size", "16384"))
    if smallest >= current:
        return None
    conf["batch.size"] = str(smallest)
    return (f"producer batch.size lowered from {current} to {smallest}, the max.message.bytes of target topic "
            f"{topic}: larger batches to it would be rejected and split again and again (KAFKA-8350)")


def _jmap(jvm, d: dict[str, str]):
    m = jvm.java.util.HashMap()
    for k, v in d.items():
        m.put(str(k), str(v))
    return m


def start_query(spark, df, *, name: str, ckpt: Path, flow: str, target: str, producer_config: dict[str, str],
                syncs_producer_config: dict[str, str] | None, syncs_topic: str, topic_map: dict[str, str],
                offset_lag_max: int, trigger: str, max_message_bytes: dict[str, int] | None = None):
    jvm = spark.sparkContext._jvm
    writer = jvm.sparkmirror.MirrorForeachWriter(
        flow, target, _jmap(jvm, producer_config),
        _jmap(jvm, syncs_producer_config) if syncs_producer_config is not None else None,
        syncs_topic, _jmap(jvm, topic_map), int(offset_lag_max),
        _jmap(jvm, {t: str(v) for t, v in (max_message_bytes or {}).items()}), df.schema.json())
    # The writer takes the source's rows as they are (it finds its columns by name in the
    # schema it is given): with no projection in between, each row's key and value are not
    # copied once more, and each batch has no code to generate and compile at its start, where
    # no task reads. As a PythonForeachWriter it is handed Spark's UnsafeRows unconverted.
    w = (df.writeStream.queryName(name).outputMode("update")
         .option("checkpointLocation", str(ckpt)).trigger(realTime=trigger))
    w._jwrite = w._jwrite.foreach(writer)
    return w.start()


def _end_offsets(progress) -> dict:
    try:
        end = progress["sources"][0].get("endOffset")
    except (KeyError, IndexError, TypeError, AttributeError):
        return {}
    if isinstance(end, str):
        try:
            end = json.loads(end)
        except ValueError:
            return {}
    return end if isinstance(end, dict) else {}


class ShardedQuery:
    """A flow's real-time queries, one per shard, seen by the flow as one streaming query.

    It is active while every shard is; its exception is the first shard's that failed (the flow
    then stops the others and restarts them all); its progress is the slowest shard's batch
    (so a batch that hangs in any shard is reported) with every shard's end offsets and input rows.
    """

    def __init__(self, queries: list) -> None:
        self.queries = list(queries)

    @property
    def isActive(self) -> bool:
        return all(q.isActive for q in self.queries)

    def exception(self):
        ended = None
        for q in self.queries:
            if q.isActive:
                continue
            exc = q.exception()
            if exc is not None:
                return exc
            ended = ended or q
        if ended is not None and any(q.isActive for q in self.queries):
            # one shard ended without an error while the others run: its partitions are not
            # being copied, so the flow must restart them all
            return RuntimeError(f"real-time query {getattr(ended, 'name', '?')} ended by itself")
        return None

    def stop(self) -> None:
        for q in self.queries:
            try:
                q.stop()
            except Exception as exc:  # a failed or stopped shard; the others still stop
                log.debug("stopping %s: %s", getattr(q, "name", "a real-time query"), exc)

    @property
    def run_ids(self) -> list[str]:
        return [str(q.runId) for q in self.queries]

    @property
    def lastProgress(self):
        progs = [q.lastProgress for q in self.queries]
        if not progs or any(p is None for p in progs):
            return None
        slowest = min(progs, key=lambda p: p.get("batchId") if p.get("batchId") is not None else -1)
        merged = dict(slowest)
        end: dict[str, dict[str, int]] = {}
        for p in progs:
            for topic, per in _end_offsets(p).items():
                if isinstance(per, dict):
                    end.setdefault(topic, {}).update(per)
        merged["numInputRows"] = sum(int(p.get("numInputRows") or 0) for p in progs)
        source = dict(slowest["sources"][0]) if slowest.get("sources") else {}
        source["endOffset"] = end
        merged["sources"] = [source]
        return merged

    @property
    def status(self):
        return self.queries[0].status


class Counters:
    """What the executors' writers report for one flow, read through the driver's JVM (local mode)."""

    def __init__(self, spark, flow: str) -> None:
        self.flow = flow
        try:
            sc = spark.sparkContext
            # Only in local mode do the writers run in this JVM; elsewhere its counters stay at 0.
            self._cls = sc._jvm.sparkmirror.MirrorForeachWriter if sc.master.startswith("local") else None
        except Exception:
            self._cls = None

    def read(self) -> tuple[int, int, int, int] | None:
        """(records, bytes, offset-syncs: totals; max latency ms since the last read)."""
        if self._cls is None:
            return None
        try:
            c = list(self._cls.counters(self.flow))
        except Exception:
            return None
        return int(c[0]), int(c[1]), int(c[2]), int(c[3])

    def positions(self) -> dict[tuple[str, int], int]:
        if self._cls is None:
            return {}
        try:
            text = self._cls.positions(self.flow)
        except Exception:
            return {}
        out = {}
        for line in str(text).splitlines():
            topic, p, nxt = line.split("\t")
            out[(topic, int(p))] = int(nxt)
        return out

    @property
    def available(self) -> bool:
        """Whether the writers share this JVM (local mode), so that their positions can be read."""
        return self._cls is not None

    def flush_all(self, timeout_s: float) -> str | None:
        """Wait, at most ``timeout_s``, until every record the writers in this JVM were given is
        acknowledged or failed; returns why it could not be done (the time ran out, an offset-sync
        that failed, the JVM call), or None."""
        if self._cls is None:
            return "the writers do not run in the driver's JVM"
        try:
            failure = self._cls.flushAll(int(timeout_s * 1000))
        except Exception as exc:
            return str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return None if failure is None else str(failure)

    def reset(self) -> None:
        if self._cls is not None:
            try:
                self._cls.reset(self.flow)
            except Exception:
                pass
