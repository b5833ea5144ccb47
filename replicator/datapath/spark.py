"""The Spark session the replicator runs in.

Locally (``--master local[*]``, the default) sparkmirror starts Spark itself with
the pinned spark-sql-kafka-0-10 connector jars from the cache. Under
``spark-submit`` the session already exists and its master and jars come from the
submit command (see README: ``--packages org.apache.spark:spark-sql-kafka-0-10_2.13``).
"""

from __future__ import annotations

import logging
import os
import sys

from replicator.devenv import artifacts

log = logging.getLogger(__name__)


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(master: str | None = None, app_name: str = "sparkmirror", ui: bool = False,
                  conf: dict[str, str] | None = None):
    # Executors must run the same interpreter (and so the same packages) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        jars = artifacts.ensure(artifacts.SPARK_KAFKA).jars()
        builder = (
            builder.master(master or "local[*]")
            .config("spark.jars", ",".join(str(j) for j in jars))
            .config("spark.driver.memory", os.environ.get("SPARKMIRROR_DRIVER_MEMORY", "2g"))
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
        )
    elif master:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.metricsEnabled", "true")
        # one Spark task per Kafka partition keeps per-partition order
        .config("spark.sql.adaptive.enabled", "false")
    )
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARKMIRROR_SPARK_LOG_LEVEL", "ERROR"))
    return spark
