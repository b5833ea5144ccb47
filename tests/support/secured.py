"""Helpers for the tests against secured clusters (SASL_SSL, mutual TLS): reading the internal
topics as a given client, and searching output for secrets."""

from __future__ import annotations

from pathlib import Path

from tests.support.kafka import admin, consume_all
from tests.support.waiting import wait_until

#: shorter secrets (a key's short last line) are not looked for: they would match by chance
MIN_SECRET = 24


def leaks(text: str, secrets: dict[str, str]) -> list[str]:
    """The names of the secrets found in ``text``, whole or as a cut from their random middle."""
    found = []
    for name, secret in secrets.items():
        if len(secret) < MIN_SECRET:
            # A PEM's last base64 line can be a few characters ("Aw=="), or none at all once cut:
            # found in any text by chance, it would say nothing.
            continue
        # the whole secret, and a cut from its random middle (a truncated echo shows that)
        if secret in text or secret[-24:-12] in text:
            found.append(name)
    return found


def files_under(directory: Path) -> dict[str, str]:
    return {f"file {p.relative_to(directory)}": p.read_bytes().decode("utf-8", "replace")
            for p in directory.rglob("*") if p.is_file()}


def topic_exists(cluster, topic: str, user: str | None = None) -> bool:
    return topic in admin(cluster.bootstrap, **cluster.client_config(user)).list_topics(timeout=10).topics


def wait_for_records(cluster, topic: str, record_type, done, timeout: float, user: str | None = None) -> list:
    """The decoded records of an internal topic, read as ``user`` until ``done(records)``."""
    records: list = []

    def read():
        if not topic_exists(cluster, topic, user):
            return None
        records[:] = [record_type.decode(m.key(), m.value()) for m in
                      consume_all(cluster.bootstrap, topic, timeout=30, **cluster.client_config(user))]
        return done(records) and list(records)

    return wait_until(read, timeout, interval=1, what=f"the records wanted on {topic} on {cluster.name}",
                      details=lambda: f"last records read: {records[-10:]}")


def caught_up(topic: str):
    """A predicate of the monitor's /api/status: the first flow has ``topic`` at lag 0 and has
    received heartbeats and offset-syncs (returns the flow then)."""

    def check(status):
        flow = status["flows"][0]
        t = next((t for t in flow["topics"] if t["topic"] == topic), None)
        return (t is not None and t["lag_records"] == 0 and flow["heartbeat"]["received_total"] > 0
                and flow["offset_sync"]["received_total"] > 0 and flow)

    return check
