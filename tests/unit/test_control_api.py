"""The control API's request rules (replicator.api), on a recording controller: methods, the JSON
content type, the transport rule beyond loopback, and the log line of every action."""

from __future__ import annotations

import base64
import io
import json
import logging

import pytest

from replicator import api


class Recorder:
    def __init__(self):
        self.calls = []
        self.paused = set()

    def flows_state(self):
        return [{"flow": "primary->dr", "state": "paused" if "primary->dr" in self.paused else "running"}]

    def pause(self, name, who):
        if name != "primary->dr":
            raise KeyError(name)
        self.calls.append(("pause", name, who))
        was = name in self.paused
        self.paused.add(name)
        return not was

    def resume(self, name, who):
        self.calls.append(("resume", name, who))
        return True

    def reload(self, who):
        self.calls.append(("reload", who))
        return {"ok": False, "error": "mm2.properties:3: bad"}


class Live:
    def __init__(self, auth, tls):
        self.auth, self.ssl_context = auth, tls


def _call(app, method, path, *, ctype="application/json", body=b"", user=None, host="127.0.0.1:9465"):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_TYPE": ctype,
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "REMOTE_ADDR": "127.0.0.1",
               "SERVER_PORT": "9465"}
    if host is not None:
        environ["HTTP_HOST"] = host
    if user:
        environ["HTTP_AUTHORIZATION"] = "Basic " + base64.b64encode(f"{user}:pw".encode()).decode()
    got = {}

    def start_response(status, headers):
        assert len(status) >= 4 and status[3] == " ", status  # "NNN Reason", as wsgiref insists
        got["status"], got["headers"] = status, dict(headers)

    data = b"".join(app(environ, start_response))
    assert got["headers"]["Content-Type"] == "application/json"
    return int(got["status"].split()[0]), json.loads(data)


def test_pause_needs_post_and_a_json_content_type(caplog):
    rec = Recorder()
    app = api.ControlApp(rec, "127.0.0.1", None)
    assert _call(app, "GET", "/api/flows/primary->dr/pause")[0] == 405
    # what a cross-site HTML form can send
    status, body = _call(app, "POST", "/api/flows/primary->dr/pause", ctype="application/x-www-form-urlencoded")
    assert status == 415 and "application/json" in body["error"]
    assert rec.calls == []
    with caplog.at_level(logging.INFO, logger="sparkmirror.control"):
        status, body = _call(app, "POST", "/api/flows/primary-%3Edr/pause")
    assert (status, body["result"]) == (200, "paused")
    assert rec.calls == [("pause", "primary->dr", "anonymous")]
    assert "control: anonymous from 127.0.0.1: pause primary->dr: 200 paused" in caplog.text
    assert _call(app, "POST", "/api/flows/primary->dr/pause")[1]["result"] == "already paused"
    assert _call(app, "POST", "/api/flows/nope->dr/pause")[0] == 404
    assert _call(app, "POST", "/api/flows/primary->dr/pause", body=b"[1]")[0] == 400


def test_flows_and_reload():
    rec = Recorder()
    app = api.ControlApp(rec, "::1", None)
    assert _call(app, "GET", "/api/flows") == (200, {"flows": [{"flow": "primary->dr", "state": "running"}]})
    status, body = _call(app, "POST", "/api/reload", body=b"{}")
    assert (status, body["error"]) == (400, "mm2.properties:3: bad")
    assert rec.calls == [("reload", "anonymous")]
    assert _call(app, "GET", "/api/nothing")[0] == 404


@pytest.mark.parametrize("host, live, allowed", [
    ("127.0.0.1", None, True), ("localhost", None, True), ("::1", None, True),
    ("0.0.0.0", None, False), ("10.1.2.3", Live(None, None), False),
    ("10.1.2.3", Live(object(), None), False), ("10.1.2.3", Live(object(), object()), True),
])
def test_beyond_loopback_only_with_basic_auth_over_tls(host, live, allowed):
    rec = Recorder()
    status, body = _call(api.ControlApp(rec, host, live), "POST", "/api/flows/primary->dr/pause")
    assert (status == 200) is allowed, body
    assert (rec.calls != []) is allowed
    if not allowed:
        assert status == 403 and host in body["error"]
    # reading the state is not refused: it changes nothing
    assert _call(api.ControlApp(rec, host, live), "GET", "/api/flows")[0] == 200


def test_metrics_and_api_share_the_port():
    def metrics(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"m"]

    app = api.dispatch(metrics, api.ControlApp(Recorder(), "127.0.0.1", None))
    status, _ = _call(app, "GET", "/api/flows")
    assert status == 200
    out = []
    assert app({"PATH_INFO": "/metrics", "REQUEST_METHOD": "GET"}, lambda s, h: out.append(s)) == [b"m"]


def test_without_users_a_claimed_name_is_never_logged_with_users_the_checked_one_is(caplog):
    rec = Recorder()
    with caplog.at_level(logging.INFO, logger="sparkmirror.control"):
        assert _call(api.ControlApp(rec, "127.0.0.1", None), "POST", "/api/flows/primary->dr/pause",
                     user="admin")[0] == 200
    assert rec.calls == [("pause", "primary->dr", "anonymous")]
    assert "admin" not in caplog.text and "control: anonymous from 127.0.0.1: pause" in caplog.text
    # with users configured, the credentials check in front of the app let only "ops" through
    rec.paused.clear()
    assert _call(api.ControlApp(rec, "10.1.2.3", Live(object(), object())), "POST",
                 "/api/flows/primary->dr/pause", user="ops")[0] == 200
    assert rec.calls[-1] == ("pause", "primary->dr", "ops")


@pytest.mark.parametrize("host, allowed", [
    ("127.0.0.1:9465", True), ("localhost:9465", True), ("[::1]:9465", True),
    ("evil.example:9465", False), ("127.0.0.1:80", False), ("127.0.0.1", False), (None, False),
    ("127.0.0.1:notaport", False),
])
def test_without_users_a_state_change_needs_a_loopback_host_header(host, allowed):
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 still says Host: evil.example."""
    rec = Recorder()
    status, body = _call(api.ControlApp(rec, "127.0.0.1", None), "POST", "/api/reload", host=host)
    assert (rec.calls != []) is allowed, body
    if not allowed:
        assert status == 403 and "DNS rebinding" in body["error"]
    assert _call(api.ControlApp(rec, "127.0.0.1", None), "GET", "/api/flows", host=host)[0] == 200
    # with users configured the credentials decide, whatever the Host
    rec2 = Recorder()
    _call(api.ControlApp(rec2, "127.0.0.1", Live(object(), None)), "POST", "/api/reload", host=host, user="ops")
    assert rec2.calls == [("reload", "ops")]


@pytest.mark.parametrize("http", [500, 503])
def test_a_reload_that_applied_with_failures_or_met_a_stop_answers_its_own_status(http):
    rec = Recorder()
    rec.reload = lambda who: {"ok": False, "error": "flow b->a did not start: down", "http": http}
    status, body = _call(api.ControlApp(rec, "127.0.0.1", None), "POST", "/api/reload")
    assert status == http and "http" not in body and body["error"].startswith("flow b->a")
