"""confluent-kafka clients for one cluster of a flow, built from mm2.properties.

The data path and the control plane both make their clients here.
"""

from __future__ import annotations

import logging
import re
import uuid

from sparkmirror.adminproc import AdminProcess
from sparkmirror.logsetup import LibrdkafkaLog
from sparkmirror.model.clients import librdkafka_config
from sparkmirror.model.config import FlowConfig, MM2Config

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


#: librdkafka reports a TLS handshake the broker refused (an untrusted client certificate, a
#: server certificate the client does not trust) as a transport error; its text says which.
_TLS_FAILURE = re.compile(r"SSL handshake failed|ssl/tls alert|certificate verify failed|SSL routines", re.I)


class _ErrorRecorder:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def __call__(self, err) -> None:
        try:
            from confluent_kafka import KafkaError

            if err.code() == KafkaError._AUTHENTICATION or err.code() in (
                    KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED) or _TLS_FAILURE.search(err.str()):
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
    """The cluster's AdminClient, with DescribeConfigs asked from a child process (``ClusterAdmin``)."""
    return cluster_admin_class()(client_conf(config, alias, "admin", flow), f"cluster {alias}")


_CLUSTER_ADMIN = None


def cluster_admin_class():
    """``ClusterAdmin``, defined on first use (confluent-kafka is imported lazily)."""
    global _CLUSTER_ADMIN
    if _CLUSTER_ADMIN is not None:
        return _CLUSTER_ADMIN
    from concurrent.futures import Future

    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    from sparkmirror.adminproc import AdminProcessError, run_admin

    class ClusterAdmin(AdminClient):
        """An AdminClient whose DescribeConfigs requests run in a child process (sparkmirror.adminproc).

        librdkafka aborted the monitor under DescribeConfigs, DescribeCluster and ListGroups
        ("rd_kafka_admin_response_parse: Assertion `rko_result' failed") when a broker came back;
        the driver asks DescribeConfigs for config sync, for new mirror topics and, while a batch
        waits on a cluster, to say why. An abort in the child costs that one request; the driver
        keeps running. The results come back as AdminClient's own do (a completed future per
        resource, ConfigEntry objects), so callers are unchanged. The child starts at the first
        such request and ends with the driver.
        """

        def __init__(self, conf: dict, what: str) -> None:
            super().__init__(conf)
            self._child = AdminProcess(conf, what)

        def describe_configs(self, resources, **kwargs):
            timeout = float(kwargs.get("request_timeout", 30))
            specs = [(int(r.restype.value), r.name) for r in resources]
            futures = {r: Future() for r in resources}
            try:
                answers = run_admin(self._child, _describe_configs, specs, timeout, timeout=timeout + 15)
            except Exception as exc:  # the child failed the whole request, or died twice
                for f in futures.values():
                    f.set_exception(_as_kafka_exception(exc))
                return futures
            for r, (restype, name) in zip(resources, specs):
                ok, value = answers.get((restype, name), (False, (None, "no answer")))
                if ok:
                    futures[r].set_result(value)
                else:
                    futures[r].set_exception(_as_kafka_exception(value))
            return futures

        def close_child(self) -> None:
            self._child.close()

    def _as_kafka_exception(value) -> Exception:
        if isinstance(value, AdminProcessError):
            value = (value.code, str(value))
        if isinstance(value, Exception):
            return value
        code, message = value
        return KafkaException(KafkaError(code, message)) if code is not None else RuntimeError(message)

    _CLUSTER_ADMIN = ClusterAdmin
    return ClusterAdmin


def _describe_configs(admin, specs: list[tuple[int, str]], timeout: float) -> dict:
    """DescribeConfigs of ``(resource type, name)`` pairs, run in the AdminProcess child:
    ``{(type, name): (True, {name: ConfigEntry}) | (False, (error code or None, message))}``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    resources = [ConfigResource(ResourceType(t), n) for t, n in specs]
    futures = admin.describe_configs(resources, request_timeout=timeout)
    out = {}
    for r, (t, n) in zip(resources, specs):
        try:
            out[(t, n)] = (True, futures[r].result(timeout + 5))
        except KafkaException as exc:
            err = exc.args[0]
            out[(t, n)] = (False, (err.code(), err.str()))
        except Exception as exc:
            out[(t, n)] = (False, (None, str(exc)))
    return out


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
