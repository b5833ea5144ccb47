"""The checkpoint file manager of the replicator's Spark session: Spark's, with modes set by java.nio.

Without Hadoop's native library, Hadoop's local file system runs a ``chmod`` child process
for every file it creates, and a real-time query writes two checkpoint files at every batch
boundary while no task reads. ``sparkmirror.LocalCheckpointFileManager`` writes the same
files (temp file, rename, a ``.crc`` beside each) with the same modes without one: run here
with an empty ``PATH``, where no ``chmod`` can be started, it still works, and Spark's own
manager fails.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from replicator.datapath import spark
from tests.support.jvm_harness import compile_harnesses

@pytest.fixture(scope="module")
def classpath():
    return compile_harnesses("FileSystemHarness")


def _run(classpath: str, manager: str, where: Path, *extra: str) -> subprocess.CompletedProcess:
    java = shutil.which("java")
    assert java, "no java on PATH"
    # no PATH: a file system that starts `chmod` cannot find it
    return subprocess.run([java, "-cp", classpath, "sparkmirror.FileSystemHarness", manager, str(where), *extra],
                          env={"PATH": "", "HOME": str(where)}, capture_output=True, text=True, timeout=120)


def test_checkpoint_entries_get_hadoops_files_and_modes_without_a_child_process(classpath, tmp_path):
    proc = _run(classpath, spark.LOCAL_CHECKPOINT_FILE_MANAGER, tmp_path, "modes")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["class"] == spark.LOCAL_CHECKPOINT_FILE_MANAGER
    assert lines["offsets/0"] == "rw-r--r--"       # 0666 under the umask 022, kept by the rename
    assert lines["content"] == 'v1|{"a":1}'
    assert lines["crc"] == "true"                  # still the checksummed file system
    assert lines["files"] == ".0.crc,0", "the temp file and its checksum were renamed, nothing left over"
    assert lines["failure"] == "IOException", "Spark sees Hadoop's own exception, as from its own manager"
    assert lines["private"] == "rwxr-x---"         # mkdirs with 0750
    assert lines["other"] == "rw-r-----"           # create with 0640
    assert lines["exec"] == "rwx--x--x"            # setPermission 0711


def test_sparks_own_manager_needs_chmod_processes(classpath, tmp_path):
    """What the class is for: Spark's manager, on the same file system, fails where no child
    process can start (and where it can, starts one per file)."""
    proc = _run(classpath, spark.SPARK_CHECKPOINT_FILE_MANAGER, tmp_path)
    assert proc.returncode != 0
    assert "chmod" in proc.stderr
