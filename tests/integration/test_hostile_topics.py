"""Garbage on the internal topics a running `sparkmirror monitor` reads (real brokers, real process).

Anyone with write access can put any bytes on ``A.heartbeats``, ``A.checkpoints.internal``
or ``mm2-offset-syncs.B.internal``. The monitor must keep serving, count each
undecodable record in sparkmirror_decode_errors_total, log the problem once per
topic (not once per record), and keep using the good records around the bad
ones. ``sparkmirror inspect`` must list such a topic to its end, printing the
bad records as errors.
"""

from __future__ import annotations

import json
import random
import signal
import struct
import subprocess
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devenv.kafka import free_port
from sparkmirror.errors import RecordFormatError
from sparkmirror.model.records import Checkpoint, Heartbeat, OffsetSync
from tests.support.cli import run_cli
from tests.support.kafka import create_topic, produce
from tests.support.monitor import write_mm2_config
from tests.support.waiting import wait_until
from tests.support.web import fetch

pytestmark = pytest.mark.kafka

INT16 = struct.Struct(">h")


def garbage(cls, good, seed: int) -> list[tuple[bytes | None, bytes | None]]:
    """Hostile (key, value) pairs for one record type, around the valid record ``good``."""
    rng = random.Random(seed)
    key, value = good.encode_key(), good.encode_value()
    return [
        (None, None), (b"", b""), (None, value), (key, None), (key, b""),
        (bytes(rng.randrange(256) for _ in range(40)), bytes(rng.randrange(256) for _ in range(40))),
        (key[:3], value), (key, value[:5]),
        (INT16.pack(-1) + key[2:], value),                       # negative string length
        (INT16.pack(32767) + key[2:], value),                    # length past the end
        (INT16.pack(2) + b"\xff\xfe" + key[2:], value),          # a string that is not UTF-8 ...
        (INT16.pack(3) + b"\xed\xa0\x80" + key[2:], value),      # ... nor a lone surrogate
        (key, INT16.pack(7) + value[2:]) if cls is not OffsetSync else (key, value[:15]),  # unknown version
        (key, bytes(rng.randrange(256) for _ in range(600_000))) if cls is OffsetSync else
        (bytes(rng.randrange(256) for _ in range(600_000)), value),  # 600 KB of noise
    ]


def undecodable(cls, records) -> int:
    bad = 0
    for key, value in records:
        try:
            cls.decode(key, value)
        except RecordFormatError:
            bad += 1
    return bad


def as_records(pairs, timestamp_ms: int | None = None) -> list[dict]:
    return [{"key": k, "value": v, **({"timestamp": timestamp_ms} if timestamp_ms else {})} for k, v in pairs]


def decode_errors(base: str) -> dict[str, float]:
    body = fetch(base + "/metrics").body
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name == "sparkmirror_decode_errors_total":
                out[s.labels["topic"]] = s.value
            elif s.name == "sparkmirror_heartbeats_total":
                out["heartbeats received"] = s.value
    return out


def test_monitor_and_inspect_survive_garbage_on_every_internal_topic(kafka_clusters, tmp_path, unique):
    source, target = f"p{unique}", f"d{unique}"
    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    config = write_mm2_config(tmp_path / "mm2.properties", {source: primary, target: dr}, [(source, target)],
                              {"topics": f"nothing-{unique}", "emit.checkpoints.interval.seconds": "1"})
    now_ms = int(time.time() * 1000)
    topics = {  # topic -> (cluster bootstrap, record class, a valid record)
        f"{source}.heartbeats": (dr, Heartbeat, Heartbeat(target, source, now_ms)),
        f"mm2-offset-syncs.{target}.internal": (primary, OffsetSync, OffsetSync(f"nothing-{unique}", 0, 5, 5)),
        f"{source}.checkpoints.internal": (dr, Checkpoint, Checkpoint("g", f"{source}.nothing", 0, 5, 5)),
    }
    expected, total = {}, {}
    for i, (topic, (bootstrap, cls, good)) in enumerate(topics.items()):
        create_topic(bootstrap, topic, partitions=2, config={"max.message.bytes": "2000000"})
        pairs = garbage(cls, good, seed=i)
        produce(bootstrap, topic, as_records([(good.encode_key(), good.encode_value()), *pairs]), **{
            "message.max.bytes": 2_000_000})
        expected[topic], total[topic] = undecodable(cls, pairs), 1 + len(pairs)
        assert expected[topic] >= 12, f"{topic}: only {expected[topic]} of the hostile records fail to decode"

    port = free_port()
    log_path = tmp_path / "monitor.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "sparkmirror_cli.main", "monitor", str(config), "--listen",
                                 f"127.0.0.1:{port}", "--interval", "0.5", "--metadata-interval", "1"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        def monitor_state() -> str:
            return f"monitor exit code {proc.poll()}; log:\n{log_path.read_text()[-3000:]}"

        counted = wait_until(lambda: (e := decode_errors(base)) and all(e.get(t) == n for t, n in expected.items())
                             and e, 60, interval=0.3, what="every undecodable record counted",
                             ignoring=OSError,  # not listening yet
                             alive=lambda: proc.poll() is None, details=monitor_state)
        assert counted["heartbeats received"] >= 1, "the valid heartbeat among the garbage was not used"

        # More garbage while it runs: counted, still not logged again.
        for i, (topic, (bootstrap, cls, good)) in enumerate(topics.items()):
            pairs = garbage(cls, good, seed=100 + i)
            produce(bootstrap, topic, as_records(pairs), **{"message.max.bytes": 2_000_000})
            expected[topic] += undecodable(cls, pairs)
            total[topic] += len(pairs)
        wait_until(lambda: all(decode_errors(base).get(t) == n for t, n in expected.items()), 60, interval=0.3,
                   what="the live garbage counted", ignoring=OSError, alive=lambda: proc.poll() is None,
                   details=monitor_state)

        for path in ("/healthz", "/api/status?detail=partitions", "/", "/metrics"):
            code, _, body = fetch(base + path)
            assert code == 200, (path, body[:500])
        status = json.loads(fetch(base + "/api/status").body)
        assert status["flows"][0]["name"] == f"{source}->{target}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    log_text = log_path.read_text(errors="replace")
    assert "Traceback" not in log_text, log_text[-3000:]
    for topic in topics:
        assert log_text.count(f"in {topic} on") == 1, f"{topic} not logged exactly once:\n{log_text[-3000:]}"

    # inspect lists each topic to its end, the garbage as error lines, and exits 0
    for topic, (bootstrap, cls, _good) in topics.items():
        cluster = target if bootstrap == dr else source
        out = run_cli("inspect", str(config), "--cluster", cluster, "--topic", topic, "--json", "--timeout", "30")
        assert out.returncode == 0, out.stderr[-3000:]
        assert "Traceback" not in out.stderr
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        assert sum("error" in r for r in rows) == expected[topic]
        assert sum("record" in r for r in rows) == total[topic] - expected[topic]
        assert f"{expected[topic]} undecodable" in out.stderr
