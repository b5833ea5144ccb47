"""``sparkmirror replicate``: run the replicator for every enabled flow."""

from __future__ import annotations

from sparkmirror.listen import parse_listen

SOURCE_DEFAULT = "direct"
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
    p.add_argument("--max-records-per-batch", type=int, default=None,
                   help="cap on records per micro-batch across all partitions (Spark maxOffsetsPerTrigger), on "
                        "top of the ~30 s of copying a batch takes at most anyway; keeps the flow in micro-batches")
    p.add_argument("--spark-ui", action="store_true", help="enable the Spark UI")
    p.add_argument("--source", choices=("direct", "kafka"), default=SOURCE_DEFAULT, dest="source_mode",
                   help="how records are read: 'direct' — Spark plans offset ranges and each task copies its range "
                        "with confluent-kafka, record bytes never enter the JVM; 'kafka' — Spark's "
                        "spark-sql-kafka-0-10 source feeds the writer through Arrow (slower; see BENCHMARKS.md); "
                        "exactly-once flows always use 'kafka' (default: %(default)s)")
    p.add_argument("--data-path", choices=("auto", "real-time", "micro-batch"), default="auto",
                   help="'auto' (default) — a backlog in micro-batches, then Spark's real-time mode once caught up "
                        "(one long-lived task per partition copies each record as it arrives: sub-second "
                        "latency), unless the flow is exactly-once, --source kafka or --max-records-per-batch is "
                        "given, or the writer cannot be built (no javac); 'micro-batch' — batches planned every "
                        "trigger, one task per core; 'real-time' — real time from the start; the log says which "
                        "path each flow takes and why")
    p.add_argument("--real-time-checkpoint-interval", type=float, default=None, metavar="SECONDS",
                   help="how often a real-time query checkpoints its source offsets (default 5, the least Spark "
                        "allows). Records are copied as they arrive whatever it is; each checkpoint pauses the "
                        "copy for a moment and costs CPU, so a longer interval uses less CPU, while a kill -9 "
                        "copies again up to that many seconds of records (a clean stop resumes exactly where the "
                        "target acknowledged; on a cluster it waits up to that long for the next checkpoint)")
    p.add_argument("--real-time-shards", type=int, default=None, metavar="N",
                   help="how many real-time queries a flow's partitions are dealt over (default 1, at most 16; "
                        "never more than the partitions). The queries start up to 1.5 s apart and checkpoint "
                        "apart, so each checkpoint pauses only its share of the partitions")
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
    if args.real_time_checkpoint_interval is not None:
        _set_checkpoint_interval(args.real_time_checkpoint_interval)
    if args.real_time_shards is not None:
        _set_shards(args.real_time_shards)
    config = load_config(args.config)
    translate_clients(config)  # every client's settings: a bad one stops here, before Spark starts
    from replicator.service import ReplicatorService

    return ReplicatorService(config, args.checkpoint_dir, master=args.master,
                         max_records_per_batch=args.max_records_per_batch, ui=args.spark_ui,
                         metrics_listen=listen, spark_conf=spark_conf,
                         source_mode=args.source_mode, data_path=args.data_path).run()


def _set_shards(n: int) -> None:
    from replicator.datapath import realtime
    from sparkmirror.errors import UsageError

    if not 1 <= n <= realtime.MAX_SHARDS:
        raise UsageError(f"--real-time-shards {n}: must be between 1 and {realtime.MAX_SHARDS}",
                         hint="for example --real-time-shards 3 (the default is 1)")
    realtime.set_shards(n)


def _set_checkpoint_interval(seconds: float) -> None:
    import math

    from replicator.datapath import realtime
    from sparkmirror.errors import UsageError

    if not math.isfinite(seconds) or seconds < realtime.MIN_CHECKPOINT_INTERVAL_S:
        raise UsageError(f"--real-time-checkpoint-interval {seconds:g}: must be at least "
                         f"{realtime.MIN_CHECKPOINT_INTERVAL_S:g} seconds (the shortest real-time batch Spark runs)",
                         hint="for example --real-time-checkpoint-interval 30")
    realtime.set_checkpoint_interval(seconds)


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
