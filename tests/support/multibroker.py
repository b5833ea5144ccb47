"""Three-broker KRaft clusters for the multi-broker fault tests.

Each cluster is three JVMs, every one broker and controller at once (a three-voter
quorum survives the loss of any one node), shaped like production: replication
factor 3 and ``min.insync.replicas=2`` for every topic, internal ones included.
Heaps are small (256 MB) so that two such clusters and Spark fit on a 2-core
machine. Broker sessions keep Kafka's defaults (a killed broker is fenced after
9 s): shorter ones fenced live brokers of a loaded machine.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devenv.kafka import KafkaCluster, free_port
from sparkmirror import artifacts
from tests.support.kafka import wait_for_topic
from tests.support.waiting import wait_until

NODES = 3
HEAP = "256m"

PRODUCTION_SHAPE = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "replica.lag.time.max.ms": "10000",
    # a restarted broker takes its preferred leaderships back soon: one more leader move per fault
    "leader.imbalance.check.interval.seconds": "15",
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
}


@dataclass
class BrokerCluster:
    """One three-node cluster; ``nodes[i]`` has node.id i+1."""

    name: str
    nodes: list[KafkaCluster]
    _admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaCluster:
        return self.nodes[node_id - 1]

    def admin(self) -> AdminClient:
        """One client for the cluster's life (a call's futures need their client alive); it knows
        all three brokers, so any one of them down does not matter."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return self._admin

    def live_bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.is_running())

    def partitions(self, topic: str) -> dict[int, object]:
        """partition -> PartitionMetadata (leader, replicas, isrs), from a live broker."""
        md = AdminClient({"bootstrap.servers": self.live_bootstrap(), "log_level": 0}).list_topics(topic, timeout=10)
        return dict(md.topics[topic].partitions)

    def busiest_leader(self, topic: str, avoid: tuple[int, ...] = ()) -> int:
        """The node that leads the most partitions of ``topic`` (not one of ``avoid``)."""
        counts: dict[int, int] = {}
        for p in self.partitions(topic).values():
            if p.leader > 0 and p.leader not in avoid:
                counts[p.leader] = counts.get(p.leader, 0) + 1
        return max(counts, key=lambda n: (counts[n], -n))

    def create_topic(self, topic: str, partitions: int, config: dict | None = None) -> None:
        admin = self.admin()
        for f in admin.create_topics([NewTopic(topic, partitions, 3, config=config or {})]).values():
            f.result(30)
        wait_for_topic(admin, topic, partitions)

    def kill9(self, node_id: int) -> None:
        self.node(node_id).stop(kill=True)

    def controlled_shutdown(self, node_id: int) -> None:
        """SIGTERM: the broker hands its leaderships over before it exits."""
        self.node(node_id).stop(timeout=60)

    def restart(self, node_id: int) -> None:
        # A loaded 2-core machine took 40-220 s after a kill -9. Starting it at a higher CPU
        # priority made it 6 s alone, but inside ./run test it starved the other five brokers
        # (both clusters stopped answering for minutes): it starts like the others.
        self.node(node_id).start(timeout=300)

    def wait_in_sync(self, topics: list[str], timeout: float = 300.0) -> float:
        """Wait until every partition of ``topics`` has all three replicas in sync; returns seconds."""
        started = time.monotonic()
        isrs: list[dict] = [{}]

        def in_sync() -> bool:
            isrs[0] = {(t, p.id): len(p.isrs) for t in topics for p in self.partitions(t).values()}
            return all(n == NODES for n in isrs[0].values())

        wait_until(in_sync, timeout, interval=1, what=f"cluster {self.name}: every replica of {topics} back in sync",
                   ignoring=Exception,  # a broker restarting: ask again
                   details=lambda: f"in-sync replicas last seen: {isrs[0]}")
        return time.monotonic() - started

    def reassign(self, topic: str, assignment: dict[int, list[int]], timeout: float = 180.0) -> None:
        """Move replicas with Kafka's own kafka-reassign-partitions tool and wait until it is done."""
        plan = {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r}
                                              for p, r in sorted(assignment.items())]}
        path = self.nodes[0].data_dir.parent / f"reassign-{uuid.uuid4().hex[:6]}.json"
        path.write_text(json.dumps(plan))
        self._tool("--execute", "--reassignment-json-file", str(path))
        out = [""]

        def finished() -> bool:
            out[0] = self._tool("--verify", "--reassignment-json-file", str(path))
            return "is still in progress" not in out[0]

        wait_until(finished, timeout, interval=2, what=f"the reassignment of {topic} on {self.name} to finish",
                   details=lambda: out[0])

    def move_leaders_away(self, topic: str, node_id: int) -> list[int]:
        """Every partition of ``topic`` led by ``node_id`` gets another of its replicas as preferred
        leader, and a preferred-leader election moves the leadership there (``node_id`` stays up).
        Returns the partitions moved."""
        admin = self.admin()
        parts = admin.list_topics(topic, timeout=30).topics[topic].partitions
        plan = {}
        for p, meta in parts.items():
            if meta.leader == node_id:
                other = next(b for b in meta.replicas if b != node_id)
                plan[p] = [other] + [b for b in meta.replicas if b != other]
        if plan:
            self.reassign(topic, plan)  # same replicas, another order: done at once
            admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in plan]).result(60)
        return sorted(plan)

    def _tool(self, *args: str) -> str:
        jars = artifacts.ensure(artifacts.KAFKA)
        proc = subprocess.run(
            [artifacts.java_binary(), "-Xmx128m", "-cp", jars.classpath(),
             "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
             "--bootstrap-server", self.live_bootstrap(), *args],
            capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"kafka-reassign-partitions {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def stop(self, kill: bool = False) -> None:
        """Stop every node; ``kill``: SIGKILL at once (a test's throw-away clusters: a graceful
        stop of the last nodes of a quorum waits out its timeout, half a minute each)."""
        for n in self.nodes:
            n.stop(kill=kill)


def three_node_cluster(name: str, base: Path) -> BrokerCluster:
    ports = [(free_port(), free_port()) for _ in range(NODES)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
    cluster_id = "-"
    while cluster_id.startswith("-"):
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    nodes = [
        KafkaCluster(name=name, port=port, controller_port=ctrl, data_dir=base / name / f"node{i + 1}",
                     heap=HEAP, cluster_id=cluster_id,
                     extra_config={**PRODUCTION_SHAPE, "node.id": str(i + 1), "controller.quorum.voters": voters})
        for i, (port, ctrl) in enumerate(ports)
    ]
    return BrokerCluster(name, nodes)


def start_all(clusters: list[BrokerCluster]) -> None:
    """Start every node of ``clusters`` at once: a node answers only once its quorum has a majority."""
    errors: list[BaseException] = []

    def start(n: KafkaCluster) -> None:
        try:
            n.start(timeout=600)  # six JVMs at once on a loaded 2-core machine took over 3 min
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(n,)) for c in clusters for n in c.nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for c in clusters:
            c.stop()
        raise errors[0]
