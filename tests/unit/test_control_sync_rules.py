"""Group offset sync, topic config sync, ACL sync and takeover rules, as pure logic (no cluster)."""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ConfigEntry, ConfigSource,
                                   ResourcePatternType, ResourceType)

from sparkmirror_cli.inspect_topic import record_type_of
from replicator.control.configsync import plan_config_changes, target_acl_bindings
from replicator.control.groups import TargetGroup, offsets_to_commit
from replicator.control.offsetsyncs_reader import SPARK_EARLIEST, resume_offsets
from replicator.control.loop import run_loop
from sparkmirror.errors import ClusterError
from sparkmirror.model.parse import parse_config
from sparkmirror.model.config import CONFIG_PROPERTIES_EXCLUDE_DEFAULT
from sparkmirror.model.values import java_list
from sparkmirror.model.filters import TopicFilter
from sparkmirror.model.policy import DefaultReplicationPolicy
from sparkmirror.model.records import Checkpoint, OffsetSync

EXCLUDE = java_list(CONFIG_PROPERTIES_EXCLUDE_DEFAULT)


# ------------------------------------------------------------------ group offset sync


def _cp(topic: str, partition: int, downstream: int) -> Checkpoint:
    return Checkpoint("g", topic, partition, downstream, downstream)


def test_group_offsets_only_move_forward():
    cps = {("A.t", 0): _cp("A.t", 0, 100), ("A.t", 1): _cp("A.t", 1, 100), ("A.t", 2): _cp("A.t", 2, 100)}
    target = {("A.t", 0): 50, ("A.t", 1): 100, ("A.t", 2): 150}
    assert offsets_to_commit(cps, target) == {("A.t", 0): cps[("A.t", 0)]}
    assert offsets_to_commit(cps, {}) == cps  # absent group or new partitions: set them


def test_only_groups_without_members_are_written():
    assert TargetGroup("g", "empty", 0).writable
    assert TargetGroup("g", "dead", 0).writable
    assert TargetGroup("g", "absent", 0).writable
    assert not TargetGroup("g", "stable", 2).writable
    assert not TargetGroup("g", "preparing_rebalancing", 1).writable
    assert not TargetGroup("g", "completing_rebalancing", 0).writable


# ------------------------------------------------------------------ topic configs


def _entry(name: str, value: str | None, source: ConfigSource, **kw) -> ConfigEntry:
    return ConfigEntry(name, value, source=source, is_default=source == ConfigSource.DEFAULT_CONFIG, **kw)


def test_config_changes_follow_mm2_rules():
    topic, default, dyn, static = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG,
                                   ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG)
    source = {
        "retention.ms": _entry("retention.ms", "3600000", topic),  # changed on the source: set
        "cleanup.policy": _entry("cleanup.policy", "delete", default),  # default on source, set on target: delete
        "segment.bytes": _entry("segment.bytes", "1048576", topic),  # already equal: nothing
        "max.message.bytes": _entry("max.message.bytes", "2000000", dyn),  # dynamic broker value: set (MM2)
        "min.insync.replicas": _entry("min.insync.replicas", "2", topic),  # excluded: never
        "message.timestamp.type": _entry("message.timestamp.type", "LogAppendTime", topic),  # excluded
        "log.dir.thing": _entry("log.dir.thing", "x", static),  # static broker config: never
        "secret.x": _entry("secret.x", "s", topic, is_sensitive=True),
        "read.only": _entry("read.only", "r", topic, is_read_only=True),
        "flush.ms": _entry("flush.ms", "9223372036854775807", default),  # default both sides: nothing
    }
    target = {
        "retention.ms": _entry("retention.ms", "604800000", default),
        "cleanup.policy": _entry("cleanup.policy", "compact", topic),
        "segment.bytes": _entry("segment.bytes", "1048576", topic),
        "min.insync.replicas": _entry("min.insync.replicas", "1", topic),  # operator's choice on the target: kept
        "flush.ms": _entry("flush.ms", "9223372036854775807", default),
    }
    changes = {c.name: c.value for c in plan_config_changes("A.t", source, target, EXCLUDE)}
    assert changes == {"retention.ms": "3600000", "cleanup.policy": None, "max.message.bytes": "2000000"}


# ------------------------------------------------------------------ ACLs


def _acl(name, op, perm, pattern=ResourcePatternType.LITERAL, restype=ResourceType.TOPIC, principal="User:alice"):
    return AclBinding(restype, name, pattern, principal, "*", op, perm)


def test_acls_literal_topics_only_never_write_and_all_becomes_read():
    policy = DefaultReplicationPolicy()
    source = [
        _acl("orders", AclOperation.READ, AclPermissionType.ALLOW),
        _acl("orders", AclOperation.WRITE, AclPermissionType.ALLOW),  # never copied
        _acl("orders", AclOperation.ALL, AclPermissionType.ALLOW, principal="User:bob"),  # -> READ
        _acl("orders", AclOperation.WRITE, AclPermissionType.DENY, principal="User:eve"),  # DENY stays as is
        _acl("ord", AclOperation.READ, AclPermissionType.ALLOW, pattern=ResourcePatternType.PREFIXED),
        _acl("internal-stuff.internal", AclOperation.READ, AclPermissionType.ALLOW),  # not replicated
        _acl("payments", AclOperation.READ, AclPermissionType.ALLOW),  # filtered out
        _acl("B.orders", AclOperation.READ, AclPermissionType.ALLOW),  # came from the target: a cycle
    ]
    out = target_acl_bindings(source, policy, TopicFilter(["orders", "B.orders", ".*internal"], []), "A", "B")
    got = {(b.name, b.principal, b.operation, b.permission_type, b.resource_pattern_type) for b in out}
    assert got == {
        ("A.orders", "User:alice", AclOperation.READ, AclPermissionType.ALLOW, ResourcePatternType.LITERAL),
        ("A.orders", "User:bob", AclOperation.READ, AclPermissionType.ALLOW, ResourcePatternType.LITERAL),
        ("A.orders", "User:eve", AclOperation.WRITE, AclPermissionType.DENY, ResourcePatternType.LITERAL),
    }


# ------------------------------------------------------------------ takeover


def test_resume_after_the_newest_sync_with_safety_checks():
    latest = {
        ("t", 0): OffsetSync("t", 0, 999, 1999),  # normal: resume at 1000
        ("t", 1): OffsetSync("t", 1, 50, 50),  # target lost its copy (ends at 10): from earliest
        ("t", 2): OffsetSync("t", 2, 500, 500),  # source ends before 501 (re-created): from earliest
        ("t", 3): OffsetSync("t", 3, 20, 20),  # source log starts at 100 now: resume at 100
    }
    source = {("t", 0): (0, 5000), ("t", 1): (0, 100), ("t", 2): (0, 30), ("t", 3): (100, 200)}
    target = {("A.t", 0): (0, 2000), ("A.t", 1): (0, 10), ("A.t", 2): (0, 501), ("A.t", 3): (0, 21)}
    offsets, notes = resume_offsets(latest, {"t": 5}, source, target, lambda t: f"A.{t}")
    assert offsets == {"t": {0: 1000, 1: SPARK_EARLIEST, 2: SPARK_EARLIEST, 3: 100, 4: SPARK_EARLIEST}}
    assert len(notes) == 3 and all(n.startswith("t[") for n in notes)


# ------------------------------------------------------------------ inspect's type detection


def test_record_type_from_topic_name():
    config = parse_config("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                          "A->B.enabled = true\nreplication.policy.separator = _\n")
    assert record_type_of(config, "B", "heartbeats") == "heartbeat"
    assert record_type_of(config, "B", "A_heartbeats") == "heartbeat"
    assert record_type_of(config, "B", "A_checkpoints_internal") == "checkpoint"
    assert record_type_of(config, "A", "mm2-offset-syncs_B_internal") == "offset-sync"
    assert record_type_of(config, "A", "mm2-offset-syncs_C_internal") == "offset-sync"
    assert record_type_of(config, "A", "orders") is None


# ------------------------------------------------------------------ loops


def test_loop_retries_prepare_survives_failing_rounds_and_closes():
    stop = threading.Event()
    calls = {"prepare": 0, "step": 0, "close": 0}

    def prepare():
        calls["prepare"] += 1
        if calls["prepare"] == 1:
            raise ClusterError("not yet")

    def step():
        calls["step"] += 1
        if calls["step"] == 1:
            raise RuntimeError("a bad round")
        if calls["step"] == 3:
            stop.set()

    run_loop("test", 0.01, step, stop, prepare, close=lambda: calls.__setitem__("close", 1), retry_seconds=0.01)
    assert calls == {"prepare": 2, "step": 3, "close": 1}


def test_loop_that_waits_first_runs_its_first_round_one_interval_after_the_start():
    """The topic refresh and the catch-up progress loops: the start-up already did the first round."""
    stop = threading.Event()
    started = time.monotonic()
    rounds: list[float] = []

    def step():
        rounds.append(time.monotonic() - started)
        stop.set()

    run_loop("test", 0.3, step, stop, wait_first=True)
    assert len(rounds) == 1 and rounds[0] >= 0.3


def test_loop_that_waits_first_runs_no_round_when_stopped_during_the_wait():
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    rounds = []
    run_loop("test", 5.0, lambda: rounds.append(1), stop, wait_first=True)
    assert rounds == []


def test_rounds_failing_on_a_cluster_for_a_moment_are_warnings_and_lasting_ones_errors(caplog, monkeypatch):
    """A broker of three killed fails a round or two: not an error yet. Failing for
    ROUND_FAILURES_ERROR rounds and ROUND_FAILURE_ERROR_SECONDS in a row is; the recovery is said once."""
    from replicator.control import loop

    monkeypatch.setattr(loop, "ROUND_FAILURE_ERROR_SECONDS", 0.05)
    outcomes = iter(["fail", "ok", "fail", "fail", "fail", "fail", "ok", "bug"])
    stop = threading.Event()

    def step():
        time.sleep(0.03)  # each round takes this long: the third failure in a row is 0.06 s after the first
        outcome = next(outcomes, None)
        if outcome is None:
            stop.set()
        elif outcome == "fail":
            raise ClusterError("cannot describe consumer group g: NOT_COORDINATOR", cluster="dr")
        elif outcome == "bug":
            raise KeyError("x")

    caplog.set_level(logging.INFO, logger="sparkmirror.control")
    run_loop("group offset sync a->b", 0.0, step, stop)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "sparkmirror.control"]
    levels = [lvl for lvl, _ in said]
    assert levels == ["WARNING", "INFO", "WARNING", "WARNING", "ERROR", "ERROR", "INFO", "ERROR", "INFO"], said
    assert "cluster dr" in said[0][1] or "NOT_COORDINATOR" in said[0][1]
    assert "working again after 1 failed round" in said[1][1]
    assert "3 rounds in a row" in said[4][1] and "working again after 4 failed rounds" in said[6][1]
