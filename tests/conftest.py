"""Shared fixtures: two real single-node KRaft Kafka clusters for the whole session.

The clusters are the same KafkaCluster class `sparkmirror dev up` uses, on free
loopback ports and in a temporary directory, so a running dev environment never
collides with the tests. They start only when a test asks for them.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.clusters import TestClusters, cluster_pair

# Property tests check behaviour, not speed: on a loaded machine (CI shares its cores) a
# generated case may take longer than Hypothesis' default 200 ms deadline or its health
# checks' time budget, which would fail a correct test.
settings.register_profile("sparkmirror", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sparkmirror")

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


PRIVATE_CLUSTERS = "private_clusters"


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{PRIVATE_CLUSTERS}: on a module (pytestmark), its kafka_clusters are a "
                                       "pair of its own (private_kafka_clusters), not the session's")


FAILED_LIST = "SPARKMIRROR_FAILED_LIST"


def pytest_terminal_summary(terminalreporter) -> None:
    """The modules that take the suite's time (setup, call and teardown summed), for a run of
    several minutes: the suite has a time budget, and --durations shows single tests only.

    With ``$SPARKMIRROR_FAILED_LIST`` set, the ids of the tests that failed or errored are
    written there, one per line, in the order they ran (``./run test`` runs them again, alone)."""
    import os

    if os.environ.get(FAILED_LIST):
        # in the order they ran: a module's tests may build on one another's state
        reports = [r for key in ("failed", "error") for r in terminalreporter.stats.get(key, [])
                   if isinstance(r, pytest.TestReport)]
        failed = list(dict.fromkeys(r.nodeid for r in sorted(reports, key=lambda r: r.start)))
        Path(os.environ[FAILED_LIST]).write_text("".join(f"{n}\n" for n in failed))
    totals: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for r in reports:
            if isinstance(r, pytest.TestReport):
                totals[r.nodeid.split("::")[0]] += r.duration
    if sum(totals.values()) < 300:
        return
    terminalreporter.write_sep("=", "slowest 12 modules (setup + call + teardown)")
    for module, seconds in sorted(totals.items(), key=lambda kv: -kv[1])[:12]:
        terminalreporter.write_line(f"{seconds:8.1f}s {module}")


@pytest.fixture(scope="session")
def session_kafka_clusters(tmp_path_factory) -> TestClusters:
    """The pair every module shares unless it is marked private_clusters; ask for kafka_clusters."""
    yield from cluster_pair(tmp_path_factory.mktemp("kafka"))


@pytest.fixture(scope="module")
def kafka_clusters(request) -> TestClusters:
    """The two clusters a test talks to: the session's, or for a module marked
    ``pytestmark = [..., pytest.mark.private_clusters]`` its own ``private_kafka_clusters``.
    Only the pair asked for is started."""
    if request.node.get_closest_marker(PRIVATE_CLUSTERS) is not None:
        return request.getfixturevalue("private_kafka_clusters")
    return request.getfixturevalue("session_kafka_clusters")


@pytest.fixture(scope="module")
def private_kafka_clusters(tmp_path_factory) -> TestClusters:
    """A pair of clusters for one module only, for tests that run Apache MM2 with the
    fixed aliases `primary`/`dr`: on the session clusters, MM2 would first read every
    other test's records in the shared `heartbeats` and `mm2-offset-syncs.dr.internal`. A module
    marked ``private_clusters`` gets it as ``kafka_clusters``."""
    yield from cluster_pair(tmp_path_factory.mktemp("kafka-private"))


@pytest.fixture(scope="module")
def sasl_ssl_clusters(tmp_path_factory) -> TestClusters:
    """A `primary`/`dr` pair for one module whose clients must speak SASL_SSL (SCRAM-SHA-512).

    ``cluster.sasl_ssl`` holds each cluster's users with random passwords (unique
    markers a test can grep for), the CA certificate (PEM) clients trust and the
    broker keystore; ``cluster.client_config(user)`` gives confluent-kafka settings."""
    yield from cluster_pair(tmp_path_factory.mktemp("kafka-sasl-ssl"), sasl_ssl=True)


@pytest.fixture(scope="module")
def mtls_clusters(tmp_path_factory) -> TestClusters:
    """A `primary`/`dr` pair for one module whose clients must present a certificate (mutual TLS,
    no SASL). ``cluster.mtls`` holds the CA, the broker keystore and user ``mirror``'s certificate
    with its encrypted key; ``cluster.client_config()`` gives confluent-kafka settings."""
    yield from cluster_pair(tmp_path_factory.mktemp("kafka-mtls"), mtls=True)


@pytest.fixture(scope="session")
def gssapi_client() -> Path:
    """A confluent-kafka that speaks Kerberos (the PyPI wheel does not), built once into
    .cache/gssapi by scripts/build-gssapi-client.sh: the directory to put first on PYTHONPATH."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[1]
    # one make job: the other pytest worker keeps its core
    done = subprocess.run([str(root / "scripts" / "build-gssapi-client.sh")], cwd=root, capture_output=True,
                          text=True, timeout=900, env=dict(os.environ, JOBS="1"))
    assert done.returncode == 0, f"building the GSSAPI client failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kerberos_clusters(tmp_path_factory) -> TestClusters:
    """A `primary`/`dr` pair for one module with a GSSAPI (Kerberos) listener each, and the KDC
    of their realm, whose tickets live 30 s (``cluster.kerberos.kdc``); the PLAINTEXT listener
    stays for the tests' own clients."""
    from devenv.kerberos import Kdc

    base = tmp_path_factory.mktemp("kafka-kerberos")
    kdc = Kdc.start(base / "kdc", max_life="30s", reauth_ms=15_000)
    try:
        yield from cluster_pair(base, kdc=kdc)
    finally:
        kdc.stop()


@pytest.fixture
def unique() -> str:
    """A short unique suffix so tests sharing the session clusters never share topics."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
