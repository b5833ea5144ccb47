"""The Spark settings sparkmirror adds to its session, and that what they name exists."""

from __future__ import annotations

import zipfile
from pathlib import Path

from replicator.datapath import spark


def test_the_checkpoint_file_managers_are_classes_of_the_pinned_spark_and_of_the_writer_jar():
    """A Spark upgrade that moves or drops the class would fail every query's start."""
    import pyspark

    from replicator.datapath import jvmwriter

    assert spark.CHECKPOINT_FILE_MANAGER_KEY == "spark.sql.streaming.checkpointFileManagerClass"
    jars = list((Path(pyspark.__file__).resolve().parent / "jars").glob("spark-sql_2.13-*.jar"))
    assert jars, "pyspark's spark-sql jar not found"
    with zipfile.ZipFile(jars[0]) as jar:
        assert spark.SPARK_CHECKPOINT_FILE_MANAGER.replace(".", "/") + ".class" in jar.namelist()
    with zipfile.ZipFile(jvmwriter.ensure_jar()) as jar:
        assert spark.LOCAL_CHECKPOINT_FILE_MANAGER.replace(".", "/") + ".class" in jar.namelist()


def test_the_session_writes_checkpoints_through_the_file_system_api_unless_told_otherwise():
    key = spark.CHECKPOINT_FILE_MANAGER_KEY
    assert spark.session_conf({})[key] == spark.SPARK_CHECKPOINT_FILE_MANAGER, \
        "without the writer jar on the classpath sparkmirror's class cannot be loaded"
    assert spark.session_conf({}, writer_jar=True)[key] == spark.LOCAL_CHECKPOINT_FILE_MANAGER
    mine = {key: "org.example.MyManager", "spark.executor.cores": "2"}
    assert spark.session_conf(mine) == mine
    assert spark.session_conf(mine, writer_jar=True) == mine
    assert mine == {key: "org.example.MyManager", "spark.executor.cores": "2"}, "the caller's dict is not changed"


def test_the_driver_jvm_reads_the_kerberos_config_librdkafka_reads(monkeypatch):
    from replicator.datapath.spark import kerberos_java_option

    monkeypatch.delenv("KRB5_CONFIG", raising=False)
    assert kerberos_java_option({}) is None
    monkeypatch.setenv("KRB5_CONFIG", "/etc/realm/krb5.conf")
    assert kerberos_java_option({}) == "-Djava.security.krb5.conf=/etc/realm/krb5.conf"
    # a Spark config that names its own file keeps it
    assert kerberos_java_option({"spark.driver.extraJavaOptions": "-Djava.security.krb5.conf=/x"}) is None
