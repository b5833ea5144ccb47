"""``sparkmirror inspect``: the decoded records of a live MM2 internal topic.

Reads heartbeats (``heartbeats``, ``A.heartbeats``), checkpoints
(``A.checkpoints.internal``) or offset-syncs (``mm2-offset-syncs.B.internal``)
from a cluster of the configuration and prints each record with its partition,
offset and timestamp — as text, or one JSON object per line with ``--json``
(``{"partition", "offset", "timestamp_ms", "type", "record": {...}}``; the
decoded fields are nested because a checkpoint or offset-sync has a partition
field of its own).
The record type follows from the topic name under the flows' replication
policy. A record that does not decode is printed as an error line with its raw
bytes; it never stops the listing. Works the same on topics written by Apache MM2.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone

from sparkmirror.errors import ClusterError, RecordFormatError, UsageError
from sparkmirror.model.records import RECORD_TYPES

_EPILOG = """\
exit status: 0 listed (undecodable records are listed as errors and counted on stderr),
             1 the cluster or topic cannot be read, 2 bad command line or configuration.

examples:
  sparkmirror inspect mm2.properties --cluster dr --topic primary.checkpoints.internal --json
  sparkmirror inspect mm2.properties --cluster primary --topic mm2-offset-syncs.dr.internal --limit 20
"""


def _policies(config, cluster: str) -> list:
    flows = [f for f in config.flows if cluster in (f.source, f.target)] or list(config.flows)
    seen, out = set(), []
    for f in flows:
        key = (f.replication_policy_class, f.replication_policy_separator, f.internal_topic_separator_enabled)
        if key not in seen:
            seen.add(key)
            out.append(f.policy)
    if not out:
        from sparkmirror.model.policy import DefaultReplicationPolicy

        out.append(DefaultReplicationPolicy())
    return out


def record_type_of(config, cluster: str, topic: str) -> str | None:
    """``heartbeat``, ``checkpoint`` or ``offset-sync`` for an MM2 internal topic name, else None."""
    for policy in _policies(config, cluster):
        if policy.is_heartbeats_topic(topic):
            return "heartbeat"
        if policy.is_checkpoints_topic(topic):
            return "checkpoint"
        if any(policy.offset_syncs_topic(alias) == topic for alias in config.clusters):
            return "offset-sync"
        prefix = policy.offset_syncs_topic("\0").split("\0")[0]
        suffix = policy.offset_syncs_topic("\0").split("\0")[1]
        if topic.startswith(prefix) and topic.endswith(suffix) and len(topic) > len(prefix) + len(suffix):
            return "offset-sync"
    return None


def _iso(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace(
            "+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _text(record_type: str, fields: dict) -> str:
    if record_type == "heartbeat":
        return f"heartbeat {fields['source']}->{fields['target']} at {_iso(fields['timestamp_ms'])}"
    if record_type == "checkpoint":
        meta = f" metadata={fields['metadata']!r}" if fields["metadata"] else ""
        return (f"checkpoint group={fields['group']} {fields['topic']}[{fields['partition']}] "
                f"upstream={fields['upstream_offset']} downstream={fields['downstream_offset']}{meta}")
    return (f"offset-sync {fields['topic']}[{fields['partition']}] upstream={fields['upstream_offset']} "
            f"downstream={fields['downstream_offset']}")


def run(args: argparse.Namespace) -> int:
    from replicator.control.offsetsyncs_reader import InternalTopicReader
    from sparkmirror.configfile import load_config

    config = load_config(args.config)
    if args.cluster not in config.clusters:
        raise UsageError(f"unknown cluster {args.cluster!r}", hint=f"clusters are {', '.join(config.clusters)}")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    record_type = args.type or record_type_of(config, args.cluster, args.topic)
    if record_type is None:
        raise UsageError(f"{args.topic} is not an MM2 internal topic name",
                         hint="inspect reads heartbeats, <alias>.heartbeats, <alias>.checkpoints.internal and "
                              "mm2-offset-syncs.<alias>.internal; give --type for a custom name")
    record_cls = RECORD_TYPES[record_type]
    start = ("last", args.limit) if args.limit else "beginning"
    count = bad = 0
    out = sys.stdout
    with InternalTopicReader(config, args.cluster, args.topic, start=start, client_id="sparkmirror-inspect") as reader:
        for rec in reader.read(args.timeout):
            count += 1
            row = {"partition": rec.partition, "offset": rec.offset, "timestamp_ms": rec.timestamp_ms,
                   "type": record_type}
            try:
                fields = record_cls.decode(rec.key, rec.value).to_json_dict()
            except RecordFormatError as exc:
                bad += 1
                row.update(error=str(exc), key_hex=rec.key.hex() if rec.key is not None else None,
                           value_hex=rec.value.hex() if rec.value is not None else None)
                out.write(json.dumps(row) + "\n" if args.json else
                          f"{rec.partition}/{rec.offset} {_iso(rec.timestamp_ms)} ERROR {exc} "
                          f"(key {row['key_hex']}, value {row['value_hex']})\n")
                continue
            row["record"] = fields  # nested: checkpoints and offset-syncs have a partition of their own
            out.write(json.dumps(row) + "\n" if args.json else
                      f"{rec.partition}/{rec.offset} {_iso(rec.timestamp_ms)} {_text(record_type, fields)}\n")
        present = reader.present
    if not present:
        raise ClusterError(f"topic {args.topic} does not exist", cluster=args.cluster, topic=args.topic,
                           hint="list the cluster's topics to see which internal topics the replicator created")
    print(f"{count} {record_type} records from {args.topic} on {args.cluster}"
          + (f", {bad} undecodable" if bad else ""), file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "inspect",
        help="print the decoded records of a live MM2 internal topic (heartbeats, checkpoints, offset-syncs)",
        description=(
            "Read TOPIC on cluster ALIAS of CONFIG from the beginning (or its last N records per partition) to "
            "its current end and print every record decoded, with partition, offset and timestamp (with --json: "
            "one object per line, the decoded fields under \"record\"). The record "
            "type follows from the topic name: heartbeats, <alias>.heartbeats, <alias>.checkpoints.internal, "
            "mm2-offset-syncs.<alias>.internal."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", metavar="CONFIG", help="path to mm2.properties")
    parser.add_argument("--cluster", required=True, metavar="ALIAS", help="cluster alias the topic lives on")
    parser.add_argument("--topic", required=True, help="internal topic name")
    parser.add_argument("--json", action="store_true", help="one JSON object per record and line")
    parser.add_argument("--limit", type=int, metavar="N", help="only the newest N records of each partition")
    parser.add_argument("--type", choices=list(RECORD_TYPES), help="record type, when the name does not say")
    parser.add_argument("--timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)
