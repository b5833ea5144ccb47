"""The Spark application of a replicate run: one session for every enabled flow.

``start()`` chooses each flow's data path (``pathpolicy``) and starts the
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

from replicator.settings import MICRO_BATCH

log = logging.getLogger("sparkmirror.replicate")


class SparkApp:
    def __init__(self, flows, settings, master: str | None = None, ui: bool = False,
                 spark_conf: dict[str, str] | None = None) -> None:
        self.flows = flows  # the FlowReplicators, in start order
        self.settings = settings  # replicator.settings.ReplicatorSettings: the driver's memory, CDS, log level
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
        from replicator.datapath import pathpolicy, realtime
        from replicator.datapath.spark import DEFAULT_LOCAL_MASTER, build_session, under_spark_submit

        unavailable = None
        if any(fr.data_path != MICRO_BATCH for fr in self.flows):
            unavailable = realtime.writer_available()
        self._writer_unavailable = unavailable
        for fr in self.flows:
            fr.choose_path(unavailable)
        rt_partitions = sum(fr.partitions for fr in self.flows if fr.realtime_eligible)
        cores = os.cpu_count() or 2
        master = self.master
        extra_jars = []
        if rt_partitions or any(fr.data_path != MICRO_BATCH and not fr.flow.exactly_once
                                for fr in self.flows):
            if unavailable is None:
                from replicator.datapath import jvmwriter

                extra_jars.append(str(jvmwriter.ensure_jar()))
        if master is None and not under_spark_submit() and extra_jars:
            master = f"local[{cores + rt_partitions + pathpolicy.SLOT_HEADROOM},4]"
        self.spark = build_session(master, ui=self.ui, conf=self.spark_conf, extra_jars=extra_jars,
                                   settings=self.settings)
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
            if fr is changed or fr.data_path == MICRO_BATCH:
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


def expected_slots(conf) -> int | None:
    """The task slots a cluster application asked for, when its Spark conf says: spark.cores.max
    (standalone), or spark.executor.instances x spark.executor.cores (YARN, Kubernetes; a
    standalone executor takes its Worker's cores unless spark.executor.cores is set), each
    over spark.task.cpus. None when the conf does not say (a standalone application without
    spark.cores.max takes whatever cores the Workers have)."""
    def number(key: str) -> int | None:
        try:
            value = conf.get(key, None)
            return int(value) if value not in (None, "") else None
        except (TypeError, ValueError):
            return None

    task_cpus = number("spark.task.cpus") or 1
    cores_max = number("spark.cores.max")
    if cores_max:
        return max(1, cores_max // task_cpus)
    instances, executor_cores = number("spark.executor.instances"), number("spark.executor.cores")
    if instances and executor_cores:
        return max(1, instances * executor_cores // task_cpus)
    return None


def registered_slots(spark, settle: float = 3.0, wait: float = 30.0,
                     clock=time.monotonic, sleep=time.sleep) -> int:
    """The task slots the application has: its cores.

    Locally they exist with the session. On a cluster (standalone, YARN, Kubernetes) the
    executors register after the application starts, one by one, each as its JVM comes up.
    When the Spark conf says how many slots were asked for (``expected_slots``) the count
    waits for those; otherwise it is taken once at least one executor is there and the
    count has held still for ``settle`` seconds, or for as long as the first executor took
    to come, whichever is longer: executors the cluster started together come up in about
    the same time, so on a slow or busy machine a second one can be seconds behind the
    first. Either way at most ``wait`` seconds (Spark's own
    spark.scheduler.maxRegisteredResourcesWaitingTime default), so the real-time path is
    not refused for want of executors still starting.
    """
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return sc.defaultParallelism

    def executors() -> int:
        try:
            return sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver's block manager is listed too
        except Exception:
            return 1

    expected = expected_slots(sc.getConf())
    started = clock()
    # the settle runs from the last change of either count: one executor of two cores leaves
    # defaultParallelism where it was with none (Spark's floor is 2)
    slots, present, since, first_after = sc.defaultParallelism, 0, started, None
    while clock() - started < wait:
        sleep(0.5)
        now, registered = sc.defaultParallelism, executors()
        if registered > 0 and first_after is None:
            first_after = clock() - started
        if (now, registered) != (slots, present):
            slots, present, since = now, registered, clock()
        if present <= 0:
            continue
        if expected is not None:
            if slots >= expected:
                break
        elif clock() - since >= max(settle, first_after or 0.0):
            break
    log.info("Spark application on %s: %d task slots (%d executors registered%s)", sc.master, slots, executors(),
             f"; {expected} asked for" if expected is not None else "")
    return slots
