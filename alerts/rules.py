"""sparkmirror's Prometheus alert rules, built from the metric specs in ``sparkmirror.metrics``.

Every rule carries ``severity`` as the monitoring mixins have it (``critical``
wakes someone up, ``warning`` opens a ticket, ``info`` is for the dashboards), a
``summary``, a ``description`` and a ``runbook_url`` pointing at the rule's own
section of docs/runbooks.md (the section heading is the alert name).
``build(config)`` makes the rules from a mixin config (alerts/config.py: selector,
thresholds, ``for`` durations, runbook base URL, recovery-point objectives);
``recordings(config)`` the recording rules of the objectives (alerts/slo.py);
``python -m alerts.generate`` writes the rule file.
"""

from __future__ import annotations

from dataclasses import dataclass

from alerts import slo
from alerts.config import DEFAULT, Config
from alerts.promql import heartbeat_latency_quantile
from alerts.promql import sel as _sel
from sparkmirror import metrics as m

GROUP = "sparkmirror"
SEVERITIES = ("critical", "warning", "info")

#: What a failover now would do, per ``reason`` of sparkmirror_failover_blocked.
FAILOVER_CONSEQUENCES = {
    "no-checkpoint": "start without a checkpoint on some partition (no checkpoint there yet)",
    "behind-offset-syncs": "start without a checkpoint on some partition: its committed offset is older than "
                           "every offset-sync, so none will be written until the group moves on",
    "would-skip": "skip records the group has not consumed (its checkpoint is ahead of its committed offset)",
    "past-target-end": "resume past the end of a mirror partition (truncated or re-created)",
    "reread-records": "re-read more records than the monitor's --failover-max-reread-records",
    "reread-seconds": "re-read records spanning more than the monitor's --failover-max-reread-seconds",
}
assert set(FAILOVER_CONSEQUENCES) == set(m.FAILOVER_REASONS)


def _failover_consequence() -> str:
    """A Go template choosing the text of ``$labels.reason``."""
    branches = [f'{"if" if i == 0 else "else if"} eq $labels.reason "{reason}" }}}}{text}{{{{ '
                for i, (reason, text) in enumerate(FAILOVER_CONSEQUENCES.items())]
    return "{{ " + "".join(branches) + "else }}{{ $labels.reason }}{{ end }}"


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_: str | None
    severity: str
    summary: str
    description: str
    #: The quantity the rule compares (no threshold): what a dashboard or a live test looks at.
    measure: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.name}: severity {self.severity} not in {SEVERITIES}")

    def to_rule(self, config: Config = DEFAULT, for_: str | None = None) -> dict:
        rule: dict = {"alert": self.name, "expr": self.expr}
        duration = for_ or self.for_
        if duration:
            rule["for"] = duration
        rule["labels"] = {"severity": self.severity}
        rule["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook_url": config.runbook_url(self.name),
        }
        return rule


def build(config: Config = DEFAULT) -> tuple[AlertRule, ...]:
    """Every rule, with the config's selector, thresholds and durations."""
    # Long by design: one declarative list of the rules, read top to bottom like the rule file.
    t = config.thresholds

    def sel(spec: m.MetricSpec, *matchers: str) -> str:
        return _sel(spec, *config.matchers, *matchers)

    def clusters(expr: str) -> str:
        """``expr`` (one series per flow) with the flow's ``source`` and ``target`` cluster labels, so
        Alertmanager can inhibit it while one of the two is unreachable (alerts/alertmanager.yml)."""
        return f"({expr}) * on(flow) group_left(source, target) max by (flow, source, target) ({sel(m.FLOW_INFO)})"

    exactly_once = f"{sel(m.AUDIT_EXACTLY_ONCE)} == 1"  # flows whose duplicates are errors

    def grew(spec: m.MetricSpec) -> str:
        """The counter rose in the window, or its series appeared already above 0 (the monitor or the
        replicator started after the loss: ``increase()`` needs two samples and misses that one)."""
        s, w = sel(spec), t.data_lost_window
        return f"increase({s}[{w}]) > 0 or ({s} > 0 unless {s} offset {w})"

    # seconds a flow has been paused; 0 for a running one (its pause time is absent while it runs)
    paused_for = (f"(time() - {sel(m.REPLICATOR_FLOW_PAUSED_SINCE)}) "
                  f"or on(flow) (0 * {sel(m.REPLICATOR_FLOW_PAUSED)})")
    up = f'up{{job="{config.monitor_job}"}}'

    def paused_within(window: str) -> str:
        """Flows paused at some point of the last ``window`` (Alertmanager inhibits their alerts while the
        pause lasts; this keeps the page quiet while a resumed flow comes back)."""
        return f" unless on(flow) max_over_time({sel(m.REPLICATOR_FLOW_PAUSED)}[{window}]) == 1"
    # the fixed lag alerts are the fallback for flows without a recovery-point objective
    without_objective = f" unless on(flow) {slo.OBJECTIVE}"
    stuck = f"time() - {sel(m.LAST_EVALUATION)} > {t.monitor_evaluation_age_seconds}"
    # arrival, not age: a heartbeat's age includes the replication latency (a slow but healthy flow)
    age, timeout = sel(m.HEARTBEAT_ARRIVAL_AGE), sel(m.HEARTBEAT_TIMEOUT)
    stalled, failed = sel(m.FLOW_STATUS, 'status="STALL"'), sel(m.FLOW_STATUS, 'status="ERR"')
    unreachable = f"{sel(m.CLUSTER_UP)} == 0"
    # flows with a cluster the monitor's requests fail on now (before it calls the cluster down)
    erring = f"increase({sel(m.CLUSTER_ERRORS)}[1m]) > 0"
    failing_sides = [f'label_replace({erring}, "{side}", "$1", "cluster", "(.*)")' for side in ("source", "target")]
    cluster_failing = "(" + " or ".join(
        f"max by (flow) ({sel(m.FLOW_INFO)} * on({side}) group_left() max by ({side}) ({expr}))"
        for side, expr in zip(("source", "target"), failing_sides)) + ")"
    for label in ("source", "target"):
        unreachable = f'label_replace({unreachable}, "{label}", "$1", "cluster", "(.*)")'
    return (
        AlertRule(
            "SparkmirrorHeartbeatsStopped",
            clusters(f"{age} > {timeout} + {t.heartbeats_stopped_margin_seconds} and ({sel(m.HEARTBEAT_SEEN)} == 1 "
                     f"or {age} > {t.heartbeat_grace_seconds}) and {sel(m.HEARTBEATS_EXPECTED)} == 1 "
                     f"unless on(flow) ({age} <= {t.heartbeat_cluster_wait_seconds} and on(flow) {cluster_failing})"
                     f"{paused_within(t.flow_resumed_grace)}"),
            t.heartbeats_stopped_for, "critical",
            "Heartbeats of flow {{ $labels.flow }} stopped reaching the target",
            "No heartbeat of {{ $labels.flow }} has arrived on the target for {{ $value | humanizeDuration }}, "
            f"more than {t.heartbeats_stopped_margin_seconds}s beyond the flow's heartbeat timeout (2 x "
            "emit.heartbeats.interval.seconds, at least 10s), or the monitor has "
            f"waited that long without seeing any (more than {t.heartbeat_grace_seconds}s: replicator never "
            "started, heartbeats topic missing): nothing is crossing from the source to the target cluster, "
            "so the disaster-recovery copy falls further behind every second.",
            measure=age,
        ),
        AlertRule(
            "SparkmirrorReplicationLatencyHigh",
            clusters(f"{heartbeat_latency_quantile(t.latency_quantile, *config.matchers, window=t.latency_window)} "
                     f"> {t.latency_seconds}"),
            t.latency_for, "warning",
            "Replication latency of flow {{ $labels.flow }} is high",
            f"p{round(t.latency_quantile * 100)} heartbeat latency (source timestamp to append on the "
            f"target) of {{{{ $labels.flow }}}} over {t.latency_window} is {{{{ $value | humanizeDuration }}}} "
            f"(limit {t.latency_seconds}s): records are replicated, but late.",
            measure=heartbeat_latency_quantile(t.latency_quantile, *config.matchers, window=t.latency_window),
        ),
        AlertRule(
            "SparkmirrorRPOBudgetBurn",
            # one incident, one page: a dead replicator burns the budget too, and its heartbeats page
            # (which inhibits this one while it fires) covers it until the short window has drained
            clusters(f"{slo.fast_burn(t)} unless on(flow) max_over_time(ALERTS{{alertname="
                     f"\"SparkmirrorHeartbeatsStopped\"}}[5m]){paused_within(t.flow_resumed_burn_grace)}"),
            t.rpo_fast_burn_for, "critical",
            "Flow {{ $labels.flow }} burns its recovery-point error budget fast",
            "Over the last hour and the last 5 minutes, {{ $labels.flow }} spent its RPO error budget "
            f"{{{{ $value | humanize }}}} times as fast as its objective allows (limit {t.rpo_fast_burn:g}x: "
            f"{t.rpo_fast_burn * 100 / 720:.0f} % of a 30-day budget in one hour): the lag is above the flow's "
            "recovery-point objective (or unknown) far more often than promised. Budget left over the "
            f"period: {slo.BUDGET_LEFT_TEMPLATE}.",
            measure=slo.burn_rate("1h"),
        ),
        AlertRule(
            "SparkmirrorRPOBudgetBurnSlow",
            clusters(slo.slow_burn(t)),
            t.rpo_slow_burn_for, "warning",
            "Flow {{ $labels.flow }} burns its recovery-point error budget faster than it lasts",
            f"Over 6 hours (and the last 30 minutes), or over 3 days (and the last 6 hours), {{{{ $labels.flow }}}} "
            f"spent its RPO error budget {{{{ $value | humanize }}}} times as fast as its objective allows (limits "
            f"{t.rpo_slow_burn:g}x and {t.rpo_steady_burn:g}x): at this pace the budget runs out before the period "
            f"ends. Budget left over the period: {slo.BUDGET_LEFT_TEMPLATE}.",
            measure=slo.burn_rate("6h"),
        ),
        AlertRule(
            "SparkmirrorLagHigh",
            clusters(f"{sel(m.FLOW_LAG_SECONDS)} > {t.lag_seconds}{without_objective}"),
            t.lag_for, "warning",
            "Flow {{ $labels.flow }} is far behind the source",
            "The oldest source record of {{ $labels.flow }} not yet on the target is "
            f"{{{{ $value | humanizeDuration }}}} old (limit {t.lag_seconds}s): losing the source now "
            "would lose that much data.",
            measure=sel(m.FLOW_LAG_SECONDS),
        ),
        AlertRule(
            "SparkmirrorLagGrowing",
            clusters(f"deriv({sel(m.FLOW_LAG_RECORDS)}[{t.lag_growing_window}]) > 0 "
                     f"and {sel(m.FLOW_LAG_SECONDS)} > {t.lag_growing_min_seconds}{without_objective}"),
            t.lag_growing_for, "warning",
            "Lag of flow {{ $labels.flow }} keeps growing",
            "Records lag of {{ $labels.flow }} grows by {{ $value | humanize }} records/s "
            f"(trend over {t.lag_growing_window}) and the target is more than "
            f"{t.lag_growing_min_seconds}s behind: the source produces faster than the replicator copies.",
            measure=f"deriv({sel(m.FLOW_LAG_RECORDS)}[{t.lag_growing_window}])",
        ),
        AlertRule(
            "SparkmirrorCheckpointsStale",
            # staleness, not age: MM2 writes a checkpoint only when the group's translation changes
            clusters(f"{sel(m.GROUP_CHECKPOINT_STALE)} > 0"),
            t.checkpoint_for, "warning",
            "Checkpoints of group {{ $labels.group }} on flow {{ $labels.flow }} are stale",
            "Group {{ $labels.group }} moved past an offset-sync on {{ $value }} partitions of "
            "{{ $labels.flow }} and no checkpoint followed within the checkpoint timeout (2 x "
            "emit.checkpoints.interval.seconds + the monitor's groups interval): checkpoints stopped, and a "
            "failover now would re-read everything since the last one.",
            measure=sel(m.GROUP_CHECKPOINT_STALE),
        ),
        AlertRule(
            "SparkmirrorCheckpointsMissing",
            clusters(f"{sel(m.GROUP_CHECKPOINT_MISSING)} > 0"),
            t.checkpoints_missing_for, "warning",
            "Group {{ $labels.group }} has partitions without a checkpoint on flow {{ $labels.flow }}",
            "Group {{ $labels.group }} has committed offsets on {{ $value }} source partitions of "
            "{{ $labels.flow }} for which no checkpoint exists on the target: it cannot fail over there "
            "(it would start from its auto.offset.reset).",
            measure=sel(m.GROUP_CHECKPOINT_MISSING),
        ),
        AlertRule(
            "SparkmirrorDataLost",
            grew(m.DATA_LOST_RECORDS),
            None, "critical",
            "Records of {{ $labels.topic }} were deleted before flow {{ $labels.flow }} copied them",
            "About {{ $value | humanize }} records of {{ $labels.topic }} left the source log (retention "
            f"or deleteRecords) in the last {t.data_lost_window} before {{{{ $labels.flow }}}} replicated "
            "them: the target has a permanent gap.",
            measure=sel(m.DATA_LOST_RECORDS),
        ),
        AlertRule(
            "SparkmirrorReplicatorRecordsLost",
            grew(m.REPLICATOR_RECORDS_LOST),
            None, "critical",
            "The replicator of flow {{ $labels.flow }} found source records deleted before it copied them",
            "The replicator of {{ $labels.flow }} reports about {{ $value | humanize }} source records it could "
            f"not copy in the last {t.data_lost_window} because the source had already deleted them (retention, "
            "delete-records): the target has a permanent gap; its log names topic, partition and offsets "
            "(DATA LOSS).",
            measure=sel(m.REPLICATOR_RECORDS_LOST),
        ),
        AlertRule(
            "SparkmirrorReplicationAuditFailed",
            # one alert per kind of finding, so the notification says which it is
            " or ".join(f'label_replace({expr}, "finding", "{finding}", "flow", ".*")'
                        for expr, finding in ((grew(m.AUDIT_MISSING), "missing"),
                                              (grew(m.AUDIT_MISMATCHED), "altered"),
                                              (f"({grew(m.AUDIT_DUPLICATED)}) and on(flow) ({exactly_once})",
                                               "duplicated"))),
            None, "critical",
            "The audit of flow {{ $labels.flow }} found records of {{ $labels.topic }} {{ $labels.finding }} "
            "on the target",
            "The audit of {{ $labels.flow }} compared the source and the target and found about "
            "{{ $value | humanize }} records of {{ $labels.topic }} "
            '{{ if eq $labels.finding "missing" }}missing from the target (the offset-syncs say they were '
            'copied, the target does not hold them){{ else if eq $labels.finding "duplicated" }}held twice on '
            "the target of this exactly-once flow (consumers reading read_committed see them twice)"
            "{{ else }}altered on the target (key, value, headers or "
            "timestamp differ from the source's, a record out of order, or one the source never had)"
            f"{{{{ end }}}} in the last {t.data_lost_window}: the disaster-recovery copy is wrong, not just late. "
            "/api/status lists each finding with its partition and offsets (the audit object of the flow).",
            measure=sel(m.AUDIT_MISSING),
        ),
        AlertRule(
            "SparkmirrorReplicationDuplicated",
            f"({grew(m.AUDIT_DUPLICATED)}) unless on(flow) ({exactly_once})",
            None, "info",
            "The audit of flow {{ $labels.flow }} found records of {{ $labels.topic }} written twice",
            "The audit of {{ $labels.flow }} found about {{ $value | humanize }} records of "
            f"{{{{ $labels.topic }}}} held twice on the target in the last {t.data_lost_window}: the "
            "expected replay of an at-least-once flow after a replicator restart (on an exactly-once flow "
            "SparkmirrorReplicationAuditFailed pages instead). See the runbook.",
            measure=sel(m.AUDIT_DUPLICATED),
        ),
        AlertRule(
            "SparkmirrorFlowStalled",
            clusters(f"{stalled} == 1"),
            t.flow_stalled_for, "critical",
            "Flow {{ $labels.flow }} is stalled: records to copy, nothing copied",
            "The monitor rates {{ $labels.flow }} STALL: partitions have records to copy but their replicated "
            "position has not moved over the monitor's whole window, while heartbeats still arrive. The "
            "replicator runs but does not copy those partitions (stuck batch, rejected record, ACLs).",
            measure=stalled,
        ),
        AlertRule(
            "SparkmirrorFlowError",
            clusters(f"{failed} == 1"),
            t.flow_error_for, "critical",
            "Flow {{ $labels.flow }} is in error",
            "The monitor rates {{ $labels.flow }} ERR: records were deleted on the source before they were "
            "replicated, or a cluster of the flow is unreachable. /api/status gives the reason per partition.",
            measure=failed,
        ),
        AlertRule(
            "SparkmirrorOffsetSyncsStale",
            clusters(f"{sel(m.OFFSET_SYNC_AGE)} > {t.offset_sync_age_seconds} and {sel(m.FLOW_LAG_RECORDS)} > 0"),
            t.offset_syncs_stale_for, "warning",
            "Offset-syncs of flow {{ $labels.flow }} stopped while records wait to be copied",
            "The newest offset-sync of {{ $labels.flow }} is {{ $value | humanizeDuration }} old "
            f"(limit {t.offset_sync_age_seconds}s) while source records wait to be copied: the replicator "
            "writes one after every batch that copied records, so nothing was copied, or syncs cannot be "
            "written; consumer-group offsets cannot be translated past that point.",
            measure=sel(m.OFFSET_SYNC_AGE),
        ),
        AlertRule(
            "SparkmirrorInternalRecordsUndecodable",
            grew(m.DECODE_ERRORS),
            None, "info",
            "Undecodable {{ $labels.record_type }} records in {{ $labels.topic }} on {{ $labels.cluster }}",
            "About {{ $value | humanize }} records of {{ $labels.topic }} on cluster {{ $labels.cluster }} "
            f"did not decode as {{{{ $labels.record_type }}}} in the last {t.data_lost_window} and were "
            "skipped: something other than MM2 or sparkmirror writes to an internal topic, or a different "
            "replication policy names the topics.",
            measure=sel(m.DECODE_ERRORS),
        ),
        AlertRule(
            "SparkmirrorReplicatorDown",
            # not while the page itself still waits out its grace for a flow whose heartbeats were never
            # seen (monitor started before the replicator): the page must come first, and inhibits this
            clusters(f"{sel(m.REPLICATOR_UP)} == 0 unless ({sel(m.HEARTBEAT_SEEN)} == 0 "
                     f"and {age} <= {t.heartbeat_grace_seconds} and {sel(m.HEARTBEATS_EXPECTED)} == 1)"),
            t.replicator_down_for, "critical",
            "Replicator of flow {{ $labels.flow }} shows no sign of life",
            "The monitor sees neither fresh heartbeats nor offset-sync progress for {{ $labels.flow }}: "
            "the replicator is stopped, crashed or cannot reach a cluster.",
            measure=sel(m.REPLICATOR_UP),
        ),
        AlertRule(
            "SparkmirrorFlowPaused",
            f"{sel(m.REPLICATOR_FLOW_PAUSED)} == 1",
            None, "info",
            "Flow {{ $labels.flow }} is paused on purpose",
            "Flow {{ $labels.flow }} was paused through the replicator's control API (sparkmirror ctl pause) "
            "and copies nothing until it is resumed. Its heartbeat, lag, budget and checkpoint alerts are "
            "inhibited while it is paused (alertmanager.yml); SparkmirrorFlowPausedTooLong says when the "
            "pause has lasted long enough to be a forgotten one.",
            measure=sel(m.REPLICATOR_FLOW_PAUSED),
        ),
        AlertRule(
            "SparkmirrorFlowPausedTooLong",
            f"({paused_for}) > {t.flow_paused_warn_seconds} and on(flow) {sel(m.REPLICATOR_FLOW_PAUSED)} == 1",
            None, "warning",
            "Flow {{ $labels.flow }} has been paused for {{ $value | humanizeDuration }}",
            "Flow {{ $labels.flow }} was paused through the replicator's control API more than "
            f"{t.flow_paused_warn_seconds // 3600}h ago and is still paused: it copies nothing, so the "
            "disaster-recovery copy lacks every record the source took since, and its other alerts are "
            "inhibited. If the pause is forgotten: sparkmirror ctl resume.",
            measure=paused_for,
        ),
        AlertRule(
            "SparkmirrorMonitorDown",
            f"{up} == 0 or absent({up}) or ({stuck})",
            t.monitor_down_for, "critical",
            "The sparkmirror monitor is down or not evaluating",
            f"Prometheus cannot scrape job {config.monitor_job}{{{{ with $labels.instance }}}} at "
            f"{{{{ . }}}}{{{{ end }}}}, or the monitor "
            f"answers but has not evaluated for more than {t.monitor_evaluation_age_seconds}s: replication "
            "is not watched and no other sparkmirror alert can fire.",
            measure=up,
        ),
        AlertRule(
            "SparkmirrorClusterUnreachable",
            unreachable,
            t.cluster_unreachable_for, "critical",
            "Kafka cluster {{ $labels.cluster }} is unreachable from the monitor",
            "The monitor's requests to cluster {{ $labels.cluster }} keep failing or timing out: its flows' "
            "lag and heartbeats cannot be measured, and the replicator likely cannot reach it either. The "
            "alerts of the flows through it are inhibited while this one fires (their labels source and "
            "target name the cluster, as this alert's do).",
            measure=sel(m.CLUSTER_UP),
        ),
        AlertRule(
            "SparkmirrorFailoverNotReady",
            clusters(f"{sel(m.FAILOVER_BLOCKED)} == 1"),
            t.failover_not_ready_for, "warning",
            "Group {{ $labels.group }} cannot fail over to the target of {{ $labels.flow }} now "
            "({{ $labels.reason }})",
            "A consumer of group {{ $labels.group }} failing over to the target of {{ $labels.flow }} now would "
            f"{_failover_consequence()}. The monitor's /api/status says which partitions and how many records.",
            measure=sel(m.FAILOVER_BLOCKED),
        ),
        AlertRule(
            "SparkmirrorRetentionHeadroomLow",
            f"{sel(m.FLOW_RETENTION_HEADROOM)} and on (flow) {sel(m.FLOW_RETENTION_LOW)} > 0",
            t.retention_headroom_low_for, "critical",
            "Source retention may soon delete records flow {{ $labels.flow }} has not copied",
            "In {{ $value | humanizeDuration }} the source's retention.ms may delete records of "
            "{{ $labels.flow }} that are not on the target yet (the lowest headroom over its partitions, "
            "below the monitor's --retention-headroom-warn or half the topic's retention): once deleted they "
            "are missing from the disaster-recovery copy for good.",
            measure=sel(m.FLOW_RETENTION_HEADROOM),
        ),
    )


RULES: tuple[AlertRule, ...] = build()
BY_NAME: dict[str, AlertRule] = {r.name: r for r in RULES}


def rule_file(config: Config = DEFAULT, for_overrides: dict[str, str] | None = None) -> dict:
    """The Prometheus rule file as a dict. ``for_overrides`` (alert name -> duration) is for tests
    that cannot wait minutes; the committed file never uses it.

    The objectives' recording rules come first in the one group (a group evaluates its rules in
    order, so each rule and alert reads the values of the same evaluation: with a second group
    on its own clock, the budget in a notification depended on which group ran first)."""
    overrides = for_overrides or {}
    unknown = set(overrides) - set(BY_NAME)
    if unknown:
        raise ValueError(f"no such alert: {', '.join(sorted(unknown))}")
    return {"groups": [{
        "name": GROUP,
        "rules": [*slo.recordings(config), *(r.to_rule(config, overrides.get(r.name)) for r in build(config))],
    }]}


def expressions(config: Config = DEFAULT) -> dict[str, str]:
    """Alert name -> PromQL expression."""
    return {r.name: r.expr for r in build(config)}
