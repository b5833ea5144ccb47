"""Run the real Apache MirrorMaker 2 (dedicated mode) — our reference peer.

sparkmirror is checked against MM2 for byte compatibility of the internal topics
and benchmarked side by side with it. This module starts
``org.apache.kafka.connect.mirror.MirrorMaker`` from the pinned jars with an
mm2.properties it is given, logs to a file, and stops it.
"""

from __future__ import annotations

import logging
import signal
import subprocess
from pathlib import Path

from sparkmirror import artifacts

log = logging.getLogger(__name__)

_LOG4J2 = """status = error
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = FILE
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
"""


def single_node_settings() -> dict[str, str]:
    """Replication factors that a one-broker test cluster can satisfy."""
    return {
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }


class MirrorMaker2:
    """One dedicated-mode MM2 process driven by a properties dict."""

    def __init__(self, properties: dict[str, str], work_dir: Path, heap: str = "768m", log_level: str = "INFO"):
        self.properties = properties
        self.work_dir = Path(work_dir)
        self.heap = heap
        self.log_level = log_level
        self.process: subprocess.Popen | None = None

    @property
    def log_file(self) -> Path:
        return self.work_dir / "mm2.log"

    @property
    def config_file(self) -> Path:
        return self.work_dir / "mm2.properties"

    def start(self) -> "MirrorMaker2":
        jars = artifacts.ensure(artifacts.KAFKA)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text("".join(f"{k} = {v}\n" for k, v in self.properties.items()))
        log4j = self.work_dir / "log4j2.properties"
        log4j.write_text(_LOG4J2.format(level=self.log_level, log_file=self.log_file))
        cmd = [
            artifacts.java_binary(), "-Xms256m", f"-Xmx{self.heap}", "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp", jars.classpath(), "org.apache.kafka.connect.mirror.MirrorMaker", str(self.config_file),
        ]
        out = open(self.work_dir / "stdout.log", "ab")
        self.process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.info("Apache MM2 %s started (pid %d, log %s)", artifacts.KAFKA_VERSION, self.process.pid, self.log_file)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        if not self.process:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def log_contains(self, text: str) -> bool:
        try:
            return text in self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return False

    def __enter__(self) -> "MirrorMaker2":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
