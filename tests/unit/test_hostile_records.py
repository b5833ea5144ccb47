"""Hostile bytes on the internal topics: decoders, the decode command, and the monitor's pipeline behind them.

Anyone who can write to ``A.heartbeats``, ``A.checkpoints.internal`` or
``mm2-offset-syncs.B.internal`` can put any bytes there. Every decoder must
either return a record or raise RecordFormatError (which the monitor counts
and the CLI prints as one line), never another exception. Bytes that *do*
decode can still be absurd (a heartbeat from the year 292 million, a negative
partition, an offset-sync pointing before zero): the monitor's state,
evaluator and exporters must survive those too, since they come from the same
untrusted topics.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.evaluator import EvaluatorSettings, evaluate
from monitor.exporters.api import status_document
from monitor.exporters.page import page
from monitor.exporters.prometheus import build_registry, render
from monitor.state import OffsetsRow
from sparkmirror_cli.main import main
from sparkmirror.errors import RecordFormatError
from sparkmirror.model.records import RECORD_TYPES, Checkpoint, Heartbeat, OffsetSync
from tests.support.evaluator import FLOW, make_state

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
# Strings as MM2 frames them, but with hostile lengths and bytes: negative, past the end, invalid
# UTF-8, lone surrogates encoded as UTF-8 (CESU), overlong forms, NUL, control characters.
hostile_utf8 = st.sampled_from([b"", b"\x00", b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x80\xae", b"\x1b[2J",
                                b"A" * 300, "é中😀".encode()])


@st.composite
def framed_string(draw) -> bytes:
    body = draw(st.one_of(hostile_utf8, st.binary(max_size=64)))
    length = draw(st.one_of(st.just(len(body)), st.integers(-(2**15), 2**15 - 1)))
    return INT16.pack(length) + body


def fields(*parts) -> st.SearchStrategy[bytes]:
    return st.tuples(*parts).map(b"".join)


version = st.one_of(st.just(b"\x00\x00"), st.integers(-(2**15), 2**15 - 1).map(INT16.pack), st.binary(max_size=2))
i32 = int32.map(INT32.pack)
i64 = int64.map(INT64.pack)
tail = st.binary(max_size=8)
SHAPED = {  # near-valid keys and values: the right fields, hostile contents, truncated or padded
    Heartbeat: (fields(framed_string(), framed_string(), tail), fields(version, i64, tail)),
    Checkpoint: (fields(framed_string(), framed_string(), i32, tail), fields(version, i64, i64, framed_string(), tail)),
    OffsetSync: (fields(framed_string(), i32, tail), fields(i64, i64, tail)),
}


def truncated(data: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.tuples(data, st.integers(0, 80)).map(lambda t: t[0][: t[1]])


def any_bytes(cls) -> st.SearchStrategy[bytes | None]:
    key, value = SHAPED[cls]
    return st.one_of(st.none(), st.binary(max_size=200), key, value, truncated(key), truncated(value))


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(RECORD_TYPES.values())).flatmap(lambda cls: st.tuples(
    st.just(cls), any_bytes(cls), any_bytes(cls))))
def test_every_decoder_returns_a_record_or_raises_record_format_error(case):
    cls, key, value = case
    try:
        record = cls.decode(key, value)
    except RecordFormatError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("malformed ")
        return
    assert isinstance(record, cls)
    assert cls.decode(record.encode_key(), record.encode_value()) == record  # what decodes re-encodes
    json.dumps(record.to_json_dict())


@settings(max_examples=150)
@given(st.sampled_from(list(RECORD_TYPES)), st.binary(max_size=60), st.binary(max_size=60))
def test_decode_command_exits_0_or_2_never_a_traceback(record_type, key, value):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["decode", record_type, key.hex(), value.hex()])
    assert code in (0, 2), err.getvalue()
    if code == 0:
        json.loads(out.getvalue())
    else:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()


# --- decodable but absurd: what the monitor does with it --------------------------------------------

names = st.text(max_size=20)
record_time = st.one_of(int64, st.just(-1), st.just(0))
heartbeats = st.builds(Heartbeat, names, names, int64)
checkpoints = st.builds(Checkpoint, names, names, int32, int64, int64, names)
syncs = st.builds(OffsetSync, st.sampled_from(["orders", "x"]), st.integers(-3, 3), int64, int64)
offsets = st.one_of(st.none(), int64)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(heartbeats, st.one_of(st.none(), st.floats(-1e12, 1e12))), max_size=4),
       st.lists(st.tuples(checkpoints, record_time), max_size=4),
       st.lists(st.tuples(syncs, record_time), max_size=6),
       st.lists(st.tuples(offsets, offsets, offsets), max_size=3),
       st.dictionaries(names, st.dictionaries(st.tuples(st.just("orders"), st.integers(-2, 2)), int64, max_size=2),
                       max_size=2))
def test_monitor_survives_absurd_records_that_decode(beats, cps, sync_records, ends, groups):
    state, clock = make_state()
    for hb, append_time in beats:
        state.add_heartbeat(FLOW, hb, append_time)
    for cp, ts in cps:
        state.add_checkpoint(FLOW, cp, ts)
    for sync, ts in sync_records:
        state.add_sync(FLOW, sync, ts)
    state.set_group_offsets(FLOW, groups)
    for i, (start, end, target_end) in enumerate(ends):
        sync = state.flows[FLOW].syncs.get(("orders", i))
        state.record_offsets(FLOW, [OffsetsRow("orders", i, "a.orders", start, end, target_end, sync)], at=clock.now)
    ev = evaluate(state, clock.now, EvaluatorSettings(window=3))
    text = render(build_registry(lambda: ev, "test")).decode()
    assert "sparkmirror_" in text
    for detail in ("summary", "partitions"):
        json.dumps(status_document(ev, detail))
    html = page(status_document(ev, "summary"), None)
    assert html.startswith("<!doctype html>")
