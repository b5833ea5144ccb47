"""The monitor's log lines carry the cluster, flow, topic and partition they are about (--log-format json)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from monitor.collectors.cluster import ClusterClient, ClusterUnavailable
from monitor.collectors.periodic import refresh_forever
from monitor.collectors.records import decode_or_count
from monitor.collectors.tail import TailedRecord
from sparkmirror.logsetup import JsonFormatter, LibrdkafkaLog
from sparkmirror.model.records import Heartbeat
from tests.support.evaluator import FLOW, make_state


def lines(caplog) -> list[dict]:
    return [json.loads(JsonFormatter().format(r)) for r in caplog.records]


def test_an_undecodable_record_is_logged_with_its_cluster_topic_and_partition(caplog):
    state, _ = make_state()
    bad = TailedRecord(3, 17, b"\x00", b"\x01", 0, 0, True, 0.0)
    with caplog.at_level(logging.WARNING):
        assert decode_or_count(state, "b", "a.heartbeats", Heartbeat, bad) is None
    [line] = lines(caplog)
    assert (line["cluster"], line["topic"], line["partition"]) == ("b", "a.heartbeats", 3), line


def test_a_cluster_going_down_and_coming_back_is_logged_with_the_cluster(caplog):
    state, _ = make_state()
    client = ClusterClient("a", {"bootstrap.servers": "127.0.0.1:1"}, {"bootstrap.servers": "127.0.0.1:1"}, state)

    def fail():
        raise OSError("connection refused")

    async def go():
        with pytest.raises(ClusterUnavailable):
            await client.call(fail)
        await client.call(lambda: None)

    try:
        with caplog.at_level(logging.INFO):
            asyncio.run(go())
    finally:
        client.shutdown()
    found = [(line["message"].split(":")[0], line.get("cluster")) for line in lines(caplog)
             if line["logger"] == "monitor.collectors.cluster"]
    assert found == [("cluster a unreachable", "a"), ("cluster a reachable again", "a")], found


def test_librdkafkas_own_lines_carry_the_cluster(caplog):
    with caplog.at_level(logging.DEBUG, logger="monitor.librdkafka"):
        LibrdkafkaLog("monitor.librdkafka.dr", "dr").log(7, "%s", "FAIL|rdkafka#consumer-1| broker down")
    [line] = lines(caplog)
    assert line["cluster"] == "dr"


def test_a_failing_refresh_is_logged_with_its_flow(caplog):
    state, _ = make_state()

    async def refresh():
        raise ValueError("a bug")

    async def go():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(refresh_forever(refresh, 60, state, FLOW, "offsets", "refreshing",
                                                   logging.getLogger("monitor.collectors.offsets")), 0.5)

    with caplog.at_level(logging.WARNING):  # a first failure is a warning (monitor.loops)
        asyncio.run(go())
    [line] = lines(caplog)
    assert line["flow"] == FLOW and "ValueError: a bug" in line["exception"]
