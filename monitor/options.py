"""The monitor's options, declared once.

``OPTIONS`` lists every option of ``sparkmirror monitor``: its flag, default, help and who
reads it, the *evaluator* (statuses and figures from what was collected) or the
*watcher* (the service, its collectors and its HTTP server). Everything else is made
from it:

- the command line (``add_arguments``, ``options_from_args``: parsing and the checks);
- ``MonitorOptions``, the settings the service runs with, one field per option (the
  options marked ``composite`` make the fields in ``_COMPOSED`` instead: ``--listen``
  gives ``host`` and ``port``, ``--topics`` and ``--topics-exclude`` the ``topic_filter``);
- ``EvaluatorSettings``, the evaluator's view of it: the fields the evaluator reads;
- the table of options in docs/monitor-status.md (``python -m monitor.options`` prints it).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monitor.audit.budget import DEFAULT_BUDGET as DEFAULT_AUDIT_BUDGET
from sparkmirror import objectives
from sparkmirror.errors import ConfigError
from sparkmirror.listen import parse_listen
from sparkmirror.metrics import GRANULARITIES, SERIES_MODES
from sparkmirror.model.filters import GroupFilter, TopicFilter

EVALUATOR, WATCHER = frozenset({"evaluator"}), frozenset({"watcher"})
BOTH = EVALUATOR | WATCHER

DEFAULT_LISTEN = "127.0.0.1:9464"
#: who copies the flows, as the audit reads their source (monitor.audit.engine)
AUDIT_REPLICATORS = ("sparkmirror", "mm2")


@dataclasses.dataclass(frozen=True)
class Check:
    """A command-line value that ``accepts`` refuses is a usage error: ``--flag <message>``."""

    accepts: Callable[[Any], bool]
    message: str


MORE_THAN_0 = Check(lambda v: v > 0, "must be more than 0 seconds")
AT_LEAST_2 = Check(lambda v: v >= 2, "must be at least 2")
AT_LEAST_0 = Check(lambda v: v >= 0, "must be 0 or more")
#: The order the checks run in (each over the options in their order): the first refusal is reported.
CHECKS = (MORE_THAN_0, AT_LEAST_2, AT_LEAST_0)


def regex_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of ``sparkmirror monitor``; ``default`` is the value as the command line has it."""

    flag: str
    default: Any
    help: str  # "{default}" stands for the default, written as on the command line
    reads: frozenset[str]  # EVALUATOR, WATCHER or BOTH
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    check: Check | None = None
    unlimited_at_0: bool = False  # 0 means no limit: None in MonitorOptions
    action: str | None = None
    dest: str = ""  # the argparse destination and MonitorOptions field; "" for the flag's name
    composite: bool = False  # no field of its own: goes into one of _COMPOSED

    @property
    def name(self) -> str:
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    @property
    def value(self) -> Any:
        """The MonitorOptions value when the flag is not given."""
        return self.convert(self.default)

    def convert(self, value: Any) -> Any:
        """A command-line value as MonitorOptions holds it."""
        return (value or None) if self.unlimited_at_0 else value

    @property
    def shown_default(self) -> str:
        value = self.default
        if isinstance(value, bool) or value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, (list, tuple)):
            return ",".join(value) or "-"
        return str(value)

    @property
    def help_text(self) -> str:
        return self.help.replace("{default}", self.shown_default)

    @property
    def annotation(self) -> str:
        kind = "bool" if self.action == "store_false" else getattr(self.type, "__name__", "str")
        return f"{kind} | None" if self.value is None else kind


OPTIONS: tuple[Option, ...] = (
    Option("--listen", DEFAULT_LISTEN, "address of the HTTP server (default {default}; port 0 picks a free one)",
           WATCHER, metavar="HOST:PORT", composite=True),
    Option("--web-config-file", None,
           "TLS and/or basic auth for the HTTP server, in Prometheus' web configuration format "
           "(tls_server_config: cert_file, key_file, client_ca_file, client_auth_type; "
           "basic_auth_users: name -> bcrypt hash); /healthz needs no credentials",
           WATCHER, metavar="FILE", composite=True),
    Option("--interval", 5.0,
           "refresh of the status, of source log start offsets and of the samples behind the "
           "trend rules (STALL, growing lag; default {default})",
           WATCHER, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--positions-interval", 0.2,
           "refresh of end offsets, replicated positions and seconds lag (default {default}; the "
           "refresh waits 3x as long as it took, at most --interval, so a slow one takes at most a quarter of a core)",
           WATCHER, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--groups-interval", 30.0,
           "refresh of consumer-group committed offsets on the sources (default {default})",
           BOTH, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--metadata-interval", 30.0, "refresh of topic and partition lists (default {default})",
           WATCHER, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--timeout", 10.0, "time limit of one request to one cluster (default {default})",
           WATCHER, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--granularity", "partition",
           "finest metric labels: per flow, per topic, or per partition (default); "
           "/api/status always has partitions",
           EVALUATOR, choices=GRANULARITIES),
    Option("--series", "all",
           "per-partition series at --granularity partition: every partition (default), none "
           "(topic-level series only), or only partitions that are not OK and group partitions "
           "whose checkpoint is not current (a cardinality budget: docs/alerts.md)",
           EVALUATOR, choices=SERIES_MODES),
    Option("--topics", (".*",), "watch only these source topics (on top of each flow's own filter; default all)",
           WATCHER, type=regex_list, metavar="REGEX[,REGEX...]", composite=True),
    Option("--topics-exclude", (), "never watch these source topics",
           WATCHER, type=regex_list, metavar="REGEX[,REGEX...]", composite=True),
    Option("--groups", (".*",), "watch checkpoints of only these groups (on top of each flow's group filter)",
           WATCHER, type=regex_list, metavar="REGEX[,REGEX...]", composite=True),
    Option("--groups-exclude", (), "never watch these groups",
           WATCHER, type=regex_list, metavar="REGEX[,REGEX...]", composite=True),
    Option("--window", 10,
           "refreshes that must agree before a partition is STALL or lag-growing WARN (default {default})",
           BOTH, type=int, metavar="N", check=AT_LEAST_2),
    Option("--heartbeat-timeout", None,
           "seconds without a heartbeat arriving on the target after which a flow is STOP "
           "(default 2 x emit.heartbeats.interval.seconds, at least 10)",
           EVALUATOR, type=float, metavar="SECONDS"),
    Option("--heartbeat-latency-warn", 30.0,
           "a flow whose newest heartbeat is older than this while heartbeats still arrive "
           "is WARN: replicating, but late (default {default})",
           EVALUATOR, type=float, metavar="SECONDS"),
    Option("--checkpoint-timeout", None,
           "checkpoint age after which a moving group's checkpoint is stale "
           "(default 2 x emit.checkpoints.interval.seconds + --groups-interval)",
           EVALUATOR, type=float, metavar="SECONDS"),
    Option("--failover-max-reread-seconds", 300.0,
           "a group whose failover now would re-read records spanning more than this is not "
           "ready to fail over (default {default}; 0 = no limit)",
           EVALUATOR, type=float, metavar="SECONDS", check=AT_LEAST_0, unlimited_at_0=True),
    Option("--failover-max-reread-records", 0,
           "a group whose failover now would re-read more records than this (summed over its "
           "partitions) is not ready to fail over (default {default} = no limit)",
           EVALUATOR, type=int, metavar="N", check=AT_LEAST_0, unlimited_at_0=True),
    Option("--retention-headroom-warn", 3600.0,
           "WARN when source retention may delete records not yet on the target within this "
           "time, or within half the topic's retention.ms if that is shorter (default {default})",
           EVALUATOR, type=float, metavar="SECONDS", check=AT_LEAST_0),
    Option("--history-step", 10.0,
           "seconds per point of the history the status page charts (1,080 points per flow: "
           "3 hours at the default {default}; /api/history)",
           WATCHER, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--objectives", None,
           "the mixin config the alert rules are rendered from (python -m generate --config): its "
           "rpo: section sets each flow's recovery-point objective, shown with its budget left on "
           "/api/status and the status page (default: lag <= 30s for a 0.999 share of 30d for every flow; "
           "docs/slo.md)",
           WATCHER, metavar="FILE", composite=True),
    Option("--replicator-url", (),
           "the control API of the sparkmirror replicator(s) running these flows (their --metrics-listen "
           "address, e.g. http://127.0.0.1:9465), read every --interval (GET /api/flows), so that a flow "
           "paused on purpose is PAUSED, not STOP (Apache MM2 has no such API)",
           WATCHER, type=regex_list, metavar="URL[,URL...]"),
    Option("--replicator-user", None, "basic auth user for --replicator-url (password: --replicator-password-file)",
           WATCHER, metavar="USER"),
    Option("--replicator-password-file", None, "a file whose first line is --replicator-user's password",
           WATCHER, metavar="FILE"),
    Option("--replicator-cacert", None, "CA certificate to verify an https --replicator-url with",
           WATCHER, metavar="FILE"),
    Option("--no-seconds-lag", True,
           "do not read source records to measure lag in seconds (nor the time span a "
           "failover would re-read)",
           WATCHER, action="store_false", dest="probe_lag_seconds"),
    # The audit (monitor.audit; docs/audit.md): AuditOptions.of reads these fields.
    Option("--audit", "on", "audit every flow's copy record by record: on (default) or off",
           WATCHER, choices=("on", "off")),
    Option("--audit-budget", DEFAULT_AUDIT_BUDGET,
           "bytes per second the audit reads from each cluster at most (default {default}: docs/audit.md)",
           WATCHER, type=int, metavar="BYTES", check=AT_LEAST_0),
    Option("--audit-interval", 5.0, "seconds between two audit rounds (default {default})",
           WATCHER, type=float, metavar="SECONDS", check=MORE_THAN_0),
    Option("--audit-state-dir", None,
           "directory for the audit's positions and the syncs it has seen, so that a restarted monitor "
           "continues (default: none, and a restart begins afresh)",
           WATCHER, metavar="DIR"),
    Option("--audit-replicator", "sparkmirror",
           "who copies the flows: the source is read as it reads (sparkmirror: read_committed; mm2: its "
           "consumer's isolation.level, read_uncommitted unless set). Default {default}",
           WATCHER, choices=AUDIT_REPLICATORS),
)

AUDIT_OPTIONS = tuple(o for o in OPTIONS if o.flag == "--audit" or o.flag.startswith("--audit-"))

OPTION = {o.flag: o for o in OPTIONS}


def _default_filter(kind: type, include: str, exclude: str) -> Callable[[], Any]:
    return lambda: kind(OPTION[include].default, OPTION[exclude].default)


_HOST, _PORT = parse_listen(DEFAULT_LISTEN, "--listen", DEFAULT_LISTEN)

#: The MonitorOptions fields that the ``composite`` options make (see ``options_from_args``).
_COMPOSED = (
    ("host", "str", dataclasses.field(default=_HOST)),
    ("port", "int", dataclasses.field(default=_PORT)),
    ("topic_filter", "TopicFilter",
     dataclasses.field(default_factory=_default_filter(TopicFilter, "--topics", "--topics-exclude"))),
    ("group_filter", "GroupFilter",
     dataclasses.field(default_factory=_default_filter(GroupFilter, "--groups", "--groups-exclude"))),
    ("web_config", "WebConfig | None", dataclasses.field(default=None)),  # TLS and basic auth of the HTTP server
    ("objectives", "Objectives", dataclasses.field(default=objectives.DEFAULT)),  # the flows' RPOs
)


def _settings_class(name: str, doc: str, options, extra=(), namespace=None) -> type:
    fields = [(o.name, o.annotation, dataclasses.field(default=o.value)) for o in options if not o.composite]
    return dataclasses.make_dataclass(name, [*fields, *extra], frozen=True, kw_only=True, namespace={
        "__module__": __name__, "__qualname__": name, "__doc__": doc, **(namespace or {})})


MonitorOptions = _settings_class(
    "MonitorOptions", "The monitor's own settings (command line), independent of mm2.properties; fields "
    "from OPTIONS.", OPTIONS, _COMPOSED)


def _evaluator_view(cls, options) -> Any:
    return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)})


EvaluatorSettings = _settings_class(
    "EvaluatorSettings", "What the evaluator reads of MonitorOptions (``EvaluatorSettings.of(options)``).",
    [o for o in OPTIONS if EVALUATOR <= o.reads], namespace={"of": classmethod(_evaluator_view)})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of OPTIONS on ``parser``, in order."""
    for o in OPTIONS:
        kwargs = {"dest": o.name, "default": o.default, "help": o.help_text}
        if o.action is not None:
            kwargs["action"] = o.action
        else:
            kwargs.update({k: v for k, v in (("type", o.type), ("metavar", o.metavar), ("choices", o.choices))
                           if v is not None})
        parser.add_argument(o.flag, **kwargs)


def options_from_args(args: argparse.Namespace) -> MonitorOptions:
    """MonitorOptions from parsed arguments; ConfigError (exit 2) for a value an option refuses."""
    host, port = parse_listen(args.listen, "--listen", DEFAULT_LISTEN)
    for check in CHECKS:
        for o in OPTIONS:
            if o.check is check and not check.accepts(getattr(args, o.name)):
                raise ConfigError(f"{o.flag} {check.message}")
    values = {o.name: o.convert(getattr(args, o.name)) for o in OPTIONS if not o.composite}
    if args.replicator_user and not args.replicator_password_file:
        raise ConfigError("--replicator-user needs --replicator-password-file FILE")
    values["replicator_url"] = tuple(values["replicator_url"])
    from sparkmirror.webconfig import load_web_config  # ssl and friends: only when the command runs

    try:
        rpo = objectives.load(Path(args.objectives)) if args.objectives else objectives.DEFAULT
    except objectives.ObjectiveError as exc:
        raise ConfigError(f"--objectives {exc}") from exc
    return MonitorOptions(
        **values, host=host, port=port,
        topic_filter=TopicFilter(args.topics, args.topics_exclude),
        group_filter=GroupFilter(args.groups, args.groups_exclude),
        web_config=load_web_config(args.web_config_file), objectives=rpo)


def markdown_table() -> str:
    """The table of options in docs/monitor-status.md."""
    rows = ["| option | default | read by | what |", "| --- | --- | --- | --- |"]
    for o in OPTIONS:
        shape = o.metavar or ("{" + ",".join(o.choices) + "}" if o.choices else "")
        flag = f"`{o.flag} {shape}`" if shape else f"`{o.flag}`"
        default = f"`{o.shown_default}`" if o.shown_default != "-" else "-"
        readers = ", ".join(sorted(o.reads))
        rows.append(f"| {flag} | {default} | {readers} | {o.help_text.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
