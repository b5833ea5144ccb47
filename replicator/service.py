"""ReplicatorService: the coordinator of a ``sparkmirror replicate`` run.

One service per mm2.properties; it is the only place that knows in which order
the parts of the replicator start and stop. ``run()`` starts, in this order:

1. the start-up warnings (what ``sparkmirror validate`` would warn about, and
   where this run differs from MM2) and the SIGTERM / SIGINT handlers;
2. the replicator's /metrics (``replicator.metrics``, ``--metrics-listen``);
3. the heartbeats topic of every pair that emits heartbeats (one attempt each:
   the flows' first topic discovery then already sees them; a failure is retried
   by the heartbeats loop of step 6);
4. per enabled flow: its FlowReplicator, its offset-syncs topic, and a first
   topic refresh (mirror topics exist before any of their records is read);
5. the Spark session, with each flow's data path chosen
   (``replicator.datapath.app``);
6. the heartbeats loops (``replicator.control.heartbeats``);
7. per flow: its streaming query, then its topic-refresh loop, its catch-up
   progress loop (``replicator.datapath.catchup``) and its control loops
   (checkpoints, group offset sync, topic config and ACL sync:
   ``replicator.control.plane``).

Every loop of steps 6 and 7 runs on a daemon thread of the driver in
``replicator.control.loop.run_loop``, the one retry policy: a loop that cannot
start yet is tried again, a failed round is logged and the next one runs. The
main thread then supervises the queries every half second until the signal.

On SIGTERM / Ctrl-C it stops, in this order: the queries (no new batch is
planned; the running one finishes within 10 s or is abandoned and replayed from
the checkpoint on restart: duplicates, never loss; a real-time query stops at once and
resumes exactly where the target acknowledged, or on a cluster, where the driver cannot
read that, waits up to its checkpoint interval plus 2 s for a checkpoint), then every loop, which
flushes its producers on the way out (heartbeats, checkpoints), then one summary
line per flow, then Spark; the exit code is 0. The queries stop first, before
the loops started after them, so that no topic refresh or supervision round
can start a query again while the rest stops.
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from pathlib import Path

from sparkmirror import logsetup
from replicator.control.heartbeats import HeartbeatEmitter
from replicator.control.loop import run_loop
from replicator.control.offsetsyncs_reader import spark_starting_offsets
from replicator.control.plane import start_control_loops
from replicator.control.topics import TopicSync, ensure_internal_topic
from replicator.datapath import catchup
from replicator.datapath.app import SparkApp
from replicator.datapath.flow import FlowReplicator
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


class ReplicatorService:
    """Everything ``sparkmirror replicate`` runs, for one parsed mm2.properties."""

    def __init__(self, config, checkpoint_dir: Path, settings: ReplicatorSettings | None = None,
                 master: str | None = None, ui: bool = False, metrics_listen: tuple[str, int] | None = None,
                 spark_conf: dict[str, str] | None = None) -> None:
        self.config = config
        self.checkpoint_dir = Path(checkpoint_dir)
        self.settings = settings or ReplicatorSettings()
        self.metrics_listen = metrics_listen
        self.stop_event = threading.Event()
        self.flows: list[FlowReplicator] = []
        self.app = SparkApp(self.flows, self.settings, master=master, ui=ui, spark_conf=spark_conf)
        self.threads: list[threading.Thread] = []

    # --- start ------------------------------------------------------------------------
    def run(self) -> int:
        """Start, supervise until SIGTERM / SIGINT, stop; 0 on a clean stop."""
        enabled = self.config.enabled_flows()
        if not enabled:
            raise ConfigError("no flow is enabled", file=self.config.path,
                              hint="add a line like 'A->B.enabled = true'")
        self._log_start_up_warnings()
        self._install_signal_handlers()
        from replicator.metrics import metrics

        metrics().serve(self.metrics_listen)
        try:
            emitters = self._prepare_heartbeats()
            for f in enabled:
                self.flows.append(self._prepare_flow(f))
            self.app.start()
            for em in emitters:
                self._spawn(f"heartbeats {em.flow.source}->{em.flow.target}", em.run, self.stop_event)
            for fr in self.flows:
                self._start_flow(fr)
            while not self.stop_event.wait(SUPERVISE_EVERY_S):
                self.app.supervise()
            return 0
        finally:
            self._stop()

    def _log_start_up_warnings(self) -> None:
        """What `sparkmirror validate` would warn about, and where this run deliberately differs from MM2."""
        from sparkmirror.model.differences import mm2_differences

        for warning in self.config.warnings:
            log.warning("%s", warning)
        for difference in mm2_differences(self.config):
            log.warning("differs from MM2: %s", difference)

    def _stop_grace(self) -> float:
        """The longest a clean stop lets the running batch finish (any flow may run in real time
        unless --data-path micro-batch)."""
        from replicator.datapath.flow import stop_grace

        spark = getattr(self.app, "spark", None)
        local = spark is None or str(spark.sparkContext.master).startswith("local")  # no JVM call
        return stop_grace(self.settings.data_path != MICRO_BATCH, self.settings.real_time_checkpoint_interval,
                          local=local)

    def _install_signal_handlers(self) -> None:
        def report(name: str) -> None:
            log.info("received %s: stopping; no new batch starts, the running one finishes within %.0f s or is "
                     "abandoned (replayed on restart)", name, self._stop_grace())

        StopSignals(self.stop_event, report).install()

    def _prepare_heartbeats(self) -> list[HeartbeatEmitter]:
        """Heartbeats topics first, so the flows' first topic discovery already sees them."""
        emitters = [HeartbeatEmitter(self.config, f) for f in self.config.flows if f.emit_heartbeats_enabled]
        for em in emitters:
            try:
                em.prepare()
            except SparkmirrorError as exc:
                log.error("heartbeats %s->%s: %s", em.flow.source, em.flow.target, exc)
        return emitters

    def _prepare_flow(self, flow) -> FlowReplicator:
        source_admin, target_admin = admin(self.config, flow.source, flow), admin(self.config, flow.target, flow)
        fr = FlowReplicator(self.config, flow, None, self.checkpoint_dir, self.settings,
                            source_admin=source_admin, target_admin=target_admin,
                            topics=TopicSync(flow, source_admin, target_admin),
                            starting_offsets=partial(spark_starting_offsets, self.config, flow))
        self._ensure_offset_syncs_topic(fr)
        fr.refresh_topics()
        return fr

    @staticmethod
    def _ensure_offset_syncs_topic(fr: FlowReplicator) -> None:
        syncs = fr.offset_syncs
        if not syncs.enabled:
            log.info("flow %s: emit.offset-syncs.enabled = false: no offset-syncs topic (%s on %s) is created or "
                     "written", fr.name, syncs.topic, syncs.cluster)
            return
        adm = fr.source_admin if syncs.cluster == fr.flow.source else fr.target_admin
        ensure_internal_topic(adm, syncs.cluster, syncs.topic, fr.flow.offset_syncs_topic_replication_factor)

    def _start_flow(self, fr: FlowReplicator) -> None:
        fr.start_query()
        if fr.flow.refresh_topics_enabled:
            interval = float(fr.flow.refresh_topics_interval_seconds)
            self._spawn(f"refresh {fr.name}", run_loop, f"topic refresh {fr.name}", interval,
                        partial(self._refresh_topics, fr, interval), self.stop_event, wait_first=True)
        report = catchup.CatchUpReport(fr)
        self._spawn(f"progress {fr.name}", run_loop, f"progress {fr.name}", PROGRESS_EVERY_S, report.step,
                    self.stop_event, wait_first=True)
        start_control_loops(self.config, fr.flow, fr.source_admin, fr.target_admin, lambda: dict(fr.assignment),
                            self.stop_event, self._spawn)

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

    def _spawn(self, name: str, target, *args, **kwargs) -> None:
        """Run ``target`` on a daemon thread named ``"<role> <flow>"`` (e.g. ``refresh A->B``);
        every line it logs carries that flow (``--log-format json``'s ``flow`` field)."""
        flow = name.split(" ", 1)[1] if " " in name and "->" in name else None

        def run():
            logsetup.set_thread_context(flow=flow)
            target(*args, **kwargs)

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    # --- stop -------------------------------------------------------------------------
    def _stop(self) -> None:
        self.app.close()  # first: nothing that stops after this can start a query again
        self.stop_event.set()
        for t in self.threads:
            t.join(LOOP_JOIN_S)
        for fr in self.flows:
            log.info("summary: %s", fr.summary())
        self.app.stop()
