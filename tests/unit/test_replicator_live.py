"""Reload and its failures on a ReplicatorService (replicator.live), without Spark: the flows'
start and stop are stood in for, the decisions around them are real."""

from __future__ import annotations

import logging
import threading

import pytest

from replicator import live, service
from replicator.metrics import metrics
from replicator.service import ReplicatorService
from sparkmirror.configfile import load_config

BASE = ("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
        "a->b.enabled = true\n")
BOTH = BASE + "b->a.enabled = true\n"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def svc(tmp_path, monkeypatch):
    path = tmp_path / "mm2.properties"
    path.write_text(BASE)
    s = ReplicatorService(load_config(path), tmp_path / "ckpt")
    s.calls, s.path = [], path
    s._heartbeat_loops.apply = lambda config, stopping: s.calls.append("heartbeats")
    s._start_flow = lambda flow: s.calls.append(("start", flow.name))
    s._stop_flow = lambda name, forget=False: s.calls.append(("stop", name, forget))
    s.clock = Clock()
    monkeypatch.setattr(live.time, "monotonic", s.clock)
    return s


def test_a_flow_that_fails_to_start_is_reported_listed_failed_and_tried_again(svc, caplog):
    svc.path.write_text(BOTH)
    tries = []

    def start(flow):
        tries.append(flow.name)
        if len(tries) < 3:
            raise RuntimeError("py4j: the query could not start")  # not a SparkmirrorError

    svc._start_flow = start
    with caplog.at_level(logging.ERROR, "sparkmirror.replicate"):
        answer = svc.reload("ops")
    assert answer["http"] == 500 and answer["added"] == ["b->a"] and answer["unchanged"] == ["a->b"]
    assert "flow b->a did not start: py4j: the query could not start" in answer["error"]
    assert "reload by ops: flow b->a did not start" in caplog.text
    state = {f["flow"]: f for f in svc.flows_state()}
    assert state["b->a"]["state"] == "failed" and "could not start" in state["b->a"]["last_error"]
    svc.retry_failed_starts()
    assert tries == ["b->a"], "tried again before its time"
    svc.clock.now += live.FAILED_START_FIRST_S
    svc.retry_failed_starts()
    assert tries == ["b->a"] * 2 and svc._failed_starts["b->a"].delay == 2 * live.FAILED_START_FIRST_S
    svc.clock.now += 2 * live.FAILED_START_FIRST_S
    svc.retry_failed_starts()
    assert tries == ["b->a"] * 3 and svc._failed_starts == {}
    assert [f["flow"] for f in svc.flows_state()] == []  # no FlowReplicator stands in here


def test_a_reload_lists_a_failed_flow_as_added_again_and_forgets_it_once_removed(svc):
    svc.path.write_text(BOTH)
    svc._start_flow = lambda flow: (_ for _ in ()).throw(RuntimeError("down"))
    svc.reload("ops")
    assert svc.reload("ops")["added"] == ["b->a"]  # tried again, not "unchanged"
    svc.path.write_text(BASE)
    answer = svc.reload("ops")
    assert answer["removed"] == ["b->a"] and answer["http"] == 200 and svc._failed_starts == {}


def test_an_unexpected_error_while_applying_is_answered_and_a_sighup_reload_never_raises(svc, caplog):
    svc.path.write_text(BOTH)
    svc._stop_flow = lambda name, forget=False: None
    svc._apply = lambda new, who: (_ for _ in ()).throw(KeyError("b->a"))
    answer = svc.reload("ops")
    assert answer["http"] == 500 and "reload failed" in answer["error"]
    svc.reload = lambda who: (_ for _ in ()).throw(RuntimeError("bug"))
    with caplog.at_level(logging.ERROR, "sparkmirror.replicate"):
        svc.reload_logged("SIGHUP")  # the run's main loop calls this: it must not end the run
    assert "reload by SIGHUP failed; the flows run on as they were" in caplog.text


def test_the_stop_wins_over_a_reload(svc):
    svc.path.write_text(BOTH + "b->a.topics = x\n")
    svc.stop_event.set()
    assert svc.reload("ops")["http"] == 503 and svc.calls == []
    svc.stop_event.clear()
    svc.path.write_text(BASE.replace("a->b.enabled = true\n", "") + "b->a.enabled = true\n"
                               "c->b.enabled = true\nclusters = a, b, c\nc.bootstrap.servers = 127.0.0.1:3\n")

    def start(flow):  # SIGTERM arrives while the first flow starts
        svc.calls.append(("start", flow.name))
        svc.stop_event.set()

    svc._start_flow = start
    answer = svc.reload("ops")
    assert answer["http"] == 503 and answer["skipped"] == ["c->b"], answer
    assert [c for c in svc.calls if c[0] == "start"] == [("start", "b->a")]


def test_a_removed_flows_pause_gauges_go(svc, tmp_path):
    svc.path.write_text(BOTH)
    del svc._stop_flow  # the real one: no query or loops run here, the gauges are what it changes
    svc.reload("ops")
    metrics().pause_state("b->a", {"by": "ops", "at": 5.0})
    assert metrics().paused.labels("b->a")._value.get() == 1
    svc.path.write_text(BASE)
    assert svc.reload("ops")["removed"] == ["b->a"]
    names = {(s.name, tuple(s.labels.values())) for fam in (metrics().paused, metrics().paused_since)
             for m in fam.collect() for s in m.samples}
    assert not any(labels == ("b->a",) for _n, labels in names), names


class FakeEmitter:
    def __init__(self, config, flow):
        self.flow, self.stopped = flow, threading.Event()

    def prepare(self):
        pass

    def run(self, stop):
        stop.wait()
        self.stopped.set()


def test_heartbeat_loops_follow_a_reload(tmp_path, monkeypatch):
    monkeypatch.setattr(service, "HeartbeatEmitter", FakeEmitter)
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + "emit.heartbeats.enabled = false\na->b.emit.heartbeats.enabled = true\n")
    loops = service._HeartbeatLoops(load_config(path))
    loops.start()
    assert set(loops.running) == {"a->b"}
    old = loops.emitters["a->b"]
    path.write_text(BASE + "emit.heartbeats.enabled = false\nb->a.emit.heartbeats.enabled = true\n")
    loops.apply(load_config(path), threading.Event())
    assert old.stopped.wait(5) and set(loops.running) == {"b->a"}
    loops.stop(5)
    assert loops.emitters["b->a"].stopped.wait(5)


def test_once_the_run_stops_a_reload_waits_briefly_for_a_stopped_flows_loops(svc):
    joins = []
    svc._runs["a->b"] = type("Run", (), {"stop": lambda self, timeout: joins.append(timeout)})()
    del svc._stop_flow
    svc._stop_flow("a->b")
    svc._runs["a->b"] = type("Run", (), {"stop": lambda self, timeout: joins.append(timeout)})()
    svc.stop_event.set()  # SIGTERM during the reload
    svc._stop_flow("a->b")
    assert joins == [service.LOOP_JOIN_S, live.STOPPING_JOIN_S]
