"""The status page at ``/``: what someone on call looks at first, readable without Grafana.

It is rendered on the server from the /api/status document (``monitor.exporters.api``,
the contract of this page), so it reads without JavaScript. A small inline script
fetches ``?fragment=1`` (the same HTML without the page around it) every
``REFRESH_SECONDS`` and swaps it in; when that fails, the page says since when
the monitor is unreachable and keeps the last figures.

The HTML is Jinja2 templates in ``templates/`` (package data): ``page.html.j2``
around ``fragment.html.j2``, both built from the macros of ``parts.html.j2``.
This module keeps the words and the geometry (durations, sentences, the
coordinates of the SVG lines), the templates the markup. Every string of the
status (cluster, flow, topic and group names, reasons, errors) is user data:
the environment escapes every ``{{ }}`` of an HTML template by itself
(autoescape, with ``html.escape``'s entities), so no template has to remember
to, and an undefined name is an error (StrictUndefined), never an empty cell.

Self-contained because monitors run where there is no internet: inline CSS, inline
SVG sparklines, no fonts, images or scripts from elsewhere. The inline style and
script (``page.css.j2``, ``refresh.js.j2``) are rendered once at import into
``STYLE`` and ``SCRIPT``; the Content-Security-Policy allows exactly that text (by
hash) and requests to this server, so even a name that escaped escaping could not
run code. The status document carries no client settings, so no bootstrap
credentials can reach the page.

The charts (lag in records and in seconds, throughput) are drawn from the
monitor's own history (``monitor.history``, also served as ``/api/history``),
which the monitor records at every evaluation whether or not a browser is
watching: a page opened or reloaded later shows the hours before it. The long
view is Grafana's.
"""

from __future__ import annotations

import base64
import hashlib
import html
import time

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, pass_eval_context, select_autoescape
from markupsafe import Markup

from monitor.history import History, HistoryPoint
from sparkmirror.metrics import STATUS_CODES

REFRESH_SECONDS = 3
SPARK_WIDTH, SPARK_HEIGHT = 260, 44
CHART_WIDTH, CHART_HEIGHT = 380, 120
#: Line colours of the history charts, used nowhere else on the page (a screenshot test looks for them).
CHART_COLOURS = {"lag-seconds": "#8250df", "throughput": "#0e8a9c"}


# --- history ------------------------------------------------------------------------
#: Where build_app puts the monitor's History (monitor.history) for this page.
HISTORY = web.AppKey("history", History)


def history_of(request: web.Request) -> History | None:
    return request.app.get(HISTORY)


# --- formatting -------------------------------------------------------------------
def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = max(0.0, float(seconds))
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min" + (f" {int(s % 60)} s" if int(s % 60) else "")
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def count(value: int | float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def clock(epoch: float | None) -> str:
    return "—" if epoch is None else time.strftime("%H:%M:%S %Z", time.localtime(epoch))


# --- sparkline and charts: the geometry (the templates draw it) -------------------
def sparkline_shape(points: list[HistoryPoint], flow: str) -> dict:
    """Records lag over the history as an SVG polyline; ``title`` None when there is no point yet."""
    values = [(p.at, p.lag_records) for p in points if p.lag_records is not None]
    w, h, pad = SPARK_WIDTH, SPARK_HEIGHT, 3
    label = f"lag of {flow} in records"
    shape = {"w": w, "h": h, "base": h - pad, "label": label, "title": None}
    if not values:
        return shape
    t0, t1 = values[0][0], values[-1][0]
    top = max(v for _, v in values) or 1
    span = (t1 - t0) or 1.0

    def xy(at: float, v: int) -> tuple[float, float]:
        x = pad + (at - t0) / span * (w - 2 * pad) if t1 > t0 else w - pad
        return round(x, 1), round(h - pad - v / top * (h - 2 * pad), 1)

    coords = [xy(at, v) for at, v in values]
    if len(coords) == 1:
        coords = [(pad, coords[0][1]), coords[0]]
    line = " ".join(f"{x},{y}" for x, y in coords)
    shape.update(
        line=line, area=f"{coords[0][0]},{h - pad} {line} {coords[-1][0]},{h - pad}",
        last_x=coords[-1][0], last_y=coords[-1][1],
        title=(f"{label}: now {count(values[-1][1])}, peak {count(top)} over the last "
               f"{duration(t1 - t0)} ({len(values)} samples)"))
    return shape


def chart_shape(points: list[HistoryPoint], field: str, title: str, unit: str, cls: str) -> dict:
    """One field of the history as a line chart: time across, 0 to the peak up, one vertex per
    point, one polyline per run of known values (unknown values leave a gap); ``label`` None
    when no value is known yet."""
    w, h, left, right, top, bottom = CHART_WIDTH, CHART_HEIGHT, 44, 8, 10, 18
    values = [(p.at, getattr(p, field)) for p in points]
    known = [(at, v) for at, v in values if v is not None]
    shape = {"cls": cls, "w": w, "h": h, "left": left, "top": top, "bottom_y": h - bottom, "right_x": w - right,
             "mid_x": (left + w - right) // 2, "mid_y": h // 2, "points": len(known), "title": title, "label": None}
    if not known:
        return shape
    t0, t1 = values[0][0], values[-1][0]
    span = (t1 - t0) or 1.0
    peak = max(v for _, v in known) or 1.0

    def xy(at: float, v: float) -> str:
        x = left + (at - t0) / span * (w - left - right) if t1 > t0 else w - right
        return f"{x:.1f},{h - bottom - v / peak * (h - top - bottom):.1f}"

    runs, run = [], []
    for at, v in values:
        if v is None:
            if run:
                runs.append(run)
            run = []
        else:
            run.append(xy(at, v))
    if run:
        runs.append(run)
    last_x, last_y = runs[-1][-1].split(",")
    shape.update(
        runs=[" ".join(r) for r in runs], last_x=last_x, last_y=last_y, peak=_amount(peak, unit, True),
        span=duration(t1 - t0),
        label=(f"{title}: now {_amount(known[-1][1], unit)}, peak {_amount(peak, unit)} over the last "
               f"{duration(t1 - t0)} ({len(known)} points)"))
    return shape


def _amount(value: float, unit: str, short: bool = False) -> str:
    """A chart's value: a duration for seconds, else a number (one decimal below 10) with its unit."""
    if unit == "s":
        return duration(value)
    number = f"{value:,.0f}" if value >= 10 or value == 0 else f"{value:,.1f}"
    return number if short else f"{number} {unit}"


def history_points(history: History | None, flow: str) -> list[HistoryPoint]:
    return history.points(flow) if history is not None else []


def history_span(points: list[HistoryPoint]) -> str:
    """What the sparkline covers: its time span and peak."""
    values = [p.lag_records for p in points if p.lag_records is not None]
    span = f"last {duration(points[-1].at - points[0].at)}" if len(points) > 1 else "since now"
    return span + (f" · peak {count(max(values))}" if values else "")


def rate_text(points: list[HistoryPoint]) -> str:
    """Records/s copied between the two newest points of the history."""
    rate = points[-1].throughput if points else None
    return "—" if rate is None else f"{rate:,.1f}"


# --- words ------------------------------------------------------------------------
def heartbeat_text(hb: dict) -> tuple[str, str, bool]:
    """(main text, detail, late?) of a flow's heartbeat."""
    if not hb.get("expected"):
        return "not expected", "no cluster pair emits heartbeats into the source", False
    timeout = hb.get("timeout_seconds")
    if hb.get("age_seconds") is None:
        return "none seen yet", f"timeout {duration(timeout)}", bool(hb.get("stopped"))
    latency = hb["latency"].get("last_seconds")
    detail = f"timeout {duration(timeout)}"
    if latency is not None:
        detail += f" · latency {duration(latency)}"
    arrived = hb.get("arrival_age_seconds")
    late = hb.get("stopped") or (timeout is not None and arrived is not None and arrived > timeout)
    return f"{duration(hb['age_seconds'])} ago", detail, bool(late)


def eta_text(partition: dict) -> str:
    """A partition's time to catch up (monitor.catchup), short."""
    state = partition.get("catchup_state")
    if state == "caught-up":
        return "now"
    if state == "not-catching-up":
        return "not gaining"
    if state in ("catching-up", "keeping-up"):
        return duration(partition.get("catchup_eta_seconds"))
    return "—"


def unwell_partitions(flow: dict) -> int:
    return sum(n for s, n in flow.get("partitions_by_status", {}).items() if s != "OK")


def by_status(flow: dict) -> str:
    """Partitions per status, ``3 OK, 1 WARN``."""
    return ", ".join(f"{n} {s}" for s, n in flow.get("partitions_by_status", {}).items() if n)


def bar_peak(rows: list[dict]) -> float:
    return max(p["lag_records"] or 0 for p in rows) or 1


def bar_width(lag_records: int | None, peak: float) -> int:
    return max(1, round(64 * (lag_records or 0) / peak))


def newest_checkpoint(group: dict) -> str:
    ages = [p["age_seconds"] for p in group.get("partitions", []) if p.get("age_seconds") is not None]
    return f"{duration(min(ages))} ago" if ages else "none yet"


def retention_text(retention: dict) -> tuple[str, str, int]:
    """(value, detail, partitions low) of the least retention headroom of a flow."""
    low = retention.get("low_partitions") or 0
    if retention.get("unlimited"):
        return "unlimited", "no source topic deletes by age", low
    if retention.get("headroom_seconds") is None:
        return "—", "retention settings or oldest record not read yet", low
    detail = f"{low} partitions low" if low else "before retention deletes unreplicated records"
    return duration(retention["headroom_seconds"]), detail, low


def rpo_text(rpo: dict | None) -> tuple[str, str, str]:
    """(value, detail, value class) of a flow's recovery-point objective: the budget left, the objective
    and the lag percentiles over 5 minutes and an hour (monitor.rpo)."""
    if not rpo:
        return "—", "not evaluated yet", ""
    lag = rpo.get("lag_percentiles") or {}

    def pct(window: str) -> str:
        w = lag.get(window) or {}
        if w.get("p50_seconds") is None:
            return f"{window}: lag unknown"
        return f"{window}: p50 {duration(w['p50_seconds'])}, p99 {duration(w['p99_seconds'])}"

    spread = f"lag {pct('5m')}; {pct('1h')}"
    objective = rpo.get("objective")
    if objective is None:
        return "no objective", spread, ""
    left = rpo.get("budget_left_ratio")
    value = f"{left * 100:.1f}% budget left" if left is not None else "—"
    cls = "late" if left is not None and left < 0.25 or not rpo.get("meeting_objective") else ""
    return value, f"{objective['text']} (since the monitor started); {spread}", cls


def audit_text(audit: dict | None) -> tuple[str, str, str]:
    """(value, detail, value class) of the flow's audit (monitor.audit): what was found missing or
    altered, and the one line of what was verified."""
    if not audit:
        return "—", "not audited (--audit off, or the flow emits no offset-syncs)", ""
    from monitor.audit.component import summary  # the one wording, shared with the audit's own use

    c = audit["counts"]
    bad = c["missing"] + c["mismatched"]
    duplicates_are_errors = audit["exactly_once"] and c["duplicated"]
    if bad:
        value = f"{count(c['missing'])} missing · {count(c['mismatched'])} altered"
    elif audit["rounds"] == 0:
        value = "starting"
    else:
        value = "whole"
    coverage = (audit.get("coverage") or {}).get("loss")
    detail = summary(audit) + (f" · loss coverage {coverage * 100:.1f}%" if coverage is not None else "")
    return value, detail, "late" if bad or duplicates_are_errors else ""


def catchup_text(pace: dict) -> tuple[str, str, str]:
    """(value, detail, value class) of the time to catch up at the observed net rate (monitor.catchup)."""
    state = pace.get("state")
    if state == "caught-up":
        return "caught up", "nothing to copy", ""
    if state == "not-catching-up":
        return ("not catching up",
                f"copy {pace['copy_rate']:,.1f} rec/s, source adds {pace['source_rate']:,.1f} rec/s", "late")
    if state in ("catching-up", "keeping-up"):
        detail = (f"net {pace['net_rate']:,.1f} rec/s (copy {pace['copy_rate']:,.1f}, "
                  f"source {pace['source_rate']:,.1f})")
        if state == "keeping-up":
            detail = f"keeping up · {detail}"
        return duration(pace.get("eta_seconds")), detail, ""
    return "—", "rate not measured yet", ""


def group_verdict(group: dict) -> dict:
    """Whether a consumer group can fail over now, in words: ``kind`` (none, ready, not-ready) and
    what a consumer switching now would re-read (``reread``) or lose (``lose``); when it cannot,
    ``why`` and what switching ``anyway`` would do."""
    fo = group.get("failover")
    if fo is None:
        return {"kind": "none"}
    records, seconds, skipped = fo.get("reread_records") or 0, fo.get("reread_seconds"), fo.get("skipped_records") or 0
    span = f" ({duration(seconds)} of records)" if records and seconds else ""
    reread = f"re-reads {count(records)} records already consumed{span}" if records else "re-reads nothing"
    lose = (f"skips {count(skipped)} records it has not consumed yet: lost for the group" if skipped
            else "loses nothing")
    if fo.get("ready"):
        return {"kind": "ready", "reread": reread, "lose": lose}
    if skipped:
        anyway = f"A consumer switching anyway {lose}."
    elif set(fo.get("blockers") or ()) <= {"reread-records", "reread-seconds"}:
        anyway = f"A consumer switching anyway {reread} and loses nothing."
    else:
        anyway = ("Where it has no usable checkpoint, a consumer switching anyway starts where its "
                  "auto.offset.reset says: re-reading the whole partition (earliest) or losing what it "
                  "has not consumed (latest).")
    return {"kind": "not-ready", "why": str(fo.get("summary", "")).removeprefix("cannot fail over: "),
            "anyway": anyway}


# --- templates --------------------------------------------------------------------
@pass_eval_context
def _shown(eval_ctx, value):
    """Every ``{{ }}`` of the templates: None shows as nothing; in HTML, text is escaped with
    ``html.escape`` (the same entities as before templates, so ``&quot;`` rather than markupsafe's
    ``&#34;``) and markup made by the templates themselves (macros, STYLE, SCRIPT) passes as is."""
    if value is None:
        return ""
    if eval_ctx.autoescape and not hasattr(value, "__html__"):
        return Markup(html.escape(str(value), quote=True))
    return value


TEMPLATES = Environment(
    loader=PackageLoader("monitor.exporters", "templates"),
    # HTML is escaped; the inline style and script (no user data) are not HTML.
    autoescape=select_autoescape(enabled_extensions=("html.j2",), disabled_extensions=("css.j2", "js.j2"),
                                 default=True),
    undefined=StrictUndefined, finalize=_shown, trim_blocks=True, lstrip_blocks=True)
TEMPLATES.globals.update(
    status_codes=STATUS_CODES, duration=duration, count=count, clock=clock, history_points=history_points,
    history_span=history_span, rate_text=rate_text, sparkline_shape=sparkline_shape, chart_shape=chart_shape,
    heartbeat_text=heartbeat_text, eta_text=eta_text, unwell_partitions=unwell_partitions, by_status=by_status,
    bar_peak=bar_peak, bar_width=bar_width, newest_checkpoint=newest_checkpoint, retention_text=retention_text,
    catchup_text=catchup_text, rpo_text=rpo_text, audit_text=audit_text, group_verdict=group_verdict,
    refresh_seconds=REFRESH_SECONDS)
_PARTS = TEMPLATES.get_template("parts.html.j2").module


def top_partitions_table(flow: dict) -> str:
    """A flow card's table of its most lagging partitions, alone."""
    return str(_PARTS.top_partitions_table(flow))


def catchup_figure(pace: dict) -> str:
    """A flow card's time-to-catch-up tile, alone."""
    return str(_PARTS.catchup_figure(pace))


def fragment(status: dict, history: History | None) -> str:
    """Everything that changes: the part the script swaps in."""
    return TEMPLATES.get_template("fragment.html.j2").render(status=status, history=history)


# --- the page ---------------------------------------------------------------------
#: The inline style and script, rendered once: the Content-Security-Policy allows exactly this text (by hash).
STYLE = TEMPLATES.get_template("page.css.j2").render(chart_colours=CHART_COLOURS)
SCRIPT = TEMPLATES.get_template("refresh.js.j2").render()


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = (f"default-src 'none'; script-src {_sha256(SCRIPT)}; style-src {_sha256(STYLE)}; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer"}


def page(status: dict, history: History | None) -> str:
    return TEMPLATES.get_template("page.html.j2").render(status=status, history=history, style=Markup(STYLE),
                                                       script=Markup(SCRIPT))


async def handle(request: web.Request, status: dict) -> web.Response:
    """``/``: the page; ``/?fragment=1``: its changing part, for the page's own refresh."""
    history = history_of(request)
    if request.query.get("fragment"):
        return web.Response(text=fragment(status, history), content_type="text/html", headers=HEADERS)
    return web.Response(text=page(status, history), content_type="text/html", headers=HEADERS)
