"""The JSON log line format (pure: records formatted in memory)."""

from __future__ import annotations

import json
import logging
import sys

from sparkmirror.logsetup import JsonFormatter, _ContextFilter, log_context


def _format(msg, *args, exc_info=None, **extra):
    record = logging.LogRecord("sparkmirror.replicate", logging.WARNING, __file__, 1, msg, args, exc_info)
    for k, v in extra.items():
        setattr(record, k, v)
    _ContextFilter().filter(record)
    return json.loads(JsonFormatter().format(record))


def test_a_line_has_time_level_logger_message_and_thread():
    line = _format("copied %d records\nin one batch", 12)
    assert line["level"] == "WARNING" and line["logger"] == "sparkmirror.replicate"
    assert line["message"] == "copied 12 records\nin one batch"
    assert line["time"].endswith("Z") and len(line["time"]) == len("2026-01-01T00:00:00.000Z")
    assert "flow" not in line and "exception" not in line


def test_context_and_extra_fields_are_written_extra_wins():
    with log_context(flow="a->b", cluster="b"):
        line = _format("x", cluster="a", topic="orders", partition=3)
    assert (line["flow"], line["cluster"], line["topic"], line["partition"]) == ("a->b", "a", "orders", 3)
    assert "flow" not in _format("outside the block")


def test_an_exception_is_one_field_on_the_same_line():
    try:
        raise ValueError("boom")
    except ValueError:
        line = _format("failed", exc_info=sys.exc_info())
    assert "ValueError: boom" in line["exception"] and "Traceback" in line["exception"]


def test_librdkafka_lines_are_debug_only_carry_the_cluster_and_never_raise(caplog):
    """The one adapter both the replicator's clients and the monitor's pass to confluent-kafka."""
    from sparkmirror.logsetup import LibrdkafkaLog

    adapter = LibrdkafkaLog("librdkafka.dr", "dr")
    with caplog.at_level(logging.INFO, logger="librdkafka.dr"):
        adapter.log(3, "%s", "FAIL|rdkafka#producer-1| broker down")
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="librdkafka.dr"):
        adapter.log(7, "%s|%s", "FAIL", "broker down")
        adapter.log(7, "%s and %s", "only one argument")  # does not format: dropped, no exception
    [record] = caplog.records
    assert (record.levelno, record.getMessage(), record.cluster) == (logging.DEBUG, "FAIL|broker down", "dr")


def test_the_replicators_kafka_clients_log_through_the_adapter(caplog):
    from replicator.kafkaclients import client_conf
    from sparkmirror.model.parse import parse_config

    config = parse_config("clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n"
                          "a->b.enabled = true\n", "mm2.properties")
    with caplog.at_level(logging.DEBUG, logger="librdkafka.b"):
        client_conf(config, "b", "producer")["logger"].log(7, "%s", "CONNECT|rdkafka#producer-1| connecting")
    [record] = caplog.records
    assert (record.name, record.cluster) == ("librdkafka.b", "b")
