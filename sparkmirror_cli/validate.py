"""``sparkmirror validate CONFIG``: read mm2.properties as MM2 would, show what sparkmirror will do.

The point is to find every mistake before anything touches a cluster: the
model collects all configuration errors in one pass, and the client settings
of every cluster a flow uses are translated for librdkafka and Spark here too,
so a JKS truststore or a custom login class fails now, not at 3 a.m. No
network, no Spark. Secrets are masked in everything printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sparkmirror.configfile import load_config
from sparkmirror.errors import ConfigError
from sparkmirror.model.config import FLOW_DEFAULTS, FLOW_KEY_DESCRIPTIONS, FlowConfig, MM2Config
from sparkmirror.model.config import ConfigWarning
from sparkmirror.model.flowclients import translate_clients
from sparkmirror.model.masking import mask_secrets

DESCRIPTION = """\
Check an mm2.properties file (MirrorMaker 2's own format, unchanged) and print
the effective replication flows: for each source->target pair whether it is
enabled, which topics and consumer groups it replicates, the replication policy,
the loop intervals, replication factors, where offset-syncs live, and the client
settings of each cluster translated for librdkafka (secrets masked).

Problems are printed as FILE:LINE: message on stderr, all of them at once.
Warnings (unknown keys, deprecated names, settings MM2 ignores) are printed as
FILE:LINE: warning: message and do not fail the check. Nothing connects to Kafka.
"""
EPILOG = """\
exit status: 0 valid (warnings allowed), 2 invalid or unreadable.

example:
  sparkmirror validate mm2.properties
  sparkmirror validate --json mm2.properties | jq '.flows[] | select(.enabled)'
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check an mm2.properties and print the effective flows",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", metavar="CONFIG", help="path of the mm2.properties file")
    parser.add_argument("--json", action="store_true",
                        help="print the effective configuration (or the errors) as JSON on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    warnings: list[ConfigWarning] = []
    try:
        config = load_config(args.config)
        warnings = config.warnings
        clients = _translate_clients(config)
    except ConfigError as exc:
        errors = list(getattr(exc, "errors", [exc]))
        warnings = warnings or list(getattr(exc, "warnings", []))
        _print_problems(errors, warnings)
        if args.json:
            print(json.dumps({"file": args.config, "valid": False, "errors": [_error_json(e) for e in errors],
                              "warnings": [_warning_json(w) for w in warnings]}, indent=2))
        return exc.exit_code
    _print_problems([], warnings)
    if args.json:
        print(json.dumps(_as_json(config, clients), indent=2))
    else:
        print(_as_text(config, clients))
    return 0


# ---------------------------------------------------------------------------- clients


def _translate_clients(config: MM2Config) -> dict[str, list[dict[str, Any]]]:
    """Per flow, every client's librdkafka settings (secrets masked); all translation errors raised together."""
    return {name: [{"cluster": c.cluster, "role": c.role, "purpose": c.purpose,
                    "librdkafka": mask_secrets(c.librdkafka), "dropped": c.dropped,
                    **({"spark_source_options": mask_secrets(c.spark_source_options)}
                       if c.spark_source_options is not None else {})}
                   for c in clients]
            for name, clients in translate_clients(config).items()}


# ---------------------------------------------------------------------------- output


def _print_problems(errors: list[ConfigError], warnings: list[ConfigWarning]) -> None:
    for warning in warnings:
        print(str(warning), file=sys.stderr)
    for error in errors:
        print(str(error), file=sys.stderr)


def _error_json(error: ConfigError) -> dict[str, Any]:
    return {"file": error.file, "line": error.line, "message": error.message, "cluster": error.cluster,
            "hint": error.hint}


def _warning_json(warning: ConfigWarning) -> dict[str, Any]:
    return {"file": warning.file, "line": warning.line, "message": warning.message}


def _remote_example(flow: FlowConfig) -> str:
    try:
        return (f"orders -> {flow.policy.format_remote_topic(flow.source, 'orders')}; offset-syncs topic "
                f"{flow.offset_syncs_location[1]}")
    except (ImportError, AttributeError, ConfigError):
        return ""


def _flow_json(flow: FlowConfig) -> dict[str, Any]:
    settings = {name: getattr(flow, name) for name in flow.__dataclass_fields__ if name not in ("props", "origins")}
    return {"name": flow.name, **settings, "exactly_once": flow.exactly_once,
            "lines": {key: line for key, (_, line) in sorted(flow.origins.items())},
            "keys": _keys_json(flow),
            "remote_topic_example": _remote_example(flow)}


def _keys_json(flow: FlowConfig) -> dict[str, dict[str, Any]]:
    """Every MM2 key the flow reads: its effective text, MM2's default, its line and what it does."""
    return {key: {"value": flow.props.get(key, FLOW_DEFAULTS[key]), "default": FLOW_DEFAULTS[key],
                  "line": flow.line_of(key), "description": description}
            for key, description in FLOW_KEY_DESCRIPTIONS.items()}


def _as_json(config: MM2Config, clients: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "file": config.path,
        "valid": True,
        "clusters": {alias: {"bootstrap.servers": c.bootstrap_servers, "line": c.line}
                     for alias, c in config.clusters.items()},
        "flows": [{**_flow_json(flow), "clients": clients[flow.name]} for flow in config.flows],
        "warnings": [_warning_json(w) for w in config.warnings],
    }


def _every(flow: FlowConfig, loop: str) -> str:
    seconds = flow.interval_seconds(loop)
    field = loop.replace(".", "_")
    line = flow.line_of(f"{loop}.interval.seconds") or flow.line_of(f"{loop}.enabled")
    where = f" (line {line})" if line else ""
    if seconds is None:
        return f"off{where}" if getattr(flow, f"{field}_enabled") is False or line else "off"
    return f"every {seconds}s{where}"


def _as_text(config: MM2Config, clients: dict[str, list[dict[str, Any]]]) -> str:
    enabled = config.enabled_flows()
    out = [f"{config.path}: valid — {len(config.clusters)} clusters, {len(enabled)} of {len(config.flows)} "
           f"flows enabled", ""]
    width = max(len(a) for a in config.clusters)
    for alias, cluster in config.clusters.items():
        out.append(f"cluster {alias:<{width}}  {cluster.bootstrap_servers}  (line {cluster.line})")
    for flow in config.flows:
        out.append("")
        if not flow.enabled:
            beats = _every(flow, "emit.heartbeats")
            out.append(f"{flow.name}  disabled — heartbeats only: {beats}")
        else:
            out.extend(_flow_lines(flow))
        for client in clients.get(flow.name, []):
            settings = " ".join(f"{k}={v}" for k, v in sorted(client["librdkafka"].items()))
            out.append(f"    {client['cluster']} {client['role']} ({client['purpose']}): {settings}")
    return "\n".join(out)


def _exactly_once(flow: FlowConfig) -> str:
    reason = flow.exactly_once_reason()
    if flow.exactly_once:
        return (f"on ({reason}): one Kafka transaction per source partition and batch on {flow.target}; "
                "read the mirror topics with isolation.level=read_committed")
    return reason if reason == "disabled" else f"off ({reason})"


def _flow_lines(flow: FlowConfig) -> list[str]:
    def src(key: str) -> str:
        line = flow.line_of(key)
        return f"  (line {line})" if line else "  (default)"

    policy = flow.replication_policy_class.rsplit(".", 1)[-1]
    example = _remote_example(flow)
    syncs_line = flow.line_of("emit.offset-syncs.enabled")
    if flow.emit_offset_syncs_enabled:
        checkpoints = _every(flow, "emit.checkpoints")
        syncs = (f"on {flow.offset_syncs_topic_location} ({flow.offset_syncs_cluster}), "
                 f"offset.lag.max {flow.offset_lag_max}")
    else:
        checkpoints = f"off: no offset-syncs to translate with (line {syncs_line})"
        syncs = f"off (line {syncs_line}): no offset-syncs topic is created or written"
    beats_carried = ("replicated whatever `topics` says" if flow.heartbeats_replication_enabled
                     else "replicated only if `topics` matches") + src("heartbeats.replication.enabled")
    return [
        f"{flow.name}  enabled{src('enabled')}",
        f"  topics          {', '.join(flow.topics) or '(none)'}{src('topics')}",
        f"    exclude       {', '.join(flow.topics_exclude) or '(none)'}{src('topics.exclude')}",
        f"  groups          {', '.join(flow.groups) or '(none)'}{src('groups')}",
        f"    exclude       {', '.join(flow.groups_exclude) or '(none)'}{src('groups.exclude')}",
        f"  policy          {policy}, separator {flow.replication_policy_separator!r}"
        f"{src('replication.policy.class')}" + (f"\n                  {example}" if example else ""),
        f"  heartbeats      {_every(flow, 'emit.heartbeats')}; heartbeats topics {beats_carried}",
        f"  checkpoints     {checkpoints}",
        f"  group offsets   {_every(flow, 'sync.group.offsets')}",
        f"  refresh         topics {_every(flow, 'refresh.topics')}, groups {_every(flow, 'refresh.groups')}",
        f"  sync            topic configs {_every(flow, 'sync.topic.configs')}, "
        f"topic ACLs {_every(flow, 'sync.topic.acls')}",
        f"  replication     mirror topics {flow.replication_factor}, heartbeats "
        f"{flow.heartbeats_topic_replication_factor}, checkpoints {flow.checkpoints_topic_replication_factor}, "
        f"offset-syncs {flow.offset_syncs_topic_replication_factor}",
        f"  offset-syncs    {syncs}",
        f"  tasks.max {flow.tasks_max}, exactly-once {_exactly_once(flow)}",
        "  clients (librdkafka):",
    ]
