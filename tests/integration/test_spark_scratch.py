"""A real local Spark driver keeps its scratch files in the replicator's own directory, and
what a SIGKILL of the driver JVM and of the replicator leaves there is removed by the next
replicator's sweep (replicator.datapath.scratch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from replicator.datapath import scratch
from tests.support.replicator import descendants

ROOT = Path(__file__).resolve().parents[2]

SESSION = """
import time
from replicator.datapath.spark import build_session
spark = build_session()
spark.range(1000).repartition(3).count()  # a shuffle: files under the block manager's directory
print("ready", flush=True)
time.sleep(600)
"""


def test_a_killed_driver_leaves_files_only_in_its_directory_and_the_next_sweep_removes_them(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", SESSION], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
        base = tmp_path / f"sparkmirror-scratch-{os.getuid()}"
        (mine,) = list(base.iterdir())
        assert mine.name.startswith(f"{proc.pid}-")
        kinds = {p.name.split("-", 1)[0] for p in mine.iterdir()}
        # spark.local.dir: the jars' copies and the block manager; java.io.tmpdir: the artifacts
        assert {"spark", "blockmgr", "artifacts"} <= kinds, sorted(p.name for p in mine.iterdir())
        jvms = [p for p in descendants(proc.pid) if b"java" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert jvms, "no driver JVM under the session's process"
        for pid in jvms:
            os.kill(pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    left = sum(f.stat().st_size for f in mine.rglob("*") if f.is_file())
    assert left > 1_000_000, "a killed JVM leaves its scratch files (the jars' copies) behind"
    removed, freed = scratch.sweep(base)
    assert (removed, freed) == (1, left)
    assert list(base.iterdir()) == []
