"""The three MM2 internal record formats, byte for byte.

sparkmirror writes heartbeats, checkpoints and offset-syncs that Apache MM2 (and
its tools, e.g. RemoteClusterUtils) must read, and the monitor reads the ones a
real MM2 writes, so the bytes follow MM2's ``org.apache.kafka.common.protocol.types``
Struct/Schema encoding exactly (Heartbeat.java, Checkpoint.java in
connect/mirror-client, OffsetSync.java in connect/mirror):

- integers are big-endian and signed (INT16, INT32, INT64);
- STRING is an INT16 length followed by that many UTF-8 bytes; the length may not
  be negative (MM2's ``Type.STRING`` is not nullable) and at most 32767;
- heartbeat and checkpoint values start with an INT16 version header (0); the
  offset-sync value has no version.

Decoding mirrors MM2's ``Schema.read`` where that is deliberate and is stricter
where MM2 only behaves by accident:

- trailing bytes after the last field are ignored, as ``Schema.read`` does (it
  never checks ``buffer.remaining()``), so a record with appended fields still
  decodes;
- an unknown value version is rejected. MM2 only has ``assert version == 0``,
  which is a no-op on a JVM without ``-ea`` (a newer version would be read as if it
  were version 0) and an AssertionError with it; guessing a layout we do not know
  is worse than saying so;
- a negative or overlong STRING length is rejected, as in MM2;
- invalid UTF-8 is rejected. MM2 decodes with ``new String(bytes, UTF_8)``, which
  silently substitutes U+FFFD; MM2 itself never writes invalid UTF-8, so such bytes
  mean the record is not what the topic claims.

A null checkpoint metadata cannot be written by MM2 (STRING is not nullable);
MM2 never has one because ``OffsetAndMetadata`` turns null metadata into ``""``.
``Checkpoint`` does the same, so metadata is always encoded as a (possibly empty)
STRING.

Every problem is raised as RecordFormatError with one line naming the record type,
the part (key or value), the field and what was wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from sparkmirror.errors import RecordFormatError

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_STRING_BYTES = INT16_MAX

#: The only value version MM2 has ever written for heartbeats and checkpoints.
VALUE_VERSION = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class _Reader:
    """Sequential reader over one key or value, with MM2-style field errors."""

    def __init__(self, record_type: str, part: str, data: object) -> None:
        if data is None:
            raise RecordFormatError(f"malformed {record_type} {part}: {part} is null")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise RecordFormatError(
                f"malformed {record_type} {part}: expected bytes, got {type(data).__name__}"
            )
        self._data = bytes(data)
        self._pos = 0
        self._where = f"{record_type} {part}"

    def _fail(self, field: str, problem: str) -> RecordFormatError:
        return RecordFormatError(f"malformed {self._where}: field '{field}' {problem}")

    def _take(self, field: str, size: int) -> bytes:
        left = len(self._data) - self._pos
        if size > left:
            raise self._fail(
                field, f"needs {size} bytes at byte {self._pos}, only {left} left"
            )
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self, field: str) -> int:
        return _INT16.unpack(self._take(field, 2))[0]

    def int32(self, field: str) -> int:
        return _INT32.unpack(self._take(field, 4))[0]

    def int64(self, field: str) -> int:
        return _INT64.unpack(self._take(field, 8))[0]

    def string(self, field: str) -> str:
        length = self.int16(field)
        if length < 0:
            raise self._fail(field, f"has negative string length {length}")
        raw = self._take(field, length)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(
                field, f"is not valid UTF-8 (byte {exc.start} of the string)"
            ) from exc

    def version(self, field: str = "version") -> int:
        version = self.int16(field)
        if version != VALUE_VERSION:
            raise self._fail(
                field,
                f"is {version}; only version {VALUE_VERSION} is known "
                "(the record was written by a newer or foreign writer)",
            )
        return version


def _string_bytes(record_type: str, field: str, value: str) -> bytes:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordFormatError(
            f"cannot encode {record_type}: {field} is not encodable as UTF-8 ({exc.reason})"
        ) from exc
    if len(raw) > MAX_STRING_BYTES:
        raise RecordFormatError(
            f"cannot encode {record_type}: {field} is {len(raw)} bytes in UTF-8, "
            f"MM2's STRING holds at most {MAX_STRING_BYTES}"
        )
    return _INT16.pack(len(raw)) + raw


def _check_str(record_type: str, field: str, value: object) -> None:
    if not isinstance(value, str):
        raise RecordFormatError(
            f"cannot build {record_type}: {field} must be a str, got {type(value).__name__}"
        )
    _string_bytes(record_type, field, value)


def _check_int(record_type: str, field: str, value: object, low: int, high: int) -> None:
    # bool is an int subclass; True as a partition number is always a bug.
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordFormatError(
            f"cannot build {record_type}: {field} must be an int, got {type(value).__name__}"
        )
    if not low <= value <= high:
        raise RecordFormatError(
            f"cannot build {record_type}: {field}={value} is outside [{low}, {high}]"
        )


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Written every emit.heartbeats.interval.seconds into ``heartbeats``.

    Key: sourceClusterAlias STRING, targetClusterAlias STRING.
    Value: version INT16 (0), timestamp INT64 (epoch ms) — always 10 bytes.
    """

    source: str
    target: str
    timestamp_ms: int

    RECORD_TYPE: ClassVar[str] = "heartbeat"

    def __post_init__(self) -> None:
        _check_str(self.RECORD_TYPE, "source", self.source)
        _check_str(self.RECORD_TYPE, "target", self.target)
        _check_int(self.RECORD_TYPE, "timestamp_ms", self.timestamp_ms, INT64_MIN, INT64_MAX)

    def encode_key(self) -> bytes:
        return _string_bytes(self.RECORD_TYPE, "source", self.source) + _string_bytes(
            self.RECORD_TYPE, "target", self.target
        )

    def encode_value(self) -> bytes:
        return _INT16.pack(VALUE_VERSION) + _INT64.pack(self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Self:
        k = _Reader(cls.RECORD_TYPE, "key", key)
        source = k.string("sourceClusterAlias")
        target = k.string("targetClusterAlias")
        v = _Reader(cls.RECORD_TYPE, "value", value)
        v.version()
        timestamp = v.int64("timestamp")
        return cls(source, target, timestamp)

    def to_json_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "timestamp_ms": self.timestamp_ms}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consumer group's position translated to the target, in ``<src>.checkpoints.internal``.

    Key: group STRING, topic STRING (the target-side, renamed topic), partition INT32.
    Value: version INT16 (0), upstreamOffset INT64, offset INT64 (downstream),
    metadata STRING. ``metadata=None`` is stored as ``""``, as Kafka's
    OffsetAndMetadata does, because MM2 cannot encode a null STRING.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    RECORD_TYPE: ClassVar[str] = "checkpoint"

    def __post_init__(self) -> None:
        if self.metadata is None:
            object.__setattr__(self, "metadata", "")
        _check_str(self.RECORD_TYPE, "group", self.group)
        _check_str(self.RECORD_TYPE, "topic", self.topic)
        _check_int(self.RECORD_TYPE, "partition", self.partition, INT32_MIN, INT32_MAX)
        _check_int(
            self.RECORD_TYPE, "upstream_offset", self.upstream_offset, INT64_MIN, INT64_MAX
        )
        _check_int(
            self.RECORD_TYPE, "downstream_offset", self.downstream_offset, INT64_MIN, INT64_MAX
        )
        _check_str(self.RECORD_TYPE, "metadata", self.metadata)

    def encode_key(self) -> bytes:
        return (
            _string_bytes(self.RECORD_TYPE, "group", self.group)
            + _string_bytes(self.RECORD_TYPE, "topic", self.topic)
            + _INT32.pack(self.partition)
        )

    def encode_value(self) -> bytes:
        return (
            _INT16.pack(VALUE_VERSION)
            + _INT64.pack(self.upstream_offset)
            + _INT64.pack(self.downstream_offset)
            + _string_bytes(self.RECORD_TYPE, "metadata", self.metadata)
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Self:
        k = _Reader(cls.RECORD_TYPE, "key", key)
        group = k.string("group")
        topic = k.string("topic")
        partition = k.int32("partition")
        v = _Reader(cls.RECORD_TYPE, "value", value)
        v.version()
        upstream = v.int64("upstreamOffset")
        downstream = v.int64("offset")
        metadata = v.string("metadata")
        return cls(group, topic, partition, upstream, downstream, metadata)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "topic": self.topic,
            "partition": self.partition,
            "upstream_offset": self.upstream_offset,
            "downstream_offset": self.downstream_offset,
            "metadata": self.metadata,
        }


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Upstream offset U of ``topic``/``partition`` was written at downstream offset D.

    Key: topic STRING (the upstream name), partition INT32.
    Value: upstreamOffset INT64, offset INT64 — 16 bytes, no version header.
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    RECORD_TYPE: ClassVar[str] = "offset-sync"

    def __post_init__(self) -> None:
        _check_str(self.RECORD_TYPE, "topic", self.topic)
        _check_int(self.RECORD_TYPE, "partition", self.partition, INT32_MIN, INT32_MAX)
        _check_int(
            self.RECORD_TYPE, "upstream_offset", self.upstream_offset, INT64_MIN, INT64_MAX
        )
        _check_int(
            self.RECORD_TYPE, "downstream_offset", self.downstream_offset, INT64_MIN, INT64_MAX
        )

    def encode_key(self) -> bytes:
        return _string_bytes(self.RECORD_TYPE, "topic", self.topic) + _INT32.pack(self.partition)

    def encode_value(self) -> bytes:
        return _INT64.pack(self.upstream_offset) + _INT64.pack(self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Self:
        k = _Reader(cls.RECORD_TYPE, "key", key)
        topic = k.string("topic")
        partition = k.int32("partition")
        v = _Reader(cls.RECORD_TYPE, "value", value)
        upstream = v.int64("upstreamOffset")
        downstream = v.int64("offset")
        return cls(topic, partition, upstream, downstream)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "upstream_offset": self.upstream_offset,
            "downstream_offset": self.downstream_offset,
        }


#: Name used on the command line and in logs -> record class.
RECORD_TYPES: dict[str, type[Heartbeat] | type[Checkpoint] | type[OffsetSync]] = {
    "heartbeat": Heartbeat,
    "checkpoint": Checkpoint,
    "offset-sync": OffsetSync,
}
