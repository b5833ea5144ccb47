"""``python -m generate [--check] [--config FILE] [--runbook-base URL] [--output-dir DIR]``.

The one entry for every generated artifact, rendered from one mixin config
(alerts/config.py: selector, thresholds, ``for`` durations, runbook base URL):

- alerts/sparkmirror-rules.yml and its promtool tests alerts/tests/*.yml (``alerts.generate``);
- the Grafana dashboards dashboards/json/*.json (``dashboards.generate``);
- the Kubernetes manifests deploy/kubernetes/, which carry the same rules (PrometheusRule)
  and dashboards (ConfigMaps) (``deploy.generate``).

Without ``--output-dir`` the committed files are written with the default config; a unit
test runs ``--check``. With ``--config my.yml --output-dir out/`` a deployment gets its own
``out/sparkmirror-rules.yml``, ``out/tests/*.yml``, ``out/dashboards/*.json`` and
``out/kubernetes/``. It imports the three generators; none of them imports it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from alerts import config as mixin
from alerts import generate as alerts
from dashboards import generate as dashboards
from deploy import generate as kubernetes

ROOT = Path(__file__).resolve().parent


def targets(config: mixin.Config = mixin.DEFAULT, output_dir: Path | None = None) -> dict[Path, str]:
    """Path -> text of every generated file."""
    files = alerts.targets(config, output_dir)
    json_dir = output_dir / "dashboards" if output_dir else dashboards.JSON_DIR
    files.update({json_dir / name: dashboards.render(model) for name, model in dashboards.dashboards(config).items()})
    files.update(kubernetes.render_all(config, output_dir / "kubernetes" if output_dir else kubernetes.ROOT))
    return files


def write(config: mixin.Config = mixin.DEFAULT, output_dir: Path | None = None) -> list[Path]:
    written = []
    for path, text in targets(config, output_dir).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def stale() -> list[str]:
    """Committed files that differ from what the default config renders, or rendered files no
    longer produced (a removed case, a removed dashboard)."""
    def shown(path: Path) -> str:
        return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

    files = targets()
    problems = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    problems += [p for p in sorted(alerts.TESTS_DIR.glob("*.yml")) if p not in files]
    problems += [p for p in sorted(dashboards.JSON_DIR.glob("*.json")) if p not in files]
    return [shown(p) for p in problems]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generate", description=__doc__.split("\n\n")[1].splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a committed file is not what the default config renders")
    parser.add_argument("--config", type=Path, help="mixin config (YAML, see alerts/config.py)")
    parser.add_argument("--runbook-base", help="absolute URL of your copy of docs/runbooks.md "
                                               f"(default {mixin.DEFAULT_RUNBOOK_BASE})")
    parser.add_argument("--output-dir", type=Path,
                        help="write sparkmirror-rules.yml, tests/, dashboards/ and kubernetes/ here instead of the "
                             "committed files")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        for name in problems:
            print(f"{name} is not current: run python -m generate", file=sys.stderr)
        return 1 if problems else 0
    try:
        config = mixin.load(args.config) if args.config else mixin.DEFAULT
        if args.runbook_base:
            config = replace(config, runbook_base=args.runbook_base)
    except mixin.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config != mixin.DEFAULT and args.output_dir is None:
        print("error: a non-default config renders into --output-dir DIR; the committed files use the defaults",
              file=sys.stderr)
        return 2
    for path in write(config, args.output_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
