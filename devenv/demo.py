"""``sparkmirror demo``: the whole product on one machine, stopped by Ctrl-C.

Starts the two dev clusters (unless ``sparkmirror dev up`` already runs them), a
sample producer writing orders and payments on ``primary`` and a consumer group
``billing`` reading them there, the replicator (Spark ``local[*]``) and the monitor,
as child processes; prints where to look; and on Ctrl-C / SIGTERM (or after
``--duration``) stops every process it started, leaving nothing behind.
"""

from __future__ import annotations

import json
import logging
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from devenv import clusters
from sparkmirror import artifacts
from sparkmirror.signals import StopSignals

log = logging.getLogger("sparkmirror.demo")

CONFIG = Path(__file__).with_name("demo-mm2.properties")
TOPICS = {"orders": 6, "payments": 3}


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    new = [NewTopic(t, n, 1) for t, n in TOPICS.items() if t not in existing]
    for fut in admin.create_topics(new).values() if new else []:
        fut.result(30)


def _sample_producer(bootstrap: str, stop: threading.Event, rate: float) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    n = 0
    while not stop.is_set():
        start = time.monotonic()
        for _ in range(max(1, int(rate / 10))):
            n += 1
            order = {"order_id": n, "customer": f"c{random.randint(1, 500)}", "amount": round(random.uniform(1, 500), 2)}
            p.produce("orders", key=order["customer"].encode(), value=json.dumps(order).encode(),
                      headers=[("source", b"sparkmirror-demo"), ("schema", b"order-v1")])
            if n % 3 == 0:
                p.produce("payments", key=str(n).encode(), value=json.dumps({"order_id": n, "paid": True}).encode())
        p.poll(0)
        stop.wait(max(0.0, 0.1 - (time.monotonic() - start)))
    p.flush(10)


def _sample_consumer(bootstrap: str, stop: threading.Event) -> None:
    """Group `billing` reads orders on primary slowly, so its checkpoints move."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest",
                  "enable.auto.commit": True, "auto.commit.interval.ms": 1000})
    c.subscribe(["orders"])
    while not stop.is_set():
        c.consume(num_messages=50, timeout=0.5)
        stop.wait(0.5)
    c.close()


def run(duration: float | None = None, listen: str = "127.0.0.1:9464", rate: float = 200.0) -> int:
    stop = threading.Event()

    StopSignals(stop).install()
    work = artifacts.cache_dir() / "demo"
    work.mkdir(parents=True, exist_ok=True)
    started_clusters = []
    children: list[tuple[str, subprocess.Popen]] = []
    threads: list[threading.Thread] = []
    try:
        for name in clusters.DEV_CLUSTERS:
            c = clusters.dev_cluster(name)
            if c.is_running():
                log.info("cluster %s already running at %s (left running on exit)", name, c.bootstrap)
            else:
                # In a session of their own: a terminal's Ctrl-C reaches the demo's whole process
                # group, and the clusters must outlive the replicator's clean stop (it waits for the
                # target to acknowledge its last records); the demo stops them after it.
                c.start(detach=True)
                started_clusters.append(c)
                log.info("cluster %s up at %s", name, c.bootstrap)
        primary = clusters.dev_cluster("primary").bootstrap
        _create_topics(primary)
        for target, args in ((_sample_producer, (primary, stop, rate)), (_sample_consumer, (primary, stop))):
            t = threading.Thread(target=target, args=args, daemon=True)
            t.start()
            threads.append(t)
        cli = [sys.executable, "-m", "sparkmirror_cli.main"]
        with open(work / "replicator.log", "ab") as rlog:
            children.append(("replicator", subprocess.Popen(
                [*cli, "replicate", str(CONFIG), "--checkpoint-dir", str(work / "checkpoints")],
                stdout=rlog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)))
        if _monitor_available():
            with open(work / "monitor.log", "ab") as mlog:
                children.append(("monitor", subprocess.Popen(
                    [*cli, "monitor", str(CONFIG), "--listen", listen],
                    stdout=mlog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)))
        _print_banner(work, listen, primary)
        deadline = time.monotonic() + duration if duration else None
        while not stop.wait(1.0):
            for name, proc in children:
                if proc.poll() is not None:
                    log.error("%s exited with code %s; see %s", name, proc.returncode, work / f"{name}.log")
                    stop.set()
            if deadline and time.monotonic() > deadline:
                stop.set()
        return 0 if all(p.poll() in (None, 0) for _, p in children) else 1
    finally:
        stop.set()
        for name, proc in children:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in children:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for t in threads:
            t.join(15)
        for c in started_clusters:
            c.stop()
        log.info("demo stopped; logs in %s", work)


def _monitor_available() -> bool:
    try:
        import monitor.command  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def _print_banner(work: Path, listen: str, primary: str) -> None:
    dr = clusters.dev_cluster("dr").bootstrap
    lines = [
        "",
        "sparkmirror demo is running — Ctrl-C stops everything.",
        f"  source cluster   primary  {primary}   topics: orders, payments (sample producer, group 'billing')",
        f"  target cluster   dr       {dr}   mirror topics: primary.orders, primary.payments",
        f"  replicator log   {work / 'replicator.log'}",
    ]
    if _monitor_available():
        lines += [
            f"  status page      http://{listen}/",
            f"  Prometheus       http://{listen}/metrics    JSON: http://{listen}/api/status",
            f"  monitor log      {work / 'monitor.log'}",
        ]
    lines += [
        "  try:",
        f"    sparkmirror inspect {CONFIG} --cluster dr --topic primary.heartbeats",
        f"    sparkmirror translate {CONFIG} --source primary --target dr --group billing",
        "",
    ]
    print("\n".join(lines), flush=True)
