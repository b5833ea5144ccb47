"""Why a batch waits although both clusters answer: target partitions short of in-sync replicas.

The writer produces with ``acks=all``; a partition whose in-sync replicas are fewer
than its ``min.insync.replicas`` refuses such writes (NOT_ENOUGH_REPLICAS), and the
producer retries them until the replicas are back or ``message.timeout.ms`` runs
out. Nothing is lost meanwhile, but without this probe the only thing the log
could say is that the batch is slow. The driver asks the target's metadata and
the topics' ``min.insync.replicas`` only when a batch is already slow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: what a partition looks like in librdkafka's metadata: ``.id``, ``.leader``, ``.isrs``
PartitionMetadata = object


def short_partitions(partitions: Mapping[int, PartitionMetadata], min_insync: int) -> dict[str, list[int]]:
    """Partitions that refuse acks=all writes, by reason: ``"no leader"`` or ``"N in-sync"``."""
    out: dict[str, list[int]] = {}
    for pid, p in sorted(partitions.items()):
        if p.leader < 0:
            out.setdefault("no leader", []).append(pid)
        elif len(p.isrs) < min_insync:
            out.setdefault(f"{len(p.isrs)} in-sync", []).append(pid)
    return out


def describe(cluster: str, topic: str, short: Mapping[str, list[int]], min_insync: int) -> list[str]:
    """One phrase per reason, naming cluster, topic and partitions."""
    out = []
    for reason, parts in short.items():
        which = f"partition{'s' if len(parts) > 1 else ''} {', '.join(map(str, parts))}"
        if reason == "no leader":
            out.append(f"cluster {cluster} topic {topic} {which} without a leader")
        else:
            n = reason.split()[0]
            out.append(f"cluster {cluster} topic {topic} {which} with {n} in-sync replica{'s' if n != '1' else ''}, "
                       f"fewer than its min.insync.replicas {min_insync} (the target refuses acks=all writes there "
                       f"until a replica is back in sync)")
    return out


def short_of_replicas(admin_client, cluster: str, topics: Iterable[str], timeout: float = 5.0) -> list[str]:
    """What the target's metadata says stops writes to ``topics``; empty when nothing does (or on error)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    try:
        md = admin_client.list_topics(timeout=timeout).topics
        suspects = {t: md[t].partitions for t in sorted(set(topics))
                    if t in md and md[t].error is None
                    and any(p.leader < 0 or len(p.isrs) < len(p.replicas) for p in md[t].partitions.values())}
        if not suspects:
            return []
        futures = admin_client.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in suspects],
                                                request_timeout=timeout)
        out = []
        for res, fut in futures.items():
            entry = fut.result().get("min.insync.replicas")
            min_insync = int(entry.value) if entry is not None and entry.value else 1
            out += describe(cluster, res.name, short_partitions(suspects[res.name], min_insync), min_insync)
        return out
    except Exception:  # a probe only: the batch's own retries and errors are what count
        return []
