"""The two test clusters are real, separate Kafka clusters."""

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.kafka import consume_all, create_topic, produce

pytestmark = pytest.mark.kafka


def test_clusters_are_real_and_independent(kafka_clusters, unique):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    a, b = AdminClient({"bootstrap.servers": primary}), AdminClient({"bootstrap.servers": dr})
    id_a = a.describe_cluster().result(30).cluster_id
    id_b = b.describe_cluster().result(30).cluster_id
    assert id_a and id_b and id_a != id_b

    topic = f"only-on-primary-{unique}"
    create_topic(primary, topic, partitions=3)
    produce(primary, topic, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(30)])
    assert len(consume_all(primary, topic)) == 30
    assert topic in a.list_topics(timeout=10).topics
    assert topic not in b.list_topics(timeout=10).topics


def test_auto_topic_creation_is_off(kafka_clusters, unique):
    from confluent_kafka import Producer

    topic = f"never-created-{unique}"
    p = Producer({"bootstrap.servers": kafka_clusters.dr.bootstrap, "message.timeout.ms": 3000})
    errors = []
    p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None
    assert topic not in AdminClient({"bootstrap.servers": kafka_clusters.dr.bootstrap}).list_topics(timeout=10).topics


def test_authorizer_is_on(kafka_clusters, unique):
    """ACL sync needs an authorizer: creating and describing ACLs must work."""
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    a = AdminClient({"bootstrap.servers": kafka_clusters.primary.bootstrap})
    topic = f"acl-{unique}"
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for f in a.create_acls([binding]).values():
        f.result(30)
    found = a.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                             None, None, AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert [b.principal for b in found] == ["User:alice"]
