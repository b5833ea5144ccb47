"""The real-time writer (Java) writes OffsetSync bytes as sparkmirror.model.records does, emits
exactly the offset-syncs the Python OffsetSyncEmitter does,
measures a record as the broker does, and knows where its copy has got to.

Both implement MM2's emission rule; this feeds the same delivery reports — consecutive runs,
upstream gaps (compaction, transaction markers), a downstream rewind (a replayed batch),
batch ends — to the Java class through a small harness (a Kafka MockProducer stands in for
the syncs producer) and to the Python emitter, and compares the syncs in order.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from sparkmirror.model.offsets import OffsetSyncEmitter
from sparkmirror.model.records import OffsetSync
from tests.support.jvm_harness import compile_harnesses

@pytest.fixture(scope="module")
def harness_classpath():
    return compile_harnesses("EmitterHarness", "SizeHarness", "PositionHarness", "FlushHarness",
                             "OffsetSyncBytesHarness")


def _workload(rng: random.Random, n: int) -> list[str]:
    lines, u, d = [], rng.randrange(0, 1000), rng.randrange(0, 1000)
    for _ in range(n):
        roll = rng.random()
        if roll < 0.05:
            u += rng.randrange(2, 20)  # a gap upstream
        elif roll < 0.07:
            d -= rng.randrange(1, 10)  # a replay rewrote records downstream
            u -= rng.randrange(1, 10)
        if rng.random() < 0.03:
            lines.append("flush")
        lines.append(f"{u} {d}")
        u += 1
        d += 1
    lines.append("flush")
    return lines


def _python_syncs(lines: list[str], lag_max: int) -> list[str]:
    em = OffsetSyncEmitter(lag_max)
    out = []
    for line in lines:
        if line == "flush":
            out += [f"{s.upstream_offset} {s.downstream_offset}" for s in em.take_pending()]
            continue
        u, d = map(int, line.split())
        s = em.record("t", 0, u, d)
        if s is not None:
            out.append(f"{s.upstream_offset} {s.downstream_offset}")
    return out


@pytest.mark.parametrize("seed, lag_max", [(1, 0), (2, 1), (3, 10), (4, 100), (5, 7)])
def test_java_writer_emits_the_same_syncs_as_the_python_emitter(harness_classpath, seed, lag_max):
    lines = _workload(random.Random(seed), 3000)
    proc = subprocess.run(["java", "-cp", harness_classpath, "sparkmirror.EmitterHarness", str(lag_max)],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    java = proc.stdout.split("\n")[:-1]
    python = _python_syncs(lines, lag_max)
    assert len(python) > 20
    assert java == python


def test_the_writers_size_check_is_the_size_on_the_wire(harness_classpath):
    """The writer stops a flow on a record larger than the target topic's max.message.bytes
    before sending it: its size must be exactly what the broker measures (a batch of one,
    uncompressed), or it would stop on records the target accepts."""
    rng = random.Random(7)
    lines = ["-1 -1", "0 0", "-1 100", "3 5000", "10 1048576", "5 10 4:-1", "5 10 4:8 1:0 30:200"]
    for _ in range(200):
        headers = " ".join(f"{rng.randrange(0, 40)}:{rng.choice([-1, rng.randrange(0, 3000)])}"
                           for _ in range(rng.choice([0, 0, 1, 3])))
        lines.append(f"{rng.choice([-1, rng.randrange(0, 200)])} {rng.choice([-1, rng.randrange(0, 200_000)])} "
                     f"{headers}".strip())
    proc = subprocess.run(["java", "-cp", harness_classpath, "sparkmirror.SizeHarness"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    rows = [tuple(map(int, line.split())) for line in proc.stdout.splitlines()]
    assert len(rows) == len(lines)
    assert [check for check, _, _ in rows] == [wire for _, wire, _ in rows]
    # The allocation-free pre-check that decides whether to measure at all never says no to
    # a record that would surpass a limit one byte under its size.
    assert [bound for _, _, bound in rows] == [1] * len(rows)


def test_the_writers_position_never_passes_a_record_the_target_did_not_take(harness_classpath):
    """A stopped query resumes at this position: every record before it is on the target. A
    failed record holds it back whatever was acknowledged after it, until a retried task copies
    that record after all (reports come in order, so the ones between were copied too)."""
    steps = [("ok 0", 1), ("ok 1", 2), ("ok 2", 3),
             ("fail 3", 3), ("ok 4", 3), ("ok 5", 3),
             ("ok 3", 6),                               # the retried task copied 3: all up to 5 are there
             ("fail 6", 6), ("ok 7", 6), ("fail 9", 6), ("ok 10", 6),
             ("ok 6", 9),                               # 6 copied after all; 9 still failed
             ("ok 8", 9), ("ok 9", 11)]                 # the retry got 9 through too
    proc = subprocess.run(["java", "-cp", harness_classpath, "sparkmirror.PositionHarness"],
                          input="\n".join(line for line, _ in steps) + "\n", capture_output=True, text=True,
                          check=True)
    assert [int(v) for v in proc.stdout.split()] == [want for _, want in steps]


def test_a_flush_waits_no_longer_than_it_is_given(harness_classpath):
    """A stop flushes the writers' producers before it takes their positions. Records to an
    unreachable target (a Ctrl-C that also stopped the brokers) would hold a producer's flush for
    its delivery timeout, 2 minutes by default: the stop gives up after its bound instead, says
    why, and resumes from the checkpoint."""
    proc = subprocess.run(["java", "-cp", harness_classpath, "sparkmirror.FlushHarness"], capture_output=True,
                          text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (done_ms, done), (stuck_ms, stuck) = (line.split(" ", 1) for line in proc.stdout.splitlines())
    assert done == "null"
    assert stuck.startswith("the target did not acknowledge every record within 0.5 s"), stuck
    assert int(stuck_ms) < 30_000, "flushAll waited for the stuck producer's flush (60 s), not for its bound"


def _sync_vectors(rng: random.Random) -> list[OffsetSync]:
    """Edge values and random ones: every byte of key and value is exercised."""
    topics = ["t", "orders", "primary.orders", "zahlungen-ü", "注文", "a" * 249, "x-" * 40]
    edges = [OffsetSync(t, p, u, d) for t in topics[:3]
             for p, u, d in [(0, 0, 0), (1, 1, 1), (2**31 - 1, 2**63 - 1, 2**63 - 1), (255, 256, 65535)]]
    rand = [OffsetSync(rng.choice(topics), rng.randrange(0, 2**31), rng.randrange(0, 2**63), rng.randrange(0, 2**63))
            for _ in range(300)]
    return edges + rand


def test_java_writer_writes_offset_sync_bytes_as_the_model_does(harness_classpath):
    """The real-time writer's OffsetSync encoders against sparkmirror.model.records on generated
    vectors: the bytes MM2's OffsetSyncStore reads are defined once in Python and checked here."""
    syncs = _sync_vectors(random.Random(7))
    lines = [f"{s.topic.encode().hex()} {s.partition} {s.upstream_offset} {s.downstream_offset}" for s in syncs]
    proc = subprocess.run(["java", "-cp", harness_classpath, "sparkmirror.OffsetSyncBytesHarness"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, check=True)
    java = proc.stdout.split("\n")[:-1]
    assert len(java) == len(syncs)
    for sync, got in zip(syncs, java):
        assert got == f"{sync.encode_key().hex()} {sync.encode_value().hex()}", sync
        assert OffsetSync.decode(*map(bytes.fromhex, got.split())) == sync
