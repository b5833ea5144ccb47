"""The monitor's code stays in pieces that can be read whole: no module of monitor/ over 500
lines, no class over 300, and no function over 80 unless a comment between its signature and
its body says why it is not split."""

from __future__ import annotations

import ast
from pathlib import Path

MONITOR = Path(__file__).resolve().parents[2] / "monitor"
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 500, 300, 80


def _too_long() -> list[str]:
    out = []
    for path in sorted(MONITOR.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        name = path.relative_to(MONITOR.parent)
        if len(lines) > MODULE_LINES:
            out.append(f"{name}: {len(lines)} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            size = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and size > CLASS_LINES:
                out.append(f"{name}:{node.lineno} class {node.name}: {size} lines")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and size > FUNCTION_LINES:
                head = lines[node.lineno - 1:node.body[0].lineno - 1]  # the signature, up to the body
                if not any(line.strip().startswith("#") for line in head):
                    out.append(f"{name}:{node.lineno} {node.name}(): {size} lines, and no comment says why")
    return out


def test_no_module_class_or_function_of_the_monitor_is_too_long():
    assert _too_long() == []


def test_the_size_check_sees_a_long_function(tmp_path, monkeypatch):
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\ndef said():\n    # one pass, kept whole: why\n{body}")
    monkeypatch.setitem(globals(), "MONITOR", tmp_path)
    assert [line.split(" ", 1)[1] for line in _too_long()] == [
        f"long(): {FUNCTION_LINES + 1} lines, and no comment says why"]
