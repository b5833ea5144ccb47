"""Shared fixtures: two real single-node KRaft Kafka clusters for the whole session.

The clusters are the same KafkaCluster class `sparkmirror dev up` uses, on free
loopback ports and in a temporary directory, so a running dev environment never
collides with the tests. They start only when a test asks for them.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests check behaviour, not speed: on a loaded machine (CI shares its cores) a
# generated case may take longer than Hypothesis' default 200 ms deadline or its health
# checks' time budget, which would fail a correct test.
settings.register_profile("sparkmirror", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sparkmirror")

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


@dataclass
class TestClusters:
    primary: "object"
    dr: "object"

    def by_name(self, name: str):
        return {"primary": self.primary, "dr": self.dr}[name]


def _cluster_pair(base, sasl_ssl: bool = False):
    """Start `primary` and `dr` in parallel under ``base``; a generator that stops them.

    With ``sasl_ssl`` each cluster gets its own test CA and SCRAM users (see
    replicator.devenv.security) and accepts clients on SASL_SSL only."""
    from replicator.devenv.kafka import KafkaCluster, free_port
    from replicator.devenv.security import SaslSsl

    clusters = [
        KafkaCluster(name=name, port=free_port(), controller_port=free_port(), data_dir=base / name,
                     sasl_ssl=SaslSsl.create(base / f"{name}-tls", name) if sasl_ssl else None)
        for name in ("primary", "dr")
    ]
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
        yield TestClusters(*clusters)
    finally:
        for c in clusters:
            c.stop()


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory) -> TestClusters:
    yield from _cluster_pair(tmp_path_factory.mktemp("kafka"))


@pytest.fixture(scope="module")
def private_kafka_clusters(tmp_path_factory) -> TestClusters:
    """A pair of clusters for one module only, for tests that run Apache MM2 with the
    fixed aliases `primary`/`dr`: on the session clusters, MM2 would first read every
    other test's records in the shared `heartbeats` and `mm2-offset-syncs.dr.internal`."""
    yield from _cluster_pair(tmp_path_factory.mktemp("kafka-private"))


@pytest.fixture(scope="module")
def sasl_ssl_clusters(tmp_path_factory) -> TestClusters:
    """A `primary`/`dr` pair for one module whose clients must speak SASL_SSL (SCRAM-SHA-512).

    ``cluster.sasl_ssl`` holds each cluster's users with random passwords (unique
    markers a test can grep for), the CA certificate (PEM) clients trust and the
    broker keystore; ``cluster.client_config(user)`` gives confluent-kafka settings."""
    yield from _cluster_pair(tmp_path_factory.mktemp("kafka-sasl-ssl"), sasl_ssl=True)


@pytest.fixture
def unique() -> str:
    """A short unique suffix so tests sharing the session clusters never share topics."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
