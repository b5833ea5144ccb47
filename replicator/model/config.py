"""The mm2.properties model: clusters, replication flows and their effective, typed settings.

parse_config reads the file's lines (:mod:`replicator.model.properties`), sorts
its keys by level and layers them as MM2 does (:mod:`replicator.model.layering`),
parses each flow setting with its type's parser (:mod:`replicator.model.values`)
and builds the ClusterConfig and FlowConfig of every cluster and ordered pair.
Every problem found on the way, and by the checks of
:mod:`replicator.model.diagnostics`, is collected and raised at once as
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
from replicator.model.clients import REFERENCE, ROLES, JavaClientConfig
from replicator.model.diagnostics import ConfigWarning, Diagnostics
from replicator.model.filters import (DEFAULT_GROUPS, DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS, DEFAULT_TOPICS_EXCLUDE,
                                      GroupFilter, TopicFilter)
from replicator.model.layering import (DEPRECATED_ALIASES, Layout, client_entries, flow_entries,
                                       is_cluster_client_key)
from replicator.model.properties import Properties, parse_properties
from replicator.model.values import (ALIAS, DEFAULT_POLICY, EXACTLY_ONCE, EXACTLY_ONCE_CONNECTOR, INT32_MAX, INT64_MAX,
                                     PLACEHOLDER, REPLICATION_FACTOR, InvalidValue, at_least, boolean, choice,
                                     interval, java_list, policy_class, regex_list, separator)

#: Resolves ``${provider:path:key}`` in one client's settings: (settings, config.providers, cluster=...).
ReferenceResolver = Callable[..., JavaClientConfig]

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
#: MM2's periodic loops: FlowConfig.interval_seconds() takes these names
LOOPS = ("emit.heartbeats", "emit.checkpoints", "sync.group.offsets", "refresh.topics", "refresh.groups",
         "sync.topic.configs", "sync.topic.acls")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]+)")


def _setting(key: str, parse, default: str, *, hash: bool | None = None):
    """A FlowConfig field read from the MM2 key ``key`` by ``parse``; ``default`` is MM2's default, as text.

    The field stays required: the builder always passes the parsed value.
    """
    return field(hash=hash, metadata={"key": key, "parse": parse, "default": default})


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
    enabled: bool = _setting("enabled", boolean, "false")
    topics: list[str] = _setting("topics", regex_list, TOPICS_DEFAULT, hash=False)
    topics_exclude: list[str] = _setting("topics.exclude", regex_list, TOPICS_EXCLUDE_DEFAULT, hash=False)
    groups: list[str] = _setting("groups", regex_list, GROUPS_DEFAULT, hash=False)
    groups_exclude: list[str] = _setting("groups.exclude", regex_list, GROUPS_EXCLUDE_DEFAULT, hash=False)
    config_properties_exclude: list[str] = _setting("config.properties.exclude", regex_list,
                                                    CONFIG_PROPERTIES_EXCLUDE_DEFAULT, hash=False)
    replication_policy_class: str = _setting("replication.policy.class", policy_class, DEFAULT_POLICY)
    replication_policy_separator: str = _setting("replication.policy.separator", separator, ".")
    internal_topic_separator_enabled: bool = _setting("replication.policy.internal.topic.separator.enabled", boolean,
                                                      "true")
    replication_factor: int = _setting("replication.factor", REPLICATION_FACTOR, "2")
    heartbeats_topic_replication_factor: int = _setting("heartbeats.topic.replication.factor", REPLICATION_FACTOR, "3")
    checkpoints_topic_replication_factor: int = _setting("checkpoints.topic.replication.factor",
                                                         REPLICATION_FACTOR, "3")
    offset_syncs_topic_replication_factor: int = _setting("offset-syncs.topic.replication.factor",
                                                          REPLICATION_FACTOR, "3")
    offset_lag_max: int = _setting("offset.lag.max", at_least(0, maximum=INT64_MAX), "100")
    emit_heartbeats_enabled: bool = _setting("emit.heartbeats.enabled", boolean, "true")
    emit_heartbeats_interval_seconds: int = _setting("emit.heartbeats.interval.seconds", interval, "1")
    emit_checkpoints_enabled: bool = _setting("emit.checkpoints.enabled", boolean, "true")
    emit_checkpoints_interval_seconds: int = _setting("emit.checkpoints.interval.seconds", interval, "60")
    sync_group_offsets_enabled: bool = _setting("sync.group.offsets.enabled", boolean, "false")
    sync_group_offsets_interval_seconds: int = _setting("sync.group.offsets.interval.seconds", interval, "60")
    refresh_topics_enabled: bool = _setting("refresh.topics.enabled", boolean, "true")
    refresh_topics_interval_seconds: int = _setting("refresh.topics.interval.seconds", interval, "600")
    refresh_groups_enabled: bool = _setting("refresh.groups.enabled", boolean, "true")
    refresh_groups_interval_seconds: int = _setting("refresh.groups.interval.seconds", interval, "600")
    sync_topic_configs_enabled: bool = _setting("sync.topic.configs.enabled", boolean, "true")
    sync_topic_configs_interval_seconds: int = _setting("sync.topic.configs.interval.seconds", interval, "600")
    sync_topic_acls_enabled: bool = _setting("sync.topic.acls.enabled", boolean, "true")
    sync_topic_acls_interval_seconds: int = _setting("sync.topic.acls.interval.seconds", interval, "600")
    emit_offset_syncs_enabled: bool = _setting("emit.offset-syncs.enabled", boolean, "true")
    offset_syncs_topic_location: str = _setting("offset-syncs.topic.location", choice("source", "target"),
                                                "source")
    tasks_max: int = _setting("tasks.max", at_least(1, maximum=INT32_MAX), "1")
    heartbeats_replication_enabled: bool = _setting("heartbeats.replication.enabled", boolean, "true")
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
        loaded with (replicator.configfile); an unresolvable one raises. Without
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


class _Builder:
    """One pass over the parsed file; every error and warning goes to ``report``, with its line."""

    def __init__(self, entries: Properties, path: str, resolve_references: ReferenceResolver | None) -> None:
        self.entries, self.path = entries, path
        self.resolve_references = resolve_references
        self.report = Diagnostics(entries, path)

    def build(self) -> MM2Config:
        report = self.report
        report.check_entries()
        aliases, clusters_line = self._read_clusters()
        if aliases is None:
            raise report.failure()
        layout = self._layout(aliases, clusters_line)
        clusters = {alias: self._cluster(alias, layout) for alias in aliases}
        flows = [self._flow(s, t, layout) for s in aliases for t in aliases if s != t]
        report.check_flows(flows, layout)
        report.check_same_bootstrap(clusters)
        if report.errors:
            raise report.failure()
        config = MM2Config(self.path, clusters, flows, report.warnings, layout, self.resolve_references)
        report.check_client_security(config, layout)
        config.warnings.sort(key=lambda w: w.line or 0)
        return config

    # -- clusters and key placement ----------------------------------------------------

    def _read_clusters(self) -> tuple[list[str] | None, int]:
        entry = self.entries.get("clusters")
        if entry is None:
            marked = next((e for k, e in self.entries.items()
                           if k in ("\ufeffclusters", "\u00ef\u00bb\u00bfclusters")), None)
            if marked is not None:  # Java reads the UTF-8 byte-order mark as part of the first key
                self.report.error("the file starts with a UTF-8 byte-order mark, so the first key reads as "
                                  f"{marked.key!r}, not `clusters` (MM2 reads it the same way)", marked.line,
                                  hint="save the file as UTF-8 without a byte-order mark")
                return None, marked.line
            self.report.error("no `clusters` line: MM2 needs the list of cluster aliases", 1,
                              hint="add e.g. `clusters = primary, dr`")
            return None, 1
        aliases: list[str] = []
        for alias in java_list(entry.value):
            if alias in aliases:
                self.report.warn(f"cluster alias {alias!r} is listed twice", entry.line)
                continue
            if PLACEHOLDER.fullmatch(alias):
                self.report.error(f"cluster alias {alias!r} is a placeholder; replace it with a real name", entry.line)
            elif not ALIAS.fullmatch(alias):
                self.report.error(f"cluster alias {alias!r} may only use letters, digits, '.', '_' and '-' "
                                  "(MM2 puts aliases into topic names)", entry.line)
            aliases.append(alias)  # kept even when bad, so its keys are still read as its own
        if not aliases:
            self.report.error("`clusters` is empty: list the cluster aliases", entry.line,
                              hint="e.g. clusters = primary, dr")
        return aliases, entry.line

    def _layout(self, aliases: list[str], clusters_line: int) -> Layout:
        layout = Layout({}, {a: {} for a in aliases}, {}, clusters_line)
        by_length = sorted(aliases, key=len, reverse=True)

        def alias_prefix(key: str) -> str | None:
            return next((a for a in by_length if key.startswith(a + ".")), None)

        for key, entry in self.entries.items():
            if "->" in key:
                source, _, rest = key.partition("->")
                target = alias_prefix(rest) or rest.partition(".")[0]
                sub = rest[len(target) + 1:]
                if self.report.check_flow_key(entry, source, target, sub, aliases):
                    layout.flow_keys.setdefault((source, target), {})[sub] = entry
            elif (alias := alias_prefix(key)) is not None:
                sub = key[len(alias) + 1:]
                self.report.check_cluster_key(entry, alias, sub)
                layout.cluster_keys[alias][sub] = entry
            else:
                self.report.check_top_key(entry, aliases)
                layout.top[key] = entry
        return layout

    # -- clusters and flows ------------------------------------------------------------

    def _cluster(self, alias: str, layout: Layout) -> ClusterConfig:
        keys = layout.cluster_keys[alias]
        entry = keys.get("bootstrap.servers")
        if entry is None and "bootstrap.servers" in layout.top:
            entry = layout.top["bootstrap.servers"]
            self.report.warn(f"cluster {alias!r} has no `{alias}.bootstrap.servers`; MM2 falls back to the top-level "
                             f"bootstrap.servers (line {entry.line})", layout.clusters_line)
        if entry is None:
            self.report.error(f"cluster {alias!r} has no bootstrap servers", layout.clusters_line, cluster=alias,
                              hint=f"add `{alias}.bootstrap.servers = host:9092`")
            return ClusterConfig(alias, "", {k: e.value for k, e in keys.items()}, layout.clusters_line)
        hosts = java_list(entry.value)
        if not any(hosts):
            self.report.error(f"`{entry.key}` lists no hosts ({entry.value.strip()!r})", entry.line, cluster=alias,
                              hint="expected host:port[,host:port...]")
        for host in hosts if any(hosts) else []:
            match = _HOST_PORT.fullmatch(host)
            if not host:
                self.report.error(f"`{entry.key}` has an empty entry (a stray comma)", entry.line, cluster=alias)
            elif PLACEHOLDER.fullmatch(host):
                self.report.error(f"`{entry.key}` has the placeholder {host!r}", entry.line, cluster=alias,
                                  hint="replace it with the broker's host:port")
            elif not match:
                self.report.error(f"`{entry.key}` entry {host!r} is not host:port", entry.line, cluster=alias,
                                  hint="e.g. broker1:9092")
            elif not 0 < int(match.group(2)) < 65536:
                self.report.error(f"`{entry.key}` entry {host!r} has port outside 1-65535", entry.line, cluster=alias)
        return ClusterConfig(alias, ",".join(hosts), {k: e.value for k, e in keys.items()}, entry.line)

    def _flow(self, source: str, target: str, layout: Layout) -> FlowConfig:
        effective = flow_entries(layout, source, target)
        for old, new in DEPRECATED_ALIASES.items():
            if old in effective:
                entry = effective.pop(old)
                if new in effective:
                    self.report.warn(f"`{entry.key}` is ignored for {source}->{target}: `{effective[new].key}` "
                                     f"(line {effective[new].line}) wins", entry.line)
                else:
                    effective[new] = entry
        values: dict[str, object] = {}
        for name, (key, parse, default) in _FLOW_SETTINGS.items():
            entry = effective.get(key)
            try:
                values[name] = parse(entry.value if entry else default)
            except InvalidValue as exc:
                self.report.error(f"`{entry.key}` {exc.message}", entry.line, hint=exc.hint)
                values[name] = parse(default)
        eos = layout.cluster_keys[target].get("exactly.once.source.support")
        values["exactly_once_support"] = "disabled"
        if eos is not None:
            try:
                values["exactly_once_support"] = EXACTLY_ONCE(eos.value)
            except InvalidValue as exc:
                self.report.error(f"`{eos.key}` {exc.message}", eos.line, cluster=target)
        connector_eos = effective.get("exactly.once.support")
        if connector_eos is not None:
            try:
                values["exactly_once_connector"] = EXACTLY_ONCE_CONNECTOR(connector_eos.value)
            except InvalidValue as exc:
                self.report.error(f"`{connector_eos.key}` {exc.message}", connector_eos.line, hint=exc.hint)
        self.report.check_filters(values, effective)
        self.report.check_offset_syncs_off(source, target, values, effective)
        props = dict(FLOW_DEFAULTS)
        props.update({k: e.value for k, e in effective.items()})
        origins = {k: (e.key, e.line) for k, e in effective.items()}
        return FlowConfig(source=source, target=target, props=props, origins=origins, **values)
