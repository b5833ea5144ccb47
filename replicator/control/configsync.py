"""Topic config sync and topic ACL sync over time, with MirrorSourceConnector's rules.

Config sync (every ``sync.topic.configs.interval.seconds``): for each replicated
topic, every source config entry that is not read-only, not sensitive, not a
static broker setting and not matched by ``config.properties.exclude`` is
carried to the mirror topic — set when the source has a value of its own
(topic, dynamic broker or dynamic default setting), deleted (back to the
target's default) when the source uses the default. Only entries that differ
are sent, so each change is logged. Excluded entries are never touched on the
target. Partition growth is TopicSync.ensure's (the topic refresh loop).

ACL sync (every ``sync.topic.acls.interval.seconds``): literal topic ACLs of
replicated topics are created for the mirror topic; ALLOW WRITE is never copied
(only the replicator writes mirror topics) and ALLOW ALL becomes ALLOW READ.
ACLs are only ever added, as in MM2. A source without an authorizer switches the
loop off with one log line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from replicator.control.topics import config_carried, config_source as _source
from sparkmirror.errors import ClusterError
from sparkmirror.model.filters import replicable_topic

log = logging.getLogger("sparkmirror.configsync")

# confluent_kafka.admin.ConfigSource values
_DYNAMIC_TOPIC = 1
_DEFAULT = 5


@dataclass(frozen=True)
class ConfigChange:
    topic: str
    name: str
    value: str | None  # None: delete (back to the target's default)
    old: str | None

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.topic}: {self.name} reset to default (was {self.old})"
        return f"{self.topic}: {self.name}={self.value} (was {self.old if self.old is not None else 'default'})"


def plan_config_changes(target_topic: str, source_entries, target_entries, exclude: list[str]) -> list[ConfigChange]:
    """Changes that make ``target_topic``'s configs follow the source's (both as ConfigEntry maps)."""
    changes = []
    for name, entry in sorted(source_entries.items()):
        if not config_carried(name, entry, exclude):
            continue
        current = target_entries.get(name)
        if _source(entry) == _DEFAULT:
            if current is not None and _source(current) == _DYNAMIC_TOPIC:
                changes.append(ConfigChange(target_topic, name, None, current.value))
        elif entry.value is not None and (current is None or current.value != entry.value
                                          or _source(current) != _DYNAMIC_TOPIC):
            if current is not None and current.value == entry.value and current.is_read_only:
                continue
            changes.append(ConfigChange(target_topic, name, entry.value, current.value if current else None))
    return changes


def _describe(admin_client, cluster: str, topics: list[str]) -> dict[str, dict]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not topics:
        return {}
    futures = admin_client.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                            request_timeout=30)
    out = {}
    for res, fut in futures.items():
        try:
            out[res.name] = fut.result(60)
        except Exception as exc:
            log.debug("describing configs of %s on %s: %s", res.name, cluster, exc)
    return out


class TopicConfigSync:
    """Periodic config sync of ``flow``'s mirror topics; ``assignment()``: the source topics the
    data path copies now (their partition counts)."""

    def __init__(self, flow, source_admin, target_admin, assignment) -> None:
        self.flow = flow
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.assignment = assignment
        self.interval = float(self.flow.sync_topic_configs_interval_seconds)
        self.changes_total = 0
        self.unknown_on_target: set[str] = set()  # topic configs the target's brokers refused as unknown

    def sync_once(self) -> list[ConfigChange]:
        flow, policy = self.flow, self.flow.policy
        sources = sorted(self.assignment())
        pairs = {t: policy.format_remote_topic(flow.source, t) for t in sources}
        source_cfg = _describe(self.source_admin, flow.source, sources)
        target_cfg = _describe(self.target_admin, flow.target, list(pairs.values()))
        by_topic: dict[str, list[ConfigChange]] = {}
        for src, dst in pairs.items():
            if src in source_cfg and dst in target_cfg:
                planned = plan_config_changes(dst, source_cfg[src], target_cfg[dst], flow.config_properties_exclude)
                if planned:
                    by_topic[dst] = planned
        done: list[ConfigChange] = []
        while by_topic:
            by_topic = {dst: [c for c in changes if c.name not in self.unknown_on_target]
                        for dst, changes in by_topic.items()}
            by_topic = {dst: changes for dst, changes in by_topic.items() if changes}
            by_topic = self._alter(by_topic, done)
        self.changes_total += len(done)
        return done

    def _alter(self, by_topic: dict[str, list[ConfigChange]], done: list[ConfigChange]) -> dict:
        """Apply the changes; returns those to try again: topics whose alter a broker refused
        for a config name it does not know (an older or newer Kafka), without that name."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        from replicator.control.topics import unknown_config_name, warn_unknown_config

        if not by_topic:
            return {}
        flow = self.flow
        resources = []
        for dst, changes in by_topic.items():
            res = ConfigResource(ResourceType.TOPIC, dst, incremental_configs=[
                ConfigEntry(c.name, c.value, incremental_operation=(
                    AlterConfigOpType.DELETE if c.value is None else AlterConfigOpType.SET))
                for c in changes])
            resources.append(res)
        again: dict[str, list[ConfigChange]] = {}
        for res, fut in self.target_admin.incremental_alter_configs(resources, request_timeout=30).items():
            try:
                fut.result(60)
            except Exception as exc:
                unknown = unknown_config_name(exc)
                if unknown and any(c.name == unknown for c in by_topic[res.name]):
                    self.unknown_on_target.add(unknown)
                    warn_unknown_config(flow, unknown, res.name)
                    again[res.name] = by_topic[res.name]
                    continue
                log.warning("config sync %s: could not alter the configs of %s on %s: %s", flow.name, res.name,
                            flow.target, exc)
                continue
            for change in by_topic[res.name]:
                log.info("config sync %s: %s on %s", flow.name, change, flow.target)
                done.append(change)
        return again


# ------------------------------------------------------------------------------------ ACLs


def target_acl_bindings(bindings, policy, topic_filter, source: str, target: str, *,
                        heartbeats_replication_enabled: bool = True) -> list:
    """The bindings MM2 creates on the target for the source's topic ACL ``bindings``."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    out = []
    for b in bindings:
        if b.restype != ResourceType.TOPIC or b.resource_pattern_type != ResourcePatternType.LITERAL:
            continue
        if b.permission_type == AclPermissionType.ALLOW and b.operation == AclOperation.WRITE:
            continue
        if not replicable_topic(policy, topic_filter, target, b.name,
                                heartbeats_replication_enabled=heartbeats_replication_enabled):
            continue
        operation = b.operation
        if b.permission_type == AclPermissionType.ALLOW and b.operation == AclOperation.ALL:
            operation = AclOperation.READ
        out.append(AclBinding(ResourceType.TOPIC, policy.format_remote_topic(source, b.name),
                              ResourcePatternType.LITERAL, b.principal, b.host, operation, b.permission_type))
    return out


def _acl_key(b) -> tuple:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def describe_topic_acls(admin_client, cluster: str) -> list:
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    flt = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    try:
        return list(admin_client.describe_acls(flt, request_timeout=30).result(60))
    except Exception as exc:
        if "SECURITY_DISABLED" in str(exc) or "No Authorizer" in str(exc):
            raise NoAuthorizer(str(exc)) from None
        raise ClusterError(f"cannot describe topic ACLs: {exc}", cluster=cluster) from None


class NoAuthorizer(Exception):
    pass


class AclSync:
    """Periodic topic ACL sync of ``flow``."""

    def __init__(self, flow, source_admin, target_admin) -> None:
        self.flow = flow
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.interval = float(self.flow.sync_topic_acls_interval_seconds)
        self.disabled = False
        self.created_total = 0

    def sync_once(self) -> list:
        if self.disabled:
            return []
        flow = self.flow
        try:
            source = describe_topic_acls(self.source_admin, flow.source)
            wanted = target_acl_bindings(source, flow.policy, flow.topic_filter, flow.source,
                                         flow.target,
                                         heartbeats_replication_enabled=flow.heartbeats_replication_enabled)
            if not wanted:
                return []
            existing = {_acl_key(b) for b in describe_topic_acls(self.target_admin, flow.target)}
        except NoAuthorizer:
            self.disabled = True
            log.info("ACL sync %s: %s or %s has no authorizer configured, so no topic ACLs are synced",
                     flow.name, flow.source, flow.target)
            return []
        missing = [b for b in wanted if _acl_key(b) not in existing]
        if not missing:
            return []
        created = []
        for binding, fut in self.target_admin.create_acls(missing, request_timeout=30).items():
            try:
                fut.result(60)
            except Exception as exc:
                log.warning("ACL sync %s: could not create %s on %s: %s", flow.name, _describe_acl(binding),
                            flow.target, exc)
                continue
            log.info("ACL sync %s: created %s on %s", flow.name, _describe_acl(binding), flow.target)
            created.append(binding)
        self.created_total += len(created)
        return created


def _describe_acl(b) -> str:
    return (f"{b.permission_type.name} {b.operation.name} for {b.principal} from host {b.host} on topic {b.name}")
