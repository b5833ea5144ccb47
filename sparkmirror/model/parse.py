"""parse_config: mm2.properties text to the MM2Config of :mod:`sparkmirror.model.config`.

One pass over the file's lines: keys sorted by level and layered as MM2 does, each flow
setting parsed by its type's parser, every problem collected by
:mod:`sparkmirror.model.diagnostics` and raised at once as ConfigErrors with FILE:LINE.
"""

from __future__ import annotations

from sparkmirror.model.config import (CONNECTOR_KEYS, FLOW_DEFAULTS, _FLOW_SETTINGS, _HOST_PORT, ClusterConfig, FlowConfig,
                                      MM2Config, ReferenceResolver)
from sparkmirror.model.diagnostics import Diagnostics
from sparkmirror.model.layering import DEPRECATED_ALIASES, Layout, flow_entries
from sparkmirror.model.properties import Properties, parse_properties
from sparkmirror.model.values import ALIAS, EXACTLY_ONCE, EXACTLY_ONCE_CONNECTOR, PLACEHOLDER, InvalidValue, java_list


def parse_config(text: str, path: str = "<string>", *,
                 resolve_references: ReferenceResolver | None = None) -> MM2Config:
    """Parse and validate mm2.properties text; raises ConfigErrors listing every problem.

    ``resolve_references`` replaces ``${provider:path:key}`` in a client's
    settings (sparkmirror.configfile.resolve_references reads files and the
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
        effective = flow_entries(layout, source, target, CONNECTOR_KEYS)
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
