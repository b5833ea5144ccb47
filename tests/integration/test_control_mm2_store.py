"""Apache MM2's own OffsetSyncStore on the same syncs as sparkmirror's, for the precision figures.

Compiles a ten-line harness against the pinned connect-mirror jar (the harness
sits in MM2's package to reach the store's test constructor), feeds it the
offset-syncs the data path emits for 1,001,000 records, and asks it to translate
groups 1k, 100k and 1M records behind, plus 2,000 random offsets. The test
checks the Python port in tests/support/mm2_store.py against the
real class and prints both stores' errors.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from sparkmirror import artifacts
from sparkmirror.model.offsets import OffsetSyncStore
from tests.support.mm2_store import MM2OffsetSyncStore, data_path_syncs

pytestmark = [pytest.mark.mm2]

_HARNESS = """\
package org.apache.kafka.connect.mirror;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.OptionalLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;

/** stdin: "S upstream downstream" adds a sync, "T offset" prints its translation (or "none"). */
public class SparkmirrorStoreHarness extends OffsetSyncStore {
    SparkmirrorStoreHarness() { super(); readToEnd = true; }

    public static void main(String[] args) throws Exception {
        SparkmirrorStoreHarness store = new SparkmirrorStoreHarness();
        TopicPartition tp = new TopicPartition("orders", 0);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split(" ");
            if (f[0].equals("S")) {
                OffsetSync s = new OffsetSync(tp, Long.parseLong(f[1]), Long.parseLong(f[2]));
                store.handleRecord(new ConsumerRecord<>("syncs", 0, 0L, s.recordKey(), s.recordValue()));
            } else {
                OptionalLong r = store.translateDownstream("g", tp, Long.parseLong(f[1]));
                System.out.println(r.isPresent() && r.getAsLong() >= 0 ? Long.toString(r.getAsLong()) : "none");
            }
        }
    }
}
"""


def _javac() -> str:
    java = Path(artifacts.java_binary()).resolve()
    javac = java.parent / "javac"
    found = str(javac) if javac.exists() else shutil.which("javac")
    if not found:
        pytest.skip("no javac next to java or on PATH")
    return found


def test_real_mm2_store_matches_the_port_and_loses_precision(tmp_path):
    jars = artifacts.ensure(artifacts.KAFKA)
    src = tmp_path / "org/apache/kafka/connect/mirror/SparkmirrorStoreHarness.java"
    src.parent.mkdir(parents=True)
    src.write_text(_HARNESS)
    subprocess.run([_javac(), "-cp", jars.classpath(), "-d", str(tmp_path / "out"), str(src)], check=True,
                   capture_output=True)

    records, shift = 1_001_000, 37
    syncs = data_path_syncs(records, batch=7_919, shift=shift)
    behind = [1_000, 100_000, 1_000_000]
    rng = random.Random(4)
    queries = [records - b for b in behind] + [rng.randrange(records) for _ in range(2_000)]
    lines = [f"S {s.upstream_offset} {s.downstream_offset}" for s in syncs] + [f"T {c}" for c in queries]
    out = subprocess.run(
        [artifacts.java_binary(), "-cp", f"{tmp_path / 'out'}:{jars.classpath()}",
         "org.apache.kafka.connect.mirror.SparkmirrorStoreHarness"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()
    real = [None if v == "none" else int(v) for v in out]
    assert len(real) == len(queries)

    port, ours = MM2OffsetSyncStore(), OffsetSyncStore(100)
    for s in syncs:
        port.add(s.upstream_offset, s.downstream_offset)
        ours.add(s)
    assert [port.translate(c) for c in queries] == real

    for b, c, mm2 in zip(behind, queries, real):
        truth = c + shift
        mine = ours.translate("orders", 0, c)
        print(f"group {b:>9,} behind: sparkmirror re-reads {truth - mine}, Apache MM2 {artifacts.KAFKA_VERSION} re-reads "
              f"{truth - mm2 if mm2 is not None else 'n/a'} ({len(syncs)} syncs, offset.lag.max 100)")
        assert mine <= truth and truth - mine <= 100
        assert mm2 is not None and mm2 <= truth
    worst_mm2 = max(c + shift - r for c, r in zip(queries, real) if r is not None)
    worst_ours = max(c + shift - ours.translate("orders", 0, c) for c in queries)
    print(f"worst over {len(queries)} offsets: sparkmirror {worst_ours}, Apache MM2 {worst_mm2}")
    assert worst_ours <= 100 < worst_mm2
