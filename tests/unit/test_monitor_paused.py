"""A flow the replicator's control API says is paused: PAUSED, not STOP (monitor.evaluator.flows),
and what the monitor keeps of that answer (monitor.state, monitor.collectors.replicator)."""

from __future__ import annotations

import asyncio

import pytest

from monitor.collectors.replicator import FORGET_AFTER, ReplicatorCollector, check_url, read_password
from monitor.evaluator.results import worst
from monitor.state import OffsetsRow
from sparkmirror.errors import ConfigError
from sparkmirror.metrics import STATUS_CODES, STATUSES
from tests.support.evaluator import FLOW, beat, make_state, run

PAUSE = {"by": "ops", "at": 1_800_000_000.0}


def _lagging(state, clock):
    beat(state, clock)
    state.record_offsets(FLOW, [OffsetsRow("orders", 0, "a.orders", 0, 20, 10, (0, 0)),
                                OffsetsRow("orders", 1, "a.orders", 0, 5, 5, (4, 4))], at=clock.now)


def test_a_paused_flow_is_paused_not_stop_and_its_lagging_partitions_too():
    state, clock = make_state()
    _lagging(state, clock)
    state.set_replicator_flows([{"flow": FLOW, "state": "paused", "paused": PAUSE}], clock.now)
    f = run(state, clock).flows[0]
    assert f.status == "PAUSED" and f.paused == PAUSE  # at once, before the heartbeats time out
    assert "paused on purpose by ops at 2027-01-15T08:00:00Z" in f.reasons[-1]
    clock.now += 60  # long past the heartbeat timeout
    f = run(state, clock).flows[0]
    assert f.status == "PAUSED" and f.heartbeat.stopped and f.replicator_up
    assert not any("replication stopped" in r for r in f.reasons), f.reasons
    assert [p.status for p in f.partitions] == ["PAUSED", "OK"]
    assert f.partitions_by_status["PAUSED"] == 1 and f.partitions_by_status["STOP"] == 0


def test_resumed_the_flow_is_judged_by_its_heartbeats_again():
    state, clock = make_state()
    _lagging(state, clock)
    state.set_replicator_flows([{"flow": FLOW, "state": "paused", "paused": PAUSE}], clock.now)
    clock.now += 60
    assert run(state, clock).flows[0].status == "PAUSED"
    state.set_replicator_flows([{"flow": FLOW, "state": "running", "paused": None}], clock.now)
    f = run(state, clock).flows[0]
    assert f.status == "STOP" and f.paused is None  # no heartbeat yet: a stopped copy until one arrives
    beat(state, clock)
    assert run(state, clock).flows[0].status == "OK"


def test_a_flow_the_replicator_does_not_list_keeps_its_own_rules():
    state, clock = make_state()
    _lagging(state, clock)
    state.set_replicator_flows([{"flow": "x->y", "state": "paused", "paused": PAUSE}], clock.now)
    clock.now += 60
    assert run(state, clock).flows[0].status == "STOP"


def test_paused_ranks_between_warn_and_stall_so_a_pause_never_hides_a_fault():
    assert STATUSES == ("OK", "WARN", "PAUSED", "STALL", "STOP", "ERR")
    assert worst(["OK", "WARN", "PAUSED"]) == "PAUSED"
    assert worst(["PAUSED", "STALL"]) == "STALL" and worst(["PAUSED", "STOP"]) == "STOP"
    assert worst(["PAUSED", "ERR"]) == "ERR"
    assert list(STATUS_CODES.values()) == list(range(6))


def test_data_loss_on_a_paused_flow_is_still_err():
    state, clock = make_state()
    beat(state, clock)
    state.record_offsets(FLOW, [OffsetsRow("orders", 0, "a.orders", 15, 20, 10, (0, 0))], at=clock.now)
    state.set_replicator_flows([{"flow": FLOW, "state": "paused", "paused": PAUSE}], clock.now)
    f = run(state, clock).flows[0]
    assert f.status == "ERR" and f.partitions[0].status == "ERR"


class _Answers:
    """Stands in for the HTTP GET: the answers, in order (an exception is raised)."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)

    def __call__(self):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_one_failed_read_keeps_the_pause_and_three_forget_it():
    state, clock = make_state()
    c = ReplicatorCollector("http://127.0.0.1:1/", state, 1.0, 1.0)
    c._get = _Answers([{"flow": FLOW, "state": "paused", "paused": PAUSE}],
                      *[OSError("refused")] * FORGET_AFTER)
    asyncio.run(c.refresh())
    assert state.flows[FLOW].replicator_paused == PAUSE
    for i in range(FORGET_AFTER):
        with pytest.raises(OSError):
            asyncio.run(c.refresh())
        assert (state.flows[FLOW].replicator_paused is None) == (i == FORGET_AFTER - 1)


def test_urls_with_credentials_or_without_http_are_refused_and_the_password_is_never_shown(tmp_path):
    assert check_url("http://r:9465/") == "http://r:9465"
    with pytest.raises(ConfigError, match="must not carry credentials"):
        check_url("http://ops:secret@r:9465")
    with pytest.raises(ConfigError, match="not an http"):
        check_url("r:9465")
    with pytest.raises(ConfigError, match="--replicator-password-file .*missing"):
        read_password(str(tmp_path / "missing"))
    (tmp_path / "pw").write_text("s3cret-pw\nignored\n")
    state, _ = make_state()
    c = ReplicatorCollector("http://r:9465", state, 1.0, 1.0, user="ops", password=read_password(str(tmp_path / "pw")))
    assert "s3cret" not in repr(c) and "s3cret" not in str(vars(c).get("url"))
