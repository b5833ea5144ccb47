"""Source and target clusters of different Kafka versions: what a migration (an old source, a new
target) and a DR pair upgraded one side at a time look like.

One replicator run copies every flow of a set of clusters at once, and one monitor watches them;
for each flow (a version pair) the test checks that records, keys, headers, timestamps and order
are identical, that the offset-syncs are exact, that checkpoints and the group offset sync land,
that topic configs and ACLs are synced (a config the target's version does not know is reported
and left out, not fatal), and that the monitor shows the flow caught up with heartbeats. On the
3.9 target, a record larger than its mirror topic allows stops the flow by name, skipping nothing.

The default run checks the core pairs (3.9 KRaft -> newest, 3.9 on ZooKeeper -> newest, newest
-> 3.9); newest -> newest is what every other test runs. The whole matrix, the previous 4.x line
and the newest broker release included, runs with
``.venv/bin/python -m pytest tests/integration/test_compat_matrix.py -m "compat or not compat" -s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, ResourcePatternType, ResourceType)

from sparkmirror import artifacts
from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.prometheus import MonitorProcess
from tests.support.replicator import Replicator
from tests.support.secured import wait_for_records

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NEWEST = artifacts.KAFKA_VERSION
OLD, PREVIOUS, NEWEST_BROKER = artifacts.COMPAT_VERSIONS
TOPIC, GROUP, PARTITIONS, PER_PARTITION = "orders", "billing", 2, 100
COMMITTED = {0: 40, 1: 100}
#: a topic config Kafka 3.x knows and 4.x does not (removed in 4.0): what a migration meets
OLD_ONLY_CONFIG = ("message.format.version", "3.0")


@dataclass(frozen=True)
class Side:
    alias: str
    version: str
    zookeeper: bool = False

    def __str__(self) -> str:
        return f"{self.version}{' (ZooKeeper)' if self.zookeeper else ''}"


K_OLD, ZK_OLD, K_NEW, K_NEW2 = Side("old", OLD), Side("zk", OLD, True), Side("new", NEWEST), Side("new2", NEWEST)
K_PREV, K_NEWEST = Side("prev", PREVIOUS), Side("newest", NEWEST_BROKER)
CORE = ((K_OLD, K_NEW), (ZK_OLD, K_NEW), (K_NEW, K_OLD))
#: the rest of the matrix, in runs of the core's size: all nine flows in one run, with six
#: brokers and a ZooKeeper on two cores, did not copy within the checks' timeouts
PREVIOUS_LINE = ((K_PREV, K_NEW), (K_NEW, K_PREV), (K_NEW, K_NEW2))
NEWEST_BROKERS = ((K_NEW, K_NEWEST), (K_NEWEST, K_NEW))


_ADMINS: dict[str, AdminClient] = {}


def _admin(cluster) -> AdminClient:
    """One client per cluster, kept: a dropped AdminClient fails its pending futures (_DESTROY)."""
    if cluster.bootstrap not in _ADMINS:
        _ADMINS[cluster.bootstrap] = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    return _ADMINS[cluster.bootstrap]


def _config(path, clusters: dict, pairs) -> object:
    props = {"clusters": ", ".join(clusters)}
    props.update({f"{a}.bootstrap.servers": c.bootstrap for a, c in clusters.items()})
    props.update({f"{s.alias}->{t.alias}.enabled": "true" for s, t in pairs})
    props.update({
        "topics": TOPIC, "groups": GROUP,
        "replication.factor": "1", "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "emit.heartbeats.interval.seconds": "1", "refresh.topics.interval.seconds": "5",
        "emit.checkpoints.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
        "sync.topic.configs.interval.seconds": "5",
        "sync.topic.acls.enabled": "true", "sync.topic.acls.interval.seconds": "5",
        "offset.lag.max": "0",  # a sync per record: offsets and checkpoints translate exactly
    })
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


def _source_topic(cluster, side: Side) -> list[dict]:
    config = {"retention.ms": "7200000"}
    if side.version.startswith("3."):
        config[OLD_ONLY_CONFIG[0]] = OLD_ONLY_CONFIG[1]
    create_topic(cluster.bootstrap, TOPIC, PARTITIONS, config=config)
    base_ms = int(time.time() * 1000) - 600_000
    sent = [{"key": f"{side.alias}-k{p}-{i}".encode(), "value": f"v{p}-{i}".encode() * 3, "partition": p,
             "headers": [("h", f"{p}:{i}".encode()), ("from", side.alias.encode())],
             "timestamp": base_ms + 1000 * i + p}
            for i in range(PER_PARTITION) for p in range(PARTITIONS)]
    produce(cluster.bootstrap, TOPIC, sent)
    committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    committer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    committer.close()
    acl = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    for f in _admin(cluster).create_acls([acl]).values():
        f.result(30)
    return sent


def _check_flow(source, target, s: Side, t: Side, sent: list[dict], replicator: Replicator) -> dict[str, str]:
    """Every check of one flow; the value per check is what was seen (for the printed matrix)."""
    remote = f"{s.alias}.{TOPIC}"
    seen: dict[str, str] = {}
    replicator.wait_until(lambda: remote in _admin(target).list_topics(timeout=10).topics, 120,
                          what=f"{remote} on {t.alias}")
    copied = consume_all(target.bootstrap, remote, expected=len(sent), timeout=120)
    got = sorted((m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in copied)
    want = sorted((r["partition"], i, r["key"], r["value"], r["headers"], r["timestamp"])
                  for p in range(PARTITIONS) for i, r in enumerate(r for r in sent if r["partition"] == p))
    assert got == want, f"{s} -> {t}: the copy differs"
    seen["records"] = f"{len(got)} identical"

    syncs = wait_for_records(source, f"mm2-offset-syncs.{t.alias}.internal", OffsetSync,
                             lambda syncs: {(x.partition, x.upstream_offset) for x in syncs if x.topic == TOPIC} >= {
                                 (p, PER_PARTITION - 1) for p in range(PARTITIONS)}, 60)
    mine = [x for x in syncs if x.topic == TOPIC]
    assert all(x.upstream_offset == x.downstream_offset for x in mine), f"{s} -> {t}: inexact syncs"
    seen["offset-syncs"] = f"{len(mine)} exact"

    exact = {(GROUP, remote, p): (o, o) for p, o in COMMITTED.items()}

    def newest(cps):
        return {(c.group, c.topic, c.partition): (c.upstream_offset, c.downstream_offset) for c in cps
                if c.topic == remote}

    wait_for_records(target, f"{s.alias}.checkpoints.internal", Checkpoint, lambda cps: newest(cps) == exact, 60)
    seen["checkpoints"] = "exact"

    def group_synced():
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(remote, p) for p in COMMITTED])
        result = _admin(target).list_consumer_group_offsets([request])[GROUP].result(30)
        return {tp.partition: tp.offset for tp in result.topic_partitions} == COMMITTED

    replicator.wait_until(group_synced, 60, what=f"group {GROUP} synced to {remote} on {t.alias}")
    seen["group offsets"] = "synced"

    res = ConfigResource(ResourceType.TOPIC, remote)
    configs = _admin(target).describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "7200000", f"{s} -> {t}: retention.ms not synced"
    if s.version.startswith("3.") and not t.version.startswith("3."):
        assert OLD_ONLY_CONFIG[0] not in configs
        replicator.wait_for_log(f"topic config {OLD_ONLY_CONFIG[0]} (set on {TOPIC}) is unknown to cluster {t.alias}", 30)
        seen["topic configs"] = f"synced; {OLD_ONLY_CONFIG[0]} reported"
    else:
        seen["topic configs"] = "synced"

    flt = AclBindingFilter(ResourceType.TOPIC, remote, ResourcePatternType.LITERAL, "User:alice", None,
                           AclOperation.ANY, AclPermissionType.ANY)
    replicator.wait_until(lambda: _admin(target).describe_acls(flt).result(30), 60, what=f"alice's ACL on {remote}")
    seen["ACLs"] = "synced"
    return seen


def _rejected_record(source, target, work) -> str:
    """A record the older target refuses (larger than its mirror topic's max.message.bytes) stops the
    flow with the error naming topic, partition, offset and cluster, and nothing after it is copied."""
    work.mkdir()
    topic = "large"
    create_topic(source.bootstrap, topic, 1)
    create_topic(target.bootstrap, f"{K_NEW.alias}.{topic}", 1, config={"max.message.bytes": "2000"})
    produce(source.bootstrap, topic, [{"key": b"k", "value": b"small-%d" % i} for i in range(3)]
            + [{"key": b"k", "value": b"B" * 5000}] + [{"key": b"k", "value": b"after"}])
    config = work / "mm2.properties"
    config.write_text(f"clusters = {K_NEW.alias}, {K_OLD.alias}\n"
                      f"{K_NEW.alias}.bootstrap.servers = {source.bootstrap}\n"
                      f"{K_OLD.alias}.bootstrap.servers = {target.bootstrap}\n"
                      f"{K_NEW.alias}->{K_OLD.alias}.enabled = true\n{K_NEW.alias}->{K_OLD.alias}.topics = {topic}\n"
                      "replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
                      "checkpoints.topic.replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n")
    rep = Replicator(config, work / "checkpoints", work / "replicator.log").start()
    try:
        code = rep.wait(180)
    finally:
        if rep.running():
            rep.kill9()
    log = rep.log()
    assert code == 1, log[-3000:]
    error = next(line for line in log.splitlines() if line.startswith("sparkmirror: error:"))
    for part in (f"topic {topic}", "partition 0", "offset 3", f"cluster {K_OLD.alias}"):
        assert part in error, error
    mirrored = [m.value() for m in consume_all(target.bootstrap, f"{K_NEW.alias}.{topic}")]
    assert mirrored == [b"small-%d" % i for i in range(len(mirrored))]
    return f"stopped the flow naming offset 3 and cluster {K_OLD.alias}; {len(mirrored)} of 3 records before it copied"


@pytest.mark.parametrize("pairs", [pytest.param(CORE, id="core"),
                                   pytest.param(PREVIOUS_LINE, id="previous-line", marks=pytest.mark.compat),
                                   pytest.param(NEWEST_BROKERS, id="newest-brokers", marks=pytest.mark.compat)])
def test_every_version_pair_copies_syncs_and_is_watched(pairs, tmp_path):
    from devenv.kafka import KafkaCluster, free_port
    from tests.support.clusters import running

    sides = {side.alias: side for pair in pairs for side in pair}
    clusters = {a: KafkaCluster(a, free_port(), free_port(), tmp_path / a, heap="512m", version=side.version,
                                zookeeper=side.zookeeper) for a, side in sides.items()}
    with running(list(clusters.values())):
        sent = {a: _source_topic(clusters[a], sides[a]) for a in {s.alias for s, _ in pairs}}
        config = _config(tmp_path / "mm2.properties", clusters, pairs)
        replicator = Replicator(config, tmp_path / "checkpoints", tmp_path / "replicator.log")
        monitor = MonitorProcess(tmp_path / "monitor", config, "--interval", "0.5", "--groups-interval", "1",
                                 "--metadata-interval", "2")
        rows = []
        with replicator, monitor:
            for s, t in pairs:
                seen = _check_flow(clusters[s.alias], clusters[t.alias], s, t, sent[s.alias], replicator)
                rows.append((s, t, seen))

            def caught_up(status):
                flows = {f["name"]: f for f in status["flows"]}
                for s, t in pairs:
                    flow = flows.get(f"{s.alias}->{t.alias}")
                    topic = flow and next((x for x in flow["topics"] if x["topic"] == TOPIC), None)
                    if not (topic and topic["lag_records"] == 0 and flow["heartbeat"]["received_total"] > 0
                            and flow["offset_sync"]["received_total"] > 0):
                        return None
                return flows

            flows = monitor.wait_for(caught_up, 90, "every flow at lag 0 with heartbeats and offset-syncs")
            assert all(c["up"] for c in monitor.status()["clusters"])
            assert replicator.terminate() == 0
        for s, t, seen in rows:
            flow = flows[f"{s.alias}->{t.alias}"]
            seen["monitor"] = f"{flow['status']}, lag 0"
        log = replicator.log()
        if (K_NEW, K_OLD) in pairs:
            rows.append((K_NEW, K_OLD, {"record the target rejects": _rejected_record(
                clusters[K_NEW.alias], clusters[K_OLD.alias], tmp_path / "rejected")}))
        _ADMINS.clear()  # before the brokers stop: a client left to the GC then waits on them
    width = max(len(f"{s} -> {t}") for s, t, _ in rows)
    print("\nsource -> target (Kafka versions): what each check saw")
    for s, t, seen in rows:
        print(f"{f'{s} -> {t}':<{width}}  " + "; ".join(f"{k}: {v}" for k, v in seen.items()))
    assert "Traceback" not in log
