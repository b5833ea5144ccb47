"""Replicator, control plane and monitor against clusters that authenticate clients by certificate
(mutual TLS, no SASL), and a certificate the cluster's CA did not sign.

The module's clusters (``mtls_clusters``) listen on SSL only with ``ssl.client.auth=required``;
each has its own throwaway CA, which signed the broker's certificate and user ``mirror``'s
(CN=mirror is the principal). The mm2.properties uses MM2's own keys: a PEM
``ssl.truststore.*`` and a PEM ``ssl.keystore.*`` holding the client's certificate and its
encrypted key, with ``ssl.key.password``, which Spark's Java client and librdkafka both read.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from devenv.security import self_signed_client
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync
from tests.support.cli import run_cli
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.prometheus import MonitorProcess
from tests.support.replicator import Replicator, write_config
from tests.support.secured import caught_up, files_under, leaks, topic_exists, wait_for_records

pytestmark = pytest.mark.kafka

TOPIC, GROUP, PARTITIONS, PER_PARTITION = "payments", "ledger", 3, 100
COMMITTED = {0: 30, 1: 60, 2: 100}


def mm2_config(path, clusters, **overrides) -> object:
    security = {**clusters.primary.mtls.mm2_properties("primary"), **clusters.dr.mtls.mm2_properties("dr")}
    security.update(overrides)
    return write_config(path, clusters.primary.bootstrap, clusters.dr.bootstrap, {
        "topics": TOPIC, "groups": GROUP,
        "emit.checkpoints.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
        "offset.lag.max": "0",  # a sync per record: the checkpoints translate exactly
        **security,
    })


def secrets_of(clusters) -> dict[str, str]:
    return {f"{alias} {name}": value for alias in ("primary", "dr")
            for name, value in clusters.by_name(alias).mtls.secrets().items()}


def test_replicate_and_monitor_over_mutual_tls(mtls_clusters, tmp_path):
    clusters = mtls_clusters
    primary, dr = clusters.primary, clusters.dr
    config = mm2_config(tmp_path / "mm2.properties", clusters)
    outputs: dict[str, str] = {}
    done = run_cli("validate", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    outputs["validate"] = done.stdout + done.stderr
    assert "ssl.certificate.location=" in done.stdout and "ssl.key.password=********" in done.stdout

    create_topic(primary.bootstrap, TOPIC, PARTITIONS, **primary.client_config())
    base_ms = int(time.time() * 1000) - 600_000
    sent = [{"key": f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode(), "partition": p,
             "headers": [("h", f"{p}:{i}".encode())], "timestamp": base_ms + 1000 * i + p}
            for i in range(PER_PARTITION) for p in range(PARTITIONS)]
    produce(primary.bootstrap, TOPIC, sent, **primary.client_config())
    committer = Consumer({"bootstrap.servers": primary.bootstrap, "group.id": GROUP, **primary.client_config()})
    committer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    committer.close()

    replicator = Replicator(config, tmp_path / "checkpoints", tmp_path / "replicator.log")
    monitor = MonitorProcess(tmp_path / "monitor", config, "--interval", "0.5", "--groups-interval", "1",
                             "--metadata-interval", "2", verbose=True)
    with replicator, monitor:
        replicator.wait_until(lambda: topic_exists(dr, f"primary.{TOPIC}"), 120, what="the mirror topic on dr")
        copied = consume_all(dr.bootstrap, f"primary.{TOPIC}", expected=len(sent), timeout=150, **dr.client_config())
        got = sorted((m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in copied)
        want = sorted((r["partition"], i, r["key"], r["value"], r["headers"], r["timestamp"])
                      for p in range(PARTITIONS)
                      for i, r in enumerate(r for r in sent if r["partition"] == p))
        assert got == want  # same partition, offset, key, value, headers and timestamp, record by record

        syncs = wait_for_records(primary, "mm2-offset-syncs.dr.internal", OffsetSync,
                                 lambda syncs: {(s.topic, s.partition, s.upstream_offset) for s in syncs} >= {
                                     (TOPIC, p, PER_PARTITION - 1) for p in range(PARTITIONS)}, 60)
        assert all(s.upstream_offset == s.downstream_offset for s in syncs if s.topic == TOPIC)
        exact = {(GROUP, f"primary.{TOPIC}", p): (o, o) for p, o in COMMITTED.items()}

        def newest(cps):
            return {(c.group, c.topic, c.partition): (c.upstream_offset, c.downstream_offset) for c in cps}

        checkpoints = wait_for_records(dr, "primary.checkpoints.internal", Checkpoint,
                                       lambda cps: newest(cps) == exact, 60)
        assert newest(checkpoints) == exact
        beats = wait_for_records(dr, "primary.heartbeats", Heartbeat, bool, 30)
        assert {(h.source, h.target) for h in beats} == {("dr", "primary")}

        monitor.wait_for(caught_up(TOPIC), 60, f"primary->dr: {TOPIC} at lag 0 with heartbeats and offset-syncs")
        assert {c["alias"]: c["up"] for c in monitor.status()["clusters"]} == {"primary": True, "dr": True}
        outputs["monitor /api/status"] = str(monitor.status())
        outputs["replicator /metrics"] = replicator.metrics_text()
        assert replicator.terminate() == 0
    outputs["replicator log"] = replicator.log()
    outputs["monitor log"] = monitor.log_path.read_text(errors="replace")
    outputs.update(files_under(tmp_path / "checkpoints"))
    found = {where: leaks(text, secrets_of(clusters)) for where, text in outputs.items()
             if leaks(text, secrets_of(clusters))}
    assert found == {}, f"secrets shown: {found}"


def test_a_certificate_the_cluster_does_not_trust_is_a_clear_error_naming_the_cluster(mtls_clusters, tmp_path):
    """dr's client certificate is self-signed: dr's broker ends the TLS handshake. The replicator
    stops with an error naming dr, without a traceback and without the key's password."""
    clusters = mtls_clusters
    stranger = self_signed_client(tmp_path / "stranger", "mirror")
    config = mm2_config(tmp_path / "mm2.properties", clusters,
                        **clusters.dr.mtls.mm2_properties("dr", certificate=stranger))
    create_topic(clusters.primary.bootstrap, "untrusted", 1, **clusters.primary.client_config())
    started = time.monotonic()
    done = run_cli("replicate", str(config), "--checkpoint-dir", str(tmp_path / "ck"), "--metrics-listen", "off",
                   timeout=240, env=dict(os.environ, SPARKMIRROR_DRIVER_MEMORY="1g"))
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    print(f"untrusted certificate: exit {done.returncode} after {took:.1f}s: {out.strip().splitlines()[-1:]}")
    assert done.returncode != 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    errors = [line for line in out.splitlines() if "error" in line.lower()]
    assert any("dr" in line and ("ssl" in line.lower() or "certificate" in line.lower()) for line in errors), \
        out[-3000:]
    secrets = {**secrets_of(clusters), "the stranger's key password": stranger.key_password}
    assert leaks(out, secrets) == [], leaks(out, secrets)
