"""The status page's templates: user data escaped everywhere, the CSP hashes the inline text served."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from types import SimpleNamespace

import pytest
from jinja2 import UndefinedError

from monitor.exporters import page
from monitor.history import History

HOSTILE = "<script>alert(1)</script>\"'&<img src=x onerror=alert(2)>"
ESCAPED = html.escape(HOSTILE, quote=True)


def hostile_status(name: str = HOSTILE) -> dict:
    """A status document whose every user-chosen string (names, reasons, errors, summaries) holds ``name``."""
    return {
        "schema": 1, "generated_at": 1_800_000_000.0, "status": "WARN",
        "monitor": {"version": f"v{name}", "started_at": 1_799_999_000.0},
        "clusters": [{"alias": f"a{name}", "up": False, "error": f"e{name}"}, {"alias": f"b{name}", "up": True}],
        "flows": [{
            "name": f"f{name}", "target": f"b{name}", "status": "WARN", "reasons": [f"r{name}"],
            "replicator_up": True,
            "heartbeat": {"expected": True, "timeout_seconds": 2.0, "age_seconds": 0.5, "stopped": False,
                          "latency": {"last_seconds": 0.01}},
            "lag": {"records": 5, "seconds": 2.0}, "replicated_records_total": 10, "data_lost_records_total": 0,
            "partitions_by_status": {"OK": 0, f"s{name}": 1},
            "retention": {"headroom_seconds": 60.0}, "catchup": {"state": "caught-up"},
            "groups": [
                {"group": f"g{name}", "status": f"x{name}", "lag_records": 0, "missing": 0,
                 "partitions": [{"age_seconds": 3.0}],
                 "failover": {"ready": False, "summary": f"cannot fail over: m{name}", "blockers": ["no-checkpoint"]}},
                {"group": f"h{name}", "status": "OK", "partitions": [],
                 "failover": {"ready": True, "summary": f"n{name}", "reread_records": 0}}],
            "top_partitions": [{"topic": f"t{name}", "partition": f"p{name}", "status": f"y{name}",
                                "lag_records": 5, "lag_seconds": 2.0, "catchup_state": "catching-up",
                                "catchup_eta_seconds": 4.0}],
        }],
    }


def history_of(flow: str) -> History:
    """A history with a few points of ``flow``: the sparkline and charts carry its name in their labels."""
    history = History(1.0)
    for i in range(4):
        history.record(SimpleNamespace(generated_at=1_800_000_000.0 + i, flows=[SimpleNamespace(
            name=flow, lag_seconds=2.0 + i, lag_records=5 * i, replicated_total=10 * i, source_total=12 * i)]))
    return history


@pytest.mark.parametrize("with_history", [True, False])
def test_every_user_string_is_escaped_on_the_page_and_in_the_fragment(with_history):
    history = history_of(f"f{HOSTILE}") if with_history else None
    status = hostile_status()
    whole, part = page.page(status, history), page.fragment(status, history)
    for rendered in (whole, part):
        assert "<script>alert" not in rendered and "<img" not in rendered
        # text and attributes alike: cluster, error, flow, reason, target, statuses, group, failover summary, topic,
        # partition, monitor version
        for prefix in "aefrbsxmgnhtpyv":
            assert prefix + ESCAPED in rendered, prefix
        assert f'data-flow="f{ESCAPED}"' in rendered
    assert whole.count("<script>") == 1 and "<script>" not in part  # the page's own refresh script only
    assert "<title>WARN · sparkmirror monitor</title>" in whole
    if with_history:  # the SVG labels name the flow too
        assert f'aria-label="lag of f{ESCAPED} in records: now 15' in part
        assert f"<title>lag of f{ESCAPED} in seconds: now 5.0 s" in part


def test_an_evaluation_yet_to_come_and_a_hostile_message():
    status = {"schema": 1, "status": None, "message": f"waiting {HOSTILE}", "flows": []}
    rendered = page.page(status, None)
    assert f"waiting {ESCAPED}" in rendered and "<section" not in rendered
    assert "<title>sparkmirror monitor</title>" in rendered and "<script>alert" not in rendered


def test_the_fragment_is_the_page_content_and_the_csp_allows_exactly_the_inline_text_served():
    status, history = hostile_status("orders"), history_of("forders")
    rendered = page.page(status, history)
    assert f'<main id="content">{page.fragment(status, history)}</main>' in rendered
    (style,) = re.findall(r"<style>(.*?)</style>", rendered, re.S)
    (script,) = re.findall(r"<script>(.*?)</script>", rendered, re.S)
    csp = dict(d.strip().split(" ", 1) for d in page.HEADERS["Content-Security-Policy"].split(";"))

    def sha256(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert csp["script-src"] == sha256(script) and csp["style-src"] == sha256(style)
    assert csp["default-src"] == "'none'" and csp["connect-src"] == "'self'"
    assert f"every = {page.REFRESH_SECONDS} * 1000" in script
    for cls, colour in page.CHART_COLOURS.items():
        assert f".chart.{cls} .line{{stroke:{colour}}}" in style


def _lag_figure(rendered: str) -> str:
    (fig,) = re.findall(r'<div class="figure"><span class="label">lag</span>.*?</div>', rendered, re.S)
    return re.sub(r"<[^>]+>", " ", fig)


def test_the_lag_figure_says_at_least_and_never_caught_up_while_a_partitions_lag_is_unknown():
    status = hostile_status("x")
    flow = status["flows"][0]
    flow["lag"] = {"records": 0, "seconds": 0.0, "unknown_partitions": 0}
    assert "caught up" in _lag_figure(page.fragment(status, None))
    flow["lag"] = {"records": 0, "seconds": 0.0, "unknown_partitions": 1}
    text = _lag_figure(page.fragment(status, None))
    assert "caught up" not in text and "≥ 0 records" in text and "1 partition of unknown lag" in text
    flow["lag"] = {"records": 1234, "seconds": 75.0, "unknown_partitions": 3}
    text = _lag_figure(page.fragment(status, None))
    assert "≥ 1,234 records" in text and "≥ 1 min" in text and "3 partitions of unknown lag" in text
    flow["lag"] = {"records": None, "seconds": None, "unknown_partitions": 2}
    text = _lag_figure(page.fragment(status, None))
    assert "unknown" in text and "2 partitions of unknown lag" in text


def test_a_missing_field_is_an_error_not_an_empty_cell():
    status = hostile_status("x")
    del status["flows"][0]["top_partitions"][0]["topic"]
    with pytest.raises(UndefinedError):
        page.fragment(status, None)


def test_every_template_ships_in_the_wheel():
    import tomllib
    from fnmatch import fnmatch
    from pathlib import Path

    root = Path(page.__file__).parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["monitor"]
    templates = [p.relative_to(root / "monitor").as_posix() for p in (root / "monitor/exporters/templates").iterdir()]
    assert templates and all(any(fnmatch(t, g) for g in globs) for t in templates), (templates, globs)


def test_the_audit_figure_names_what_is_missing_and_lists_the_findings_escaped():
    from monitor.audit.findings import Finding, Tally
    from monitor.exporters.api import audit_document

    tally = Tally()
    tally.add(Finding("missing", f"t{HOSTILE}", 3, 1041, None, 1, f"d{HOSTILE}", 1_800_000_000.0))
    snapshot = {"counts": tally.totals(), "topics": {t: dict(c) for t, c in tally.counts.items()},
                "coverage": {"loss": 1.0, "content": 0.5}, "verified_last_hour": 12_345, "findings":
                [f.to_json() for f in tally.findings], "partitions": 4, "unchecked_records": 0, "pending_windows": 0,
                "exactly_once": False, "source_isolation": "read_committed", "rounds": 3,
                "read_bytes": {"source": 1, "target": 1}}
    status = hostile_status("x")
    status["flows"][0]["audit"] = audit_document(snapshot)
    text = page.fragment(status, None)
    assert "1 missing · 0 altered" in text and "verified 12 k records in the last hour" in text
    assert f"t{ESCAPED}[3] source offset 1041, target offset —" in text and f"d{ESCAPED}" in text
    assert HOSTILE not in text
    status["flows"][0]["audit"] = None
    assert "not audited" in page.fragment(status, None)
