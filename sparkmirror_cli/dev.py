"""``sparkmirror dev``: local Kafka clusters and pinned jars for development.

``up``, ``down`` and ``status`` run the dev tooling (``devenv/``), so they work from a
source checkout only; ``fetch`` needs only the jar pins (``sparkmirror.artifacts``) and
works from an installed wheel too.
"""

from __future__ import annotations

import json
import os
import subprocess


def register(sub) -> None:
    p = sub.add_parser(
        "dev",
        help="start/stop the local development Kafka clusters, fetch pinned jars",
        description=(
            "Manage two local single-node KRaft Kafka clusters (primary on 127.0.0.1:19092, "
            "dr on 127.0.0.1:29092) started from the official Apache Kafka jars, and the "
            "pinned jars sparkmirror needs (Kafka, Apache MirrorMaker 2, Spark's Kafka connector), "
            "cached in .cache/ (or $SPARKMIRROR_CACHE)."
        ),
    )
    dsub = p.add_subparsers(dest="dev_command", metavar="ACTION", required=True)
    up = dsub.add_parser("up", help="start the clusters (detached) and wait until they answer")
    up.add_argument("clusters", nargs="*", help="cluster names (default: primary dr)")
    up.set_defaults(func=_up)
    down = dsub.add_parser("down", help="stop the clusters started by 'dev up' (data is kept)")
    down.add_argument("clusters", nargs="*", help="cluster names (default: all)")
    down.add_argument("--wipe", action="store_true", help="also delete the clusters' data directories")
    down.set_defaults(func=_down)
    st = dsub.add_parser("status", help="show which dev clusters run")
    st.set_defaults(func=_status)
    fetch = dsub.add_parser("fetch", help="fetch the pinned jars into the cache (done on demand otherwise) and "
                                          "build the driver JVM's class-data archive (faster Spark start-ups)")
    fetch.set_defaults(func=_fetch)


def _clusters(args):
    """``devenv.clusters`` from the source checkout (a usage error from an installed wheel)."""
    from sparkmirror_cli.checkout import devenv

    return devenv("clusters", f"dev {args.dev_command}")


def _validate_names(names: list[str], clusters) -> list[str] | None:
    from sparkmirror.errors import UsageError

    for n in names:
        if n not in clusters.DEV_CLUSTERS:
            raise UsageError(f"unknown dev cluster {n!r}", hint=f"choose from {', '.join(clusters.DEV_CLUSTERS)}")
    return names or None


def _up(args) -> int:
    clusters = _clusters(args)
    for c in clusters.up(_validate_names(args.clusters, clusters)):
        print(f"{c.name}\t{c.bootstrap}\t{c.data_dir}")
    return 0


def _down(args) -> int:
    clusters = _clusters(args)
    clusters.down(_validate_names(args.clusters, clusters), wipe=args.wipe)
    return 0


def _status(args) -> int:
    clusters = _clusters(args)
    print(json.dumps(clusters.status(), indent=2))
    return 0


def _fetch(args) -> int:
    from sparkmirror import artifacts

    artifacts.ensure_all()
    for s in artifacts.ALL_SETS:
        print(f"{s.name}\t{len(s.jars())} jars\t{s.directory}")
    from replicator.datapath import jvmwriter

    try:
        # the real-time writer (spark-submit: pass this path with --jars)
        print(f"real-time writer\t1 jar\t{jvmwriter.ensure_jar()}")
    except jvmwriter.Unavailable as exc:
        print(f"real-time writer\tnot built: {exc}; flows run in micro-batches")
    from replicator.datapath import cds
    from replicator.settings import ReplicatorSettings

    if ReplicatorSettings.from_environment(os.environ).class_data_archive:
        try:
            print(f"driver class-data archive\t1 file\t{cds.build()}")
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            # only start-up speed depends on it: say so and go on
            print(f"driver class-data archive\tnot built ({str(exc).strip()[-300:]}); Spark starts ~3 s slower")
    return 0
