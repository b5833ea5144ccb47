"""`sparkmirror decode`: one JSON object and exit 0, or one error line and exit 2."""

from __future__ import annotations

import argparse
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkmirror_cli import main as cli
from sparkmirror_cli import decode
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["decode", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_heartbeat(capsys):
    code, out, err = run(capsys, "heartbeat", "000141000142", "00000000018bcfe56800")
    assert code == 0 and err == ""
    assert out.count("\n") == 1
    assert json.loads(out) == {"source": "A", "target": "B", "timestamp_ms": 1_700_000_000_000}


def test_checkpoint(capsys):
    cp = Checkpoint("my-group", "A.orders", 3, 1000, 990, "m")
    code, out, _ = run(capsys, "checkpoint", cp.encode_key().hex(), cp.encode_value().hex())
    assert code == 0
    assert json.loads(out) == {
        "group": "my-group",
        "topic": "A.orders",
        "partition": 3,
        "upstream_offset": 1000,
        "downstream_offset": 990,
        "metadata": "m",
    }


def test_offset_sync_with_spaced_colon_and_0x_hex(capsys):
    code, out, _ = run(
        capsys, "offset-sync", "0x00 06 6f:72:64:65:72:73 00000007", "000000000000002A 0000000000000028"
    )
    assert code == 0
    assert json.loads(out) == {"topic": "orders", "partition": 7, "upstream_offset": 42, "downstream_offset": 40}


def test_non_ascii_survives_as_json(capsys):
    hb = Heartbeat("zürich", "東京", 5)
    code, out, _ = run(capsys, "heartbeat", hb.encode_key().hex(), hb.encode_value().hex())
    assert code == 0
    assert json.loads(out)["target"] == "東京"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["heartbeat", "0001zz", "00"], ["KEY_HEX is not hex"]),
        (["heartbeat", "000141000142", "123"], ["VALUE_HEX is not hex"]),
        (["heartbeat", "000141", "00000000018bcfe56800"], ["malformed heartbeat key", "targetClusterAlias"]),
        (["heartbeat", "000141000142", "0001" + "00" * 8], ["malformed heartbeat value", "version", "is 1"]),
        (["checkpoint", "", ""], ["malformed checkpoint key", "group"]),
        (["offset-sync", "0002fffe00000000", "00" * 16], ["malformed offset-sync key", "UTF-8"]),
        (["offset-sync", "0000ffff", "00" * 16], ["malformed offset-sync key", "partition"]),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("sparkmirror: error: ")
    assert err.count("\n") == 1
    for word in words:
        assert word in err


def test_unknown_record_type_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["decode", "bogus", "00", "00"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and "offset-sync" in err


def test_missing_arguments_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["decode", "heartbeat", "00"])
    assert info.value.code == 2
    assert "VALUE_HEX" in capsys.readouterr().err


def test_help_explains_the_layouts(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["decode", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for word in ["heartbeat", "checkpoint", "offset-sync", "KEY_HEX", "VALUE_HEX", "INT16", "example"]:
        assert word in text


def test_register_sets_func_on_its_own_parser(capsys):
    parser = argparse.ArgumentParser(prog="sparkmirror")
    decode.register(parser.add_subparsers())
    args = parser.parse_args(["decode", "offset-sync", OffsetSync("t", 1, 2, 3).encode_key().hex(),
                              OffsetSync("t", 1, 2, 3).encode_value().hex()])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["downstream_offset"] == 3


# capsys is shared across examples on purpose: readouterr() drains it each time.
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=20), st.text(max_size=20), st.integers(-(2**63), 2**63 - 1))
def test_round_trip_through_the_command(capsys, source, target, ts):
    hb = Heartbeat(source, target, ts)
    code = cli.main(["decode", "heartbeat", hb.encode_key().hex(), hb.encode_value().hex()])
    out = capsys.readouterr().out
    assert code == 0
    assert json.loads(out) == hb.to_json_dict()
