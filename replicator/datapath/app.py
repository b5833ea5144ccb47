"""The Spark application of a replicate run: one session for every enabled flow.

``start()`` chooses each flow's data path (``realtime.choose_path``) and starts the
Spark session with task slots for it; ``fit(changed)`` moves real-time flows to
micro-batches (and back) when a topic set changed the slots they need;
``supervise()`` looks after every flow's query (``FlowReplicator.check_query``);
``close()`` stops every query for good and ``stop()`` stops Spark. When each of these
runs is ``replicator.service``'s business.
"""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger("sparkmirror.replicate")


class SparkApp:
    def __init__(self, flows, master: str | None = None, ui: bool = False,
                 spark_conf: dict[str, str] | None = None) -> None:
        self.flows = flows  # the FlowReplicators, in start order
        self.master = master
        self.ui = ui
        self.spark_conf = dict(spark_conf or {})
        self.spark = None
        self._slots = 0
        self._writer_unavailable: str | None = None
        self._slots_lock = threading.Lock()

    def start(self) -> None:
        """Choose each flow's data path, then start Spark with task slots for it.

        A real-time query holds one task slot per partition for as long as it runs. Unless
        the master is given, sparkmirror runs ``local[S,4]`` with S = the cores plus the
        real-time partitions plus headroom for new ones (threads, not cores: a real-time
        task mostly waits for records); micro-batch copy tasks stay at one per core.
        """
        from replicator.datapath import realtime
        from replicator.datapath.spark import DEFAULT_LOCAL_MASTER, build_session, under_spark_submit

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
        self._slots = registered_slots(self.spark)
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

    def fit(self, changed) -> None:
        """Flow ``changed`` has a new topic set: choose its data path again with the slots left."""
        with self._slots_lock:
            self._check_slots(changed=changed)

    def supervise(self) -> None:
        """One round of every flow's query supervision (restarts, slow batches, real-time counters);
        a permanent write error raises and stops the run."""
        for fr in self.flows:
            fr.check_query()

    def close(self) -> None:
        """Stop every query for good: the running batch finishes within the grace period or is
        abandoned (replayed on restart); no topic refresh or supervision round starts one again."""
        for fr in self.flows:
            fr.close()

    def stop(self) -> None:
        try:
            if self.spark is not None:
                self.spark.stop()
        except Exception:
            pass


def registered_slots(spark, settle: float = 3.0, wait: float = 30.0) -> int:
    """The task slots the application has: its cores.

    Locally they exist with the session. On a cluster (standalone, YARN, Kubernetes) the
    executors register after the application starts, one by one: their cores are counted
    once at least one executor is there and the count has held still for ``settle``
    seconds (at most ``wait``, Spark's own spark.scheduler.maxRegisteredResourcesWaitingTime
    default), so the real-time path is not refused for want of executors still starting.
    """
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return sc.defaultParallelism

    def executors() -> int:
        try:
            return sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager is listed too
        except Exception:
            return 1

    started = time.monotonic()
    slots, since = sc.defaultParallelism, started
    while time.monotonic() - started < wait:
        time.sleep(0.5)
        now = sc.defaultParallelism
        if now != slots:
            slots, since = now, time.monotonic()
        elif executors() > 0 and time.monotonic() - since >= settle:
            break
    log.info("Spark application on %s: %d task slots (%d executors registered)", sc.master, slots, executors())
    return slots
