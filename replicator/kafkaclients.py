"""confluent-kafka clients for one cluster of a flow, built from mm2.properties.

The data path and the control plane both make their clients here.
"""

from __future__ import annotations

import logging
import uuid

from sparkmirror.adminproc import AdminProcess
from sparkmirror.logsetup import LibrdkafkaLog
from replicator.model.clients import librdkafka_config
from replicator.model.config import FlowConfig, MM2Config

log = logging.getLogger(__name__)

#: The newest client-level error librdkafka reported per cluster alias (e.g. an
#: authentication failure), so that a timeout can be explained: librdkafka itself
#: answers a metadata request to a cluster that refuses the credentials with
#: "Broker transport failure" only.
_LAST_ERRORS: dict[str, str] = {}


def last_error(alias: str) -> str | None:
    return _LAST_ERRORS.get(alias)


def forget_error(alias: str) -> None:
    """The cluster answered: an earlier authentication error is no longer the explanation."""
    _LAST_ERRORS.pop(alias, None)


class _ErrorRecorder:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def __call__(self, err) -> None:
        try:
            from confluent_kafka import KafkaError

            if err.code() == KafkaError._AUTHENTICATION or err.code() in (
                    KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED):
                _LAST_ERRORS[self.cluster] = err.str()
            log.debug("cluster %s: client error %s", self.cluster, err.str())
        except Exception:
            pass


def client_conf(config: MM2Config, alias: str, role: str, flow: FlowConfig | None = None, **extra) -> dict:
    conf = dict(librdkafka_config(config.client_config(alias, role, flow), role, cluster=alias))
    conf.update(extra)
    conf.setdefault("logger", LibrdkafkaLog(f"librdkafka.{alias}", alias))
    conf.setdefault("error_cb", _ErrorRecorder(alias))
    return conf


def admin(config: MM2Config, alias: str, flow: FlowConfig | None = None):
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_conf(config, alias, "admin", flow))


def group_admin(config: MM2Config, alias: str, flow: FlowConfig | None = None) -> AdminProcess:
    """An AdminClient in a child process, for consumer-group requests: librdkafka can abort the
    process they run in (sparkmirror.adminproc); the driver must outlive that."""
    return AdminProcess(client_conf(config, alias, "admin", flow), f"cluster {alias}")


def producer(config: MM2Config, alias: str, flow: FlowConfig | None = None, **extra):
    from confluent_kafka import Producer

    return Producer(client_conf(config, alias, "producer", flow, **extra))


def watermarks(config, cluster: str, flow, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark of each partition on ``cluster``; a partition that does not answer is left out."""
    from confluent_kafka import Consumer, TopicPartition

    conf = client_conf(config, cluster, "consumer", flow)
    conf.update({"group.id": f"sparkmirror-watermarks-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    consumer = Consumer(conf)
    out: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        for topic, p in partitions:
            try:
                out[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            except Exception as exc:
                log.debug("watermarks of %s[%d] on %s: %s", topic, p, cluster, exc)
    finally:
        consumer.close()
    return out
