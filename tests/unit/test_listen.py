"""One parser for where an HTTP endpoint listens: the monitor's --listen and the replicator's --metrics-listen."""

from __future__ import annotations

import pytest

from sparkmirror_cli.main import main
from sparkmirror.errors import ConfigError
from sparkmirror.listen import parse_listen


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)),
    ("0.0.0.0:9464", ("0.0.0.0", 9464)),
    ("monitor.example.org:80", ("monitor.example.org", 80)),
    ("[::1]:9464", ("::1", 9464)),
    ("[::]:65535", ("::", 65535)),
    ("localhost:0", ("localhost", 0)),
])
def test_the_monitors_host_port_syntax(text, expected):
    assert parse_listen(text, "--listen", "127.0.0.1:9464") == expected


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9465", ("127.0.0.1", 9465)),
    ("0.0.0.0:9465", ("0.0.0.0", 9465)),
    (":9465", ("127.0.0.1", 9465)),  # no host: loopback, never every interface
    ("9465", ("127.0.0.1", 9465)),
    ("off", None), ("OFF", None), ("none", None), ("0", None), ("", None),
])
def test_the_replicators_metrics_listen_syntax(text, expected):
    assert parse_listen(text, "--metrics-listen", "127.0.0.1:9465", can_be_off=True) == expected


@pytest.mark.parametrize("text", ["nonsense", "h:", "h:99999", "h:-1", "h:port", "off"])
def test_a_malformed_address_names_the_option_and_an_example(text):
    with pytest.raises(ConfigError) as info:
        parse_listen(text, "--listen", "127.0.0.1:9464")
    assert info.value.exit_code == 2
    assert f"--listen {text!r} is not HOST:PORT" in str(info.value)
    assert "for example 127.0.0.1:9464" in str(info.value)


def test_replicate_refuses_a_bad_metrics_listen_before_reading_the_config(tmp_path, capsys):
    assert main(["replicate", str(tmp_path / "never-read.properties"), "--metrics-listen", "h:port"]) == 2
    err = capsys.readouterr().err
    assert "--metrics-listen 'h:port' is not HOST:PORT" in err and "or off" in err
