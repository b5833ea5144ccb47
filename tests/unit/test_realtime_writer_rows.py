"""The real-time writer reads the rows Spark's Kafka source gives a query, as they are: found
by column name, the timestamp in exact epoch milliseconds whatever the JVM's time zone."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.jvm_harness import compile_harnesses

TIMESTAMPS = [-1, 0, 1, 999, 1_700_000_000_123, 4_102_444_800_000, 253_402_300_799_999]


@pytest.fixture(scope="module")
def harness_classpath():
    return compile_harnesses("RowHarness")


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
@pytest.mark.parametrize("java8", [False, True], ids=["timestamp", "instant"])
def test_the_writer_reads_every_field_of_a_kafka_source_row(harness_classpath, zone, java8):
    proc = subprocess.run(["java", f"-Duser.timezone={zone}", "-cp", harness_classpath, "sparkmirror.RowHarness",
                           *(["java8"] if java8 else [])],
                          input="".join(f"{t}\n" for t in TIMESTAMPS), capture_output=True, text=True, check=True)
    rows = [line.split(" ") for line in proc.stdout.splitlines()]
    assert rows == [["src.topic", "3", str(40 + i), "k", f"v{t}", str(t), "h1=a,h2=null",
                     "Instant" if java8 else "Timestamp"] for i, t in enumerate(TIMESTAMPS)]
