"""One flow's data path over time, on its own: the rule, the task slots, a backlog caught up in
micro-batches first, and the hold after real time could not keep up."""

from __future__ import annotations

import pytest

from replicator.datapath import pathpolicy
from replicator.datapath.pathpolicy import FALL_BACK_HOLD_MAX_S, Choice, PathPolicy
from replicator.settings import MICRO_BATCH, REAL_TIME, ReplicatorSettings
from sparkmirror.errors import SparkmirrorError


def choose(requested="auto", **kw):
    args = dict(exactly_once=False, source_mode="direct", capped=False, partitions=12, writer_unavailable=None)
    args.update(kw)
    return pathpolicy.choose_path(requested, **args)


def test_auto_takes_real_time_for_a_plain_flow():
    assert choose().path == REAL_TIME


@pytest.mark.parametrize("kw, words", [
    ({"exactly_once": True}, "exactly-once"),
    ({"source_mode": "kafka"}, "--source kafka"),
    ({"capped": True}, "--max-records-per-batch"),
    ({"writer_unavailable": "no 'javac'"}, "no 'javac'"),
    ({"partitions": pathpolicy.MAX_REALTIME_PARTITIONS + 1}, "partitions"),
])
def test_auto_falls_back_to_micro_batches_and_says_why(kw, words):
    c = choose(**kw)
    assert c.path == MICRO_BATCH
    assert words in c.reason


def test_micro_batch_when_asked():
    assert choose("micro-batch").path == MICRO_BATCH


@pytest.mark.parametrize("master, slots", [("local[4]", 4), ("local[40,4]", 40), ("local", 1), ("local[*]", None),
                                           ("local[*,4]", None), ("spark://h:7077", None), (None, None)])
def test_local_slots(master, slots):
    assert pathpolicy.local_slots(master) == slots


def policy(exactly_once: bool = False, **settings) -> PathPolicy:
    return PathPolicy(ReplicatorSettings(**settings), exactly_once=exactly_once, flow_name="a->b")


def asked(p: PathPolicy, behind: int | None):
    """A backlog callable that records being asked."""
    calls = []

    def backlog():
        calls.append(1)
        return behind

    return backlog, calls


def test_a_plain_flow_goes_real_time_and_says_so_once():
    p = policy()
    assert p.path == Choice(MICRO_BATCH, "not decided") and not p.realtime
    choice, changed = p.choose(partitions=12, writer_unavailable=None)
    assert choice.path == REAL_TIME and changed and p.realtime and p.realtime_eligible
    assert not p.catching_up_first and p.expected(choice)
    assert p.choose(partitions=12, writer_unavailable=None) == (choice, False)


@pytest.mark.parametrize("kw, settings, words", [
    ({"exactly_once": True}, {}, "exactly-once"),
    ({}, {"source_mode": "kafka"}, "--source kafka"),
    ({}, {"max_records_per_batch": 100}, "--max-records-per-batch"),
])
def test_the_flow_and_its_settings_keep_it_in_micro_batches(kw, settings, words):
    p = policy(**kw, **settings)
    backlog, calls = asked(p, 10**9)
    choice, _ = p.choose(partitions=4, writer_unavailable=None, backlog=backlog)
    assert choice.path == MICRO_BATCH and words in choice.reason
    assert not p.realtime_eligible and not p.catching_up_first
    assert calls == [], "no backlog asked for when real time is out anyway"
    assert not p.expected(choice), "auto pushed onto micro-batches: worth a warning"


def test_too_few_task_slots_keep_it_in_micro_batches():
    p = policy()
    choice, _ = p.choose(partitions=12, writer_unavailable=None, slots_free=8)
    assert choice.path == MICRO_BATCH and "12 partitions need as many task slots and 8 are free" in choice.reason
    assert not p.realtime_eligible
    assert p.choose(partitions=8, writer_unavailable=None, slots_free=8)[0].path == REAL_TIME


def test_a_backlog_is_caught_up_in_micro_batches_first_under_auto_only():
    p = policy()
    backlog, calls = asked(p, 10_000)  # the default catch_up_first_records
    choice, _ = p.choose(partitions=4, writer_unavailable=None, backlog=backlog)
    assert choice.path == MICRO_BATCH and "10,000 records behind" in choice.reason and calls == [1]
    assert p.catching_up_first and p.realtime_eligible and p.expected(choice)
    backlog, _ = asked(p, 9_999)
    assert p.choose(partitions=4, writer_unavailable=None, backlog=backlog)[0].path == REAL_TIME
    assert not p.catching_up_first
    backlog, _ = asked(p, None)  # the source cannot say: real time
    assert p.choose(partitions=4, writer_unavailable=None, backlog=backlog)[0].path == REAL_TIME
    forced = policy(data_path=REAL_TIME)
    backlog, calls = asked(forced, 10**9)
    assert forced.choose(partitions=4, writer_unavailable=None, backlog=backlog)[0].path == REAL_TIME
    assert calls == [] and not forced.falls_back


def test_asked_for_real_time_on_a_flow_that_cannot_is_an_error():
    p = policy(data_path=REAL_TIME)
    with pytest.raises(SparkmirrorError) as info:
        p.choose(partitions=4, writer_unavailable="no 'javac'")
    assert "flow a->b cannot run on the real-time path" in str(info.value) and "no 'javac'" in str(info.value)


def test_asked_for_micro_batches_is_expected():
    p = policy(data_path=MICRO_BATCH)
    choice, changed = p.choose(partitions=4, writer_unavailable=None)
    assert choice == Choice(MICRO_BATCH, "--data-path micro-batch") and changed and p.expected(choice)


def test_each_fall_back_holds_micro_batches_twice_as_long_up_to_the_cap():
    p = policy(fall_back_hold=60.0)
    p.choose(partitions=4, writer_unavailable=None)
    holds = []
    now = 1000.0
    for _ in range(7):
        holds.append(p.fall_back(now))
        assert p.path.path == MICRO_BATCH and p.catching_up_first and "could not keep up" in p.path.reason
        assert not p.may_go_real_time(now + holds[-1] - 0.001)
        assert p.may_go_real_time(now + holds[-1])
        p.go_real_time()
        assert p.path == Choice(REAL_TIME, "caught up") and not p.catching_up_first
        now += 5000
    assert holds == [60.0, 120.0, 240.0, 480.0, FALL_BACK_HOLD_MAX_S, FALL_BACK_HOLD_MAX_S, FALL_BACK_HOLD_MAX_S]
    assert p.fell_back == 7


def test_a_flow_not_catching_up_never_goes_real_time_by_itself():
    p = policy()
    p.choose(partitions=4, writer_unavailable=None)
    assert not p.may_go_real_time(10**9)


def test_the_rule_alone():
    most = pathpolicy.MAX_REALTIME_PARTITIONS
    assert pathpolicy.choose_path("auto", exactly_once=False, source_mode="direct", capped=False,
                                  partitions=most, writer_unavailable=None).path == REAL_TIME
