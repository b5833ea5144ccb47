"""The mm2.properties model: clusters, replication flows and their effective, typed settings.

sparkmirror reads an existing MM2 file unchanged, so the layering is MM2's own
(``MirrorMakerConfig`` and ``MirrorConnectorConfig`` in Apache Kafka's
connect/mirror module), not a guess:

* **Flow settings** (``topics``, intervals, policy...): ``connectorBaseConfig``
  starts from the top-level keys that are connector settings (plus
  ``replication.policy.*``), then every ``A->B.`` key overrides them. A
  cluster-prefixed connector key such as ``A.topics`` is *not* read for any
  flow (MM2 turns it into ``source.cluster.topics``, which no connector reads);
  we warn about it instead of inventing a layer MM2 does not have.
* **Client settings** of cluster A (``clusterProps`` + ``sourceConsumerConfig``
  and friends), weakest first: top-level ``bootstrap.servers``/
  ``security.protocol``/``ssl.*``/``sasl.*`` < ``A.`` versions of those < the
  flow's ``A->B.consumer.*`` < ``A.consumer.*`` (into which MM2 copies A's
  cluster-level security keys, so those beat the flow's unprefixed client keys)
  < the flow's ``A->B.source.consumer.*``. Any other ``A.x`` (``A.acks``) never
  reaches a client. Flow consumers get ``enable.auto.commit=false`` and
  ``auto.offset.reset=earliest`` unless set, as in MM2.
* Exactly-once is MM2's worker setting on the *target* cluster:
  ``B.exactly.once.source.support = disabled|preparing|enabled`` (``enabled``
  switches it on for every flow into B; ``preparing`` is MM2's rolling-upgrade
  step and still means off), or Connect's connector key for one flow,
  ``A->B.exactly.once.support = requested|required``: ``required`` switches it on
  for that flow whatever B's worker setting says (in MM2 it would only refuse to
  start without it), ``requested`` (the default) follows B's setting.

Everything wrong is collected and raised at once as ConfigErrors with FILE:LINE.
Over 400 lines because the catalogue of MM2's keys and the checks on them are
one unit; the key tables below are the part worth reading first.
"""

from __future__ import annotations

import difflib
import functools
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from sparkmirror.errors import ConfigError, ConfigErrors, one_line
from replicator.model.clients import REFERENCE, ROLES, JavaClientConfig
from replicator.model.filters import (DEFAULT_GROUPS, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS, DEFAULT_TOPICS_EXCLUDE,
                                      GroupFilter, TopicFilter)
from replicator.model.properties import Entry, Properties, parse_properties

#: Resolves ``${provider:path:key}`` in one client's settings: (settings, config.providers, cluster=...).
ReferenceResolver = Callable[..., JavaClientConfig]

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
KNOWN_POLICIES = (DEFAULT_POLICY, IDENTITY_POLICY)
# The filters' defaults (replicator.model.filters), written as mm2.properties lists.
TOPICS_DEFAULT = ", ".join(DEFAULT_TOPICS)
TOPICS_EXCLUDE_DEFAULT = ", ".join(DEFAULT_TOPICS_EXCLUDE)
GROUPS_DEFAULT = ", ".join(DEFAULT_GROUPS)
GROUPS_EXCLUDE_DEFAULT = ", ".join(DEFAULT_GROUPS_EXCLUDE)
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)
#: deprecated name -> the name MM2 reads it as (ConfigUtils.translateDeprecatedConfigs)
DEPRECATED_ALIASES = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}
#: MM2's periodic loops: FlowConfig.interval_seconds() takes these names
LOOPS = ("emit.heartbeats", "emit.checkpoints", "sync.group.offsets", "refresh.topics", "refresh.groups",
         "sync.topic.configs", "sync.topic.acls")

# Names the three MM2 connectors define (MirrorSource/Checkpoint/HeartbeatConfig +
# Connect's ConnectorConfig): the top-level keys that reach every flow.
CONNECTOR_KEYS = frozenset("""
name connector.class tasks.max tasks.max.enforce key.converter value.converter header.converter
config.action.reload transforms predicates errors.retry.timeout errors.retry.delay.max.ms errors.tolerance
errors.log.enable errors.log.include.messages enabled source.cluster.alias target.cluster.alias admin.timeout.ms
replication.policy.class replication.policy.separator replication.policy.internal.topic.separator.enabled
forwarding.admin.class metric.reporters topics topics.exclude topics.blacklist config.properties.exclude
config.properties.blacklist topic.filter.class config.property.filter.class consumer.poll.timeout.ms
refresh.topics.enabled refresh.topics.interval.seconds sync.topic.configs.enabled
sync.topic.configs.interval.seconds use.incremental.alter.configs sync.topic.acls.enabled
sync.topic.acls.interval.seconds replication.factor offset-syncs.topic.replication.factor offset.lag.max
offset-syncs.topic.location add.source.alias.to.metrics emit.offset-syncs.enabled groups groups.exclude
groups.blacklist group.filter.class refresh.groups.enabled refresh.groups.interval.seconds
emit.checkpoints.enabled emit.checkpoints.interval.seconds sync.group.offsets.enabled
sync.group.offsets.interval.seconds checkpoints.topic.replication.factor emit.heartbeats.enabled
emit.heartbeats.interval.seconds heartbeats.topic.replication.factor heartbeats.replication.enabled
""".split())
#: Keys that configure the offset-syncs topic or its clients: with emit.offset-syncs.enabled = false,
#: MM2's MirrorSourceConnector.validate refuses the flow when any of them is set (KIP-1031).
_OFFSET_SYNCS_KEY_PREFIXES = ("offset-syncs.topic.", "offset-syncs-")
_REGEX_KEYS = {"topics", "topics.exclude", "groups", "groups.exclude", "config.properties.exclude",
               *DEPRECATED_ALIASES}
_TOP_LEVEL_OTHER = {"clusters", "config.providers", "dedicated.mode.enable.internal.rest", "listeners",
                    "plugin.path", "admin.listeners", "bootstrap.servers", "security.protocol"}
# Connect worker settings MM2 takes from the top level or a cluster: valid, unused by sparkmirror.
_WORKER_PREFIXES = ("offset.storage", "config.storage", "status.storage", "key.converter", "value.converter",
                    "header.converter", "task", "worker", "rest.", "config.providers.", "replication.policy.",
                    "offset.flush.", "scheduled.rebalance.", "connect.protocol", "group.id", "client.id",
                    "exactly.once.source.support", "producer.override.", "consumer.override.")
_FLOW_PASSTHROUGH_PREFIXES = ("consumer.", "producer.", "admin.", "source.", "target.", "replication.policy.",
                              "transforms.", "predicates.", "topic.creation.", "errors.", "exactly.once.support",
                              "transaction.boundary", "offsets.storage.topic")
_ROLE_PREFIXES = tuple(f"{role}." for role in ROLES)
_ALIAS = re.compile(r"[A-Za-z0-9._-]+")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]+)")
_PLACEHOLDER = re.compile(r".*<[^<>]*>.*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_GLOB_STAR = re.compile(r"(?<![.)\]}\\])\*")  # a '*' with nothing to repeat
# Java's int and long (MM2's ConfigDef types) and Kafka's INT16 replication factor bound the numbers;
# a loop interval also has to fit every timer that waits for it (threading's limit is 2^33 s).
_INT16_MAX, _INT32_MAX, _INT64_MAX = 2**15 - 1, 2**31 - 1, 2**63 - 1
_MAX_INTERVAL = _INT32_MAX
_MAX_REGEX_TEXT = 100_000


def is_cluster_client_key(key: str) -> bool:
    """Cluster-level keys MM2 hands to every client of a cluster (CLIENT_CONFIG_DEF)."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


# ---------------------------------------------------------------------------- values


class _Invalid(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def java_list(raw: str) -> list[str]:
    """ConfigDef LIST parsing: trim, then split on commas with surrounding whitespace."""
    text = raw.strip()
    return re.split(r"\s*,\s*", text) if text else []


def _integer(raw: str) -> int:
    text = raw.strip()
    if not _INTEGER.fullmatch(text):
        raise _Invalid(f"must be a whole number, got {text!r}")
    digits = len(text.lstrip("+-").lstrip("0"))
    if digits > 19:  # also keeps int() under Python's 4300-digit limit (a ValueError otherwise)
        raise _Invalid(f"is a {digits}-digit number; MM2 reads it as a Java long (at most {2**63 - 1})")
    return int(text)


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise _Invalid(f"must be true or false, got {raw.strip()!r}")
    return value == "true"


def _interval(raw: str) -> int:
    seconds = _integer(raw)
    if seconds > _MAX_INTERVAL:
        raise _Invalid(f"must be at most {_MAX_INTERVAL} seconds (68 years), got {seconds}",
                       "use -1 to switch the loop off")
    if seconds == -1 or seconds > 0:
        return seconds  # MM2 schedules nothing for a negative interval: -1 means "off"
    raise _Invalid(f"must be a positive number of seconds, or -1 to disable, got {seconds}")


def _at_least(minimum: int, *, minus_one: str | None = None, maximum: int | None = None):
    def parse(raw: str) -> int:
        value = _integer(raw)
        if (minus_one and value == -1) or (value >= minimum and (maximum is None or value <= maximum)):
            return value
        bound = f"between {minimum} and {maximum}" if maximum is not None and value > maximum else \
            f"at least {minimum}"
        raise _Invalid(f"must be {bound}{f' (or -1 for {minus_one})' if minus_one else ''}, got {value}")
    return parse


def _regex_list(raw: str) -> list[str]:
    return list(_regexes(raw))


@functools.lru_cache(maxsize=1024)
def _regexes(raw: str) -> tuple[str, ...]:
    """Cached: every flow of an n-cluster mesh reads the same top-level (or default) lists again."""
    if len(raw) > _MAX_REGEX_TEXT:  # Python's regex parser alone needs ~5 s per megabyte
        raise _Invalid(f"is {len(raw)} characters long; sparkmirror reads at most {_MAX_REGEX_TEXT} characters "
                       "of patterns per setting", "topic names have at most 249 characters: list broader "
                       "patterns (orders\\..*) instead of every name")
    patterns = java_list(raw)
    for pattern in patterns:
        if _PLACEHOLDER.fullmatch(pattern):
            raise _Invalid(f"has the placeholder {pattern!r}; replace it with a real name or regex")
        try:
            with warnings.catch_warnings():  # Java-only class syntax: judged by the filters module
                warnings.simplefilter("ignore", FutureWarning)
                re.compile(pattern)
        except re.error as exc:
            hint = None
            if "*" in pattern:
                fixed = _GLOB_STAR.sub(".*", pattern)
                hint = f"did you mean {fixed}? (these are regexes, not globs)"
            raise _Invalid(f"has an invalid regex {pattern!r}: {exc.msg}", hint) from None
    return tuple(patterns)


def _policy(raw: str) -> str:
    value = raw.strip()
    if value in KNOWN_POLICIES:
        return value
    close = difflib.get_close_matches(value, KNOWN_POLICIES, n=1, cutoff=0.5)
    short = [p for p in KNOWN_POLICIES if p.rsplit(".", 1)[-1] == value.rsplit(".", 1)[-1]]
    suggestion = (short or close or [None])[0]
    raise _Invalid(f"names an unknown replication policy {value!r}",
                   f"did you mean {suggestion}?" if suggestion else f"use one of {', '.join(KNOWN_POLICIES)}")


def _separator(raw: str) -> str:
    if raw == "":
        raise _Invalid("must not be empty", "to keep topic names unchanged use "
                       "replication.policy.class = " + IDENTITY_POLICY)
    if not _ALIAS.fullmatch(raw):
        raise _Invalid(f"{raw!r} would make illegal topic names (allowed: letters, digits, '.', '_', '-')")
    return raw


def _choice(*options: str, lower: bool = False):
    def parse(raw: str) -> str:
        value = raw.strip().lower() if lower else raw.strip()
        if value not in options:
            raise _Invalid(f"must be one of {', '.join(options)}, got {raw.strip()!r}")
        return value
    return parse


_RF = _at_least(1, minus_one="the broker default", maximum=_INT16_MAX)  # a topic's replication factor
_EXACTLY_ONCE = _choice("disabled", "preparing", "enabled", lower=True)
_EXACTLY_ONCE_CONNECTOR = _choice("requested", "required", lower=True)


def _setting(key: str, parse, default: str, *, hash: bool | None = None):
    """A FlowConfig field read from the MM2 key ``key`` by ``parse``; ``default`` is MM2's default, as text.

    The field stays required: the builder always passes the parsed value.
    """
    return field(hash=hash, metadata={"key": key, "parse": parse, "default": default})


# ---------------------------------------------------------------------------- model


@dataclass(frozen=True)
class ConfigWarning:
    """Something MM2 would accept but that is probably not what the user meant."""

    message: str
    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: warning: {self.message}" if self.line else \
            f"{self.file}: warning: {self.message}"


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
    enabled: bool = _setting("enabled", _bool, "false")
    topics: list[str] = _setting("topics", _regex_list, TOPICS_DEFAULT, hash=False)
    topics_exclude: list[str] = _setting("topics.exclude", _regex_list, TOPICS_EXCLUDE_DEFAULT, hash=False)
    groups: list[str] = _setting("groups", _regex_list, GROUPS_DEFAULT, hash=False)
    groups_exclude: list[str] = _setting("groups.exclude", _regex_list, GROUPS_EXCLUDE_DEFAULT, hash=False)
    config_properties_exclude: list[str] = _setting("config.properties.exclude", _regex_list,
                                                    CONFIG_PROPERTIES_EXCLUDE_DEFAULT, hash=False)
    replication_policy_class: str = _setting("replication.policy.class", _policy, DEFAULT_POLICY)
    replication_policy_separator: str = _setting("replication.policy.separator", _separator, ".")
    internal_topic_separator_enabled: bool = _setting("replication.policy.internal.topic.separator.enabled", _bool,
                                                      "true")
    replication_factor: int = _setting("replication.factor", _RF, "2")
    heartbeats_topic_replication_factor: int = _setting("heartbeats.topic.replication.factor", _RF, "3")
    checkpoints_topic_replication_factor: int = _setting("checkpoints.topic.replication.factor", _RF, "3")
    offset_syncs_topic_replication_factor: int = _setting("offset-syncs.topic.replication.factor", _RF, "3")
    offset_lag_max: int = _setting("offset.lag.max", _at_least(0, maximum=_INT64_MAX), "100")
    emit_heartbeats_enabled: bool = _setting("emit.heartbeats.enabled", _bool, "true")
    emit_heartbeats_interval_seconds: int = _setting("emit.heartbeats.interval.seconds", _interval, "1")
    emit_checkpoints_enabled: bool = _setting("emit.checkpoints.enabled", _bool, "true")
    emit_checkpoints_interval_seconds: int = _setting("emit.checkpoints.interval.seconds", _interval, "60")
    sync_group_offsets_enabled: bool = _setting("sync.group.offsets.enabled", _bool, "false")
    sync_group_offsets_interval_seconds: int = _setting("sync.group.offsets.interval.seconds", _interval, "60")
    refresh_topics_enabled: bool = _setting("refresh.topics.enabled", _bool, "true")
    refresh_topics_interval_seconds: int = _setting("refresh.topics.interval.seconds", _interval, "600")
    refresh_groups_enabled: bool = _setting("refresh.groups.enabled", _bool, "true")
    refresh_groups_interval_seconds: int = _setting("refresh.groups.interval.seconds", _interval, "600")
    sync_topic_configs_enabled: bool = _setting("sync.topic.configs.enabled", _bool, "true")
    sync_topic_configs_interval_seconds: int = _setting("sync.topic.configs.interval.seconds", _interval, "600")
    sync_topic_acls_enabled: bool = _setting("sync.topic.acls.enabled", _bool, "true")
    sync_topic_acls_interval_seconds: int = _setting("sync.topic.acls.interval.seconds", _interval, "600")
    emit_offset_syncs_enabled: bool = _setting("emit.offset-syncs.enabled", _bool, "true")
    offset_syncs_topic_location: str = _setting("offset-syncs.topic.location", _choice("source", "target"),
                                                "source")
    tasks_max: int = _setting("tasks.max", _at_least(1, maximum=_INT32_MAX), "1")
    heartbeats_replication_enabled: bool = _setting("heartbeats.replication.enabled", _bool, "true")
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
        """The ReplicationPolicy object (imported lazily: replicator.model.policy)."""
        from replicator.model.policy import policy_from_config

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


@dataclass
class MM2Config:
    """A parsed, validated mm2.properties."""

    path: str
    clusters: dict[str, ClusterConfig]
    flows: list[FlowConfig]
    warnings: list[ConfigWarning] = field(default_factory=list)
    _layout: _Layout | None = field(default=None, repr=False)
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
        loaded with (replicator.configfile); an unresolvable one raises. Without
        a resolver they stay as written, and translating the client refuses them.
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        self._cluster(alias)
        layout = self._layout
        if flow is not None and alias not in (flow.source, flow.target):
            raise ConfigError(f"cluster {alias} is not part of flow {flow.name}", file=self.path)
        cluster_keys = layout.cluster_keys[alias]
        flow_keys = layout.flow_keys.get((flow.source, flow.target), {}) if flow else {}
        base = {k: e for k, e in layout.top.items() if is_cluster_client_key(k)}
        base.update({k: e for k, e in cluster_keys.items() if is_cluster_client_key(k)})
        merged = dict(base)
        merged.update(_strip(flow_keys, f"{role}."))
        merged.update(base)  # MM2 copies the cluster's security keys into A.<role>.* ...
        merged.update(_strip(cluster_keys, f"{role}."))  # ... where A.<role>.* overrides them
        if flow:
            side = "source" if alias == flow.source else "target"
            merged.update(_strip(flow_keys, f"{side}.{role}."))
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


def _strip(entries: dict[str, Entry], prefix: str) -> dict[str, Entry]:
    return {k[len(prefix):]: e for k, e in entries.items() if k.startswith(prefix)}


# ---------------------------------------------------------------------------- parsing


def parse_config(text: str, path: str = "<string>", *,
                 resolve_references: ReferenceResolver | None = None) -> MM2Config:
    """Parse and validate mm2.properties text; raises ConfigErrors listing every problem.

    ``resolve_references`` replaces ``${provider:path:key}`` in a client's
    settings (replicator.configfile.resolve_references reads files and the
    environment for it); this module itself does no I/O.
    """
    entries = parse_properties(text, path)
    return _Builder(entries, path, resolve_references).build()


@dataclass
class _Layout:
    """Keys sorted by level: top-level, ``A.`` (cluster) and ``A->B.`` (flow), prefixes removed."""

    top: dict[str, Entry]
    cluster_keys: dict[str, dict[str, Entry]]
    flow_keys: dict[tuple[str, str], dict[str, Entry]]
    clusters_line: int


class _Builder:
    """One pass over the parsed file, collecting every error and warning with its line."""

    def __init__(self, entries: Properties, path: str, resolve_references: ReferenceResolver | None) -> None:
        self.entries, self.path = entries, path
        self.resolve_references = resolve_references
        self.errors: list[ConfigError] = []
        self.warnings: list[ConfigWarning] = []
        self._said: set[tuple[str, int | None, str]] = set()  # each problem once (a set: files can be huge)
        self._guesses = 0

    def error(self, message: str, line: int | None, *, cluster: str | None = None, hint: str | None = None) -> None:
        if ("error", line, message) not in self._said:
            self._said.add(("error", line, message))
            self.errors.append(ConfigError(message, file=self.path, line=line, cluster=cluster, hint=hint))

    def warn(self, message: str, line: int | None) -> None:
        message = one_line(message)
        if ("warning", line, message) not in self._said:
            self._said.add(("warning", line, message))
            self.warnings.append(ConfigWarning(message, self.path, line))

    def build(self) -> MM2Config:
        for entry in self.entries.values():
            if "\x00" in entry.key or "\x00" in entry.value:  # the value is not shown: it may be a password
                self.error(f"`{entry.key.replace(chr(0), '<NUL>')}` contains a NUL character (byte 0)", entry.line,
                           hint="remove it: no Kafka setting holds one, and librdkafka reads settings as C strings")
        for dup in self.entries.duplicates:
            self.warn(f"`{dup.key}` is set again here; this value wins over line {dup.previous_line}", dup.line)
        aliases, clusters_line = self._read_clusters()
        if aliases is None:
            raise self._failure()
        layout = self._layout(aliases, clusters_line)
        clusters = {alias: self._cluster(alias, layout) for alias in aliases}
        flows = [self._flow(s, t, layout) for s in aliases for t in aliases if s != t]
        self._check_flows(flows, layout)
        self._check_same_bootstrap(clusters)
        if self.errors:
            raise self._failure()
        config = MM2Config(self.path, clusters, flows, self.warnings, layout, self.resolve_references)
        self._check_client_security(config)
        config.warnings.sort(key=lambda w: w.line or 0)
        return config

    def _failure(self) -> ConfigErrors:
        failure = ConfigErrors(sorted(self.errors, key=lambda e: e.line or 0))
        failure.warnings = sorted(self.warnings, key=lambda w: w.line or 0)  # shown next to the errors
        return failure

    # -- clusters and key placement ----------------------------------------------------

    def _read_clusters(self) -> tuple[list[str] | None, int]:
        entry = self.entries.get("clusters")
        if entry is None:
            marked = next((e for k, e in self.entries.items()
                           if k in ("\ufeffclusters", "\u00ef\u00bb\u00bfclusters")), None)
            if marked is not None:  # Java reads the UTF-8 byte-order mark as part of the first key
                self.error("the file starts with a UTF-8 byte-order mark, so the first key reads as "
                           f"{marked.key!r}, not `clusters` (MM2 reads it the same way)", marked.line,
                           hint="save the file as UTF-8 without a byte-order mark")
                return None, marked.line
            self.error("no `clusters` line: MM2 needs the list of cluster aliases", 1,
                       hint="add e.g. `clusters = primary, dr`")
            return None, 1
        aliases: list[str] = []
        for alias in java_list(entry.value):
            if alias in aliases:
                self.warn(f"cluster alias {alias!r} is listed twice", entry.line)
                continue
            if _PLACEHOLDER.fullmatch(alias):
                self.error(f"cluster alias {alias!r} is a placeholder; replace it with a real name", entry.line)
            elif not _ALIAS.fullmatch(alias):
                self.error(f"cluster alias {alias!r} may only use letters, digits, '.', '_' and '-' "
                           "(MM2 puts aliases into topic names)", entry.line)
            aliases.append(alias)  # kept even when bad, so its keys are still read as its own
        if not aliases:
            self.error("`clusters` is empty: list the cluster aliases", entry.line, hint="e.g. clusters = primary, dr")
        return aliases, entry.line

    def _layout(self, aliases: list[str], clusters_line: int) -> _Layout:
        layout = _Layout({}, {a: {} for a in aliases}, {}, clusters_line)
        by_length = sorted(aliases, key=len, reverse=True)

        def alias_prefix(key: str) -> str | None:
            return next((a for a in by_length if key.startswith(a + ".")), None)

        for key, entry in self.entries.items():
            if "->" in key:
                source, _, rest = key.partition("->")
                target = alias_prefix(rest) or rest.partition(".")[0]
                sub = rest[len(target) + 1:]
                if self._check_flow_key(entry, source, target, sub, aliases):
                    layout.flow_keys.setdefault((source, target), {})[sub] = entry
            elif (alias := alias_prefix(key)) is not None:
                sub = key[len(alias) + 1:]
                self._check_cluster_key(entry, alias, sub)
                layout.cluster_keys[alias][sub] = entry
            else:
                self._check_top_key(entry, aliases)
                layout.top[key] = entry
        return layout

    def _check_flow_key(self, entry: Entry, source: str, target: str, sub: str, aliases: list[str]) -> bool:
        for alias in (source, target):
            if alias not in aliases:
                close = _closest(alias, aliases)
                self.error(f"`{entry.key}` names cluster {alias!r}, which is not in `clusters` "
                           f"(line {self._clusters_line()})", entry.line,
                           hint=f"did you mean {close[0]!r}?" if close else "add it to clusters")
                return False
        if source == target:
            self.error(f"`{entry.key}` is a flow from cluster {source!r} to itself", entry.line,
                       hint="a flow needs two different clusters")
            return False
        self._check_value_escapes(entry, sub)
        if sub in DEPRECATED_ALIASES:
            self._deprecated(entry, sub)
        elif sub == "exactly.once.source.support":
            self.warn(f"MM2 reads exactly.once.source.support per target cluster, not per flow; "
                      f"write `{target}.exactly.once.source.support`", entry.line)
        elif sub in CONNECTOR_KEYS or sub.startswith(_FLOW_PASSTHROUGH_PREFIXES):
            pass
        elif sub in _client_keys() or is_cluster_client_key(sub):
            self.warn(f"`{entry.key}` is not passed to any client; use `{source}->{target}.consumer.{sub}` "
                      f"(or .producer./.admin.)", entry.line)
        else:
            self._unknown(entry, sub, CONNECTOR_KEYS, f"{source}->{target}.")
        return True

    def _check_cluster_key(self, entry: Entry, alias: str, sub: str) -> None:
        if is_cluster_client_key(sub) or sub.startswith(_ROLE_PREFIXES) or sub.startswith(_WORKER_PREFIXES):
            return
        if sub in CONNECTOR_KEYS:
            self.warn(f"MM2 ignores `{entry.key}`: flow settings are not read at cluster level; "
                      f"write `{alias}->OTHER.{sub}` for one flow or `{sub}` for all", entry.line)
        elif sub in _client_keys():
            self.warn(f"MM2 does not pass `{entry.key}` to {alias}'s clients; write `{alias}.consumer.{sub}`, "
                      f"`{alias}.producer.{sub}` or `{alias}.admin.{sub}`", entry.line)
        else:
            self._unknown(entry, sub, {"bootstrap.servers", "security.protocol", "exactly.once.source.support"},
                          f"{alias}.")

    def _check_top_key(self, entry: Entry, aliases: list[str]) -> None:
        key = entry.key
        self._check_value_escapes(entry, key)
        if key in DEPRECATED_ALIASES:
            self._deprecated(entry, key)
        elif key in CONNECTOR_KEYS or key in _TOP_LEVEL_OTHER or is_cluster_client_key(key):
            if key == "enabled" and entry.value.strip().lower() == "true":
                self.warn("top-level `enabled = true` enables replication between every pair of clusters",
                          entry.line)
        elif key == "exactly.once.source.support":
            self.warn("MM2 ignores a top-level exactly.once.source.support; write `<target>.exactly.once."
                      "source.support` for each target cluster", entry.line)
        elif key.startswith(_ROLE_PREFIXES) or key in _client_keys():
            self.warn(f"MM2 ignores a top-level `{key}`; write it per cluster (`A.{key}`"
                      f"{'' if key.startswith(_ROLE_PREFIXES) else ' with .consumer./.producer./.admin.'}) "
                      "or per flow (`A->B.`)", entry.line)
        elif key.startswith(_WORKER_PREFIXES):
            pass
        elif "." in key and _looks_like_cluster_key(key.partition(".")[2]):
            head = key.partition(".")[0]
            close = _closest(head, aliases)
            self.warn(f"`{key}` is ignored: {head!r} is not in `clusters`"
                      + (f" (did you mean {close[0]!r}?)" if close else ""), entry.line)
        else:
            self._unknown(entry, key, CONNECTOR_KEYS | _TOP_LEVEL_OTHER, "")

    def _unknown(self, entry: Entry, sub: str, known, prefix: str) -> None:
        self._guesses += 1  # difflib costs ~0.3 ms a key: a file of 20,000 unknown keys gets no more guesses
        close = difflib.get_close_matches(sub, sorted(known), n=1, cutoff=0.75) \
            if len(sub) < 100 and self._guesses <= 200 else []
        self.warn(f"unknown key `{entry.key}`" + (f"; did you mean `{prefix}{close[0]}`?" if close else
                                                   " (MM2 and sparkmirror ignore it)"), entry.line)

    def _deprecated(self, entry: Entry, sub: str) -> None:
        self.warn(f"`{entry.key}` is deprecated; MM2 still reads it as `{DEPRECATED_ALIASES[sub]}` "
                  "(rename it)", entry.line)

    def _check_value_escapes(self, entry: Entry, sub: str) -> None:
        """Warn when .properties escaping ate a regex backslash (``\\.`` reads as ``.``)."""
        if sub not in _REGEX_KEYS or not re.search(r"(?<!\\)(?:\\\\)*\\[.\[\](){}*+?^$|dDsSwWbB-]",
                                                   entry.raw_value):
            return
        self.warn(f"in .properties a single backslash is an escape, so `{entry.key}` reads as "
                  f"{entry.value!r} (MM2 sees the same); write \\\\ where the regex needs a backslash", entry.line)

    def _clusters_line(self) -> int:
        entry = self.entries.get("clusters")
        return entry.line if entry else 1

    # -- clusters and flows ------------------------------------------------------------

    def _cluster(self, alias: str, layout: _Layout) -> ClusterConfig:
        keys = layout.cluster_keys[alias]
        entry = keys.get("bootstrap.servers")
        if entry is None and "bootstrap.servers" in layout.top:
            entry = layout.top["bootstrap.servers"]
            self.warn(f"cluster {alias!r} has no `{alias}.bootstrap.servers`; MM2 falls back to the top-level "
                      f"bootstrap.servers (line {entry.line})", layout.clusters_line)
        if entry is None:
            self.error(f"cluster {alias!r} has no bootstrap servers", layout.clusters_line, cluster=alias,
                       hint=f"add `{alias}.bootstrap.servers = host:9092`")
            return ClusterConfig(alias, "", {k: e.value for k, e in keys.items()}, layout.clusters_line)
        hosts = java_list(entry.value)
        if not any(hosts):
            self.error(f"`{entry.key}` lists no hosts ({entry.value.strip()!r})", entry.line, cluster=alias,
                       hint="expected host:port[,host:port...]")
        for host in hosts if any(hosts) else []:
            match = _HOST_PORT.fullmatch(host)
            if not host:
                self.error(f"`{entry.key}` has an empty entry (a stray comma)", entry.line, cluster=alias)
            elif _PLACEHOLDER.fullmatch(host):
                self.error(f"`{entry.key}` has the placeholder {host!r}", entry.line, cluster=alias,
                           hint="replace it with the broker's host:port")
            elif not match:
                self.error(f"`{entry.key}` entry {host!r} is not host:port", entry.line, cluster=alias,
                           hint="e.g. broker1:9092")
            elif not 0 < int(match.group(2)) < 65536:
                self.error(f"`{entry.key}` entry {host!r} has port outside 1-65535", entry.line, cluster=alias)
        return ClusterConfig(alias, ",".join(hosts), {k: e.value for k, e in keys.items()}, entry.line)

    def _flow(self, source: str, target: str, layout: _Layout) -> FlowConfig:
        effective = {k: e for k, e in layout.top.items()
                     if k in CONNECTOR_KEYS or k.startswith(("replication.policy.", "config.providers"))}
        effective.update(layout.flow_keys.get((source, target), {}))
        for old, new in DEPRECATED_ALIASES.items():
            if old in effective:
                entry = effective.pop(old)
                if new in effective:
                    self.warn(f"`{entry.key}` is ignored for {source}->{target}: `{effective[new].key}` "
                              f"(line {effective[new].line}) wins", entry.line)
                else:
                    effective[new] = entry
        values: dict[str, object] = {}
        for name, (key, parse, default) in _FLOW_SETTINGS.items():
            entry = effective.get(key)
            try:
                values[name] = parse(entry.value if entry else default)
            except _Invalid as exc:
                self.error(f"`{entry.key}` {exc.message}", entry.line, hint=exc.hint)
                values[name] = parse(default)
        eos = layout.cluster_keys[target].get("exactly.once.source.support")
        values["exactly_once_support"] = "disabled"
        if eos is not None:
            try:
                values["exactly_once_support"] = _EXACTLY_ONCE(eos.value)
            except _Invalid as exc:
                self.error(f"`{eos.key}` {exc.message}", eos.line, cluster=target)
        connector_eos = effective.get("exactly.once.support")
        if connector_eos is not None:
            try:
                values["exactly_once_connector"] = _EXACTLY_ONCE_CONNECTOR(connector_eos.value)
            except _Invalid as exc:
                self.error(f"`{connector_eos.key}` {exc.message}", connector_eos.line, hint=exc.hint)
        self._check_filters(values, effective)
        self._check_offset_syncs_off(source, target, values, effective)
        props = dict(FLOW_DEFAULTS)
        props.update({k: e.value for k, e in effective.items()})
        origins = {k: (e.key, e.line) for k, e in effective.items()}
        return FlowConfig(source=source, target=target, props=props, origins=origins, **values)

    def _check_filters(self, values: dict[str, object], effective: dict[str, Entry]) -> None:
        """Let the filters module judge Java-only regex syntax (one place per fact)."""
        for cls, include, exclude in ((TopicFilter, "topics", "topics.exclude"),
                                      (GroupFilter, "groups", "groups.exclude")):
            for key in (include, exclude):  # one list at a time, so the error names the line it is on
                patterns = values[key.replace(".", "_")]
                try:
                    cls(patterns, ()) if key == include else cls((), patterns)
                except ConfigError as exc:
                    bad = effective.get(key)
                    self.error(f"`{bad.key}`: {exc.message}" if bad else exc.message, bad.line if bad else None,
                               hint=exc.hint)

    def _check_offset_syncs_off(self, source: str, target: str, values: dict[str, object],
                                effective: dict[str, Entry]) -> None:
        """emit.offset-syncs.enabled = false (KIP-1031): what MM2 then refuses, and what it then cannot do."""
        if values["emit_offset_syncs_enabled"] or not values["enabled"]:
            return
        off = effective["emit.offset-syncs.enabled"]
        for key, entry in effective.items():
            if key.startswith(_OFFSET_SYNCS_KEY_PREFIXES):
                self.error(f"`{entry.key}` configures the offset-syncs of {source}->{target}, which "
                           f"`{off.key}` (line {off.line}) switches off: MM2 refuses to start the flow's "
                           "MirrorSourceConnector with both", entry.line,
                           hint="remove this line, or the offset-syncs.* settings with it, or emit offset-syncs")
        if values["emit_checkpoints_enabled"]:
            self.warn(f"{source}->{target} emits no offset-syncs, so it emits no checkpoints either (MM2 refuses "
                      "its MirrorCheckpointConnector without offset-syncs; sparkmirror does the same): consumer "
                      "groups cannot be translated or synced to the target, and the monitor cannot count the "
                      "flow's lag in records", off.line)

    def _check_flows(self, flows: list[FlowConfig], layout: _Layout) -> None:
        enabled = [f for f in flows if f.enabled]
        if not enabled:
            self.warn("no replication flow is enabled (MM2 would only emit heartbeats); "
                      "add e.g. `A->B.enabled = true`", layout.clusters_line)
        for flow in enabled:
            if flow.replication_policy_class == DEFAULT_POLICY and flow.replication_policy_separator in flow.source:
                self.warn(f"alias {flow.source!r} contains the separator {flow.replication_policy_separator!r}: "
                          f"MM2 reads the source of {flow.source}{flow.replication_policy_separator}orders as "
                          f"{flow.source.split(flow.replication_policy_separator)[0]!r}, which breaks its loop "
                          "detection", layout.clusters_line)
            if not flow.topics:
                self.warn(f"`topics` is empty for {flow.name}: MM2 replicates no topics",
                          flow.line_of("topics") or layout.clusters_line)
        # Identity keeps names, so MM2 cannot tell a copy from an original: a topic that every
        # flow of a cycle through an Identity flow replicates is copied round it forever. MM2
        # accepts such a cycle (its isCycle gives up on Identity names), and topic filters that
        # keep the directions disjoint make it loop-free, so it is a warning, not an error.
        warned: set[frozenset[str]] = set()
        for flow in enabled:
            back = _path(enabled, flow.target, flow.source) if flow.replication_policy_class == IDENTITY_POLICY else []
            if back and frozenset(back) not in warned:  # one warning per loop, at its first Identity flow
                warned.add(frozenset(back))
                self.warn(_identity_cycle_warning(flow, back, enabled),
                          flow.line_of("replication.policy.class") or layout.clusters_line)

    def _check_same_bootstrap(self, clusters: dict[str, ClusterConfig]) -> None:
        seen: dict[str, str] = {}
        for alias, cluster in clusters.items():
            split = cluster.bootstrap_servers.split(",")
            hosts = ",".join(sorted(split)) if all(split) else ""  # empty lists are errors already
            if hosts and hosts in seen:
                self.warn(f"clusters {seen[hosts]!r} and {alias!r} have the same bootstrap.servers: "
                          "a flow between them copies a cluster into itself", cluster.line)
            seen.setdefault(hosts, alias)

    def _check_client_security(self, config: MM2Config) -> None:
        """MM2 also opens admin and producer clients on every cluster; a role-only login is a trap."""
        for alias in config.clusters:
            protocols: dict[str, str] = {}
            for role in ROLES:
                try:
                    protocols[role] = config.client_config(alias, role).get("security.protocol", "PLAINTEXT").upper()
                except ConfigError:
                    return  # reported when the clients are translated
            if len(set(protocols.values())) > 1:
                keys = config._layout.cluster_keys[alias]
                line = min((e.line for k, e in keys.items() if k.endswith(".security.protocol")), default=None)
                detail = ", ".join(f"{role} {p}" for role, p in protocols.items())
                self.warn(f"cluster {alias!r} clients disagree on security.protocol ({detail}); MM2 and "
                          f"sparkmirror use all three (topic/ACL sync, offset-syncs, heartbeats): set "
                          f"`{alias}.security.protocol`, `{alias}.sasl.*`, `{alias}.ssl.*` at cluster level",
                          line or config._layout.clusters_line)


def _identity_cycle_warning(flow: FlowConfig, back: list[str], enabled: list[FlowConfig]) -> str:
    """Name the patterns every flow of the cycle could replicate (each pattern's own text is tried as a name)."""
    by_pair = {(f.source, f.target): f for f in enabled}
    cycle = [flow] + [by_pair[pair] for pair in zip(back, back[1:])]
    try:
        filters = [f.topic_filter for f in cycle]
        shared = [p for p in dict.fromkeys(p for f in cycle for p in f.topics)
                  if all(tf.should_replicate_topic(p) for tf in filters)]
    except ConfigError:  # an invalid filter is reported as an error of its own
        shared = []
    topics = "; ".join(f"{f.name} `topics` = {', '.join(f.topics) or '(none)'}" for f in cycle)
    head = (f"{flow.name} uses IdentityReplicationPolicy and records come back through {' -> '.join(back)}; "
            "MM2 cannot detect that loop, so a topic replicated both ways is copied round it forever")
    if shared:
        return (f"{head}: topics matching {', '.join(shared)} are replicated by every flow of the loop "
                f"({topics}); make the topic filters disjoint")
    return f"{head}; the topic filters look disjoint, keep them so ({topics})"


def _path(flows: list[FlowConfig], start: str, goal: str) -> list[str]:
    """Aliases on a shortest chain of enabled flows from start to goal ([] if none)."""
    previous: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if node == goal:
            chain = [node]
            while previous[chain[-1]] is not None:
                chain.append(previous[chain[-1]])
            return chain[::-1]
        for f in flows:
            if f.source == node and f.target not in previous:
                previous[f.target] = node
                queue.append(f.target)
    return []


def _closest(name: str, aliases: list[str]) -> list[str]:
    lowered = {a.lower(): a for a in aliases}
    if len(name) > 100:  # difflib is quadratic in the length; no alias is that long
        return []
    return [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=1)]


def _looks_like_cluster_key(sub: str) -> bool:
    return is_cluster_client_key(sub) or sub.startswith(_ROLE_PREFIXES) or sub == "exactly.once.source.support"


def _client_keys() -> frozenset[str]:
    from replicator.model.clients import JAVA_CLIENT_KEYS

    return JAVA_CLIENT_KEYS - CONNECTOR_KEYS
