"""The lag monitor's own work at 100,000 and 200,000 partitions, its collectors fed by a generator.

    python -m bench.monitor_generated --partitions 100000 --granularity topic,partition --repeats 3
    python -m bench.monitor_generated --partitions 200000 --granularity topic --repeats 3

No process here may open more than 20,000 files, so brokers cannot hold such counts on this
machine (bench/monitor_scale.py measures the real thing at 10,000). Here the monitor runs as
its own process, ``MonitorService`` as ``sparkmirror monitor`` makes it, with its default
options apart from ``--granularity``: the same state, collectors' loops, evaluator,
exporters and aiohttp server; only what would talk to Kafka is generated:

- ``GeneratedCluster`` (a ``ClusterClient`` whose blocking requests answer from the
  ``Workload``; its ``call``, the thread pools and the reachability they record stay real):
  topic metadata, ListOffsets (earliest/latest), DescribeConfigs, ListGroups, OffsetFetch.
  The real EndOffsetCollector (positions every ``--positions-interval``, 0.2 s), the
  RetentionCollector, GroupOffsetCollector and HealthCollector run on it unchanged;
- ``GeneratedLagProbe`` / ``GeneratedTimestamps``: the real LagProbe and RecordTimestamps
  (which partitions and offsets to read, what to keep), the record timestamps generated;
- the heartbeat, offset-sync and checkpoint collectors are the real ones, their tail threads
  replaced by a task on the event loop (where a tail hands its batches over) that passes them
  records encoded as MM2 writes them: the offset-syncs topic read from its start (one sync per
  idle partition, then the busy ones'), one heartbeat a second, checkpoints of ``--groups``
  groups every ``emit.checkpoints.interval.seconds``.

The workload is bench/monitor_scale.py's: ``--partitions`` idle partitions (topics of 100, 3
records each, copied, one offset-sync each, so caught up) plus one busy topic of 100
partitions at ``--rate`` records/s in all, each record copied 1 s after its timestamp, an
offset-sync per partition for its first copied record and every 100 after (MM2's
``offset.lag.max``), so the hundred busy positions move at every read while the rest stay
idle. The groups consume the busy topic, a few seconds behind.

Measured for ``--seconds`` after the first complete status, the freeze of the built state
and the first ``/metrics``, by bench.monitor_scale.measure (the same definitions: see its
module docstring), plus, from every evaluation the monitor made in the window (not only
those sampled by /api/status):

- evaluation_cpu_ms / evaluation_cpu_max_ms: the CPU time of one whole evaluation (the sum of
  its steps' thread CPU time), p50 / worst; evaluation_ms / evaluation_wall_max_ms: the same
  in wall time (``evaluation_seconds``, the steps' own time, not the pauses between them);
- evaluation_step_cpu_ms / evaluation_step_cpu_worst_ms: the CPU time of each evaluation's
  longest step, p50 / worst over every evaluation; evaluations: how many;
- generator_cpu_percent: the generator's own CPU (answers, records), in % of one core; it is
  part of cpu_percent (the monitor process), which counts no librdkafka work: real
  ListOffsets answers cost the client threads more than a generated dict does.

Rows go to bench/results.json as ``{"system": "monitor-generated", ...}``, one per run
(``run`` of ``runs``, the same ``batch`` for one command), and BENCHMARKS.md is regenerated
(the median and spread of the newest batch, beside the real-broker table).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path

from confluent_kafka import TIMESTAMP_CREATE_TIME

from monitor.collectors.checkpoints import CheckpointCollector
from monitor.collectors.cluster import ClusterClient, FirstRecord
from monitor.collectors.heartbeats import HeartbeatCollector
from monitor.collectors.offset_syncs import OffsetSyncCollector
from monitor.collectors.tail import TailedRecord
from monitor.collectors.timelag import LagProbe
from monitor.collectors.timestamps import RecordTimestamps
from monitor.facts import Probe
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
PER_TOPIC = 100
SOURCE, TARGET = "primary", "dr"
SYNCS_TOPIC = f"mm2-offset-syncs.{TARGET}.internal"
BUSY = "busy"
#: MM2's offset.lag.max: a sync for the first copied record of a partition, then every this many
SYNC_EVERY = 100
#: records of an idle partition (as bench.monitor_scale --records), written an hour before the start
IDLE_RECORDS = 3
RETENTION = {"retention.ms": "604800000", "retention.bytes": "-1", "cleanup.policy": "delete"}

Key = tuple[str, int]


class Workload:
    """Every partition's offsets and record timestamps at any time, from the start time alone.

    Record ``o`` of busy partition ``p`` is written at ``start + (o + p / PER_TOPIC) / rate``
    (``rate`` per partition: the partitions do not move in step) and copied ``delay`` s later;
    group ``g`` has committed what was written ``lag + g`` s ago. Idle partitions hold
    ``IDLE_RECORDS`` records on both sides."""

    def __init__(self, partitions: int, rate: float = 1000.0, delay: float = 1.0, groups: int = 3,
                 group_lag: float = 2.0, start: float | None = None) -> None:
        self.idle_topics = [f"t{i:04d}" for i in range(partitions // PER_TOPIC)]
        self.rate = rate / PER_TOPIC
        self.delay, self.group_lag = delay, group_lag
        self.groups = [f"group-{g}" for g in range(groups)]
        self.start = time.time() if start is None else start
        self._base: dict[tuple[str, str], dict[Key, int]] = {}
        self._keys: dict[str, list[Key]] = {}

    def remote(self, topic: str) -> str:
        return f"{SOURCE}.{topic}"

    @property
    def total(self) -> int:
        return (len(self.idle_topics) + 1) * PER_TOPIC

    def topics(self, alias: str) -> dict[str, int]:
        """Topic metadata: name -> partitions."""
        names = [*self.idle_topics, BUSY]
        if alias == SOURCE:
            return {**{t: PER_TOPIC for t in names}, SYNCS_TOPIC: 1}
        return {**{self.remote(t): PER_TOPIC for t in names}, f"{SOURCE}.heartbeats": 1,
                f"{SOURCE}.checkpoints.internal": 1}

    def written(self, partition: int, at: float) -> int:
        """Records in busy partition ``partition`` at ``at`` (its end offset)."""
        return max(0, math.floor((at - self.start) * self.rate - partition / PER_TOPIC) + 1)

    def copied(self, partition: int, at: float) -> int:
        return self.written(partition, at - self.delay)

    def timestamp_ms(self, topic: str, partition: int, offset: int) -> int | None:
        """The timestamp of a source record; None past the partition's end (now)."""
        if topic != BUSY:
            return int((self.start - 3600) * 1000) + offset if offset < IDLE_RECORDS else None
        if offset >= self.written(partition, time.time()):
            return None
        return int((self.start + (offset + partition / PER_TOPIC) / self.rate) * 1000)

    def newest_sync(self, partition: int, at: float) -> int | None:
        """Upstream (= downstream) offset of the newest offset-sync of a busy partition."""
        copied = self.copied(partition, at)
        return None if copied == 0 else (copied - 1) // SYNC_EVERY * SYNC_EVERY

    def committed(self, group: int, partition: int, at: float) -> int:
        return self.written(partition, at - self.group_lag - group)

    def base(self, alias: str, spec: str) -> dict[Key, int]:
        """Offsets of every partition of ``alias`` that do not move (all but the busy topic's)."""
        cached = self._base.get((alias, spec))
        if cached is None:
            keys = self._keys.get(alias)  # the same key tuples for both specs: less memory
            if keys is None:
                names = [t if alias == SOURCE else self.remote(t) for t in [*self.idle_topics, BUSY]]
                keys = self._keys[alias] = [(name, p) for name in names for p in range(PER_TOPIC)]
            cached = dict.fromkeys(keys, 0 if spec == "earliest" else IDLE_RECORDS)
            cached.update((k, 0) for k in keys[-PER_TOPIC:])  # the busy topic's, from moving()
            self._base[(alias, spec)] = cached
        return cached

    def moving(self, alias: str, spec: str, at: float) -> dict[Key, int]:
        """The busy partitions' offsets at ``at``."""
        if spec == "earliest":
            return {}
        if alias == SOURCE:
            return {(BUSY, p): self.written(p, at) for p in range(PER_TOPIC)}
        busy = self.remote(BUSY)
        return {(busy, p): self.copied(p, at) for p in range(PER_TOPIC)}

    def list_offsets(self, alias: str, partitions: list[Key], spec: str, at: float) -> dict[Key, int]:
        """What ``ClusterClient.list_offsets`` answers: the asked partitions that exist, keyed by
        the caller's own tuples."""
        base, moving = self.base(alias, spec), self.moving(alias, spec, at)
        out = {k: base[k] for k in partitions if k in base}
        out.update((k, v) for k, v in moving.items() if k in out)
        return out

    def committed_offsets(self, groups: list[str], at: float) -> dict[str, dict[Key, int]]:
        return {g: {(BUSY, p): self.committed(self.groups.index(g), p, at) for p in range(PER_TOPIC)}
                for g in groups if g in self.groups}


class GeneratorClock:
    """The generator's own CPU time (every thread), so it can be told apart from the monitor's."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()

    def run(self, fn, *args):
        started = time.thread_time()
        try:
            return fn(*args)
        finally:
            with self._lock:
                self.seconds += time.thread_time() - started


CLOCK = GeneratorClock()


class GeneratedCluster(ClusterClient):
    """A ClusterClient whose blocking requests answer from a Workload instead of a broker."""

    workload: Workload  # set by install()

    def topic_partitions(self) -> dict[str, int]:
        return CLOCK.run(self.workload.topics, self.alias)

    def list_offsets(self, partitions, spec, committed=False):
        return CLOCK.run(self.workload.list_offsets, self.alias, partitions, spec, time.time())

    def topic_configs(self, topics, names):
        return {t: {n: RETENTION[n] for n in names if n in RETENTION} for t in topics}

    def consumer_groups(self) -> list[str]:
        return list(self.workload.groups) if self.alias == SOURCE else []

    def consumer_groups_beside_offsets(self) -> list[str]:
        return self.consumer_groups()

    def committed_offsets(self, groups):
        return CLOCK.run(self.workload.committed_offsets, groups, time.time())

    def describe_cluster(self) -> str:
        return f"generated-{self.alias}"


def first_records(workload: Workload, positions: dict[Key, int]) -> dict[Key, FirstRecord]:
    """What ``monitor.collectors.cluster.first_records`` reads: the first record at or after each
    position (offsets are dense here), or the partition's end."""
    now = time.time()
    out = {}
    for (topic, partition), offset in positions.items():
        ts = workload.timestamp_ms(topic, partition, offset)
        out[(topic, partition)] = FirstRecord(offset if ts is not None else None, ts, now)
    return out


class GeneratedLagProbe(LagProbe):
    def _read_first_records(self, todo):
        def read():
            found = first_records(self.source.workload, {key: position for key, position, _ in todo})
            return {key: Probe(position, found[key].offset, found[key].timestamp, end, found[key].read_at)
                    for key, position, end in todo}
        return self._known_empty(CLOCK.run(read))


class GeneratedTimestamps(RecordTimestamps):
    def _read_round(self, keys, deadline):
        found = CLOCK.run(first_records, self.source.workload, {(t, p): o for t, p, o in keys})
        return {(t, p, o): found[(t, p)].timestamp for t, p, o in keys}


def tailed(records: list, partition_of=lambda r: 0, at: float | None = None,
           timestamps: list[int] | None = None, first_offset: int = 0) -> list[TailedRecord]:
    """MM2 records as a TopicTail hands them over (live: read after the tail caught up)."""
    at = time.time() if at is None else at
    return [TailedRecord(partition_of(r), first_offset + i, r.encode_key(), r.encode_value(), TIMESTAMP_CREATE_TIME,
                         timestamps[i] if timestamps else int(at * 1000), True, at)
            for i, r in enumerate(records)]


def initial_syncs(workload: Workload) -> list[OffsetSync]:
    """The offset-syncs topic as the collector reads it from the start: one per idle partition."""
    return [OffsetSync(t, p, 0, 0) for t in workload.idle_topics for p in range(PER_TOPIC)]


def new_syncs(workload: Workload, sent: dict[int, int], at: float) -> list[OffsetSync]:
    """The busy partitions' syncs written since ``sent`` (partition -> newest upstream sent)."""
    out = []
    for p in range(PER_TOPIC):
        newest = workload.newest_sync(p, at)
        if newest is not None and sent.get(p) != newest:
            sent[p] = newest
            out.append(OffsetSync(BUSY, p, newest, newest))
    return out


def checkpoints(workload: Workload, at: float) -> list[Checkpoint]:
    """Every group's checkpoint of every busy partition at ``at``, translated as MM2 does: a sync's
    own offset exactly, anything past it to the record after the sync's downstream offset."""
    out = []
    for g, group in enumerate(workload.groups):
        for p in range(PER_TOPIC):
            upstream = workload.committed(g, p, at)
            sync = workload.newest_sync(p, at)
            if sync is None or upstream < sync:
                continue
            downstream = sync if upstream == sync else sync + 1
            out.append(Checkpoint(group, workload.remote(BUSY), p, upstream, downstream))
    return out


class _Fed:
    """A tail collector's records from a task on the event loop instead of its tail thread."""

    _task: asyncio.Task | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._feed())

    def stop(self, timeout: float = 5.0) -> None:  # called from a worker thread (asyncio.to_thread)
        if self._task is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._task.cancel)

    def _deliver(self, records: list[TailedRecord]) -> None:
        CLOCK.run(self._records, records)


class FedHeartbeats(_Fed, HeartbeatCollector):
    async def _feed(self) -> None:
        workload, n = self.tail.client.workload, 0
        while True:
            now = time.time()
            hb = Heartbeat(SOURCE, TARGET, int((now - workload.delay) * 1000))
            self._deliver(tailed([hb], at=now, timestamps=[hb.timestamp_ms], first_offset=n))
            n += 1
            await asyncio.sleep(1.0)


class FedOffsetSyncs(_Fed, OffsetSyncCollector):
    async def _feed(self) -> None:
        workload, n, sent = self.tail.client.workload, 0, {}
        syncs = initial_syncs(workload)
        stamp = int((workload.start - 3600) * 1000)
        for i in range(0, len(syncs), 1000):  # a tail hands over at most 1,000 records a batch
            batch = syncs[i:i + 1000]
            self._deliver(tailed(batch, timestamps=[stamp] * len(batch), first_offset=n))
            n += len(batch)
            await asyncio.sleep(0)
        self._loaded()  # the tail's on_caught_up
        while True:
            batch = new_syncs(workload, sent, time.time())
            if batch:
                self._deliver(tailed(batch, first_offset=n))
                n += len(batch)
            await asyncio.sleep(0.2)


class FedCheckpoints(_Fed, CheckpointCollector):
    async def _feed(self) -> None:
        workload, n = self.tail.client.workload, 0
        while True:
            batch = checkpoints(workload, time.time())
            if batch:
                self._deliver(tailed(batch, first_offset=n))
                n += len(batch)
            await asyncio.sleep(self.flow.checkpoint_interval)


class EvaluationLog:
    """Every evaluation's figures, and the generator's CPU time sampled each second."""

    def __init__(self) -> None:
        self.evaluations: deque = deque(maxlen=20000)  # (monotonic, wall, CPU, longest step's CPU, longest step)
        self.generator: deque = deque(maxlen=20000)  # (monotonic, generator CPU seconds so far)


@contextlib.contextmanager
def installed(workload: Workload, evaluations: EvaluationLog):
    """Point monitor.service at the generator (the module names MonitorService makes its
    clients, tail collectors, probes and step meter by) and yield a MonitorService that logs
    every evaluation; the service's own code runs unchanged. The names are put back after."""
    import monitor.service as service

    GeneratedCluster.workload = workload
    meters: list = []
    saved: dict = {}

    class Meter(service.StepTimes):
        """StepTimes (one per evaluation) that also sums its steps' CPU time."""

        def __init__(self) -> None:
            super().__init__()
            self.cpu = 0.0
            meters.append(self)

        def started(self) -> None:
            super().started()
            self._step_cpu = time.thread_time()

        def ended(self) -> None:
            super().ended()
            self.cpu += time.thread_time() - self._step_cpu

    for name, value in (("ClusterClient", GeneratedCluster), ("HeartbeatCollector", FedHeartbeats),
                        ("OffsetSyncCollector", FedOffsetSyncs), ("CheckpointCollector", FedCheckpoints),
                        ("LagProbe", GeneratedLagProbe), ("RecordTimestamps", GeneratedTimestamps),
                        ("StepTimes", Meter)):
        saved[name] = getattr(service, name)
        setattr(service, name, value)

    class Service(service.MonitorService):
        async def _evaluate_in_steps(self):
            ev = await super()._evaluate_in_steps()  # evaluations never overlap (evaluate_async)
            meter = meters.pop() if meters else None
            meters.clear()
            if meter is not None:
                evaluations.evaluations.append((time.monotonic(), meter.busy, meter.cpu, meter.longest_cpu,
                                                meter.longest))
            return ev

    try:
        yield Service
    finally:
        for name, value in saved.items():
            setattr(service, name, value)


def mm2_properties(path: Path) -> Path:
    path.write_text(f"clusters = {SOURCE}, {TARGET}\n"
                    f"{SOURCE}.bootstrap.servers = generated-{SOURCE}:9092\n"
                    f"{TARGET}.bootstrap.servers = generated-{TARGET}:9092\n"
                    f"{SOURCE}->{TARGET}.enabled = true\n")
    return path


def monitor_args(argv: list[str]):
    """(CONFIG, MonitorOptions) of a ``sparkmirror monitor`` command line, parsed as the command does."""
    from monitor.command import register
    from monitor.options import options_from_args

    parser = argparse.ArgumentParser(prog="sparkmirror")
    register(parser.add_subparsers())
    # the audit reads records from real clusters, which the generator does not have: it is measured
    # against real brokers by bench/audit.py
    args = parser.parse_args(["monitor", "--audit", "off", *argv])
    return args.config, options_from_args(args)


def serve(argv: list[str]) -> int:
    """The monitor process: ``serve STATS --partitions N ... -- CONFIG [sparkmirror monitor options]``;
    writes the evaluations and the generator's CPU to STATS when it stops."""
    ap = argparse.ArgumentParser(prog="bench.monitor_generated serve")
    ap.add_argument("stats")
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--groups", type=int, default=3)
    split = argv.index("--") if "--" in argv else len(argv)
    ours, rest = ap.parse_args(argv[:split]), argv[split + 1:]
    from sparkmirror import logsetup
    from sparkmirror.configfile import load_config

    config, options = monitor_args(rest)
    logsetup.configure()
    workload = Workload(ours.partitions, ours.rate, groups=ours.groups)
    evaluations = EvaluationLog()

    async def main(service) -> None:
        async def sample() -> None:
            while True:
                evaluations.generator.append((time.monotonic(), CLOCK.seconds))
                await asyncio.sleep(1.0)
        sampler = asyncio.get_running_loop().create_task(sample())
        try:
            await service.run_until_stopped()
        finally:
            sampler.cancel()

    try:
        with installed(workload, evaluations) as service_cls:
            asyncio.run(main(service_cls(load_config(config), options)))
    finally:
        Path(ours.stats).write_text(json.dumps({"evaluations": list(evaluations.evaluations),
                                                "generator": list(evaluations.generator)}))
    return 0


def window_figures(stats: dict, since: float, until: float) -> dict:
    """The child's figures of every evaluation and the generator's CPU between two monotonic times."""
    evs = [e for e in stats["evaluations"] if since <= e[0] <= until]
    gen = [g for g in stats["generator"] if since <= g[0] <= until]

    def ms(values, fn=statistics.median):
        return round(fn(values) * 1000, 1) if values else None

    return {
        "evaluations": len(evs),
        "evaluation_ms": ms([e[1] for e in evs]), "evaluation_wall_max_ms": ms([e[1] for e in evs], max),
        "evaluation_cpu_ms": ms([e[2] for e in evs]), "evaluation_cpu_max_ms": ms([e[2] for e in evs], max),
        "evaluation_step_cpu_ms": ms([e[3] for e in evs]),
        "evaluation_step_cpu_worst_ms": ms([e[3] for e in evs], max),
        "generator_cpu_percent": round((gen[-1][1] - gen[0][1]) / (gen[-1][0] - gen[0][0]) * 100, 1)
        if len(gen) >= 2 and gen[-1][0] > gen[0][0] else None,
    }


@contextlib.contextmanager
def unhealthy_counted():
    """bench.monitor_scale.measure with each 503 from ``/healthz`` (the monitor's last evaluation is
    older than three intervals: a liveness probe would fail) counted and timed instead of ending
    the run; yields the count so far (a one-element list)."""
    import urllib.error

    import bench.monitor_scale as scale

    real, count = scale.get, [0]

    def get(url: str, timeout: float = 60.0):
        started = time.perf_counter()
        try:
            return real(url, timeout)
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or not url.endswith("/healthz"):
                raise
            count[0] += 1
            return b"", time.perf_counter() - started

    scale.get = get
    try:
        yield count
    finally:
        scale.get = real


def run_once(args, granularity: str, work: Path, run: int) -> dict:
    from bench.monitor_scale import measure, stop
    from devenv.kafka import free_port

    config = mm2_properties(work / "mm2.properties")
    stats = work / f"stats-{granularity}-{run}.json"
    port = free_port()
    monitor = subprocess.Popen([sys.executable, "-m", "bench.monitor_generated", "serve", str(stats),
                                "--partitions", str(args.partitions), "--rate", str(args.rate),
                                "--groups", str(args.groups), "--", str(config),
                                "--listen", f"127.0.0.1:{port}", "--granularity", granularity],
                               cwd=ROOT, stdout=open(work / f"monitor-{granularity}.log", "wb"),
                               stderr=subprocess.STDOUT)
    try:
        total = (args.partitions // PER_TOPIC + 1) * PER_TOPIC
        with unhealthy_counted() as unhealthy:
            row = measure(f"http://127.0.0.1:{port}", monitor, total, granularity, args, work)
        until = time.monotonic()
        row["healthz_unhealthy"] = unhealthy[0]
    finally:
        stop(monitor)
    if not stats.exists():
        raise RuntimeError(f"the monitor wrote no {stats.name}; its log: {work / f'monitor-{granularity}.log'}")
    row.update(window_figures(json.loads(stats.read_text()), until - args.seconds, until))
    # the machine is shared: how many were running or waiting for its cores over the last minute
    row.update({"workload": "monitor-generated", "system": "monitor-generated", "groups": args.groups,
                "load_average_1m": round(os.getloadavg()[0], 2)})
    return row


def top_costs(collapsed: str, root: Path = ROOT, n: int = 15) -> tuple[list, list, int]:
    """From py-spy's raw (collapsed) stacks: the ``n`` functions with the most samples on top of
    the stack (self) and anywhere in it (inclusive), as (samples, "path:function"), and the total."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        names = []
        for frame in stack.split(";"):
            func, _, where = frame.partition(" (")
            path = where.rsplit(":", 1)[0]
            with contextlib.suppress(ValueError):
                path = str(Path(path).relative_to(root))
            names.append(f"{path}:{func}")
        if names:
            own[names[-1]] = own.get(names[-1], 0) + samples
        for name in set(names):
            inclusive[name] = inclusive.get(name, 0) + samples

    def top(d: dict[str, int]) -> list:
        return sorted(((v, k) for k, v in d.items()), reverse=True)[:n]

    return top(own), top(inclusive), total


def profile_once(args, granularity: str, work: Path, pyspy: str) -> str:
    """A run with py-spy sampling the monitor for ``--seconds`` (scraped as measure does, every 5 s);
    the top costs as text. Not a measurement: py-spy's samples pause the process."""
    from bench.monitor_scale import get, stop, wait_for_freeze
    from devenv.kafka import free_port

    config = mm2_properties(work / "mm2.properties")
    port = free_port()
    monitor = subprocess.Popen([sys.executable, "-m", "bench.monitor_generated", "serve", str(work / "stats.json"),
                                "--partitions", str(args.partitions), "--rate", str(args.rate),
                                "--groups", str(args.groups), "--", str(config),
                                "--listen", f"127.0.0.1:{port}", "--granularity", granularity],
                               cwd=ROOT, stdout=open(work / "monitor-profile.log", "wb"), stderr=subprocess.STDOUT)
    try:
        url, total = f"http://127.0.0.1:{port}", (args.partitions // PER_TOPIC + 1) * PER_TOPIC
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and monitor.poll() is None:
            with contextlib.suppress(OSError, KeyError, IndexError, ValueError):
                flow = json.loads(get(url + "/api/status")[0])["flows"][0]
                if sum(flow["partitions_by_status"].values()) >= total and flow["lag"]["records"] is not None:
                    break
            time.sleep(1)
        wait_for_freeze(url, total)
        get(url + "/metrics")
        out = work / "profile.txt"
        spy = subprocess.Popen([pyspy, "record", "--pid", str(monitor.pid), "--duration", str(int(args.seconds)),
                                "--rate", "200", "--format", "raw", "--output", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while spy.poll() is None:
            get(url + "/metrics")
            get(url + "/api/status")
            time.sleep(5)
        collapsed = out.read_text()
    finally:
        stop(monitor)
    keep = Path(args.profile_out) if args.profile_out else None
    if keep is not None:
        keep.write_text(collapsed)
    own, inclusive, samples = top_costs(collapsed)
    lines = [f"{args.partitions} partitions, {granularity}: {samples} samples (200/s of every busy thread)",
             "self:"] + [f"  {v / samples:6.1%}  {k}" for v, k in own] + ["inclusive:"] + \
        [f"  {v / samples:6.1%}  {k}" for v, k in inclusive]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=100000, help="idle source partitions (plus 100 busy ones)")
    ap.add_argument("--granularity", default="topic",
                    help="comma-separated: topic, partition (default topic); --repeats runs each")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=1000.0, help="records/s into the busy topic")
    ap.add_argument("--groups", type=int, default=3, help="consumer groups on the busy topic, with checkpoints")
    ap.add_argument("--repeats", type=int, default=1, help="runs per granularity, each with a new monitor")
    ap.add_argument("--no-record", action="store_true", help="print the rows, do not write results")
    ap.add_argument("--profile", metavar="PY_SPY",
                    help="instead of measuring, sample the monitor with this py-spy for --seconds and print its "
                         "top costs (self and inclusive, file:function)")
    ap.add_argument("--profile-out", metavar="FILE", help="with --profile: keep py-spy's raw stacks here")
    args = ap.parse_args(argv)
    for g in args.granularity.split(","):
        if g not in ("topic", "partition"):
            print(f"--granularity: {g!r} is neither topic nor partition", file=sys.stderr)
            return 2
    batch = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    work = Path(tempfile.mkdtemp(prefix="monitor-generated-"))
    try:
        if args.profile:
            for granularity in args.granularity.split(","):
                print(profile_once(args, granularity, work, args.profile), flush=True)
            return 0
        for granularity in args.granularity.split(","):
            for run in range(1, args.repeats + 1):
                row = run_once(args, granularity, work, run)
                row.update({"run": run, "runs": args.repeats, "batch": batch,
                            "command": "python -m bench.monitor_generated " + " ".join(a for a in argv
                                                                                   if a != "--no-record")})
                print(json.dumps(row), flush=True)
                if not args.no_record:
                    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
                    results.append(row)
                    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
        if not args.no_record:
            from bench.report import write_benchmarks_md

            write_benchmarks_md()
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
