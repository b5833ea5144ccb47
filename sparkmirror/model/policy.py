"""Replication policies: how topics are renamed and how a remote topic is recognised.

These mirror MM2's ``ReplicationPolicy`` interface (with its default methods),
``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy`` from
connect/mirror-client, because an existing MM2 deployment and sparkmirror must
agree on every name: the remote topic names, the heartbeats, checkpoints and
offset-syncs topics, and which topics are internal. The name rules are also the
loop breaker for active-active pairs (see ``filters.replicable_topic``), so the
quirks are kept on purpose:

- ``topic_source`` splits like Java's ``Pattern.split``: trailing empty pieces are
  dropped, so ``"A."`` and ``"A.."`` are not remote topics while ``".x"`` has the
  source ``""``;
- Identity renames only topics whose name *ends with* ``heartbeats`` (so
  ``myheartbeats`` becomes ``A.myheartbeats`` as in MM2);
- the internal-topic separator option only changes the separator used inside the
  MM2 internal topic names; ``is_internal_topic`` still checks ``.internal`` and
  ``-internal`` literally.

One deliberate difference: an empty separator is rejected (ConfigError). MM2
accepts it and then splits every name after its first character.
"""

from __future__ import annotations

from sparkmirror.errors import ConfigError

HEARTBEATS_TOPIC = "heartbeats"
DEFAULT_SEPARATOR = "."

_MAX_HOPS = 1000  # a topic name is at most 249 characters; this only stops bad custom logic


class ReplicationPolicy:
    """MM2's ``ReplicationPolicy`` interface, with its default method bodies.

    Subclasses implement ``format_remote_topic`` and ``topic_source``; the other
    methods are the interface defaults, which DefaultReplicationPolicy overrides
    where MM2 does.
    """

    separator: str = DEFAULT_SEPARATOR

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """The name ``topic`` from cluster ``source_alias`` gets on the target."""
        raise NotImplementedError

    def topic_source(self, topic: str) -> str | None:
        """Source cluster alias of a remote topic, or None if it is not remote."""
        raise NotImplementedError

    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream, or None if it is not a remote topic."""
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + 1 :]

    def original_topic(self, topic: str) -> str:
        """The name at the very first cluster, following every hop upstream.

        Stops when the upstream name is None or unchanged (Identity's answer for
        ordinary topics), as MM2 does.
        """
        for _ in range(_MAX_HOPS):
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream
        return topic

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """``heartbeats``, ``A.heartbeats``, ``B.A.heartbeats`` ..."""
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        """Never replicated: Kafka's own (``__``/``.``), Connect's, and MM2's topics."""
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


class DefaultReplicationPolicy(ReplicationPolicy):
    """``<source><separator><topic>``: the policy that makes active-active safe.

    ``internal_topic_separator_enabled=False`` keeps ``.`` inside the MM2
    internal topic names even when ``separator`` is something else
    (``replication.policy.internal.topic.separator.enabled``).
    """

    def __init__(
        self, separator: str = DEFAULT_SEPARATOR, internal_topic_separator_enabled: bool = True
    ) -> None:
        if not isinstance(separator, str) or separator == "":
            raise ConfigError(
                f"replication.policy.separator must be a non-empty string, got {separator!r}",
                hint="leave it unset to use '.'",
            )
        self.separator = separator
        self.internal_topic_separator_enabled = internal_topic_separator_enabled

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(separator={self.separator!r}, "
            f"internal_topic_separator_enabled={self.internal_topic_separator_enabled})"
        )

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        # Java's Pattern.split drops trailing empty strings; "A." is not remote.
        parts = topic.split(self.separator)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < 2:
            return None
        return parts[0]

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return self._internal_separator() + "internal"

    def _checkpoints_suffix(self) -> str:
        return self._internal_separator() + "checkpoints" + self._internal_suffix()

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return "mm2-offset-syncs" + self._internal_separator() + cluster_alias + self._internal_suffix()

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._checkpoints_suffix()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Names stay the same on the target; for one-way flows only.

    MM2 cannot tell a remote topic from a local one under this policy, so it has
    no loop detection: ``topic_source`` returns ``source_cluster_alias`` (MM2's
    ``source.cluster.alias``, None by default) for every ordinary topic and
    ``upstream_topic`` returns the topic itself. Heartbeats are the exception and
    behave as under DefaultReplicationPolicy, so ``A.heartbeats`` still exists.
    """

    def __init__(
        self,
        separator: str = DEFAULT_SEPARATOR,
        internal_topic_separator_enabled: bool = True,
        *,
        source_cluster_alias: str | None = None,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(separator={self.separator!r}, "
            f"internal_topic_separator_enabled={self.internal_topic_separator_enabled}, "
            f"source_cluster_alias={self.source_cluster_alias!r})"
        )

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


_PACKAGE = "org.apache.kafka.connect.mirror."
POLICY_CLASSES: dict[str, type[DefaultReplicationPolicy]] = {
    _PACKAGE + "DefaultReplicationPolicy": DefaultReplicationPolicy,
    _PACKAGE + "IdentityReplicationPolicy": IdentityReplicationPolicy,
}


def policy_from_config(
    class_name: str,
    separator: str = DEFAULT_SEPARATOR,
    internal_topic_separator_enabled: bool = True,
    *,
    source_cluster_alias: str | None = None,
) -> ReplicationPolicy:
    """Build the policy named by ``replication.policy.class``.

    Accepts MM2's full Java class names and their simple names. A custom Java
    policy cannot run here, so anything else is a ConfigError listing what is
    supported. ``source_cluster_alias`` only applies to the identity policy.
    """
    name = (class_name or "").strip()
    simple = {cls_name.rsplit(".", 1)[1]: cls for cls_name, cls in POLICY_CLASSES.items()}
    cls = POLICY_CLASSES.get(name) or simple.get(name)
    if cls is None:
        supported = ", ".join([*POLICY_CLASSES, *simple])
        raise ConfigError(
            f"replication.policy.class {class_name!r} is not supported",
            hint=f"use one of: {supported}",
        )
    if cls is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(
            separator, internal_topic_separator_enabled, source_cluster_alias=source_cluster_alias
        )
    return cls(separator, internal_topic_separator_enabled)
