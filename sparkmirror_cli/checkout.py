"""The dev tooling (``devenv/``) for ``sparkmirror dev up|down|status`` and ``sparkmirror demo``.

The dev tooling is not part of the wheel: it sits at the top of the source checkout, beside
``replicator/``. An editable install (``./run``) maps only the packaged top-level packages,
so ``devenv`` is not importable by name from the ``sparkmirror`` script; this module finds
it in the checkout the running ``replicator`` package comes from and imports it from
there. An installed wheel has no checkout: the commands that need the tooling then stop
with a usage error (exit 2) that says so, instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from sparkmirror import artifacts
from sparkmirror.errors import UsageError


def devenv(module: str, command: str) -> ModuleType:
    """``devenv.<module>`` from the source checkout; ``command`` names what needed it."""
    root = artifacts.REPO_ROOT
    package = root / "devenv"
    if not ((root / "pyproject.toml").is_file() and (package / "__init__.py").is_file()):
        how = "./run demo" if command == "demo" else \
            f"./run demo, or .venv/bin/sparkmirror {command} once ./run has installed .venv/"
        raise UsageError(
            f"'sparkmirror {command}' runs from a source checkout (./run demo): the dev tooling it needs "
            "(devenv/) is not part of the installed package",
            hint=f"in a clone of the repository: {how}",
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    name = f"devenv.{module}"
    try:
        loaded = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        loaded = None  # the 'devenv' imported is some other package, without this module
    # a package of the same name installed elsewhere must not stand in for the checkout's
    origin = getattr(loaded or sys.modules.get("devenv"), "__file__", None)
    if loaded is None or origin is None or Path(origin).resolve().parent != package.resolve():
        raise UsageError(f"'sparkmirror {command}': the module 'devenv' was loaded from {origin or 'elsewhere'}, "
                         f"not from the checkout's {package}",
                         hint="uninstall the other package named 'devenv'")
    return loaded
