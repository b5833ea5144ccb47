"""Which keys switch exactly-once on, and what `sparkmirror validate` says about it (the real CLI process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.datapath.eos_writer import progress_group, transactional_id
from sparkmirror.model.config import GROUPS_EXCLUDE_DEFAULT
from sparkmirror.model.parse import parse_config
from sparkmirror.model.filters import GroupFilter

ROOT = Path(__file__).resolve().parents[2]
BASE = "clusters = a, b\na.bootstrap.servers = a:9092\nb.bootstrap.servers = b:9092\na->b.enabled = true\n"


def validate(tmp_path: Path, extra: str, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return subprocess.run([sys.executable, "-m", "sparkmirror_cli.main", "validate", *args, str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("extra,on,shown", [
    ("", False, "exactly-once disabled"),
    ("b.exactly.once.source.support = enabled\n", True,
     "exactly-once on (b.exactly.once.source.support = enabled): one Kafka transaction per source partition"),
    ("a->b.exactly.once.support = required\n", True,
     "exactly-once on (a->b.exactly.once.support = required, line 5)"),
    ("a->b.exactly.once.support = REQUESTED\n", False, "exactly-once disabled"),
    ("b.exactly.once.source.support = preparing\n", False,
     "exactly-once off (b.exactly.once.source.support = preparing (MM2's upgrade step: not yet on))"),
    ("b.exactly.once.source.support = disabled\na->b.exactly.once.support = required\n", True,
     "exactly-once on (a->b.exactly.once.support = required, line 6)"),
])
def test_validate_shows_the_flows_mode(tmp_path, extra, on, shown):
    proc = validate(tmp_path, extra)
    assert proc.returncode == 0, proc.stderr
    assert shown in proc.stdout
    flows = {f["name"]: f for f in json.loads(validate(tmp_path, extra, "--json").stdout)["flows"]}
    assert flows["a->b"]["exactly_once"] is on
    assert flows["b->a"]["exactly_once"] is False  # the worker key is read per *target* cluster


def test_a_bad_value_is_a_config_error_naming_its_line(tmp_path):
    proc = validate(tmp_path, "a->b.exactly.once.support = always\n")
    assert proc.returncode == 2
    assert "mm2.properties:5:" in proc.stderr
    assert "must be one of requested, required, got 'always'" in proc.stderr


def test_the_worker_key_turns_it_on_for_every_flow_into_that_cluster():
    cfg = parse_config(BASE + "b.exactly.once.source.support = Enabled\nb->a.enabled = true\n", "mm2.properties")
    assert cfg.flow("a", "b").exactly_once and not cfg.flow("b", "a").exactly_once


def test_progress_group_is_left_out_by_mm2s_default_group_filter():
    name = progress_group("primary", "dr")
    assert not GroupFilter([".*"], [p.strip() for p in GROUPS_EXCLUDE_DEFAULT.split(",")]).should_replicate_group(name)
    assert GroupFilter([".*"], []).should_replicate_group(name)


def test_transactional_ids_differ_per_flow_topic_and_partition():
    ids = {transactional_id(s, t, topic, p) for s, t in (("a", "b"), ("b", "a"), ("a-b", "c"))
           for topic in ("x", "x-1", "x.1") for p in (0, 1, 10)}
    assert len(ids) == 3 * 3 * 3
