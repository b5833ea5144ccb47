"""The status page at ``/``: what someone on call looks at first, readable without Grafana.

It is rendered on the server from the /api/status document (``monitor.exporters.api``,
the contract of this page), so it reads without JavaScript. A small inline script
fetches ``?fragment=1`` (the same HTML without the page around it) every
``REFRESH_SECONDS`` and swaps it in; when that fails, the page says since when
the monitor is unreachable and keeps the last figures.

Self-contained because monitors run where there is no internet: inline CSS, inline
SVG sparklines, no fonts, images or scripts from elsewhere. The Content-Security-Policy
allows exactly the inline script and style below (by hash) and requests to this
server, so even a name that escaped escaping could not run code. Every string
of the status (cluster, flow, topic and group names, reasons, errors) is user
data and goes through ``html.escape``. The status document carries no client
settings, so no bootstrap credentials can reach the page.

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
def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


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


def badge(status: str | None, small: bool = False) -> str:
    known = status in STATUS_CODES
    cls = f"badge s-{status.lower()}" if known else "badge s-unknown"
    return f'<span class="{cls}{" small" if small else ""}">{esc(status if status else "…")}</span>'


def dot(up: bool | None) -> str:
    cls = {True: "up", False: "down"}.get(up, "unknown")
    return f'<span class="dot {cls}" aria-hidden="true"></span>'


# --- sparkline --------------------------------------------------------------------
def sparkline(points: list[HistoryPoint], flow: str) -> str:
    """Inline SVG of records lag over the history; the newest point is marked."""
    values = [(p.at, p.lag_records) for p in points if p.lag_records is not None]
    w, h, pad = SPARK_WIDTH, SPARK_HEIGHT, 3
    label = f"lag of {flow} in records"
    if not values:
        return (f'<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
                f'aria-label="{esc(label)}: no data yet"><line x1="0" y1="{h - pad}" x2="{w}" y2="{h - pad}" '
                f'class="base"/></svg>')
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
    area = f"{coords[0][0]},{h - pad} {line} {coords[-1][0]},{h - pad}"
    last_x, last_y = coords[-1]
    title = (f"{label}: now {count(values[-1][1])}, peak {count(top)} over the last "
             f"{duration(t1 - t0)} ({len(values)} samples)")
    return (f'<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="{esc(title)}"><title>{esc(title)}</title>'
            f'<line x1="0" y1="{h - pad}" x2="{w}" y2="{h - pad}" class="base"/>'
            f'<polygon points="{area}" class="area"/><polyline points="{line}" class="line"/>'
            f'<circle cx="{last_x}" cy="{last_y}" r="2.5" class="now"/></svg>')


def chart(points: list[HistoryPoint], field: str, title: str, unit: str, cls: str) -> str:
    """An SVG line chart of one field of the history: time across, 0 to the peak up, the peak and the
    time span labelled, one vertex per point (unknown values leave a gap)."""
    w, h, left, right, top, bottom = CHART_WIDTH, CHART_HEIGHT, 44, 8, 10, 18
    values = [(p.at, getattr(p, field)) for p in points]
    known = [(at, v) for at, v in values if v is not None]
    head = (f'<svg class="chart {cls}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'data-points="{len(known)}"')
    axis = (f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" class="axis"/>'
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" class="axis"/>')
    if not known:
        return (f'{head} aria-label="{esc(title)}: no data yet"><title>{esc(title)}: no data yet</title>{axis}'
                f'<text x="{(left + w - right) // 2}" y="{h // 2}" class="tick" text-anchor="middle">'
                f'no data yet</text></svg>')
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
    lines = "".join(f'<polyline points="{" ".join(r)}" class="line"/>' for r in runs)
    last = runs[-1][-1].split(",")
    label = (f"{title}: now {_amount(known[-1][1], unit)}, peak {_amount(peak, unit)} over the last "
             f"{duration(t1 - t0)} ({len(known)} points)")
    return (f'{head} aria-label="{esc(label)}"><title>{esc(label)}</title>{axis}'
            f'<text x="{left - 4}" y="{top + 8}" class="tick" text-anchor="end">{esc(_amount(peak, unit, True))}</text>'
            f'<text x="{left - 4}" y="{h - bottom}" class="tick" text-anchor="end">0</text>'
            f'<text x="{left}" y="{h - 4}" class="tick">{esc(duration(t1 - t0))} ago</text>'
            f'<text x="{w - right}" y="{h - 4}" class="tick" text-anchor="end">now</text>'
            f'{lines}<circle cx="{last[0]}" cy="{last[1]}" r="2.5" class="now"/></svg>')


def _amount(value: float, unit: str, short: bool = False) -> str:
    """A chart's value: a duration for seconds, else a number (one decimal below 10) with its unit."""
    if unit == "s":
        return duration(value)
    number = f"{value:,.0f}" if value >= 10 or value == 0 else f"{value:,.1f}"
    return number if short else f"{number} {unit}"


def throughput(points: list[HistoryPoint]) -> float | None:
    """Records/s copied between the two newest points of the history."""
    return points[-1].throughput if points else None


# --- sections ---------------------------------------------------------------------
def clusters_section(clusters: list[dict]) -> str:
    items = []
    for c in clusters:
        up = c.get("up")
        state = {True: "reachable", False: "unreachable"}.get(up, "not asked yet")
        error = f'<span class="err">{esc(c["error"][:200])}</span>' if up is False and c.get("error") else ""
        items.append(f'<li class="cluster">{dot(up)}<b>{esc(c["alias"])}</b> <span class="muted">{state}'
                     f'</span>{error}</li>')
    return f'<ul class="clusters" aria-label="clusters">{"".join(items)}</ul>'


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


def top_partitions_table(flow: dict) -> str:
    rows = flow.get("top_partitions") or []
    if not rows:
        unwell = sum(n for s, n in flow.get("partitions_by_status", {}).items() if s != "OK")
        note = "Every partition is caught up." if not unwell else \
            f"No partition with known lag; {unwell} not OK (see reasons)."
        return f'<p class="empty">{note}</p>'
    peak = max(p["lag_records"] or 0 for p in rows) or 1
    body = "".join(
        f'<tr><td class="name">{esc(p["topic"])}</td><td class="num">{esc(p["partition"])}</td>'
        f'<td>{badge(p["status"], small=True)}</td><td class="num">{count(p["lag_records"])}</td>'
        f'<td class="num">{duration(p["lag_seconds"])}</td><td class="num">{eta_text(p)}</td>'
        f'<td class="bar"><svg width="64" height="8" aria-hidden="true"><rect width="64" height="8" class="track"/>'
        f'<rect width="{max(1, round(64 * (p["lag_records"] or 0) / peak))}" height="8" class="fill"/></svg></td></tr>'
        for p in rows)
    return ('<table class="top-partitions"><thead><tr><th>topic</th><th class="num">partition</th><th>status</th>'
            '<th class="num" title="source records not yet on the target">records</th>'
            '<th class="num" title="age of the oldest source record not yet on the target">behind</th>'
            '<th class="num" title="time to catch up at the observed net rate">caught up in</th>'
            '<th></th></tr></thead>'
            f'<tbody>{body}</tbody></table>')


def groups_table(flow: dict) -> str:
    groups = flow.get("groups") or []
    if not groups:
        return '<p class="empty">No consumer group with checkpoints on this flow.</p>'
    rows = []
    for g in groups:
        ages = [p["age_seconds"] for p in g.get("partitions", []) if p.get("age_seconds") is not None]
        newest = f"{duration(min(ages))} ago" if ages else "none yet"
        behind = duration(g["due_seconds"]) if g.get("due_seconds") else "current"
        failover = g.get("failover")
        if failover is None:
            verdict = '<td class="failover muted">no committed offsets on the source</td>'
        else:
            ready = "ready" if failover["ready"] else "not-ready"
            verdict = f'<td class="failover {ready}">{esc(failover["summary"])}</td>'
        rows.append(f'<tr><td class="name">{esc(g["group"])}</td><td>{badge(g["status"], small=True)}</td>'
                    f'<td class="num">{newest}</td><td class="num">{behind}</td>'
                    f'<td class="num">{count(g.get("lag_records"))}</td>'
                    f'<td class="num">{count(g.get("missing"))}</td>{verdict}</tr>')
    return ('<table class="groups"><thead><tr><th>group</th><th>status</th><th class="num">checkpointed</th>'
            '<th class="num" title="how long a newer checkpoint has been due (the group passed an offset-sync)">behind for</th>'
            '<th class="num" title="records a consumer failing over now would read again">re-read</th>'
            '<th class="num" title="partitions with a committed offset but no checkpoint">missing</th>'
            '<th title="what a consumer of the group failing over to the target now would do">failover</th>'
            '</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def retention_figure(retention: dict) -> str:
    """Least retention headroom of the flow: time until retention may delete unreplicated records."""
    low = retention.get("low_partitions") or 0
    if retention.get("unlimited"):
        value, detail = "unlimited", "no source topic deletes by age"
    elif retention.get("headroom_seconds") is None:
        value, detail = "—", "retention settings or oldest record not read yet"
    else:
        value = duration(retention["headroom_seconds"])
        detail = f"{low} partitions low" if low else "before retention deletes unreplicated records"
    return figure("retention headroom", value, detail, "late" if low else "", "lost" if low else "")


def catchup_figure(pace: dict) -> str:
    """Time to catch up at the observed net rate (monitor.catchup), and the rates behind it."""
    state = pace.get("state")
    if state == "caught-up":
        value, detail, cls = "caught up", "nothing to copy", ""
    elif state == "not-catching-up":
        value, cls = "not catching up", "late"
        detail = f"copy {pace['copy_rate']:,.1f} rec/s, source adds {pace['source_rate']:,.1f} rec/s"
    elif state in ("catching-up", "keeping-up"):
        value, cls = duration(pace.get("eta_seconds")), ""
        detail = (f"net {pace['net_rate']:,.1f} rec/s (copy {pace['copy_rate']:,.1f}, "
                  f"source {pace['source_rate']:,.1f})")
        if state == "keeping-up":
            detail = f"keeping up · {detail}"
    else:
        value, detail, cls = "—", "rate not measured yet", ""
    return figure("time to catch up", esc(value), esc(detail), cls)


def figure(label: str, value: str, detail: str = "", value_class: str = "", detail_class: str = "") -> str:
    """One tile of a flow card; ``label``, ``value`` and ``detail`` are already HTML."""
    value_class, detail_class = f" {value_class}".rstrip(), f" {detail_class}".rstrip()
    return (f'<div class="figure"><span class="label">{label}</span>'
            f'<span class="value{value_class}">{value}</span>'
            f'<span class="detail{detail_class}">{detail}</span></div>')


def groups_in_words(flow: dict) -> str:
    """Each consumer group in one sentence: can it fail over to the target now, what it would re-read or lose."""
    groups = flow.get("groups") or []
    if not groups:
        return ""
    target = esc(flow.get("target", "the target"))
    items = []
    for g in groups:
        name, fo = f'<b class="name">{esc(g["group"])}</b>', g.get("failover")
        if fo is None:
            items.append(f'<li class="group-verdict none">{name} has committed no offsets on the source: there is '
                         f'nothing to fail over.</li>')
            continue
        records, seconds, skipped = fo.get("reread_records") or 0, fo.get("reread_seconds"), fo.get("skipped_records") or 0
        span = f" ({duration(seconds)} of records)" if records and seconds else ""
        reread = f"re-reads {count(records)} records already consumed{span}" if records else "re-reads nothing"
        lose = (f"skips {count(skipped)} records it has not consumed yet: lost for the group" if skipped
                else "loses nothing")
        if fo.get("ready"):
            items.append(f'<li class="group-verdict ready">{name} can fail over to {target} now: a consumer '
                         f'switching now {reread} and {lose}.</li>')
            continue
        why = esc(str(fo.get("summary", "")).removeprefix("cannot fail over: "))
        if skipped:
            anyway = f"A consumer switching anyway {lose}."
        elif set(fo.get("blockers") or ()) <= {"reread-records", "reread-seconds"}:
            anyway = f"A consumer switching anyway {reread} and loses nothing."
        else:
            anyway = ("Where it has no usable checkpoint, a consumer switching anyway starts where its "
                      "auto.offset.reset says: re-reading the whole partition (earliest) or losing what it "
                      "has not consumed (latest).")
        items.append(f'<li class="group-verdict not-ready">{name} cannot fail over to {target} now: {why}. '
                     f'{anyway}</li>')
    return f'<ul class="group-verdicts">{"".join(items)}</ul>'


def charts(flow: dict, history: list[HistoryPoint]) -> str:
    """Lag in seconds and throughput over the monitor's history of the flow."""
    name = flow["name"]
    return ('<div class="charts">'
            f'<div class="chart-box"><h3>Lag (seconds)</h3>'
            f'{chart(history, "lag_seconds", f"lag of {name} in seconds", "s", "lag-seconds")}</div>'
            f'<div class="chart-box"><h3>Throughput (records/s copied)</h3>'
            f'{chart(history, "throughput", f"throughput of {name}", "rec/s", "throughput")}</div></div>')


def flow_card(flow: dict, history: list[HistoryPoint]) -> str:
    hb_main, hb_detail, hb_late = heartbeat_text(flow["heartbeat"])
    values = [p.lag_records for p in history if p.lag_records is not None]
    span = f"last {duration(history[-1].at - history[0].at)}" if len(history) > 1 else "since now"
    peak = f" · peak {count(max(values))}" if values else ""
    reasons = "".join(f"<li>{esc(r)}</li>" for r in flow.get("reasons", []))
    by_status = ", ".join(f"{n} {esc(s)}" for s, n in flow.get("partitions_by_status", {}).items() if n)
    rate = throughput(history)
    lost = flow.get("data_lost_records_total") or 0
    lag = flow["lag"]
    figures = [
        figure("heartbeat", hb_main, hb_detail, "late" if hb_late else ""),
        figure("lag", f"{count(lag['records'])} records",
               "caught up" if lag["records"] == 0 else f"{duration(lag['seconds'])} behind"),
        f'<div class="figure"><span class="label">lag (records), {span}{peak}</span>'
        f'{sparkline(history, flow["name"])}</div>',
        catchup_figure(flow.get("catchup") or {}),
        figure("throughput", f"{'—' if rate is None else f'{rate:,.1f}'} rec/s",
               f"{count(flow.get('replicated_records_total'))} replicated since start"),
        figure("partitions", by_status or "none", f"{count(lost)} records lost to retention",
               detail_class="lost" if lost else ""),
        retention_figure(flow.get("retention") or {}),
    ]
    return f"""
<section class="flow s-{esc(str(flow['status']).lower())}" data-flow="{esc(flow['name'])}">
  <header><h2>{esc(flow['name'])}</h2>{badge(flow['status'])}
    <span class="muted">replicator {"up" if flow.get("replicator_up") else "down"}</span></header>
  {f'<ul class="reasons">{reasons}</ul>' if reasons else ''}
  <div class="figures">{"".join(figures)}</div>
  {charts(flow, history)}
  <div class="tables"><div><h3>Top lagging partitions</h3>{top_partitions_table(flow)}</div>
    <div><h3>Consumer groups: can they fail over now?</h3>{groups_in_words(flow)}{groups_table(flow)}</div></div>
</section>"""


def fragment(status: dict, history: History | None) -> str:
    """Everything that changes: the part the script swaps in."""
    overall = status.get("status")
    if overall is None:
        return (f'<div id="overview" data-status="">{badge(None)} '
                f'<span class="muted">{esc(status.get("message", "no evaluation yet"))}</span></div>')
    flows = "".join(flow_card(f, history.points(f["name"]) if history is not None else [])
                    for f in status.get("flows", []))
    version = esc(status.get("monitor", {}).get("version", ""))
    return f"""
<div id="overview" data-status="{esc(overall)}"><span class="muted">overall</span> {badge(overall)}
  <span class="muted">evaluated {clock(status.get('generated_at'))} · monitor {version} · up since
  {clock(status.get('monitor', {}).get('started_at'))}</span></div>
{clusters_section(status.get('clusters', []))}
{flows or '<p class="empty">No flow is enabled.</p>'}"""


# --- the page ---------------------------------------------------------------------
STYLE = """
:root{--ok:#1a7f37;--warn:#9a6700;--stall:#bc4c00;--stop:#cf222e;--err:#82071e;--unknown:#6e7781;
--ink:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
background:var(--bg)}
.top{display:flex;align-items:center;gap:16px;padding:10px 24px;background:#24292f;color:#fff}
.top h1{font-size:18px;margin:0;font-weight:600}.top a{color:#c9d1d9;margin-left:12px;font-size:13px}
.top .links{margin-left:auto}
#live{font-size:12px;color:#c9d1d9}#live.stale{color:#ffb3b3;font-weight:600}
main{max-width:1240px;margin:0 auto;padding:14px 24px 32px}
#overview{display:flex;align-items:center;gap:8px;margin-bottom:6px}
.muted{color:var(--muted)}
.badge{display:inline-block;min-width:52px;text-align:center;padding:2px 10px;border-radius:12px;color:#fff;
font-weight:700;font-size:13px;letter-spacing:.04em}
.badge.small{min-width:40px;padding:0 7px;font-size:11px}
.s-ok.badge{background:var(--ok)}.s-warn.badge{background:var(--warn)}.s-stall.badge{background:var(--stall)}
.s-stop.badge{background:var(--stop)}.s-err.badge{background:var(--err)}.s-unknown.badge{background:var(--unknown)}
.clusters{list-style:none;display:flex;flex-wrap:wrap;gap:8px 20px;padding:0;margin:6px 0 14px}
.cluster .err{color:var(--stop);margin-left:6px}
.dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px;background:var(--unknown)}
.dot.up{background:var(--ok)}.dot.down{background:var(--stop)}
.flow{background:#fff;border:1px solid var(--line);border-left:6px solid var(--unknown);border-radius:8px;
padding:12px 18px 14px;margin-bottom:16px}
.flow.s-ok{border-left-color:var(--ok)}.flow.s-warn{border-left-color:var(--warn)}
.flow.s-stall{border-left-color:var(--stall)}.flow.s-stop{border-left-color:var(--stop)}
.flow.s-err{border-left-color:var(--err)}
.flow header{display:flex;align-items:center;gap:12px}
.flow h2{font-size:18px;margin:0;font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
.flow h3{font-size:13px;margin:14px 0 4px;color:var(--muted);text-transform:uppercase;letter-spacing:.05em}
.reasons{margin:8px 0 0;padding-left:20px;color:var(--stop)}
.figures{display:flex;flex-wrap:wrap;gap:10px;margin-top:10px}
.figure{display:flex;flex-direction:column;padding:8px 12px;border:1px solid var(--line);border-radius:6px;
min-width:150px;background:#fcfcfd}
.figure .label{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted)}
.figure .value{font-size:18px;font-weight:600;font-variant-numeric:tabular-nums}
.figure .detail{font-size:12px;color:var(--muted)}.figure .detail.lost{color:var(--err);font-weight:600}
.spark .base{stroke:var(--line)}.spark .area{fill:#0969da22}.spark .line{fill:none;stroke:#0969da;stroke-width:1.6}
.spark .now{fill:#0969da}
.charts{display:flex;flex-wrap:wrap;gap:10px 24px;margin-top:8px}
.chart .axis{stroke:var(--line)}.chart .tick{font-size:10px;fill:var(--muted)}
.chart .line{fill:none;stroke-width:1.8;stroke-linejoin:round}
""" + "".join(f".chart.{cls} .line{{stroke:{colour}}}.chart.{cls} .now{{fill:{colour}}}\n"
              for cls, colour in CHART_COLOURS.items()) + """.group-verdicts{list-style:none;padding:0;margin:2px 0 8px}.group-verdict{margin:3px 0;font-size:13px}
.group-verdict.ready::before{content:"\\2713  ";color:var(--ok);font-weight:700}
.group-verdict.not-ready::before{content:"\\2717  ";color:var(--stop);font-weight:700}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th{font-size:12px;text-align:left;color:var(--muted);font-weight:600;border-bottom:1px solid var(--line);
padding:4px 8px}
td{padding:4px 8px;border-bottom:1px solid #eaeef2;vertical-align:middle}
td.num,th.num{text-align:right}th{white-space:nowrap}
td.name{font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:break-word;word-break:break-word}
.bar .track{fill:#eaeef2}.bar .fill{fill:#0969da}
.empty{color:var(--muted);margin:4px 0}
.tables{display:grid;grid-template-columns:minmax(0,1.15fr) minmax(0,1fr);gap:4px 28px}
@media (max-width:900px){.tables{grid-template-columns:minmax(0,1fr)}}
.figure .value.late{color:var(--stop)}
td.failover{font-size:12px}td.failover.not-ready{color:var(--stop)}td.failover.ready{color:var(--ok)}
"""

SCRIPT = """
(function () {
  var every = %d * 1000, live = document.getElementById('live'), content = document.getElementById('content');
  var refreshes = 0, failingSince = null;
  function stamp(d) { return d.toTimeString().slice(0, 8); }
  function tick() {
    fetch('?fragment=1', {cache: 'no-store'}).then(function (r) {
      if (!r.ok) { throw new Error('HTTP ' + r.status); }
      return r.text();
    }).then(function (text) {
      content.innerHTML = text;
      refreshes += 1; failingSince = null;
      var overview = document.getElementById('overview'), status = overview && overview.dataset.status;
      document.title = (status ? status + ' · ' : '') + 'sparkmirror monitor';
      live.className = 'live';
      live.dataset.refreshes = String(refreshes);
      live.textContent = 'live · refreshed ' + stamp(new Date()) + ' · every ' + (every / 1000) + ' s';
    }).catch(function (e) {
      failingSince = failingSince || new Date();
      live.className = 'stale';
      live.textContent = 'monitor unreachable since ' + stamp(failingSince) + ' (' + e.message +
        '): the figures below are from before';
    });
  }
  setInterval(tick, every);
})();
""" % REFRESH_SECONDS


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = (f"default-src 'none'; script-src {_sha256(SCRIPT)}; style-src {_sha256(STYLE)}; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer"}


def page(status: dict, history: History | None) -> str:
    overall = status.get("status")
    title = f"{esc(overall)} · sparkmirror monitor" if overall else "sparkmirror monitor"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{title}</title><style>{STYLE}</style></head>
<body><div class="top"><h1>sparkmirror monitor</h1>
<span id="live" data-refreshes="0">auto-refresh every {REFRESH_SECONDS} s</span>
<span class="links"><a href="api/status">/api/status</a><a href="api/history">/api/history</a><a href="metrics">/metrics</a><a href="healthz">/healthz</a>
</span></div>
<main id="content">{fragment(status, history)}</main>
<script>{SCRIPT}</script></body></html>"""


async def handle(request: web.Request, status: dict) -> web.Response:
    """``/``: the page; ``/?fragment=1``: its changing part, for the page's own refresh."""
    history = history_of(request)
    if request.query.get("fragment"):
        return web.Response(text=fragment(status, history), content_type="text/html", headers=HEADERS)
    return web.Response(text=page(status, history), content_type="text/html", headers=HEADERS)
