"""The replicator's reader of internal topics (offset-syncs for checkpoints, checkpoints for
group offset sync) reads each round up to the end it saw when the round began. Records
written meanwhile that the same fetch returns belong to the next round: none may be lost
between two rounds, whatever the timing (a skipped offset-sync makes every later checkpoint
of that partition imprecise for as long as the replicator runs)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from sparkmirror.configfile import load_config
from replicator.control.offsetsyncs_reader import InternalTopicReader, OffsetSyncsReader
from sparkmirror.model.records import OffsetSync
from tests.support.kafka import create_topic
from tests.support.replicator import write_config

pytestmark = [pytest.mark.kafka]


class _EndSeenEarly:
    """The reader's own consumer, answering the high watermark as it was ``behind`` records ago:
    the records after it were written between the watermark request and the fetch."""

    def __init__(self, consumer, behind: int) -> None:
        self._consumer, self.behind = consumer, behind

    def get_watermark_offsets(self, tp, *args, **kwargs):
        low, high = self._consumer.get_watermark_offsets(tp, *args, **kwargs)
        return low, max(low, high - self.behind)

    def __getattr__(self, name):
        return getattr(self._consumer, name)


def _write_syncs(bootstrap: str, topic: str, upstream: range) -> None:
    """One sync per upstream offset, each on a line of its own (as after gaps): none can stand
    in for another."""
    p = Producer({"bootstrap.servers": bootstrap})
    for u in upstream:
        s = OffsetSync("orders", 0, u, u // 10)
        p.produce(topic, key=s.encode_key(), value=s.encode_value(), partition=0)
    assert p.flush(30) == 0


def test_records_written_after_a_rounds_end_are_read_by_the_next_round(kafka_clusters, unique, tmp_path):
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    config = load_config(write_config(tmp_path / "mm2.properties", primary, dr))
    topic = f"syncs-{unique}"
    create_topic(primary, topic, 1)
    _write_syncs(primary, topic, range(0, 100))

    reader = InternalTopicReader(config, "primary", topic)
    try:
        reader._consumer = _EndSeenEarly(reader._consumer, behind=40)
        first = [r.offset for r in reader.read(30)]
        reader._consumer.behind = 0
        second = [r.offset for r in reader.read(30)]
    finally:
        reader.close()
    assert first[:60] == list(range(60))
    assert sorted(first + second) == list(range(100)), "records between two rounds were lost or read twice"


def test_the_checkpoints_syncs_reader_keeps_every_sync_written_during_a_round(kafka_clusters, unique, tmp_path):
    # aliases of this test's own for the session's two clusters: an offset-syncs topic no other
    # test writes to (mm2-offset-syncs.<target alias>.internal)
    src, dst = f"src{unique}", f"dst{unique}"
    (tmp_path / "mm2.properties").write_text(
        f"clusters = {src}, {dst}\n{src}.bootstrap.servers = {kafka_clusters.primary.bootstrap}\n"
        f"{dst}.bootstrap.servers = {kafka_clusters.dr.bootstrap}\n{src}->{dst}.enabled = true\n")
    config = load_config(tmp_path / "mm2.properties")
    flow = config.flow(src, dst)
    reader = OffsetSyncsReader(config, flow)
    primary = kafka_clusters.primary.bootstrap
    assert reader.cluster == src and reader.topic == f"mm2-offset-syncs.{dst}.internal"
    topic = reader.topic
    create_topic(primary, topic, 1)
    _write_syncs(primary, topic, range(0, 1000, 10))
    try:
        reader._reader._consumer = _EndSeenEarly(reader._reader._consumer, behind=30)
        reader.catch_up(30)
        reader._reader._consumer.behind = 0
        reader.catch_up(30)
    finally:
        reader.close()
    # every sync is there: a committed offset just past one translates right after it
    assert [reader.translate("orders", 0, u + 5) for u in range(0, 1000, 10)] == \
        [u // 10 + 1 for u in range(0, 1000, 10)]
