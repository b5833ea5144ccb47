"""The Spark settings sparkmirror adds to its session, and that what they name exists."""

from __future__ import annotations

import zipfile
from pathlib import Path

from replicator.datapath import spark


def test_the_checkpoint_file_manager_is_a_class_of_the_pinned_spark():
    """A Spark upgrade that moves or drops the class would fail every query's start."""
    import pyspark

    key, cls = spark.CHECKPOINT_FILE_MANAGER
    jars = list((Path(pyspark.__file__).resolve().parent / "jars").glob("spark-sql_2.13-*.jar"))
    assert jars, "pyspark's spark-sql jar not found"
    with zipfile.ZipFile(jars[0]) as jar:
        assert cls.replace(".", "/") + ".class" in jar.namelist()
    assert key == "spark.sql.streaming.checkpointFileManagerClass"


def test_the_session_writes_checkpoints_through_the_file_system_api_unless_told_otherwise():
    key, cls = spark.CHECKPOINT_FILE_MANAGER
    assert spark.session_conf({})[key] == cls
    mine = {key: "org.example.MyManager", "spark.executor.cores": "2"}
    assert spark.session_conf(mine) == mine
    assert mine == {key: "org.example.MyManager", "spark.executor.cores": "2"}, "the caller's dict is not changed"
