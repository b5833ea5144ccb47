"""The status page at ``/`` in a real browser, over a real monitor watching real replication.

A real replicator (``sparkmirror replicate``) copies a unique topic between the
session clusters while a producer keeps writing to it (most to partition 0, least
to 2) and consumer groups commit on the source, so the replicator checkpoints
them; a real ``sparkmirror monitor`` process watches the flow. One group keeps
consuming and committing: its checkpoints arrive every second while the monitor
reads committed offsets every 6 s, and no failover summary may say it would
skip records (a checkpoint newer than the committed offset read is progress). The test keeps the
page open (fetches it every second, as the page's own refresh would) while a
burst is produced, then lets headless Chromium load the page, run its script for
a few seconds of virtual time and dump the DOM, and checks what a person would
see: the flow and its status badge, the heartbeat age, the lag sparkline with
the burst's peak, the top lagging partitions, the group's checkpoints and the
clusters. The screenshot is kept as test-artifacts/status-page.png (and the DOM
as status-page.html).

The monitor runs with ``--heartbeat-timeout 10``: on this 2-core machine a Spark
micro-batch can take a few seconds, longer than the default 2 s timeout.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
import urllib.request

import pytest

from monitor.exporters import page
from monitor.history import History
from sparkmirror.model.records import Checkpoint
from tests.support.chromium import Chromium, require_chromium
from tests.support.kafka import create_topic
from tests.support.monitor import (CommittingGroup, RunningMonitor, commit_group, false_skips, flow_of, produce_raw,
                                   replication_config)
from tests.support.prometheus import MonitorProcess
from tests.support.replicator import Replicator

PARTITIONS = 3
WEIGHTS = {0: 3, 1: 2, 2: 1}  # share of the traffic per partition: partition 0 lags most
BURST = 1500  # records per weight unit: 4,500, 3,000 and 1,500


def seconds_of(text: str) -> float:
    """``"850 ms"``, ``"4.2 s"``, ``"3 min 5 s"``, ``"2 h 1 min"`` -> seconds (the page's duration format)."""
    units = {"ms": 0.001, "s": 1, "min": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"([\d.]+) (ms|s|min|h|d)\b", text)
    assert parts, text
    return sum(float(n) * units[u] for n, u in parts)


def text_of(dom: str) -> str:
    """The visible text of a DOM dump, whitespace collapsed (scripts and styles dropped)."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()


class SteadyTraffic:
    """Writes ``per_second`` records a second to ``topic``, split over partitions by WEIGHTS."""

    def __init__(self, bootstrap: str, topic: str, per_second: int = 30) -> None:
        self.bootstrap, self.topic, self.per_second = bootstrap, topic, per_second
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-traffic", daemon=True)
        self.errors: list[BaseException] = []

    def _run(self) -> None:
        units = [p for p, w in WEIGHTS.items() for _ in range(w)]
        chunk = max(1, self.per_second // 5)
        i = 0
        while not self._stop.is_set():
            try:
                now_ms = int(time.time() * 1000)
                produce_raw(self.bootstrap, self.topic, [
                    {"key": b"s%d" % (i + n), "value": b"steady", "partition": units[(i + n) % len(units)],
                     "timestamp": now_ms} for n in range(chunk)])
            except BaseException as exc:  # reported by stop()
                self.errors.append(exc)
                return
            i += chunk
            self._stop.wait(0.2)

    def __enter__(self) -> "SteadyTraffic":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self.errors, self.errors


def shown_lag(fragment: str, flow: str) -> int:
    """Records lag of ``flow`` as its card on the page shows it."""
    card = fragment[fragment.index(f'data-flow="{html.escape(flow)}"'):]
    return int(re.search(r'<span class="label">lag</span><span class="value">([\d,]+) records', card)
               .group(1).replace(",", ""))


@pytest.mark.kafka
@pytest.mark.spark
def test_status_page_in_chromium_over_live_replication(kafka_clusters, tmp_path, unique, artifacts_dir):
    browser = Chromium(require_chromium())  # before any Spark start: a missing browser fails at once
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic, group = f"orders-{unique}", f"billing-{unique}"
    flow = f"p{unique}->d{unique}"
    create_topic(primary, topic, PARTITIONS)
    now_ms = int(time.time() * 1000)
    produce_raw(primary, topic, [{"key": b"k%d" % i, "value": b"warm-up", "partition": i % PARTITIONS,
                                  "timestamp": now_ms} for i in range(30)])
    commit_group(primary, group, topic, {p: 5 for p in range(PARTITIONS)})
    config = replication_config(tmp_path / "mm2.properties", primary, dr, unique)
    # Micro-batches keep the burst's lag on the page for the seconds the browser needs to render
    # it; the real-time path copies the burst within a second, too soon to catch the table.
    rep = Replicator(config, tmp_path / "checkpoints", tmp_path / "replicator.log",
                     extra_args=["--data-path", "micro-batch"]).start()
    monitor = MonitorProcess(tmp_path / "monitor", config, "--interval", "1", "--groups-interval", "6",
                             "--metadata-interval", "2", "--heartbeat-timeout", "10",
                             "--history-step", "1", "--topics", topic)
    try:
        monitor.start()
        monitor.wait_for(lambda s: (f := flow_of(s, flow))["lag"]["records"] == 0
                         and f["heartbeat"]["age_seconds"] is not None and f["heartbeat"]["age_seconds"] < 5
                         and f["groups"], 180, "a caught-up flow with live heartbeats and the group's checkpoints")

        seen: list[int] = []
        skips: list[str] = []

        def view(seconds: float) -> None:
            """Someone has the page open: it is fetched every second, as its own script would."""
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                with urllib.request.urlopen(monitor.url + "/?fragment=1", timeout=10) as resp:
                    seen.append(shown_lag(resp.read().decode(), flow))
                skips.extend(false_skips(monitor.status(), flow))
                time.sleep(1)

        with SteadyTraffic(primary, topic), CommittingGroup(primary, f"live-{unique}", topic) as live:
            monitor.wait_for(lambda s: any(g["group"] == live.group and g["partitions"]
                                           and all(p["checkpoint_upstream"] is not None for p in g["partitions"])
                                           for g in flow_of(s, flow)["groups"]), 60,
                             "checkpoints of the committing group")
            view(4)
            burst_ms = int(time.time() * 1000)
            produce_raw(primary, topic, [{"key": b"b%d" % i, "value": b"x" * 200, "partition": p, "timestamp": burst_ms}
                                         for p, w in WEIGHTS.items() for i in range(w * BURST)])
            view(12)
            before = monitor.wait_for(lambda s: flow_of(s, flow)["top_partitions"] and s, 30, "a lagging partition")
            dom = browser.dump_dom(monitor.url + "/", virtual_time_ms=7000)
            after = monitor.status()
            shot = browser.screenshot(monitor.url + "/", artifacts_dir / "status-page.png", 1280, 900,
                                      virtual_time_ms=4000)
        (artifacts_dir / "status-page.html").write_text(dom)
        assert live.commits > 10
    finally:
        rep.terminate()
        monitor.stop()

    assert not skips, skips  # the live group kept committing: no failover would skip anything
    text = text_of(dom)
    # the page's script ran and swapped in fresh figures (the CSP let exactly it run)
    live = re.search(r'<span id="live"[^>]*data-refreshes="(\d+)"', dom)
    assert live and int(live.group(1)) >= 1, f"the auto-refresh never ran: {dom[:3000]}"
    assert "live · refreshed" in text and "unreachable since" not in text
    # the flow, its coloured status badge, what the badge says, and that it is the monitor's truth
    section = re.search(r'<section class="flow s-(\w+)" data-flow="([^"]+)">(.*?)</section>', dom, re.S)
    assert section, dom[:3000]
    assert html.unescape(section.group(2)) == flow
    card = section.group(3)
    badge = re.search(r'<span class="badge s-(\w+)">(\w+)</span>', card)
    assert badge and badge.group(1) == badge.group(2).lower() == section.group(1)
    truths = [flow_of(before, flow), flow_of(after, flow)]
    assert badge.group(2) in {t["status"] for t in truths}
    shown_up = re.search(r"replicator (up|down)", text_of(card)).group(1)
    assert shown_up in {"up" if t["replicator_up"] else "down" for t in truths}
    assert f"{flow} {badge.group(2)}" in text
    assert re.search(r"overall (OK|WARN|STALL|STOP|ERR)", text)
    # the heartbeat age, as a person reads it
    heartbeat = re.search(r"heartbeat (.+?) ago timeout 10 s", text_of(card))
    assert heartbeat, text_of(card)
    # no older than the age the monitor reported just before, plus the time since (+1 s of rounding)
    assert seconds_of(heartbeat.group(1)) <= (truths[0]["heartbeat"]["age_seconds"]
                                              + after["generated_at"] - before["generated_at"] + 1)
    # the flow's recovery-point objective (the default), its budget left and the lag percentiles
    rpo = re.search(r"recovery point (\d+\.\d)% budget left lag <= 30s for 99\.9% of 30d \(since the monitor "
                    r"started\); lag 5m: (p50 .+?|lag unknown);", text_of(card))
    assert rpo and 0 <= float(rpo.group(1)) <= 100, text_of(card)
    # the lag sparkline: an inline SVG line over the samples the page saw
    spark = re.search(r'<svg class="spark"[^>]*aria-label="([^"]+)"[^>]*>(.*?)</svg>', card, re.S)
    assert spark, card[:3000]
    label = html.unescape(spark.group(1))
    assert "<polyline" in spark.group(2)
    assert int(re.search(r"\((\d+) samples\)", label).group(1)) >= 8
    peak = int(re.search(r"peak ([\d,]+)", label).group(1).replace(",", ""))
    assert peak >= max(seen) > 0, (peak, seen)  # every lag the page showed is on the line
    # the top lagging partitions: the topic's partitions, most behind first
    table = re.search(r'<table class="top-partitions">.*?<tbody>(.*?)</tbody>', card, re.S)
    assert table, card[:3000]
    rows = re.findall(r'<tr><td class="name">([^<]*)</td><td class="num">(\d+)</td>.*?<td class="num">([\d,]+)</td>'
                      r'<td class="num">([^<]+)</td>', table.group(1), re.S)
    assert rows, table.group(1)
    assert {html.unescape(t) for t, _, _, _ in rows} == {topic}
    assert {int(p) for _, p, _, _ in rows} <= set(range(PARTITIONS))
    assert all(int(n.replace(",", "")) > 0 for _, _, n, _ in rows)
    behind = [seconds_of(b) for _, _, _, b in rows]  # most behind first (records break ties)
    assert behind == sorted(behind, reverse=True), rows
    # checkpoints of the group, and the clusters
    assert re.search(rf"{re.escape(group)} (OK|WARN) [\d.]+ (ms|s|min)", text), text
    # whether the group can fail over now, in words, and how long before retention deletes unreplicated records
    assert re.search(r"can fail over now: (nothing to re-read|would re-read [\d,]+ records)|cannot fail over: ",
                     text_of(card)), text_of(card)
    assert re.search(r"retention headroom (\d+ d \d+ h|unlimited)", text_of(card)), text_of(card)
    assert f"p{unique} reachable" in text and f"d{unique} reachable" in text
    # self-contained: nothing is loaded from elsewhere
    assert not re.search(r'(src|href)="(https?:)?//', dom)
    assert shot.stat().st_size > 20_000
    print(f"\nstatus page: {flow} {badge.group(2)}, {heartbeat.group(0)}, sparkline peak {peak}, "
          f"{len(rows)} top partitions; screenshot {shot}")


EVIL = '<script>alert("x")</script>&<img src=x onerror=alert(1)>'


def _status_with_names(name: str) -> dict:
    """A /api/status document whose every user-chosen name is ``name``-based."""
    now = time.time()
    return {
        "schema": 1, "generated_at": now, "status": "WARN",
        "monitor": {"version": "test", "started_at": now - 60, "granularity": "partition",
                    "evaluation_seconds": 0.01},
        "clusters": [{"alias": f"a{name}", "up": False, "error": f"e{name}", "last_ok_at": None, "errors_total": 1}],
        "flows": [{
            "name": f"f{name}", "source": "a", "target": "b", "status": "WARN", "reasons": [f"r{name}"],
            "replicator_up": True,
            "heartbeat": {"topic": "t", "expected": True, "timeout_seconds": 2.0, "age_seconds": 0.5,
                          "last_timestamp_ms": int(now * 1000), "received_total": 1, "stopped": False,
                          "latency": {"count": 1, "sum_seconds": 0.01, "last_seconds": 0.01, "buckets": []}},
            "offset_sync": {"age_seconds": 1.0, "received_total": 1}, "lag": {"records": 5, "seconds": 2.0},
            "replicated_records_total": 10, "source_records_total": 15, "lag_probes_total": 1,
            "data_lost_records_total": 0, "partitions_by_status": {"OK": 0, "WARN": 1, "STALL": 0, "STOP": 0, "ERR": 0},
            "topics": [], "partitions": [], "partitions_omitted": 0, "collector_seconds": {},
            "groups": [{"group": f"g{name}", "status": "OK", "reasons": [], "lag_records": 0, "age_seconds": 0.0,
                        "missing": 0, "partitions": [{"age_seconds": 3.0}]}],
            "top_partitions": [{"topic": f"t{name}", "partition": 0, "status": "WARN", "lag_records": 5,
                                "lag_seconds": 2.0}],
        }],
    }


def test_page_escapes_every_name_and_renders_before_the_first_evaluation():
    history = History()
    rendered = page.page(_status_with_names(EVIL), history)
    # every user-chosen string is shown as text: no element, attribute or script comes from it
    assert "<script>alert" not in rendered and "<img" not in rendered
    assert rendered.count("<script>") == 1  # the page's own refresh script
    escaped = html.escape(EVIL, quote=True)
    for prefix in ("a", "e", "f", "r", "g", "t"):
        assert prefix + escaped in rendered, prefix
    assert f'data-flow="f{escaped}"' in rendered
    assert shown_lag(rendered, f"f{EVIL}") == 5
    # the script and style the Content-Security-Policy allows are exactly the ones on the page
    assert f"<script>{page.SCRIPT}</script>" in rendered and f"<style>{page.STYLE}</style>" in rendered
    # before the first evaluation: a page that says so, no flow
    waiting = page.page({"schema": 1, "status": None, "message": "no evaluation yet", "flows": []}, history)
    assert "no evaluation yet" in waiting and "<section" not in waiting
    # without a history (a page module used alone): the charts say there is no data yet
    assert "lag of f" + escaped + " in seconds: no data yet" in page.page(_status_with_names(EVIL), None)


def chart_points(dom: str, cls: str) -> tuple[int, int, str]:
    """(data-points, polyline vertices, aria-label) of the history chart ``cls`` of the first flow card."""
    svg = re.search(rf'<svg class="chart {cls}"[^>]*data-points="(\d+)"[^>]*aria-label="([^"]*)"[^>]*>(.*?)</svg>',
                    dom, re.S)
    assert svg, dom[:3000]
    vertices = sum(len(p.split()) for p in re.findall(r'<polyline points="([^"]*)"', svg.group(3)))
    return int(svg.group(1)), vertices, html.unescape(svg.group(2))


@pytest.mark.kafka
def test_history_charts_exist_without_a_browser_survive_a_reload_and_groups_are_in_words(
        kafka_clusters, tmp_path, unique, artifacts_dir):
    """A backlog copied in steps while no browser watches; then the page shows the lag-seconds and
    throughput charts from the monitor's own history, a reload shows the same history (and more),
    and each consumer group says in words whether it can fail over now."""
    from tests.support.monitor import Flow
    from tests.support.png import count_colour

    browser = Chromium(require_chromium())
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms] * 2_000)
    f.copy(0, 10, now_ms)
    f.sync(0, 0, 0)
    f.sync(0, 9, 9)  # the ready group's committed 10 translates to 10: 5 past its checkpoint
    ready, blocked = f"billing-{unique}", f"audit-{unique}"
    commit_group(f.primary, ready, f.topic, {0: 10})
    commit_group(f.primary, blocked, f.topic, {0: 4})
    cp = Checkpoint(ready, f.remote, 0, 5, 5)
    produce_raw(f.dr, f.checkpoints, [{"key": cp.encode_key(), "value": cp.encode_value()}])
    f.start_heartbeats()
    try:
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"], history_step=0.5) as mon:
            mon.wait_for(lambda s: s["flows"][0]["lag"]["records"] and len(s["flows"][0]["groups"]) == 2, 30,
                         "the backlog and both groups")
            # nobody has the page open: only the monitor's own evaluations make the history
            for _ in range(12):
                f.produce_source(0, [int(time.time() * 1000)] * 15)
                f.copy(0, 150, now_ms)
                time.sleep(0.3)
            before = json.loads(mon.get("/api/history")[1])["flows"][f.name]
            assert len(before) >= 8 and sum(1 for p in before if p[3]) >= 5, before
            dom = browser.dump_dom(mon.url + "/", virtual_time_ms=500)
            shot = browser.screenshot(mon.url + "/", artifacts_dir / "status-page-history.png", 1280, 1100,
                                      virtual_time_ms=500)
            for _ in range(3):
                f.copy(0, 150, now_ms)
                time.sleep(0.5)
            reloaded = browser.dump_dom(mon.url + "/", virtual_time_ms=500)  # a fresh load: a reload
            after = json.loads(mon.get("/api/history")[1])["flows"][f.name]
        (artifacts_dir / "status-page-history.html").write_text(dom)
    finally:
        f.stop_heartbeats()

    lag_points, lag_vertices, lag_label = chart_points(dom, "lag-seconds")
    rate_points, rate_vertices, rate_label = chart_points(dom, "throughput")
    assert lag_points >= 8 and lag_vertices == lag_points, (lag_points, lag_vertices, lag_label)
    assert rate_points >= 7 and rate_vertices == rate_points, (rate_points, rate_vertices, rate_label)
    assert re.search(r"peak [\d,.]+ rec/s", rate_label) and "(%d points)" % lag_points in lag_label
    # the lines are drawn in their colours (used nowhere else on the page)
    for cls, colour in page.CHART_COLOURS.items():
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        assert count_colour(shot, rgb) > 40, (cls, colour)
    # a reload shows the same history, the oldest point still first, and what came since
    assert after[0][0] == before[0][0] and len(after) > len(before)
    again, again_vertices, _ = chart_points(reloaded, "lag-seconds")
    assert again >= lag_points + 1 and again_vertices == again
    # the groups, in words
    text = text_of(dom)
    dst = f"d{unique}"
    assert re.search(rf"{ready} can fail over to {dst} now: a consumer switching now re-reads 5 records "
                     rf"already consumed.* and loses nothing\.", text), text
    assert re.search(rf"{blocked} cannot fail over to {dst} now: .*no checkpoint", text), text
    assert "time to catch up" in text.lower()
    assert not re.search(r'(src|href)="(https?:)?//', dom)
    print(f"\nhistory charts: {lag_points} points of lag, {rate_points} of throughput; screenshot {shot}")
