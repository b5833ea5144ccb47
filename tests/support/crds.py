"""prometheus-operator's CRD schemas (ServiceMonitor, PrometheusRule) for offline validation.

Taken from the operator's own Go module at a pinned release, through the Go module proxy
(`go mod download`), into the project's download cache — the same files the operator
installs into a cluster (example/prometheus-operator-crd/). Needs the `go` command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from sparkmirror.artifacts import cache_dir

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.85.0"
CRD_DIR = "example/prometheus-operator-crd"


def module_dir() -> Path:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        raise RuntimeError("the `go` command is needed to fetch prometheus-operator's CRDs (Go module proxy); "
                           "install Go 1.21+ or put it on PATH")
    gopath = cache_dir() / "go"
    env = dict(os.environ, GOPATH=str(gopath), GOMODCACHE=str(gopath / "pkg" / "mod"), GOFLAGS="-modcacherw",
               GO111MODULE="on")
    done = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], capture_output=True, text=True,
                          timeout=600, env=env, cwd=str(cache_dir()))
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {MODULE}@{VERSION} failed: {done.stdout[-1000:]} {done.stderr[-1000:]}")
    return Path(json.loads(done.stdout)["Dir"])


def crd_schema(plural: str) -> dict:
    """The openAPIV3Schema of ``monitoring.coreos.com_<plural>`` (version v1)."""
    path = module_dir() / CRD_DIR / f"monitoring.coreos.com_{plural}.yaml"
    crd = yaml.safe_load(path.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]
