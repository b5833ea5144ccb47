"""One monitor over a hub-and-spoke mm2.properties: 10 clusters, 18 flows, one cluster unreachable.

The hub and eight spokes are aliases of the session's two brokers (hub: ``dr``, spokes:
``primary``), the ninth spoke points at a closed port. Every spoke replicates to the hub and
the hub to every spoke: 18 flows, 16 of them live. Each live flow has its own topic and a lag
known by construction that differs from every other flow's (flow ``k``: ``k + 2`` records
not copied, the oldest written ``100 + 10 k`` seconds ago), and heartbeats arrive for all of
them. The monitor must give each flow its own figures, not another flow's; and the two
flows through the unreachable spoke must not delay the others: the monitor's request timeout
is 20 s, and every live flow's figures are right while the first request to the dead spoke
is still waiting out that timeout (the spoke not yet reported down), then keep following the
flows once it is (one more record copied on every live flow shows at once).
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from devenv.kafka import free_port
from sparkmirror.model.records import Heartbeat, OffsetSync
from tests.support.kafka import create_topic
from tests.support.monitor import RunningMonitor, produce_raw, write_mm2_config

pytestmark = pytest.mark.kafka

SPOKES = 9               # the last one unreachable
REQUEST_TIMEOUT = 20.0   # the monitor's --timeout: how long a request to the dead spoke waits
TOLERANCE = 0.5          # seconds


class MirrorFlow:
    """flow ``src->dst`` with its own topic: ``k + 3`` records stamped ``100 + 10 k`` s ago, one copied."""

    def __init__(self, k: int, src: str, dst: str, brokers: dict[str, str], unique: str) -> None:
        self.k, self.src, self.dst = k, src, dst
        self.name = f"{src}->{dst}"
        self.source, self.target = brokers[src], brokers[dst]
        self.topic = f"t{k}-{unique}"
        self.remote = f"{src}.{self.topic}"
        self.heartbeats = f"{src}.heartbeats"
        self.written_ms = int((time.time() - 100 - 10 * k) * 1000)
        self.copied = 0

    def create(self) -> None:
        create_topic(self.source, self.topic)
        create_topic(self.target, self.remote)
        # shared by the spokes on one broker (distinct clusters in real life): created once
        _ensure_topic(self.target, self.heartbeats)
        _ensure_topic(self.source, f"mm2-offset-syncs.{self.dst}.internal")
        produce_raw(self.source, self.topic, [{"key": b"k", "value": b"v", "timestamp": self.written_ms}] * (self.k + 3))
        sync = OffsetSync(self.topic, 0, 0, 0)
        produce_raw(self.source, f"mm2-offset-syncs.{self.dst}.internal",
                    [{"key": sync.encode_key(), "value": sync.encode_value()}])
        self.copy()

    def copy(self) -> None:
        produce_raw(self.target, self.remote, [{"key": b"k", "value": b"m", "timestamp": self.written_ms}])
        self.copied += 1

    @property
    def lag_records(self) -> int:
        return self.k + 3 - self.copied


def _ensure_topic(bootstrap: str, topic: str) -> None:
    try:
        create_topic(bootstrap, topic)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class Heartbeats:
    """A heartbeat per live flow every second, on each flow's target."""

    def __init__(self, flows: list[MirrorFlow]) -> None:
        self.flows = flows
        self._producers = {f.target: Producer({"bootstrap.servers": f.target, "linger.ms": 0}) for f in flows}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = int(time.time() * 1000)
            for f in self.flows:
                hb = Heartbeat(f.dst, f.src, now)
                self._producers[f.target].produce(f.heartbeats, hb.encode_value(), key=hb.encode_key())
            for p in self._producers.values():
                p.flush(10)
            self._stop.wait(1)

    def __enter__(self) -> "Heartbeats":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


def _figures(status: dict, flows: list[MirrorFlow]) -> dict[str, tuple]:
    """flow -> (records lag, seconds lag - truth, heartbeat seen) from one status."""
    by_name = {f["name"]: f for f in status["flows"]}
    out = {}
    for f in flows:
        doc = by_name[f.name]
        seconds = doc["lag"]["seconds"]
        truth = status["generated_at"] - f.written_ms / 1000
        out[f.name] = (doc["lag"]["records"], None if seconds is None else round(seconds - truth, 3),
                       doc["heartbeat"]["last_timestamp_ms"] is not None)
    return out


def _right(figures: dict[str, tuple], flows: list[MirrorFlow]) -> bool:
    return all(figures[f.name][0] == f.lag_records and figures[f.name][1] is not None
               and abs(figures[f.name][1]) <= TOLERANCE and figures[f.name][2] for f in flows)


def test_hub_and_spoke_flows_keep_their_own_figures_and_a_dead_spoke_delays_none(kafka_clusters, tmp_path, unique):
    hub = f"hub{unique}"
    spokes = [f"s{i}{unique}" for i in range(SPOKES)]
    dead = spokes[-1]
    brokers = {hub: kafka_clusters.dr.bootstrap, **{s: kafka_clusters.primary.bootstrap for s in spokes[:-1]},
               dead: f"127.0.0.1:{free_port()}"}
    pairs = [(s, hub) for s in spokes] + [(hub, s) for s in spokes]
    live = [MirrorFlow(k, src, dst, brokers, unique) for k, (src, dst) in enumerate(pairs) if dead not in (src, dst)]
    assert len(pairs) == 18 and len(live) == 16
    for f in live:
        f.create()
    extra = {"emit.heartbeats.interval.seconds": "1"}
    for k, (src, dst) in enumerate(pairs):
        extra[f"{src}->{dst}.topics"] = f"t{k}-{unique}"
    config = write_mm2_config(tmp_path / "mm2.properties", brokers, pairs, extra)

    with Heartbeats(live), RunningMonitor(config, topics_exclude=[".*heartbeats"], interval=1.0,
                                         timeout=REQUEST_TIMEOUT) as mon:
        # Every live flow right while the dead spoke's first requests still wait out their timeout.
        started = time.monotonic()
        status = mon.wait_for(lambda s: _right(_figures(s, live), live) and s, REQUEST_TIMEOUT * 3,
                              "every live flow's own figures")
        clusters = {c["alias"]: c for c in status["clusters"]}
        assert clusters[dead]["up"] is None, (
            f"the live flows' figures came only after the dead spoke was reported down "
            f"({time.monotonic() - started:.1f} s after the start): {clusters[dead]}")
        assert all(clusters[c]["up"] for c in [hub, *spokes[:-1]]), clusters

        # The dead spoke reported down; its two flows say so; the others keep following their flows.
        status = mon.wait_for(lambda s: next(c for c in s["clusters"] if c["alias"] == dead)["up"] is False and s,
                              REQUEST_TIMEOUT * 3, "the dead spoke reported down")
        by_name = {f["name"]: f for f in status["flows"]}
        for name in (f"{dead}->{hub}", f"{hub}->{dead}"):
            assert by_name[name]["status"] == "ERR" and dead in " ".join(by_name[name]["reasons"]), by_name[name]
        for f in live:
            f.copy()
        mon.wait_for(lambda s: _right(_figures(s, live), live), 30, "every live flow's figures after one more copy")
