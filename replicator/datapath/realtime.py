"""The low-latency data path: Spark's real-time mode with a JVM writer.

In real-time mode (Spark 4.1+) a query runs one long-lived task per Kafka partition
that copies each record as it arrives; the "batch" is only how often the source
offsets are checkpointed (``--real-time-checkpoint-interval``). The records go through
``MirrorForeachWriter`` (``replicator/jvm/``, built by ``jvmwriter``), which produces
each one with the same partition, key, value, headers and timestamp and writes MM2's
offset-syncs from the delivery reports. A failure replays from the last checkpointed
batch: duplicates, never loss.

Which path a flow takes (``choose_path``): real-time unless the flow is exactly-once
(one transaction per source partition and micro-batch), ``--source kafka`` or
``--max-records-per-batch`` asks for micro-batches, the writer cannot be built here,
or the flow has more partitions than real-time task slots (each partition holds a
task slot for as long as the query runs).

Each path keeps its own Spark checkpoint; ``<flow>.path`` in the checkpoint root names
the one that ran last. When a flow changes path (a restart with other options, a
topic that grew past the slots), the new path starts where the old one's newest
committed batch began — never later than what was copied, so at worst duplicates —
and the handover is written down before the query starts, so a crash in between
resumes it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("sparkmirror.replicate")

from replicator.settings import MICRO_BATCH, REAL_TIME


#: How the real-time source's consumers fetch unless the source cluster's consumer settings say
#: otherwise (``A.consumer.fetch.min.bytes``, ``A.consumer.fetch.max.wait.ms``). Each real-time
#: task's consumer reads one partition, so with Kafka's defaults (a fetch returns with its first
#: byte) each partition receiving a few MB/s is fetched on every round trip, a few records at a
#: time: work for the source broker and the tasks on the cores the copy needs. Waiting for 64 KB,
#: or 20 ms at most, cut the fetches and took ~10 % off the CPU per GB and a third off the p99 at
#: 60,000 1-KB records/s on 2 cores (bench/NOTES.md); a quiet partition's record waits up to
#: 20 ms more, and an idle partition is asked 50 times a second instead of 2.
SOURCE_FETCH_DEFAULTS = {"kafka.fetch.min.bytes": "65536", "kafka.fetch.max.wait.ms": "20"}


def source_options(configured: dict[str, str]) -> dict[str, str]:
    """A real-time query's Kafka source options: the configured ones over SOURCE_FETCH_DEFAULTS."""
    return {**SOURCE_FETCH_DEFAULTS, **configured}


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


#: A flow with more partitions than this runs in micro-batches: each partition is a task
#: (a thread and a Kafka consumer) for as long as the query runs.
MAX_REALTIME_PARTITIONS = 256
#: Spare local task slots beyond today's partitions, for topics that appear or grow.
SLOT_HEADROOM = 16


@dataclass(frozen=True)
class Choice:
    path: str
    reason: str


def choose_path(requested: str, *, exactly_once: bool, source_mode: str, capped: bool, partitions: int,
                writer_unavailable: str | None) -> Choice:
    """The data path of one flow (pure; ``requested`` is --data-path)."""
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


# -- checkpoints and the handover between paths --------------------------------------------
def checkpoint_dir(flow_dir: Path, path: str) -> Path:
    """The micro-batch checkpoint keeps its historical place; the real-time one sits beside it."""
    return flow_dir if path == MICRO_BATCH else flow_dir.with_name(flow_dir.name + ".realtime")


def marker_file(flow_dir: Path) -> Path:
    return flow_dir.with_name(flow_dir.name + ".path")


def read_marker(flow_dir: Path) -> dict:
    try:
        data = json.loads(marker_file(flow_dir).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_marker(flow_dir: Path, data: dict) -> None:
    f = marker_file(flow_dir)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, f)


# -- shards: a flow's partitions over several real-time queries -----------------------------
SHARD_PREFIX = "shard-"
LAYOUT_FILE = "shards.json"


def shard_assignment(assignment: dict[str, int], shards: int) -> list[dict[str, list[int]]]:
    """A flow's partitions dealt round-robin over at most ``shards`` real-time queries (pure).

    Round-robin over the sorted (topic, partition) pairs keeps the shards even whatever the
    topics' sizes; each shard is the ``assign`` of one query."""
    pairs = sorted((t, p) for t, n in assignment.items() for p in range(n))
    k = max(1, min(int(shards), len(pairs)))
    out: list[dict[str, list[int]]] = [{} for _ in range(k)]
    for i, (topic, p) in enumerate(pairs):
        out[i % k].setdefault(topic, []).append(p)
    return out if pairs else []


def shard_dir(ckpt: Path, index: int) -> Path:
    return ckpt / f"{SHARD_PREFIX}{index}"


def shard_dirs(ckpt: Path) -> list[Path]:
    """The Spark checkpoints inside a real-time checkpoint: its shards', or the directory itself
    when it is one checkpoint (written before there were shards)."""
    if (ckpt / "offsets").is_dir():
        return [ckpt]
    try:
        found = [d for d in ckpt.iterdir() if d.is_dir() and d.name.startswith(SHARD_PREFIX)
                 and d.name[len(SHARD_PREFIX):].isdigit()]
    except OSError:
        return []
    return sorted(found, key=lambda d: int(d.name[len(SHARD_PREFIX):]))


def read_layout(ckpt: Path) -> list[dict[str, list[int]]] | None:
    """The shards a real-time checkpoint was started with, or None (none written, or unreadable)."""
    try:
        data = json.loads((ckpt / LAYOUT_FILE).read_text())
    except (OSError, ValueError):
        return None
    shards = data.get("shards") if isinstance(data, dict) else None
    if not isinstance(shards, list):
        return None
    return [{str(t): sorted(int(p) for p in ps) for t, ps in sh.items()} for sh in shards if isinstance(sh, dict)]


def write_layout(ckpt: Path, shards: list[dict[str, list[int]]]) -> None:
    ckpt.mkdir(parents=True, exist_ok=True)
    tmp = ckpt / (LAYOUT_FILE + ".tmp")
    tmp.write_text(json.dumps({"shards": shards}, sort_keys=True))
    os.replace(tmp, ckpt / LAYOUT_FILE)


def layout_matches(ckpt: Path, shards: list[dict[str, list[int]]]) -> bool:
    """Whether the checkpoint's shards hold exactly these partitions, each in the same shard: only
    then can each query resume from its own checkpoint."""
    if (ckpt / "offsets").is_dir():
        return False  # one checkpoint for every partition, from before there were shards
    have = read_layout(ckpt)
    want = [{t: sorted(ps) for t, ps in sh.items()} for sh in shards]
    return have == want


def lay_out_shards(flow_dir: Path, shards: list[dict[str, list[int]]],
                   handover: dict[str, dict[str, int]] | None) -> dict[str, dict[str, int]] | None:
    """Make a flow's real-time checkpoint hold one Spark checkpoint per shard of ``shards``.

    A checkpoint whose shards held other partitions (topics that appeared or grew, another
    --real-time-shards, one checkpoint from before there were shards) cannot be resumed query by
    query. Its shards' newest committed offsets (over ``handover`` or the start written down) are
    then written down as the start of the new shards, as for a change of path, and returned; so
    nothing is skipped. None: every shard resumes from its own checkpoint, or none has one.
    """
    ckpt = checkpoint_dir(flow_dir, REAL_TIME)
    if layout_matches(ckpt, shards):
        return None
    resume = None
    if has_batches(ckpt):
        marker = read_marker(flow_dir).get("start")
        resume = resume_base(ckpt, handover or (marker if isinstance(marker, dict) else {}))
        restart_from(flow_dir, REAL_TIME, resume)
    elif ckpt.exists():
        shutil.rmtree(ckpt)
    write_layout(ckpt, shards)
    return resume


def _merge(into: dict[str, dict[str, int]], more: dict[str, dict[str, int]]) -> None:
    for topic, per in more.items():
        into.setdefault(topic, {}).update(per)


def _first_entry(ckpt: Path) -> dict[str, dict[str, int]] | None:
    """Where a checkpoint's first batch began: everything before it was copied before it started."""
    offsets = ckpt / "offsets"
    if not offsets.is_dir():
        return None
    first = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    return _offset_entry(offsets / str(first[0])) if first else None


def _shard_resume(shard: Path) -> dict[str, dict[str, int]] | None:
    """Where one real-time shard's checkpoint has surely copied up to: its newest committed
    batch's end, else its first batch's start; None before it planned a batch."""
    return _committed_offsets(shard, real_time=True) or _first_entry(shard)


def committed_offsets(ckpt: Path, real_time: bool = False) -> dict[str, dict[str, int]] | None:
    """Source offsets before which everything was copied, by the checkpoint; or None.

    A real-time checkpoint holds one Spark checkpoint per shard: each shard's partitions are
    where its newest committed batch ended, or, before it committed one, where its first batch
    began; None when a shard has no batch at all (then the flow's written-down start says).
    """
    if real_time and not (ckpt / "offsets").is_dir():
        shards = shard_dirs(ckpt)
        if not shards:
            return None
        out: dict[str, dict[str, int]] = {}
        for d in shards:
            part = _shard_resume(d)
            if part is None:
                return None
            _merge(out, part)
        return out
    return _committed_offsets(ckpt, real_time)


def _committed_offsets(ckpt: Path, real_time: bool = False) -> dict[str, dict[str, int]] | None:
    """Source offsets before which a committed batch copied everything, or None.

    A micro-batch's offset-log entry is where the batch ended: the newest committed one.
    A real-time batch's entry is where it began (``real_time``): the newest committed batch
    N ended where entry N+1 begins, once Spark has written that entry (it does as batch N+1
    starts, after N committed); without it, entry N (N's records are then copied again).
    Either way nothing before the offsets returned is uncopied, so starting there loses nothing.
    """
    commits = ckpt / "commits"
    offsets = ckpt / "offsets"
    if not commits.is_dir() or not offsets.is_dir():
        return None
    done = sorted((int(p.name) for p in commits.iterdir() if p.name.isdigit()), reverse=True)
    for n in done:
        if real_time:
            ended = _offset_entry(offsets / str(n + 1))
            if ended is not None:
                return ended
        began = _offset_entry(offsets / str(n))
        if began is not None:
            return began
    return None


def _offset_entry(entry: Path) -> dict[str, dict[str, int]] | None:
    """The source offsets in one offset-log entry (its last JSON line naming topics), or None."""
    try:
        lines = entry.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()) and data:
            return {t: {str(p): int(o) for p, o in per.items()} for t, per in data.items()}
    return None


def resume_base(ckpt: Path, started: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The offsets a real-time query has surely copied up to, before its writers' positions are
    laid over them: its newest committed batch's, else its first batch's start (a checkpoint
    restarts there whatever startingOffsets says), else where this run started it; shard by shard."""
    out = {t: dict(per) for t, per in started.items()}
    for d in shard_dirs(ckpt):
        part = _shard_resume(d)
        if part is not None:
            _merge(out, part)
    return out


def has_batches(ckpt: Path) -> bool:
    """Whether Spark planned a batch in the checkpoint (in any of a real-time checkpoint's shards)."""
    for d in [ckpt] + [d for d in shard_dirs(ckpt) if d != ckpt]:
        offsets = d / "offsets"
        if offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir()):
            return True
    return False


def restart_from(flow_dir: Path, path: str, start: dict[str, dict[str, int]]) -> None:
    """Drop ``path``'s checkpoint and have it start at ``start`` (written down first)."""
    _write_marker(flow_dir, {"path": path, "start": start})
    own = checkpoint_dir(flow_dir, path)
    if own.exists():
        shutil.rmtree(own)


def resume_point(flow_dir: Path) -> dict[str, dict[str, int]]:
    """Where the flow's next start resumes, as far as its checkpoints say: the newest committed
    batch of the path that ran last, else the start written down when it stopped or switched
    paths (``restart_from``); {} when neither says (a new flow)."""
    marker = read_marker(flow_dir)
    last = marker.get("path") or MICRO_BATCH
    committed = committed_offsets(checkpoint_dir(flow_dir, last), real_time=last == REAL_TIME)
    if committed is not None:
        return committed
    start = marker.get("start")
    return start if isinstance(start, dict) else {}


def prepare_checkpoint(flow_dir: Path, path: str, flow_name: str) -> dict[str, dict[str, int]] | None:
    """Make ``path``'s checkpoint the one to resume; returns explicit start offsets or None.

    None: resume from the path's own checkpoint, or, without one, start as a new flow
    does (offset-syncs of an earlier run, else the earliest offsets).
    """
    marker = read_marker(flow_dir)
    last = marker.get("path")
    if last is None and has_batches(checkpoint_dir(flow_dir, MICRO_BATCH)):
        last = MICRO_BATCH  # a checkpoint written before there were two paths
    if last == path:
        own = checkpoint_dir(flow_dir, path)
        if has_batches(own):
            return None
        start = marker.get("start")
        return start if isinstance(start, dict) and start else None
    start = None
    if last in (REAL_TIME, MICRO_BATCH):
        start = committed_offsets(checkpoint_dir(flow_dir, last), real_time=last == REAL_TIME)
        if start is None:
            start = marker.get("start") if isinstance(marker.get("start"), dict) else None
    own = checkpoint_dir(flow_dir, path)
    if own.exists():
        # An older run of this path: its offsets are behind what the other path copied since.
        shutil.rmtree(own)
    _write_marker(flow_dir, {"path": path, "start": start or {}})
    if last is not None:
        log.info("flow %s: switching from the %s path to the %s path%s", flow_name, last, path,
                 " at the source offsets of its newest committed batch" if start else "")
    return start or None


def parse_starting_offsets(text: str | None) -> dict[str, dict[str, int]]:
    """A ``startingOffsets`` JSON (as ``starting_offsets_json`` writes it) as offsets; {} for
    anything else ("earliest", "latest", None): every partition then starts where the query did."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {t: {str(p): int(o) for p, o in per.items()} for t, per in data.items() if isinstance(per, dict)}


def resume_after_stop(base: dict[str, dict[str, int]], acknowledged: dict[tuple[str, int], int]
                      ) -> dict[str, dict[str, int]]:
    """Where a stopped real-time query resumes: each partition at the offset before which the
    target acknowledged every record (``acknowledged``, from the writers' delivery reports), and
    a partition without any at ``base``: the newest committed batch's offsets, or where the query
    started when none committed (-2/-1 there: earliest/latest, as Spark's startingOffsets).
    Never before ``base``: what was committed stays copied."""
    out = {t: dict(per) for t, per in base.items()}
    for (topic, p), nxt in acknowledged.items():
        per = out.setdefault(topic, {})
        was = per.get(str(p))
        if was is None or was < 0 or nxt > was:
            per[str(p)] = int(nxt)
    return out


def adjust_resume(resume: dict[str, dict[str, int]], marks: dict[tuple[str, int], tuple[int, int]]):
    """Where a real-time query can really resume, given each partition's (log start, log end).

    Spark's Kafka reader in real-time mode fails on a position outside the log (it does
    not skip ahead as the micro-batch reader does), so the driver moves such partitions
    itself: below the log start, the records in between were deleted before they were
    copied — data loss, reported; above the log end, the partition was re-created or
    truncated — copied again from its start, as MM2 does. Returns (offsets, losses as
    (topic, partition, first lost, last lost), resets as (topic, partition, old offset, new)).
    """
    adjusted: dict[str, dict[str, int]] = {}
    losses, resets = [], []
    for topic, per in resume.items():
        for p, off in per.items():
            new = off
            mark = marks.get((topic, int(p)))
            if mark is not None and off >= 0:
                low, high = mark
                if off < low:
                    losses.append((topic, int(p), off, low - 1))
                    new = low
                elif off > high:
                    resets.append((topic, int(p), off, low))
                    new = low
            adjusted.setdefault(topic, {})[p] = new
    return adjusted, losses, resets


def starting_offsets_json(start: dict[str, dict[str, int]], assignment: dict[str, int]) -> str:
    """Spark's ``startingOffsets`` JSON for every assigned partition (-2: earliest)."""
    out = {}
    for topic, n in sorted(assignment.items()):
        per = start.get(topic, {})
        out[topic] = {str(p): int(per.get(str(p), -2)) for p in range(n)}
    return json.dumps(out)


def shard_starting_offsets(starting: str, shard: dict[str, list[int]]) -> str:
    """A flow's ``startingOffsets`` cut down to one shard's partitions (Spark wants exactly the
    assigned ones); a partition it does not name starts at its earliest offset (-2), as MM2 does."""
    try:
        data = json.loads(starting)
    except (TypeError, ValueError):
        return starting
    if not isinstance(data, dict):
        return starting
    out = {}
    for topic, ps in sorted(shard.items()):
        per = data.get(topic) if isinstance(data.get(topic), dict) else {}
        out[topic] = {str(p): int(per.get(str(p), -2)) for p in sorted(ps)}
    return json.dumps(out)


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
    # 16 KB, linger.ms 0) 1 KB records at 60,000/s went out as ~4,000 tiny batches a second,
    # and the CPU that cost the writer and the brokers showed as seconds of tail latency.
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
