"""The audit's settings, read from the monitor's options (monitor.options declares them,
``AUDIT_OPTIONS``, beside every other option of ``sparkmirror monitor``).

``AuditOptions.of`` reads their values from any object that has them as attributes: the
parsed command line, or MonitorOptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from monitor.audit.budget import DEFAULT_BUDGET
from monitor.options import AUDIT_OPTIONS, Option

__all__ = ["AUDIT_OPTIONS", "AuditOptions"]


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
