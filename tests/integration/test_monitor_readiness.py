"""Failover readiness and retention headroom against the real test brokers.

As in test_monitor_lag.py the test plays the replicator (copies, offset-syncs,
checkpoints in MM2's bytes), so every figure is known exactly: one group that can
fail over (it would re-read 3 records spanning 2 s), one that cannot (its offsets
were reset behind its checkpoint: a failover would skip 4 records it has not
consumed), a topic with a 1-hour retention whose oldest unreplicated record is
55 minutes old (5 minutes of headroom: WARN), and one with retention.ms=-1.
"""

from __future__ import annotations

import math
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from sparkmirror.model.records import Checkpoint
from tests.support.kafka import create_topic
from tests.support.monitor import Flow, RunningMonitor, partition_of, produce_raw, sample

pytestmark = pytest.mark.kafka


def test_a_group_that_cannot_fail_over_and_a_partition_about_to_lose_records_to_retention(
        kafka_clusters, tmp_path, unique):
    f = Flow(kafka_clusters, tmp_path, unique)
    now_ms = int(time.time() * 1000)
    f.produce_source(0, [now_ms - 10_000 + i * 1000 for i in range(10)])  # offset i written at now-10s+i
    f.copy(0, 10, now_ms)
    f.sync(0, 0, 0)
    f.sync(0, 9, 9)
    ready, rewound = f"ready-{unique}", f"rewound-{unique}"
    for group, offset in ((ready, 9), (rewound, 4)):
        c = Consumer({"bootstrap.servers": f.primary, "group.id": group})
        c.commit(offsets=[TopicPartition(f.topic, 0, offset)], asynchronous=False)
        c.close()
    cps = [Checkpoint(ready, f.remote, 0, 6, 6), Checkpoint(rewound, f.remote, 0, 8, 8)]
    produce_raw(f.dr, f.checkpoints, [{"key": cp.encode_key(), "value": cp.encode_value()} for cp in cps])

    short, forever = f"short-{unique}", f"forever-{unique}"
    create_topic(f.primary, short, config={"retention.ms": "3600000"})
    create_topic(f.primary, forever, config={"retention.ms": "-1"})
    for topic in (short, forever):
        create_topic(f.dr, f"{f.src}.{topic}")
    oldest_ms = now_ms - 55 * 60 * 1000
    produce_raw(f.primary, short, [{"key": b"k", "value": b"v", "timestamp": oldest_ms + i} for i in range(5)])
    produce_raw(f.primary, forever, [{"key": b"k", "value": b"v", "timestamp": oldest_ms}] * 3)

    f.start_heartbeats()
    try:
        # Nothing copies `short`: with the usual 4-sample window it turns STALL 2 s in, which outranks
        # the retention WARN asserted here. A window longer than the test keeps it to that WARN.
        with RunningMonitor(f.config, topics_exclude=[".*heartbeats"], checkpoint_timeout=2.0,
                            window=1000) as mon:
            def evaluated(s):
                flow = s["flows"][0]
                groups = {g["group"]: g for g in flow["groups"]}
                spans = [g.get("failover") and g["failover"]["reread_seconds"] for g in groups.values()]
                # would-skip is judged on a checkpoint read before a group read began: when the
                # checkpoints arrive after the first read (a loaded machine), at the next one
                return (len(groups) == 2 and None not in spans and flow["retention"]["low_partitions"] == 1
                        and groups.get(rewound, {}).get("failover", {}).get("blockers")
                        and {g["group"]: g for g in flow["groups"]})
            groups = mon.wait_for(evaluated, 75, "failover readiness and retention headroom evaluated")
            assert groups[ready]["failover"]["summary"] == "can fail over now: would re-read 3 records (2.0 s)"
            assert groups[ready]["failover"]["ready"] is True
            fo = groups[rewound]["failover"]
            assert (fo["ready"], fo["blockers"], fo["skipped_records"]) == (False, ["would-skip"], 4)
            assert fo["summary"] == (f"cannot fail over: {f.topic}[0]: would skip 4 records the group has not "
                                     f"consumed (checkpoint at source offset 8, committed offset 4)")
            assert groups[rewound]["status"] == "WARN"

            flow = mon.flow(f.name)
            p = partition_of(flow, short, 0)
            truth = oldest_ms / 1000 + 3600 - time.time()
            assert p["status"] == "WARN" and abs(p["retention_headroom_seconds"] - truth) < 2.0
            assert "may delete records not yet on the target" in p["reasons"][0]
            assert partition_of(flow, forever, 0)["retention_unlimited"] is True
            assert partition_of(flow, f.topic, 0)["retention_headroom_seconds"] > 6 * 24 * 3600  # caught up
            assert flow["status"] == "WARN"

            m = mon.metrics()
            assert sample(m, "sparkmirror_failover_ready", flow=f.name, group=ready) == 1
            assert sample(m, "sparkmirror_failover_ready", flow=f.name, group=rewound) == 0
            assert sample(m, "sparkmirror_failover_blocked", flow=f.name, group=rewound, reason="would-skip") == 1
            assert sample(m, "sparkmirror_failover_blocked", flow=f.name, group=ready, reason="would-skip") == 0
            assert sample(m, "sparkmirror_failover_skipped_records", flow=f.name, group=rewound) == 4
            assert sample(m, "sparkmirror_failover_reread_records", flow=f.name, group=ready) == 3
            assert sample(m, "sparkmirror_failover_reread_seconds", flow=f.name, group=ready) == 2.0
            assert sample(m, "sparkmirror_failover_groups_not_ready", flow=f.name) == 1
            assert sample(m, "sparkmirror_flow_retention_low_partitions", flow=f.name) == 1
            assert abs(sample(m, "sparkmirror_flow_retention_headroom_seconds", flow=f.name) - truth) < 5.0
            assert sample(m, "sparkmirror_topic_retention_headroom_seconds", flow=f.name, topic=forever) == math.inf
    finally:
        f.stop_heartbeats()
