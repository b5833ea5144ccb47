"""``sparkmirror translate``: where a consumer group resumes on the target after a failover.

Reads ``<source>.checkpoints.internal`` on the target, as MM2's
RemoteClusterUtils.translateOffsets does (the newest checkpoint of each
partition wins), and prints the translated offset of every target partition of
the group. Works the same on checkpoints written by Apache MM2.

``--apply`` commits those offsets to the group on the target — only if nobody
is consuming with that group there, and never moving a partition backwards
(partitions already at or past the checkpoint keep their offset).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from sparkmirror.errors import ClusterError
from sparkmirror_cli.applied import commit_reporting

EXIT_NO_CHECKPOINTS = 1
EXIT_GROUP_ACTIVE = 3

_EPILOG = """\
exit status:
  0  offsets printed (and, with --apply, committed)
  1  no checkpoints for the group, or a cluster could not be reached
  2  bad command line or configuration
  3  --apply refused: the group has active members on the target (nothing changed)

examples:
  sparkmirror translate mm2.properties --source primary --target dr --group billing
  sparkmirror translate mm2.properties --source primary --target dr --group billing --apply
"""


def _age(ms: int) -> str:
    seconds = max(0, int(time.time() - ms / 1000))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def table(rows: list[list[str]]) -> str:
    """Left-aligned columns two spaces apart (translate's and failback's per-partition tables)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run(args: argparse.Namespace) -> int:
    from replicator.control.checkpoints import read_checkpoints
    from replicator.kafkaclients import admin
    from replicator.control.groups import commit_checkpoints
    from sparkmirror.configfile import load_config

    config = load_config(args.config)
    flow = config.flow(args.source, args.target)
    topic = flow.policy.checkpoints_topic(flow.source)
    stored, bad, present = read_checkpoints(config, flow, group=args.group)
    if not present:
        hint = (f"run the replicator (sparkmirror or MM2) for {flow.name} with emit.checkpoints.enabled"
                if flow.emit_offset_syncs_enabled else
                f"{flow.name} has emit.offset-syncs.enabled = false: without offset-syncs neither MM2 nor "
                "sparkmirror emits checkpoints for it")
        raise ClusterError(f"{topic} does not exist, so there are no checkpoints to translate with",
                           cluster=flow.target, topic=topic, hint=hint)
    mine = stored.get(args.group, {})
    if bad:
        print(f"sparkmirror: warning: {bad} undecodable records in {topic} were skipped", file=sys.stderr)
    if not mine:
        print(f"sparkmirror: error: no checkpoints for group {args.group} in {topic} on {flow.target} — the group "
              f"must match the groups filter of {flow.name}, have committed offsets on replicated topics, and the "
              "replicator must have run for one emit.checkpoints.interval.seconds since", file=sys.stderr)
        return EXIT_NO_CHECKPOINTS
    entries = sorted(mine.values(), key=lambda s: (s.checkpoint.topic, s.checkpoint.partition))
    report = {
        "source": flow.source, "target": flow.target, "group": args.group, "checkpoints_topic": topic,
        "offsets": [{"topic": s.checkpoint.topic, "partition": s.checkpoint.partition,
                     "offset": s.checkpoint.downstream_offset, "upstream_offset": s.checkpoint.upstream_offset,
                     "metadata": s.checkpoint.metadata, "checkpointed_at_ms": s.timestamp_ms} for s in entries],
    }
    if not args.json:
        print(f"group {args.group}: offsets on {flow.target} translated from {flow.source} (checkpoints in {topic})")
        rows = [["TOPIC", "PARTITION", "OFFSET", "UPSTREAM OFFSET", "CHECKPOINTED"]]
        rows += [[s.checkpoint.topic, str(s.checkpoint.partition), str(s.checkpoint.downstream_offset),
                  str(s.checkpoint.upstream_offset), _age(s.timestamp_ms)] for s in entries]
        print(table(rows))
        sys.stdout.flush()
    if args.apply:
        target_admin = admin(config, flow.target, flow)
        wanted = {k: s.checkpoint.downstream_offset for k, s in mine.items()}
        try:
            committed, kept = commit_reporting(
                lambda: commit_checkpoints(target_admin, flow.target, args.group,
                                           {k: s.checkpoint for k, s in mine.items()}),
                target_admin, flow.target, args.group, wanted)
        except ClusterError as exc:
            if args.json:
                report["applied"] = {"refused": str(exc)}
                print(json.dumps(report))
                sys.stdout.flush()
            raise
        report["applied"] = {
            "committed": [{"topic": t, "partition": p, "offset": cp.downstream_offset}
                          for (t, p), cp in sorted(committed.items())],
            "kept": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(kept.items())],
        }
        if not args.json:
            print(f"committed {len(committed)} partition(s) of group {args.group} on {flow.target}"
                  + (f"; kept {len(kept)} already at or past the checkpoint: "
                     + ", ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(kept.items())) if kept else ""))
    if args.json:
        print(json.dumps(report))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "translate",
        help="translate a consumer group's offsets to the target cluster (failover), optionally commit them",
        description=(
            "Print where consumer group GROUP resumes on TARGET after failing over from SOURCE: the newest "
            "checkpoint of each partition in SOURCE.checkpoints.internal on TARGET (written by sparkmirror or "
            "Apache MM2), like MM2's RemoteClusterUtils.translateOffsets. --apply commits them to the group on "
            "TARGET if the group has no active members there; a partition is never moved backwards."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", metavar="CONFIG", help="path to mm2.properties")
    parser.add_argument("--source", required=True, metavar="A", help="cluster alias the group consumed on")
    parser.add_argument("--target", required=True, metavar="B", help="cluster alias to fail over to")
    parser.add_argument("--group", required=True, metavar="GROUP", help="consumer group id")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--apply", action="store_true",
                        help="commit the translated offsets to GROUP on TARGET (refused while it has members)")
    parser.set_defaults(func=run)
