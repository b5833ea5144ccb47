"""The run-time code (data path, control plane, monitor) does not load the dev tooling, and the
wheel does not carry it: ``devenv/`` (dev clusters, the throwaway CA, the MM2 runner, the demo)
stays in the source checkout, beside ``tests/`` and ``bench/``."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

from sparkmirror import artifacts
from sparkmirror_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]

RUNTIME_MODULES = ("replicator.datapath.spark", "replicator.datapath.jvmwriter", "replicator.command",
                   "monitor.service", "sparkmirror_cli.main")


def _is_devenv(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "devenv" or parts[:2] == ["replicator", "devenv"]


def _wheel_packages() -> list[str]:
    """The top-level packages setuptools puts in the wheel: the checkout's packages (folders
    with an ``__init__.py``, not e.g. the ``sparkmirror.egg-info`` an editable install leaves)
    that ``[tool.setuptools.packages.find]`` includes (its patterns match dotted package
    names, so a top-level folder is in when its name matches)."""
    find = PYPROJECT["packages"]["find"]
    return sorted(d.name for d in ROOT.iterdir()
                  if (d / "__init__.py").is_file()
                  and any(fnmatchcase(d.name, p) for p in find.get("include", ["*"]))
                  and not any(fnmatchcase(d.name, p) for p in find.get("exclude", ())))


def test_runtime_modules_never_import_devenv():
    probe = (f"import importlib, sys\nfor m in {RUNTIME_MODULES!r}: importlib.import_module(m)\n"
             # every subcommand registered, as `sparkmirror --help` does
             "from sparkmirror_cli.main import build_parser\nbuild_parser()\n"
             "print(sorted(m for m in sys.modules\n"
             "             if m.split('.')[0] == 'devenv' or m.startswith('replicator.devenv')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_wheel_carries_the_runtime_packages_and_not_the_dev_tooling():
    assert (ROOT / "devenv" / "__init__.py").is_file(), "the dev tooling moved: update this test"
    assert _wheel_packages() == ["monitor", "replicator", "sparkmirror", "sparkmirror_cli"]
    data = [f"{package}: {pattern}" for package, patterns in PYPROJECT.get("package-data", {}).items()
            for pattern in patterns if "devenv" in f"{package}/{pattern}"]
    assert data == []
    assert "jvm/sparkmirror/*.java" in PYPROJECT["package-data"]["replicator"]  # the real-time writer's sources


def test_no_packaged_module_imports_the_dev_tooling():
    """Not even inside a function: `sparkmirror dev` and `demo` load it from the checkout by
    path (sparkmirror_cli/checkout.py), so an installed wheel never reaches for it."""
    reaching = []
    for top in _wheel_packages():
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                         else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                reaching += [f"{path.relative_to(ROOT)} imports {n}" for n in names if _is_devenv(n)]
    assert reaching == []


def test_dev_tooling_commands_from_an_installed_wheel_are_a_usage_error(monkeypatch, tmp_path, capsys):
    """An installed wheel's package folder is site-packages: no pyproject.toml, no devenv/ beside it."""
    monkeypatch.setattr(artifacts, "REPO_ROOT", tmp_path)
    for command in (["demo"], ["dev", "up"], ["dev", "down", "--wipe"], ["dev", "status"]):
        assert main(command) == 2, command
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith(f"sparkmirror: error: 'sparkmirror {' '.join(command[:2])}' runs from a source "
                              "checkout (./run demo)"), err
        assert "\n" not in err.rstrip("\n") and "Traceback" not in err


def test_dev_fetch_needs_only_the_jar_pins():
    """`./run` fetches the jars with `sparkmirror dev fetch`; that works without the checkout's
    dev tooling (downloads and the javac build stubbed out here)."""
    probe = (
        "import sys, pathlib\n"
        "from sparkmirror import artifacts\n"
        "from replicator.datapath import jvmwriter\n"
        f"artifacts.REPO_ROOT = pathlib.Path({str(ROOT / 'no-checkout')!r})\n"
        "artifacts.ensure_all = lambda: None\n"
        "artifacts.ALL_SETS = ()\n"
        "jvmwriter.ensure_jar = lambda: pathlib.Path('/stub/writer.jar')\n"
        "from replicator.datapath import cds\n"
        "cds.build = lambda force=False: pathlib.Path('/stub/classes.jsa')\n"
        "from sparkmirror_cli.main import main\n"
        "code = main(['dev', 'fetch'])\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] == 'devenv'))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0 []"


def test_dev_tooling_commands_run_from_the_checkout(capsys):
    assert main(["dev", "status"]) == 0
    out, _ = capsys.readouterr()
    assert '"primary"' in out and '"dr"' in out
    import devenv.clusters

    assert Path(devenv.clusters.__file__).resolve().parent == ROOT / "devenv"


def test_no_module_of_the_command_shadows_the_standard_library():
    """spark-submit runs sparkmirror_cli/main.py as a script, which puts its folder first on
    sys.path: a module there named like a standard one (inspect.py did) would replace it for
    every import in the driver, pyspark's too."""
    names = {p.stem for p in (ROOT / "sparkmirror_cli").glob("*.py")}
    assert names & set(sys.stdlib_module_names) == set()


def test_the_command_runs_as_the_script_spark_submit_is_given(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "sparkmirror_cli" / "main.py"), "validate", "--help"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage: sparkmirror validate" in proc.stdout
