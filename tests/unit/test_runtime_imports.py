"""The run-time code (data path, control plane, monitor) does not load the dev tooling."""

from __future__ import annotations

import subprocess
import sys

RUNTIME_MODULES = ("replicator.datapath.spark", "replicator.datapath.jvmwriter", "replicator.commands.replicate",
                   "monitor.service")


def test_runtime_modules_never_import_devenv():
    probe = (f"import importlib, sys\nfor m in {RUNTIME_MODULES!r}: importlib.import_module(m)\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'devenv'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
