"""MM2 settings the replicator honours, on one replicator run against the session clusters.

- ``emit.offset-syncs.enabled = false`` (KIP-1031): no offset-syncs topic is created
  or written, even on a source where it cannot be created (a topic whose name
  collides with it blocks it), and, as in MM2, no checkpoints are emitted;
- ``heartbeats.replication.enabled = false`` (KIP-1089): the source's heartbeats
  topic is not replicated when ``topics`` does not match it;
- a new mirror topic gets the source's dynamic cluster-wide default
  (``log.retention.ms`` set on the broker default resource) at creation, with
  topic config sync off;
- ``A.consumer.isolation.level = read_uncommitted`` is overridden (aborted records
  are not copied) and said at start-up, with the other differences from MM2.

Cluster aliases unique to this run keep every internal topic name its own.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RETENTION_MS = "259200000"  # 3 days: the source cluster's dynamic default while this module runs
RECORDS = 20


def _cluster_default(bootstrap: str, *change: str) -> None:
    """kafka-configs --entity-type brokers --entity-default (confluent-kafka cannot name the default resource)."""
    from sparkmirror import artifacts

    cmd = [artifacts.java_binary(), "-Xmx256m", "-cp", artifacts.ensure(artifacts.KAFKA).classpath(),
           "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--entity-type", "brokers",
           "--entity-default", "--alter", *change]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def _topic_config(admin: AdminClient, topic: str, name: str) -> ConfigEntry:
    [fut] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return fut.result(30)[name]


@pytest.fixture(scope="module")
def run(kafka_clusters, tmp_path_factory):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = uuid.uuid4().hex[:8]
    src, dst = f"src{u}", f"dst{u}"
    work = tmp_path_factory.mktemp("mm2-settings")
    src_admin, dst_admin = AdminClient({"bootstrap.servers": primary}), AdminClient({"bootstrap.servers": dr})
    # Kafka refuses a topic whose name equals an existing one with '.' read as '_': the flow's
    # offset-syncs topic can then not be created on the source.
    create_topic(primary, f"mm2-offset-syncs_{dst}_internal")
    _cluster_default(primary, "--add-config", f"log.retention.ms={RETENTION_MS}")
    try:
        topic = f"data-{u}"
        create_topic(primary, topic)
        wait_until(lambda: _topic_config(src_admin, topic, "retention.ms").value == RETENTION_MS, 30, interval=0.5,
                   what="the cluster-wide default to reach the topic's configs")
        aborted = Producer({"bootstrap.servers": primary, "transactional.id": f"aborted-{u}"})
        aborted.init_transactions(30)
        aborted.begin_transaction()
        for i in range(5):
            aborted.produce(topic, key=b"a", value=b"aborted %d" % i)
        aborted.abort_transaction(30)
        produce(primary, topic, [{"key": str(i).encode(), "value": b"v%d" % i} for i in range(RECORDS)])
        config = work / "mm2.properties"
        config.write_text("\n".join([
            f"clusters = {src}, {dst}",
            f"{src}.bootstrap.servers = {primary}",
            f"{dst}.bootstrap.servers = {dr}",
            f"{src}->{dst}.enabled = true",
            f"{src}->{dst}.topics = {topic}",
            f"{src}->{dst}.emit.offset-syncs.enabled = false",
            f"{src}->{dst}.heartbeats.replication.enabled = false",
            f"{src}.consumer.isolation.level = read_uncommitted",
            "replication.factor = 1",
            "heartbeats.topic.replication.factor = 1",
            "checkpoints.topic.replication.factor = 1",
            "emit.heartbeats.interval.seconds = 1",
            "emit.checkpoints.interval.seconds = 2",
            "refresh.topics.interval.seconds = 5",
            "sync.topic.configs.enabled = false",
            "sync.topic.acls.enabled = false",
        ]) + "\n")
        rep = Replicator(config, work / "checkpoints", work / "replicator.log").start()
        try:
            mirror = f"{src}.{topic}"
            rep.wait_until(lambda: mirror in dst_admin.list_topics(timeout=10).topics
                           and len(consume_all(dr, mirror, RECORDS, timeout=5)) == RECORDS, 240,
                           what="the records on dr")
            time.sleep(3)  # a topic refresh and a checkpoint round more
            yield {"primary": primary, "dr": dr, "src": src, "dst": dst, "mirror": mirror, "rep": rep,
                   "src_admin": src_admin, "dst_admin": dst_admin}
        finally:
            rep.terminate()
    finally:
        _cluster_default(primary, "--delete-config", "log.retention.ms")


def test_without_offset_syncs_nothing_is_created_or_written_and_no_checkpoints(run):
    rep = run["rep"]
    assert rep.running(), rep.log()[-3000:]
    assert f"mm2-offset-syncs.{run['dst']}.internal" not in run["src_admin"].list_topics(timeout=10).topics
    assert f"{run['src']}.checkpoints.internal" not in run["dst_admin"].list_topics(timeout=10).topics
    log = rep.log()
    assert "no checkpoints are emitted" in log
    assert "offset-syncs failed" not in log and "cannot create internal topic" not in log


def test_heartbeats_topic_not_replicated_when_heartbeats_replication_is_off(run):
    topics = run["dst_admin"].list_topics(timeout=10).topics
    assert "heartbeats" in run["src_admin"].list_topics(timeout=10).topics  # the reverse pair's, to be ignored
    assert f"{run['src']}.heartbeats" not in topics


def test_mirror_topic_gets_the_dynamic_cluster_default_at_creation_without_config_sync(run):
    entry = _topic_config(run["dst_admin"], run["mirror"], "retention.ms")
    assert entry.value == RETENTION_MS
    assert entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_read_uncommitted_is_overridden_and_said_at_start_up(run):
    values = [m.value() for m in consume_all(run["dr"], run["mirror"], timeout=10)]
    assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS))  # the aborted five never crossed
    assert "differs from MM2: " in run["rep"].log()
    assert "isolation.level = read_uncommitted (line " in run["rep"].log()
