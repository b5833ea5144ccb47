"""A long run under steady traffic, looking for slow leaks (not part of CI).

    python -m bench.soak run  --minutes 60 [--rate 300] [--seed 1]   # writes bench/soak-samples.jsonl
    python -m bench.soak plot [bench/soak-samples.jsonl]             # -> bench/soak.png

``run`` starts two fresh single-node KRaft clusters, one ``sparkmirror replicate``
(checkpoints and group offset sync on) and one ``sparkmirror monitor``, and keeps a
producer writing records with unique ids to a 6-partition topic, and a consumer
group reading it, for the whole run. At a random moment of the middle 80 % of the
run, each component is restarted once: the replicator (SIGTERM, then the same
``--checkpoint-dir``), the monitor (SIGTERM), the source broker and the target
broker (stopped for 15 s). Every minute it samples, per component, the resident
memory, open file descriptors and threads: the driver (the Python process), the
Spark JVM, the PySpark workers (summed), the group-request children (``python -m
sparkmirror.adminproc``, of the replicator and the monitor, summed) and the monitor.
For the Spark JVM it also records, through ``jcmd``, the heap still live after a
full collection (``GC.run`` once a minute, so heap growth up to ``-Xmx`` that a
collection would give back is not taken for a leak) and its threads counted by
name (digits folded), so a growing count says which pool grows. Each sample is
one JSON line, written at once, so an interrupted run keeps what it measured. At
the end the target is read back and every id counted (lost, duplicated).

Needs the bench extra (psutil, matplotlib): ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.kafka import NumberedProducer

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "soak-samples.jsonl"
PNG = HERE / "soak.png"
TOPIC = "soak"
PARTITIONS = 6
COMPONENTS = ("driver", "spark_jvm", "python_workers", "admin_children", "monitor")


def free_port() -> int:
    from devenv.kafka import free_port as fp

    return fp()


class Traffic(NumberedProducer):
    """Unique ids at ``rate``/s to the source topic; a consumer group reading and committing it."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        super().__init__(bootstrap, TOPIC, PARTITIONS, rate, ticks=10, keyed=False, pad=b"x" * 200,
                         conf={"log_level": 0, "message.timeout.ms": 600000}, flush_timeout=120.0,
                         join_timeout=150.0)
        self.group: Consumer | None = None

    def run(self) -> None:
        self.group = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-app",
                               "auto.offset.reset": "earliest", "enable.auto.commit": True,
                               "auto.commit.interval.ms": 2000, "log_level": 0})
        self.group.subscribe([TOPIC])
        try:
            super().run()
        finally:
            self.group.close()

    def tick(self) -> None:
        self.group.poll(0)


class Proc:
    """A ``python -m sparkmirror_cli.main ...`` child with its output in a log file."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args, self.log = args, log
        self.p: subprocess.Popen | None = None

    def start(self) -> "Proc":
        out = open(self.log, "ab")
        self.p = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", *self.args], stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                  env=dict(os.environ, SPARKMIRROR_DRIVER_MEMORY="1g"))
        return self

    def stop(self) -> int | None:
        if self.p is None:
            return None
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            return self.p.wait(30)
        finally:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)  # leftovers of the group (the Spark JVM, in a session of
                # its own, exits by itself when the driver's pipe to it closes)
            except (ProcessLookupError, PermissionError):
                pass


def measure(procs: list[psutil.Process]) -> dict:
    rss = fds = threads = 0
    n = 0
    for p in procs:
        try:
            with p.oneshot():
                rss += p.memory_info().rss
                fds += p.num_fds()
                threads += p.num_threads()
            n += 1
        except psutil.Error:
            pass
    return {"rss_mb": round(rss / 2**20, 1), "fds": fds, "threads": threads, "processes": n}


def components(rep: Proc, mon: Proc) -> dict[str, list[psutil.Process]]:
    out: dict[str, list[psutil.Process]] = {c: [] for c in COMPONENTS}
    for proc, own in ((rep, "driver"), (mon, "monitor")):
        try:
            parent = psutil.Process(proc.p.pid)
            out[own] = [parent]
            children = parent.children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            try:
                cmd = " ".join(child.cmdline())
                name = child.name()
            except psutil.Error:
                continue
            if "sparkmirror.adminproc" in cmd:
                out["admin_children"].append(child)
            elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
                out["python_workers"].append(child)
            elif name == "java":
                out["spark_jvm"].append(child)
    return out


def _jcmd(pid: int, *command: str) -> str:
    try:
        return subprocess.run(["jcmd", str(pid), *command], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def jvm_detail(pid: int) -> dict:
    """The JVM's live heap after a full collection and its threads by name.

    Thread names have their digits folded (``Executor task launch worker for task 12``
    and ``... task 13`` count together), so a pool that grows shows as one growing count."""
    _jcmd(pid, "GC.run")
    heap = _jcmd(pid, "GC.heap_info")
    live_mb = None
    m = re.search(r"used (\d+)K", heap)
    if m:
        live_mb = round(int(m.group(1)) / 1024, 1)
    names: dict[str, int] = {}
    for line in _jcmd(pid, "Thread.print").splitlines():
        if line.startswith('"'):
            name = re.sub(r"\d+", "N", line[1:line.find('"', 1)])
            names[name] = names.get(name, 0) + 1
    return {"heap_live_mb": live_mb, "thread_names": dict(sorted(names.items(), key=lambda kv: -kv[1]))}


def run(args) -> int:
    from devenv.kafka import KafkaCluster

    base = Path(tempfile.mkdtemp(prefix="sparkmirror-soak-"))
    clusters = {name: KafkaCluster(name=name, port=free_port(), controller_port=free_port(), data_dir=base / name)
                for name in ("primary", "dr")}
    for c in clusters.values():
        c.start(timeout=600)
    primary, dr = clusters["primary"], clusters["dr"]
    admin = AdminClient({"bootstrap.servers": primary.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    cfg = base / "mm2.properties"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in {
        "clusters": "primary, dr", "primary.bootstrap.servers": primary.bootstrap,
        "dr.bootstrap.servers": dr.bootstrap, "primary->dr.enabled": "true", "primary->dr.topics": TOPIC,
        "replication.factor": "1", "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
        "sync.group.offsets.enabled": "true", "emit.checkpoints.interval.seconds": "5",
        "sync.group.offsets.interval.seconds": "5", "sync.topic.acls.enabled": "false"}.items()))
    rep = Proc(["replicate", str(cfg), "--checkpoint-dir", str(base / "ck"), "--metrics-listen",
                f"127.0.0.1:{free_port()}"], base / "replicator.log").start()
    mon = Proc(["monitor", str(cfg), "--listen", f"127.0.0.1:{free_port()}", "--interval", "5"],
               base / "monitor.log").start()
    traffic = Traffic(primary.bootstrap, args.rate)
    traffic.start()

    duration = args.minutes * 60
    rng = random.Random(args.seed)
    plan = sorted((rng.uniform(0.1, 0.9) * duration, what) for what in ("replicator", "monitor", "source", "target"))
    print(f"soak: {args.minutes} min, data in {base}, restarts at "
          + ", ".join(f"{what} {t / 60:.1f} min" for t, what in plan), flush=True)
    out = open(args.out, "w")
    out.write(json.dumps({"start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "minutes": args.minutes,
                          "rate": args.rate, "plan": [[round(t), w] for t, w in plan]}) + "\n")
    out.flush()
    started = time.monotonic()
    next_sample = started + 5  # the first sample once the replicator is up
    try:
        while (now := time.monotonic()) - started < duration:
            if plan and now - started >= plan[0][0]:
                _, what = plan.pop(0)
                t0 = time.monotonic()
                if what == "replicator":
                    code = rep.stop()
                    rep.start()
                    detail = f"exit {code}"
                elif what == "monitor":
                    code = mon.stop()
                    mon.start()
                    detail = f"exit {code}"
                else:
                    c = primary if what == "source" else dr
                    c.stop()
                    time.sleep(15)
                    c.start(timeout=600)  # a loaded machine took minutes to start a broker
                    detail = f"stopped 15 s, back after {time.monotonic() - t0:.0f} s"
                event = {"t_min": round((t0 - started) / 60, 2), "restart": what, "detail": detail}
                print("soak:", json.dumps(event), flush=True)
                out.write(json.dumps(event) + "\n")
                out.flush()
            if now >= next_sample:
                next_sample = now + 60
                row = {"t_min": round((now - started) / 60, 2), "sent": traffic.sent}
                comps = components(rep, mon)
                for name, procs in comps.items():
                    row[name] = measure(procs)
                if comps["spark_jvm"]:
                    row["spark_jvm"].update(jvm_detail(comps["spark_jvm"][0].pid))
                out.write(json.dumps(row) + "\n")
                out.flush()
                print("soak:", json.dumps(row), flush=True)
            time.sleep(1)
    finally:
        sent = traffic.stop()
        lost = duplicated = None
        try:
            ids = read_ids(dr.bootstrap, f"primary.{TOPIC}", sent)
            lost = sum(1 for i in range(sent) if i not in ids)
            duplicated = sum(n - 1 for n in ids.values())
        except Exception as exc:  # recorded; the samples so far are still plotted
            print(f"soak: cannot read the target back: {exc}", flush=True)
        finally:
            rep_code = rep.stop()
            mon.stop()
            for c in clusters.values():
                c.stop()
        end = {"end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "ran_min": round((time.monotonic() - started) / 60, 1), "sent": sent,
               "producer_failed": traffic.failed, "lost": lost, "duplicated": duplicated,
               "replicator_exit": rep_code, "data": str(base)}
        out.write(json.dumps(end) + "\n")
        out.close()
        print("soak:", json.dumps(end), flush=True)
    plot(args.out, PNG)
    return 0 if lost == 0 else 1


def read_ids(bootstrap: str, topic: str, want: int, timeout: float = 600.0) -> dict[int, int]:
    """id -> copies on the target, read until every id sent is there (or the timeout)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-reader-{time.time_ns()}",
                  "enable.auto.commit": False, "log_level": 0})
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while time.monotonic() < deadline and (len(seen) < want or time.monotonic() - last < 10):
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        last = time.monotonic()
        i = int(m.value().split(b"|", 1)[0])
        seen[i] = seen.get(i, 0) + 1
    c.close()
    return seen


def plot(samples: str | Path, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(l) for l in Path(samples).read_text().splitlines() if l.strip()]
    head = rows[0]
    samples_ = [r for r in rows if "driver" in r]
    events = [r for r in rows if "restart" in r]
    end = next((r for r in rows if "end" in r), None)
    fig, axes = plt.subplots(4, 1, figsize=(10, 13), sharex=True)
    for ax, (metric, label) in zip(axes, (("rss_mb", "resident memory (MB)"), ("fds", "open file descriptors"),
                                          ("threads", "threads"), ("heap_live_mb", "Spark JVM heap live after GC (MB)"))):
        for comp in COMPONENTS:
            points = [(r["t_min"], r[comp].get(metric)) for r in samples_ if comp in r]
            points = [(t, v) for t, v in points if v is not None]
            if points:
                ax.plot([t for t, _ in points], [v for _, v in points], marker=".", label=comp)
        for e in events:
            ax.axvline(e["t_min"], color="grey", linestyle=":", linewidth=1)
            if metric == "rss_mb":
                ax.annotate(f"restart {e['restart']}", (e["t_min"], ax.get_ylim()[1]), rotation=90, fontsize=7,
                            va="top", ha="right", color="grey")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("minutes")
    ran = end["ran_min"] if end else (samples_[-1]["t_min"] if samples_ else 0)
    title = f"sparkmirror soak, started {head.get('start')}, {ran} min at {head.get('rate')} records/s"
    if end:
        title += f": {end['sent']:,} sent, lost {end['lost']}, duplicated {end['duplicated']}"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    print(f"soak: plot in {png}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--minutes", type=float, default=60)
    r.add_argument("--rate", type=float, default=300)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--out", default=str(SAMPLES))
    p = sub.add_parser("plot")
    p.add_argument("samples", nargs="?", default=str(SAMPLES))
    p.add_argument("--png", default=str(PNG))
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return run(args)
    plot(args.samples, Path(args.png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
