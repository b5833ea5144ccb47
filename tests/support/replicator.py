"""Run the real replicator (`sparkmirror replicate`) as a child process in tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.waiting import wait_until


def write_config(path: Path, primary: str, dr: str, extra: dict[str, str] | None = None,
                 flows: tuple[str, ...] = ("primary->dr",)) -> Path:
    props = {
        "clusters": "primary, dr",
        "primary.bootstrap.servers": primary,
        "dr.bootstrap.servers": dr,
        **{f"{f}.enabled": "true" for f in flows},
        "replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5",
        "sync.topic.acls.enabled": "false",
    }
    props.update(extra or {})
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


class Replicator:
    """`sparkmirror replicate CONFIG --checkpoint-dir DIR` with its output in a log file."""

    def __init__(self, config: Path, checkpoint_dir: Path, log_file: Path, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None):
        """``env``: extra environment, e.g. SPARKMIRROR_SPARK_LOG_LEVEL=INFO."""
        self.config, self.checkpoint_dir, self.log_file = config, checkpoint_dir, log_file
        self.env = dict(env or {})
        from devenv.kafka import free_port

        self.metrics_port = free_port()
        self.extra_args = ["--metrics-listen", f"127.0.0.1:{self.metrics_port}", *(extra_args or [])]
        # SPARKMIRROR_TEST_SOURCE=kafka|direct runs the suite against one data path
        if os.environ.get("SPARKMIRROR_TEST_SOURCE") and "--source" not in self.extra_args:
            self.extra_args += ["--source", os.environ["SPARKMIRROR_TEST_SOURCE"]]
        # SPARKMIRROR_TEST_DATA_PATH=micro-batch|auto|real-time: the same for the data path
        if os.environ.get("SPARKMIRROR_TEST_DATA_PATH") and "--data-path" not in self.extra_args:
            self.extra_args += ["--data-path", os.environ["SPARKMIRROR_TEST_DATA_PATH"]]
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Replicator":
        env = dict(os.environ, SPARKMIRROR_DRIVER_MEMORY="1g", **self.env)
        self._out = open(self.log_file, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparkmirror_cli.main", "replicate", str(self.config),
             "--checkpoint-dir", str(self.checkpoint_dir), *self.extra_args],
            stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
        return self

    def metrics_text(self) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            return resp.read().decode()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 120) -> None:
        self.wait_until(lambda: text in self.log(), timeout, interval=0.5, what=f"the replicator to log {text!r}")

    def wait_until(self, condition, timeout: float, *, what: str, interval: float = 1.0, ignoring=(), details=None):
        """``wait_until`` (tests/support/waiting.py) while this replicator runs: its exit ends the
        wait at once, and a failed wait shows ``details()``, its exit code and its log's tail."""
        return wait_until(condition, timeout, interval=interval, what=what, ignoring=ignoring, alive=self.running,
                          details=lambda: (f"{details()}\n" if details else "") + self.state())

    def state(self, tail: int = 4000) -> str:
        """Running or its exit code, and the last ``tail`` characters of its log (for a failure message)."""
        code = self.proc.poll() if self.proc is not None else "not started"
        return f"replicator: {'running' if code is None else f'exited ({code})'}; log:\n{self.log()[-tail:]}"

    def terminate(self, timeout: float = 90, group: bool = False, signum: int = signal.SIGTERM) -> int:
        """SIGTERM, as an operator would; returns the exit code. ``group``: to the whole process
        group, as systemd's default KillMode and ``kill -- -PGID`` do (a terminal's Ctrl-C too,
        with SIGINT)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            if group:
                os.killpg(self.proc.pid, signum)
            else:
                self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        finally:
            self._kill_group()

    def kill9(self) -> None:
        """SIGKILL the driver, its Spark JVM and the JVM's Python workers at once, like a crash."""
        if self.proc is not None:
            self._kill_group()
            self.proc.wait(30)

    def _kill_group(self) -> None:
        # The Spark JVM runs in a session of its own (a group stop signal must not reach it), so
        # the process tree is collected first and every process in it killed with the group.
        tree = descendants(self.proc.pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def __enter__(self) -> "Replicator":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.running():
            self.terminate()
        else:
            self._kill_group()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found
