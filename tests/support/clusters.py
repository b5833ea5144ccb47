"""Two real single-node KRaft clusters, `primary` and `dr`, for the test fixtures.

The clusters are the same KafkaCluster class `sparkmirror dev up` uses, on free
loopback ports and under a directory the caller gives (tests/conftest.py's
fixtures, or a module that needs a pair of its own).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass


@dataclass
class TestClusters:
    primary: "object"
    dr: "object"

    def by_name(self, name: str):
        return {"primary": self.primary, "dr": self.dr}[name]


def cluster_pair(base, sasl_ssl: bool = False, mtls: bool = False, kdc=None, heap: str | None = None):
    """Start `primary` and `dr` in parallel under ``base``; a generator that stops them.

    With ``sasl_ssl`` each cluster gets its own test CA and SCRAM users (see
    devenv.security) and accepts clients on SASL_SSL only; with ``mtls`` its own CA and a
    client certificate for user ``mirror``, and accepts clients on SSL with one only; with
    ``kdc`` (devenv.kerberos.Kdc) a GSSAPI listener beside PLAINTEXT, principal ``mirror``;
    ``heap`` overrides each broker's -Xmx (benchmarks with many partitions)."""
    from devenv.kafka import DEFAULT_HEAP, KafkaCluster, free_port
    from devenv.kerberos import Kerberos
    from devenv.security import MutualTls, SaslSsl

    clusters = [
        KafkaCluster(name=name, port=free_port(), controller_port=free_port(), data_dir=base / name,
                     sasl_ssl=SaslSsl.create(base / f"{name}-tls", name) if sasl_ssl else None,
                     mtls=MutualTls.create(base / f"{name}-mtls", name) if mtls else None,
                     kerberos=Kerberos.create(kdc, name) if kdc is not None else None,
                     heap=heap or DEFAULT_HEAP)
        for name in ("primary", "dr")
    ]
    with running(clusters):
        yield TestClusters(*clusters)


@contextlib.contextmanager
def running(clusters: list):
    """Start ``clusters`` (KafkaCluster) in parallel; stop them all on leaving."""
    errors: list[BaseException] = []

    def start(c):
        try:
            c.start()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(c,)) for c in clusters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if errors:
            raise errors[0]
        yield clusters
    finally:
        for c in clusters:
            c.stop()
