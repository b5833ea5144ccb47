"""One record as the audit compares it: offset, a digest of key, value and headers, the timestamp.

The digest stands for the bytes (BLAKE2b over length-prefixed fields, so a null and
an empty key differ and no two fields can run into each other). Timestamps are kept
apart: they are compared only where both records carry CreateTime, because MM2 does
not copy ``message.timestamp.type`` and a LogAppendTime mirror stamps its own time.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

#: confluent_kafka.TIMESTAMP_CREATE_TIME (not imported: this module stays free of the client)
CREATE_TIME = 1

_LEN = struct.Struct(">i")


def _field(h, data: bytes | None) -> None:
    if data is None:
        h.update(_LEN.pack(-1))
    else:
        h.update(_LEN.pack(len(data)))
        h.update(data)


def content_digest(key: bytes | None, value: bytes | None,
                   headers: list[tuple[str, bytes | None]] | None) -> bytes:
    """16 bytes standing for a record's key, value and headers (their order included)."""
    h = hashlib.blake2b(digest_size=16)
    _field(h, key)
    _field(h, value)
    for name, data in headers or ():
        _field(h, name.encode("utf-8"))
        _field(h, data)
    return h.digest()


def key_digest(key: bytes | None) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    _field(h, key)
    return h.digest()


@dataclass(frozen=True, slots=True)
class Seen:
    """One record read on either side."""

    offset: int
    digest: bytes      # content_digest
    key: bytes         # key_digest, for compacted topics
    ts_type: int
    timestamp: int
    size: int          # bytes of key, value and headers: what the read cost

    def identity(self, with_time: bool) -> tuple[bytes, int | None]:
        return self.digest, self.timestamp if with_time else None


def seen(offset: int, key: bytes | None, value: bytes | None, headers, ts_type: int, timestamp: int) -> Seen:
    size = len(key or b"") + len(value or b"") + sum(len(n) + len(v or b"") for n, v in headers or ())
    return Seen(offset, content_digest(key, value, headers), key_digest(key), ts_type, timestamp, size)


def compare_times(source: list[Seen], target: list[Seen]) -> bool:
    """Timestamps count only when every record of both ranges carries CreateTime."""
    return all(r.ts_type == CREATE_TIME for r in source) and all(r.ts_type == CREATE_TIME for r in target)
