"""Every Kafka client sparkmirror opens for a flow, with its settings translated up front.

``validate`` prints them; ``replicate`` translates them before it starts Spark,
so that a JKS truststore, a JAAS line without a password or an unresolvable
``${file:...}`` stops the start with exit 2 and FILE:LINE, instead of failing
after the JVM is up or in a driver thread. No network; the only I/O is the
config providers' (sparkmirror.configfile), reading what a ``${file:...}`` names.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkmirror.errors import ConfigError, ConfigErrors
from sparkmirror.model.clients import spark_kafka_options, translate_librdkafka
from sparkmirror.model.config import FlowConfig, MM2Config


@dataclass(frozen=True)
class FlowClient:
    """One client of one flow: which cluster, which role, why, and its translated settings (not masked)."""

    cluster: str
    role: str
    purpose: str
    librdkafka: dict[str, str]
    dropped: dict[str, str]
    spark_source_options: dict[str, str] | None = None  # only for the consumer of the flow's records


def clients_of(flow: FlowConfig) -> list[tuple[str, str, str]]:
    """(alias, role, purpose) for every client sparkmirror opens for this flow."""
    if not flow.enabled:
        return [(flow.target, "producer", "heartbeats")] if flow.emit_heartbeats_enabled else []
    syncs_on_source = flow.offset_syncs_cluster == flow.source
    clients = [(flow.source, "consumer", "records" + (", offset-syncs" if syncs_on_source else "")),
               (flow.target, "producer", "records, checkpoints, heartbeats"),
               (flow.source, "admin", "topic and ACL listing"),
               (flow.target, "admin", "topic creation, config and group offset sync")]
    if not syncs_on_source:
        clients.append((flow.target, "consumer", "offset-syncs"))
    elif flow.emit_offset_syncs_enabled:  # emit.offset-syncs.enabled = false: nothing writes them
        clients.append((flow.source, "producer", "offset-syncs"))
    return clients


def translate_clients(config: MM2Config) -> dict[str, list[FlowClient]]:
    """Flow name -> its clients; every translation problem of every flow raised together as ConfigErrors."""
    result: dict[str, list[FlowClient]] = {}
    errors: list[ConfigError] = []
    seen: set[str] = set()
    for flow in config.flows:
        clients = []
        for alias, role, purpose in clients_of(flow):
            try:
                java = config.client_config(alias, role, flow)
                translation = translate_librdkafka(java, role, cluster=alias)
                spark = spark_kafka_options(java, cluster=alias) if role == "consumer" and alias == flow.source \
                    else None
                clients.append(FlowClient(alias, role, purpose, translation.config, translation.dropped, spark))
            except ConfigError as exc:
                for err in getattr(exc, "errors", [exc]):  # the same line fails for every flow of a cluster
                    if str(err) not in seen:
                        seen.add(str(err))
                        errors.append(err)
        result[flow.name] = clients
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: (e.line or 0, e.message)))
    return result
