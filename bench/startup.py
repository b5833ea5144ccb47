"""A replicator's start-up: launch to its first batch, with and without the class-data archive.

    python -m bench.startup --runs 3

Starts two fresh single-node KRaft clusters, writes ``--records`` records into a topic
of 6 partitions, then launches ``sparkmirror replicate`` (micro-batches) ``--runs``
times with the driver JVM's class-data archive (``replicator/datapath/cds.py``; built
first if missing) and as many times without it (``SPARKMIRROR_CDS=off``), alternating,
each with a fresh checkpoint directory so that each copies the same records. For each
run it prints the seconds from the launch to the first batch line and to the end of a
SIGTERM stop; then the median and the spread per setting. Nothing is recorded: the
figures go to bench/NOTES.md by hand.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from devenv.kafka import KafkaCluster, free_port
from replicator.datapath import cds
from tests.support.kafka import create_topic, produce
from tests.support.replicator import Replicator, write_config


def log(msg: str) -> None:
    print(f"[startup-bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per setting (with, without the archive)")
    ap.add_argument("--records", type=int, default=1000)
    args = ap.parse_args(argv)

    log(f"class-data archive: {cds.build()}")
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    clusters = [KafkaCluster(name, free_port(), free_port(), work / name) for name in ("primary", "dr")]
    try:
        for c in clusters:
            c.start()
        primary, dr = (c.bootstrap for c in clusters)
        create_topic(primary, "t", 6)
        produce(primary, "t", ({"value": str(i).encode(), "partition": i % 6} for i in range(args.records)))
        config = write_config(work / "mm2.properties", primary, dr, {"primary->dr.topics": "t"})
        figures: dict[str, list[tuple[float, float]]] = {"auto": [], "off": []}
        for i in range(args.runs * 2):
            setting = "auto" if i % 2 == 0 else "off"
            started = time.monotonic()
            rep = Replicator(config, work / f"ck{i}", work / f"replicator-{i}.log", ["--data-path", "micro-batch"],
                             env={"SPARKMIRROR_CDS": setting}).start()
            while " records, " not in rep.log():
                if not rep.running():
                    raise RuntimeError(f"the replicator exited: {rep.log()[-3000:]}")
                time.sleep(0.05)
            first = time.monotonic() - started
            if rep.terminate() != 0:
                raise RuntimeError(f"the replicator did not stop cleanly: {rep.log()[-3000:]}")
            figures[setting].append((first, time.monotonic() - started))
            log(f"run {i} SPARKMIRROR_CDS={setting}: first batch {first:.1f} s, stopped {figures[setting][-1][1]:.1f} s")
        for setting, runs in figures.items():
            firsts = [f for f, _ in runs]
            log(f"SPARKMIRROR_CDS={setting}: launch to first batch median {statistics.median(firsts):.1f} s "
                f"(spread {min(firsts):.1f}-{max(firsts):.1f} s, {len(firsts)} runs)")
        return 0
    finally:
        for c in clusters:
            c.stop(kill=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
