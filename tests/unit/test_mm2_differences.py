"""The deliberate differences from MM2 that `sparkmirror replicate` states at start-up, and README's list of them."""

from __future__ import annotations

import re
from pathlib import Path

from sparkmirror.model.parse import parse_config
from sparkmirror.model.differences import mm2_differences

BASE = "clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n"  # lines 1-4
README = Path(__file__).resolve().parents[2] / "README.md"


def differences(extra: str = "") -> list[str]:
    return mm2_differences(parse_config(BASE + extra, "mm2.properties"))


def test_a_plain_flow_differs_only_in_checkpoint_precision():
    [only] = differences()
    assert only.startswith("a->b: checkpoints translate along every offset-sync")
    assert differences("emit.checkpoints.enabled = false\n") == []
    assert differences("b->a.enabled = false\nb->a.tasks.max = 4\nemit.checkpoints.enabled = false\n") == []


def test_isolation_level_other_than_read_committed_is_said_with_its_line():
    [said] = [d for d in differences("a.consumer.isolation.level = read_uncommitted\n") if "isolation" in d]
    assert "isolation.level = read_uncommitted (line 5) is overridden" in said and "read_committed" in said
    assert not [d for d in differences("a.consumer.isolation.level = read_committed\n") if "isolation" in d]


def test_exactly_once_required_tasks_max_and_java_plugins_are_said():
    said = " | ".join(differences("a->b.exactly.once.support = required\ntasks.max = 8\n"
                                  "transforms = t\ntopic.filter.class = org.apache.kafka.connect.mirror."
                                  "DefaultTopicFilter\n"))
    assert "switches exactly-once on" in said and "tasks.max (line 6) is not used" in said
    assert "transforms ignored" in said and "topic.filter.class" not in said  # set to MM2's default: no difference
    assert "checkpoints translate" not in said  # exactly-once flows translate with MM2's rule


def test_readme_lists_every_difference_in_its_section():
    text = README.read_text()
    section = re.search(r"^## Where sparkmirror differs from MM2\n(.*?)^## ", text, re.M | re.S)
    assert section, "README has no section 'Where sparkmirror differs from MM2'"
    for fact in ("read_committed", "exactly.once.support = required", "max.in.flight.requests.per.connection",
                 "tasks.max", "transforms",
                 "checkpoint", "replication.policy.class"):
        assert fact in section.group(1), fact


def test_more_requests_in_flight_without_idempotence_are_said_to_be_overridden():
    [said] = [d for d in differences("b.producer.enable.idempotence = false\n"
                                     "b.producer.max.in.flight.requests.per.connection = 5\n") if "in.flight" in d]
    assert "max.in.flight.requests.per.connection = 5 (line 6) is overridden with 1" in said
    assert not [d for d in differences("b.producer.enable.idempotence = false\n") if "in.flight" in d]
    assert not [d for d in differences("b.producer.max.in.flight.requests.per.connection = 5\n") if "in.flight" in d]
