"""MonitorService: the coordinator that starts and stops every stage of the monitor.

One service per mm2.properties. Data flows one way: the collectors write the
MonitorState, the evaluator reads it into an Evaluation, the exporters read
that; no stage calls into a later one.

Making the service translates every cluster's client settings (a config problem
stops the start, exit 2) and makes, without connecting anywhere: the MonitorState
(which keeps the heartbeat latency samples only when the OpenTelemetry exporter
will take them), the History behind the status page's charts, the /metrics text
(monitor.exporters.prometheus) and the OpenTelemetry instruments. Both read the
newest Evaluation when scraped or collected; the OTel exporter takes the state's
latency samples then.

``start()`` starts these stages in order (sparkmirror.lifecycle: a stage that fails to
start stops the ones before it, in reverse, and the error is raised), data flow first:

0. the OpenTelemetry exporter (made with the service; listed first so that it stops
   last, its final export taking the latency samples kept until then);
1. one ClusterClient per cluster (own threads), then the HealthCollector's tasks;
2. per enabled flow A->B: the HeartbeatCollector (tail of A.heartbeats on B),
   the OffsetSyncCollector, the CheckpointCollector and GroupOffsetCollector
   (when the flow emits checkpoints; with RecordTimestamps for failover re-read
   spans; it reads the groups' commits on the target too, for failback readiness), the RetentionCollector (source topics' retention settings), and the
   EndOffsetCollector with the source cluster's LagProbe; with ``--replicator-url``, one
   ReplicatorCollector per replicator (which flows it paused); the tails start
   reading, the other collectors run as tasks;
3. the audit (monitor.audit, unless ``--audit off``): one AuditEngine per flow with
   offset-syncs, its rounds in a thread of its own; its newest snapshot goes into
   every evaluation (``extra["audit"]``);
4. a first evaluation, then the evaluator loop, which turns the MonitorState
   into an Evaluation every interval (and on demand when a request finds the
   last one older than ``positions_interval``);
5. the aiohttp server (/metrics, /api/status, /api/history, the status page,
   /healthz), and with ``--web-config-file`` the task that reloads it.

``stop()`` stops them in reverse order, each within its own timeout: the web config
reload, the aiohttp server, the evaluator loop, the audit (its rounds in flight end
first), the collectors' tasks and then their
tails, the HealthCollector, the cluster clients and, last, the OpenTelemetry
exporter; a stage that fails to stop is logged and the others still stop. Every
loop runs in monitor.loops (a failed round is logged and the loop goes on). Nothing
here blocks the event loop: every Kafka call happens in a cluster's threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Iterable

from aiohttp import web

from monitor.audit.component import AuditComponent
from monitor.audit.options import AuditOptions
from monitor.collectors.checkpoints import CheckpointCollector
from monitor.collectors.cluster import ClusterClient, HealthCollector
from monitor.collectors.groups import GroupOffsetCollector
from monitor.collectors.heartbeats import HeartbeatCollector
from monitor.collectors.offset_syncs import OffsetSyncCollector
from monitor.collectors.offsets import EndOffsetCollector
from monitor.collectors.retention import RetentionCollector
from monitor.collectors.replicator import ReplicatorCollector, read_password
from monitor.collectors.timelag import LagProbe
from monitor.collectors.timestamps import RecordTimestamps
from monitor.evaluator import Evaluation, EvaluatorSettings, evaluate, evaluate_steps
from monitor.exporters.http import HttpSources, build_app
from monitor.gcpauses import GcSettler, gc_pauses
from monitor.exporters.otel import OtelExporter, otel_exports
from monitor.exporters.prometheus import build_registry
from monitor.history import History
from monitor.rpo import RpoTracker
from monitor.loops import RoundFailures, repeat
from monitor.pacing import run_in_steps
from monitor.state import MonitorState
from monitor.watch import MonitorOptions, WatchedFlow, librdkafka_client, watched_flows
from sparkmirror import __version__
from sparkmirror.errors import SparkmirrorError
from sparkmirror.lifecycle import AsyncComponents
from sparkmirror.webreload import LiveWebConfig

log = logging.getLogger(__name__)

#: Heartbeat latency samples kept between two OTel collections (OTEL_METRIC_EXPORT_INTERVAL, default
#: 60 s): one heartbeat a second per flow fills it in 60 s at 330 flows; the bound on their memory.
LATENCY_SAMPLES_KEPT = 20_000
#: Seconds each stage has to stop: a tail's thread ends within a poll, the HTTP server waits
#: for the requests in flight (aiohttp's own default), the OTel exporter for its final export.
TASKS_STOP_TIMEOUT = 10.0
TAILS_STOP_TIMEOUT = 5.0
HTTP_STOP_TIMEOUT = 60.0
OTEL_STOP_TIMEOUT = 5.0
#: how long a stop waits for an audit round in flight (one still running is left to the exit)
AUDIT_STOP_TIMEOUT = 8.0

_SCHEDSTAT = "/proc/thread-self/schedstat"


def runqueue_seconds() -> float | None:
    """How long the calling thread has waited, runnable, for a CPU (Linux schedstat: other
    processes and threads had the cores); None where the kernel does not say."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class StepTimes:
    """What the evaluator's steps took (a pacing.StepMeter): their sum and the longest step,
    split into its CPU time and its wait for a core."""

    def __init__(self) -> None:
        self.busy = self.longest = self.longest_cpu = 0.0
        self.longest_runqueue: float | None = 0.0
        self._runqueue = self._at = self._cpu = 0.0

    def started(self) -> None:
        # read at the step's start: a wait while the loop ran other work between two steps
        # is not this step's
        self._runqueue = runqueue_seconds()
        self._at, self._cpu = time.perf_counter(), time.thread_time()

    def ended(self) -> None:
        took = time.perf_counter() - self._at
        self.busy += took
        if took > self.longest:
            runqueue = runqueue_seconds()
            self.longest = took
            self.longest_runqueue = runqueue - self._runqueue if runqueue is not None else None
        self.longest_cpu = max(self.longest_cpu, time.thread_time() - self._cpu)


class _Stage:
    """A stage whose start and stop are functions (plain or coroutine functions)."""

    def __init__(self, start: Callable[[], object], stop: Callable[[float], object]) -> None:
        self.start, self._stop = start, stop

    def stop(self, timeout: float) -> object:
        return self._stop(timeout)


class _Tasks:
    """Coroutines run as tasks while the stage runs: made and started by ``start``, cancelled by ``stop``."""

    def __init__(self, coroutines: Callable[[], Iterable[Coroutine]]) -> None:
        self._coroutines = coroutines
        self.tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self.tasks = [asyncio.create_task(c) for c in self._coroutines()]

    async def stop(self, timeout: float) -> None:
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for task in tasks:  # taken, so that asyncio does not report a loop's exception at exit
            if task.done() and not task.cancelled():
                task.exception()


class _FlowCollectors:
    """Stage 2: per flow, the collectors that tail a topic (threads) and those that poll (tasks)."""

    def __init__(self, flows: list[WatchedFlow], clients: dict[str, ClusterClient], state: MonitorState,
                 options: MonitorOptions) -> None:
        self.flows, self.clients, self.state, self.options = flows, clients, state, options
        self.tails: list = []
        self._pollers = _Tasks(lambda: [])
        # made now, so that an unreadable password file or a bad URL stops the start (exit 2)
        password = read_password(options.replicator_password_file) if options.replicator_password_file else None
        self.replicators = [ReplicatorCollector(url, state, options.interval, options.timeout,
                                                user=options.replicator_user, password=password,
                                                cacert=options.replicator_cacert)
                            for url in options.replicator_url]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        o, state, clients = self.options, self.state, self.clients
        probes = {f.source: LagProbe(clients[f.source], state) for f in self.flows} if o.probe_lag_seconds else {}
        tails, pollers = [], []
        for f in self.flows:
            source, target = clients[f.source], clients[f.target]
            tails.append(HeartbeatCollector(f, target, state, loop))
            if f.offset_syncs_enabled:
                tails.append(OffsetSyncCollector(f, clients[f.offset_syncs_cluster], state, loop))
            if f.checkpoints_enabled:
                tails.append(CheckpointCollector(f, target, state, loop, o))
                stamps = RecordTimestamps(source, state) if o.probe_lag_seconds else None
                pollers.append(GroupOffsetCollector(f, source, state, o, stamps, target))
            pollers.append(RetentionCollector(f, source, state, o))
            pollers.append(EndOffsetCollector(f, source, target, state, o, probes.get(f.source)))
        try:
            for tail in tails:
                tail.start()
                self.tails.append(tail)
        except BaseException:  # the tails started so far are this stage's to stop
            await self._stop_tails(TAILS_STOP_TIMEOUT)
            raise
        pollers.extend(self.replicators)
        self._pollers = _Tasks(lambda: [p.run() for p in pollers])
        self._pollers.start()

    async def _stop_tails(self, timeout: float) -> None:
        tails, self.tails = self.tails, []
        await asyncio.gather(*(asyncio.to_thread(t.stop, timeout) for t in tails))

    async def stop(self, timeout: float) -> None:
        await self._pollers.stop(timeout)
        await self._stop_tails(timeout)


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
        self.rpo = RpoTracker(options.objectives)  # every evaluation, for the objectives' budgets
        self._evaluating: asyncio.Future | None = None
        self.registry = build_registry(lambda: self._evaluation, __version__)
        samples = self.state.latency_samples
        self.otel = OtelExporter(lambda: self._evaluation, __version__, readers=otel_readers,
                                 latency_samples=samples.take if samples is not None else None)
        self.clients: dict[str, ClusterClient] = {}
        self._config = config
        self.audit: AuditComponent | None = None
        self._audit_rounds = _Tasks(lambda: [self.audit.run()] if self.audit else [])
        self._gc = GcSettler()
        self._runner: web.AppRunner | None = None
        self._web: LiveWebConfig | None = None
        self.port: int | None = None
        self._evaluator = _Tasks(lambda: [self._evaluate_loop()])
        # The stages in start order (the module's docstring); stopped in reverse.
        stages = self._stages = AsyncComponents(logger=log, timeout=TASKS_STOP_TIMEOUT)
        stages.add(_Stage(lambda: None, self.otel.shutdown), timeout=OTEL_STOP_TIMEOUT,
                   name="the OpenTelemetry exporter")
        stages.add(_Stage(self._start_clients, self._stop_clients), name="the cluster clients")
        stages.add(_Tasks(lambda: [HealthCollector(self.clients, options.interval).run()]),
                   name="the reachability checks")
        stages.add(_FlowCollectors(self.flows, self.clients, self.state, options), timeout=TAILS_STOP_TIMEOUT,
                   name="the collectors")
        if AuditOptions.of(options).enabled:
            stages.add(_Stage(self._start_audit, self._stop_audit), timeout=AUDIT_STOP_TIMEOUT, name="the audit")
        stages.add(_Stage(self._start_evaluator, self._stop_evaluator), name="the evaluator")
        stages.add(_Stage(self._serve, self._close_server), timeout=HTTP_STOP_TIMEOUT, name="the HTTP server")
        if options.web_config is not None:
            stages.add(_Tasks(lambda: [self._reload_web_config(self._web)]), name="the web config reload")

    # --- evaluation -------------------------------------------------------------
    def evaluate_now(self) -> Evaluation:
        """One evaluation in one go (start-up, tests); the loops use ``evaluate_async``."""
        started = time.perf_counter()
        ev = evaluate(self.state, time.time(), self.settings)
        ev.duration_seconds = time.perf_counter() - started
        self._record(ev)
        return ev

    def _record(self, ev: Evaluation) -> None:
        """The evaluation becomes the current one, in the history and the objectives' budgets,
        with the audit's newest snapshot per flow."""
        if self.audit is not None:
            ev.extra["audit"] = self.audit.snapshot()
        self._evaluation = ev
        self.history.record(ev)
        self.rpo.annotate(ev)

    async def evaluate_async(self) -> Evaluation:
        """One evaluation in steps, letting the event loop run in between; concurrent callers share it."""
        if self._evaluating is None or self._evaluating.done():
            self._evaluating = asyncio.ensure_future(self._evaluate_in_steps())
        return await asyncio.shield(self._evaluating)

    async def _evaluate_in_steps(self) -> Evaluation:
        times = StepTimes()
        ev = await run_in_steps(evaluate_steps(self.state, time.time(), self.settings), times)
        ev.duration_seconds = times.busy  # the evaluator's own work, not the pauses between its steps
        # A step's wall time is its own CPU time, plus the time the thread waited for a core
        # (other processes; runqueue), plus the time it waited for the GIL while another thread
        # held it (a collector thread, a garbage collection there).
        ev.extra["longest_step_seconds"] = times.longest
        ev.extra["longest_step_cpu_seconds"] = times.longest_cpu
        ev.extra["longest_step_runqueue_seconds"] = times.longest_runqueue
        ev.extra["longest_gc_pause_seconds"], ev.extra["longest_gc_pause_cpu_seconds"] = gc_pauses.take()
        self._record(ev)
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
        await repeat(self.evaluate_async, self.options.interval, RoundFailures("evaluation", log))

    # --- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        gc_pauses.install()
        await self._stages.start()
        o, live = self.options, self._web
        log.info("monitoring %s on %s://%s:%d (/metrics, /api/status, /healthz)%s",
                 ", ".join(f.name for f in self.flows), live.scheme if live else "http", o.host, self.port,
                 " with basic auth" if live and live.auth else "")

    async def stop(self) -> None:
        await self._stages.stop()

    def _start_clients(self) -> None:
        for alias, (admin, consumer) in self._client_configs.items():
            self.clients[alias] = ClusterClient(alias, admin, consumer, self.state, timeout=self.options.timeout)

    def _stop_clients(self, timeout: float) -> None:
        for client in self.clients.values():
            client.shutdown()

    def _start_audit(self) -> None:
        consumers = {alias: consumer for alias, (_, consumer) in self._client_configs.items()}
        self.audit = AuditComponent(self._config, AuditOptions.of(self.options), consumers,
                                    timeout=self.options.timeout)
        for e in self.audit.engines:
            log.info("auditing %s: source %s read %s, at most %s bytes/s from each cluster", e.flow.name,
                     e.flow.source, e.flow.source_isolation, e.settings.budget or "unlimited",
                     extra={"flow": e.flow.name})
        self._audit_rounds.start()

    async def _stop_audit(self, timeout: float) -> None:
        await self._audit_rounds.stop(timeout)
        if self.audit is not None:
            await asyncio.to_thread(self.audit.close, timeout)

    def _start_evaluator(self) -> None:
        self.evaluate_now()
        self._evaluator.start()

    async def _stop_evaluator(self, timeout: float) -> None:
        await self._evaluator.stop(timeout)
        if self._evaluating is not None:  # one a request asked for may still be in its steps
            self._evaluating.cancel()

    async def _serve(self) -> None:
        live = self._web = LiveWebConfig(self.options.web_config) if self.options.web_config else None
        sources = HttpSources(self.fresh_evaluation, self.registry, self.healthy, __version__, live, self.history)
        self._runner = web.AppRunner(build_app(sources), access_log=None, shutdown_timeout=HTTP_STOP_TIMEOUT)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port,
                           ssl_context=live.ssl_context if live else None)
        try:
            await site.start()
        except OSError as exc:
            await self._close_server(HTTP_STOP_TIMEOUT)  # this stage's own; the stages before stop in reverse
            raise SparkmirrorError(f"cannot listen on {self.options.host}:{self.options.port}: {exc.strerror}",
                                   hint="choose another address with --listen HOST:PORT") from None
        self.port = site._server.sockets[0].getsockname()[1]

    async def _close_server(self, timeout: float) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _reload_web_config(self, live: LiveWebConfig) -> None:
        """Certificates and users as the web config file says now (see sparkmirror.webreload)."""
        async def reload() -> None:
            loaded = await asyncio.to_thread(live.poll)  # reads files, may hash: off the loop
            if loaded is not None:
                live.apply(loaded)  # on the loop, where the connections' TLS objects are made

        await asyncio.sleep(live.check_every)
        await repeat(reload, live.check_every, RoundFailures("reloading the web config", log))

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
