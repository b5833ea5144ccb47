"""``run_cli``: the real ``sparkmirror`` command line as a child process, its output captured."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``sparkmirror ARGS...`` (``python -m sparkmirror_cli.main``), stdout and stderr as text.

    ``env``: the child's whole environment (default: this process's)."""
    return subprocess.run([sys.executable, "-m", "sparkmirror_cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
