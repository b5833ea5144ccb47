"""The replicator's layers: the data path and the control plane never import each other; both
get their FlowConfig and clients from replicator.service and report to replicator.metrics."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "replicator"


def _imports(package: str) -> list[tuple[str, str]]:
    """(file, imported module) for every import, also those inside functions, in ``package``."""
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.append((path.name, node.module))
            elif isinstance(node, ast.Import):
                out.extend((path.name, a.name) for a in node.names)
    return out


@pytest.mark.parametrize("package, other", [("datapath", "control"), ("control", "datapath")])
def test_datapath_and_control_do_not_import_each_other(package, other):
    crossing = [f"{package}/{file} imports {module}" for file, module in _imports(package)
                if module == f"replicator.{other}" or module.startswith(f"replicator.{other}.")]
    assert crossing == []


@pytest.mark.parametrize("package", ["datapath", "control"])
def test_only_the_service_starts_the_run(package):
    """Neither side reaches up to the coordinator or the command line."""
    upward = [f"{package}/{file} imports {module}" for file, module in _imports(package)
              if module.split(".")[:2] in (["replicator", "service"], ["replicator", "commands"],
                                           ["replicator", "cli"])]
    assert upward == []


def test_the_shared_package_imports_neither_side():
    """sparkmirror/ (errors, logging, metrics, HTTP security) is what both processes use: it
    reaches into neither, so neither owns what the other needs."""
    shared = ROOT.parent / "sparkmirror"
    reaching = []
    for path in sorted(shared.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            reaching += [f"sparkmirror/{path.name} imports {n}" for n in names
                         if n.split(".")[0] in ("replicator", "monitor")]
    assert reaching == []


def test_the_monitor_reads_only_the_mm2_model_of_the_replicator():
    """The monitor shares the MM2 model (records, filters, policy, the config file) with the
    replicator and nothing of its running parts."""
    monitor = ROOT.parent / "monitor"
    allowed = ("replicator.model", "replicator.configfile")
    reaching = []
    for path in sorted(monitor.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("replicator"):
                if node.module == "replicator" and [a.name for a in node.names] == ["__version__"]:
                    continue
                if not node.module.startswith(allowed):
                    reaching.append(f"monitor/{path.relative_to(monitor)} imports {node.module}")
    assert reaching == []
