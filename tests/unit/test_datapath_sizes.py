"""The data path stays in pieces one can hold in one's head: every module of replicator/datapath/
says what it does in its docstring and has at most 500 lines, every class at most 300, and a
function over 80 lines says why in a comment on its first line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DATAPATH = Path(__file__).resolve().parents[2] / "replicator" / "datapath"
MODULES = sorted(DATAPATH.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_each_module_is_short_and_says_what_it_does(path):
    text = path.read_text()
    tree = ast.parse(text, str(path))
    assert ast.get_docstring(tree), f"{path.name}: no module docstring"
    assert len(text.splitlines()) <= 500, f"{path.name}: {len(text.splitlines())} lines"
    lines = text.splitlines()
    too_long = []
    for node in ast.walk(tree):
        size = node.end_lineno - node.lineno + 1 if hasattr(node, "end_lineno") else 0
        if isinstance(node, ast.ClassDef) and size > 300:
            too_long.append(f"class {node.name}: {size} lines")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and size > 80:
            top = lines[node.lineno:node.body[0].lineno - 1]  # after the def line, before its first statement
            if not any(line.strip().startswith("#") for line in top):
                too_long.append(f"def {node.name}: {size} lines and no comment at its top saying why")
    assert too_long == []
