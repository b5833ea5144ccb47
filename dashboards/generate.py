"""``python -m dashboards.generate [--check]``: write (or check) dashboards/json/*.json.

The committed JSON is what Grafana imports or provisions; a unit test runs the
check, so a change to the panels or to ``sparkmirror.metrics`` without regenerating
fails the suite. ``panel_expressions()`` lists every PromQL expression of every
panel, read back from the generated JSON, for the tests that evaluate them.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafanalib._gen import DashboardEncoder

from alerts.config import DEFAULT, Config
from dashboards import drilldown, overview, slo

JSON_DIR = Path(__file__).resolve().parent / "json"


def dashboards(config: Config = DEFAULT) -> dict[str, dict]:
    """File name -> dashboard JSON model (plain dicts), with the mixin config's thresholds and runbooks."""
    built = {
        "sparkmirror-overview.json": overview.build(drilldown_uid=drilldown.UID, config=config),
        "sparkmirror-drilldown.json": drilldown.build(overview_uid=overview.UID, config=config),
        "sparkmirror-slo.json": slo.build(overview_uid=overview.UID, config=config),
    }
    return {name: _modern(json.loads(json.dumps(d.to_json_data(), cls=DashboardEncoder)))
            for name, d in built.items()}


def _modern(model: dict) -> dict:
    """Drop what grafanalib still writes but the declared schemaVersion no longer has."""
    model.pop("rows", None)  # legacy rows: panels and row panels replace them
    model["timepicker"].pop("time_options", None)  # removed by Grafana's schema v41 migration
    for panel in _panels(model["panels"]):
        # grafanalib's legacy defaults: 100 points per panel and a step of twice the pixel interval
        # make $__rate_interval minutes long on short ranges, flattening rates and hiding spikes.
        # Without them Grafana sizes the step to the panel's width and the scrape interval.
        panel.pop("maxDataPoints", None)
        for target in panel.get("targets") or []:
            target.pop("intervalFactor", None)
    return model


def render(model: dict) -> str:
    return json.dumps(model, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class PanelExpression:
    dashboard: str  # uid
    panel: str  # title
    ref_id: str
    expr: str
    instant: bool


def panel_expressions(models: dict[str, dict] | None = None) -> list[PanelExpression]:
    """Every PromQL expression of every panel, in dashboard order (template variables unresolved)."""
    found = []
    for model in (models or dashboards()).values():
        for panel in _panels(model["panels"]):
            for target in panel.get("targets") or []:
                found.append(PanelExpression(model["uid"], panel["title"], target["refId"], target["expr"],
                                             bool(target.get("instant"))))
    return found


def _panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def write(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in dashboards().items():
        path = directory / name
        path.write_text(render(model))
        written.append(path)
    return written


def stale(directory: Path = JSON_DIR) -> list[str]:
    """Names of committed JSON files that differ from what the generator builds (or are missing)."""
    problems = []
    wanted = dashboards()
    for name, model in wanted.items():
        path = directory / name
        if not path.exists() or path.read_text() != render(model):
            problems.append(name)
    problems += sorted(p.name for p in directory.glob("*.json") if p.name not in wanted)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed JSON is not current")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        for name in problems:
            print(f"dashboards/json/{name} is not current: run python -m dashboards.generate", file=sys.stderr)
        return 1 if problems else 0
    for path in write():
        print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
