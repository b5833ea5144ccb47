"""Single-node Apache Kafka clusters on loopback, for development and tests.

Each cluster is one JVM running broker and controller together (KRaft), or a broker
with a ZooKeeper of its own (``zookeeper=True``, Kafka 3.x only), of the pinned Kafka
version or another (``version``), with its own ports and data directory, ``auto.create.topics.enable=false`` (nothing in sparkmirror may
rely on auto-creation) and the StandardAuthorizer on with
``allow.everyone.if.no.acl.found=true`` so that ACL sync can be tested. Heaps are
sized so that two clusters and Spark fit on a 2-core / 24 GiB machine.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from devenv.kerberos import Kerberos
from devenv.security import MutualTls, SaslSsl
from sparkmirror import artifacts
from sparkmirror.errors import ClusterError

log = logging.getLogger(__name__)

DEFAULT_HEAP = "768m"

_LOG4J2 = """status = error
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
logger.startedzk.name = kafka.server.KafkaServer
logger.startedzk.level = INFO
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class KafkaCluster:
    """One single-node KRaft cluster. ``start()`` returns once it answers metadata."""

    name: str
    port: int
    controller_port: int
    data_dir: Path
    heap: str = DEFAULT_HEAP
    extra_config: dict[str, str] = field(default_factory=dict)
    #: None: PLAINTEXT (the default). Otherwise clients must use SASL_SSL with these users and CA.
    sasl_ssl: SaslSsl | None = None
    #: None: as above. Otherwise clients must use SSL with a certificate this CA signed.
    mtls: MutualTls | None = None
    #: None: as above. Otherwise a GSSAPI listener beside PLAINTEXT (devenv.kerberos).
    kerberos: Kerberos | None = None
    #: None: a fresh random id at format time. Nodes of one multi-node cluster share theirs.
    cluster_id: str | None = None
    #: The Kafka release the broker runs (artifacts.COMPAT_VERSIONS holds the other tested ones).
    version: str = artifacts.KAFKA_VERSION
    #: True: a ZooKeeper-mode broker (Kafka 3.x), with its own ZooKeeper started and stopped with it.
    zookeeper: bool = False
    process: subprocess.Popen | None = None
    pid: int | None = None
    zookeeper_port: int | None = None
    _zookeeper_process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def server_properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir / "log"),
            "auto.create.topics.enable": "false",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            # The replicator connects as ANONYMOUS on PLAINTEXT; once ACL sync writes
            # ACLs for a topic, only super users keep full access to it.
            "super.users": "User:ANONYMOUS",
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "8",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Records of up to 1 MB plus headers must fit; topic-level
            # max.message.bytes can still be lowered to test rejection.
            "message.max.bytes": "4194304",
            "replica.fetch.max.bytes": "4194304",
            "log.retention.check.interval.ms": "5000",
            "log.cleaner.backoff.ms": "1000",
            "num.network.threads": "2",
            "num.io.threads": "4",
        }
        if self.zookeeper:
            for key in ("process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"):
                del props[key]
            props.update({
                "broker.id": "1",
                "zookeeper.connect": f"127.0.0.1:{self.zookeeper_port}",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            })
            for key in [k for k in props if k.startswith("share.")]:
                del props[key]
        if self.sasl_ssl is not None:
            props.update(self.sasl_ssl.broker_properties(self.port, self.controller_port))
        if self.mtls is not None:
            props.update(self.mtls.broker_properties(self.port, self.controller_port))
        if self.kerberos is not None:
            props.update(self.kerberos.broker_properties(self.port, self.controller_port))
        props.update(self.extra_config)
        return props

    def client_config(self, user: str | None = None, password: str | None = None) -> dict[str, str]:
        """confluent-kafka settings besides bootstrap.servers: none for PLAINTEXT, SASL_SSL or SSL
        with a client certificate otherwise."""
        if self.mtls is not None:
            return self.mtls.librdkafka(user or "mirror")
        if self.sasl_ssl is None:
            return {}
        return self.sasl_ssl.librdkafka(*([user] if user else []), password=password)

    def _java(self, main: str, *args: str, **popen) -> subprocess.Popen:
        jars = artifacts.ensure(artifacts.kafka_broker_jars(self.version))
        cmd = [
            artifacts.java_binary(),
            "-Xms256m", f"-Xmx{self.heap}",
            "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            *([self.kerberos.kdc.java_option()] if self.kerberos is not None else []),
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp", jars.classpath(), main, *args,
        ]
        return subprocess.Popen(cmd, **popen)

    def format(self) -> None:
        """Write the config and format the storage (once per data dir)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "server.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log_file=self.log_file))
        if self.zookeeper or (self.data_dir / "log" / "meta.properties").exists():
            return  # a ZooKeeper-mode broker registers itself; nothing to format
        cluster_id = self.cluster_id or "-"
        while cluster_id.startswith("-"):  # kafka-storage would read a leading '-' as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        proc = self._java(
            "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(cfg),
            *(self.sasl_ssl.scram_arguments() if self.sasl_ssl else []),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise ClusterError(f"formatting Kafka storage failed: {out.strip()}", cluster=self.name)

    def start(self, timeout: float = 90.0, detach: bool = False) -> "KafkaCluster":
        for port in (self.port, self.controller_port):
            if _port_open(port):
                raise ClusterError(
                    f"port {port} is already in use",
                    cluster=self.name,
                    hint="stop what listens there (sparkmirror dev down?) or choose other ports",
                )
        if self.zookeeper:
            self._start_zookeeper()
        self.format()
        out = open(self.data_dir / "stdout.log", "ab")
        self.process = self._java(
            "kafka.Kafka", str(self.data_dir / "server.properties"),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=detach,
        )
        self.pid = self.process.pid
        (self.data_dir / "pid").write_text(str(self.pid))
        self.wait_ready(timeout)
        return self

    def _start_zookeeper(self) -> None:
        if not self.version.startswith(("2.", "3.")):
            raise ClusterError(f"Kafka {self.version} has no ZooKeeper mode (removed in 4.0)", cluster=self.name)
        if self.zookeeper_port is None:
            self.zookeeper_port = free_port()
        zk_dir = self.data_dir / "zookeeper"
        zk_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(_LOG4J2.format(log_file=self.log_file))
        # ZooKeeper ships in Kafka 3.x's own dependencies; its admin server would take port 8080.
        self._zookeeper_process = self._java(
            "-Dzookeeper.admin.enableServer=false", "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.zookeeper_port), str(zk_dir),
            stdout=open(self.data_dir / "zookeeper.log", "ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not _port_open(self.zookeeper_port):
            if self._zookeeper_process.poll() is not None or time.monotonic() > deadline:
                raise ClusterError(f"ZooKeeper did not start; see {self.data_dir / 'zookeeper.log'}", cluster=self.name)
            time.sleep(0.2)

    def wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0, "logger": _quiet,
                             **self.client_config()})
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ClusterError(
                    f"Kafka exited with code {self.process.returncode} during startup; see {self.data_dir / 'stdout.log'}",
                    cluster=self.name,
                )
            if _port_open(self.port):
                try:
                    md = admin.list_topics(timeout=2)
                    if md.brokers and self._groups_ready():
                        return
                except Exception as exc:  # not ready yet
                    last = exc
            time.sleep(0.2)
        raise ClusterError(f"Kafka did not answer metadata within {timeout:.0f}s ({last})", cluster=self.name)

    def _groups_ready(self) -> bool:
        """Whether every partition of __consumer_offsets has loaded: a group request to a
        partition still loading fails with COORDINATOR_LOAD_IN_PROGRESS, which librdkafka's
        offset commit does not retry. One probe group per partition (Kafka places a group by
        its name's Java hashCode). The probe runs in a child process: librdkafka's
        DescribeGroups can abort the whole process when a FindCoordinator request times out
        while a multi-node quorum is forming (confluentinc/librdkafka#4605)."""
        partitions = int(self.server_properties().get("offsets.topic.num.partitions", "50"))
        request = json.dumps({"config": {"bootstrap.servers": self.bootstrap, **self.client_config()},
                              "groups": _probe_groups(partitions)})
        try:
            done = subprocess.run([sys.executable, "-m", "devenv.groupprobe"], input=request, text=True,
                                  capture_output=True, timeout=45, cwd=Path(__file__).resolve().parent.parent)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def is_running(self) -> bool:
        pid = self.pid or self._pid_from_file()
        if not pid:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    def _pid_from_file(self) -> int | None:
        f = self.data_dir / "pid"
        try:
            return int(f.read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self, timeout: float = 30.0, kill: bool = False) -> None:
        """Stop the JVM (SIGTERM, then SIGKILL after ``timeout``). Data is kept."""
        pid = self.pid or self._pid_from_file()
        if not pid:
            return
        try:
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None:
                if self.process.poll() is not None:
                    break
            elif not self.is_running():
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.process is not None:
                self.process.wait(10)
        self.process = None
        self.pid = None
        try:
            (self.data_dir / "pid").unlink()
        except FileNotFoundError:
            pass
        if self._zookeeper_process is not None:
            self._zookeeper_process.terminate()
            try:
                self._zookeeper_process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._zookeeper_process.kill()
            self._zookeeper_process = None


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _probe_groups(partitions: int) -> list[str]:
    """A group name per __consumer_offsets partition (Kafka's Utils.abs(hashCode) % partitions)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"sparkmirror-ready-{i}"
        found.setdefault((_java_hash(name) & 0x7FFFFFFF) % partitions, name)
        i += 1
    return [found[p] for p in range(partitions)]


class _QuietLogger:
    """librdkafka logger that drops connection-refused noise while a broker starts."""

    def log(self, *_args, **_kwargs) -> None:
        pass


_quiet = _QuietLogger()
