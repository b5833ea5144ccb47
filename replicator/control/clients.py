"""confluent-kafka clients for one cluster of a flow, built from mm2.properties."""

from __future__ import annotations

import logging

from replicator.model.clients import librdkafka_config
from replicator.model.config import FlowConfig, MM2Config

log = logging.getLogger(__name__)


class _LibrdkafkaLogger:
    """Route librdkafka's own log lines through Python logging at DEBUG."""

    def __init__(self, cluster: str) -> None:
        self._log = logging.getLogger(f"librdkafka.{cluster}")

    def log(self, level, fmt, *args) -> None:
        try:
            self._log.debug(fmt % args if args else fmt)
        except Exception:
            pass


def client_conf(config: MM2Config, alias: str, role: str, flow: FlowConfig | None = None, **extra) -> dict:
    conf = dict(librdkafka_config(config.client_config(alias, role, flow), role, cluster=alias))
    conf.update(extra)
    conf.setdefault("logger", _LibrdkafkaLogger(alias))
    return conf


def admin(config: MM2Config, alias: str, flow: FlowConfig | None = None):
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_conf(config, alias, "admin", flow))


def producer(config: MM2Config, alias: str, flow: FlowConfig | None = None, **extra):
    from confluent_kafka import Producer

    return Producer(client_conf(config, alias, "producer", flow, **extra))
