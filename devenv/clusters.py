"""The local development environment: named clusters on fixed loopback ports.

``sparkmirror dev up`` starts them detached and remembers them in the cache folder;
``sparkmirror dev down`` stops exactly those JVMs. The test fixtures use the same
KafkaCluster class with free ports and a temporary data dir instead.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from devenv.kafka import KafkaCluster
from sparkmirror import artifacts

log = logging.getLogger(__name__)

# alias -> (broker port, controller port)
DEV_CLUSTERS: dict[str, tuple[int, int]] = {"primary": (19092, 19093), "dr": (29092, 29093)}


def dev_dir() -> Path:
    return artifacts.cache_dir() / "dev"


def dev_cluster(name: str) -> KafkaCluster:
    port, controller = DEV_CLUSTERS[name]
    return KafkaCluster(name=name, port=port, controller_port=controller, data_dir=dev_dir() / name)


def up(names: list[str] | None = None) -> list[KafkaCluster]:
    started = []
    for name in names or list(DEV_CLUSTERS):
        cluster = dev_cluster(name)
        if cluster.is_running():
            log.info("cluster %s already running at %s", name, cluster.bootstrap)
        else:
            cluster.start(detach=True)
            log.info("cluster %s up at %s (data %s)", name, cluster.bootstrap, cluster.data_dir)
        started.append(cluster)
    _write_state(started)
    return started


def down(names: list[str] | None = None, wipe: bool = False) -> None:
    for name in names or list(DEV_CLUSTERS):
        cluster = dev_cluster(name)
        if cluster.is_running():
            cluster.stop()
            log.info("cluster %s stopped", name)
        if wipe and cluster.data_dir.exists():
            shutil.rmtree(cluster.data_dir)
            log.info("cluster %s data removed", name)


def status() -> dict[str, dict]:
    out = {}
    for name in DEV_CLUSTERS:
        cluster = dev_cluster(name)
        out[name] = {"bootstrap": cluster.bootstrap, "running": cluster.is_running(), "data_dir": str(cluster.data_dir)}
    return out


def _write_state(clusters: list[KafkaCluster]) -> None:
    dev_dir().mkdir(parents=True, exist_ok=True)
    (dev_dir() / "state.json").write_text(
        json.dumps({c.name: {"bootstrap": c.bootstrap, "pid": c.pid} for c in clusters}, indent=2)
    )
