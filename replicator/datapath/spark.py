"""The Spark session the replicator runs in.

Locally (``--master local[*,4]``, the default) sparkmirror starts Spark itself with
the pinned spark-sql-kafka-0-10 connector jars from the cache. Under
``spark-submit`` the session already exists and its master and jars come from the
submit command (see README: ``--packages org.apache.spark:spark-sql-kafka-0-10_2.13``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from sparkmirror import artifacts
from replicator.datapath import scratch
from replicator.datapath.cds import java_options as cds_options
from replicator.settings import ReplicatorSettings
from sparkmirror import logsetup

log = logging.getLogger(__name__)


#: ``local[*]`` gives a failed task no second attempt (maxFailures = 1): one lost
#: Python worker would fail the whole batch and the query. ``local[*,4]`` retries a
#: task up to 4 times, as spark.task.maxFailures does on a cluster; a retried write
#: task copies its partition's records again (duplicates, never loss).
DEFAULT_LOCAL_MASTER = "local[*,4]"

#: Spark writes a streaming checkpoint's offset-log and commit-log entries through Hadoop's
#: FileContext API by default. Without Hadoop's native library (pyspark ships none) its local
#: file system resolves every path with `stat`/`readlink` child processes and sets permissions
#: with `chmod` ones, and a real-time batch boundary writes two entries while no task reads.
#: Spark's FileSystem-based manager (its own fallback for file systems without FileContext)
#: writes the same files, temp file then rename, with one `chmod` process per file.
#: ``LocalCheckpointFileManager`` (in the writer jar) is that manager creating its local files
#: through a file system that sets the same modes with java.nio, with no child process ("Checkpoint
#: files without child processes" in bench/NOTES.md); it is used where sparkmirror puts the
#: writer jar on Spark's classpath itself. A user's --conf for the key wins.
CHECKPOINT_FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
SPARK_CHECKPOINT_FILE_MANAGER = \
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
LOCAL_CHECKPOINT_FILE_MANAGER = "sparkmirror.LocalCheckpointFileManager"


def session_conf(conf: dict[str, str] | None, writer_jar: bool = False) -> dict[str, str]:
    """The caller's Spark settings (--conf) with sparkmirror's defaults under them.
    ``writer_jar``: sparkmirror put the writer jar on the session's classpath."""
    out = dict(conf or {})
    out.setdefault(CHECKPOINT_FILE_MANAGER_KEY,
                   LOCAL_CHECKPOINT_FILE_MANAGER if writer_jar else SPARK_CHECKPOINT_FILE_MANAGER)
    return out


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


@contextlib.contextmanager
def jvm_in_its_own_session():
    """Start the Spark driver JVM that PySpark launches in a session of its own.

    A stop signal sent to the replicator's whole process group — systemd's default
    ``KillMode=control-group``, ``kill -- -PGID``, a terminal's Ctrl-C — would otherwise also
    reach the JVM and its Python workers: the JVM runs its shutdown hooks at once and the
    running batch dies under the replicator's clean stop. In its own session only the
    replicator gets the signal and stops Spark in order. The JVM still never outlives the
    replicator: PySpark's gateway exits when its stdin, a pipe from this process, closes.
    PySpark takes ``popen_kwargs`` for its gateway's ``Popen`` but its session builder does
    not pass any, so the launcher its ``SparkContext`` calls is wrapped for the one start.
    """
    import pyspark.core.context as context

    launch = context.launch_gateway

    def launch_in_own_session(conf=None, popen_kwargs=None):
        return launch(conf, {**(popen_kwargs or {}), "start_new_session": True})

    context.launch_gateway = launch_in_own_session
    try:
        yield
    finally:
        context.launch_gateway = launch


def build_session(master: str | None = None, app_name: str = "sparkmirror", ui: bool = False,
                  conf: dict[str, str] | None = None, extra_jars: list[str] | None = None, cds: bool = True,
                  settings: ReplicatorSettings | None = None):
    """The Spark session. ``cds``: map the driver JVM's classes from the class-data archive when
    there is one and ``settings`` allow it (``replicator.datapath.cds``; not under spark-submit,
    whose launcher starts the JVM). ``settings``: the driver's memory and Spark's log level."""
    settings = settings or ReplicatorSettings()
    # Executors must run the same interpreter (and so the same packages) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        jars = [*artifacts.ensure(artifacts.SPARK_KAFKA).jars(), *(extra_jars or ())]
        builder = (
            builder.master(master or DEFAULT_LOCAL_MASTER)
            .config("spark.jars", ",".join(str(j) for j in jars))
            .config("spark.driver.memory", settings.driver_memory)
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
        )
    elif master:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.metricsEnabled", "true")
        # one Spark task per Kafka partition keeps per-partition order
        .config("spark.sql.adaptive.enabled", "false")
    )
    from replicator.datapath.jvmwriter import JAR_PREFIX

    writer_jar = not under_spark_submit() and any(Path(j).name.startswith(JAR_PREFIX) for j in extra_jars or ())
    conf = session_conf(conf, writer_jar=writer_jar)
    if not under_spark_submit():
        # the driver's scratch files in a directory of this process's own, which the next
        # replicator removes if this one is killed before the JVM could (scratch.py)
        for k, v in scratch.spark_options(conf).items():
            conf[k] = f"{conf[k]} {v}" if conf.get(k) else v
        options = dict(logsetup.spark_log4j_options())  # JSON logs from the JVM too
        krb5 = kerberos_java_option(conf)
        if krb5:
            key = "spark.driver.extraJavaOptions"
            options[key] = f"{options[key]} {krb5}" if options.get(key) else krb5
        if cds and (archive := cds_options(settings.class_data_archive)):
            key = "spark.driver.extraJavaOptions"
            options[key] = f"{options[key]} {archive}" if options.get(key) else archive
        for k, v in options.items():
            conf[k] = f"{conf[k]} {v}" if conf.get(k) else v
    for k, v in conf.items():
        builder = builder.config(k, v)
    # PySpark's SparkContext replaces the SIGINT handler with one that cancels every Spark job
    # and raises KeyboardInterrupt: a Ctrl-C would abandon the running batch (and stop a
    # real-time query mid-batch) under the replicator's clean stop. The handler there before
    # is put back.
    main = threading.current_thread() is threading.main_thread()
    on_sigint = signal.getsignal(signal.SIGINT) if main else None
    if under_spark_submit():
        spark = builder.getOrCreate()
    else:
        with jvm_in_its_own_session():
            spark = builder.getOrCreate()
    if on_sigint is not None:
        signal.signal(signal.SIGINT, on_sigint)
    spark.sparkContext.setLogLevel(settings.spark_log_level or "ERROR")
    if settings.spark_log_level is None:
        _quiet_fault_loggers(spark)
    return spark


def kerberos_java_option(conf: dict[str, str]) -> str | None:
    """``-Djava.security.krb5.conf`` for the driver JVM when ``KRB5_CONFIG`` names a Kerberos
    config: librdkafka's kinit reads that variable, Java does not, and both sides of the copy
    must find the same realm. None when it is unset or the Spark config already names one."""
    path = os.environ.get("KRB5_CONFIG", "").strip()
    if not path or "java.security.krb5.conf" in conf.get("spark.driver.extraJavaOptions", ""):
        return None
    return f"-Djava.security.krb5.conf={path}"


#: Spark loggers that print a multi-page Java stack trace for faults sparkmirror
#: handles and reports itself in one line: a failed task attempt that Spark retries
#: (the flow logs the retried attempts after the batch) and a failed query (the flow
#: logs the cause and restarts it from its checkpoint). ``spark_log_level`` (settings)
#: brings them back for debugging.
QUIET_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    # A real-time query stopped between its checkpoints aborts the running batch (it is
    # replayed on the next start) and this logs the abort at ERROR.
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
)


def _quiet_fault_loggers(spark) -> None:
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in QUIET_LOGGERS:
            configurator.setLevel(name, off)
    except Exception as exc:  # another log4j setup under spark-submit: keep Spark's own logging
        log.debug("could not quiet Spark's fault loggers: %s", exc)


#: What Spark logs at ERROR when a real-time query is stopped on purpose while its long-lived
#: tasks run: each task is interrupted and its uncommitted batch aborted (replayed on the next
#: start). Silenced only while sparkmirror stops such a query; a failure otherwise is reported
#: by the flow itself.
STOP_NOISE_LOGGERS = (
    "org.apache.spark.util.Utils",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
    "org.apache.spark.scheduler.TaskSetManager",
)


def quiet_stop_noise(spark, quiet: bool, settings: ReplicatorSettings) -> None:
    """Silence (or bring back) the loggers of a stop's expected faults, unless the settings ask
    for Spark's own log level."""
    if settings.spark_log_level is not None:
        return
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        level = jvm.org.apache.logging.log4j.Level.OFF if quiet else jvm.org.apache.logging.log4j.Level.ERROR
        for name in STOP_NOISE_LOGGERS:
            configurator.setLevel(name, level)
    except Exception as exc:
        log.debug("could not set Spark's stop loggers: %s", exc)


def wait_jobs_done(spark, job_group: str, timeout: float) -> bool:
    """Until no job of ``job_group`` (a query's run id) runs: a stopped real-time query's tasks
    run on to the end of their batch."""
    import time

    deadline = time.monotonic() + timeout
    tracker = spark.sparkContext.statusTracker()
    while time.monotonic() < deadline:
        try:
            running = [j for j in tracker.getJobIdsForGroup(job_group)
                       if (info := tracker.getJobInfo(j)) is not None and info.status == "RUNNING"]
        except Exception:
            return False
        if not running:
            return True
        time.sleep(0.05)
    return False
