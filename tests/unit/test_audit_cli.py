"""`sparkmirror audit`'s command line, the audit's options and its status line, without a cluster."""

from __future__ import annotations

import argparse

import pytest

from monitor.audit.component import summary
from monitor.audit.options import AUDIT_OPTIONS, AuditOptions
from sparkmirror_cli import audit


def test_usage_errors_exit_2_and_say_what_to_write(capsys):
    with pytest.raises(SystemExit) as exc:
        audit.main(["audit", "mm2.properties", "--flow", "primary-dr"])
    assert exc.value.code == 2
    assert "write SOURCE->TARGET" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        audit.main(["audit", "mm2.properties", "--flow", "a->b", "--from-offset", "1", "--from-time", "5"])
    assert "not allowed with" in capsys.readouterr().err


def test_a_missing_config_file_is_a_config_error(tmp_path, capsys):
    assert audit.main(["audit", str(tmp_path / "nope.properties"), "--flow", "a->b"]) == 2
    err = capsys.readouterr().err
    assert "nope.properties" in err and "cannot read the configuration" in err


def test_from_time_takes_epoch_ms_and_iso_8601():
    assert audit._from_time("1700000000000") == 1700000000000
    assert audit._from_time("2023-11-14T22:13:20Z") == 1700000000000
    assert audit._from_time("2023-11-14T22:13:20") == 1700000000000  # UTC unless it says otherwise
    with pytest.raises(argparse.ArgumentTypeError):
        audit._from_time("yesterday")


def test_the_audit_options_are_declared_and_read_back():
    parser = argparse.ArgumentParser()
    for o in AUDIT_OPTIONS:
        kwargs = {k: v for k, v in (("type", o.type), ("choices", o.choices)) if v is not None}
        parser.add_argument(o.flag, dest=o.name, default=o.default, **kwargs)
    assert AuditOptions.of(parser.parse_args([])) == AuditOptions()
    got = AuditOptions.of(parser.parse_args(["--audit", "off", "--audit-budget", "0", "--audit-state-dir", "/s",
                                             "--audit-replicator", "mm2"]))
    assert (got.enabled, got.budget, str(got.state_dir), got.replicator) == (False, 0, "/s", "mm2")


def test_the_status_line_says_counts_and_duplicates():
    snap = {"counts": {"verified": 5, "missing": 0, "mismatched": 0, "duplicated": 12, "expired": 0,
                       "unverifiable": 0}, "verified_last_hour": 1_234_567, "exactly_once": False,
            "findings": [{"kind": "duplicated", "first_seen": 0.0}]}
    line = summary(snap)
    assert line.startswith("verified 1.2 M records in the last hour · 0 missing · 0 altered · 12 duplicates since ")
