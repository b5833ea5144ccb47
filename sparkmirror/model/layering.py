"""Which keys of mm2.properties reach a flow or a client, and in which order they override each other.

sparkmirror reads an existing MM2 file unchanged, so the layering is MM2's own
(``MirrorMakerConfig`` and ``MirrorConnectorConfig`` in Apache Kafka's
connect/mirror module), not a guess:

* **Flow settings** (``topics``, intervals, policy...): ``connectorBaseConfig``
  starts from the top-level keys that are connector settings (plus
  ``replication.policy.*``), then every ``A->B.`` key overrides them. A
  cluster-prefixed connector key such as ``A.topics`` is *not* read for any
  flow (MM2 turns it into ``source.cluster.topics``, which no connector reads);
  the diagnostics warn about it instead of inventing a layer MM2 does not have.
* **Client settings** of cluster A (``clusterProps`` + ``sourceConsumerConfig``
  and friends), weakest first: top-level ``bootstrap.servers``/
  ``security.protocol``/``ssl.*``/``sasl.*`` < ``A.`` versions of those < the
  flow's ``A->B.consumer.*`` < ``A.consumer.*`` (into which MM2 copies A's
  cluster-level security keys, so those beat the flow's unprefixed client keys)
  < the flow's ``A->B.source.consumer.*``. Any other ``A.x`` (``A.acks``) never
  reaches a client.

The functions here pick and order the lines (Entry, so each value keeps the
line it came from); the config model (:mod:`sparkmirror.model.config`) parses
what they pick.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkmirror.model.clients import ROLES
from sparkmirror.model.properties import Entry

#: deprecated name -> the name MM2 reads it as (ConfigUtils.translateDeprecatedConfigs)
DEPRECATED_ALIASES = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}

#: The prefixes of the per-role client keys (``consumer.``, ``producer.``, ``admin.``).
ROLE_PREFIXES = tuple(f"{role}." for role in ROLES)


def is_cluster_client_key(key: str) -> bool:
    """Cluster-level keys MM2 hands to every client of a cluster (CLIENT_CONFIG_DEF)."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


@dataclass
class Layout:
    """Keys sorted by level: top-level, ``A.`` (cluster) and ``A->B.`` (flow), prefixes removed."""

    top: dict[str, Entry]
    cluster_keys: dict[str, dict[str, Entry]]
    flow_keys: dict[tuple[str, str], dict[str, Entry]]
    clusters_line: int


def flow_entries(layout: Layout, source: str, target: str, connector_keys: frozenset[str]) -> dict[str, Entry]:
    """The connector settings of flow source->target: the top-level ones among ``connector_keys``
    (sparkmirror.model.config.CONNECTOR_KEYS), overridden by its ``A->B.`` keys."""
    effective = {k: e for k, e in layout.top.items()
                 if k in connector_keys or k.startswith(("replication.policy.", "config.providers"))}
    effective.update(layout.flow_keys.get((source, target), {}))
    return effective


def client_entries(layout: Layout, alias: str, role: str, flow: tuple[str, str] | None = None) -> dict[str, Entry]:
    """The settings of cluster ``alias``'s ``role`` client, for the flow (source, target) when given."""
    cluster_keys = layout.cluster_keys[alias]
    flow_keys = layout.flow_keys.get(flow, {}) if flow else {}
    base = {k: e for k, e in layout.top.items() if is_cluster_client_key(k)}
    base.update({k: e for k, e in cluster_keys.items() if is_cluster_client_key(k)})
    merged = dict(base)
    merged.update(_strip(flow_keys, f"{role}."))
    merged.update(base)  # MM2 copies the cluster's security keys into A.<role>.* ...
    merged.update(_strip(cluster_keys, f"{role}."))  # ... where A.<role>.* overrides them
    if flow:
        side = "source" if alias == flow[0] else "target"
        merged.update(_strip(flow_keys, f"{side}.{role}."))
    return merged


def _strip(entries: dict[str, Entry], prefix: str) -> dict[str, Entry]:
    return {k[len(prefix):]: e for k, e in entries.items() if k.startswith(prefix)}
