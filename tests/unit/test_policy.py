"""Replication policies: MM2's Default and Identity naming rules."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sparkmirror.errors import ConfigError
from sparkmirror.model.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    policy_from_config,
)

SEPARATORS = [".", "_", "-", "__", "--"]


# --- DefaultReplicationPolicy ------------------------------------------------------


def test_default_names():
    p = DefaultReplicationPolicy()
    assert p.format_remote_topic("us-west", "orders") == "us-west.orders"
    assert p.topic_source("us-west.orders") == "us-west"
    assert p.upstream_topic("us-west.orders") == "orders"
    assert p.topic_source("orders") is None
    assert p.upstream_topic("orders") is None
    assert p.original_topic("B.A.orders") == "orders"
    assert p.upstream_topic("B.A.orders") == "A.orders"
    assert p.original_topic("orders") == "orders"


def test_default_topic_source_splits_at_first_separator():
    p = DefaultReplicationPolicy()
    assert p.topic_source("A.orders.v2") == "A"
    assert p.upstream_topic("A.orders.v2") == "orders.v2"


@pytest.mark.parametrize(
    ("topic", "source", "upstream"),
    [
        ("A.", None, None),  # Java's split drops trailing empty strings
        ("A..", None, None),
        (".", None, None),
        ("", None, None),
        (".x", "", "x"),  # a leading empty piece is kept
        ("A..b", "A", ".b"),
    ],
)
def test_default_topic_source_follows_java_pattern_split(topic, source, upstream):
    p = DefaultReplicationPolicy()
    assert p.topic_source(topic) == source
    assert p.upstream_topic(topic) == upstream


def test_default_internal_topic_names():
    p = DefaultReplicationPolicy()
    assert p.heartbeats_topic() == "heartbeats"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    assert p.is_checkpoints_topic("A.checkpoints.internal")
    assert not p.is_checkpoints_topic("A.checkpoints")
    assert p.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    assert p.is_mm2_internal_topic("A.checkpoints.internal")


@pytest.mark.parametrize("sep", ["_", "-", "__"])
def test_custom_separator_with_internal_separator_enabled(sep):
    p = DefaultReplicationPolicy(sep)
    assert p.format_remote_topic("A", "orders") == f"A{sep}orders"
    assert p.topic_source(f"A{sep}orders") == "A"
    assert p.offset_syncs_topic("B") == f"mm2-offset-syncs{sep}B{sep}internal"
    assert p.checkpoints_topic("A") == f"A{sep}checkpoints{sep}internal"
    assert p.is_checkpoints_topic(f"A{sep}checkpoints{sep}internal")
    assert p.is_mm2_internal_topic(f"x{sep}internal")
    assert p.is_internal_topic(f"mm2-offset-syncs{sep}B{sep}internal")


def test_custom_separator_with_internal_separator_disabled():
    p = DefaultReplicationPolicy("_", internal_topic_separator_enabled=False)
    assert p.format_remote_topic("A", "orders") == "A_orders"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    assert p.is_checkpoints_topic("A.checkpoints.internal")
    assert not p.is_checkpoints_topic("A_checkpoints_internal")
    assert not p.is_mm2_internal_topic("A_checkpoints_internal")


def test_dot_in_alias_with_other_separator():
    p = DefaultReplicationPolicy("_")
    assert p.topic_source("us.west_orders") == "us.west"
    assert p.upstream_topic("us.west_orders") == "orders"


def test_empty_separator_is_a_config_error():
    with pytest.raises(ConfigError, match="separator"):
        DefaultReplicationPolicy("")


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        ("__transaction_state", True),
        (".hidden", True),
        ("connect-offsets-internal", True),
        ("mm2-configs.B.internal", True),
        ("A.checkpoints.internal", True),
        ("orders", False),
        ("orders.internal.v2", False),
        ("_single_underscore", False),
        ("A.orders", False),
        ("heartbeats", False),
    ],
)
def test_internal_topic_rule(topic, internal):
    assert DefaultReplicationPolicy().is_internal_topic(topic) is internal
    assert IdentityReplicationPolicy().is_internal_topic(topic) is internal


def test_internal_rule_keeps_literal_suffixes_with_custom_separator():
    p = DefaultReplicationPolicy("_")
    assert p.is_internal_topic("x.internal")  # MM2 checks ".internal" literally too
    assert p.is_internal_topic("x-internal")
    assert p.is_internal_topic("x_internal")  # its MM2-internal suffix with "_"
    assert not p.is_internal_topic("x_internal_not")


@pytest.mark.parametrize(
    ("topic", "is_hb"),
    [
        ("heartbeats", True),
        ("A.heartbeats", True),
        ("B.A.heartbeats", True),
        ("A.heartbeats.x", False),
        ("myheartbeats", False),
        ("A.orders", False),
    ],
)
def test_is_heartbeats_topic(topic, is_hb):
    assert DefaultReplicationPolicy().is_heartbeats_topic(topic) is is_hb


# --- round trips (property tests) ------------------------------------------------

alias = st.text(st.characters(categories=["L", "N"]) | st.sampled_from("-"), min_size=1, max_size=12)
topic_name = st.text(st.characters(categories=["L", "N"]) | st.sampled_from("._-"), min_size=1, max_size=30)


@given(st.sampled_from(SEPARATORS), alias, topic_name)
def test_default_round_trip(sep, source, topic):
    p = DefaultReplicationPolicy(sep)
    remote = p.format_remote_topic(source, topic)
    # The two conditions under which MM2's own split recovers the parts: the
    # first separator is the one we inserted, and the topic is not made only of
    # separators (Pattern.split drops trailing empty pieces).
    assume(remote.find(sep) == len(source))
    assume(any(topic.split(sep)))
    assert p.topic_source(remote) == source
    assert p.upstream_topic(remote) == topic


def test_default_round_trip_breaks_where_mm2_does():
    p = DefaultReplicationPolicy("--")
    assert p.topic_source(p.format_remote_topic("a-", "x")) == "a"  # "a---x"
    assert p.topic_source(p.format_remote_topic("A", "--")) is None  # "A----"


@given(st.sampled_from(SEPARATORS), st.lists(alias, min_size=1, max_size=4), topic_name)
def test_default_multi_hop_original_topic(sep, hops, topic):
    p = DefaultReplicationPolicy(sep)
    assume(not any(c in h for h in hops for c in sep))
    assume(p.topic_source(topic) is None)  # an original, non-remote name
    assume(any(topic.split(sep)))  # not made only of separators
    name = topic
    for h in hops:
        name = p.format_remote_topic(h, name)
    assert p.topic_source(name) == hops[-1]
    assert p.original_topic(name) == topic


# --- IdentityReplicationPolicy -----------------------------------------------------


def test_identity_names_unchanged_except_heartbeats():
    p = IdentityReplicationPolicy()
    assert p.format_remote_topic("A", "orders") == "orders"
    assert p.format_remote_topic("A", "A.orders") == "A.orders"
    assert p.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert p.format_remote_topic("B", "A.heartbeats") == "B.A.heartbeats"
    # MM2 checks endsWith("heartbeats"), so this one is renamed too.
    assert p.format_remote_topic("A", "myheartbeats") == "A.myheartbeats"


def test_identity_topic_source_and_upstream():
    p = IdentityReplicationPolicy()
    assert p.topic_source("orders") is None
    assert p.topic_source("A.orders") is None
    assert p.upstream_topic("orders") == "orders"
    assert p.original_topic("orders") == "orders"
    assert p.topic_source("A.heartbeats") == "A"
    assert p.upstream_topic("A.heartbeats") == "heartbeats"
    assert p.topic_source("heartbeats") is None
    assert p.original_topic("B.A.heartbeats") == "heartbeats"
    assert p.is_heartbeats_topic("A.heartbeats")
    assert p.is_heartbeats_topic("heartbeats")
    assert not p.is_heartbeats_topic("orders")


def test_identity_source_cluster_alias():
    p = IdentityReplicationPolicy(source_cluster_alias="A")
    assert p.topic_source("orders") == "A"
    assert p.upstream_topic("orders") == "orders"
    assert p.original_topic("orders") == "orders"  # guarded: upstream == topic
    assert p.topic_source("B.heartbeats") == "B"


def test_identity_internal_topics_follow_separator():
    p = IdentityReplicationPolicy("_")
    assert p.checkpoints_topic("A") == "A_checkpoints_internal"
    assert p.format_remote_topic("A", "heartbeats") == "A_heartbeats"


# --- interface defaults ------------------------------------------------------------


class _Prefix(ReplicationPolicy):
    """A minimal custom policy that only defines the two abstract methods."""

    def format_remote_topic(self, source_alias, topic):
        return f"{source_alias}.{topic}"

    def topic_source(self, topic):
        return topic.split(".", 1)[0] if "." in topic else None


def test_interface_defaults():
    p = _Prefix()
    assert p.upstream_topic("A.x") == "x"
    assert p.original_topic("B.A.x") == "x"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    assert p.is_checkpoints_topic("A.checkpoints.internal")
    assert p.is_heartbeats_topic("A.heartbeats")
    assert p.is_internal_topic("anything.internal")


def test_base_methods_are_abstract():
    with pytest.raises(NotImplementedError):
        ReplicationPolicy().topic_source("x")


# --- policy_from_config ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", IdentityReplicationPolicy),
        ("DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("IdentityReplicationPolicy", IdentityReplicationPolicy),
        ("  DefaultReplicationPolicy ", DefaultReplicationPolicy),
    ],
)
def test_policy_from_config(name, cls):
    p = policy_from_config(name, "_", False)
    assert type(p) is cls
    assert p.separator == "_"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"


def test_policy_from_config_identity_source_alias():
    p = policy_from_config("IdentityReplicationPolicy", ".", True, source_cluster_alias="A")
    assert p.topic_source("orders") == "A"


@pytest.mark.parametrize("name", ["com.example.MyPolicy", "", "defaultreplicationpolicy"])
def test_policy_from_config_rejects_unknown(name):
    with pytest.raises(ConfigError) as info:
        policy_from_config(name, ".", True)
    text = str(info.value)
    assert "org.apache.kafka.connect.mirror.DefaultReplicationPolicy" in text
    assert "IdentityReplicationPolicy" in text
    assert info.value.exit_code == 2
