"""The audit's options, declared as the monitor declares its own (monitor.options.Option).

The monitor's command line adds ``AUDIT_OPTIONS`` to its own; ``AuditOptions.of`` reads
their values from any object that has them as attributes (the parsed command line, or
MonitorOptions once it has the fields).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from monitor.audit.budget import DEFAULT_BUDGET
from monitor.audit.engine import REPLICATORS
from monitor.options import AT_LEAST_0, MORE_THAN_0, WATCHER, Option

AUDIT_OPTIONS: tuple[Option, ...] = (
    Option("--audit", "on", "audit every flow's copy record by record: on (default) or off",
           WATCHER, choices=("on", "off")),
    Option("--audit-budget", DEFAULT_BUDGET,
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
           WATCHER, choices=REPLICATORS),
)


@dataclass(frozen=True)
class AuditOptions:
    enabled: bool = True
    budget: int = DEFAULT_BUDGET
    interval: float = 5.0
    state_dir: Path | None = None
    replicator: str = "sparkmirror"

    @classmethod
    def of(cls, values) -> "AuditOptions":
        def get(option: Option):
            return getattr(values, option.name, option.value)
        enabled, budget, interval, state_dir, replicator = (get(o) for o in AUDIT_OPTIONS)
        return cls(enabled == "on", int(budget), float(interval), Path(state_dir) if state_dir else None, replicator)
