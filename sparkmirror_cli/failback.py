"""``sparkmirror failback``: where a consumer group resumes on the primary after a failover.

For a group that consumed on the DR cluster (``--from``) since a failover, prints per
partition where it resumes on the primary (``--to``): mapped back through the forward
flow's offset-syncs, through the reverse flow's checkpoints (active-active), or named as
records that exist on the DR side only (the rules: ``sparkmirror.model.failback``).

Before an answer counts, the primary must still hold what the syncs describe: the record
at U on the primary is the one at D on the mirror topic (key, value, timestamp, headers)
and the primary's end is at least the offset to resume at. A truncated, restored or
re-created primary is refused for that partition, with the positions that skip nothing.

``--apply`` commits every answer in one request, only when no partition is refused and
nobody is in the group on the primary (the guard ``translate --apply`` has).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid

from sparkmirror.errors import ClusterError
from sparkmirror_cli.applied import commit_reporting
from sparkmirror_cli.translate import table as _table

EXIT_NOTHING = 1
EXIT_GROUP_ACTIVE = 3
EXIT_REFUSED = 4

_EPILOG = """\
exit status:
  0  offsets printed (and, with --apply, committed)
  1  the group has no committed offsets on the DR cluster, or a cluster could not be reached
  2  bad command line or configuration
  3  --apply refused: the group has active members on the primary (nothing changed)
  4  some partition is refused (printed with the positions that skip nothing); --apply changed nothing

examples:
  sparkmirror failback mm2.properties --from dr --to primary --group billing
  sparkmirror failback mm2.properties --from dr --to primary --group billing --apply
"""


class _Records:
    """Single records by offset, on one cluster (one consumer, assigned, never committing)."""

    def __init__(self, config, cluster: str, flow, committed: bool = False) -> None:
        from confluent_kafka import Consumer
        from replicator.kafkaclients import client_conf

        conf = client_conf(config, cluster, "consumer", flow)
        # read_committed where records are compared with what the replicator copied (it reads so)
        conf.update({"group.id": f"sparkmirror-failback-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                     "enable.partition.eof": True,
                     "isolation.level": "read_committed" if committed else "read_uncommitted"})
        conf.pop("group.instance.id", None)
        self.cluster = cluster
        self._consumer = Consumer(conf)

    def at(self, topic: str, partition: int, offset: int, timeout: float = 20.0):
        """The record at ``offset``, or None when there is none (deleted, a marker, past the end)."""
        found = self.read_range(topic, partition, offset, offset + 1, timeout)
        return found[0] if found else None

    def read_range(self, topic: str, partition: int, start: int, end: int | None, timeout: float = 60.0) -> list:
        """The records from ``start`` to ``end`` (exclusive; None: the partition's end), in order."""
        import time

        from confluent_kafka import KafkaError, TopicPartition

        out: list = []
        if end is not None and start >= end:
            return out
        self._consumer.assign([TopicPartition(topic, partition, max(0, start))])
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                msg = self._consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    continue
                if end is not None and msg.offset() >= end:
                    return out
                out.append(msg)
            raise ClusterError(f"reading {topic}[{partition}] from offset {start} timed out", cluster=self.cluster,
                               topic=topic)
        finally:
            self._consumer.unassign()

    def close(self) -> None:
        self._consumer.close()


def _same(a, b) -> bool:
    return (a is not None and b is not None and a.key() == b.key() and a.value() == b.value()
            and a.timestamp()[1] == b.timestamp()[1] and (a.headers() or []) == (b.headers() or []))


def _read_syncs(config, flow):
    from replicator.control.offsetsyncs_reader import InternalTopicReader
    from sparkmirror.errors import RecordFormatError
    from sparkmirror.model.records import OffsetSync

    cluster, topic = flow.offset_syncs_location
    syncs, bad = [], 0
    with InternalTopicReader(config, cluster, topic, flow, client_id="sparkmirror-failback") as reader:
        for rec in reader.read(120):
            try:
                syncs.append(OffsetSync.decode(rec.key, rec.value))
            except RecordFormatError:
                bad += 1
        present = bool(reader.present)
    if bad:
        print(f"sparkmirror: warning: {bad} undecodable records in {topic} on {cluster} were skipped",
              file=sys.stderr)
    return syncs, present, f"{topic} on {cluster}"


def build_plans(config, forward, reverse, group: str) -> tuple[list, dict]:
    """Every partition the group committed on the DR cluster, planned and checked (the module docstring)."""
    from replicator.control.checkpoints import read_checkpoints
    from replicator.control.groups import group_offsets
    from replicator.kafkaclients import admin, watermarks
    from sparkmirror.model import failback as fb
    from sparkmirror.model.policy import IdentityReplicationPolicy

    dr, primary = forward.target, forward.source
    dr_commits = group_offsets(admin(config, dr, forward), dr, group)
    primary_commits = group_offsets(admin(config, primary, forward), primary, group)
    info = {"primary_commits": primary_commits, "dr_commits": dr_commits}
    if not dr_commits:
        return [], info
    policy = forward.policy
    identity = isinstance(policy, IdentityReplicationPolicy)
    syncs, syncs_present, where = _read_syncs(config, forward)
    pairs = fb.clean_syncs(syncs)
    info["offset_syncs"] = where
    reverse_cps = {}
    if reverse is not None:
        stored, _bad, _present = read_checkpoints(config, reverse, group=group)
        reverse_cps = {k: s.checkpoint for k, s in stored.get(group, {}).items()}
    dr_marks = watermarks(config, dr, forward, sorted(dr_commits))
    on_primary = _primary_partitions(config, forward) if identity else set()
    plans = []
    for (topic, p), c in sorted(dr_commits.items()):
        if identity:
            # the same name on both sides: a mirror only if the forward flow synced it or the primary has
            # it; a topic dr alone has is dr's own (produced during the outage), counted, never refused
            upstream = topic if (topic, p) in pairs or (forward.topic_filter.should_replicate_topic(topic)
                                                        and (topic, p) in on_primary) else None
        else:
            upstream = policy.upstream_topic(topic) if policy.topic_source(topic) == primary else None
        low, high = dr_marks.get((topic, p), (0, c))
        if upstream is not None:
            plan = fb.plan_mirror(topic, p, c, upstream, pairs.get((upstream, p), []),
                                  pre_failover=primary_commits.get((upstream, p)),
                                  one_to_one_windows=fb.trusts_sync_windows(exactly_once=forward.exactly_once,
                                                                            identity=identity))
            if not syncs_present:
                plan.refuse(f"{where} does not exist: nothing to map {topic} back with (a re-created primary?)")
            newest = pairs[(upstream, p)][-1] if pairs.get((upstream, p)) else None
            if identity and newest is not None:
                copies, own = _dr_tail(config, forward, topic, p, newest, high)
                fb.mark_dr_tail(plan, newest, copies, own)
        elif reverse is not None and reverse.topic_filter.should_replicate_topic(topic):
            remote = reverse.policy.format_remote_topic(dr, topic)
            plan = fb.plan_reverse(topic, p, c, remote, reverse_cps.get((remote, p)),
                                   pre_failover=primary_commits.get((remote, p)))
        else:
            plan = fb.plan_dr_only(topic, p, c, low, high)
        plans.append(plan)
    _check_primary(config, forward, plans, pairs)
    return plans, info


def _dr_tail(config, forward, topic: str, p: int, newest: tuple[int, int] | None, dr_end: int
             ) -> tuple[list[int], list[int]]:
    """Which of dr's records after the newest sync are copies and which dr's own (Identity:
    ``sparkmirror.model.failback.split_dr_tail``), read from both clusters."""
    from sparkmirror.model import failback as fb

    u, d = newest if newest is not None else (-1, -1)
    on_dr = _Records(config, forward.target, forward, committed=True)
    on_primary = _Records(config, forward.source, forward, committed=True)
    try:
        dr = [(m.offset(), _fingerprint(m)) for m in on_dr.read_range(topic, p, d + 1, dr_end)]
        primary = [_fingerprint(m) for m in on_primary.read_range(topic, p, u + 1, None)]
    finally:
        on_dr.close()
        on_primary.close()
    return fb.split_dr_tail(dr, primary)


def _fingerprint(msg) -> tuple:
    return msg.key(), msg.value(), msg.timestamp()[1], tuple(msg.headers() or ())


def _primary_partitions(config, forward) -> set[tuple[str, int]]:
    """Every (topic, partition) the primary has now."""
    from replicator.control.topics import list_topics
    from replicator.kafkaclients import admin

    topics = list_topics(admin(config, forward.source, forward), forward.source).topics
    return {(name, p) for name, meta in topics.items() for p in meta.partitions}


def _check_primary(config, forward, plans, pairs) -> None:
    """Refuse every partition whose primary no longer holds what its answer rests on; add the re-read span.

    The sync the answer rests on is checked; when its record was compacted away on both sides,
    the next older syncs (up to 3 more) are, since they still describe the same copy."""
    from replicator.kafkaclients import watermarks

    dr, primary = forward.target, forward.source
    wanted = sorted({(pl.primary_topic, pl.partition) for pl in plans if pl.primary_offset is not None})
    marks = watermarks(config, primary, forward, wanted)
    on_primary, on_dr = _Records(config, primary, forward), _Records(config, dr, forward)
    try:
        for pl in plans:
            if pl.primary_offset is None:
                continue
            low, high = marks.get((pl.primary_topic, pl.partition), (None, None))
            if high is None:
                pl.refuse(f"{pl.primary_topic}[{pl.partition}] does not exist on {primary} (deleted, or a re-created "
                          "cluster)")
                continue
            if high < pl.primary_offset:
                pl.refuse(f"{pl.primary_topic}[{pl.partition}] ends at {high} on {primary}, before offset "
                          f"{pl.primary_offset}: the primary was truncated or re-created after the failover",
                          earliest=low)
                continue
            if pl.check is not None:
                u, d = pl.check
                history = pairs.get((pl.primary_topic, pl.partition), [])
                older = [x for x in history if x[1] <= d][::-1][:4] or [pl.check]
                for u, d in older:
                    mine, theirs = on_primary.at(pl.primary_topic, pl.partition, u), on_dr.at(pl.dr_topic,
                                                                                              pl.partition, d)
                    if mine is not None or theirs is not None:
                        break
                if not _same(mine, theirs):
                    pl.refuse(f"the record at {pl.primary_topic}[{pl.partition}] offset {u} on {primary} is "
                              f"{'missing' if mine is None else 'not the one'} at {pl.dr_topic}[{pl.partition}] "
                              f"offset {d} on {dr}, as the offset-syncs say: the primary was truncated, restored "
                              "or re-created after the failover", earliest=low)
                    continue
                u, d = pl.check
                if pl.reread > 0:
                    first, last = on_dr.at(pl.dr_topic, pl.partition, d + 1), on_dr.at(pl.dr_topic, pl.partition,
                                                                                         pl.dr_offset - 1)
                    if first is not None and last is not None:
                        pl.reread_span_ms = max(0, last.timestamp()[1] - first.timestamp()[1])
    finally:
        on_primary.close()
        on_dr.close()


def _span(ms: int | None) -> str:
    if ms is None:
        return ""
    return f" over {ms / 1000:.1f} s" if ms < 120_000 else f" over {ms // 60_000} min"


def _print(plans, group: str, dr: str, primary: str, info: dict) -> None:
    print(f"group {group}: offsets on {primary} to fail back to from {dr} (offset-syncs in "
          f"{info.get('offset_syncs', '-')})")
    rows = [["DR TOPIC", "PARTITION", "DR OFFSET", "PRIMARY TOPIC", "PRIMARY OFFSET", "RE-READ", "SKIPPED", "BASIS"]]
    for pl in plans:
        rows.append([pl.dr_topic, str(pl.partition), str(pl.dr_offset), pl.primary_topic or "-",
                     "-" if pl.primary_offset is None else str(pl.primary_offset),
                     f"{pl.reread}{_span(pl.reread_span_ms)}", str(pl.skipped), pl.basis])
    print(_table(rows))
    for pl in plans:
        if pl.dr_only:
            first, last = pl.dr_only_range
            print(f"not on {primary}: {pl.dr_only} record(s) of {pl.dr_topic}[{pl.partition}] (offsets {first}..{last}) "
                  f"were produced on {dr} and no flow copies them to {primary}")
    for pl in plans:
        if pl.refused:
            print(f"refused {pl.dr_topic}[{pl.partition}]: {pl.refused}; positions that skip nothing: "
                  + "; ".join(pl.choices))
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from replicator.control.groups import commit_offsets
    from replicator.kafkaclients import admin
    from sparkmirror.configfile import load_config

    config = load_config(args.config)
    forward = config.flow(args.to, args.from_)
    reverse = next((f for f in config.enabled_flows() if (f.source, f.target) == (args.from_, args.to)), None)
    plans, info = build_plans(config, forward, reverse, args.group)
    if not plans:
        print(f"sparkmirror: error: group {args.group} has no committed offsets on {args.from_}: nothing to fail "
              "back", file=sys.stderr)
        return EXIT_NOTHING
    refused = [pl for pl in plans if pl.refused]
    report = {"from": args.from_, "to": args.to, "group": args.group, "active_active": reverse is not None,
              "offset_syncs": info.get("offset_syncs"), "partitions": [pl.as_json() for pl in plans],
              "dr_only_records": sum(pl.dr_only for pl in plans), "skipped_records": sum(pl.skipped for pl in plans),
              "refused": len(refused)}
    if not args.json:
        _print(plans, args.group, args.from_, args.to, info)
    code = EXIT_REFUSED if refused else 0
    if args.apply:
        if refused:
            report["applied"] = {"refused": f"{len(refused)} partition(s) refused: nothing was committed"}
            if not args.json:
                print(f"--apply: nothing committed: {len(refused)} partition(s) refused (above)", file=sys.stderr)
        else:
            current = info["primary_commits"]
            todo = sorted({(pl.primary_topic, pl.partition): pl.primary_offset for pl in plans
                           if pl.primary_offset is not None
                           and current.get((pl.primary_topic, pl.partition)) != pl.primary_offset}.items())
            to_admin = admin(config, args.to, forward)
            try:
                commit_reporting(lambda: commit_offsets(to_admin, args.to, args.group,
                                                        [(t, p, o, "") for (t, p), o in todo]),
                                 to_admin, args.to, args.group, dict(todo))
            except ClusterError as exc:
                if args.json:
                    report["applied"] = {"refused": str(exc)}
                    print(json.dumps(report))
                    sys.stdout.flush()
                raise
            report["applied"] = {"committed": [{"topic": t, "partition": p, "offset": o} for (t, p), o in todo]}
            if not args.json:
                print(f"committed {len(todo)} partition(s) of group {args.group} on {args.to}")
    if args.json:
        print(json.dumps(report))
    return code


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "failback",
        help="where a consumer group resumes on the primary after a failover (fail back), optionally commit it",
        description=(
            "Print where consumer group GROUP resumes on the primary (--to) after consuming on the DR cluster "
            "(--from) since a failover: its DR offsets mapped back through the forward flow's offset-syncs (exact "
            "inside a one-to-one window, else the earlier bound: re-read, never skip; never below its "
            "pre-failover commit), the reverse flow's checkpoints for topics it copies back, and the records "
            "that exist on the DR cluster only. --apply commits them, all or nothing."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", metavar="CONFIG", help="path to mm2.properties")
    parser.add_argument("--from", dest="from_", required=True, metavar="DR", help="cluster alias the group consumes on now")
    parser.add_argument("--to", required=True, metavar="PRIMARY", help="cluster alias to fail back to")
    parser.add_argument("--group", required=True, metavar="GROUP", help="consumer group id")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--apply", action="store_true",
                        help="commit the offsets to GROUP on PRIMARY (refused while it has members, or while any "
                             "partition is refused)")
    parser.set_defaults(func=run)
