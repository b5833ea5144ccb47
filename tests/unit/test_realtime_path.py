"""The real-time path's pure decisions: producer settings, checkpoint interval, shards, fetches."""

from __future__ import annotations

import pytest

from replicator.datapath import realtime
from replicator.settings import MAX_SHARDS, ReplicatorSettings


def test_java_producer_keeps_order_without_idempotence():
    conf, notes = realtime.java_producer_config({"enable.idempotence": "false", "bootstrap.servers": "x:1"})
    assert conf["max.in.flight.requests.per.connection"] == "1"
    assert notes and "one request in flight" in notes[0]
    conf, notes = realtime.java_producer_config({"bootstrap.servers": "x:1"})
    assert conf["enable.idempotence"] == "true" and conf["acks"] == "all" and not notes


def test_batch_size_is_capped_by_the_smallest_target_topic_limit():
    conf, _ = realtime.java_producer_config({})
    assert realtime.cap_batch_size(conf, {}) is None
    assert realtime.cap_batch_size(conf, {"a.big": 2_000_000, "a.default": 1_048_588}) is None
    assert conf["batch.size"] == "1048576"
    note = realtime.cap_batch_size(conf, {"a.big": 2_000_000, "a.small": 2000, "a.mid": 50_000})
    assert conf["batch.size"] == "2000"
    assert "a.small" in note and "1048576" in note and "2000" in note
    # the user's own smaller batch.size stays
    conf, _ = realtime.java_producer_config({"batch.size": "1000"})
    assert realtime.cap_batch_size(conf, {"a.small": 2000}) is None and conf["batch.size"] == "1000"


def test_checkpoint_interval_option_sets_the_trigger_and_a_clean_stop_waits_for_one_boundary():
    default = ReplicatorSettings()
    # a boundary every five minutes in local mode (the journal bounds a kill -9's replay); on a
    # cluster, where a clean stop waits for the next boundary, one within Kubernetes' 30-s grace
    assert default.real_time_trigger(local=True) == "300 seconds"
    assert default.real_time_trigger(local=False) == "25 seconds"
    assert realtime.stop_wait_seconds(10.0, default.checkpoint_interval(False)) == 27.0 < 30
    thirty = ReplicatorSettings(real_time_checkpoint_interval=30)
    assert thirty.real_time_trigger(local=True) == thirty.real_time_trigger(local=False) == "30 seconds"
    # a 30-s interval: the stop waits long enough for the next boundary, not only 10 s
    assert realtime.stop_wait_seconds(10.0, thirty.checkpoint_interval(False)) == 32.0
    seven = ReplicatorSettings(real_time_checkpoint_interval=7.5)
    assert seven.real_time_trigger(local=False) == "7.5 seconds" and realtime.stop_wait_seconds(10.0, 7.5) == 10.0


@pytest.mark.parametrize("field, value, flag", [
    *[("real_time_checkpoint_interval", seconds, "--real-time-checkpoint-interval")
      for seconds in (4.9, 0, -5, float("nan"), float("inf"))],  # below Spark's minimum, or no number
    *[("real_time_shards", n, "--real-time-shards") for n in (0, -1, MAX_SHARDS + 1)],
])
def test_real_time_options_out_of_range_are_a_usage_error(field, value, flag):
    from sparkmirror.errors import UsageError

    with pytest.raises(UsageError) as info:
        ReplicatorSettings(**{field: value})
    assert info.value.exit_code == 2 and flag in str(info.value)


def test_real_time_options_out_of_range_stop_the_command_before_spark(tmp_path, capsys):
    """Through the command line: exit 2, one line naming the option."""
    from sparkmirror_cli.main import main

    config = tmp_path / "mm2.properties"
    config.write_text("clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\n"
                      "a->b.enabled = true\n")
    assert main(["replicate", str(config), "--real-time-shards", "17", "--metrics-listen", "off"]) == 2
    assert "--real-time-shards 17: must be between 1 and 16" in capsys.readouterr().err


def test_a_stop_waits_for_a_checkpoint_only_where_the_driver_cannot_read_the_writers():
    from replicator.datapath.runner import GRACEFUL_STOP_S, stop_grace

    assert stop_grace(real_time=True, interval=60.0, local=True) == GRACEFUL_STOP_S
    assert stop_grace(real_time=True, interval=60.0, local=False) == 62.0
    assert stop_grace(real_time=False, interval=60.0, local=False) == GRACEFUL_STOP_S


def test_real_time_source_fetches_wait_for_64_kb_or_20_ms_unless_the_config_says_otherwise():
    from sparkmirror.model.clients import spark_kafka_options

    plain = realtime.source_options(spark_kafka_options({"bootstrap.servers": "a:9092"}))
    assert plain["kafka.fetch.min.bytes"] == "65536"
    assert plain["kafka.fetch.max.wait.ms"] == "20"
    assert plain["kafka.bootstrap.servers"] == "a:9092"
    own = realtime.source_options(spark_kafka_options({"bootstrap.servers": "a:9092", "fetch.min.bytes": "1"}))
    assert own["kafka.fetch.min.bytes"] == "1"
    assert own["kafka.fetch.max.wait.ms"] == "20"
