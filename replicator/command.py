"""``sparkmirror replicate``: run the replicator for every enabled flow."""

from __future__ import annotations

import os

from replicator import settings
from sparkmirror.listen import parse_listen

METRICS_LISTEN = "127.0.0.1:9465"


def register(sub) -> None:
    p = sub.add_parser(
        "replicate",
        help="replicate topics for every enabled flow of an mm2.properties (Spark job)",
        description=(
            "Run one Spark Structured Streaming query per enabled flow A->B of CONFIG (MM2's "
            "mm2.properties): mirror topics are created on B before their records, records are "
            "copied with key, value, headers, timestamp and partition, MM2 offset-syncs are written, "
            "and heartbeats are emitted. Runs in local[*] by default or under spark-submit. "
            "SIGTERM / Ctrl-C stop cleanly (exit 0); restarting with the same --checkpoint-dir "
            "continues where the last committed batch ended."
        ),
    )
    p.add_argument("config", metavar="CONFIG", help="path to mm2.properties")
    p.add_argument("--master", help="Spark master URL (default local[*,4]: all cores, a failed task is retried up to 4 times; ignored under spark-submit unless given)")
    p.add_argument("--checkpoint-dir", default="sparkmirror-checkpoints",
                   help="Spark checkpoint directory, one sub-folder per flow (default ./sparkmirror-checkpoints)")
    settings.add_options(p, "max_records_per_batch")
    p.add_argument("--spark-ui", action="store_true", help="enable the Spark UI")
    settings.add_options(p, "source_mode", "data_path", "real_time_checkpoint_interval", "real_time_shards")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", dest="spark_conf",
                   help="a Spark setting for the replicator's session, as spark-submit --conf (repeatable), "
                        "e.g. --conf spark.sql.execution.arrow.maxRecordsPerBatch=20000")
    p.add_argument("--metrics-listen", default=METRICS_LISTEN, metavar="HOST:PORT",
                   help=f"serve the replicator's own Prometheus metrics here (default {METRICS_LISTEN}; 'off' disables)")
    p.add_argument("--web-config-file", metavar="FILE", default=None,
                   help="TLS and/or basic auth for the metrics endpoint, in Prometheus' web configuration format "
                        "(the same file sparkmirror monitor takes)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from sparkmirror.configfile import load_config
    from sparkmirror.model.flowclients import translate_clients

    listen = parse_listen(args.metrics_listen, "--metrics-listen", METRICS_LISTEN, can_be_off=True)
    if args.web_config_file is not None:
        from replicator.metrics import metrics
        from sparkmirror.webconfig import load_web_config

        metrics().web_config = load_web_config(args.web_config_file)  # refused here, before Spark starts
    spark_conf = _spark_conf(args.spark_conf)
    tuning = settings.ReplicatorSettings.from_args(args, os.environ)  # a bad value stops here, exit 2
    config = load_config(args.config)
    translate_clients(config)  # every client's settings: a bad one stops here, before Spark starts
    from replicator.service import ReplicatorService

    return ReplicatorService(config, args.checkpoint_dir, tuning, master=args.master, ui=args.spark_ui,
                             metrics_listen=listen, spark_conf=spark_conf).run()


def _spark_conf(items: list[str]) -> dict[str, str]:
    from sparkmirror.errors import UsageError

    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise UsageError(f"--conf {item[:200]!r}: expected KEY=VALUE with a Spark key (spark.*)",
                             hint="for example --conf spark.sql.execution.arrow.maxRecordsPerBatch=20000")
        conf[key.strip()] = value.strip()
    return conf
