"""The class-data archive's training session, run by ``cds.build()`` in a child process.

It starts a Spark session with ``-XX:ArchiveClassesAtExit`` and loads what a replicator's
start-up loads; the JVM writes the archive when it exits. Kept apart from ``cds`` because it
needs the session builder, which itself asks ``cds`` for the archive to map.
"""

from __future__ import annotations

import sys
import tempfile

from replicator.datapath.cds import QUIET


def train(archive: str) -> None:
    """The training session: load what a replicator's start-up loads, then exit."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from replicator.datapath.spark import build_session  # imports pyspark: only in the child

    spark = build_session(conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive} {QUIET}"},
                          cds=False)
    print("jvm-pid", spark.sparkContext._jvm.ProcessHandle.current().pid(), flush=True)
    spark.range(1000).selectExpr("sum(id)").collect()

    class Reader(DataSourceStreamReader):
        def initialOffset(self):
            return {"n": 0}

        def latestOffset(self):
            return {"n": 1}

        def partitions(self, start, end):
            return [InputPartition(0)]

        def read(self, partition):
            yield (1,)

        def commit(self, end):
            pass

    class Training(DataSource):
        @classmethod
        def name(cls):
            return "sparkmirror_cds_training"

        def schema(self):
            return "n int"

        def streamReader(self, schema):
            return Reader()

    spark.dataSource.register(Training)
    with tempfile.TemporaryDirectory(prefix="sparkmirror-cds-ck-") as ck:
        query = (spark.readStream.format("sparkmirror_cds_training").load().writeStream
                 .option("checkpointLocation", ck).foreachBatch(lambda df, _id: df.collect())
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        # Spark's Kafka source and sink classes (no broker is contacted until a query starts)
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option(
            "subscribe", "t").load().schema
    spark.stop()



if __name__ == "__main__":
    train(sys.argv[1])
