"""The mm2.properties model: clusters, replication flows and their effective, typed settings.

parse_config (:mod:`sparkmirror.model.parse`) reads the file's lines (:mod:`sparkmirror.model.properties`), sorts
its keys by level and layers them as MM2 does (:mod:`sparkmirror.model.layering`),
parses each flow setting with its type's parser (:mod:`sparkmirror.model.values`)
and builds the ClusterConfig and FlowConfig of every cluster and ordered pair.
Every problem found on the way, and by the checks of
:mod:`sparkmirror.model.diagnostics`, is collected and raised at once as
ConfigErrors with FILE:LINE.

* A FlowConfig field names its MM2 key, parser and MM2's default (``_setting``):
  the field list below is the catalogue of the flow settings sparkmirror reads.
* MM2Config.client_config gives a client the layered settings; flow consumers
  get ``enable.auto.commit=false`` and ``auto.offset.reset=earliest`` unless set,
  as in MM2.
* Exactly-once is MM2's worker setting on the *target* cluster:
  ``B.exactly.once.source.support = disabled|preparing|enabled`` (``enabled``
  switches it on for every flow into B; ``preparing`` is MM2's rolling-upgrade
  step and still means off), or Connect's connector key for one flow,
  ``A->B.exactly.once.support = requested|required``: ``required`` switches it on
  for that flow whatever B's worker setting says (in MM2 it would only refuse to
  start without it), ``requested`` (the default) follows B's setting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from sparkmirror.errors import ConfigError
from sparkmirror.model.clients import REFERENCE, ROLES, JavaClientConfig
from sparkmirror.model.filters import (DEFAULT_GROUPS, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS, DEFAULT_TOPICS_EXCLUDE,
                                      GroupFilter, TopicFilter)
from sparkmirror.model.layering import DEPRECATED_ALIASES, Layout, client_entries, is_cluster_client_key
from sparkmirror.model.values import (DEFAULT_POLICY, INT32_MAX, INT64_MAX, REPLICATION_FACTOR, at_least, boolean,
                                     choice, interval, java_list, policy_class, regex_list, separator)

@dataclass(frozen=True)
class ConfigWarning:
    """Something MM2 would accept but that is probably not what the user meant."""

    message: str
    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: warning: {self.message}" if self.line else \
            f"{self.file}: warning: {self.message}"


#: Resolves ``${provider:path:key}`` in one client's settings: (settings, config.providers, cluster=...).
ReferenceResolver = Callable[..., JavaClientConfig]

# The filters' defaults (sparkmirror.model.filters), written as mm2.properties lists.
TOPICS_DEFAULT = ", ".join(DEFAULT_TOPICS)
TOPICS_EXCLUDE_DEFAULT = ", ".join(DEFAULT_TOPICS_EXCLUDE)
GROUPS_DEFAULT = ", ".join(DEFAULT_GROUPS)
GROUPS_EXCLUDE_DEFAULT = ", ".join(DEFAULT_GROUPS_EXCLUDE)
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    "follower.replication.throttled.replicas, leader.replication.throttled.replicas, "
    "message.timestamp.difference.max.ms, log.message.timestamp.before.max.ms, "
    "log.message.timestamp.after.max.ms, message.timestamp.type, "
    "unclean.leader.election.enable, min.insync.replicas"
)
#: MM2's periodic loops: FlowConfig.interval_seconds() takes these names
LOOPS = ("emit.heartbeats", "emit.checkpoints", "sync.group.offsets", "refresh.topics", "refresh.groups",
         "sync.topic.configs", "sync.topic.acls")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]+)")


def _setting(key: str, parse, default: str, description: str, *, hash: bool | None = None):
    """A FlowConfig field read from the MM2 key ``key`` by ``parse``; ``default`` is MM2's default, as
    text; ``description`` says what it does (validate and docs/configuration.md show it).

    The field stays required: the builder always passes the parsed value.
    """
    return field(hash=hash, metadata={"key": key, "parse": parse, "default": default, "description": description})


# ---------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Setting:
    """An effective value and where it came from (``line`` is None for MM2's default)."""

    key: str
    value: str
    line: int | None
    written_as: str | None


@dataclass(frozen=True)
class ClusterConfig:
    """One alias from ``clusters``; ``properties`` are its ``A.*`` keys with the prefix removed."""

    alias: str
    bootstrap_servers: str
    properties: dict[str, str] = field(hash=False, compare=False)
    line: int = 1


@dataclass(frozen=True)
class FlowConfig:
    """The effective settings of one ordered pair source->target (see module doc for layering)."""

    source: str
    target: str
    enabled: bool = _setting("enabled", boolean, "false", "whether the flow copies records (A->B.enabled)")
    topics: list[str] = _setting("topics", regex_list, TOPICS_DEFAULT,
                                 "the source topics the flow replicates: regexes, comma-separated", hash=False)
    topics_exclude: list[str] = _setting("topics.exclude", regex_list, TOPICS_EXCLUDE_DEFAULT,
                                         "topics never replicated, even when `topics` matches them", hash=False)
    groups: list[str] = _setting("groups", regex_list, GROUPS_DEFAULT,
                                 "the consumer groups whose offsets are checkpointed (regexes)", hash=False)
    groups_exclude: list[str] = _setting("groups.exclude", regex_list, GROUPS_EXCLUDE_DEFAULT,
                                         "consumer groups never checkpointed, even when `groups` matches them",
                                         hash=False)
    config_properties_exclude: list[str] = _setting(
        "config.properties.exclude", regex_list, CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
        "topic configs never copied to the mirror topics (regexes)", hash=False)
    replication_policy_class: str = _setting(
        "replication.policy.class", policy_class, DEFAULT_POLICY,
        "how mirror topics are named: DefaultReplicationPolicy (`A.orders`) or IdentityReplicationPolicy "
        "(`orders`)")
    replication_policy_separator: str = _setting("replication.policy.separator", separator, ".",
                                                 "what DefaultReplicationPolicy puts between alias and topic")
    internal_topic_separator_enabled: bool = _setting(
        "replication.policy.internal.topic.separator.enabled", boolean, "true",
        "whether the separator is also used in the internal topics' names (checkpoints, offset-syncs)")
    replication_factor: int = _setting("replication.factor", REPLICATION_FACTOR, "2",
                                       "the replication factor of new mirror topics (-1: the broker default)")
    heartbeats_topic_replication_factor: int = _setting(
        "heartbeats.topic.replication.factor", REPLICATION_FACTOR, "3", "the replication factor of `heartbeats`")
    checkpoints_topic_replication_factor: int = _setting(
        "checkpoints.topic.replication.factor", REPLICATION_FACTOR, "3",
        "the replication factor of `A.checkpoints.internal`")
    offset_syncs_topic_replication_factor: int = _setting(
        "offset-syncs.topic.replication.factor", REPLICATION_FACTOR, "3",
        "the replication factor of `mm2-offset-syncs.B.internal`")
    offset_lag_max: int = _setting("offset.lag.max", at_least(0, maximum=INT64_MAX), "100",
                                   "how far a partition's copy may move before a new offset-sync is written")
    emit_heartbeats_enabled: bool = _setting("emit.heartbeats.enabled", boolean, "true",
                                             "whether heartbeats are written into the target's `heartbeats`")
    emit_heartbeats_interval_seconds: int = _setting("emit.heartbeats.interval.seconds", interval, "1",
                                                     "seconds between two heartbeats (-1: none)")
    emit_checkpoints_enabled: bool = _setting(
        "emit.checkpoints.enabled", boolean, "true",
        "whether consumer group offsets are translated into `A.checkpoints.internal` on the target")
    emit_checkpoints_interval_seconds: int = _setting("emit.checkpoints.interval.seconds", interval, "60",
                                                      "seconds between two rounds of checkpoints")
    sync_group_offsets_enabled: bool = _setting(
        "sync.group.offsets.enabled", boolean, "false",
        "whether translated offsets are also committed to the target's groups (only groups without active "
        "members there)")
    sync_group_offsets_interval_seconds: int = _setting("sync.group.offsets.interval.seconds", interval, "60",
                                                        "seconds between two rounds of group offset sync")
    refresh_topics_enabled: bool = _setting("refresh.topics.enabled", boolean, "true",
                                            "whether new and grown source topics are picked up while running")
    refresh_topics_interval_seconds: int = _setting("refresh.topics.interval.seconds", interval, "600",
                                                    "seconds between two looks for new or grown topics")
    refresh_groups_enabled: bool = _setting("refresh.groups.enabled", boolean, "true",
                                            "whether new consumer groups are picked up while running")
    refresh_groups_interval_seconds: int = _setting("refresh.groups.interval.seconds", interval, "600",
                                                    "seconds between two looks for new consumer groups")
    sync_topic_configs_enabled: bool = _setting("sync.topic.configs.enabled", boolean, "true",
                                                "whether source topic configs are copied to the mirror topics")
    sync_topic_configs_interval_seconds: int = _setting("sync.topic.configs.interval.seconds", interval, "600",
                                                        "seconds between two rounds of topic config sync")
    sync_topic_acls_enabled: bool = _setting("sync.topic.acls.enabled", boolean, "true",
                                             "whether topic ACLs are copied (read-only: ALLOW READ on mirrors)")
    sync_topic_acls_interval_seconds: int = _setting("sync.topic.acls.interval.seconds", interval, "600",
                                                     "seconds between two rounds of ACL sync")
    emit_offset_syncs_enabled: bool = _setting(
        "emit.offset-syncs.enabled", boolean, "true",
        "whether offset-syncs are written; without them no checkpoints and no records lag")
    offset_syncs_topic_location: str = _setting("offset-syncs.topic.location", choice("source", "target"),
                                                "source", "which cluster holds the flow's offset-syncs topic")
    tasks_max: int = _setting("tasks.max", at_least(1, maximum=INT32_MAX), "1",
                              "MM2's task count; sparkmirror checks it and sizes its copy by Spark's cores")
    heartbeats_replication_enabled: bool = _setting(
        "heartbeats.replication.enabled", boolean, "true",
        "whether the source's heartbeats topics are copied too (`A.heartbeats` on B)")
    exactly_once_support: str = "disabled"
    exactly_once_connector: str = "requested"
    props: dict[str, str] = field(default_factory=dict, hash=False, compare=False, repr=False)
    origins: dict[str, tuple[str, int]] = field(default_factory=dict, hash=False, compare=False, repr=False)

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def line_of(self, key: str) -> int | None:
        """The line that set ``key`` for this flow (``topics.exclude`` finds a ``topics.blacklist``)."""
        origin = self.origins.get(DEPRECATED_ALIASES.get(key, key))
        return origin[1] if origin else None

    def interval_seconds(self, loop: str) -> int | None:
        """Seconds between runs of an MM2 loop (``"emit.heartbeats"``...), None when it is off."""
        prefix = loop.replace(".", "_").replace("-", "_")
        if loop not in LOOPS:
            raise ValueError(f"unknown loop {loop!r}; one of {LOOPS}")
        seconds = getattr(self, f"{prefix}_interval_seconds")
        return seconds if getattr(self, f"{prefix}_enabled") and seconds > 0 else None

    @property
    def exactly_once(self) -> bool:
        """Transactions on the target (replicator.datapath.eos_writer): B's worker setting or the flow's."""
        return self.exactly_once_support == "enabled" or self.exactly_once_connector == "required"

    def exactly_once_reason(self) -> str:
        """Which line switched exactly-once on (or why it is off), for validate and the logs."""
        if self.exactly_once_connector == "required":
            line = self.line_of("exactly.once.support")
            return f"{self.name}.exactly.once.support = required" + (f", line {line}" if line else "")
        if self.exactly_once_support == "enabled":
            return f"{self.target}.exactly.once.source.support = enabled"
        if self.exactly_once_support == "preparing":
            return f"{self.target}.exactly.once.source.support = preparing (MM2's upgrade step: not yet on)"
        return "disabled"

    @property
    def policy(self):
        """The ReplicationPolicy object (imported lazily: sparkmirror.model.policy)."""
        from sparkmirror.model.policy import policy_from_config

        return policy_from_config(self.replication_policy_class, self.replication_policy_separator,
                                  self.internal_topic_separator_enabled, source_cluster_alias=self.source)

    @property
    def offset_syncs_cluster(self) -> str:
        """The cluster holding the flow's offset-syncs topic (offset-syncs.topic.location)."""
        return self.target if self.offset_syncs_topic_location == "target" else self.source

    @property
    def offset_syncs_location(self) -> tuple[str, str]:
        """(cluster, topic) of the flow's offset-syncs, as MM2 places them: the topic is named
        after the other cluster of the flow."""
        if self.offset_syncs_topic_location == "target":
            return self.target, self.policy.offset_syncs_topic(self.source)
        return self.source, self.policy.offset_syncs_topic(self.target)

    @property
    def topic_filter(self) -> TopicFilter:
        return TopicFilter(self.topics, self.topics_exclude)

    @property
    def group_filter(self) -> GroupFilter:
        return GroupFilter(self.groups, self.groups_exclude)


# FlowConfig field -> (MM2 key, parser, default), in field order; every default is MM2's.
_FLOW_SETTINGS: dict[str, tuple[str, object, str]] = {
    f.name: (f.metadata["key"], f.metadata["parse"], f.metadata["default"]) for f in fields(FlowConfig)
    if "key" in f.metadata}
FLOW_DEFAULTS: dict[str, str] = {key: default for key, _, default in _FLOW_SETTINGS.values()}
#: MM2 key -> what it does, for every key a FlowConfig field reads.
FLOW_KEY_DESCRIPTIONS: dict[str, str] = {f.metadata["key"]: f.metadata["description"] for f in fields(FlowConfig)
                                         if "key" in f.metadata}
_UNUSED = "; sparkmirror accepts it and does not use it"
#: The other keys MM2's connectors (MirrorSource/Checkpoint/HeartbeatConfig and Connect's
#: ConnectorConfig) define, with what they mean to MM2: valid here, so no warning.
OTHER_CONNECTOR_KEYS: dict[str, str] = {
    "name": "the connector's name in Connect" + _UNUSED,
    "connector.class": "which MM2 connector a Connect config runs" + _UNUSED,
    "tasks.max.enforce": "whether Connect refuses more tasks than tasks.max" + _UNUSED,
    "key.converter": "Connect's key converter (MM2 copies bytes)" + _UNUSED,
    "value.converter": "Connect's value converter (MM2 copies bytes)" + _UNUSED,
    "header.converter": "Connect's header converter (MM2 copies bytes)" + _UNUSED,
    "config.action.reload": "whether Connect restarts a connector on config changes" + _UNUSED,
    "transforms": "Connect single message transforms; sparkmirror copies records unchanged",
    "predicates": "conditions for Connect transforms; sparkmirror copies records unchanged",
    "errors.retry.timeout": "how long Connect retries a failed operation" + _UNUSED,
    "errors.retry.delay.max.ms": "the longest wait between Connect's retries" + _UNUSED,
    "errors.tolerance": "whether Connect skips records it cannot convert; sparkmirror never skips a record",
    "errors.log.enable": "whether Connect logs record errors" + _UNUSED,
    "errors.log.include.messages": "whether Connect's error log shows the records" + _UNUSED,
    "source.cluster.alias": "the source alias of a Connect-run connector (in mm2.properties: the flow's)" + _UNUSED,
    "target.cluster.alias": "the target alias of a Connect-run connector (in mm2.properties: the flow's)" + _UNUSED,
    "admin.timeout.ms": "MM2's timeout for admin requests" + _UNUSED,
    "forwarding.admin.class": "a custom admin client class for MM2's topic and ACL changes" + _UNUSED,
    "metric.reporters": "MM2's JMX metric reporters; sparkmirror exports Prometheus metrics",
    "topic.filter.class": "a custom topic filter class; sparkmirror supports the default filter only",
    "config.property.filter.class": "a custom topic config filter class; sparkmirror supports the default only",
    "group.filter.class": "a custom group filter class; sparkmirror supports the default filter only",
    "consumer.poll.timeout.ms": "how long MM2's source task waits in one poll" + _UNUSED,
    "use.incremental.alter.configs": "whether MM2 syncs topic configs with incremental alters" + _UNUSED,
    "add.source.alias.to.metrics": "whether MM2's metrics carry the source alias" + _UNUSED,
    "metric.names.formats": "MM2's JMX metric names, legacy and/or new (Kafka 4.3+)" + _UNUSED,
    **{old: f"the deprecated name of `{new}`, read as it" for old, new in DEPRECATED_ALIASES.items()},
}
#: Every key MM2's connectors define: the top-level keys that reach every flow.
CONNECTOR_KEYS = frozenset(FLOW_DEFAULTS) | frozenset(OTHER_CONNECTOR_KEYS)


def describe_key(key: str) -> str | None:
    """What an MM2 connector key does, or None for a key MM2's connectors do not define."""
    return FLOW_KEY_DESCRIPTIONS.get(key) or OTHER_CONNECTOR_KEYS.get(key)


def keys_table() -> str:
    """The Markdown table of every connector key (docs/configuration.md)."""
    rows = ["| key | MM2's default | what it does |", "| --- | --- | --- |"]
    for key, description in FLOW_KEY_DESCRIPTIONS.items():
        default, text = FLOW_DEFAULTS[key].replace("|", "\\|"), description.replace("|", "\\|")
        rows.append(f"| `{key}` | `{default}` | {text} |")
    for key, description in OTHER_CONNECTOR_KEYS.items():
        rows.append(f"| `{key}` | | {description} |")
    return "\n".join(rows) + "\n"


@dataclass
class MM2Config:
    """A parsed, validated mm2.properties."""

    path: str
    clusters: dict[str, ClusterConfig]
    flows: list[FlowConfig]
    warnings: list[ConfigWarning] = field(default_factory=list)
    _layout: Layout | None = field(default=None, repr=False)
    _resolve_references: ReferenceResolver | None = field(default=None, repr=False)

    def enabled_flows(self) -> list[FlowConfig]:
        return [f for f in self.flows if f.enabled]

    def flow(self, source: str, target: str) -> FlowConfig:
        for f in self.flows:
            if (f.source, f.target) == (source, target):
                return f
        raise ConfigError(f"no flow {source}->{target}: clusters are {', '.join(self.clusters)}", file=self.path)

    def get(self, key: str, source: str | None = None, target: str | None = None,
            cluster: str | None = None) -> Setting | None:
        """Effective value of ``key`` at top level, for a flow (source+target) or for a cluster."""
        layout = self._layout
        if (source is None) != (target is None):
            raise ValueError("give both source and target, or neither")
        if source is not None:
            flow = self.flow(source, target)
            canonical = DEPRECATED_ALIASES.get(key, key)
            if canonical not in flow.props:
                return None
            written, line = flow.origins.get(canonical, (None, None))
            return Setting(canonical, flow.props[canonical], line, written)
        entry = None
        if cluster is not None:
            self._cluster(cluster)
            entry = layout.cluster_keys[cluster].get(key)
            if entry is None and is_cluster_client_key(key):
                entry = layout.top.get(key)
        else:
            entry = layout.top.get(key)
        return Setting(key, entry.value, entry.line, entry.key) if entry else None

    def client_config(self, alias: str, role: str, flow: FlowConfig | None = None) -> JavaClientConfig:
        """Java client settings MM2 would give cluster ``alias``'s ``role`` client (layering: module doc).

        Config provider references (``${file:...}``) are resolved with the
        providers declared in ``config.providers`` by the resolver the file was
        loaded with (sparkmirror.configfile); an unresolvable one raises. Without
        a resolver they stay as written, and translating the client refuses them.
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        self._cluster(alias)
        if flow is not None and alias not in (flow.source, flow.target):
            raise ConfigError(f"cluster {alias} is not part of flow {flow.name}", file=self.path)
        merged = client_entries(self._layout, alias, role, (flow.source, flow.target) if flow else None)
        values = {k: e.value for k, e in merged.items()}
        if flow and role == "consumer":
            values["enable.auto.commit"] = "false"
            values.setdefault("auto.offset.reset", "earliest")
        config = JavaClientConfig(values, cluster=alias, role=role,
                                  origins={k: (self.path, e.line) for k, e in merged.items()})
        if self._resolve_references and any(REFERENCE.search(v) for v in values.values()):
            config = self._resolve_references(config, self.config_providers(), cluster=alias)
        return config

    def config_providers(self) -> dict[str, str]:
        """``config.providers`` names -> their ``config.providers.<name>.class``."""
        top = self._layout.top
        names = java_list(top["config.providers"].value) if "config.providers" in top else []
        return {n: top[f"config.providers.{n}.class"].value.strip() for n in names
                if f"config.providers.{n}.class" in top}

    def _cluster(self, alias: str) -> ClusterConfig:
        if alias not in self.clusters:
            raise ConfigError(f"unknown cluster {alias!r}; clusters are {', '.join(self.clusters)}", file=self.path)
        return self.clusters[alias]


if __name__ == "__main__":
    import sys

    sys.stdout.write(keys_table())
