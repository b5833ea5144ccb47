"""`sparkmirror monitor` command line: help, option checks, config errors exit 2 with FILE:LINE."""

from __future__ import annotations


import pytest

from sparkmirror_cli.main import build_parser, main
from tests.support.cli import run_cli


def test_help_names_endpoints_and_options():
    out = run_cli("monitor", "--help")
    assert out.returncode == 0
    for text in ("/metrics", "/api/status", "/healthz", "--listen", "127.0.0.1:9464", "--granularity",
                 "--topics-exclude", "--groups", "OTEL_EXPORTER_OTLP_ENDPOINT", "docs/monitor-status.md"):
        assert text in out.stdout, text


def test_defaults():
    args = build_parser().parse_args(["monitor", "mm2.properties"])
    assert (args.listen, args.interval, args.granularity) == ("127.0.0.1:9464", 5.0, "partition")


def test_config_error_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "mm2.properties"
    bad.write_text("clusters = a, b\na.bootstrap.servers = h:9092\nb.bootstrap.servers = h2:9092\n"
                   "a->b.enabled = true\na->b.emit.heartbeats.interval.seconds = often\n")
    out = run_cli("monitor", str(bad))
    assert out.returncode == 2
    assert f"{bad}:5" in out.stderr and "Traceback" not in out.stderr


def test_missing_file_and_no_enabled_flow_exit_2(tmp_path, capsys):
    assert main(["monitor", str(tmp_path / "nope.properties")]) == 2
    assert "nope.properties" in capsys.readouterr().err
    idle = tmp_path / "idle.properties"
    idle.write_text("clusters = a, b\na.bootstrap.servers = h:9092\nb.bootstrap.servers = h2:9092\n")
    assert main(["monitor", str(idle)]) == 2
    assert "no replication flow is enabled" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--listen", "nonsense"], "is not HOST:PORT"),
    (["--interval", "0"], "--interval must be more than 0"),
    (["--topics", "([a-z"], "not a valid regex"),
    (["--window", "1"], "--window must be at least 2"),
])
def test_bad_options_exit_2(tmp_path, capsys, args, message):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = h:9092\nb.bootstrap.servers = h2:9092\n"
                      "a->b.enabled = true\n")
    assert main(["monitor", str(config), *args]) == 2
    assert message in capsys.readouterr().err


def test_port_in_use_is_a_one_line_error(tmp_path, capsys):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
                      "a->b.enabled = true\n")
    try:
        code = main(["monitor", str(config), "--listen", f"127.0.0.1:{taken.getsockname()[1]}", "--timeout", "1"])
    finally:
        taken.close()
    assert code == 1
    assert "cannot listen on" in capsys.readouterr().err


def test_the_options_table_in_the_docs_is_generated_from_the_option_list():
    from pathlib import Path

    from monitor import options

    doc = (Path(__file__).resolve().parents[2] / "docs" / "monitor-status.md").read_text()
    start = doc.index("\n", doc.index("<!-- options-table")) + 1
    end = doc.index("<!-- /options-table -->")
    assert doc[start:end].strip() == options.markdown_table(), \
        "regenerate the table in docs/monitor-status.md with: python -m monitor.options"


def test_each_default_is_declared_once_and_is_what_the_command_line_gives():
    """MonitorOptions() and a command line without options are the same settings; the evaluator
    sees exactly the options marked as read by it."""
    from dataclasses import fields

    from monitor.command import options_from_args
    from monitor.evaluator import EvaluatorSettings
    from monitor.options import EVALUATOR, OPTIONS, MonitorOptions

    def values(o) -> dict:
        return {f.name: repr(getattr(o, f.name)) for f in fields(o)}

    parsed = options_from_args(build_parser().parse_args(["monitor", "mm2.properties"]))
    assert values(parsed) == values(MonitorOptions())
    assert (parsed.failover_max_reread_records, parsed.failover_max_reread_seconds) == (None, 300.0)
    read = {o.name for o in OPTIONS if EVALUATOR <= o.reads}
    assert {f.name for f in fields(EvaluatorSettings)} == read
    given = MonitorOptions(window=3, heartbeat_timeout=7.0, granularity="topic", interval=1.0)
    assert values(EvaluatorSettings.of(given)) == {k: v for k, v in values(given).items() if k in read}
    assert values(EvaluatorSettings.of(MonitorOptions())) == values(EvaluatorSettings())


def test_zero_means_no_limit_for_the_failover_limits():
    from monitor.command import options_from_args

    args = build_parser().parse_args(["monitor", "mm2.properties", "--failover-max-reread-seconds", "0",
                                      "--failover-max-reread-records", "12"])
    options = options_from_args(args)
    assert (options.failover_max_reread_seconds, options.failover_max_reread_records) == (None, 12)
