"""The replicator's tuning is one typed object, declared once, passed down (replicator.settings)."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from replicator import settings
from replicator.settings import MICRO_BATCH, REAL_TIME, ReplicatorSettings
from sparkmirror.errors import UsageError
from sparkmirror.model.parse import parse_config

REPO = Path(__file__).resolve().parents[2]


def test_every_setting_says_what_it_does_and_how_it_is_set():
    for f in fields(ReplicatorSettings):
        assert len(f.metadata["description"]) > 30, f.name
        assert bool(f.metadata["option"]) != bool(f.metadata["env"]), f"{f.name}: one option or one variable"
        assert f.name in settings.table()


def test_the_configuration_page_carries_the_generated_table():
    doc = (REPO / "docs" / "configuration.md").read_text()
    start = doc.index("\n", doc.index("<!-- replicator-settings")) + 1
    end = doc.index("<!-- /replicator-settings -->")
    assert doc[start:end] == settings.table(), \
        "regenerate the table in docs/configuration.md with: python -m replicator.settings"


def test_environment_variables_are_read_into_the_object_and_checked():
    s = ReplicatorSettings.from_environment({"SPARKMIRROR_MICRO_BATCH_SECONDS": "2", "SPARKMIRROR_CDS": "off",
                                             "SPARKMIRROR_FALL_BACK_HOLD_S": "0", "UNRELATED": "x"})
    assert (s.micro_batch_seconds, s.class_data_archive, s.fall_back_hold) == (2.0, False, 0.0)
    assert ReplicatorSettings.from_environment({}) == ReplicatorSettings()
    for name, value in [("SPARKMIRROR_MICRO_BATCH_SECONDS", "soon"), ("SPARKMIRROR_CATCH_UP_FIRST_RECORDS", "0"),
                        ("SPARKMIRROR_FALL_BACK_AFTER_S", "-1"), ("SPARKMIRROR_CDS", "maybe")]:
        with pytest.raises(UsageError) as info:
            ReplicatorSettings.from_environment({name: value})
        assert info.value.exit_code == 2 and name in str(info.value) and "for example" in str(info.value)


def test_no_tuning_is_read_from_the_environment_outside_the_settings_module():
    """Only replicator/settings.py and the command line read SPARKMIRROR_* variables (the cache
    directory, a ground-floor fact of sparkmirror/artifacts.py, is the one other)."""
    allowed = {REPO / "replicator" / "settings.py", REPO / "sparkmirror" / "artifacts.py"}
    reading = []
    for top in ("replicator", "monitor", "sparkmirror"):
        for path in sorted((REPO / top).rglob("*.py")):
            if path in allowed:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and node.value.startswith("SPARKMIRROR_") and node.value != "SPARKMIRROR_WRITE_ERROR"):
                    reading.append(f"{path.relative_to(REPO)}: {node.value}")
    assert reading == []


def _flow(settings_: ReplicatorSettings, tmp_path: Path):
    from replicator.datapath.flow import FlowReplicator

    config = parse_config("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
                          "a->b.enabled = true\n")
    fr = FlowReplicator(config, config.flow("a", "b"), None, tmp_path, settings_, source_admin=None,
                        target_admin=None, topics=None, starting_offsets=None)
    fr.assignment = {"t": 4}
    fr._backlog_estimate = lambda: 5_000  # what the source would say: 5,000 records behind
    return fr


def test_two_flows_in_one_process_follow_their_own_settings(tmp_path):
    eager = _flow(ReplicatorSettings(), tmp_path / "one")
    patient = _flow(ReplicatorSettings.from_environment({"SPARKMIRROR_CATCH_UP_FIRST_RECORDS": "1000"}),
                    tmp_path / "two")
    assert eager.choose_path(None).path == REAL_TIME  # 5,000 behind: under the default 10,000
    assert patient.choose_path(None).path == MICRO_BATCH and patient.catching_up_first
    assert eager.choose_path(None).path == REAL_TIME, "the other flow's settings did not leak"
    capped = _flow(ReplicatorSettings(max_records_per_batch=100), tmp_path / "three")
    assert capped.choose_path(None).path == MICRO_BATCH
    for fr in (eager, patient, capped):
        if fr.offset_syncs.producer is not None:
            fr.offset_syncs.producer.flush(0)
