"""Topic and group filters, and MirrorSourceConnector.shouldReplicateTopic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.errors import ConfigError
from sparkmirror.model.filters import (
    DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS,
    DEFAULT_TOPICS_EXCLUDE,
    GroupFilter,
    TopicFilter,
    is_cycle,
    replicable_topic,
)
from sparkmirror.model.policy import DefaultReplicationPolicy, IdentityReplicationPolicy


def test_mm2_defaults():
    assert list(DEFAULT_TOPICS) == [".*"]
    assert list(DEFAULT_TOPICS_EXCLUDE) == [r".*[\-\.]internal", r".*\.replica", "__.*"]
    assert list(DEFAULT_GROUPS) == [".*"]
    assert list(DEFAULT_GROUPS_EXCLUDE) == ["console-consumer-.*", "connect-.*", "__.*"]


@pytest.mark.parametrize(
    ("topic", "ok"),
    [
        ("orders", True),
        ("A.orders", True),
        ("heartbeats", True),
        ("mm2-offset-syncs.B.internal", False),
        ("connect-configs-internal", False),
        ("orders.replica", False),
        ("__consumer_offsets", False),
        ("_schemas", True),
    ],
)
def test_default_topic_filter(topic, ok):
    assert TopicFilter().should_replicate_topic(topic) is ok


@pytest.mark.parametrize(
    ("group", "ok"),
    [
        ("billing", True),
        ("console-consumer-1234", False),
        ("connect-my-sink", False),
        ("__internal", False),
        ("my-connect-group", True),
    ],
)
def test_default_group_filter(group, ok):
    assert GroupFilter().should_replicate_group(group) is ok


def test_patterns_match_the_whole_name():
    f = TopicFilter(["orders"], [])
    assert f.should_replicate_topic("orders")
    assert not f.should_replicate_topic("orders2")
    assert not f.should_replicate_topic("my-orders")
    g = GroupFilter(["app-.*"], ["app-test"])
    assert g.should_replicate_group("app-prod")
    assert g.should_replicate_group("app-test2")
    assert not g.should_replicate_group("app-test")
    assert not g.should_replicate_group("xapp-prod")


def test_exclude_wins():
    f = TopicFilter(["orders.*"], ["orders\\.private"])
    assert f.should_replicate_topic("orders.public")
    assert not f.should_replicate_topic("orders.private")


def test_empty_include_matches_nothing():
    assert not TopicFilter([], []).should_replicate_topic("orders")
    assert not GroupFilter([], []).should_replicate_group("g")


def test_alternation_inside_one_entry():
    f = TopicFilter(["a|b"], [])
    assert f.should_replicate_topic("a") and f.should_replicate_topic("b")
    assert not f.should_replicate_topic("ab")


def test_inline_flags_and_possessive_quantifiers():
    assert TopicFilter(["(?i)orders"], []).should_replicate_topic("ORDERS")
    # possessive: [a-z]++ takes "rders" and gives nothing back, as in Java
    assert not TopicFilter(["o[a-z]++s"], []).should_replicate_topic("orders")
    assert TopicFilter(["o[a-z]+s"], []).should_replicate_topic("orders")


@pytest.mark.parametrize("bad", ["(orders", "[a-", "*x", "a{2,1}"])
def test_invalid_pattern_is_a_config_error_naming_it(bad):
    with pytest.raises(ConfigError) as info:
        TopicFilter(["ok", bad], [])
    assert repr(bad) in str(info.value)
    assert "topics" in str(info.value)
    with pytest.raises(ConfigError, match="groups.exclude"):
        GroupFilter([".*"], [bad])


def test_java_only_syntax_is_refused_not_misread():
    with pytest.raises(ConfigError, match="Java-only"):
        TopicFilter(["[a-z&&[^x]]"], [])
    with pytest.raises(ConfigError, match=r"\\Q"):
        TopicFilter([r"\Qa.b\E"], [])


def test_java_only_syntax_refused_even_when_re_cache_is_warm():
    import re
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        re.compile("[[a-c]]")  # now in re's cache, which would not warn again
    with pytest.raises(ConfigError):
        TopicFilter(["[[a-c]]"], [])


def test_a_single_string_is_not_a_pattern_list():
    with pytest.raises(TypeError):
        TopicFilter("orders", [])  # type: ignore[arg-type]


def test_catastrophic_patterns_are_refused_harmless_nesting_is_not():
    for bad in ["(a+)+b", "(.*a){20}"]:
        with pytest.raises(ConfigError, match="backtrack catastrophically") as info:
            TopicFilter(["orders", bad], [])
        assert repr(bad) in str(info.value) and "possessive" in info.value.hint
    with pytest.raises(ConfigError, match="groups.exclude"):
        GroupFilter([".*"], ["(x+x+)+y"])
    f = TopicFilter(["orders", r"(\w+\.)*x"], ["(?>a+)+", "a++"])
    assert f.should_replicate_topic("orders") and f.should_replicate_topic("a.b.x")


# --- shouldReplicateTopic ------------------------------------------------------------


def test_heartbeats_replicated_even_when_filter_excludes_them():
    p = DefaultReplicationPolicy()
    only_orders = TopicFilter(["orders"], [])
    assert replicable_topic(p, only_orders, "B", "heartbeats")
    assert replicable_topic(p, only_orders, "B", "C.heartbeats")
    assert not replicable_topic(p, only_orders, "B", "payments")
    assert not replicable_topic(
        p, only_orders, "B", "heartbeats", heartbeats_replication_enabled=False
    )


def test_internal_topics_never_replicated_even_if_included():
    p = DefaultReplicationPolicy()
    everything = TopicFilter([".*"], [])
    for topic in ["__consumer_offsets", ".x", "A.checkpoints.internal", "mm2-offset-syncs.B.internal",
                  "connect-status-internal"]:
        assert not replicable_topic(p, everything, "B", topic)


def test_active_active_loop_prevention():
    """A<->B with the Default policy: nothing travels back to where it came from."""
    p = DefaultReplicationPolicy()
    f = TopicFilter()
    # A -> B flow (target B) looks at A's topics
    assert replicable_topic(p, f, "B", "orders")  # A's own topic, becomes A.orders on B
    assert p.format_remote_topic("A", "orders") == "A.orders"
    assert not replicable_topic(p, f, "B", "B.orders")  # B's data mirrored into A: never back to B
    assert not replicable_topic(p, f, "B", "A.B.orders")  # hypothetical re-mirror: still B's
    # B -> A flow (target A) looks at B's topics
    assert replicable_topic(p, f, "A", "orders")
    assert not replicable_topic(p, f, "A", "A.orders")  # A's data on B never goes back to A
    # heartbeats: A.heartbeats on B is not sent back to A, only on to third clusters
    assert not replicable_topic(p, f, "A", "A.heartbeats")
    assert replicable_topic(p, f, "A", "heartbeats")
    assert replicable_topic(p, f, "C", "A.heartbeats")


def test_active_active_simulation_reaches_a_fixed_point():
    """Run A<->B topic discovery to a fixed point: each cluster ends with one copy of the other."""
    p = DefaultReplicationPolicy()
    f = TopicFilter()
    clusters = {"A": {"orders", "heartbeats"}, "B": {"payments", "heartbeats"}}
    for _ in range(5):
        for source, target in (("A", "B"), ("B", "A")):
            for topic in sorted(clusters[source]):
                if replicable_topic(p, f, target, topic):
                    clusters[target].add(p.format_remote_topic(source, topic))
    assert clusters["A"] == {"orders", "heartbeats", "B.payments", "B.heartbeats"}
    assert clusters["B"] == {"payments", "heartbeats", "A.orders", "A.heartbeats"}


def test_multi_hop_cycle_detection():
    p = DefaultReplicationPolicy()
    # A -> B -> C -> A: "C.B.A.orders" on C arrives from A's data; not back to A
    assert is_cycle(p, "A", "C.B.A.orders")
    assert is_cycle(p, "A", "B.A.orders")
    assert not is_cycle(p, "D", "C.B.A.orders")
    assert is_cycle(p, "B", "C.B.A.orders")
    assert not is_cycle(p, "A", "orders")
    f = TopicFilter()
    assert not replicable_topic(p, f, "A", "C.B.A.orders")
    assert replicable_topic(p, f, "D", "C.B.A.orders")


def test_custom_separator_cycle_detection():
    p = DefaultReplicationPolicy("_")
    assert is_cycle(p, "A", "B_A_orders")
    assert not is_cycle(p, "A", "B.A.orders")  # "." is just part of the name here


def test_identity_policy_has_no_loop_detection_but_terminates():
    p = IdentityReplicationPolicy()
    f = TopicFilter()
    assert not is_cycle(p, "A", "orders")
    assert replicable_topic(p, f, "A", "orders")
    # with source.cluster.alias, upstream == topic stops the walk (MM2's extra guard)
    q = IdentityReplicationPolicy(source_cluster_alias="X")
    assert not is_cycle(q, "A", "orders")
    assert is_cycle(q, "X", "orders")
    # heartbeats still carry their route
    assert is_cycle(p, "A", "A.heartbeats")
    assert not replicable_topic(p, f, "A", "A.heartbeats")


aliases = st.sampled_from(["A", "B", "C", "D"])


@given(st.lists(aliases, min_size=1, max_size=6), aliases)
def test_a_topic_never_returns_to_a_cluster_it_passed(route, target):
    """Property: the Default policy refuses exactly the routes that revisit the target."""
    p = DefaultReplicationPolicy()
    name = "orders"
    for hop in route:
        name = p.format_remote_topic(hop, name)
    # name now lives on some cluster after passing through every alias in route
    assert is_cycle(p, target, name) is (target in route)
