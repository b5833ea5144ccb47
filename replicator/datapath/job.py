"""The replicator job: every enabled flow of one mm2.properties in one Spark app.

Lifecycle in one place: build the Spark session, prepare each flow (internal
topics, mirror topics before records), start one streaming query per flow, run
the control-plane loops (heartbeats, topic refresh) on driver threads, and stop
everything cleanly on SIGTERM / Ctrl-C — no new batch is planned, the running one
finishes (or, after 10 s, is abandoned and replayed from the checkpoint: duplicates,
never loss), then the control plane and Spark stop; the exit code is 0.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

from replicator import logsetup
from replicator.control.heartbeats import HeartbeatEmitter
from replicator.control.plane import start_control_loops
from replicator.datapath import catchup
from replicator.datapath.flow import FlowReplicator
from replicator.errors import ConfigError, SparkmirrorError

log = logging.getLogger("sparkmirror.replicate")


class ReplicatorJob:
    def __init__(self, config, checkpoint_dir: Path, master: str | None = None,
                 max_records_per_batch: int | None = None, ui: bool = False,
                 metrics_listen: tuple[str, int] | None = None, spark_conf: dict[str, str] | None = None,
                 source_mode: str = "direct", data_path: str = "auto") -> None:
        self.source_mode = source_mode
        self.data_path = data_path
        self.metrics_listen = metrics_listen
        self.spark_conf = dict(spark_conf or {})
        self.config = config
        self.checkpoint_dir = Path(checkpoint_dir)
        self.master = master
        self.max_records_per_batch = max_records_per_batch
        self.ui = ui
        self.stop_event = threading.Event()
        self.flows: list[FlowReplicator] = []
        self.threads: list[threading.Thread] = []
        self.spark = None
        self._slots = 0
        self._writer_unavailable: str | None = None
        self._slots_lock = threading.Lock()

    def _install_signal_handlers(self) -> None:
        def handler(signum, _frame):
            log.info("received %s: stopping; no new batch starts, the running one finishes within 10 s or is abandoned (replayed on restart)", signal.Signals(signum).name)
            self.stop_event.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)
            signal.signal(signal.SIGINT, handler)

    def _thread(self, name: str, target, *args) -> None:
        """Run ``target`` on a daemon thread named ``"<role> <flow>"`` (e.g. ``refresh A->B``);
        every line it logs carries that flow (``--log-format json``'s ``flow`` field)."""
        flow = name.split(" ", 1)[1] if " " in name and "->" in name else None

        def run(*a):
            logsetup.set_thread_context(flow=flow)
            target(*a)

        t = threading.Thread(target=run, args=args, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def _start_spark(self, build_session) -> None:
        """Choose each flow's data path, then start Spark with task slots for it.

        A real-time query holds one task slot per partition for as long as it runs. Unless
        the master is given, sparkmirror runs ``local[S,4]`` with S = the cores plus the
        real-time partitions plus headroom for new ones (threads, not cores: a real-time
        task mostly waits for records); micro-batch copy tasks stay at one per core.
        """
        from replicator.datapath import realtime
        from replicator.datapath.spark import DEFAULT_LOCAL_MASTER, under_spark_submit

        unavailable = None
        if any(fr.data_path != realtime.MICRO_BATCH for fr in self.flows):
            unavailable = realtime.writer_available()
        self._writer_unavailable = unavailable
        for fr in self.flows:
            fr.choose_path(unavailable)
        rt_partitions = sum(fr.partitions for fr in self.flows if fr.realtime_eligible)
        cores = os.cpu_count() or 2
        master = self.master
        extra_jars = []
        if rt_partitions or any(fr.data_path != realtime.MICRO_BATCH and not fr.flow.exactly_once
                                for fr in self.flows):
            if unavailable is None:
                from replicator.datapath import jvmwriter

                extra_jars.append(str(jvmwriter.ensure_jar()))
        if master is None and not under_spark_submit() and extra_jars:
            master = f"local[{cores + rt_partitions + realtime.SLOT_HEADROOM},4]"
        self.spark = build_session(master, ui=self.ui, conf=self.spark_conf, extra_jars=extra_jars)
        if any(fr.realtime for fr in self.flows):
            try:
                self.spark.sparkContext._jvm.java.lang.Class.forName(
                    "sparkmirror.MirrorForeachWriter", True, self.spark.sparkContext._jvm.Thread.currentThread()
                    .getContextClassLoader())
            except Exception:
                from replicator.datapath import jvmwriter

                self._writer_unavailable = (f"the writer jar is not on Spark's classpath (under spark-submit add "
                                            f"--jars {jvmwriter.jar_path()})")
                for fr in self.flows:
                    fr.choose_path(self._writer_unavailable)
        slots = self.spark.sparkContext.defaultParallelism
        self._slots = slots
        copy_tasks = cores if master is not None and master != (self.master or DEFAULT_LOCAL_MASTER) else None
        for fr in self.flows:
            fr.spark = self.spark
            fr.copy_tasks = copy_tasks
        self._check_slots()

    def _check_slots(self, changed=None) -> None:
        """Real-time flows that no longer fit in the task slots go to micro-batches (and back)."""
        used = 0
        for fr in self.flows:
            if fr is changed or fr.data_path == "micro-batch":
                continue
            if fr.realtime or fr.catching_up_first:
                if used + fr.partitions > self._slots:
                    fr.choose_path(self._writer_unavailable, slots_free=max(self._slots - used, 0))
                else:
                    used += fr.partitions
        if changed is not None:
            changed.choose_path(self._writer_unavailable, slots_free=max(self._slots - used, 0))

    def _refresh_loop(self, flow: FlowReplicator) -> None:
        interval = float(flow.flow.refresh_topics_interval_seconds)
        while not self.stop_event.wait(interval):
            try:
                if flow.refresh_topics():
                    with self._slots_lock:
                        self._check_slots(changed=flow)
                    flow.restart_query()
            except SparkmirrorError as exc:
                log.warning("flow %s: topic refresh failed: %s; next attempt in %.0f s", flow.name, exc, interval)
            except Exception as exc:  # keep refreshing; the next round may succeed
                log.error("flow %s: topic refresh failed: %r", flow.name, exc)

    def _start_control_plane(self, fr: FlowReplicator) -> None:
        """Checkpoints, group offset sync, topic config and ACL sync (replicator.control.plane)."""
        start_control_loops(self.config, fr, self.stop_event, self._thread)

    def _log_start_up_warnings(self) -> None:
        """What `sparkmirror validate` would warn about, and where this run deliberately differs from MM2."""
        from replicator.model.differences import mm2_differences

        for warning in self.config.warnings:
            log.warning("%s", warning)
        for difference in mm2_differences(self.config):
            log.warning("differs from MM2: %s", difference)

    def run(self) -> int:
        enabled = self.config.enabled_flows()
        if not enabled:
            raise ConfigError("no flow is enabled", file=self.config.path,
                              hint="add a line like 'A->B.enabled = true'")
        self._log_start_up_warnings()
        self._install_signal_handlers()
        from replicator.datapath.spark import build_session

        from replicator.datapath.progress import metrics

        metrics().serve(self.metrics_listen)
        try:
            # Heartbeats topics first, so the flows' first topic discovery already sees them.
            emitters = [HeartbeatEmitter(self.config, f) for f in self.config.flows if f.emit_heartbeats_enabled]
            for em in emitters:
                try:
                    em.prepare()
                except SparkmirrorError as exc:
                    log.error("heartbeats %s->%s: %s", em.flow.source, em.flow.target, exc)
            for f in enabled:
                fr = FlowReplicator(self.config, f, None, self.checkpoint_dir, self.max_records_per_batch,
                                    source_mode=self.source_mode, data_path=self.data_path)
                fr.ensure_internal_topics()
                fr.refresh_topics()
                self.flows.append(fr)
            self._start_spark(build_session)
            for em in emitters:
                self._thread(f"heartbeats {em.flow.source}->{em.flow.target}", em.run, self.stop_event)
            for fr in self.flows:
                fr.start_query()
                if fr.flow.refresh_topics_enabled:
                    self._thread(f"refresh {fr.name}", self._refresh_loop, fr)
                self._thread(f"progress {fr.name}", catchup.run, fr, self.stop_event)
                self._start_control_plane(fr)
            while not self.stop_event.wait(0.5):
                for fr in self.flows:
                    fr.check_query()
            return 0
        finally:
            for fr in self.flows:
                fr.close()  # no topic refresh or supervisor round starts the query again
            self.stop_event.set()
            for t in self.threads:
                t.join(10)
            for fr in self.flows:
                log.info("summary: %s", fr.summary())
            try:
                if self.spark is not None:
                    self.spark.stop()
            except Exception:
                pass
