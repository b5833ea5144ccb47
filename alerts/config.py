"""The mixin's config: what a deployment may change in the rules, their tests and the dashboards.

Like the Prometheus monitoring-mixins, one small config drives everything the
generator renders (``python -m alerts.generate --config my.yml``):

```yaml
runbook_base: https://wiki.example.com/sparkmirror/runbooks.md  # absolute; anchors are appended
selector: 'env="prod"'          # extra label matchers on every sparkmirror_* series in the rules
monitor_job: sparkmirror-monitor  # the job label Prometheus gives the monitor's target
thresholds:                      # any field of alerts/thresholds.py
  lag_seconds: 600
  lag_for: 15m
rpo:                             # the recovery-point objectives (sparkmirror/objectives.py); null: none
  lag_seconds: 30
  target: 0.999
  period: 30d
  flows: {"lab->dr": null}       # per flow; null: no objective, the fixed lag alerts apply
```

The committed files (alerts/sparkmirror-rules.yml, alerts/tests/*.yml,
dashboards/json/*.json) are rendered with ``DEFAULT``. Runbook links default to
docs/runbooks.md of the released version on the project's repository, so the
link in a notification opens the runbook that matches the rules it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import yaml

from alerts.thresholds import Thresholds
from sparkmirror import __version__
from sparkmirror import objectives

#: The project's public repository (web URL).
REPOSITORY = "https://github.com/sparkmirror/sparkmirror"
#: docs/runbooks.md of the released version this code is.
DEFAULT_RUNBOOK_BASE = f"{REPOSITORY}/blob/v{__version__}/docs/runbooks.md"
#: Prometheus job name of the monitor's scrape target (docker-compose's prometheus.yml uses it).
MONITOR_JOB = "sparkmirror-monitor"
#: ... and of the replicator's own /metrics.
REPLICATOR_JOB = "sparkmirror-replicator"

_MATCHER = re.compile(r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*')


class ConfigError(ValueError):
    """A mixin config that cannot be used; the message names the file and what to change."""


@dataclass(frozen=True)
class Config:
    runbook_base: str = DEFAULT_RUNBOOK_BASE
    selector: str = ""
    monitor_job: str = MONITOR_JOB
    thresholds: Thresholds = field(default_factory=Thresholds)
    rpo: objectives.Objectives = objectives.DEFAULT

    def __post_init__(self) -> None:
        if not re.match(r"https?://[^/\s]+/\S*$", self.runbook_base) or "#" in self.runbook_base:
            raise ConfigError(f"runbook_base {self.runbook_base!r}: must be an absolute http(s) URL without "
                              f"a #fragment (alert notifications open it outside this repository)")
        if self.selector and not all(_MATCHER.fullmatch(part) for part in _split(self.selector)):
            raise ConfigError(f'selector {self.selector!r}: must be PromQL label matchers, e.g. env="prod",'
                              f'region=~"eu-.*"')

    @property
    def matchers(self) -> tuple[str, ...]:
        """The selector's label matchers, one string each."""
        return tuple(part.strip() for part in _split(self.selector))

    def runbook_url(self, alert: str) -> str:
        """Link to the alert's section (its heading is the alert name; GitHub anchors are lower case)."""
        return f"{self.runbook_base}#{alert.lower()}"


def _split(selector: str) -> list[str]:
    """``a="x,y",b=~"z"`` -> ``['a="x,y"', 'b=~"z"']`` (commas inside quotes kept)."""
    return [p for p in re.findall(r'(?:[^,"]|"(?:[^"\\]|\\.)*")+', selector) if p.strip()]


DEFAULT = Config()


def load(path: Path) -> Config:
    """Read a mixin config file (YAML); unknown keys and bad values are errors naming the file."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the mixin config: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the mixin config must be a mapping (runbook_base, selector, monitor_job, "
                          f"thresholds, rpo)")
    known = {f.name for f in fields(Config)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        rpo = objectives_of(raw.pop("rpo")) if "rpo" in raw else objectives.DEFAULT
    except objectives.ObjectiveError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    limits = raw.pop("thresholds", None) or {}
    if not isinstance(limits, dict):
        raise ConfigError(f"{path}: thresholds must be a mapping of names from alerts/thresholds.py")
    wrong = sorted(set(limits) - set(Thresholds.names()))
    if wrong:
        raise ConfigError(f"{path}: unknown threshold(s) {', '.join(wrong)}; see alerts/thresholds.py for the names")
    defaults = Thresholds()
    for name, value in limits.items():
        expected = type(getattr(defaults, name))
        if expected is float and isinstance(value, int):
            value = float(value)
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ConfigError(f"{path}: thresholds.{name} must be a {expected.__name__} "
                              f"(default {getattr(defaults, name)!r}), not {value!r}")
        if expected is str and not re.fullmatch(r"(\d+[smhd])+", value):
            raise ConfigError(f"{path}: thresholds.{name} {value!r} is not a Prometheus duration such as 90s or 5m")
    try:
        return replace(Config(**raw), thresholds=replace(defaults, **limits), rpo=rpo)
    except (TypeError, ConfigError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def objectives_of(raw: object) -> objectives.Objectives:
    """The ``rpo:`` section of a mixin config: ``rpo: null`` turns objectives off (the fixed lag
    alerts apply to every flow)."""
    return objectives.section(raw)
