"""Where sparkmirror deliberately differs from MM2, for one mm2.properties.

README's section "Where sparkmirror differs from MM2" lists every deliberate
difference; ``mm2_differences(config)`` returns, one sentence each, those that
apply to the enabled flows of a configuration, and ``sparkmirror replicate``
logs them as warnings at start-up (replicator.service). Keep the README
list and this module in step.
"""

from __future__ import annotations

from sparkmirror.model.config import MM2Config

#: Connect/MM2 plugin settings sparkmirror cannot run (it runs no Java plugins), with MM2's defaults
#: (setting a key to its default is no difference).
_PLUGIN_DEFAULTS = {
    "transforms": "",
    "predicates": "",
    "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    "group.filter.class": "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    "config.property.filter.class": "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
    "forwarding.admin.class": "org.apache.kafka.clients.admin.ForwardingAdmin",
}


def mm2_differences(config: MM2Config) -> list[str]:
    """The deliberate differences from MM2 that apply to ``config``'s enabled flows."""
    out: list[str] = []
    for flow in config.enabled_flows():
        consumer = config.client_config(flow.source, "consumer", flow)
        isolation = consumer.get("isolation.level")
        if isolation is not None and isolation.strip().lower() != "read_committed":
            _, line = consumer.origins.get("isolation.level", (None, None))
            out.append(f"{flow.name}: isolation.level = {isolation.strip()}{f' (line {line})' if line else ''} is "
                       f"overridden: sparkmirror always reads "
                       f"{flow.source} with read_committed, so aborted records are never copied, but an open "
                       "(hanging) transaction holds its partitions at the last stable offset until it ends, "
                       "where MM2 would copy on")
        producer = config.client_config(flow.target, "producer", flow)
        in_flight = producer.get("max.in.flight.requests.per.connection", "").strip()
        if (producer.get("enable.idempotence", "").strip().lower() == "false" and not flow.exactly_once
                and in_flight not in ("", "1")):
            _, line = producer.origins.get("max.in.flight.requests.per.connection", (None, None))
            out.append(f"{flow.name}: max.in.flight.requests.per.connection = {in_flight}"
                       f"{f' (line {line})' if line else ''} is overridden with 1 while {flow.target}'s producer "
                       "has enable.idempotence = false: a retried request could land after a later one and "
                       "reorder the target, where MM2 would use the configured value")
        if flow.exactly_once_connector == "required" and flow.exactly_once_support != "enabled":
            out.append(f"{flow.name}: {flow.exactly_once_reason()} switches exactly-once on for this flow; "
                       f"MM2 would refuse to start it unless {flow.target}.exactly.once.source.support = enabled")
        line = flow.line_of("tasks.max")
        if line is not None:
            out.append(f"{flow.name}: tasks.max (line {line}) is not used: Spark runs one copy task per core "
                       "(spark.default.parallelism)")
        plugins = [key for key, default in _PLUGIN_DEFAULTS.items()
                   if key in flow.origins and flow.props[key].strip() != default]
        if plugins:
            out.append(f"{flow.name}: {', '.join(plugins)} ignored: sparkmirror runs no Java plugins; records are "
                       "copied byte for byte through MM2's default filters")
        if flow.interval_seconds("emit.checkpoints") and flow.emit_offset_syncs_enabled and not flow.exactly_once:
            out.append(f"{flow.name}: checkpoints translate along every offset-sync in the topic, so a group far "
                       "behind gets a checkpoint closer to its position than MM2's (never ahead of it)")
    return out
