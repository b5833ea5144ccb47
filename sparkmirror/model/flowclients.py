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
    errors += _one_kerberos_principal(config, result)
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: (e.line or 0, e.message)))
    return result


def _one_kerberos_principal(config: MM2Config, clients: dict[str, list[FlowClient]]) -> list[ConfigError]:
    """An error for every cluster whose Kerberos principal differs from the first one's.

    librdkafka's GSSAPI clients in one process share one ticket cache (``KRB5CCNAME``): each
    client's kinit replaces the cache's ticket with its own principal's, so with two principals
    one cluster's clients would authenticate as the other's, or fail when that realm differs."""
    first: tuple[str, str] | None = None
    errors: list[ConfigError] = []
    for flow_clients in clients.values():
        for client in flow_clients:
            principal = client.librdkafka.get("sasl.kerberos.principal")
            if principal is None or (first is not None and (principal == first[1] or client.cluster == first[0])):
                continue
            if first is None:
                first = (client.cluster, principal)
                continue
            file, line = getattr(config.client_config(client.cluster, client.role), "origins", {}).get(
                "sasl.jaas.config", (None, None))
            error = ConfigError(
                f"`sasl.jaas.config`: Kerberos principal {principal} differs from cluster {first[0]}'s "
                f"{first[1]}: the Kerberos clients of one process share one ticket cache, so one "
                f"cluster's clients would authenticate as the other's principal",
                file=file, line=line, cluster=client.cluster,
                hint="use one principal (and keytab) for every cluster of this file, or run one process per principal")
            if str(error) not in {str(e) for e in errors}:
                errors.append(error)
    return errors
