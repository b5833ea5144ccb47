"""SIGTERM (every Kubernetes rollout, `docker compose down`, Ctrl-C) stops the replicator in the
promised order — no new batch after the signal, the running one finishes within the grace
period, producers and offset-syncs flushed, then Spark — with exit code 0, no ERROR line and
no traceback, and nothing lost: a restart on the same checkpoint copies the rest."""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.support.kafka import consume_all, create_topic, produce
from tests.support.replicator import Replicator, write_config
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

# Enough small records that the catch-up lasts several of the progress report's 1-s looks: 2,000-
# record batches take ~0.15 s each, and 30,000 records were once copied before any look saw the
# backlog (no "catching up" line, and the test waited for it in vain).
RECORDS = 90_000
GRACE_S = 10  # the replicator's promise: the running batch finishes within 10 s or is abandoned


def _batches(log: str) -> list[int]:
    return [int(b) for b in re.findall(r"flow primary->dr batch (\d+): \d+ records", log)]


def _sigterm(rep: Replicator, grace: float = GRACE_S, group: bool = False,
            signum: int = signal.SIGTERM) -> tuple[int | None, float]:
    """SIGTERM (or ``signum``) the replicator (``group``: its whole process group); (exit code, seconds it took)."""
    signalled = time.monotonic()
    code = rep.terminate(timeout=grace + 20, group=group, signum=signum)
    return code, time.monotonic() - signalled


def _assert_clean_stop(log: str, code: int | None, took: float, grace: float = GRACE_S,
                       signame: str = "SIGTERM") -> None:
    """Exit 0 within the grace period, no error line or traceback, the summary after the signal."""
    assert code == 0, log[-3000:]
    assert took < grace + 15, f"stopped {took:.1f} s after SIGTERM"
    for bad in (" ERROR ", "Traceback", "Exception", "Py4JNetworkError", "EOFError"):
        assert bad not in log, f"{bad!r} in the log of a normal stop:\n{log[log.index(bad) - 1500:][:3000]}"
    assert f"received {signame}" in log, log[-3000:]
    assert "summary: flow primary->dr:" in log[log.index(f"received {signame}"):]


def test_sigterm_mid_catch_up_stops_cleanly_and_loses_nothing(kafka_clusters, unique, tmp_path):
    """SIGTERM goes to the whole process group, as systemd's default KillMode (control-group)
    sends it: the Spark JVM and its Python workers must not die under the running batch. (A
    terminal's Ctrl-C, SIGINT to the group, is the real-time stop below.)"""
    signum = signal.SIGTERM
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"stop-{unique}"
    create_topic(primary, topic, 4)
    produce(primary, topic, ({"key": None, "value": str(i).encode(), "partition": i % 4} for i in range(100)))
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    # small batches (the cap applies from the second batch on), so the catch-up of the records
    # written once the replicator runs is many batches and the signal lands in the middle of it
    args = ["--max-records-per-batch", "2000"]
    rep = Replicator(config, tmp_path / "ckpt", tmp_path / "first.log", extra_args=args).start()
    try:
        rep.wait_for_log("records/s", timeout=180)
        produce(primary, topic, ({"key": None, "value": str(i).encode(), "partition": i % 4}
                                 for i in range(100, RECORDS)))
        first = len(_batches(rep.log()))
        deadline = time.monotonic() + 120
        while (len(_batches(rep.log())) < first + 3 or "catching up:" not in rep.log()) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        # the catch-up shows how far along it is (a log line when stderr is not a terminal)
        progress = re.search(r"flow primary->dr catching up: [\d,]+ of [\d,]+ records \(\d+ %\).*ETA", rep.log())
        assert progress, rep.log()[-3000:]
        backlog = float(re.search(r'sparkmirror_replicator_backlog_records\{flow="primary->dr"\} (\S+)',
                                  rep.metrics_text()).group(1))
        assert 0 < backlog <= RECORDS
        batches_before = len(_batches(rep.log()))
        code, took = _sigterm(rep, group=True, signum=signum)
    finally:
        if rep.running():
            rep.kill9()
    log = rep.log()
    signame = signal.Signals(signum).name
    _assert_clean_stop(log, code, took, signame=signame)
    after_signal = log[log.index(f"received {signame}"):]
    # at most the batch that was running when the signal came, not a stream of new ones
    assert len(_batches(after_signal)) <= 1, f"{_batches(after_signal)} batches after SIGTERM"
    assert batches_before < RECORDS // 2000, "the catch-up ended before the signal: nothing was tested"

    rest = Replicator(config, tmp_path / "ckpt", tmp_path / "second.log", extra_args=args).start()
    got: set[bytes] = set()

    def all_copied() -> bool:
        got.clear()
        got.update(m.value() for m in consume_all(dr, f"primary.{topic}"))
        return len(got) >= RECORDS

    try:
        wait_until(all_copied, 240, interval=3, what=f"all {RECORDS} records on the target after the restart",
                   details=lambda: f"{len(got)} there; restart's log:\n{rest.log()[-3000:]}")
    finally:
        rest.terminate()
    missing = RECORDS - len(got & {str(i).encode() for i in range(RECORDS)})
    assert missing == 0, f"{missing} records lost across the SIGTERM"



def test_real_time_that_cannot_keep_up_catches_up_in_micro_batches_and_returns(kafka_clusters, unique, tmp_path):
    """--data-path auto: a real-time flow that stays far behind leaves for micro-batches, which
    catch it up, and goes real time again once caught up. Here the flow starts in real time on a
    backlog and the wait is zero (the first look that sees it behind while copying), so that real
    time is behind on any machine. The backlog is a million records: the first looks come a second
    apart, and a fast machine copied 300,000 before the second one (a 2-s wait before was also too
    long), while a million keeps about 900,000 behind at that look. Every record
    arrives, in order per partition; leaving real time starts the micro-batches where the target
    acknowledged every record (the real-time writers' delivery reports), and going back starts
    where the micro-batches committed, so nothing is copied twice."""
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"fallback-{unique}"
    backlog = 1_000_000
    create_topic(primary, topic, 2)
    produce(primary, topic, ({"key": None, "value": str(i).encode(), "partition": i % 2} for i in range(backlog)),
            **{"linger.ms": 50, "queue.buffering.max.messages": 1_000_000})
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    env = {"SPARKMIRROR_CATCH_UP_FIRST_RECORDS": "1000000000",  # real time from the start, on the backlog
           "SPARKMIRROR_FALL_BACK_AFTER_S": "0", "SPARKMIRROR_FALL_BACK_ETA_S": "0", "SPARKMIRROR_FALL_BACK_HOLD_S": "0",
           # micro-batches of ~2 s of copying (the first 100,000 records): the catch-up takes several
           "SPARKMIRROR_MICRO_BATCH_SECONDS": "2", "SPARKMIRROR_MICRO_BATCH_FIRST_RECORDS": "100000"}
    rep = Replicator(config, tmp_path / "ckpt", tmp_path / "replicator.log", extra_args=["--data-path", "auto"],
                     env=env).start()
    try:
        rep.wait_for_log("in real time (one task per partition", timeout=240)
        rep.wait_for_log("real time cannot keep up", timeout=120)
        rep.wait_for_log("caught up: switching to the real-time data path", timeout=240)
        got = consume_all(dr, f"primary.{topic}", expected=backlog, timeout=120)
        if len({m.value() for m in got}) < backlog:  # the rest moments later: read the whole topic again
            got = wait_until(lambda: (again := consume_all(dr, f"primary.{topic}"))
                             and len({m.value() for m in again}) >= backlog and again, 60, interval=2,
                             what=f"all {backlog} records on the target")
        assert rep.running(), rep.log()[-3000:]
    finally:
        rep.terminate()
    log = rep.log()
    assert log.count("real time cannot keep up") == 1, log[-3000:]
    # the micro-batches between leaving real time and returning took the backlog in parts
    between = log[log.index("real time cannot keep up"):log.index("caught up: switching to the real-time")]
    sizes = [int(m) for m in re.findall(r"flow primary->dr batch \d+: (\d+) records", between)]
    assert len([n for n in sizes if n]) >= 2 and 0 < sizes[0] <= 100_000, sizes
    firsts: dict[int, list[int]] = {0: [], 1: []}
    seen: set[bytes] = set()
    for m in got:
        if m.value() not in seen:
            seen.add(m.value())
            firsts[m.partition()].append(int(m.value()))
    assert len(seen) == backlog, f"{backlog - len(seen)} of {backlog} records lost"
    for p, ids in firsts.items():
        assert ids == sorted(ids) and all(i % 2 == p for i in ids), f"partition {p} out of order"
    duplicates = len(got) - len(seen)
    print(f"fell back to micro-batches and returned to real time; {duplicates} records copied twice")
    assert "it resumes where the target acknowledged every record, so nothing is copied twice" in log, log[-3000:]
    assert duplicates == 0, f"{duplicates} records copied twice"


# The 30-s interval over three queries is the second variant (-m slow).
@pytest.mark.parametrize("interval,signum", [(None, signal.SIGINT),
                                             pytest.param(30, signal.SIGTERM, marks=pytest.mark.slow)],
                         ids=["default-interval-ctrl-c", "30s-interval-3-queries"])
def test_backlog_in_micro_batches_then_real_time_then_a_clean_sigterm(kafka_clusters, unique, tmp_path, interval,
                                                                     signum):
    """--data-path auto: a flow far behind at start catches up in micro-batches (more records per
    second) and switches to real time once caught up, where it left off (no record copied twice).
    On SIGTERM, or a terminal's Ctrl-C (SIGINT to the whole process group: it must reach the
    replicator's own handler, not PySpark's, which cancels every Spark job, and the Spark JVM and
    its Python workers must not die under the query), the real-time query stops at once, whatever
    its checkpoint interval: exit 0 within the grace period and no error line, and the restart
    resumes where the target acknowledged every record, so that nothing is copied twice and
    nothing is lost."""
    from tests.support.kafka import NumberedProducer

    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic = f"switch-{unique}"
    backlog = 20_000
    create_topic(primary, topic, 2)
    produce(primary, topic, ({"key": None, "value": str(i).encode(), "partition": i % 2} for i in range(backlog)))
    config = write_config(tmp_path / "mm2.properties", primary, dr, {"primary->dr.topics": topic})
    producer = NumberedProducer(primary, topic, 2, rate=200.0, first_id=backlog)
    # the 30-s variant also deals the partitions over three real-time queries, stopped together
    extra = ["--data-path", "auto"] + ([] if interval is None else ["--real-time-checkpoint-interval", str(interval),
                                                                    "--real-time-shards", "3"])
    grace = GRACE_S  # not the checkpoint interval: the stop does not wait for a checkpoint
    rep = Replicator(config, tmp_path / "ckpt", tmp_path / "first.log", extra_args=extra).start()
    try:
        rep.wait_for_log("catching up in micro-batches first", timeout=240)
        rep.wait_for_log("switching to the real-time data path", timeout=240)
        rep.wait_for_log("in real time (one task per partition", timeout=120)
        copied = [m.value() for m in consume_all(dr, f"primary.{topic}", expected=backlog, timeout=120)]
        assert len(copied) == backlog == len(set(copied)), "the switch copied records twice or lost some"
        producer.start()
        deadline = time.monotonic() + 120
        # the stop comes between two checkpoints (the default's first is a minute away): records
        # written after the switch are on the target
        while len(consume_all(dr, f"primary.{topic}", timeout=5)) < backlog + 400 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)
        code, took = _sigterm(rep, grace, group=signum == signal.SIGINT, signum=signum)
    finally:
        if rep.running():
            rep.kill9()
    log = rep.log()
    signame = signal.Signals(signum).name
    _assert_clean_stop(log, code, took, grace, signame=signame)
    assert f"finishes within {grace:.0f} s" in log, "the SIGTERM line should say how long the stop may take"
    time.sleep(2)
    sent = producer.stop()
    rest = Replicator(config, tmp_path / "ckpt", tmp_path / "second.log", extra_args=extra).start()
    values: list[bytes] = []

    def all_copied() -> bool:
        values[:] = [m.value() for m in consume_all(dr, f"primary.{topic}")]
        return len(set(values)) >= sent

    try:
        wait_until(all_copied, 240, interval=3, what=f"all {sent} records on the target after the restart",
                   details=lambda: f"{len(set(values))} there; restart's log:\n{rest.log()[-3000:]}")
    finally:
        rest.terminate()
    assert "switching" not in rest.log(), "the restart should resume on the real-time path where it stopped"
    missing = sent - len(set(values) & {str(i).encode() for i in range(sent)})
    assert missing == 0, f"{missing} of {sent} records lost across the SIGTERM"
    duplicates = len(values) - len(set(values))
    assert "it resumes where the target acknowledged every record, so nothing is copied twice" in log, log[-3000:]
    assert duplicates == 0, f"{duplicates} records copied twice"
