"""The real-time writer reads the rows Spark's Kafka source gives a query, as they are (Spark's
UnsafeRow): found by column name, absent keys and values as absent, headers in order, the
timestamp in exact epoch milliseconds whatever the JVM's time zone."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.jvm_harness import compile_harnesses

TIMESTAMPS = [-1, 0, 1, 999, 1_700_000_000_123, 4_102_444_800_000, 253_402_300_799_999]


@pytest.fixture(scope="module")
def harness_classpath():
    return compile_harnesses("RowHarness")


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def test_the_writer_reads_every_field_of_a_kafka_source_row(harness_classpath, zone):
    lines = [(t, "k", f"v{t}") for t in TIMESTAMPS] + [(5, "null", "v"), (6, "k", "null"), (7, "null", "null")]
    proc = subprocess.run(["java", f"-Duser.timezone={zone}", "-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8",
                           "-cp", harness_classpath, "sparkmirror.RowHarness"],
                          input="".join(f"{t} {k} {v}\n" for t, k, v in lines), capture_output=True, text=True,
                          encoding="utf-8", check=True)
    rows = [line.split(" ") for line in proc.stdout.splitlines()]
    assert rows == [["src.topic", "3", str(40 + i), k, v, str(t), "h1=a,h2=null,h\u00e9=\u00fc"]
                    for i, (t, k, v) in enumerate(lines)]
