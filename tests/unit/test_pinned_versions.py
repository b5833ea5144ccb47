"""pyspark and Spark's Kafka connector are one pin: the connector jars must be built for the
Spark that runs them (a 4.0 connector on a 4.2 Spark fails at the first Kafka read)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version

from sparkmirror import artifacts


def _pinned(requirement: str) -> str:
    with open(artifacts.REPO_ROOT / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    (pin,) = [d for d in deps if re.match(rf"{requirement}\s*==", d)]
    return pin.split("==", 1)[1].strip()


def test_the_connector_jars_follow_the_pinned_pyspark():
    assert artifacts.SPARK_VERSION == _pinned("pyspark")
    assert artifacts.SPARK_KAFKA.artifacts == (
        f"org.apache.spark:spark-sql-kafka-0-10_{artifacts.SCALA_BINARY}:{artifacts.SPARK_VERSION}",)
    assert artifacts.SPARK_KAFKA.name.endswith(artifacts.SPARK_VERSION)


def test_the_installed_pyspark_is_the_pinned_one():
    # a venv left on an older pyspark would run the new connector jars on the old Spark
    assert version("pyspark") == _pinned("pyspark"), "reinstall: .venv/bin/pip install -e '.[test]'"


def test_readme_and_submit_example_name_the_pinned_spark_and_kafka():
    readme = (artifacts.REPO_ROOT / "README.md").read_text()
    assert f"spark-sql-kafka-0-10_{artifacts.SCALA_BINARY}:{artifacts.SPARK_VERSION}" in readme
    assert f"| Apache Spark / pyspark | {artifacts.SPARK_VERSION}, connector" in readme
    assert f"| test and dev brokers, reference Apache MM2 | {artifacts.KAFKA_VERSION} " in readme
