"""Shared by the three internal-topic collectors: decode a tailed record or count it as garbage."""

from __future__ import annotations

import logging

from monitor.collectors.tail import TailedRecord
from monitor.state import MonitorState
from sparkmirror.errors import RecordFormatError

log = logging.getLogger(__name__)


def decode_or_count(state: MonitorState, cluster: str, topic: str, record_cls, record: TailedRecord):
    """The decoded record, or None after counting the error (logged once per topic)."""
    try:
        return record_cls.decode(record.key, record.value)
    except RecordFormatError as exc:
        if state.decode_error(cluster, topic, record_cls.RECORD_TYPE):
            log.warning("skipping undecodable %s in %s on %s (partition %d, offset %d): %s; further ones in "
                        "this topic are only counted in sparkmirror_decode_errors_total",
                        record_cls.RECORD_TYPE, topic, cluster, record.partition, record.offset, exc,
                        extra={"cluster": cluster, "topic": topic, "partition": record.partition})
        return None
