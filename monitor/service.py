"""MonitorService: the coordinator that starts and stops every stage of the monitor.

One service per mm2.properties. Data flows one way: the collectors write the
MonitorState, the evaluator reads it into an Evaluation, the exporters read
that; no stage calls into a later one.

Making the service translates every cluster's client settings (a config problem
stops the start, exit 2) and makes, without connecting anywhere: the MonitorState
(which keeps the heartbeat latency samples only when the OpenTelemetry exporter
will take them), the History behind the status page's charts, the Prometheus
registry and the OpenTelemetry instruments. Both read the newest Evaluation when
scraped or collected; the OTel exporter takes the state's latency samples then.

``start()`` builds, in data-flow order:

1. one ClusterClient per cluster (own threads) and the HealthCollector;
2. per enabled flow A->B: the HeartbeatCollector (tail of A.heartbeats on B),
   the OffsetSyncCollector, the CheckpointCollector and GroupOffsetCollector
   (when the flow emits checkpoints; with RecordTimestamps for failover re-read
   spans), the RetentionCollector (source topics' retention settings), and the
   EndOffsetCollector with the source cluster's LagProbe; the tails start
   reading, the other collectors run as tasks from step 3;
3. a first evaluation, then the evaluator loop, which turns the MonitorState
   into an Evaluation every interval (and on demand when a request finds the
   last one older than ``positions_interval``);
4. the aiohttp server (/metrics, /api/status, /api/history, the status page,
   /healthz), and with ``--web-config-file`` the task that reloads it.

``stop()`` cancels the tasks (collector loops, evaluator loop, web config
reload) and waits for them, closes the aiohttp server, stops the tails, shuts
the cluster clients down and, last, the OpenTelemetry exporter, whose final
export takes the latency samples kept until then. Nothing here blocks the event
loop: every Kafka call happens in a cluster's threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time

from aiohttp import web

from monitor.collectors.checkpoints import CheckpointCollector
from monitor.collectors.cluster import ClusterClient, HealthCollector
from monitor.collectors.groups import GroupOffsetCollector
from monitor.collectors.heartbeats import HeartbeatCollector
from monitor.collectors.offset_syncs import OffsetSyncCollector
from monitor.collectors.offsets import EndOffsetCollector
from monitor.collectors.retention import RetentionCollector
from monitor.collectors.timelag import LagProbe
from monitor.collectors.timestamps import RecordTimestamps
from monitor.evaluator import Evaluation, EvaluatorSettings, evaluate, evaluate_steps
from monitor.exporters.http import HttpSources, build_app
from monitor.gcpauses import GcSettler, gc_pauses
from monitor.exporters.otel import OtelExporter, otel_exports
from monitor.exporters.prometheus import build_registry
from monitor.history import History
from monitor.state import MonitorState
from monitor.watch import MonitorOptions, librdkafka_client, watched_flows
from sparkmirror import __version__
from sparkmirror.errors import SparkmirrorError
from sparkmirror.webreload import LiveWebConfig

log = logging.getLogger(__name__)

#: Heartbeat latency samples kept between two OTel collections (OTEL_METRIC_EXPORT_INTERVAL, default
#: 60 s): one heartbeat a second per flow fills it in 60 s at 330 flows; about 2 MB when full.
LATENCY_SAMPLES_KEPT = 20_000



_SCHEDSTAT = "/proc/thread-self/schedstat"


def runqueue_seconds() -> float | None:
    """How long the calling thread has waited, runnable, for a CPU (Linux schedstat: other
    processes and threads had the cores); None where the kernel does not say."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None

class MonitorService:
    """Everything ``sparkmirror monitor`` runs, for one parsed mm2.properties."""

    def __init__(self, config, options: MonitorOptions, *, otel_readers=None) -> None:
        self.options = options
        self.flows = watched_flows(config)
        aliases = list(dict.fromkeys(a for f in self.flows for a in (f.source, f.target, f.offset_syncs_cluster)))
        # Client settings are translated now, so a config problem stops the start (exit 2).
        self._client_configs = {a: (librdkafka_client(config, a, "admin"), librdkafka_client(config, a, "consumer"))
                                for a in aliases}
        # Heartbeat latency samples are kept only when the OTel exporter will take them.
        self.state = MonitorState(self.flows, aliases, window=options.window, sample_every=options.interval,
                                  latency_samples=LATENCY_SAMPLES_KEPT if otel_exports(otel_readers) else 0)
        self.settings = EvaluatorSettings.of(options)
        self._evaluation: Evaluation | None = None
        self.history = History(options.history_step)  # every evaluation, for the status page's charts
        self._evaluating: asyncio.Future | None = None
        self.registry = build_registry(lambda: self._evaluation, __version__)
        samples = self.state.latency_samples
        self.otel = OtelExporter(lambda: self._evaluation, __version__, readers=otel_readers,
                                 latency_samples=samples.take if samples is not None else None)
        self.clients: dict[str, ClusterClient] = {}
        self._gc = GcSettler()
        self._tails: list = []
        self._tasks: list[asyncio.Task] = []
        self._runner: web.AppRunner | None = None
        self._web: LiveWebConfig | None = None
        self.port: int | None = None

    # --- evaluation -------------------------------------------------------------
    def evaluate_now(self) -> Evaluation:
        """One evaluation in one go (start-up, tests); the loops use ``evaluate_async``."""
        started = time.perf_counter()
        ev = evaluate(self.state, time.time(), self.settings)
        ev.duration_seconds = time.perf_counter() - started
        self._evaluation = ev
        self.history.record(ev)
        return ev

    async def evaluate_async(self) -> Evaluation:
        """One evaluation in steps, letting the event loop run in between; concurrent callers share it."""
        if self._evaluating is None or self._evaluating.done():
            self._evaluating = asyncio.ensure_future(self._evaluate_in_steps())
        return await asyncio.shield(self._evaluating)

    async def _evaluate_in_steps(self) -> Evaluation:
        steps = evaluate_steps(self.state, time.time(), self.settings)
        busy = longest = longest_cpu = longest_runqueue = 0.0
        while True:
            # read at the step's start: a wait while the loop ran other work between two steps
            # is not this step's
            started_runqueue = runqueue_seconds()
            started, started_cpu = time.perf_counter(), time.thread_time()
            try:
                next(steps)
            except StopIteration as done:
                ev = done.value
                break
            finally:
                took = time.perf_counter() - started
                busy = busy + took
                if took > longest:
                    runqueue = runqueue_seconds()
                    longest = took
                    longest_runqueue = runqueue - started_runqueue if runqueue is not None else None
                longest_cpu = max(longest_cpu, time.thread_time() - started_cpu)
            await asyncio.sleep(0)
        ev.duration_seconds = busy  # the evaluator's own work, not the pauses between its steps
        # A step's wall time is its own CPU time, plus the time the thread waited for a core
        # (other processes; runqueue), plus the time it waited for the GIL while another thread
        # held it (a collector thread, a garbage collection there).
        ev.extra["longest_step_seconds"] = longest
        ev.extra["longest_step_cpu_seconds"] = longest_cpu
        ev.extra["longest_step_runqueue_seconds"] = longest_runqueue
        ev.extra["longest_gc_pause_seconds"], ev.extra["longest_gc_pause_cpu_seconds"] = gc_pauses.take()
        self._evaluation = ev
        self.history.record(ev)
        built = 0
        for fs in self.state.flows.values():
            built, fs.idle_results_built = built + fs.idle_results_built, 0
        if self._positions_read():
            self._gc.settle(sum(len(fs.partitions) for fs in self.state.flows.values()), built)
        ev.extra["gc_state_freezes"] = self._gc.freezes
        ev.extra["gc_state_top_ups"] = self._gc.top_ups
        return ev

    def _positions_read(self) -> bool:
        """Every flow's partitions have been read once: the state is built."""
        return bool(self.state.flows) and all(fs.partitions_read_at is not None for fs in self.state.flows.values())

    async def fresh_evaluation(self) -> Evaluation:
        ev = self._evaluation
        # Seconds lag ages with the clock between two reads of the positions: an answer never
        # comes from an evaluation older than one read of the positions.
        if ev is None or time.time() - ev.generated_at > min(self.options.positions_interval, self.options.interval):
            ev = await self.evaluate_async()
        return ev

    def healthy(self) -> tuple[bool, dict]:
        ev = self._evaluation
        age = None if ev is None else time.time() - ev.generated_at
        ok = age is not None and age < 3 * max(self.options.interval, 1.0)
        return ok, {"last_evaluation_age_seconds": None if age is None else round(age, 3),
                    "uptime_seconds": round(time.time() - self.state.started_at, 3)}

    async def _evaluate_loop(self) -> None:
        while True:
            try:
                await self.evaluate_async()
            except Exception:
                log.exception("evaluation failed")
            await asyncio.sleep(self.options.interval)

    # --- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        o = self.options
        gc_pauses.install()
        for alias, (admin, consumer) in self._client_configs.items():
            self.clients[alias] = ClusterClient(alias, admin, consumer, self.state, timeout=o.timeout)
        probes = {f.source: LagProbe(self.clients[f.source], self.state) for f in self.flows} \
            if o.probe_lag_seconds else {}
        coroutines = [HealthCollector(self.clients, o.interval).run()]
        for f in self.flows:
            source, target = self.clients[f.source], self.clients[f.target]
            self._tails.append(HeartbeatCollector(f, target, self.state, loop))
            if f.offset_syncs_enabled:
                self._tails.append(OffsetSyncCollector(f, self.clients[f.offset_syncs_cluster], self.state, loop))
            if f.checkpoints_enabled:
                self._tails.append(CheckpointCollector(f, target, self.state, loop, o))
                stamps = RecordTimestamps(source, self.state) if o.probe_lag_seconds else None
                coroutines.append(GroupOffsetCollector(f, source, self.state, o, stamps).run())
            coroutines.append(RetentionCollector(f, source, self.state, o).run())
            coroutines.append(EndOffsetCollector(f, source, target, self.state, o, probes.get(f.source)).run())
        for tail in self._tails:
            tail.start()
        self.evaluate_now()
        coroutines.append(self._evaluate_loop())
        self._tasks = [asyncio.create_task(c) for c in coroutines]
        await self._serve()
        live = self._web
        if live is not None:
            self._tasks.append(asyncio.create_task(self._reload_web_config(live)))
        log.info("monitoring %s on %s://%s:%d (/metrics, /api/status, /healthz)%s",
                 ", ".join(f.name for f in self.flows), live.scheme if live else "http", o.host, self.port,
                 " with basic auth" if live and live.auth else "")

    async def _serve(self) -> None:
        live = self._web = LiveWebConfig(self.options.web_config) if self.options.web_config else None
        sources = HttpSources(self.fresh_evaluation, self.registry, self.healthy, __version__, live, self.history)
        self._runner = web.AppRunner(build_app(sources), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port,
                           ssl_context=live.ssl_context if live else None)
        try:
            await site.start()
        except OSError as exc:
            await self.stop()
            raise SparkmirrorError(f"cannot listen on {self.options.host}:{self.options.port}: {exc.strerror}",
                                   hint="choose another address with --listen HOST:PORT") from None
        self.port = site._server.sockets[0].getsockname()[1]

    async def _reload_web_config(self, live: LiveWebConfig) -> None:
        """Certificates and users as the web config file says now (see sparkmirror.webreload)."""
        while True:
            await asyncio.sleep(live.check_every)
            try:
                loaded = await asyncio.to_thread(live.poll)  # reads files, may hash: off the loop
                if loaded is not None:
                    live.apply(loaded)  # on the loop, where the connections' TLS objects are made
            except Exception:
                log.exception("reloading the web config failed")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await asyncio.gather(*(asyncio.to_thread(t.stop) for t in self._tails))
        self._tails = []
        for client in self.clients.values():
            client.shutdown()
        self.otel.shutdown()

    async def run_until_stopped(self) -> None:
        """Start, serve until SIGINT/SIGTERM, stop."""
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stopping.set)
        await self.start()
        try:
            await stopping.wait()
        finally:
            log.info("stopping the monitor")
            await self.stop()
