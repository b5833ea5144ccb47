"""The real-time data path's writer, a small Java class built on first use.

Spark's real-time mode runs no Python in its tasks (Python UDFs, Arrow and the
Python foreach writer are not allowed, or, for foreach, batch rows for seconds), so
the writer that copies each record and derives its offset-sync from the delivery
report is the Java class ``replicator/jvm/sparkmirror/MirrorForeachWriter.java``:
the same rules as the Python writer and ``OffsetSyncEmitter``, run inside the
executors' JVMs.

It is compiled here, once per source version and Spark version, against the jars of
the pinned pyspark and Spark's Kafka connector, with the JDK's ``javac``, into the
download cache (``sparkmirror-writer-<hash>.jar``). Without a ``javac`` the real-time
path is not available and flows run in micro-batches (the caller says so).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from sparkmirror import artifacts

log = logging.getLogger(__name__)

SOURCES = Path(__file__).resolve().parents[1] / "jvm"
CLASS_NAME = "sparkmirror.MirrorForeachWriter"


class Unavailable(Exception):
    """Why the writer jar cannot be had here (the flow runs in micro-batches instead)."""


def _javac() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "javac").exists():
        return str(Path(java_home) / "bin" / "javac")
    return shutil.which("javac")


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


#: the writer jar's file name before its digest (build_session knows it on Spark's jar list by it)
JAR_PREFIX = "sparkmirror-writer-"


def jar_path() -> Path:
    digest = hashlib.sha256(artifacts.SPARK_VERSION.encode())
    for src in _sources():
        digest.update(src.relative_to(SOURCES).as_posix().encode())
        digest.update(src.read_bytes())
    return artifacts.cache_dir() / "jars" / f"{JAR_PREFIX}{digest.hexdigest()[:12]}.jar"


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def ensure_jar() -> Path:
    """The writer jar, compiled now if the cache does not hold it yet; raises Unavailable."""
    target = jar_path()
    if target.exists():
        return target
    sources = _sources()
    if not sources:
        raise Unavailable(f"the writer's Java sources are missing from {SOURCES}")
    javac = _javac()
    if javac is None:
        raise Unavailable("no 'javac' on PATH or in $JAVA_HOME (a JDK 17+ is needed to build the real-time "
                          "writer once; a JRE runs Spark but cannot compile)")
    connector = artifacts.ensure(artifacts.SPARK_KAFKA).directory
    classpath = os.pathsep.join([str(_pyspark_jars() / "*"), str(connector / "*")])
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparkmirror-javac-") as tmp:
        out = Path(tmp) / "classes"
        out.mkdir()
        cmd = [javac, "-nowarn", "--release", "17", "-d", str(out), "-cp", classpath, *map(str, sources)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise Unavailable("javac failed to build the real-time writer: "
                              + (proc.stderr.strip().splitlines() or ["(no output)"])[0][:300])
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: sparkmirror\n\n")
            for cls in sorted(out.rglob("*.class")):
                jar.write(cls, cls.relative_to(out).as_posix())
        os.replace(partial, target)  # atomic: a concurrent build writes the same bytes
    log.info("built the real-time writer %s", target)
    return target
