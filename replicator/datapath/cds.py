"""A class-data sharing archive for the driver's JVM: Spark starts seconds sooner.

Every ``sparkmirror replicate`` in local mode starts a JVM that loads many thousands of
classes (Spark, Scala, Kafka's clients) before its first batch. The JDK can map
classes it loaded once from an archive instead (CDS, ``-XX:SharedArchiveFile``), and
the session and its first job come up sooner ("Replicator start-up" in bench/NOTES.md).
That is time a restarted replicator spends copying nothing, after a crash or a deploy.

``build()`` (run by ``sparkmirror dev fetch``, so by ``./run test`` and ``./run demo``,
and in the container image) starts a session in a child process with
``-XX:ArchiveClassesAtExit``, runs a batch job, a Python streaming data source and
``foreachBatch`` (what the replicator's start-up loads), and lets the JVM write the
archive as it exits; it is written under a temporary name and renamed when complete.
``java_options()`` returns the option that maps it, or nothing when there is no
archive for this Java, pyspark and jar set (the name holds a digest of the three), or
when the ``class_data_archive`` setting is off (``SPARKMIRROR_CDS=off``). A stale or damaged archive costs nothing but the
speed-up: the JVM checks the archive's header and runs without it if it does not match.

Only the driver's JVM is concerned (``local[...]``, where the executors are threads of
it); under ``spark-submit`` the JVM is started by Spark's launcher, not here.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparkmirror import artifacts

log = logging.getLogger(__name__)

#: seconds the JVM gets to write the archive after the training session's Python exits
DUMP_TIMEOUT_S = 180.0
#: the JVM's own messages about the archive, which it prints on stdout
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    """Where the archive for this Java, pyspark and jar set is (or would be)."""
    import pyspark

    digest = hashlib.sha256()
    java = Path(artifacts.java_binary()).resolve()
    st = java.stat()
    digest.update(f"{java}:{st.st_size}:{st.st_mtime_ns}".encode())
    digest.update(f"pyspark {pyspark.__version__} spark {artifacts.SPARK_VERSION}".encode())
    # The JVM refuses an archive whose class path jars changed (by name, size or time), so they
    # name it: a reinstall of pyspark asks for a new archive instead of finding a refused one.
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in [*sorted(jars.glob("*.jar")), *artifacts.SPARK_KAFKA.jars()]:
        st = jar.stat()
        digest.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return artifacts.cache_dir() / "cds" / f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def java_options(enabled: bool = True) -> str:
    """``-XX:SharedArchiveFile=...`` when an archive for this setup exists and ``enabled`` (the
    ``class_data_archive`` setting), else ''."""
    if not enabled:
        return ""
    try:
        path = archive_path()
    except (OSError, ImportError):
        return ""
    if not path.is_file():
        log.debug("no class-data archive at %s: `sparkmirror dev fetch` builds one (Spark starts ~3 s faster)",
                  path)
        return ""
    log.info("driver JVM: classes mapped from the class-data archive %s", path)
    # An archive the JVM refuses after all (see archive_path) would print a warning on stdout,
    # outside the JSON logs: the JVM's own CDS messages are off; it then runs without.
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def build(force: bool = False) -> Path:
    """Build the archive (if absent or ``force``) and return its path. Raises RuntimeError if the
    training session (``cds_training``) fails or the JVM writes no archive."""
    path = archive_path()
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparkmirror-cds-") as work:
        out_path = Path(work) / "training.log"
        with open(out_path, "wb") as out:
            proc = subprocess.run([sys.executable, "-m", "replicator.datapath.cds_training", str(tmp)],
                                  stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)
        text = out_path.read_text(errors="replace")
        pid = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("jvm-pid ")), None)
        if proc.returncode != 0 or pid is None:
            raise RuntimeError(f"the training session failed (exit {proc.returncode}): {text[-2000:]}")
        # The JVM writes the archive when it exits, after the Python that started it.
        deadline = time.monotonic() + DUMP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid) or not tmp.is_file() or tmp.stat().st_size == 0:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"the JVM (pid {pid}) wrote no class-data archive: {text[-2000:]}")
    os.replace(tmp, path)
    for stale in path.parent.glob("spark-driver-*.jsa"):  # for another Java, pyspark or jar set
        if stale != path:
            stale.unlink(missing_ok=True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is gone for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


if __name__ == "__main__":
    print(build(force="--force" in sys.argv))
