"""``sparkmirror demo``: the embedded default — clusters, producer, replicator, monitor.

Runs from a source checkout: the demo is part of the dev tooling (``devenv/``), not the wheel.
"""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="run everything locally: two Kafka clusters, a sample producer, the replicator, the monitor",
        description=(
            "Start two local Kafka clusters (primary 127.0.0.1:19092, dr 127.0.0.1:29092), a sample "
            "producer and consumer group on primary, the replicator (Spark local[*]) mirroring primary "
            "to dr, and the monitor; print where to look. Ctrl-C stops every process it started."
        ),
    )
    p.add_argument("--duration", type=float, default=None, help="stop by itself after this many seconds")
    p.add_argument("--listen", default="127.0.0.1:9464", help="monitor HTTP address (default 127.0.0.1:9464)")
    p.add_argument("--rate", type=float, default=200.0, help="sample records per second (default 200)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from sparkmirror_cli.checkout import devenv

    return devenv("demo", "demo").run(duration=args.duration, listen=args.listen, rate=args.rate)
