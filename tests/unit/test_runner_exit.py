"""pyspark's streaming-source runner ends without a traceback when the JVM hangs up, and only then."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replicator.datapath import runner_exit

ROOT = Path(__file__).resolve().parents[2]

HANGUP = """
    import socket
    a, b = socket.socketpair()
    b.close()
    try:
        raise EOFError  # pyspark's read_int on a closed socket
    except EOFError:
        for _ in range(100):  # the first send may still be buffered
            a.send(b"x" * 65536)
"""
OTHER = """
    raise ValueError("a real failure in the reader")
"""


def _run(tmp_path, name: str, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / name
    script.write_text("from replicator.datapath import runner_exit\nrunner_exit.install()\n"
                      + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


def test_the_runner_ends_quietly_when_the_jvm_hangs_up(tmp_path):
    out = _run(tmp_path, runner_exit.RUNNER_SCRIPT, HANGUP)
    assert out.returncode == 1 and out.stderr == "", out.stderr


def test_any_other_failure_of_the_runner_is_still_printed(tmp_path):
    out = _run(tmp_path, runner_exit.RUNNER_SCRIPT, OTHER)
    assert out.returncode == 1 and "Traceback" in out.stderr and "a real failure" in out.stderr


def test_other_processes_keep_their_tracebacks(tmp_path):
    out = _run(tmp_path, "driver.py", HANGUP)
    assert out.returncode == 1 and "Traceback" in out.stderr and "EOFError" in out.stderr


@pytest.mark.parametrize("chain, hangup", [
    ((EOFError(),), True),
    ((BrokenPipeError(), EOFError()), True),
    ((ConnectionResetError(),), True),
    ((BrokenPipeError(), ValueError()), False),
    ((KeyError(),), False),
])
def test_only_a_chain_of_hangups_counts(chain, hangup):
    exc = chain[0]
    for inner in chain[1:]:
        exc.__context__ = inner
        exc = inner
    assert runner_exit.is_hangup(chain[0]) is hangup
