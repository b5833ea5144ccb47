"""Malformed and hostile mm2.properties: every command refuses them the same way, at once, and touches nothing.

Each file in tests/data/bad-configs/ says in its header what is wrong with it,
the fragment of the expected error (``# expect:``) and the line it must be
reported at (``# line:``). A few inputs cannot carry a header (an empty file,
a directory, a 10 MB line, a path that does not exist); their expectations are
in HEADERLESS below. ``sparkmirror validate``, ``replicate`` and ``monitor`` run
on each as real processes (in parallel, to keep the suite quick) and must all:

* exit 2 with an error naming FILE:LINE and the expected fragment, no traceback;
* stop while reading the configuration: no Spark, no socket, no checkpoint
  directory; quickly, so a catastrophic regex was refused, not run;
* keep stderr short (a 10 MB value must not be echoed).

The configs in tests/data/configs/ that are valid in MM2 terms must still
validate, so the refusals above are not bought with false alarms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "data" / "bad-configs"
GOOD = ROOT / "tests" / "data" / "configs"
INVALID_SEEDS = {"seed-003-empty-hosts", "seed-004-placeholders"}  # seed articles that are broken on purpose
COMMANDS = ("validate", "replicate", "monitor")
TOO_LONG = 20.0  # a refused config takes well under a second; a regex being run takes minutes
BASE = ("clusters = primary, dr\nprimary.bootstrap.servers = 127.0.0.1:1\ndr.bootstrap.servers = 127.0.0.1:2\n"
        "primary->dr.enabled = true\n")

#: name -> (expected fragment, line or None when there is no line to name)
HEADERLESS = {
    "empty-file": ("no `clusters` line", 1),
    "a-directory": ("cannot read the configuration", None),
    "does-not-exist": ("cannot read the configuration", None),
    "ten-megabyte-line": ("is not host:port", 3),
    "oversized-regex": ("characters long", 5),  # 210 KB: Python's regex parser needs ~5 s a megabyte
}


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    expect: str
    line: int | None


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: killed after TOO_LONG * 3
    stdout: str
    stderr: str
    seconds: float
    checkpoint_dir: Path


def _header(path: Path) -> tuple[str | None, int | None]:
    data = path.read_bytes() if path.is_file() else b""
    text = data.decode("utf-16") if data.startswith((b"\xff\xfe", b"\xfe\xff")) else data.decode("latin-1")
    expect = line = None
    for row in text.splitlines():
        if row.startswith("# expect: "):
            expect = row.removeprefix("# expect: ").encode("latin-1").decode("utf-8")
        elif row.startswith("# line: "):
            line = int(row.removeprefix("# line: "))
    return expect, line


def _cases(tmp: Path) -> list[Case]:
    (tmp / "ten-megabyte-line.properties").write_text(BASE.replace("127.0.0.1:2", "x" * 10_000_000))
    (tmp / "oversized-regex.properties").write_text(BASE + "primary->dr.topics = " + "orders|" * 30_000 + "x\n")
    cases = []
    for path in [*sorted(BAD.glob("*.properties")), *sorted(tmp.glob("*.properties")),
                 tmp / "does-not-exist.properties"]:
        name = path.name.removesuffix(".properties")
        expect, line = HEADERLESS.get(name) or _header(path)
        assert expect is not None, f"{path} has no '# expect:' header and is not in HEADERLESS"
        cases.append(Case(name, path, expect, line))
    return cases


def _run(command: str, config: Path, workdir: Path) -> Outcome:
    from devenv.kafka import free_port

    checkpoints = workdir / "checkpoints"
    extra = {"replicate": ["--checkpoint-dir", str(checkpoints), "--metrics-listen", f"127.0.0.1:{free_port()}"],
             "monitor": ["--listen", f"127.0.0.1:{free_port()}"]}.get(command, [])
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "sparkmirror_cli.main", command, str(config), *extra],
                              cwd=workdir, capture_output=True, timeout=TOO_LONG * 3, stdin=subprocess.DEVNULL)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
        code, out, err = None, exc.stdout or b"", exc.stderr or b""
    return Outcome(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                   time.monotonic() - started, checkpoints)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[tuple[str, str], tuple[Case, Outcome]]:
    tmp = tmp_path_factory.mktemp("generated")
    cases = _cases(tmp)
    jobs = []
    for case in cases:
        for command in COMMANDS:
            workdir = tmp_path_factory.mktemp(f"{command}-{case.name[:40]}")
            jobs.append((case, command, workdir))
    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda job: _run(job[1], job[0].path, job[2]), jobs))
    return {(case.name, command): (case, outcome) for (case, command, _), outcome in zip(jobs, results)}


def _names() -> list[str]:
    generated = [n for n in HEADERLESS if not (BAD / f"{n}.properties").exists()]
    return sorted([p.name.removesuffix(".properties") for p in BAD.glob("*.properties")] + generated)


def test_there_are_at_least_25_bad_inputs():
    assert len(_names()) >= 25


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", _names())
def test_bad_config_is_refused_with_file_and_line(outcomes, name, command):
    case, out = outcomes[(name, command)]
    assert out.returncode == 2, f"{command} {case.path}: exit {out.returncode}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    where = f"{case.path}:{case.line}:" if case.line is not None else f"{case.path}"
    assert where in out.stderr, f"{command} did not name {where}:\n{out.stderr[-3000:]}"
    assert case.expect in out.stderr, f"{command} did not say {case.expect!r}:\n{out.stderr[-3000:]}"
    assert len(out.stderr) < 50_000, f"{command} wrote {len(out.stderr)} bytes to stderr"


@pytest.mark.parametrize("command", ("replicate", "monitor"))
@pytest.mark.parametrize("name", _names())
def test_bad_config_stops_before_anything_starts(outcomes, name, command):
    case, out = outcomes[(name, command)]
    assert out.seconds < TOO_LONG, f"{command} {case.path} took {out.seconds:.1f}s"
    assert not out.checkpoint_dir.exists(), f"{command} created {out.checkpoint_dir}"
    for sign_of_life in ("Spark", "log4j", "monitoring ", "replicator metrics on", "unreachable"):
        assert sign_of_life not in out.stderr + out.stdout, f"{command} got as far as {sign_of_life!r}"


def test_validate_json_reports_the_same_errors_with_lines(tmp_path):
    from sparkmirror_cli.main import main  # in-process: one representative file per kind of failure
    import contextlib
    import io
    import json

    for name in ("catastrophic-regex-exponential", "jaas-without-password", "nul-byte-in-password"):
        path = BAD / f"{name}.properties"
        expect, line = _header(path)
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
            assert main(["validate", "--json", str(path)]) == 2
        report = json.loads(stdout.getvalue())
        assert report["valid"] is False
        assert any(e["line"] == line and expect in e["message"] + (e["hint"] or "") for e in report["errors"]), report


@pytest.mark.parametrize("path", sorted(p for p in GOOD.glob("*.properties") if p.stem not in INVALID_SEEDS),
                         ids=lambda p: p.stem)
def test_configs_valid_in_mm2_terms_still_validate(path, tmp_path):
    out = _run("validate", path, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(tmp_path):
    # `sparkmirror validate mesh.properties | head -1`, with more output than a pipe buffers
    big = tmp_path / "mesh.properties"
    aliases = [f"c{i}" for i in range(30)]
    big.write_text(f"clusters = {', '.join(aliases)}\n" + "".join(f"{a}.bootstrap.servers = h{a}:9092\n"
                                                                  for a in aliases) + "c0->c1.enabled = true\n")
    proc = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", "validate", str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(60) in (0, 141), stderr
    assert "Traceback" not in stderr
