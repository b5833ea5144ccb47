"""The released artefacts: a wheel and an sdist built with ``python -m build`` that install
into a clean virtual environment and run from anywhere, without the source checkout.

The clean venv gets its dependencies the way a user's would (pip, from the index or pip's
own cache), never from the test venv, and every command runs with a working directory
outside the repository so nothing is imported from the checkout by accident.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from sparkmirror import __version__

ROOT = Path(__file__).resolve().parents[2]
BAD_CONFIG = ROOT / "tests" / "data" / "bad-configs"


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> dict:
    """A clean venv with the wheel installed; returns its paths and a private HOME."""
    base = tmp_path_factory.mktemp("clean")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    wheel = next(dist.glob("sparkmirror-*.whl"))
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    home = base / "home"
    home.mkdir()
    return {"venv": venv, "home": home, "cwd": base}


def _run(installed, *args, timeout=120):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARKMIRROR_CACHE", "XDG_CACHE_HOME")}
    env["HOME"] = str(installed["home"])
    env["PATH"] = f"{installed['venv'] / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                          cwd=installed["cwd"], env=env)


def test_wheel_and_sdist_carry_the_packages_and_their_data(dist):
    wheel = next(dist.glob("sparkmirror-*.whl"))
    sdist = next(dist.glob("sparkmirror-*.tar.gz"))
    assert wheel.name.startswith(f"sparkmirror-{__version__}-py3-none-any")
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ("sparkmirror_cli/main.py", "monitor/service.py", "replicator/jvm/sparkmirror/MirrorForeachWriter.java",
                 "monitor/exporters/page.py", "monitor/exporters/templates/page.html.j2", "sparkmirror/metrics.py",
                 "sparkmirror/webauth.py"):
        assert must in names, f"{must} missing from {wheel.name}"
    # the run-time packages only: the dev tooling, tests and benchmarks stay in the checkout
    top_level = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top_level == {"replicator", "monitor", "sparkmirror", "sparkmirror_cli"}, top_level
    entry_points = zipfile.ZipFile(wheel).read(
        f"sparkmirror-{__version__}.dist-info/entry_points.txt").decode()
    assert "sparkmirror = sparkmirror_cli.main:main" in entry_points
    with tarfile.open(sdist) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    for must in ("pyproject.toml", "README.md", "sparkmirror_cli/main.py", "monitor/service.py",
                 "replicator/jvm/sparkmirror/MirrorForeachWriter.java"):
        assert must in members, f"{must} missing from {sdist.name}"


def test_installed_console_script_runs_outside_the_checkout(installed):
    version = _run(installed, "sparkmirror", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"sparkmirror {__version__}"

    where = _run(installed, "python", "-c",
                 "import replicator, monitor, sparkmirror; print(replicator.__file__); print(monitor.__file__); "
                 "print(sparkmirror.__file__)")
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).is_relative_to(installed["venv"]), f"imported from {line}, not the clean venv"

    # The demo's config validates; a broken one exits 2 naming file and line.
    ok = _run(installed, "sparkmirror", "validate", str(ROOT / "devenv" / "demo-mm2.properties"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = BAD_CONFIG / "blank-aliases.properties"
    refused = _run(installed, "sparkmirror", "validate", str(bad))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{bad}:" in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr

    for command in ("replicate", "monitor", "dev", "demo", "translate", "inspect", "decode"):
        helped = _run(installed, "sparkmirror", command, "--help")
        assert helped.returncode == 0, f"{command} --help: {helped.stderr}"

    # The dev tooling is not in the wheel: the commands that run it say where they do run.
    for command in (["demo"], ["dev", "status"]):
        refused = _run(installed, "sparkmirror", *command)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "runs from a source checkout (./run demo)" in refused.stderr
        assert "Traceback" not in refused.stderr


def test_installed_package_caches_downloads_outside_site_packages(installed):
    """A wheel's package folder is site-packages: the jar cache goes to the user's cache dir."""
    where = _run(installed, "python", "-c",
                 "from sparkmirror.artifacts import cache_dir; print(cache_dir())")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == installed["home"] / ".cache" / "sparkmirror"
