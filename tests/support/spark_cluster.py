"""A real Spark standalone cluster on this machine, for the tests that run the replicator on one.

``SparkStandalone`` starts a Master and ``workers`` Workers from the pinned pyspark's own
launcher (``bin/spark-class``), each its own JVM with its own work dir and ports on
loopback and small heaps, and stops them. Every daemon runs in its own process group: the
executors a Worker starts, and their Python workers, are its children, so ``kill_worker``
takes a whole machine's share of the application down at once, as a lost host would.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

from devenv.kafka import free_port
from tests.support.waiting import wait_until


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandalone:
    def __init__(self, root: Path, workers: int = 2, cores: int = 2, memory: str = "1g") -> None:
        self.root = root
        self.cores, self.memory = cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.worker_ports = [(free_port(), free_port()) for _ in range(workers)]
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_DAEMON_MEMORY="256m",
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
        env.pop("PYSPARK_GATEWAY_PORT", None)
        return env

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "ab")
        return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self._env(),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root)

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        self.root.mkdir(parents=True, exist_ok=True)
        self.master = self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                              "--port", str(self.port), "--webui-port", str(self.ui_port)])
        for i in range(len(self.workers)):
            self.start_worker(i)
        try:
            self.wait_for_workers(len(self.workers), timeout)
        except BaseException:
            self.stop()  # a set-up that fails leaves no Master or Worker running
            raise
        return self

    def start_worker(self, i: int) -> None:
        port, ui = self.worker_ports[i]
        work = self.work_dir(i)
        work.mkdir(parents=True, exist_ok=True)
        self.workers[i] = self._launch(f"worker{i}", [
            "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(ui), "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)])

    def work_dir(self, i: int) -> Path:
        return self.root / f"worker{i}"

    def master_ui_port(self) -> int | None:
        """The port the Master's web UI is bound to, from its log: when the chosen one was taken in
        the meantime (another test's Spark UI), Spark binds the next free one; None until it says."""
        log = self.root / "master.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.findall(r"Successfully started service 'MasterUI' on port (\d+)", text)
        return int(found[-1]) if found else None

    def state(self) -> dict:
        """The Master's view (its web UI's /json/): workers, their state, applications."""
        port = self.master_ui_port() or self.ui_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5) as resp:
            return json.loads(resp.read())

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):  # not up yet, or not the Master answering
            return 0

    def wait_for_workers(self, count: int, timeout: float = 120.0) -> None:
        def logs() -> str:
            return "\n".join((self.root / f"{n}.log").read_text(errors="replace")[-1500:]
                             for n in ["master", *(f"worker{i}" for i in range(len(self.workers)))]
                             if (self.root / f"{n}.log").exists())

        wait_until(lambda: self.alive_workers() >= count, timeout, interval=0.5,
                   what=f"Spark standalone: {count} workers alive", details=logs)

    def tasks_per_worker(self) -> list[int]:
        """Tasks each Worker's executors ran for the newest application, from the executors' own
        logs in the work dirs."""
        apps = sorted({d.name for i in range(len(self.workers)) for d in self.work_dir(i).glob("app-*")})
        if not apps:
            return [0] * len(self.workers)
        counts = []
        for i in range(len(self.workers)):
            n = 0
            for log in self.work_dir(i).glob(f"{apps[-1]}/*/stderr"):
                n += log.read_text(errors="replace").count("Running task ")
            counts.append(n)
        return counts

    def kill_worker(self, i: int) -> None:
        """SIGKILL the Worker with its executors and their Python workers (its process group)."""
        proc = self.workers[i]
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        self.workers[i] = None

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in [*self.workers, self.master]:
            if proc is None:
                continue
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
