"""``python -m bench.upgrade --from REV``: a flow stopped by an earlier tree resumes under this one.

A flow's Spark checkpoints (the offset and commit logs, the real-time shards and the ``.path``
marker) are data on users' disks, so an upgrade must resume them with nothing lost and
nothing copied twice. This checks REV out into a temporary worktree, starts two local
clusters, and for each data path:

1. writes a backlog, replicates it with REV's replicator, starts a live producer;
2. stops REV's replicator with SIGTERM (a clean stop resumes exactly where the target
   acknowledged), while the producer writes on;
3. stops the producer and resumes on the same checkpoint directory with this tree;
4. counts the mirror: every record there, none twice.

The paths: ``auto`` ending in real time over three queries (``--real-time-shards 3``: the
shards' layout file), and ``micro-batch``. It prints one line per path and exits 1 if any
lost or duplicated a record. A long run for a release, not part of the suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devenv.kafka import KafkaCluster, free_port
from sparkmirror import artifacts
from tests.support.kafka import NumberedProducer, consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"real-time-3-shards": ["--data-path", "auto", "--real-time-shards", "3"],
         "micro-batch": ["--data-path", "micro-batch"]}
BACKLOG = 20_000


class EarlierReplicator(Replicator):
    """The replicator of the checkout in ``tree`` (its own packages first on sys.path)."""

    def __init__(self, tree: Path, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tree = tree
        # the command's module moved once; an earlier tree has the older one
        self.module = "sparkmirror_cli.main" if (tree / "sparkmirror_cli" / "main.py").is_file() else "replicator.cli"

    def start(self) -> EarlierReplicator:
        env = dict(os.environ, SPARKMIRROR_DRIVER_MEMORY="1g", SPARKMIRROR_CACHE=str(artifacts.cache_dir()),
                   **self.env)
        self._out = open(self.log_file, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, "replicate", str(self.config),
             "--checkpoint-dir", str(self.checkpoint_dir), *self.extra_args],
            stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.tree,
            start_new_session=True)
        return self


def _mirror_values(dr: str, topic: str) -> list[bytes]:
    return [m.value() for m in consume_all(dr, f"primary.{topic}", timeout=10)]


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(2)


def one_path(name: str, args: list[str], tree: Path, primary: str, dr: str, work: Path) -> tuple[int, int, int]:
    """(records sent, lost, copied twice) for one data path."""
    topic = f"upgrade-{name}-{int(time.time())}"
    create_topic(primary, topic, 4)
    produce(primary, topic, ({"key": None, "value": str(i).encode(), "partition": i % 4} for i in range(BACKLOG)))
    config = write_config(work / f"{name}.properties", primary, dr, {"primary->dr.topics": topic})
    producer = NumberedProducer(primary, topic, 4, rate=200.0, first_id=BACKLOG)
    earlier = EarlierReplicator(tree, config, work / f"{name}-ckpt", work / f"{name}-earlier.log", extra_args=args)
    earlier.start()
    try:
        _wait(lambda: len(set(_mirror_values(dr, topic))) >= BACKLOG, 300, "the backlog on the target")
        producer.start()
        time.sleep(12)  # records flow, checkpoints pass
        os.kill(earlier.proc.pid, signal.SIGTERM)
        if earlier.proc.wait(60) != 0:
            raise RuntimeError(f"the earlier replicator did not stop cleanly: {earlier.log()[-2000:]}")
    finally:
        if earlier.running():
            earlier.kill9()
    time.sleep(3)  # the producer writes on while nothing replicates
    sent = producer.stop()
    this = Replicator(config, work / f"{name}-ckpt", work / f"{name}-this.log", extra_args=args).start()
    try:
        _wait(lambda: len(set(_mirror_values(dr, topic))) >= sent, 300, f"all {sent} records after the upgrade")
        time.sleep(8)  # anything copied twice arrives by now
        values = _mirror_values(dr, topic)
    finally:
        this.terminate()
    expected = {str(i).encode() for i in range(sent)}
    return sent, len(expected - set(values)), len(values) - len(set(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.upgrade", description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="rev", required=True, help="the earlier tree: a tag or commit of this repo")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sparkmirror-upgrade-"))
    tree = work / "earlier"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.rev], check=True,
                   stdout=subprocess.DEVNULL)
    clusters = [KafkaCluster(n, free_port(), free_port(), work / n, heap="512m") for n in ("primary", "dr")]
    failed = False
    try:
        for c in clusters:
            c.start()
        for name in args.paths.split(","):
            sent, lost, twice = one_path(name, PATHS[name], tree, clusters[0].bootstrap, clusters[1].bootstrap, work)
            failed |= bool(lost or twice)
            print(f"{args.rev} -> this tree, {name}: {sent} records, {lost} lost, {twice} copied twice", flush=True)
    finally:
        for c in clusters:
            c.stop()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
