"""Topics before records: discover source topics, create and grow mirror topics.

MirrorSourceConnector's rules: a mirror topic gets the source partition count,
``replication.factor`` and every source config entry that is not a default
(set on the topic, or a dynamic broker or cluster-wide default such as a
``log.retention.ms`` set with incrementalAlterConfigs) and is neither read-only,
sensitive, a static broker setting nor excluded (``config_carried``, which
topic config sync uses too); partition counts only ever grow. The data path never writes to a topic this
module has not created first — the brokers have auto-creation off.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from dataclasses import dataclass

from sparkmirror.errors import ClusterError
from sparkmirror.model.filters import replicable_topic

log = logging.getLogger(__name__)

# confluent_kafka.admin.ConfigSource values
STATIC_BROKER_SOURCE = 4
DEFAULT_SOURCE = 5


@dataclass(frozen=True)
class TopicPlan:
    source_topic: str
    target_topic: str
    partitions: int


def _result(future, what: str, cluster: str, timeout: float = 60.0):
    try:
        return future.result(timeout)
    except Exception as exc:  # KafkaException carries a KafkaError
        raise ClusterError(f"{what} failed: {exc}", cluster=cluster) from None


def list_topics(admin, cluster: str, timeout: float = 30.0):
    """Cluster metadata, or a ClusterError naming the cluster (it is down, unreachable or
    refuses the credentials: that one is told at once, not after the whole timeout)."""
    import time

    from replicator.kafkaclients import forget_error, last_error

    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin.list_topics(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            forget_error(cluster)
            return md
        except Exception as exc:
            err = exc.args[0] if getattr(exc, "args", None) else None
            text = err.str() if hasattr(err, "str") else str(exc)
        try:
            admin.poll(0)  # serve the client's error callbacks (an authentication failure)
        except Exception:
            pass
        why = last_error(cluster)
        if why and "GSSAPI" in why:
            raise ClusterError(f"cannot read the topic list: Kerberos: {why}", cluster=cluster,
                               hint=f"check the keyTab and principal in {cluster}.sasl.jaas.config (`kinit -kt KEYTAB "
                                    "PRINCIPAL` on this machine says why; the keytab must hold the principal's "
                                    "current key) and that KRB5_CONFIG or /etc/krb5.conf names the realm's KDC") from None
        if why:
            raise ClusterError(f"cannot read the topic list: {why}", cluster=cluster,
                               hint="check the security settings of this cluster in mm2.properties "
                                    "(ALIAS.sasl.jaas.config, ALIAS.ssl.truststore.*, ALIAS.ssl.keystore.*)") from None
        if time.monotonic() >= deadline:
            raise ClusterError(f"cannot read the topic list: {text}", cluster=cluster) from None


def excluded_config(name: str, patterns: list[str]) -> bool:
    """config.properties.exclude entries are regexes in MM2 (matched whole)."""
    for p in patterns:
        try:
            if re.fullmatch(p, name):
                return True
        except re.error:
            if fnmatch.fnmatch(name, p):
                return True
    return False


#: A broker refuses a topic config it has no such name for (Kafka 4 removed
#: ``message.format.version``, which many 3.x topics still carry) with this text.
_UNKNOWN_CONFIG = re.compile(r"Unknown topic config name: ([A-Za-z0-9._-]+)")


def unknown_config_name(exc: BaseException) -> str | None:
    """The config name a broker's refusal says it does not know, or None for other errors."""
    match = _UNKNOWN_CONFIG.search(str(exc))
    return match.group(1) if match else None


def warn_unknown_config(flow, name: str, topic: str) -> None:
    log.warning("%s: topic config %s (set on %s) is unknown to cluster %s, a Kafka version without it: "
                "not carried to the mirror topics there; add it to config.properties.exclude to say so",
                flow.name, name, topic, flow.target)


def config_source(entry) -> int:
    """ConfigEntry.source is an int from the broker and a ConfigSource when built by hand."""
    return int(getattr(entry.source, "value", entry.source))


def config_carried(name: str, entry, exclude: list[str]) -> bool:
    """MM2's targetConfig filter: a source entry that may reach the mirror topic (read-only, sensitive,
    static broker settings and ``config.properties.exclude`` never do)."""
    return not (entry.is_read_only or entry.is_sensitive or config_source(entry) == STATIC_BROKER_SOURCE
                or excluded_config(name, exclude))


class TopicSync:
    """Keeps the mirror topics of one flow in step with the source."""

    def __init__(self, flow, source_admin, target_admin) -> None:
        self.flow = flow
        self.policy = flow.policy
        self.topic_filter = flow.topic_filter
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.seen_on_target: set[str] = set()  # mirror topics this run saw or created on the target
        self.unknown_on_target: set[str] = set()  # topic configs the target's brokers refused as unknown

    # -- discovery -------------------------------------------------------------------
    def discover(self) -> dict[str, int]:
        """Source topics this flow replicates, with their partition counts."""
        md = list_topics(self.source_admin, self.flow.source)
        out = {}
        for name, tmd in md.topics.items():
            if tmd.error is not None:
                continue
            if replicable_topic(self.policy, self.topic_filter, self.flow.target, name,
                                heartbeats_replication_enabled=self.flow.heartbeats_replication_enabled):
                out[name] = len(tmd.partitions)
        return dict(sorted(out.items()))

    def plan(self, source_topics: dict[str, int]) -> list[TopicPlan]:
        return [
            TopicPlan(t, self.policy.format_remote_topic(self.flow.source, t), n)
            for t, n in source_topics.items()
        ]

    # -- creation and growth -----------------------------------------------------------
    def source_configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        if not topics:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        futures = self.source_admin.describe_configs(resources)
        out: dict[str, dict[str, str]] = {}
        for res, fut in futures.items():
            entries = _result(fut, f"describing configs of {res.name}", self.flow.source)
            out[res.name] = {  # at creation MM2 copies the non-default ones (targetConfig(..., false))
                name: e.value
                for name, e in entries.items()
                if config_source(e) != DEFAULT_SOURCE and e.value is not None
                and config_carried(name, e, self.flow.config_properties_exclude)
            }
        return out

    def ensure(self, plans: list[TopicPlan]) -> list[str]:
        """Create missing mirror topics and grow partitions. Returns what changed."""
        from confluent_kafka.admin import NewPartitions, NewTopic

        changes: list[str] = []
        existing = list_topics(self.target_admin, self.flow.target).topics
        missing = [p for p in plans if p.target_topic not in existing]
        for p in missing:
            if p.target_topic in self.seen_on_target:
                # MM2 re-creates a mirror topic that disappeared from the target; so do we, loudly.
                log.warning("mirror topic %s was deleted on cluster %s while %s on %s is still replicated: "
                            "re-creating it; the records it held are gone from the target and are not copied "
                            "again, copying continues from the replicator's current position",
                            p.target_topic, self.flow.target, p.source_topic, self.flow.source)
        self.seen_on_target.update(p.target_topic for p in plans if p.target_topic in existing)
        configs = self.source_configs([p.source_topic for p in missing]) if missing else {}
        pending = list(missing)
        while pending:
            for p in pending:
                configs[p.source_topic] = {k: v for k, v in configs.get(p.source_topic, {}).items()
                                           if k not in self.unknown_on_target}
            new = [
                NewTopic(p.target_topic, p.partitions, self.flow.replication_factor,
                         config=configs.get(p.source_topic, {}))
                for p in pending
            ]
            retry = []
            for name, fut in self.target_admin.create_topics(new).items():
                plan = next(p for p in pending if p.target_topic == name)
                try:
                    fut.result(60)
                except Exception as exc:
                    if "TOPIC_ALREADY_EXISTS" in str(exc):
                        continue
                    unknown = unknown_config_name(exc)
                    if unknown and unknown in configs.get(plan.source_topic, {}):
                        self.unknown_on_target.add(unknown)
                        warn_unknown_config(self.flow, unknown, plan.source_topic)
                        retry.append(plan)
                        continue
                    raise ClusterError(
                        f"cannot create mirror topic {name}: {exc}", cluster=self.flow.target, topic=name,
                        hint="check replication.factor against the target's broker count and the ACLs of the replicator",
                    ) from None
                self.seen_on_target.add(name)
                msg = f"created {name} on {self.flow.target} ({plan.partitions} partitions, replication factor {self.flow.replication_factor}, configs {configs.get(plan.source_topic, {})})"
                log.info(msg)
                changes.append(msg)
            pending = retry
        grow = []
        for p in plans:
            tmd = existing.get(p.target_topic)
            if tmd is not None and len(tmd.partitions) < p.partitions:
                grow.append(NewPartitions(p.target_topic, p.partitions))
        if grow:
            for name, fut in self.target_admin.create_partitions(grow).items():
                _result(fut, f"growing partitions of {name}", self.flow.target)
                msg = f"grew {name} on {self.flow.target} to {next(g.new_total_count for g in grow if g.topic == name)} partitions"
                log.info(msg)
                changes.append(msg)
        return changes


_WARNED_PARTITIONS: set[tuple[str, str]] = set()


def ensure_internal_topic(admin, cluster: str, name: str, replication_factor: int) -> None:
    """A single-partition compacted internal topic (offset-syncs, checkpoints, heartbeats).

    An existing one is kept as it is. Like MM2, sparkmirror writes these records to
    partition 0 only, and MM2 reads offset-syncs from partition 0 only: a topic someone
    created with more partitions works, but its other partitions hold nothing MM2 reads
    (records an older writer spread over them included), so it is reported once.
    """
    from confluent_kafka.admin import NewTopic

    existing = list_topics(admin, cluster).topics.get(name)
    if existing is not None:
        count = len(existing.partitions)
        if count > 1 and (cluster, name) not in _WARNED_PARTITIONS:
            _WARNED_PARTITIONS.add((cluster, name))
            log.warning("internal topic %s on cluster %s has %d partitions; sparkmirror writes it to partition 0 "
                        "only, as MM2 does (MM2 reads offset-syncs from partition 0 only): the other partitions "
                        "are ignored; a single partition is what both expect", name, cluster, count)
        return
    fut = admin.create_topics([NewTopic(name, 1, replication_factor, config={"cleanup.policy": "compact"})])[name]
    try:
        fut.result(60)
        log.info("created internal topic %s on %s", name, cluster)
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise ClusterError(f"cannot create internal topic {name}: {exc}", cluster=cluster, topic=name) from None
