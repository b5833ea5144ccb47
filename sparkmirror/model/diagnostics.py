"""What is probably wrong with an mm2.properties: each finding as an error or a warning with its line.

MM2 starts with much that cannot be what its author meant: a key at a level
MM2 never reads it from, a typo, a deprecated name, a regex whose backslash
.properties escaping ate, a cycle of Identity flows, clusters whose clients
disagree on security. The config model (:mod:`sparkmirror.model.config`) builds
the clusters and flows; Diagnostics is where it collects every problem, each
once, and where the checks that only judge (and build nothing) live, so that
all of them are raised together as ConfigErrors with FILE:LINE.
"""

from __future__ import annotations

import difflib
import re

from sparkmirror.errors import ConfigError, ConfigErrors, one_line
from sparkmirror.model.clients import ROLES
from sparkmirror.model.config import CONNECTOR_KEYS, ClusterConfig, ConfigWarning, FlowConfig, MM2Config
from sparkmirror.model.filters import GroupFilter, TopicFilter
from sparkmirror.model.layering import DEPRECATED_ALIASES, ROLE_PREFIXES, Layout, is_cluster_client_key
from sparkmirror.model.properties import Entry, Properties
from sparkmirror.model.values import DEFAULT_POLICY, IDENTITY_POLICY

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


class Diagnostics:
    """Every error and warning about one file, each said once (a set: files can be huge), and the checks."""

    def __init__(self, entries: Properties, path: str) -> None:
        self.entries, self.path = entries, path
        self.errors: list[ConfigError] = []
        self.warnings: list[ConfigWarning] = []
        self._said: set[tuple[str, int | None, str]] = set()
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

    def failure(self) -> ConfigErrors:
        failure = ConfigErrors(sorted(self.errors, key=lambda e: e.line or 0))
        failure.warnings = sorted(self.warnings, key=lambda w: w.line or 0)  # shown next to the errors
        return failure

    # -- keys --------------------------------------------------------------------------

    def check_entries(self) -> None:
        """What is wrong with a line whatever its key: a NUL character, a key set twice."""
        for entry in self.entries.values():
            if "\x00" in entry.key or "\x00" in entry.value:  # the value is not shown: it may be a password
                self.error(f"`{entry.key.replace(chr(0), '<NUL>')}` contains a NUL character (byte 0)", entry.line,
                           hint="remove it: no Kafka setting holds one, and librdkafka reads settings as C strings")
        for dup in self.entries.duplicates:
            self.warn(f"`{dup.key}` is set again here; this value wins over line {dup.previous_line}", dup.line)

    def check_flow_key(self, entry: Entry, source: str, target: str, sub: str, aliases: list[str]) -> bool:
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

    def check_cluster_key(self, entry: Entry, alias: str, sub: str) -> None:
        if is_cluster_client_key(sub) or sub.startswith(ROLE_PREFIXES) or sub.startswith(_WORKER_PREFIXES):
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

    def check_top_key(self, entry: Entry, aliases: list[str]) -> None:
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
        elif key.startswith(ROLE_PREFIXES) or key in _client_keys():
            self.warn(f"MM2 ignores a top-level `{key}`; write it per cluster (`A.{key}`"
                      f"{'' if key.startswith(ROLE_PREFIXES) else ' with .consumer./.producer./.admin.'}) "
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
        self._guesses += 1  # difflib is slow per key: a file of thousands of unknown keys gets 200 guesses
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

    # -- flows and clusters ------------------------------------------------------------

    def check_filters(self, values: dict[str, object], effective: dict[str, Entry]) -> None:
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

    def check_offset_syncs_off(self, source: str, target: str, values: dict[str, object],
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

    def check_flows(self, flows: list[FlowConfig], layout: Layout) -> None:
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

    def check_same_bootstrap(self, clusters: dict[str, ClusterConfig]) -> None:
        seen: dict[str, str] = {}
        for alias, cluster in clusters.items():
            split = cluster.bootstrap_servers.split(",")
            hosts = ",".join(sorted(split)) if all(split) else ""  # empty lists are errors already
            if hosts and hosts in seen:
                self.warn(f"clusters {seen[hosts]!r} and {alias!r} have the same bootstrap.servers: "
                          "a flow between them copies a cluster into itself", cluster.line)
            seen.setdefault(hosts, alias)

    def check_client_security(self, config: MM2Config, layout: Layout) -> None:
        """MM2 also opens admin and producer clients on every cluster; a role-only login is a trap."""
        for alias in config.clusters:
            protocols: dict[str, str] = {}
            for role in ROLES:
                try:
                    protocols[role] = config.client_config(alias, role).get("security.protocol", "PLAINTEXT").upper()
                except ConfigError:
                    return  # reported when the clients are translated
            if len(set(protocols.values())) > 1:
                keys = layout.cluster_keys[alias]
                line = min((e.line for k, e in keys.items() if k.endswith(".security.protocol")), default=None)
                detail = ", ".join(f"{role} {p}" for role, p in protocols.items())
                self.warn(f"cluster {alias!r} clients disagree on security.protocol ({detail}); MM2 and "
                          f"sparkmirror use all three (topic/ACL sync, offset-syncs, heartbeats): set "
                          f"`{alias}.security.protocol`, `{alias}.sasl.*`, `{alias}.ssl.*` at cluster level",
                          line or layout.clusters_line)


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
    return is_cluster_client_key(sub) or sub.startswith(ROLE_PREFIXES) or sub == "exactly.once.source.support"


def _client_keys() -> frozenset[str]:
    from sparkmirror.model.clients import JAVA_CLIENT_KEYS

    return JAVA_CLIENT_KEYS - CONNECTOR_KEYS
