"""What the monitor watches: the flows of an mm2.properties plus the monitor's own options.

The MM2 model (``sparkmirror.model.config``) knows everything about a flow; the
monitor needs a small, fixed subset of it (topic names, filters, intervals,
where the offset-syncs live) and its own knobs (refresh cadence, label
granularity, allow/deny lists: ``MonitorOptions``, made from the options declared
in ``monitor.options``). ``WatchedFlow`` is that subset, computed once
at start, so collectors and the evaluator never re-derive names.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.options import MonitorOptions  # noqa: F401 (declared with the command line; imported from here too)
from sparkmirror.errors import ConfigError
from sparkmirror.model.filters import GroupFilter, TopicFilter, replicable_topic
from sparkmirror.model.policy import ReplicationPolicy


@dataclass(frozen=True)
class WatchedFlow:
    """One enabled flow A->B as the monitor sees it."""

    name: str
    source: str
    target: str
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    group_filter: GroupFilter
    heartbeats_topic: str          # <A>.heartbeats, read on the target
    heartbeats_expected: bool      # some X->A pair emits heartbeats into A
    heartbeat_interval: float      # seconds between heartbeats (the fastest such pair)
    checkpoints_enabled: bool
    checkpoints_topic: str         # <A>.checkpoints.internal, on the target
    checkpoint_interval: float
    offset_syncs_cluster: str      # alias of the cluster holding the offset-syncs topic
    offset_syncs_topic: str
    offset_lag_max: int
    offset_syncs_enabled: bool = True            # emit.offset-syncs.enabled: false leaves records lag unknown
    heartbeats_replication_enabled: bool = True  # heartbeats topics replicated whatever the topic filter says
    # The replicator writes the target in transactions (MM2's exactly.once.source.support = enabled,
    # or sparkmirror's exactly-once mode): every commit leaves a marker offset on the mirror
    # partition, so target offsets no longer count copied records (monitor.lag).
    target_has_gaps: bool = False

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.source, topic)

    def watches_topic(self, topic: str, monitor_filter: TopicFilter) -> bool:
        """The flow replicates ``topic`` and the monitor's allow/deny lists keep it."""
        return replicable_topic(self.policy, self.topic_filter, self.target, topic,
                                heartbeats_replication_enabled=self.heartbeats_replication_enabled) and (
            monitor_filter.should_replicate_topic(topic))

    def watches_group(self, group: str, monitor_filter: GroupFilter) -> bool:
        return self.group_filter.should_replicate_group(group) and monitor_filter.should_replicate_group(group)


def watched_flows(config) -> list[WatchedFlow]:
    """The enabled flows of an ``MM2Config``; ConfigError if there are none."""
    flows = []
    for flow in config.enabled_flows():
        policy = flow.policy
        # Heartbeats arrive in A.heartbeats from every pair X->A that emits them
        # into A (in a one-way A->B setup: the disabled B->A pair), see MM2-REFERENCE.
        emitters = [f for f in config.flows if f.target == flow.source and f.emit_heartbeats_enabled
                    and f.emit_heartbeats_interval_seconds > 0]
        # ...and reach B only if the flow replicates A's heartbeats topic (heartbeats.replication.enabled)
        carried = flow.heartbeats_replication_enabled or flow.topic_filter.should_replicate_topic(
            policy.heartbeats_topic())
        hb_interval = min((f.emit_heartbeats_interval_seconds for f in emitters), default=1)
        syncs_cluster, syncs_topic = flow.offset_syncs_location
        flows.append(WatchedFlow(
            name=flow.name, source=flow.source, target=flow.target, policy=policy,
            topic_filter=flow.topic_filter, group_filter=flow.group_filter,
            heartbeats_topic=policy.format_remote_topic(flow.source, policy.heartbeats_topic()),
            heartbeats_expected=bool(emitters) and carried, heartbeat_interval=float(hb_interval),
            # no offset-syncs, no checkpoints: MM2 refuses its checkpoint connector, sparkmirror emits none
            checkpoints_enabled=flow.emit_checkpoints_enabled and flow.emit_checkpoints_interval_seconds > 0
            and flow.emit_offset_syncs_enabled,
            checkpoints_topic=policy.checkpoints_topic(flow.source),
            checkpoint_interval=float(flow.emit_checkpoints_interval_seconds),
            offset_syncs_cluster=syncs_cluster, offset_syncs_topic=syncs_topic,
            offset_lag_max=flow.offset_lag_max, offset_syncs_enabled=flow.emit_offset_syncs_enabled,
            heartbeats_replication_enabled=flow.heartbeats_replication_enabled, target_has_gaps=flow.exactly_once,
        ))
    if not flows:
        raise ConfigError("no replication flow is enabled, so there is nothing to monitor", file=config.path,
                          hint="enable one with `A->B.enabled = true`")
    return flows


def librdkafka_client(config, alias: str, role: str) -> dict[str, str]:
    """confluent-kafka settings for the monitor's ``role`` client of cluster ``alias``."""
    from sparkmirror.model.clients import librdkafka_config

    return dict(librdkafka_config(config.client_config(alias, role), role, cluster=alias))
