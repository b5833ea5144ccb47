"""The import graph's layers, read from the code (imports inside functions and ``TYPE_CHECKING``
blocks, and modules loaded by name through ``importlib``, count as edges).

From the ground floor up: ``sparkmirror`` (what both processes share: the MM2 model, the
config file, metrics, errors, logging) imports nothing of the others; the two processes,
``replicator`` and ``monitor``, import only it and never each other; the generators
(``alerts`` < ``dashboards`` < ``deploy`` < ``generate``) and the dev tooling (``devenv``, which
runs both processes)
import downwards; ``sparkmirror_cli``, the one command, is the top. No module is part of
an import circle. Inside the replicator the data path and the control plane never import
each other; both get their FlowConfig and clients from ``replicator.service``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "replicator"

#: package -> the packages it may import (besides itself)
ALLOWED = {
    "sparkmirror": set(),
    "replicator": {"sparkmirror"},
    "monitor": {"sparkmirror"},
    "alerts": {"sparkmirror"},
    "dashboards": {"sparkmirror", "alerts"},
    "deploy": {"sparkmirror", "alerts", "dashboards"},
    "generate": {"sparkmirror", "alerts", "dashboards", "deploy"},
    "devenv": {"sparkmirror", "replicator", "monitor"},
    "sparkmirror_cli": {"sparkmirror", "replicator", "monitor", "devenv"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _tree_modules() -> dict[str, Path]:
    out = {}
    for top in ALLOWED:
        base = REPO / top
        paths = sorted(base.rglob("*.py")) if base.is_dir() else [REPO / f"{top}.py"]
        out.update({_module_name(p): p for p in paths})
    return out


MODULES = _tree_modules()


def _edges(path: Path) -> set[str]:
    """Every module of the tree that ``path`` imports, statically or by name through importlib."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    names: set[str] = set()
    loads_by_name = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, (ast.Name, ast.Attribute)) and getattr(node, "id", getattr(node, "attr", "")) in (
                "import_module", "__import__"):
            loads_by_name = True
    if loads_by_name:  # a module loaded by name: every string in the file that names one counts
        names.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return {n for n in names if n in MODULES and n != here}


GRAPH = {name: _edges(path) for name, path in MODULES.items()}


def test_the_layer_check_sees_edges_loaded_by_name():
    """The CLI loads its subcommands through importlib: those edges are in the graph."""
    assert {"replicator.command", "monitor.command"} <= GRAPH["sparkmirror_cli.main"]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_package_imports_one_above_it_or_beside_it(package):
    wrong = sorted(f"{mod} imports {dep}" for mod, deps in GRAPH.items() if mod.split(".")[0] == package
                   for dep in deps if dep.split(".")[0] not in ALLOWED[package] | {package})
    assert wrong == []


def test_no_import_circles():
    """Tarjan's strongly connected components over the module graph: each must be one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == []


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
