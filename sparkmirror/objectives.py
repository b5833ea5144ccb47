"""Recovery-point objectives: the lag each flow promises, declared once.

An objective says "a flow's lag is at most ``lag_seconds`` for ``target`` of each
``period``" (30 s, 99.9 %, 30 days by default): the recovery point a DR owner promises.
It is the ``rpo:`` section of the mixin config (alerts/config.py), read by the alert
rules and dashboards there and by the monitor (``sparkmirror monitor --objectives FILE``)
for /api/status; this module parses it, so all of them read the same numbers::

    rpo:
      lag_seconds: 30
      target: 0.999
      period: 30d
      flows:
        "primary->dr": {lag_seconds: 60}   # any field; the others are the defaults above
        "lab->dr": null                    # no objective: the fixed lag alerts apply

A sample is good when the flow's lag is known on every partition and at most
``lag_seconds``; unknown or absent lag is bad, never good.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class ObjectiveError(ValueError):
    """An ``rpo:`` section that cannot be used; the message says what to change."""


def duration_seconds(text: str) -> int:
    """``30d`` -> 2592000; a Prometheus duration of one or more ``<n><unit>`` parts."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ObjectiveError(f"{text!r} is not a duration such as 30d or 12h")
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)


@dataclass(frozen=True)
class Objective:
    #: The recovery point promised: the age of the oldest record not yet on the target.
    lag_seconds: float = 30.0
    #: The share of the period the lag must stay within it.
    target: float = 0.999
    period: str = "30d"

    def __post_init__(self) -> None:
        if not self.lag_seconds > 0:
            raise ObjectiveError(f"lag_seconds must be above 0, not {self.lag_seconds!r}")
        if not 0 < self.target < 1:
            raise ObjectiveError(f"target must be a ratio between 0 and 1 such as 0.999, not {self.target!r}")
        duration_seconds(self.period)

    @property
    def budget(self) -> float:
        """The share of the period the lag may exceed the objective (1 - target)."""
        return 1.0 - self.target

    @property
    def period_seconds(self) -> int:
        return duration_seconds(self.period)

    def text(self) -> str:
        return f"lag <= {self.lag_seconds:g}s for {self.target * 100:g}% of {self.period}"


@dataclass(frozen=True)
class Objectives:
    """The default objective (None: flows have none unless named) and the per-flow overrides."""

    default: Objective | None = Objective()
    flows: tuple[tuple[str, Objective | None], ...] = ()

    def for_flow(self, flow: str) -> Objective | None:
        for name, objective in self.flows:
            if name == flow:
                return objective
        return self.default


DEFAULT = Objectives()


def _objective(raw: object, base: Objective, where: str) -> Objective:
    if not isinstance(raw, dict):
        raise ObjectiveError(f"{where} must be a mapping of lag_seconds, target, period (or null for none)")
    known = {f.name for f in fields(Objective)}
    unknown = sorted(set(raw) - known - ({"flows"} if where == "rpo" else set()))
    if unknown:
        raise ObjectiveError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values = {k: v for k, v in raw.items() if k in known}
    for name in ("lag_seconds", "target"):
        if name in values and (isinstance(values[name], bool) or not isinstance(values[name], (int, float))):
            raise ObjectiveError(f"{where}.{name} must be a number, not {values[name]!r}")
        if name in values:
            values[name] = float(values[name])
    if "period" in values and not isinstance(values["period"], str):
        raise ObjectiveError(f"{where}.period must be a duration such as 30d, not {values['period']!r}")
    try:
        return replace(base, **values)
    except ObjectiveError as exc:
        raise ObjectiveError(f"{where}: {exc}") from exc


def section(raw: object) -> Objectives:
    """The ``rpo:`` section as read from YAML; ``rpo: null`` turns objectives off (no flow has one)."""
    if raw is None:
        return Objectives(default=None)
    return parse(raw)


def load(path: Path) -> Objectives:
    """The ``rpo:`` section of a mixin config file (the defaults when it has none); errors name the file."""
    import yaml

    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ObjectiveError(f"{path}: cannot read the mixin config: {exc}") from exc
    if not isinstance(raw, dict):
        raise ObjectiveError(f"{path}: the mixin config must be a mapping with an rpo: section")
    try:
        return section(raw["rpo"]) if "rpo" in raw else DEFAULT
    except ObjectiveError as exc:
        raise ObjectiveError(f"{path}: {exc}") from exc


def parse(raw: object) -> Objectives:
    """An ``rpo:`` mapping: the default objective's fields and ``flows``."""
    default = _objective(raw, Objective(), "rpo")
    flows_raw = raw.get("flows") or {}
    if not isinstance(flows_raw, dict):
        raise ObjectiveError("rpo.flows must map flow names (\"A->B\") to an objective or null")
    flows = []
    for name, value in flows_raw.items():
        if not isinstance(name, str) or "->" not in name:
            raise ObjectiveError(f"rpo.flows: {name!r} is not a flow name such as \"primary->dr\"")
        flows.append((name, None if value is None else _objective(value, default, f"rpo.flows.{name}")))
    return Objectives(default, tuple(flows))
