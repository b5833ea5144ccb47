"""The replicator's control API against the real brokers and the real replicator.

One module run, basic auth on (``--web-config-file``), records flowing all along:

- credentials and the JSON content type are required, every action is logged;
- ``ctl pause``: the mirror stops growing, ``sparkmirror_replicator_flow_paused`` is 1, and
  the pause survives a kill -9 (the restarted replicator copies nothing until ``ctl resume``);
  a monitor reading the control API (``--replicator-url``) says PAUSED, then OK once resumed;
- reloads: a flow added that fails to start (reported, listed failed, the others untouched),
  a flow added (the unchanged flow keeps its Spark query), a filter changed
  (SIGHUP), an invalid file refused with validate's FILE:LINE (everything runs on), a flow
  removed;
- at the end every produced record is on the target exactly once.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from urllib.parse import quote

import bcrypt
import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.cli import run_cli
from tests.support.kafka import NumberedProducer, consume_all, create_topic, produce
from tests.support.monitor import RunningMonitor
from tests.support.replicator import Replicator, write_config
from tests.support.web import fetch

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

FLOW, BACK = "primary->dr", "dr->primary"


def _ends(bootstrap: str, topic: str, parts: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1] for q in range(parts))
    except Exception:
        return 0
    finally:
        c.close()


def _post(port: int, path: str, *, auth=None, ctype="application/json"):
    import base64
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"{}", method="POST")
    if ctype:
        req.add_header("Content-Type", ctype)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def setup(kafka_clusters, tmp_path_factory):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    u = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("control-api")
    password = f"ctl-{u}-never-shown"
    web = work / "web.yml"
    web.write_text(f"basic_auth_users:\n  ops: {bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()}\n")
    (work / "pass").write_text(password + "\n")
    load, back, extra = f"ca-{u}", f"cr-{u}", f"cs-{u}"
    create_topic(primary, load, 2)
    create_topic(dr, back, 1)
    create_topic(dr, extra, 1)
    produce(dr, back, [{"value": f"r{i}".encode()} for i in range(50)])
    produce(dr, extra, [{"value": f"s{i}".encode()} for i in range(30)])
    base = {"primary->dr.topics": load, "dr->primary.topics": back}
    config = write_config(work / "mm2.properties", primary, dr, base)
    yield {"u": u, "primary": primary, "dr": dr, "work": work, "web": web, "password": password, "load": load,
           "back": back, "extra": extra, "config": config, "base": base}


def _state(rep, auth) -> dict:
    r = fetch(f"http://127.0.0.1:{rep.metrics_port}/api/flows", auth=auth, timeout=30)
    assert r.status == 200, r.text
    return {f["flow"]: f for f in json.loads(r.body)["flows"]}


def test_pause_resume_reload_under_load(setup):
    s = setup
    primary, dr, load, work = s["primary"], s["dr"], s["load"], s["work"]
    auth = ("ops", s["password"])
    remote = f"primary.{load}"

    def start():
        rep = Replicator(s["config"], work / "ckpt", work / "replicator.log",
                         extra_args=["--web-config-file", str(s["web"])]).start()
        rep.wait_until(lambda: _state(rep, auth).get(FLOW, {}).get("state") in ("running", "paused"), 120,
                       what="the flow in GET /api/flows", ignoring=(OSError,))
        return rep

    def ctl(rep, *args):
        return run_cli("ctl", *args, "--url", f"http://127.0.0.1:{rep.metrics_port}", "--user", "ops",
                       "--password-file", str(work / "pass"))

    producer = NumberedProducer(primary, load, 2, rate=200, keyed=False)
    producer.start()
    rep = start()
    ok = False
    try:
        port = rep.metrics_port
        # credentials, then a JSON content type
        assert fetch(f"http://127.0.0.1:{port}/api/flows").status == 401
        assert _post(port, f"/api/flows/{quote(FLOW, safe='')}/pause")[0] == 401
        assert _post(port, f"/api/flows/{quote(FLOW, safe='')}/pause", auth=auth,
                     ctype="application/x-www-form-urlencoded")[0] == 415
        rep.wait_until(lambda: _ends(dr, remote, 2) > 200, 90, what="records on the mirror")
        # the real-time writers' counts reach the driver at its checkpoints
        rep.wait_until(lambda: _state(rep, auth)[FLOW]["records"] > 0, 30, what="records counted in /api/flows")
        state = _state(rep, auth)
        assert state[FLOW]["state"] == "running" and state[FLOW]["data_path"]
        assert s["password"] not in json.dumps(state)

        paused = ctl(rep, "pause", FLOW)
        assert paused.returncode == 0 and "paused" in paused.stdout, paused.stdout + paused.stderr
        assert "control: ops from 127.0.0.1: pause primary->dr: 200 paused" in rep.log()
        assert 'sparkmirror_replicator_flow_paused{flow="primary->dr"} 1.0' in fetch(
            f"http://127.0.0.1:{port}/metrics", auth=auth).text
        at = _ends(dr, remote, 2)
        time.sleep(3)
        assert _ends(dr, remote, 2) == at, "a paused flow copied records"
        assert _state(rep, auth)[FLOW]["state"] == "paused"
        status = ctl(rep, "status")
        assert status.returncode == 0 and "paused by ops" in status.stdout, status.stdout + status.stderr

        rep.kill9()  # the pause is on disk, next to the checkpoint
        rep = start()
        assert _state(rep, auth)[FLOW]["state"] == "paused"
        assert 'sparkmirror_replicator_flow_paused{flow="primary->dr"} 1.0' in fetch(
            f"http://127.0.0.1:{rep.metrics_port}/metrics", auth=auth).text
        rep.wait_for_log("paused by ops: no query runs until it is resumed")  # Spark is up, the flow stays off
        # the monitor, reading the control API, says PAUSED (not STOP), then OK once resumed
        with RunningMonitor(s["config"], replicator_url=(f"http://127.0.0.1:{rep.metrics_port}",),
                            replicator_user="ops", replicator_password_file=str(work / "pass")) as mon:
            flow = mon.wait_for(lambda st: _monitored(st, "PAUSED"), 30, what="the monitor to say PAUSED")
            assert flow["paused"]["by"] == "ops" and any("paused on purpose by ops" in r for r in flow["reasons"])
            assert _ends(dr, remote, 2) == at, "the restarted replicator copied a paused flow"
            resumed = ctl(rep, "resume", FLOW)
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            rep.wait_until(lambda: _ends(dr, remote, 2) > at, 60, what="the copy to go on after resume")
            flow = mon.wait_for(lambda st: _monitored(st, "OK"), 60, what="the monitor to say OK after resume")
            assert flow["paused"] is None and s["password"] not in json.dumps(mon.status())

        query = _state(rep, auth)[FLOW]["query"]
        assert query
        # a flow added that cannot start (its mirror topic needs 3 brokers): reported, listed failed, the
        # running flow untouched
        write_config(s["config"], primary, dr, {**s["base"], "dr->primary.replication.factor": "3"},
                     flows=(FLOW, BACK))
        failed = ctl(rep, "reload")
        assert failed.returncode == 1 and f"flow {BACK} did not start" in failed.stderr, failed.stdout + failed.stderr
        assert f"added {BACK}" in failed.stdout
        state = _state(rep, auth)
        assert state[BACK]["state"] == "failed" and "did not start" in state[BACK]["last_error"], state[BACK]
        assert state[FLOW]["query"] == query and state[FLOW]["state"] == "running"

        # reload 1: the flow added for real; the unchanged flow keeps its Spark query
        write_config(s["config"], primary, dr, s["base"], flows=(FLOW, BACK))
        reloaded = ctl(rep, "reload")
        assert reloaded.returncode == 0 and f"added {BACK}" in reloaded.stdout, reloaded.stdout + reloaded.stderr
        rep.wait_until(lambda: _ends(primary, f"dr.{s['back']}", 1) == 50, 90, what="the added flow's copy")
        assert _state(rep, auth)[FLOW]["query"] == query

        # reload 2 (SIGHUP): the new flow's filter changed
        write_config(s["config"], primary, dr, {**s["base"], "dr->primary.topics": f"{s['back']}|{s['extra']}"},
                     flows=(FLOW, BACK))
        rep.proc.send_signal(signal.SIGHUP)
        rep.wait_until(lambda: _ends(primary, f"dr.{s['extra']}", 1) == 30, 90, what="the changed filter's topic")
        assert _state(rep, auth)[FLOW]["query"] == query

        # an invalid file is refused with validate's FILE:LINE, and everything runs on
        good = s["config"].read_text()
        s["config"].write_text(good + "primary->dr.offset.lag.max = many\n")
        line = len(good.splitlines()) + 1
        refused = ctl(rep, "reload")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"{s['config']}:{line}" in refused.stderr and "offset.lag.max" in refused.stderr
        assert validate_says(s["config"], line) in refused.stderr
        assert set(_state(rep, auth)) == {FLOW, BACK} and _state(rep, auth)[FLOW]["query"] == query

        # reload 3: the flow removed stops cleanly
        write_config(s["config"], primary, dr, s["base"])
        reloaded = ctl(rep, "reload")
        assert reloaded.returncode == 0 and f"removed {BACK}" in reloaded.stdout, reloaded.stdout
        assert set(_state(rep, auth)) == {FLOW}
        assert _state(rep, auth)[FLOW]["query"] == query
        ok = True
    finally:
        sent = producer.stop()
        if not ok:
            rep.terminate()
        elif rep.running():
            rep.wait_until(lambda: _ends(dr, remote, 2) >= sent, 90, what="every record on the mirror")
            assert rep.terminate() == 0
    got = [m.value() for m in consume_all(dr, remote, timeout=60)]
    values = sorted(int(v) for v in got)
    assert len(values) == len(set(values)) == sent, (
        f"{sent} sent, {len(values)} on the mirror, {len(values) - len(set(values))} twice")
    back = [m.value() for m in consume_all(primary, f"dr.{s['back']}", timeout=30)]
    # on failure, how each stop of the added flow said it would resume
    assert sorted(back) == sorted(f"r{i}".encode() for i in range(50)), "\n".join(
        ln for ln in rep.log().splitlines() if f"flow {BACK}" in ln)[-4000:]
    assert "reload by SIGHUP" in rep.log() and "reload by ops refused" in rep.log()


def _monitored(status: dict, expected: str) -> dict | None:
    flow = next((f for f in status["flows"] if f["name"] == FLOW), None)
    return flow if flow is not None and flow["status"] == expected else None


def validate_says(path, line: int) -> str:
    """The FILE:LINE part of what ``sparkmirror validate`` prints for the same file."""
    out = run_cli("validate", str(path))
    assert out.returncode == 2
    first = next(ln for ln in out.stderr.splitlines() if f":{line}" in ln)
    return first.split(" (")[0].strip()[:60]
