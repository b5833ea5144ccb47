"""``sparkmirror monitor CONFIG [--listen HOST:PORT]``: the lag monitor's command line."""

from __future__ import annotations

import argparse

from monitor.options import add_arguments, options_from_args

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


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "monitor", help="serve replication lag, heartbeats and checkpoint health for Prometheus/OTel",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", metavar="CONFIG", help="mm2.properties (the file MM2 or sparkmirror runs with)")
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sparkmirror.configfile import load_config

    options = options_from_args(args)
    config = load_config(args.config)  # a bad file is refused before the HTTP and OTel stacks are even imported
    import asyncio

    from monitor.service import MonitorService

    service = MonitorService(config, options)
    asyncio.run(service.run_until_stopped())
    return 0
