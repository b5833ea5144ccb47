"""``sparkmirror replicate``: run the replicator for every enabled flow."""

from __future__ import annotations


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
    p.add_argument("--master", help="Spark master URL (default local[*]; ignored under spark-submit unless given)")
    p.add_argument("--checkpoint-dir", default="sparkmirror-checkpoints",
                   help="Spark checkpoint directory, one sub-folder per flow (default ./sparkmirror-checkpoints)")
    p.add_argument("--max-records-per-batch", type=int, default=None,
                   help="cap on records per micro-batch across all partitions (Spark maxOffsetsPerTrigger)")
    p.add_argument("--spark-ui", action="store_true", help="enable the Spark UI")
    p.add_argument("--metrics-listen", default="127.0.0.1:9465", metavar="HOST:PORT",
                   help="serve the replicator's own Prometheus metrics here (default 127.0.0.1:9465; 'off' disables)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from replicator.datapath.progress import parse_listen
    from replicator.model.config import load_config
    from replicator.model.flowclients import translate_clients

    listen = parse_listen(args.metrics_listen)
    config = load_config(args.config)
    translate_clients(config)  # every client's settings: a bad one stops here, before Spark starts
    from replicator.datapath.job import ReplicatorJob

    return ReplicatorJob(config, args.checkpoint_dir, master=args.master,
                         max_records_per_batch=args.max_records_per_batch, ui=args.spark_ui,
                         metrics_listen=listen).run()
