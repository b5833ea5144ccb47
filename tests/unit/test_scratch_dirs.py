"""The local Spark driver's scratch directory: one per replicator process, removed by the next
replicator once its owner is dead however it died (replicator.datapath.scratch).

Real processes and real locks: a child process takes its directory, the test kills it with
SIGKILL (no atexit, no shutdown hook) and sweeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from replicator.datapath import scratch

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import sys, time
from replicator.datapath import scratch
d = scratch.directory()
(d / "blockmgr-1").mkdir()
(d / "blockmgr-1" / "shuffle_0").write_bytes(b"x" * 1000)
print(d, flush=True)
if sys.argv[1] == "wait":
    time.sleep(600)
"""


def _child(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = proc.stdout.readline().strip()
    assert line, "the child printed no directory"
    return proc, Path(line)


def test_a_killed_replicators_directory_is_removed_and_a_live_ones_is_not(tmp_path):
    base = tmp_path / f"sparkmirror-scratch-{os.getuid()}"
    live, live_dir = _child(tmp_path, "wait")
    killed, killed_dir = _child(tmp_path, "wait")
    try:
        assert live_dir.parent == killed_dir.parent == base
        assert live_dir != killed_dir
        assert live_dir.name.startswith(f"{live.pid}-")
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        assert (killed_dir / "blockmgr-1" / "shuffle_0").exists(), "SIGKILL leaves the files behind"
        removed, freed = scratch.sweep(base)
        assert (removed, freed) == (1, 1000)
        assert not killed_dir.exists()
        assert (live_dir / "blockmgr-1" / "shuffle_0").exists(), "a live replicator's files are never touched"
        assert scratch.sweep(base) == (0, 0)
    finally:
        live.kill()
        live.wait(10)
    assert scratch.sweep(base) == (1, 1000)
    assert list(base.iterdir()) == []


def test_a_normal_exit_removes_its_own_directory(tmp_path):
    proc, d = _child(tmp_path, "exit")
    assert proc.wait(10) == 0
    assert not d.exists()


def test_a_directory_being_set_up_is_left_alone_for_a_while(tmp_path):
    """mkdtemp, then the lock: a directory without its lock file yet belongs to a live process."""
    fresh = tmp_path / "123-fresh"
    fresh.mkdir()
    assert scratch.sweep(tmp_path) == (0, 0)
    assert fresh.exists()
    old = time.time() - scratch.UNOWNED_GRACE_S - 5
    os.utime(fresh, (old, old))
    assert scratch.sweep(tmp_path) == (1, 0)
    assert not fresh.exists()


def test_the_users_own_settings_win(monkeypatch, tmp_path):
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setattr(scratch, "_mine", None)
    monkeypatch.setattr(scratch, "_lock_fd", None)
    try:
        opts = scratch.spark_options({})
        d = scratch.directory()
        assert d.parent == tmp_path / f"sparkmirror-scratch-{os.getuid()}"
        assert opts == {"spark.local.dir": str(d), "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={d}"}
        assert scratch.spark_options({"spark.local.dir": "/data/spark"}) == {
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={d}"}
        assert scratch.spark_options({"spark.driver.extraJavaOptions": "-Xss4m -Djava.io.tmpdir=/data/tmp"}) == {
            "spark.local.dir": str(d)}
        monkeypatch.setenv("SPARK_LOCAL_DIRS", "/data/a,/data/b")
        assert scratch.spark_options({"spark.driver.extraJavaOptions": "-Djava.io.tmpdir=/data/tmp"}) == {}
    finally:
        scratch._remove_mine()


def test_a_root_that_is_not_this_users_closed_directory_is_not_used(monkeypatch, tmp_path, caplog):
    """In a shared /tmp someone else may create the root first (a symlink to elsewhere, or a
    directory others can write to): the sweep removes directories, so that root is refused."""
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setattr(scratch, "_mine", None)
    monkeypatch.setattr(scratch, "_lock_fd", None)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "precious").mkdir(parents=True)
    old = time.time() - scratch.UNOWNED_GRACE_S - 5
    os.utime(elsewhere / "precious", (old, old))
    scratch.root().symlink_to(elsewhere)
    assert scratch.spark_options({}) == {}
    assert "not a directory of this user's own" in caplog.text
    assert (elsewhere / "precious").exists()
    scratch.root().unlink()
    scratch.root().mkdir(mode=0o777)
    os.chmod(scratch.root(), 0o777)
    assert scratch.spark_options({}) == {}
    os.chmod(scratch.root(), 0o700)
    try:
        assert scratch.spark_options({})["spark.local.dir"].startswith(str(scratch.root()))
    finally:
        scratch._remove_mine()
