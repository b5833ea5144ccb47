"""``sparkmirror monitor CONFIG [--listen HOST:PORT]``: the lag monitor's command line."""

from __future__ import annotations

import argparse

from sparkmirror.metrics import GRANULARITIES, SERIES_MODES
from monitor.watch import DEFAULT_LISTEN, MonitorOptions
from sparkmirror.errors import ConfigError
from sparkmirror.listen import parse_listen

DESCRIPTION = """\
Watch every enabled flow of an mm2.properties (sparkmirror's or an Apache
MirrorMaker 2 deployment's: the internal topics are the same) and serve:

  /metrics      Prometheus metrics (sparkmirror_*; list in sparkmirror/metrics.py)
  /api/status   JSON: status per flow, topic, partition and group, with reasons
  /api/history  JSON: each flow's lag and throughput over the last hours (--history-step)
  /healthz      200 while the monitor itself evaluates (cluster trouble never fails it)
  /             a small status page

It listens on 127.0.0.1 only unless --listen says otherwise. --web-config-file
adds TLS and basic auth in Prometheus' own web configuration format (the file
node_exporter and Prometheus read: tls_server_config, basic_auth_users with
bcrypt hashes); /healthz stays open to probes without credentials.

Per flow A->B it reads A.heartbeats on B (heartbeat latency and age), end
offsets of A and B with the offset-syncs (lag in records), the first
unreplicated source record of each lagging partition (lag in seconds, from its
real timestamp), A.checkpoints.internal on B and the groups' committed offsets
on A (checkpoint lag and age). It only reads: nothing is written to any cluster.
Metrics are also pushed over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set.
Statuses (OK, WARN, STALL, STOP, ERR) are explained in docs/monitor-status.md.
"""

EPILOG = """\
examples:
  sparkmirror monitor mm2.properties
  sparkmirror monitor mm2.properties --listen 0.0.0.0:9464 --granularity topic \\
      --topics-exclude 'test-.*' --groups 'billing-.*,payments-.*'
  sparkmirror monitor mm2.properties --listen 0.0.0.0:9464 --web-config-file web.yml

exit codes: 0 stopped by SIGINT/SIGTERM, 1 runtime error (e.g. port in use),
2 usage or configuration error (printed as FILE:LINE: problem).
"""


def _regex_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "monitor", help="serve replication lag, heartbeats and checkpoint health for Prometheus/OTel",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", metavar="CONFIG", help="mm2.properties (the file MM2 or sparkmirror runs with)")
    p.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                   help=f"address of the HTTP server (default {DEFAULT_LISTEN}; port 0 picks a free one)")
    p.add_argument("--web-config-file", metavar="FILE", default=None,
                   help="TLS and/or basic auth for the HTTP server, in Prometheus' web configuration format "
                        "(tls_server_config: cert_file, key_file, client_ca_file, client_auth_type; "
                        "basic_auth_users: name -> bcrypt hash); /healthz needs no credentials")
    p.add_argument("--interval", type=float, default=5.0, metavar="SECONDS",
                   help="refresh of the status, of source log start offsets and of the samples behind the "
                        "trend rules (STALL, growing lag; default 5)")
    p.add_argument("--positions-interval", type=float, default=0.2, metavar="SECONDS",
                   help="refresh of end offsets, replicated positions and seconds lag (default 0.2; the "
                        "refresh waits 3x as long as it took, at most --interval, so a slow one takes at most a quarter of a core)")
    p.add_argument("--groups-interval", type=float, default=30.0, metavar="SECONDS",
                   help="refresh of consumer-group committed offsets on the sources (default 30)")
    p.add_argument("--metadata-interval", type=float, default=30.0, metavar="SECONDS",
                   help="refresh of topic and partition lists (default 30)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="time limit of one request to one cluster (default 10)")
    p.add_argument("--granularity", choices=GRANULARITIES, default="partition",
                   help="finest metric labels: per flow, per topic, or per partition (default); "
                        "/api/status always has partitions")
    p.add_argument("--series", choices=SERIES_MODES, default="all",
                   help="per-partition series at --granularity partition: every partition (default), none "
                        "(topic-level series only), or only partitions that are not OK and group partitions "
                        "whose checkpoint is not current (a cardinality budget: docs/alerts.md)")
    p.add_argument("--topics", type=_regex_list, default=[".*"], metavar="REGEX[,REGEX...]",
                   help="watch only these source topics (on top of each flow's own filter; default all)")
    p.add_argument("--topics-exclude", type=_regex_list, default=[], metavar="REGEX[,REGEX...]",
                   help="never watch these source topics")
    p.add_argument("--groups", type=_regex_list, default=[".*"], metavar="REGEX[,REGEX...]",
                   help="watch checkpoints of only these groups (on top of each flow's group filter)")
    p.add_argument("--groups-exclude", type=_regex_list, default=[], metavar="REGEX[,REGEX...]",
                   help="never watch these groups")
    p.add_argument("--window", type=int, default=10, metavar="N",
                   help="refreshes that must agree before a partition is STALL or lag-growing WARN (default 10)")
    p.add_argument("--heartbeat-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds without a heartbeat arriving on the target after which a flow is STOP "
                        "(default 2 x emit.heartbeats.interval.seconds, at least 10)")
    p.add_argument("--heartbeat-latency-warn", type=float, default=30.0, metavar="SECONDS",
                   help="a flow whose newest heartbeat is older than this while heartbeats still arrive "
                        "is WARN: replicating, but late (default 30)")
    p.add_argument("--checkpoint-timeout", type=float, default=None, metavar="SECONDS",
                   help="checkpoint age after which a moving group's checkpoint is stale "
                        "(default 2 x emit.checkpoints.interval.seconds + --groups-interval)")
    p.add_argument("--failover-max-reread-seconds", type=float, default=300.0, metavar="SECONDS",
                   help="a group whose failover now would re-read records spanning more than this is not "
                        "ready to fail over (default 300; 0 = no limit)")
    p.add_argument("--failover-max-reread-records", type=int, default=0, metavar="N",
                   help="a group whose failover now would re-read more records than this (summed over its "
                        "partitions) is not ready to fail over (default 0 = no limit)")
    p.add_argument("--retention-headroom-warn", type=float, default=3600.0, metavar="SECONDS",
                   help="WARN when source retention may delete records not yet on the target within this "
                        "time, or within half the topic's retention.ms if that is shorter (default 3600)")
    p.add_argument("--history-step", type=float, default=10.0, metavar="SECONDS",
                   help="seconds per point of the history the status page charts (1,080 points per flow: "
                        "3 hours at the default 10; /api/history)")
    p.add_argument("--no-seconds-lag", dest="probe", action="store_false",
                   help="do not read source records to measure lag in seconds (nor the time span a "
                        "failover would re-read)")
    p.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> MonitorOptions:
    from sparkmirror.model.filters import GroupFilter, TopicFilter
    from sparkmirror.webconfig import load_web_config

    host, port = parse_listen(args.listen, "--listen", DEFAULT_LISTEN)
    for name in ("interval", "positions_interval", "groups_interval", "metadata_interval", "timeout",
                 "history_step"):
        if getattr(args, name) <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be more than 0 seconds")
    if args.window < 2:
        raise ConfigError("--window must be at least 2")
    for name in ("failover_max_reread_seconds", "failover_max_reread_records", "retention_headroom_warn"):
        if getattr(args, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be 0 or more")
    return MonitorOptions(
        host=host, port=port, interval=args.interval, positions_interval=args.positions_interval,
        groups_interval=args.groups_interval,
        metadata_interval=args.metadata_interval, timeout=args.timeout, granularity=args.granularity,
        series=args.series,
        window=args.window, heartbeat_timeout=args.heartbeat_timeout,
        heartbeat_latency_warn=args.heartbeat_latency_warn, checkpoint_timeout=args.checkpoint_timeout,
        probe_lag_seconds=args.probe,
        failover_max_reread_seconds=args.failover_max_reread_seconds or None,
        failover_max_reread_records=args.failover_max_reread_records or None,
        retention_headroom_warn=args.retention_headroom_warn,
        topic_filter=TopicFilter(args.topics, args.topics_exclude),
        group_filter=GroupFilter(args.groups, args.groups_exclude),
        web_config=load_web_config(args.web_config_file),
        history_step=args.history_step,
    )


def run(args: argparse.Namespace) -> int:
    from sparkmirror.configfile import load_config

    options = options_from_args(args)
    config = load_config(args.config)  # a bad file is refused before the HTTP and OTel stacks are even imported
    import asyncio

    from monitor.service import MonitorService

    service = MonitorService(config, options)
    asyncio.run(service.run_until_stopped())
    return 0
