"""`sparkmirror translate` and `inspect`: command-line mistakes are one error line and exit 2, before any I/O."""

from __future__ import annotations

import pytest

from sparkmirror_cli import main as cli


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "mm2.properties"
    # Port 1 refuses connections: a test that reached the network would fail slowly, not pass.
    path.write_text("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
                    "A->B.enabled = true\n")
    return str(path)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_translate_unknown_cluster(capsys, config):
    code, out, err = run(capsys, "translate", config, "--source", "A", "--target", "C", "--group", "g")
    assert code == 2 and out == ""
    assert "no flow A->C: clusters are A, B" in err and "Traceback" not in err


def test_translate_needs_group(capsys, config):
    with pytest.raises(SystemExit) as exc:
        cli.main(["translate", config, "--source", "A", "--target", "B"])
    assert exc.value.code == 2
    assert "--group" in capsys.readouterr().err


def test_inspect_refuses_a_topic_that_is_not_internal(capsys, config):
    code, _, err = run(capsys, "inspect", config, "--cluster", "B", "--topic", "A.orders")
    assert code == 2 and "A.orders is not an MM2 internal topic" in err and "--type" in err


def test_inspect_checks_cluster_and_limit(capsys, config):
    code, _, err = run(capsys, "inspect", config, "--cluster", "C", "--topic", "heartbeats")
    assert code == 2 and "unknown cluster 'C'" in err
    code, _, err = run(capsys, "inspect", config, "--cluster", "B", "--topic", "heartbeats", "--limit", "0")
    assert code == 2 and "--limit must be at least 1" in err


def test_help_documents_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["translate", "--help"])
    out = capsys.readouterr().out
    assert "3  --apply refused" in out and "RemoteClusterUtils" in out
