"""Byte-exact MM2 record formats: hand-written vectors, round trips, malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.errors import RecordFormatError
from sparkmirror.model.records import (
    RECORD_TYPES,
    Checkpoint,
    Heartbeat,
    OffsetSync,
)

# Vectors written out by hand from MM2's Struct layout (big-endian, STRING = INT16
# length + UTF-8), not produced by our encoder.
HEARTBEAT = Heartbeat("A", "B", 1_700_000_000_000)
HEARTBEAT_KEY = bytes.fromhex("0001 41" "0001 42")
HEARTBEAT_VALUE = bytes.fromhex("0000" "0000018bcfe56800")  # version 0, 1700000000000 ms

CHECKPOINT = Checkpoint("my-group", "A.orders", 3, 1000, 990, "")
CHECKPOINT_KEY = bytes.fromhex(
    "0008" + b"my-group".hex() + "0008" + b"A.orders".hex() + "00000003"
)
CHECKPOINT_VALUE = bytes.fromhex("0000" "00000000000003e8" "00000000000003de" "0000")

OFFSET_SYNC = OffsetSync("orders", 7, 42, 40)
OFFSET_SYNC_KEY = bytes.fromhex("0006" + b"orders".hex() + "00000007")
OFFSET_SYNC_VALUE = bytes.fromhex("000000000000002a" "0000000000000028")

VECTORS = [
    (HEARTBEAT, HEARTBEAT_KEY, HEARTBEAT_VALUE),
    (CHECKPOINT, CHECKPOINT_KEY, CHECKPOINT_VALUE),
    (OFFSET_SYNC, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE),
]


@pytest.mark.parametrize(("record", "key", "value"), VECTORS, ids=lambda x: type(x).__name__)
def test_encodes_exact_mm2_bytes(record, key, value):
    assert record.encode_key() == key
    assert record.encode_value() == value


@pytest.mark.parametrize(("record", "key", "value"), VECTORS, ids=lambda x: type(x).__name__)
def test_decodes_exact_mm2_bytes(record, key, value):
    assert type(record).decode(key, value) == record


def test_value_sizes_match_mm2():
    assert len(HEARTBEAT.encode_value()) == 10
    assert len(OFFSET_SYNC.encode_value()) == 16
    assert len(CHECKPOINT.encode_value()) == 2 + 8 + 8 + 2


def test_checkpoint_metadata_and_non_ascii_strings():
    cp = Checkpoint("grüße", "A.t", 0, 5, 4, "meta")
    key = bytes.fromhex("0007" "6772c3bcc39f65" "0003" + b"A.t".hex() + "00000000")
    value = bytes.fromhex("0000" "0000000000000005" "0000000000000004" "0004" + b"meta".hex())
    assert cp.encode_key() == key
    assert cp.encode_value() == value
    assert Checkpoint.decode(key, value) == cp


def test_null_checkpoint_metadata_is_stored_as_empty_like_offset_and_metadata():
    cp = Checkpoint("g", "t", 0, 1, 1, None)  # type: ignore[arg-type]
    assert cp.metadata == ""
    assert cp.encode_value()[-2:] == b"\x00\x00"
    assert cp == Checkpoint("g", "t", 0, 1, 1)


def test_negative_numbers_are_twos_complement():
    sync = OffsetSync("t", -1, -1, -2)
    assert sync.encode_key()[-4:] == b"\xff\xff\xff\xff"
    assert sync.encode_value() == bytes.fromhex("ffffffffffffffff" "fffffffffffffffe")
    assert OffsetSync.decode(sync.encode_key(), sync.encode_value()) == sync


def test_json_dict_keys():
    assert HEARTBEAT.to_json_dict() == {"source": "A", "target": "B", "timestamp_ms": 1_700_000_000_000}
    assert CHECKPOINT.to_json_dict() == {
        "group": "my-group",
        "topic": "A.orders",
        "partition": 3,
        "upstream_offset": 1000,
        "downstream_offset": 990,
        "metadata": "",
    }
    assert OFFSET_SYNC.to_json_dict() == {
        "topic": "orders",
        "partition": 7,
        "upstream_offset": 42,
        "downstream_offset": 40,
    }


def test_registry():
    assert RECORD_TYPES == {"heartbeat": Heartbeat, "checkpoint": Checkpoint, "offset-sync": OffsetSync}


def test_trailing_bytes_are_ignored_like_mm2_schema_read():
    assert Heartbeat.decode(HEARTBEAT_KEY + b"\x01", HEARTBEAT_VALUE + b"\x00\x00") == HEARTBEAT
    assert Checkpoint.decode(CHECKPOINT_KEY + b"zz", CHECKPOINT_VALUE + b"zz") == CHECKPOINT
    assert OffsetSync.decode(OFFSET_SYNC_KEY + b"\x00", OFFSET_SYNC_VALUE + b"\x00") == OFFSET_SYNC


def test_accepts_bytearray_and_memoryview():
    assert Heartbeat.decode(bytearray(HEARTBEAT_KEY), memoryview(HEARTBEAT_VALUE)) == HEARTBEAT


# --- malformed input -------------------------------------------------------------

MALFORMED = [
    # (record class, key, value, words the message must contain)
    (Heartbeat, b"", HEARTBEAT_VALUE, ["heartbeat key", "sourceClusterAlias", "needs 2 bytes"]),
    (Heartbeat, b"\x00\x05AB", HEARTBEAT_VALUE, ["heartbeat key", "needs 5 bytes", "only 2 left"]),
    (Heartbeat, b"\x00\x01A", HEARTBEAT_VALUE, ["heartbeat key", "targetClusterAlias"]),
    (Heartbeat, b"\xff\xff" + HEARTBEAT_KEY, HEARTBEAT_VALUE, ["negative string length -1"]),
    (Heartbeat, b"\x00\x02\xff\xfe\x00\x01B", HEARTBEAT_VALUE, ["not valid UTF-8", "sourceClusterAlias"]),
    (Heartbeat, HEARTBEAT_KEY, b"", ["heartbeat value", "version"]),
    (Heartbeat, HEARTBEAT_KEY, HEARTBEAT_VALUE[:9], ["heartbeat value", "timestamp", "needs 8 bytes"]),
    (Heartbeat, HEARTBEAT_KEY, b"\x00\x01" + HEARTBEAT_VALUE[2:], ["heartbeat value", "version", "is 1"]),
    (Heartbeat, HEARTBEAT_KEY, b"\xff\xff" + HEARTBEAT_VALUE[2:], ["version", "is -1"]),
    (Checkpoint, CHECKPOINT_KEY[:-1], CHECKPOINT_VALUE, ["checkpoint key", "partition", "needs 4 bytes"]),
    (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:-1], ["checkpoint value", "metadata"]),
    (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:-2] + b"\x00\x03ab", ["metadata", "needs 3 bytes"]),
    (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:-2] + b"\x80\x00", ["metadata", "negative"]),
    (Checkpoint, CHECKPOINT_KEY, b"\x00\x02" + CHECKPOINT_VALUE[2:], ["checkpoint value", "version", "is 2"]),
    (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:-2] + b"\x00\x01\xc3", ["metadata", "UTF-8"]),
    (OffsetSync, OFFSET_SYNC_KEY[:3], OFFSET_SYNC_VALUE, ["offset-sync key", "topic"]),
    (OffsetSync, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE[:15], ["offset-sync value", "offset", "needs 8"]),
    (OffsetSync, OFFSET_SYNC_KEY, b"", ["offset-sync value", "upstreamOffset"]),
    (OffsetSync, None, OFFSET_SYNC_VALUE, ["offset-sync key", "null"]),
    (Checkpoint, CHECKPOINT_KEY, None, ["checkpoint value", "null"]),
    (Heartbeat, "000141000142", HEARTBEAT_VALUE, ["expected bytes", "str"]),
    (Heartbeat, 6, HEARTBEAT_VALUE, ["expected bytes", "int"]),
]


@pytest.mark.parametrize(("cls", "key", "value", "words"), MALFORMED)
def test_malformed_bytes_raise_one_line_record_format_error(cls, key, value, words):
    with pytest.raises(RecordFormatError) as info:
        cls.decode(key, value)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("malformed ")
    for word in words:
        assert word in message
    assert info.value.exit_code == 2


@given(st.binary(max_size=40), st.binary(max_size=40), st.sampled_from(list(RECORD_TYPES.values())))
def test_arbitrary_bytes_either_decode_or_raise_record_format_error(key, value, cls):
    try:
        record = cls.decode(key, value)
    except RecordFormatError:
        return
    # Whatever decodes re-encodes to a prefix of the input (trailing bytes are ignored).
    assert key.startswith(record.encode_key())
    assert value.startswith(record.encode_value())


# --- encoding limits --------------------------------------------------------------


def test_string_length_limit_is_int16():
    Heartbeat("a" * 32767, "b", 0).encode_key()
    with pytest.raises(RecordFormatError, match="32768 bytes"):
        Heartbeat("a" * 32768, "b", 0)
    with pytest.raises(RecordFormatError, match="group"):
        Checkpoint("é" * 16384, "t", 0, 0, 0)  # 32768 bytes in UTF-8


@pytest.mark.parametrize(
    "build",
    [
        lambda: OffsetSync("t", 2**31, 0, 0),
        lambda: OffsetSync("t", 0, 2**63, 0),
        lambda: Checkpoint("g", "t", 0, 0, -(2**63) - 1),
        lambda: Heartbeat("a", "b", 2**63),
        lambda: OffsetSync("t", True, 0, 0),
        lambda: OffsetSync(b"t", 0, 0, 0),
        lambda: Heartbeat("a", "b", 1.5),
        lambda: Heartbeat("\ud800", "b", 0),
    ],
)
def test_unrepresentable_values_are_refused_at_construction(build):
    with pytest.raises(RecordFormatError):
        build()


# --- round trips ------------------------------------------------------------------

names = st.text(max_size=60)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, int64)
def test_heartbeat_round_trip(source, target, ts):
    hb = Heartbeat(source, target, ts)
    assert Heartbeat.decode(hb.encode_key(), hb.encode_value()) == hb
    assert len(hb.encode_value()) == 10


@given(names, names, int32, int64, int64, names)
def test_checkpoint_round_trip(group, topic, partition, up, down, metadata):
    cp = Checkpoint(group, topic, partition, up, down, metadata)
    assert Checkpoint.decode(cp.encode_key(), cp.encode_value()) == cp
    assert cp.encode_value()[:2] == b"\x00\x00"


@given(names, int32, int64, int64)
def test_offset_sync_round_trip(topic, partition, up, down):
    sync = OffsetSync(topic, partition, up, down)
    assert OffsetSync.decode(sync.encode_key(), sync.encode_value()) == sync
    assert len(sync.encode_key()) == 2 + len(topic.encode()) + 4


def test_records_are_immutable_and_hashable():
    with pytest.raises(AttributeError):
        HEARTBEAT.timestamp_ms = 1  # type: ignore[misc]
    assert len({OFFSET_SYNC, OffsetSync("orders", 7, 42, 40)}) == 1
