"""ReplicatorService: the coordinator of a ``sparkmirror replicate`` run.

One service per mm2.properties; it is the only place that knows in which order the parts
of the replicator start and stop. ``run()`` starts these components
(``sparkmirror.lifecycle``), in this order:

1. ``_StartUp``: the start-up warnings (what ``sparkmirror validate`` would warn about, and
   where this run differs from MM2) and the SIGTERM / SIGINT handlers;
2. ``_MetricsEndpoint``: the replicator's /metrics (``replicator.metrics``, ``--metrics-listen``);
3. ``_HeartbeatTopics``: the heartbeats topic of every pair that emits heartbeats (one attempt
   each: the flows' first topic discovery then already sees them; a failure is retried by the
   heartbeats loops of step 6);
4. ``_Flows``: per enabled flow its FlowReplicator, its offset-syncs topic, and a first topic
   refresh (mirror topics exist before any of their records is read);
5. ``_Spark``: the Spark session, with each flow's data path chosen (``replicator.datapath.app``);
   its stop logs one summary line per flow, then stops Spark;
6. ``_HeartbeatLoops``: the heartbeats loops (``replicator.control.heartbeats``), one per pair;
7. per flow a ``_FlowRun``: its streaming query, then its topic-refresh loop, its catch-up
   progress loop (``replicator.datapath.catchup``) and its control loops (checkpoints, group
   offset sync, topic config and ACL sync: ``replicator.control.plane``);
8. ``_QueriesClosed``: nothing at start; at stop, it ends every query for good first.

A component that fails to start stops the ones started before it, in reverse order, and
the error reaches the command. Every loop of steps 6 and 7 runs on a daemon thread of the
driver in ``replicator.control.loop.run_loop``, the one retry policy: a loop that cannot
start yet is tried again, a failed round is logged and the next one runs. The main thread
then supervises the queries every half second until the signal; a permanent write error
raised there stops the run.

The control API (``replicator.api``, on the metrics port) and SIGHUP act on a running
service: ``pause`` / ``resume`` one flow and ``reload`` mm2.properties (``replicator.live``:
what changes, a flow that fails to start, and why a stop always wins over a reload).

On SIGTERM / Ctrl-C the components stop in reverse order: the queries first (no new batch
is planned; the running one finishes within 10 s or is abandoned and replayed from the
checkpoint on restart: duplicates, never loss; a real-time query stops at once and resumes
exactly where the target acknowledged, or on a cluster, where the driver cannot read that,
waits up to its checkpoint interval plus 2 s for a checkpoint), so that no topic refresh or
supervision round can start a query again while the rest stops; then every loop, which
flushes its producers on the way out (heartbeats, checkpoints); then the summary lines and
Spark; the exit code is 0.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from functools import partial
from pathlib import Path

from sparkmirror import logsetup
from sparkmirror.lifecycle import Components
from replicator.control.heartbeats import HeartbeatEmitter
from replicator.control.loop import run_loop
from replicator.control.offsetsyncs_reader import spark_starting_offsets
from replicator.control.plane import start_control_loops
from replicator.control.topics import TopicSync, ensure_internal_topic
from replicator.datapath import catchup
from replicator.datapath.app import SparkApp
from replicator.datapath.flow import FlowReplicator
from replicator.live import LiveControl
from sparkmirror.signals import StopSignals
from sparkmirror.errors import ConfigError, SparkmirrorError
from replicator.kafkaclients import admin
from replicator.settings import MICRO_BATCH, ReplicatorSettings

log = logging.getLogger("sparkmirror.replicate")

#: Seconds between two supervision rounds of the queries (main thread).
SUPERVISE_EVERY_S = 0.5
#: Seconds between two looks of the catch-up progress loop.
PROGRESS_EVERY_S = 1.0
#: Seconds the stop waits for each loop's thread to end.
LOOP_JOIN_S = 10.0


class ReplicatorService(LiveControl):
    """Everything ``sparkmirror replicate`` runs, for one parsed mm2.properties (pause, resume and
    reload: ``replicator.live``)."""

    loop_join_s = LOOP_JOIN_S

    def __init__(self, config, checkpoint_dir: Path, settings: ReplicatorSettings | None = None,
                 master: str | None = None, ui: bool = False, metrics_listen: tuple[str, int] | None = None,
                 spark_conf: dict[str, str] | None = None) -> None:
        self.config = config
        self.checkpoint_dir = Path(checkpoint_dir)
        self.settings = settings or ReplicatorSettings()
        self.metrics_listen = metrics_listen
        self.stop_event = threading.Event()  # set by SIGTERM / SIGINT: the run ends
        self.loops_stop = threading.Event()  # set once the queries are closed: every loop ends
        self.flows: list[FlowReplicator] = []
        self.app = SparkApp(self.flows, self.settings, master=master, ui=ui, spark_conf=spark_conf)
        self._runs: dict[str, _FlowRun] = {}  # flow name -> its started _FlowRun
        self._control_lock = threading.RLock()  # one pause, resume or reload at a time
        self._reload_requested = False  # set by SIGHUP's handler (a plain store: no lock in a handler)
        self._reloaded_runs: list[_FlowRun] = []
        self._stopping = False  # set, under the control lock, once the run's stop begins: no reload then
        self._failed_starts: dict = {}  # flow name -> replicator.live.FailedStart
        self._heartbeat_loops = _HeartbeatLoops(config)

    def run(self) -> int:
        """Start, supervise until SIGTERM / SIGINT, stop; 0 on a clean stop."""
        enabled = self.config.enabled_flows()
        if not enabled:
            raise ConfigError("no flow is enabled", file=self.config.path,
                              hint="add a line like 'A->B.enabled = true'")
        components = self.components(enabled)
        components.start()
        try:
            while not self.stop_event.wait(SUPERVISE_EVERY_S):
                if self._reload_requested:
                    self._reload_requested = False
                    self.reload_logged("SIGHUP")
                self.retry_failed_starts()
                self.app.supervise()
            return 0
        finally:
            self.stop_event.set()  # a reload in progress gives up between two flows...
            with self._control_lock:  # ...and is waited for; none starts after this
                self._stopping = True
            components.stop()
            for run in self._reloaded_runs:  # flows a reload started: not among the components
                run.stop(LOOP_JOIN_S)

    def components(self, enabled) -> Components:
        """What a run starts, in start order (the module docstring's list)."""
        components = Components(timeout=LOOP_JOIN_S, logger=log)
        components.add(_StartUp(self))
        components.add(_MetricsEndpoint(self.metrics_listen, self))
        components.add(_HeartbeatTopics(self._heartbeat_loops))
        components.add(_Flows(self, enabled))
        components.add(_Spark(self.app, self.flows))
        components.add(self._heartbeat_loops, name="heartbeats")
        for flow in enabled:
            components.add(_FlowRun(self, flow.name), name=f"flow {flow.name}")
        components.add(_QueriesClosed(self.app, self.loops_stop, self._runs, self._heartbeat_loops))
        return components

    def _stop_grace(self) -> float:
        """The longest a clean stop lets the running batch finish (any flow may run in real time
        unless --data-path micro-batch)."""
        from replicator.datapath.flow import stop_grace

        spark = getattr(self.app, "spark", None)
        local = spark is None or str(spark.sparkContext.master).startswith("local")  # no JVM call
        return stop_grace(self.settings.data_path != MICRO_BATCH, self.settings.checkpoint_interval(local),
                          local=local)

    def _install_signal_handlers(self) -> None:
        def report(name: str) -> None:
            log.info("received %s: stopping; no new batch starts, the running one finishes within %.0f s or is "
                     "abandoned (replayed on restart)", name, self._stop_grace())

        if StopSignals(self.stop_event, report).install():
            signal.signal(signal.SIGHUP, self._on_sighup)

    def _on_sighup(self, _signum, _frame) -> None:
        self._reload_requested = True  # the main loop reloads within SUPERVISE_EVERY_S

    def _new_run(self, name: str) -> "_FlowRun":
        return _FlowRun(self, name)

    def _prepare_flow(self, flow) -> FlowReplicator:
        source_admin, target_admin = admin(self.config, flow.source, flow), admin(self.config, flow.target, flow)
        fr = FlowReplicator(self.config, flow, None, self.checkpoint_dir, self.settings,
                            source_admin=source_admin, target_admin=target_admin,
                            topics=TopicSync(flow, source_admin, target_admin),
                            starting_offsets=partial(spark_starting_offsets, self.config, flow))
        from replicator.metrics import metrics

        metrics().pause_state(fr.name, fr.paused)  # a pause read from disk
        _ensure_offset_syncs_topic(fr)
        fr.refresh_topics()
        return fr

    def _refresh_topics(self, fr: FlowReplicator, interval: float) -> None:
        """One topic refresh: new or grown topics are mirrored, then the query restarts on them."""
        try:
            if fr.refresh_topics():
                self.app.fit(fr)
                fr.restart_query()
        except SparkmirrorError as exc:
            log.warning("flow %s: topic refresh failed: %s; next attempt in %.0f s", fr.name, exc, interval)
        except Exception as exc:  # keep refreshing; the next round may succeed
            log.error("flow %s: topic refresh failed: %r", fr.name, exc)


def _ensure_offset_syncs_topic(fr: FlowReplicator) -> None:
    syncs = fr.offset_syncs
    if not syncs.enabled:
        log.info("flow %s: emit.offset-syncs.enabled = false: no offset-syncs topic (%s on %s) is created or "
                 "written", fr.name, syncs.topic, syncs.cluster)
        return
    adm = fr.source_admin if syncs.cluster == fr.flow.source else fr.target_admin
    ensure_internal_topic(adm, syncs.cluster, syncs.topic, fr.flow.offset_syncs_topic_replication_factor)


# --- the components, in start order -----------------------------------------------------

class _StartUp:
    """The start-up warnings, and the stop signals that set the service's stop event."""

    def __init__(self, service: ReplicatorService) -> None:
        self.service = service

    def start(self) -> None:
        from sparkmirror.model.differences import mm2_differences

        for warning in self.service.config.warnings:
            log.warning("%s", warning)
        for difference in mm2_differences(self.service.config):
            log.warning("differs from MM2: %s", difference)
        self.service._install_signal_handlers()

    def stop(self, timeout: float) -> None:
        """The handlers stay: a second signal during the stop is reported, not a traceback."""


class _MetricsEndpoint:
    """The replicator's /metrics; it serves until the process ends, so a last scrape sees the stop."""

    def __init__(self, listen: tuple[str, int] | None, controller=None) -> None:
        self.listen, self.controller = listen, controller

    def start(self) -> None:
        from replicator.metrics import metrics

        metrics().controller = self.controller
        metrics().serve(self.listen)

    def stop(self, timeout: float) -> None:
        pass


class _HeartbeatTopics:
    """The heartbeats topics, before the flows' first topic discovery; a failure is only logged
    (the heartbeats loops try again)."""

    def __init__(self, loops: "_HeartbeatLoops") -> None:
        self.loops = loops

    def start(self) -> None:
        for em in self.loops.make().values():
            _prepare_heartbeats(em)

    def stop(self, timeout: float) -> None:
        pass


def _prepare_heartbeats(em: HeartbeatEmitter) -> None:
    try:
        em.prepare()
    except SparkmirrorError as exc:
        log.error("heartbeats %s->%s: %s", em.flow.source, em.flow.target, exc)


class _HeartbeatLoops:
    """One heartbeats loop per pair that emits heartbeats, each with its own stop event, so that
    a reload (``apply``) stops the pairs it removed or changed and starts the ones it added;
    the run's stop ends them all."""

    def __init__(self, config) -> None:
        self.config = config
        self.emitters: dict[str, HeartbeatEmitter] | None = None  # made at the run's start (their clients)
        self.running: dict[str, tuple[threading.Event, threading.Thread]] = {}

    def make(self) -> dict[str, HeartbeatEmitter]:
        if self.emitters is None:
            self.emitters = {_pair(f): HeartbeatEmitter(self.config, f) for f in self.config.flows
                             if f.emit_heartbeats_enabled}
        return self.emitters

    def start(self) -> None:
        for pair, em in self.make().items():
            self._spawn(pair, em)

    def _spawn(self, pair: str, em: HeartbeatEmitter) -> None:
        stop = threading.Event()

        def run():
            logsetup.set_thread_context(flow=pair)
            em.run(stop)

        t = threading.Thread(target=run, name=f"heartbeats {pair}", daemon=True)
        t.start()
        self.running[pair] = (stop, t)

    def apply(self, config, stopping: threading.Event) -> None:
        """The pairs of ``config``: removed or changed ones stop, added or changed ones start."""
        wanted = {_pair(f): f for f in config.flows if f.emit_heartbeats_enabled}
        self.config = config
        for pair in [p for p, em in self.make().items() if wanted.get(p) != em.flow]:
            stop, t = self.running.pop(pair, (None, None))
            if stop is not None:
                stop.set()
                t.join(LOOP_JOIN_S)
            del self.emitters[pair]
            log.info("heartbeats %s: stopped (reload)", pair)
        for pair, flow in wanted.items():
            if pair in self.emitters or stopping.is_set():
                continue
            em = self.emitters[pair] = HeartbeatEmitter(config, flow)
            _prepare_heartbeats(em)
            self._spawn(pair, em)
            log.info("heartbeats %s: started (reload)", pair)

    def signal(self) -> None:
        """Every loop winds down now (with the flows' loops: their producers flush in parallel)."""
        for stop, _t in list(self.running.values()):
            stop.set()

    def stop(self, timeout: float) -> None:
        self.signal()
        for _stop, t in list(self.running.values()):
            t.join(timeout)


def _pair(flow) -> str:
    return f"{flow.source}->{flow.target}"


class _Flows:
    """Each enabled flow's FlowReplicator, offset-syncs topic and first topic refresh."""

    def __init__(self, service: ReplicatorService, enabled) -> None:
        self.service, self.enabled = service, enabled

    def start(self) -> None:
        for flow in self.enabled:
            self.service.flows.append(self.service._prepare_flow(flow))

    def stop(self, timeout: float) -> None:
        pass


class _Spark:
    """The Spark session with each flow's data path chosen; its stop says how each flow did."""

    def __init__(self, app: SparkApp, flows: list[FlowReplicator]) -> None:
        self.app, self.flows = app, flows

    def start(self) -> None:
        try:
            self.app.start()
        except BaseException:
            self.app.stop()  # a session half started is stopped here: nothing else will
            raise

    def stop(self, timeout: float) -> None:
        for fr in self.flows:
            log.info("summary: %s", fr.summary())
        self.app.stop()


class _Loops:
    """Driver threads, each running ``target(stop_event)`` (a ``run_loop``). Every line a thread
    logs carries its flow (``--log-format json``'s ``flow`` field). ``stop_event`` is shared by
    every loop of the run, so that all of them wind down at once (their producers flush in
    parallel); the stop sets it and waits for this component's threads."""

    def __init__(self, stop_event: threading.Event, loops: list[tuple[str, str | None, object]]) -> None:
        self.stop_event = stop_event
        self.loops = loops  # (thread name, flow, target)
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for name, flow, target in self.loops:
            self.spawn(name, target, self.stop_event, flow=flow)

    def spawn(self, name: str, target, *args, flow: str | None = None, **kwargs) -> None:
        def run():
            logsetup.set_thread_context(flow=flow)
            target(*args, **kwargs)

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self, timeout: float) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout)


class _FlowRun(_Loops):
    """One flow's query, then its topic-refresh, catch-up progress and control loops."""

    def __init__(self, service: ReplicatorService, name: str) -> None:
        # its own event, so a reload can stop this flow's loops alone; the run's stop sets them all
        super().__init__(threading.Event(), [])
        self.service, self.name = service, name

    def start(self) -> None:
        fr = next(f for f in self.service.flows if f.name == self.name)
        self.service._runs[self.name] = self
        if fr.paused is not None:
            log.warning("flow %s: paused (by %s at %s): it copies nothing until POST /api/flows/%s/resume "
                        "(sparkmirror ctl resume %s)", fr.name, fr.paused.get("by"),
                        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fr.paused.get("at") or 0)), fr.name, fr.name)
        fr.start_query()
        try:
            self._start_loops(fr)
        except BaseException:
            fr.close()  # a half-started flow leaves nothing running
            raise

    def _start_loops(self, fr: FlowReplicator) -> None:
        if fr.flow.refresh_topics_enabled:
            interval = float(fr.flow.refresh_topics_interval_seconds)
            self.spawn(f"refresh {fr.name}", run_loop, f"topic refresh {fr.name}", interval,
                       partial(self.service._refresh_topics, fr, interval), self.stop_event, wait_first=True,
                       flow=fr.name)
        report = catchup.CatchUpReport(fr)
        self.spawn(f"progress {fr.name}", run_loop, f"progress {fr.name}", PROGRESS_EVERY_S, report.step,
                   self.stop_event, wait_first=True, flow=fr.name)
        start_control_loops(self.service.config, fr.flow, fr.source_admin, fr.target_admin,
                            lambda: dict(fr.assignment), self.stop_event,
                            lambda name, target, *args, **kw: self.spawn(name, target, *args, flow=fr.name, **kw))


class _QueriesClosed:
    """Stopped first: every query ends for good before any loop stops, so that no topic refresh
    or supervision round can start one again while the rest stops."""

    def __init__(self, app: SparkApp, loops_stop: threading.Event, runs: dict, heartbeats: "_HeartbeatLoops") -> None:
        self.app, self.loops_stop, self.runs, self.heartbeats = app, loops_stop, runs, heartbeats

    def start(self) -> None:
        pass

    def stop(self, timeout: float) -> None:
        self.app.close()
        self.loops_stop.set()
        for run in list(self.runs.values()):  # every flow's loops wind down at once
            run.stop_event.set()
        self.heartbeats.signal()
