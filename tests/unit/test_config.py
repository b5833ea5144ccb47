"""The mm2.properties model: MM2's defaults and layering, and every error with its FILE:LINE."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkmirror.configfile import load_config
from sparkmirror.errors import ConfigError, ConfigErrors
from sparkmirror.model.config import LOOPS, MM2Config
from sparkmirror.model.parse import parse_config
from sparkmirror.model.config import ConfigWarning
from sparkmirror.model.values import DEFAULT_POLICY, IDENTITY_POLICY

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
BASE = "clusters = a, b\na.bootstrap.servers = a1:9092\nb.bootstrap.servers = b1:9092\n"  # lines 1-3


def config(extra: str = "", base: str = BASE) -> MM2Config:
    return parse_config(base + extra, "mm2.properties")


def failure(text: str) -> ConfigErrors:
    with pytest.raises(ConfigErrors) as info:
        parse_config(text, "mm2.properties")
    return info.value


def where(errors: ConfigErrors) -> list[tuple[int, str]]:
    return [(e.line, e.message) for e in errors.errors]


def warning_lines(cfg: MM2Config) -> dict[int | None, str]:
    lines: dict[int | None, str] = {}
    for w in cfg.warnings:
        lines[w.line] = f"{lines[w.line]} | {w.message}" if w.line in lines else w.message
    return lines


# --- the seed articles' complete files -----------------------------------------------------


def test_seed_000_one_way_primary_dr():
    cfg = load_config(CONFIGS / "seed-000-one-way-primary-dr.properties")
    assert list(cfg.clusters) == ["primary", "dr"]
    assert cfg.clusters["primary"].bootstrap_servers == "primary-broker1:9092,primary-broker2:9092,primary-broker3:9092"
    assert cfg.clusters["primary"].line == 6
    assert [(f.name, f.enabled) for f in cfg.flows] == [("primary->dr", True), ("dr->primary", False)]
    flow = cfg.flow("primary", "dr")
    assert (flow.replication_factor, flow.heartbeats_topic_replication_factor, flow.tasks_max) == (3, 3, 4)
    assert (flow.refresh_topics_interval_seconds, flow.refresh_groups_interval_seconds) == (30, 30)
    assert (flow.emit_checkpoints_interval_seconds, flow.emit_heartbeats_interval_seconds) == (30, 5)
    # `\-` and `\.` are .properties escapes: MM2 reads the same lossy regexes, and we say so
    assert flow.topics_exclude == [".*[-.]internal", ".*.replica", "__.*"]
    assert "single backslash" in warning_lines(cfg)[21]
    assert flow.line_of("topics.exclude") == 21 and flow.line_of("tasks.max") == 50
    # top-level settings reach the disabled reverse flow too (it still emits heartbeats)
    assert cfg.flow("dr", "primary").emit_heartbeats_interval_seconds == 5


def test_seed_001_src_dst_with_role_only_sasl():
    cfg = load_config(CONFIGS / "seed-001-src-dst-sasl.properties")
    flow = cfg.flow("src", "dst")
    assert flow.enabled and flow.topics == ["orders|payments|users"]
    assert flow.sync_group_offsets_enabled is True
    consumer = cfg.client_config("src", "consumer", flow)
    assert consumer["security.protocol"] == "SASL_SSL" and consumer["sasl.mechanism"] == "PLAIN"
    assert cfg.client_config("src", "admin", flow).get("security.protocol") is None
    warnings = warning_lines(cfg)
    assert "clients disagree on security.protocol" in warnings[34]
    assert "clients disagree on security.protocol" in warnings[38]


def test_seed_002_active_active_with_default_policy_is_fine():
    cfg = load_config(CONFIGS / "seed-002-dc1-dc2-active-active.properties")
    assert [f.name for f in cfg.enabled_flows()] == ["DC1->DC2", "DC2->DC1"]
    assert all(f.sync_group_offsets_enabled and f.replication_policy_class == DEFAULT_POLICY for f in cfg.flows)
    assert cfg.warnings == []


def test_dev_primary_dr():
    cfg = load_config(CONFIGS / "dev-primary-dr.properties")
    assert {a: c.bootstrap_servers for a, c in cfg.clusters.items()} == {
        "primary": "127.0.0.1:19092", "dr": "127.0.0.1:29092"}
    assert [f.name for f in cfg.enabled_flows()] == ["primary->dr"]
    flow = cfg.flow("primary", "dr")
    assert flow.replication_factor == flow.checkpoints_topic_replication_factor == 1
    assert flow.interval_seconds("sync.group.offsets") == 10
    assert cfg.warnings == []


def test_seed_003_empty_host_lists_fail_with_their_lines():
    with pytest.raises(ConfigErrors) as info:
        load_config(CONFIGS / "seed-003-empty-hosts.properties")
    assert [(e.line, e.cluster) for e in info.value.errors] == [(8, "source"), (9, "destination")]
    assert all("lists no hosts" in e.message for e in info.value.errors)


def test_seed_004_placeholders_and_glob_fail_clearly():
    with pytest.raises(ConfigErrors) as info:
        load_config(CONFIGS / "seed-004-placeholders.properties")
    errors = info.value.errors
    assert [e.line for e in errors] == [2, 2, 5, 6]
    assert "placeholder" in errors[0].message and "'<source_cluster_alias>'" in errors[0].message
    assert "'<test_topic_name>'" in errors[2].message
    assert "'*'" in errors[3].message and "did you mean .*?" in errors[3].hint
    assert all(e.file.endswith("seed-004-placeholders.properties") for e in errors)
    assert any("no replication flow is enabled" in w.message for w in info.value.warnings)


def test_missing_or_unreadable_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.properties")
    assert info.value.exit_code == 2
    assert "nope.properties" in str(info.value)
    with pytest.raises(ConfigError):
        load_config(tmp_path)  # a directory


# --- MM2's defaults (MM2-REFERENCE.md and the connector ConfigDefs) ---------------------------

DEFAULTS = {
    "enabled": False,
    "topics": [".*"],
    "topics_exclude": [r".*[\-\.]internal", r".*\.replica", "__.*"],
    "groups": [".*"],
    "groups_exclude": ["console-consumer-.*", "connect-.*", "__.*"],
    "config_properties_exclude": ["follower.replication.throttled.replicas",
                                  "leader.replication.throttled.replicas",
                                  "message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
                                  "log.message.timestamp.after.max.ms", "message.timestamp.type",
                                  "unclean.leader.election.enable", "min.insync.replicas"],
    "replication_policy_class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    "replication_policy_separator": ".",
    "internal_topic_separator_enabled": True,
    "replication_factor": 2,
    "heartbeats_topic_replication_factor": 3,
    "checkpoints_topic_replication_factor": 3,
    "offset_syncs_topic_replication_factor": 3,
    "offset_lag_max": 100,
    "emit_heartbeats_enabled": True,
    "emit_heartbeats_interval_seconds": 1,
    "emit_checkpoints_enabled": True,
    "emit_checkpoints_interval_seconds": 60,
    "sync_group_offsets_enabled": False,
    "sync_group_offsets_interval_seconds": 60,
    "refresh_topics_enabled": True,
    "refresh_topics_interval_seconds": 600,
    "refresh_groups_enabled": True,
    "refresh_groups_interval_seconds": 600,
    "sync_topic_configs_enabled": True,
    "sync_topic_configs_interval_seconds": 600,
    "sync_topic_acls_enabled": True,
    "sync_topic_acls_interval_seconds": 600,
    "emit_offset_syncs_enabled": True,
    "offset_syncs_topic_location": "source",
    "exactly_once_support": "disabled",
    "tasks_max": 1,
    "heartbeats_replication_enabled": True,
}


@pytest.mark.parametrize("name,expected", DEFAULTS.items())
def test_every_mm2_default(name, expected):
    flow = config().flow("a", "b")
    assert getattr(flow, name) == expected
    assert flow.line_of(name.replace("_", ".")) is None


def test_props_hold_every_effective_setting_with_defaults():
    flow = config("a->b.enabled = true\ntopics = x.*\n").flow("a", "b")
    assert flow.props["topics"] == "x.*" and flow.props["enabled"] == "true"
    assert flow.props["emit.checkpoints.interval.seconds"] == "60"
    assert flow.props["topics.exclude"] == r".*[\-\.]internal, .*\.replica, __.*"


def test_interval_seconds_follows_enabled_flags_and_minus_one():
    flow = config("sync.group.offsets.enabled = true\nemit.checkpoints.interval.seconds = -1\n"
                  "refresh.topics.enabled = false\n").flow("a", "b")
    assert flow.interval_seconds("sync.group.offsets") == 60
    assert flow.interval_seconds("emit.checkpoints") is None  # MM2 schedules nothing for a negative interval
    assert flow.interval_seconds("refresh.topics") is None
    assert flow.interval_seconds("emit.heartbeats") == 1
    assert {loop: flow.interval_seconds(loop) is not None for loop in LOOPS}["sync.topic.acls"]
    with pytest.raises(ValueError):
        flow.interval_seconds("emit.nothing")


def test_flows_cover_every_ordered_pair_in_clusters_order():
    cfg = config(base="clusters = x, y, z\nx.bootstrap.servers=x:1\ny.bootstrap.servers=y:1\n"
                      "z.bootstrap.servers=z:1\nx->z.enabled=true\n")
    assert [f.name for f in cfg.flows] == ["x->y", "x->z", "y->x", "y->z", "z->x", "z->y"]
    assert [f.name for f in cfg.enabled_flows()] == ["x->z"]


# --- layering ---------------------------------------------------------------------------------


def test_flow_key_overrides_top_level_for_that_flow_only():
    cfg = config("a->b.enabled = true\nb->a.enabled = true\ntopics = shared.*\na->b.topics = only-ab\n")
    assert cfg.flow("a", "b").topics == ["only-ab"] and cfg.flow("a", "b").line_of("topics") == 7
    assert cfg.flow("b", "a").topics == ["shared.*"] and cfg.flow("b", "a").line_of("topics") == 6


def test_cluster_prefixed_connector_keys_are_ignored_like_mm2_and_warned():
    cfg = config("a->b.enabled = true\na.topics = from-cluster\n")
    assert cfg.flow("a", "b").topics == [".*"]
    assert "MM2 ignores `a.topics`" in warning_lines(cfg)[5]


def test_top_level_enabled_enables_every_pair():
    cfg = config("enabled = true\n")
    assert all(f.enabled for f in cfg.flows)
    assert "every pair" in warning_lines(cfg)[4]


def test_deprecated_blacklist_is_an_alias_of_exclude():
    cfg = config("a->b.enabled = true\na->b.topics.blacklist = secret.*\ngroups.blacklist = tmp-.*\n")
    flow = cfg.flow("a", "b")
    assert flow.topics_exclude == ["secret.*"] and flow.groups_exclude == ["tmp-.*"]
    assert flow.line_of("topics.exclude") == 5 and flow.line_of("topics.blacklist") == 5
    warnings = warning_lines(cfg)
    assert "deprecated" in warnings[5] and "topics.exclude" in warnings[5]
    assert "deprecated" in warnings[6]


def test_exclude_wins_over_its_deprecated_alias_whatever_the_level():
    cfg = config("topics.exclude = new.*\na->b.topics.blacklist = old.*\n")
    assert cfg.flow("a", "b").topics_exclude == ["new.*"]
    assert "is ignored for a->b" in warning_lines(cfg)[5]


def test_get_reports_value_and_line_at_each_level():
    cfg = config("security.protocol = SSL\na.security.protocol = SASL_SSL\ntasks.max = 3\na->b.tasks.max = 5\n")
    assert cfg.get("tasks.max").value == "3" and cfg.get("tasks.max").line == 6
    flow_setting = cfg.get("tasks.max", source="a", target="b")
    assert (flow_setting.value, flow_setting.line, flow_setting.written_as) == ("5", 7, "a->b.tasks.max")
    assert cfg.get("tasks.max", source="b", target="a").line == 6
    assert cfg.get("offset.lag.max", source="a", target="b").line is None  # MM2's default
    assert cfg.get("security.protocol", cluster="a").line == 5
    assert cfg.get("security.protocol", cluster="b").line == 4  # top-level security applies to all clusters
    assert cfg.get("nothing") is None
    with pytest.raises(ValueError):
        cfg.get("tasks.max", source="a")


LEVELS = st.sampled_from(["top", "a->b", "b->a", "a", "none"])


@settings(max_examples=60)
@given(st.lists(st.tuples(LEVELS, st.integers(1, 999)), max_size=5))
def test_layering_property_flow_beats_top_beats_default(assignments):
    """For any mix of levels, the effective value is the last flow-level one, else top-level, else 60."""
    lines = []
    for level, value in assignments:
        prefix = {"top": "", "a->b": "a->b.", "b->a": "b->a.", "a": "a.", "none": "# "}[level]
        lines.append(f"{prefix}emit.checkpoints.interval.seconds = {value}")
    cfg = config("\n".join(lines) + "\n")
    for source, target in (("a", "b"), ("b", "a")):
        flow_level = [(i, v) for i, (lvl, v) in enumerate(assignments) if lvl == f"{source}->{target}"]
        top_level = [(i, v) for i, (lvl, v) in enumerate(assignments) if lvl == "top"]
        expected_index, expected = (flow_level or top_level or [(None, 60)])[-1]
        flow = cfg.flow(source, target)
        assert flow.emit_checkpoints_interval_seconds == expected
        assert flow.line_of("emit.checkpoints.interval.seconds") == (None if expected_index is None
                                                                     else expected_index + 4)


# --- client settings --------------------------------------------------------------------------


def test_client_config_layering_follows_mm2():
    cfg = config(
        "a->b.enabled = true\n"
        "security.protocol = SSL\n"                       # every cluster, every client
        "a.security.protocol = SASL_SSL\n"                # a's clients
        "a.sasl.mechanism = PLAIN\n"
        "a->b.consumer.max.poll.records = 10\n"           # flow-level client key...
        "a.consumer.max.poll.records = 20\n"              # ...loses to the cluster's role key
        "a->b.consumer.fetch.min.bytes = 5\n"
        "a->b.consumer.security.protocol = PLAINTEXT\n"   # loses: MM2 copies a.security.protocol into a.consumer.*
        "a->b.source.consumer.client.rack = r1\n"         # flow + side + role beats everything
        "a.consumer.client.rack = r0\n"
        "a.acks = all\n"                                  # never reaches a client
    )
    flow = cfg.flow("a", "b")
    consumer = cfg.client_config("a", "consumer", flow)
    assert consumer == {"bootstrap.servers": "a1:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                        "max.poll.records": "20", "fetch.min.bytes": "5", "client.rack": "r1",
                        "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
    assert consumer.origins["max.poll.records"] == ("mm2.properties", 9)
    assert consumer.cluster == "a" and consumer.role == "consumer"
    assert cfg.client_config("b", "producer", flow) == {"bootstrap.servers": "b1:9092", "security.protocol": "SSL"}
    assert cfg.client_config("a", "admin") == {"bootstrap.servers": "a1:9092", "security.protocol": "SASL_SSL",
                                               "sasl.mechanism": "PLAIN"}
    assert "a.producer.acks" in warning_lines(cfg)[14]


def test_flow_unprefixed_client_key_applies_when_the_cluster_does_not_set_it():
    cfg = config("a->b.consumer.security.protocol = SSL\n")
    assert cfg.client_config("a", "consumer", cfg.flow("a", "b"))["security.protocol"] == "SSL"
    assert "security.protocol" not in cfg.client_config("a", "consumer")


def test_client_config_rejects_unknown_alias_role_and_foreign_flow():
    cfg = config(base="clusters=a,b,c\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\nc.bootstrap.servers=c:1\n")
    with pytest.raises(ConfigError):
        cfg.client_config("zz", "consumer")
    with pytest.raises(ValueError):
        cfg.client_config("a", "reader")
    with pytest.raises(ConfigError):
        cfg.client_config("c", "consumer", cfg.flow("a", "b"))
    with pytest.raises(ConfigError):
        cfg.flow("a", "zz")


def test_exactly_once_is_read_from_the_target_cluster():
    cfg = config("b.exactly.once.source.support = ENABLED\n")
    assert cfg.flow("a", "b").exactly_once_support == "enabled"
    assert cfg.flow("b", "a").exactly_once_support == "disabled"
    assert "ignores a top-level" in warning_lines(config("exactly.once.source.support = enabled\n"))[4]


# --- errors, each with its line ------------------------------------------------------------------


def test_missing_clusters_is_reported_at_line_1():
    err = failure("a.bootstrap.servers = h:1\na->b.enabled = true\n")
    assert where(err) == [(1, "no `clusters` line: MM2 needs the list of cluster aliases")]
    assert "clusters = primary, dr" in err.errors[0].hint


def test_flow_naming_unknown_alias_and_flow_to_itself():
    err = failure(BASE + "a->c.enabled = true\nb->a.enabled = true\na->a.enabled = true\nAA->b.topics = x\n")
    lines = where(err)
    assert lines[0][0] == 4 and "'c', which is not in `clusters` (line 1)" in lines[0][1]
    assert lines[1][0] == 6 and "to itself" in lines[1][1]
    assert lines[2][0] == 7 and "'AA'" in lines[2][1] and err.errors[2].hint == "did you mean 'a'?"


def test_missing_bootstrap_servers_points_at_clusters_line():
    err = failure("clusters = a, b\na.bootstrap.servers = a:1\na->b.enabled = true\n")
    assert [(e.line, e.cluster) for e in err.errors] == [(1, "b")]
    assert "b.bootstrap.servers = host:9092" in err.errors[0].hint


def test_top_level_bootstrap_is_mm2s_fallback_with_a_warning():
    cfg = parse_config("clusters = a, b\nbootstrap.servers = shared:9092\nb.bootstrap.servers = b:1\n", "f")
    assert cfg.clusters["a"].bootstrap_servers == "shared:9092"
    assert "falls back to the top-level bootstrap.servers (line 2)" in warning_lines(cfg)[1]


@pytest.mark.parametrize("hosts,fragment", [
    (",,", "lists no hosts"), ("", "lists no hosts"), ("h1:9092,,h2:9092", "empty entry"),
    ("broker1", "'broker1' is not host:port"), ("h:99999", "outside 1-65535"), ("<host>:9092", "placeholder"),
])
def test_bad_host_lists(hosts, fragment):
    err = failure(f"clusters = a, b\na.bootstrap.servers = {hosts}\nb.bootstrap.servers = b:1\n")
    assert [e.line for e in err.errors] == [2]
    assert fragment in err.errors[0].message


def test_ipv6_hosts_are_fine():
    assert config(base="clusters=a,b\na.bootstrap.servers=[::1]:9092, h-2.example.com:9093\n"
                       "b.bootstrap.servers=b:1\n").clusters["a"].bootstrap_servers == "[::1]:9092,h-2.example.com:9093"


@pytest.mark.parametrize("line,fragment,hint", [
    ("groups = *", "invalid regex '*'", "did you mean .*?"),
    ("a->b.topics = orders, *-events", "invalid regex '*-events'", "did you mean .*-events?"),
    ("topics.exclude = (unclosed", "invalid regex '(unclosed'", None),
    ("emit.heartbeats.enabled = yes", "must be true or false, got 'yes'", None),
    ("a->b.enabled = on", "must be true or false, got 'on'", None),
    ("refresh.topics.interval.seconds = 10s", "must be a whole number, got '10s'", None),
    ("sync.group.offsets.interval.seconds = -5", "or -1 to disable, got -5", None),
    ("emit.checkpoints.interval.seconds = 0", "positive number of seconds", None),
    ("replication.factor = 0", "at least 1 (or -1 for the broker default)", None),
    ("heartbeats.topic.replication.factor = 40000", "between 1 and 32767", None),
    ("tasks.max = 0", "at least 1", None),
    ("offset.lag.max = -1", "at least 0", None),
    ("offset-syncs.topic.location = remote", "one of source, target", None),
    ("replication.policy.separator =", "must not be empty", "IdentityReplicationPolicy"),
    ("replication.policy.separator = /", "illegal topic names", None),
    ("replication.policy.class = com.acme.MyPolicy", "unknown replication policy 'com.acme.MyPolicy'", None),
    ("replication.policy.class = IdentityReplicationPolicy", "unknown replication policy",
     "did you mean org.apache.kafka.connect.mirror.IdentityReplicationPolicy?"),
    ("b.exactly.once.source.support = maybe", "one of disabled, preparing, enabled", None),
])
def test_bad_values_are_errors_at_their_line(line, fragment, hint):
    err = failure(BASE + "a->b.enabled = true\n" + line + "\n")
    assert [e.line for e in err.errors] == [5], where(err)
    assert fragment in err.errors[0].message
    assert f"`{line.split('=')[0].strip()}`" in err.errors[0].message
    if hint:
        assert hint in err.errors[0].hint


def test_booleans_are_case_insensitive():
    flow = config("a->b.enabled = TRUE\nemit.checkpoints.enabled = False\n").flow("a", "b")
    assert flow.enabled is True and flow.emit_checkpoints_enabled is False


def test_all_errors_are_collected_in_one_pass_and_each_reported_once():
    err = failure(BASE + "a->b.enabled = maybe\ngroups = *\nemit.heartbeats.interval.seconds = x\n"
                         "b->a.enabled = true\n")
    assert [e.line for e in err.errors] == [4, 5, 6]  # top-level errors are not repeated per flow


@pytest.mark.parametrize("policy_lines", [
    "replication.policy.class = " + IDENTITY_POLICY,
    "a->b.replication.policy.class = " + IDENTITY_POLICY,
])
def test_identity_both_ways_is_accepted_as_in_mm2_and_the_warning_names_the_overlap(policy_lines):
    # MM2 accepts it (isCycle gives up on Identity names); with both filters at `.*` every topic loops
    cfg = config("a->b.enabled = true\nb->a.enabled = true\n" + policy_lines + "\n")
    message = warning_lines(cfg)[6]
    assert "b -> a" in message and "copied round it forever" in message
    assert "topics matching .* are replicated by every flow of the loop" in message


def test_identity_both_ways_with_disjoint_topic_filters_is_loop_free_and_says_so():
    cfg = config(f"a->b.enabled = true\nb->a.enabled = true\nreplication.policy.class = {IDENTITY_POLICY}\n"
                 "a->b.topics = a-.*\nb->a.topics = b-.*\n")
    [message] = [w.message for w in cfg.warnings if "IdentityReplicationPolicy" in w.message]
    assert "look disjoint" in message and "a->b `topics` = a-.*; b->a `topics` = b-.*" in message


def test_identity_both_ways_names_the_patterns_both_directions_match():
    cfg = config(f"a->b.enabled = true\nb->a.enabled = true\nreplication.policy.class = {IDENTITY_POLICY}\n"
                 "a->b.topics = orders, a-.*\nb->a.topics = b-.*, orders\n")
    [message] = [w.message for w in cfg.warnings if "IdentityReplicationPolicy" in w.message]
    assert "topics matching orders are replicated by every flow" in message


def test_identity_loop_through_three_clusters_is_a_warning():
    text = ("clusters = x, y, z\nx.bootstrap.servers=x:1\ny.bootstrap.servers=y:1\nz.bootstrap.servers=z:1\n"
            "x->y.enabled=true\ny->z.enabled=true\nz->x.enabled=true\n"
            f"y->z.replication.policy.class={IDENTITY_POLICY}\n")
    assert "z -> x -> y" in warning_lines(config(base=text))[8]


def test_heartbeats_replication_enabled_is_read_per_flow():
    cfg = config("a->b.enabled = true\na->b.heartbeats.replication.enabled = false\n")
    assert cfg.flow("a", "b").heartbeats_replication_enabled is False
    assert cfg.flow("b", "a").heartbeats_replication_enabled is True
    assert not cfg.warnings  # a known key, not "unknown"
    assert "must be true or false" in failure(BASE + "heartbeats.replication.enabled = no\n").errors[0].message


def test_no_offset_syncs_means_no_checkpoints_as_in_mm2():
    cfg = config("a->b.enabled = true\na->b.emit.offset-syncs.enabled = false\n")
    assert cfg.flow("a", "b").emit_offset_syncs_enabled is False
    assert "emits no checkpoints either" in warning_lines(cfg)[5]
    from sparkmirror.model.flowclients import clients_of

    assert ("a", "producer", "offset-syncs") not in clients_of(cfg.flow("a", "b"))  # nothing writes them


def test_no_offset_syncs_with_offset_syncs_settings_is_refused_as_mm2_refuses_it():
    err = failure(BASE + "offset-syncs.topic.replication.factor = 1\na->b.enabled = true\n"
                         "a->b.emit.offset-syncs.enabled = false\n")
    assert [e.line for e in err.errors] == [4]
    assert "switches off" in err.errors[0].message and "line 6" in err.errors[0].message
    # the disabled reverse flow replicates nothing, so MM2 refusing it changes nothing
    config("offset-syncs.topic.replication.factor = 1\nemit.offset-syncs.enabled = false\na->b.enabled = true\n"
           "a->b.emit.offset-syncs.enabled = true\n")


def test_identity_one_way_and_default_both_ways_are_fine():
    one_way = config(f"a->b.enabled = true\nb->a.enabled = false\nreplication.policy.class = {IDENTITY_POLICY}\n")
    assert one_way.flow("a", "b").replication_policy_class == IDENTITY_POLICY
    config("a->b.enabled = true\nb->a.enabled = true\n")


def test_bad_cluster_aliases():
    err = failure("clusters = good, bad alias, <x>\ngood.bootstrap.servers=g:1\n")
    messages = [e.message for e in err.errors]
    assert "'bad alias'" in messages[0] and "letters, digits" in messages[0]
    assert "placeholder" in messages[1]


def test_empty_clusters():
    assert "`clusters` is empty" in failure("clusters =\n").errors[0].message


# --- warnings ------------------------------------------------------------------------------------


def test_duplicates_warn_and_last_wins():
    cfg = config("tasks.max = 2\ntasks.max = 3\n")
    assert cfg.flow("a", "b").tasks_max == 3
    assert warning_lines(cfg)[5] == "`tasks.max` is set again here; this value wins over line 4"


def test_unknown_keys_get_the_nearest_known_key():
    cfg = config("emit.heartbeat.interval.seconds = 5\na->b.sync.topic.config.enabled = false\n"
                 "a.bootstrap.server = x:1\nfrobnicate = 1\n")
    warnings = warning_lines(cfg)
    assert "did you mean `emit.heartbeats.interval.seconds`?" in warnings[4]
    assert "did you mean `a->b.sync.topic.configs.enabled`?" in warnings[5]
    assert "did you mean `a.bootstrap.servers`?" in warnings[6]
    assert "unknown key `frobnicate`" in warnings[7]


def test_misplaced_client_keys_and_unknown_cluster_prefix():
    cfg = config("consumer.max.poll.records = 5\nacks = all\nc.bootstrap.servers = c:1\nA.security.protocol = SSL\n")
    warnings = warning_lines(cfg)
    assert "ignores a top-level `consumer.max.poll.records`" in warnings[4]
    assert "ignores a top-level `acks`" in warnings[5]
    assert "'c' is not in `clusters`" in warnings[6]
    assert "did you mean 'a'?" in warnings[7]


def test_worker_settings_are_accepted_silently():
    cfg = config("offset.storage.replication.factor = 1\nb.config.storage.replication.factor = 1\n"
                 "dedicated.mode.enable.internal.rest = true\nlisteners = http://:8083\n"
                 "a->b.enabled = true\n")
    assert cfg.warnings == []


def test_warning_str_is_file_line_warning():
    assert str(ConfigWarning("careful", "m.properties", 7)) == "m.properties:7: warning: careful"


def test_no_enabled_flow_and_empty_topics_warn():
    assert "no replication flow is enabled" in warning_lines(config())[1]
    cfg = config("a->b.enabled = true\na->b.topics =\n")
    assert cfg.flow("a", "b").topics == []
    assert "replicates no topics" in warning_lines(cfg)[5]


def test_alias_containing_the_separator_warns():
    cfg = parse_config("clusters = us.west, eu\nus.west.bootstrap.servers = w:1\neu.bootstrap.servers = e:1\n"
                       "us.west->eu.enabled = true\n", "f")
    assert cfg.flow("us.west", "eu").enabled
    assert cfg.clusters["us.west"].bootstrap_servers == "w:1"
    assert "breaks its loop detection" in warning_lines(cfg)[1]


# --- value objects ---------------------------------------------------------------------------------


def test_flow_config_is_frozen_and_hashable():
    flow = config().flow("a", "b")
    with pytest.raises(AttributeError):
        flow.enabled = True  # type: ignore[misc]
    assert {flow: 1}[config().flow("a", "b")] == 1
    assert flow.name == "a->b"


def test_policy_and_filters_from_the_model_modules():
    pytest.importorskip("sparkmirror.model.policy")
    pytest.importorskip("sparkmirror.model.filters")
    flow = config("a->b.enabled = true\na->b.topics = orders.*\nreplication.policy.separator = _\n").flow("a", "b")
    assert flow.policy.format_remote_topic("a", "orders") == "a_orders"
    assert flow.topic_filter.should_replicate_topic("orders-eu")
    assert not flow.topic_filter.should_replicate_topic("payments")
    assert flow.group_filter.should_replicate_group("app")
    assert not flow.group_filter.should_replicate_group("console-consumer-1")


def test_two_aliases_for_the_same_cluster_warn():
    cfg = parse_config("clusters = a, b\na.bootstrap.servers = h:1,g:2\nb.bootstrap.servers = g:2, h:1\n", "f")
    assert "have the same bootstrap.servers" in warning_lines(cfg)[3]


def test_properly_escaped_regex_backslashes_do_not_warn():
    cfg = config("a->b.enabled = true\ntopics.exclude = .*\\\\.replica, __.*\n")
    assert cfg.flow("a", "b").topics_exclude == [r".*\.replica", "__.*"]
    assert cfg.warnings == []


def test_java_only_regex_syntax_is_refused_at_its_line():
    pytest.importorskip("sparkmirror.model.filters")
    err = failure(BASE + "a->b.enabled = true\na->b.groups.exclude = [a-z&&[^x]]\n")
    assert [e.line for e in err.errors] == [5]
    assert "`a->b.groups.exclude`" in err.errors[0].message


@pytest.mark.parametrize("location, expected", [
    ("source", ("a", "mm2-offset-syncs.b.internal")),
    ("target", ("b", "mm2-offset-syncs.a.internal")),
])
def test_offset_syncs_location_follows_offset_syncs_topic_location(location, expected):
    """MM2's offset-syncs topic is on the cluster offset-syncs.topic.location names, named after the other one."""
    config = parse_config("clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\n"
                          f"a->b.enabled = true\noffset-syncs.topic.location = {location}\n", "mm2.properties")
    flow = config.flow("a", "b")
    assert flow.offset_syncs_location == expected
    assert flow.offset_syncs_cluster == expected[0]


def test_every_connector_key_says_what_it_does_and_the_docs_table_is_generated_from_it():
    from pathlib import Path

    from sparkmirror.model import config as model

    assert model.CONNECTOR_KEYS == frozenset(model.FLOW_KEY_DESCRIPTIONS) | frozenset(model.OTHER_CONNECTOR_KEYS)
    assert all(len(model.describe_key(k) or "") > 15 for k in model.CONNECTOR_KEYS)
    assert model.describe_key("not.a.key") is None
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    start = doc.index("\n", doc.index("<!-- mm2-keys")) + 1
    assert doc[start:doc.index("<!-- /mm2-keys -->")] == model.keys_table(), \
        "regenerate the table in docs/configuration.md with: python -m sparkmirror.model.config"

