"""Replicator and monitor against clusters that authenticate by Kerberos (SASL GSSAPI), over
several ticket lifetimes, and a keytab the KDC no longer accepts.

The module's KDC (``kerberos_clusters``) issues tickets that live 30 s, and the brokers make
every GSSAPI connection re-authenticate at least every 15 s, so a copy that kept one ticket
would stop within half a minute. sparkmirror's Python side runs on the confluent-kafka that
scripts/build-gssapi-client.sh builds (the PyPI wheel has no GSSAPI); its Java side (the
real-time path's Spark source and writer) reads the same mm2.properties through JAAS. The
tests' own clients use the brokers' PLAINTEXT listener.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from sparkmirror.model.records import Checkpoint, OffsetSync
from tests.support.cli import run_cli
from tests.support.kafka import consume_all, create_topic, produce
from tests.support.prometheus import MonitorProcess
from tests.support.replicator import Replicator, write_config
from tests.support.secured import caught_up, wait_for_records

pytestmark = pytest.mark.kafka

TOPIC, GROUP, PARTITIONS = "ledger", "auditors", 3
#: the copy runs this long: more than three 30-s ticket lifetimes
RUN_S = 100
BATCH_EVERY_S = 10


def mm2_config(path, clusters, **overrides) -> object:
    security = {**clusters.primary.kerberos.mm2_properties("primary"), **clusters.dr.kerberos.mm2_properties("dr")}
    for alias in ("primary", "dr"):
        # tickets of 30 s: take a new one every 10 s (the default, 60 s, is longer than their life)
        security[f"{alias}.sasl.kerberos.min.time.before.relogin"] = "10000"
    security.update(overrides)
    return write_config(path, security.pop("primary.bootstrap.servers"), security.pop("dr.bootstrap.servers"), {
        "topics": TOPIC, "groups": GROUP,
        "emit.checkpoints.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
        "offset.lag.max": "0",  # a sync per record: the checkpoints translate exactly
        **security,
    })


def kerberos_env(clusters, gssapi_client, ccache) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(gssapi_client), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, **clusters.primary.kerberos.kdc.env(ccache)}


def end_offsets(cluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kerberos-test-watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS))
    finally:
        consumer.close()


def test_replicate_and_monitor_over_kerberos_across_ticket_lifetimes(kerberos_clusters, gssapi_client, tmp_path):
    clusters = kerberos_clusters
    primary, dr, kdc = clusters.primary, clusters.dr, clusters.primary.kerberos.kdc
    config = mm2_config(tmp_path / "mm2.properties", clusters)
    env = kerberos_env(clusters, gssapi_client, tmp_path / "replicator.ccache")
    done = run_cli("validate", str(config), env=dict(os.environ, **env))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sasl.kerberos.principal=mirror@" in done.stdout

    create_topic(primary.bootstrap, TOPIC, PARTITIONS)
    sent: list[dict] = []
    base_ms = int(time.time() * 1000) - 600_000

    def batch(n: int) -> None:
        records = [{"key": f"k{n}-{i}".encode(), "value": f"v{n}-{i}".encode() * (1 + i % 5), "partition": i % PARTITIONS,
                    "headers": [("batch", str(n).encode())], "timestamp": base_ms + 1000 * n + i} for i in range(30)]
        produce(primary.bootstrap, TOPIC, records)
        sent.extend(records)

    def dr_count() -> int:
        return end_offsets(dr, f"primary.{TOPIC}")

    batch(0)
    committer = Consumer({"bootstrap.servers": primary.bootstrap, "group.id": GROUP})
    committer.commit(offsets=[TopicPartition(TOPIC, p, 5 + p) for p in range(PARTITIONS)], asynchronous=False)
    committer.close()

    replicator = Replicator(config, tmp_path / "checkpoints", tmp_path / "replicator.log", env=env)
    monitor = MonitorProcess(tmp_path / "monitor", config, "--interval", "0.5", "--groups-interval", "1",
                             "--metadata-interval", "2",
                             env=kerberos_env(clusters, gssapi_client, tmp_path / "monitor.ccache"))
    with replicator, monitor:
        started = time.monotonic()
        issued_at_start = kdc.issued("mirror")
        n, behind = 1, []
        while time.monotonic() - started < RUN_S:
            time.sleep(BATCH_EVERY_S)
            batch(n)
            n += 1
            if n % 3 == 0:  # every 30 s: the copy has everything produced until 10 s ago
                want = len(sent)
                t0 = time.monotonic()
                replicator.wait_until(lambda: dr_count() >= want, 60, what=f"{want} records on dr")
                behind.append(round(time.monotonic() - t0, 1))
        copied = consume_all(dr.bootstrap, f"primary.{TOPIC}", expected=len(sent), timeout=120)
        got = sorted((m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in copied)
        want = sorted((r["partition"], i, r["key"], r["value"], r["headers"], r["timestamp"])
                      for p in range(PARTITIONS) for i, r in enumerate(r for r in sent if r["partition"] == p))
        assert got == want  # same partition, offset, key, value, headers and timestamp, record by record
        print(f"kerberos: {len(sent)} records over {time.monotonic() - started:.0f} s, caught up after "
              f"{behind} s every 30 s; tickets issued to mirror: {kdc.issued('mirror')}")

        syncs = wait_for_records(primary, "mm2-offset-syncs.dr.internal", OffsetSync,
                                 lambda syncs: sum(1 for s in syncs if s.topic == TOPIC) >= len(sent), 60)
        assert all(s.upstream_offset == s.downstream_offset for s in syncs if s.topic == TOPIC)
        exact = {(GROUP, f"primary.{TOPIC}", p): (5 + p, 5 + p) for p in range(PARTITIONS)}

        def newest(cps):
            return {(c.group, c.topic, c.partition): (c.upstream_offset, c.downstream_offset) for c in cps}

        assert newest(wait_for_records(dr, "primary.checkpoints.internal", Checkpoint,
                                       lambda cps: newest(cps) == exact, 60)) == exact

        monitor.wait_for(caught_up(TOPIC), 60, f"primary->dr: {TOPIC} at lag 0 with heartbeats and offset-syncs")
        assert {c["alias"]: c["up"] for c in monitor.status()["clusters"]} == {"primary": True, "dr": True}
        log = replicator.log()
        assert "real-time" in log  # the Java side (Spark's source and the writer) copied too
        # the clients took new tickets along the way: librdkafka's kinit and the JVM's re-logins
        assert kdc.issued("mirror") - issued_at_start >= RUN_S // 30, kdc.issued("mirror")
        assert replicator.terminate() == 0
    assert "Authentication" not in replicator.log() and "Kerberos" not in replicator.log(), replicator.log()[-3000:]


@pytest.mark.parametrize("stale_on", ["both clusters", "the Java clients of dr"])
def test_a_keytab_the_kdc_no_longer_accepts_is_a_clear_error(kerberos_clusters, gssapi_client, tmp_path, stale_on):
    """A rotated keytab: the principal's key changed after the keytab was written. On both
    clusters, librdkafka's kinit fails and the first topic list names the cluster; when only dr's
    copy of the keytab is stale, librdkafka still has primary's ticket of the same principal (one
    ticket cache per process), and the real-time path's Java clients, which log in from dr's
    keytab themselves, fail. Either way the replicator stops with an error that says Kerberos,
    without a traceback."""
    clusters = kerberos_clusters
    kdc = clusters.dr.kerberos.kdc
    principal = f"rotated{len(stale_on)}"
    stale = kdc.keytab(principal, tmp_path / "old.keytab")
    current = kdc.keytab(principal, tmp_path / "new.keytab", new_key=True)  # the old keytab is stale now
    primary_keytab = stale if stale_on == "both clusters" else current
    config = mm2_config(tmp_path / "mm2.properties", clusters,
                        **clusters.primary.kerberos.mm2_properties("primary", keytab=primary_keytab,
                                                                   principal=principal),
                        **clusters.dr.kerberos.mm2_properties("dr", keytab=stale, principal=principal))
    create_topic(clusters.primary.bootstrap, f"stale{len(stale_on)}", 1)
    produce(clusters.primary.bootstrap, f"stale{len(stale_on)}", [{"value": b"x"}])
    env = dict(os.environ, SPARKMIRROR_DRIVER_MEMORY="1g", **kerberos_env(clusters, gssapi_client, tmp_path / "cc"))
    started = time.monotonic()
    # no metrics port: the two variants may run at once in the suite's two workers
    done = run_cli("replicate", str(config), "--checkpoint-dir", str(tmp_path / "ck"), "--metrics-listen", "off",
                   "--data-path", "real-time", timeout=240, env=env)
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    print(f"stale keytab on {stale_on}: exit {done.returncode} after {took:.1f}s: {out.strip().splitlines()[-2:]}")
    assert done.returncode != 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("sparkmirror: error")]
    assert errors and "kerberos" in errors[0].lower(), out[-3000:]
    assert ("(cluster primary)" in errors[0] or "(cluster dr)" in errors[0]) if stale_on == "both clusters" \
        else "flow primary->dr" in errors[0], errors[0]
