"""Java test harnesses compiled against the writer jar, Spark's jars and the Kafka connector."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from sparkmirror import artifacts
from replicator.datapath import jvmwriter

SOURCES = Path(__file__).resolve().parent / "jvm" / "sparkmirror"


def compile_harnesses(*names: str) -> str:
    """Compile ``tests/support/jvm/sparkmirror/<name>.java`` for each name; returns the classpath
    to run them with (the harness classes first, then the writer jar and the jars it needs)."""
    try:
        jar = jvmwriter.ensure_jar()
    except jvmwriter.Unavailable as exc:
        pytest.fail(f"the writer jar cannot be built here: {exc}")
    cp = ":".join([str(jar), str(artifacts.ensure(artifacts.SPARK_KAFKA).directory / "*"),
                   str(jvmwriter._pyspark_jars() / "*")])
    out = Path(tempfile.mkdtemp(prefix="harness-"))
    sources = [str(SOURCES / f"{name}.java") for name in names]
    subprocess.run([jvmwriter._javac(), "-nowarn", "-d", str(out), "-cp", cp, *sources], check=True)
    return f"{out}:{cp}"
