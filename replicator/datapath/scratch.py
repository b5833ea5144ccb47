"""Where the local Spark driver keeps its scratch files, and clearing what a killed one left.

A Spark driver JVM writes its scratch files under ``spark.local.dir`` (``spark-<uuid>``
with a copy of every ``spark.jars`` jar, and ``blockmgr-<uuid>``) and under
``java.io.tmpdir`` (``artifacts-<uuid>``), both ``/tmp`` by default. It deletes them in its
shutdown hooks, which a JVM killed with SIGKILL (the kernel's OOM killer, ``kill -9``) never
runs: every such death left the jars' copies in ``/tmp`` for good, a slow leak for a replicator that a
supervisor restarts.

Locally (not under ``spark-submit``, and unless the user set ``spark.local.dir``,
``SPARK_LOCAL_DIRS`` or the JVM's ``java.io.tmpdir`` themselves) each replicator process
gives its JVM a directory of its own, ``<tmp>/sparkmirror-scratch-<uid>/<pid>-<random>``, and
holds an exclusive ``flock`` on the ``.owner`` file in it for as long as it lives. The
kernel releases that lock when the process dies, however it dies, so at its start a
replicator removes every sibling directory whose lock it can take: their owners are gone.
A directory whose owner is alive is never touched (two replicators on one machine share the
root safely).
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

OWNER = ".owner"

#: the one directory this process uses (created once, on first use)
_mine: Path | None = None
_lock_fd: int | None = None


def root() -> Path:
    return Path(tempfile.gettempdir()) / f"sparkmirror-scratch-{os.getuid()}"


#: a directory with no ``.owner`` yet is being set up by its process for this long at most
UNOWNED_GRACE_S = 60.0


def _take(lock: Path, create: bool = True) -> int | None:
    """An fd holding ``lock`` exclusively, or None if a live process holds it (or, with
    ``create`` false, if it does not exist)."""
    try:
        fd = os.open(lock, os.O_RDWR | (os.O_CREAT if create else 0) | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def sweep(base: Path | None = None) -> tuple[int, int]:
    """Remove the directories under ``base`` whose owner process is gone.
    Returns (directories removed, bytes freed)."""
    base = base or root()
    removed = freed = 0
    try:
        entries = list(base.iterdir())
    except OSError:
        return 0, 0
    for d in entries:
        if d == _mine or not d.is_dir() or d.is_symlink():
            continue
        fd = _take(d / OWNER, create=False)
        if fd is None:
            try:
                # no lock file: a process is between creating its directory and locking it,
                # or died there long ago
                if (d / OWNER).exists() or time.time() - d.stat().st_mtime < UNOWNED_GRACE_S:
                    continue  # its owner is alive, or may be
                fd = _take(d / OWNER)
            except OSError:
                continue
            if fd is None:
                continue
        try:
            size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file() and not f.is_symlink())
            shutil.rmtree(d)
            removed += 1
            freed += size
        except OSError as exc:
            log.warning("could not remove %s, the scratch directory of a stopped replicator: %s", d, exc)
        finally:
            os.close(fd)
    return removed, freed


def directory() -> Path:
    """This process's scratch directory, created and locked on first use; before that, the
    directories of replicators that died without cleaning up are removed."""
    global _mine, _lock_fd
    if _mine is not None:
        return _mine
    base = root()
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    # In a shared /tmp another user could have put a symlink or an open directory there first:
    # the sweep removes directories, so only a directory of this user's own, closed to others, is used.
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(f"{base} is not a directory of this user's own that only it can write to "
                      "(remove it, or set TMPDIR elsewhere)")
    removed, freed = sweep(base)
    if removed:
        log.info("removed %d scratch director%s left by stopped replicators under %s (%.1f MB)", removed,
                 "y" if removed == 1 else "ies", base, freed / 1e6)
    d = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base))
    fd = _take(d / OWNER)
    if fd is None:  # cannot happen for a fresh directory of ours; run without one rather than fail
        raise OSError(f"could not lock {d / OWNER}")
    _mine, _lock_fd = d, fd
    atexit.register(_remove_mine)
    return d


def _remove_mine() -> None:
    """On a normal exit: the JVM has deleted its own files by now (or does as it exits);
    the directory goes too. After a SIGKILL the next replicator's sweep removes it."""
    global _mine, _lock_fd
    if _mine is not None:
        shutil.rmtree(_mine, ignore_errors=True)
    if _lock_fd is not None:
        os.close(_lock_fd)
    _mine = _lock_fd = None


def spark_options(conf: dict[str, str]) -> dict[str, str]:
    """The settings that put the local driver's scratch files in this process's directory,
    given the user's own settings (``conf``), which win: nothing is set for what they chose."""
    user_local = "spark.local.dir" in conf or "SPARK_LOCAL_DIRS" in os.environ
    user_tmp = "-Djava.io.tmpdir=" in conf.get("spark.driver.extraJavaOptions", "")
    if user_local and user_tmp:
        return {}
    try:
        d = directory()
    except OSError as exc:
        log.warning("no scratch directory of its own for the Spark driver (%s): it uses %s, and a "
                    "killed driver's files stay there", exc, tempfile.gettempdir())
        return {}
    out = {}
    if not user_local:
        out["spark.local.dir"] = str(d)
    if not user_tmp:
        out["spark.driver.extraJavaOptions"] = f"-Djava.io.tmpdir={d}"
    return out
