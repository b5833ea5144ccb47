"""``sparkmirror decode``: show what one MM2 internal record says.

When a checkpoint looks wrong or a heartbeat seems stuck, the first question is
what the bytes on the internal topic actually contain. This decodes a key and a
value given as hex (as printed by kcat or a console consumer with a hex
formatter) with the same byte-exact decoders the replicator and monitor use, and
prints one JSON object, so it works with ``jq`` and in scripts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from sparkmirror.errors import UsageError
from sparkmirror.model.records import RECORD_TYPES

_HEX_NOISE = re.compile(r"[\s:]")

_EPILOG = """\
record layouts (MM2's, big-endian; STRING = INT16 length + UTF-8):
  heartbeat    key: source STRING, target STRING
               value: version INT16 (0), timestamp INT64
  checkpoint   key: group STRING, topic STRING, partition INT32
               value: version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING
  offset-sync  key: topic STRING, partition INT32
               value: upstreamOffset INT64, offset INT64

example:
  sparkmirror decode heartbeat 000141000142 00000000018bcfe56800
  {"source": "A", "target": "B", "timestamp_ms": 1700000000000}

exit status: 0 decoded, 2 the hex or the record bytes are malformed.
"""


def _parse_hex(text: str, name: str) -> bytes:
    cleaned = _HEX_NOISE.sub("", text)
    if cleaned[:2].lower() == "0x":
        cleaned = cleaned[2:]
    try:
        return bytes.fromhex(cleaned)
    except ValueError as exc:
        raise UsageError(
            f"{name} is not hex ({exc})",
            hint="give the raw bytes as hex digits, e.g. 000141000142",
        ) from None


def run(args: argparse.Namespace) -> int:
    record_class = RECORD_TYPES[args.record_type]
    key = _parse_hex(args.key_hex, "KEY_HEX")
    value = _parse_hex(args.value_hex, "VALUE_HEX")
    record = record_class.decode(key, value)
    sys.stdout.write(json.dumps(record.to_json_dict()) + "\n")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "decode",
        help="decode one MM2 heartbeat, checkpoint or offset-sync record from hex",
        description=(
            "Decode one record of an MM2 internal topic (heartbeats, <alias>.checkpoints.internal, "
            "mm2-offset-syncs.<alias>.internal) from its key and value bytes given as hex, and "
            "print it as one JSON object. Whitespace, colons and a 0x prefix in the hex are ignored."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "record_type",
        choices=list(RECORD_TYPES),
        metavar="{" + "|".join(RECORD_TYPES) + "}",
        help="which MM2 record format the bytes are in",
    )
    parser.add_argument("key_hex", metavar="KEY_HEX", help="the record key, as hex")
    parser.add_argument("value_hex", metavar="VALUE_HEX", help="the record value, as hex")
    parser.set_defaults(func=run)
