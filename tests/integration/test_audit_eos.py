"""The audit of an exactly-once copy: commit markers and aborted retries on the target count nothing.

The tests' copier writes the mirror in transactions, every third one first written and
aborted, then written again and committed, as an exactly-once replicator's retry does.
Read with read_committed, the target holds each record once: the audit of the flow (with
``exactly.once.support = required``, so that every window is read) finds every record,
0 duplicated and nothing missing; a record then dropped inside a transaction is named.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Producer

from sparkmirror_cli import audit as audit_cli
from tests.support.faultycopier import FaultyCopier
from tests.support.kafka import create_topic
from tests.support.monitor import write_mm2_config

pytestmark = [pytest.mark.kafka]


def test_markers_and_aborted_retries_are_no_duplicates_and_a_drop_is_still_named(kafka_clusters, tmp_path, capsys):
    u = uuid.uuid4().hex[:8]
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    src, tgt, topic = f"e{u}", f"f{u}", f"payments-{u}"
    remote, syncs = f"{src}.{topic}", f"mm2-offset-syncs.{tgt}.internal"
    create_topic(primary, topic, 2)
    create_topic(dr, remote, 2)
    create_topic(primary, syncs, 1, config={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": primary, "linger.ms": 5})
    now = int(time.time() * 1000)
    for i in range(1000):
        p.produce(topic, b"payment-%d" % i, key=b"k%d" % i, partition=i % 2, timestamp=now + i)
    p.flush(30)
    copier = FaultyCopier(primary, dr, topic, remote, 2, syncs, transactional_id=f"eos-{u}", transaction=60,
                          abort_every=3)
    copier.copy()
    path = write_mm2_config(tmp_path / "mm2.properties", {src: primary, tgt: dr}, [(src, tgt)],
                            {f"{src}->{tgt}.exactly.once.support": "required"})
    assert audit_cli.main(["audit", str(path), "--flow", f"{src}->{tgt}", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    c = report["counts"]
    assert report["exactly_once"] and copier.transactions >= 6
    assert (c["missing"], c["mismatched"], c["duplicated"]) == (0, 0, 0), report["findings"]
    # every record before each partition's newest sync was compared (that sync's own record opens
    # the next window: it is compared once a later sync closes it)
    assert c["verified"] == 1000 - 2, c

    copier.drop.add((1, 520))
    for i in range(1000, 1200):
        p.produce(topic, b"payment-%d" % i, key=b"k%d" % i, partition=i % 2, timestamp=now + i)
    p.flush(30)
    copier.copy()
    assert audit_cli.main(["audit", str(path), "--flow", f"{src}->{tgt}", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["kind"], f["partition"], f["source_offset"]) for f in report["findings"]] == [("missing", 1, 520)]
    assert report["counts"]["duplicated"] == 0
