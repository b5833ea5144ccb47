"""sparkmirror's Prometheus alert rules, built from the metric specs in ``monitor.metrics``.

Every rule carries ``severity`` (``page`` wakes someone up, ``critical`` needs a
person today, ``warning`` needs a look), a ``summary``, a ``description`` and a
``runbook_url`` pointing at the rule's own section of docs/runbooks.md (the
section heading is the alert name). ``build(config)`` makes the rules from a
mixin config (alerts/config.py: selector, thresholds, ``for`` durations, runbook
base URL); ``python -m alerts.generate`` writes the rule file.
"""

from __future__ import annotations

from dataclasses import dataclass

from alerts.config import DEFAULT, Config
from dashboards.queries import heartbeat_latency_quantile
from dashboards.queries import sel as _sel
from monitor import metrics as m

GROUP = "sparkmirror"
SEVERITIES = ("page", "critical", "warning")


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_: str | None
    severity: str
    summary: str
    description: str

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
    t = config.thresholds

    def sel(spec: m.MetricSpec, *matchers: str) -> str:
        return _sel(spec, *config.matchers, *matchers)

    up = f'up{{job="{config.monitor_job}"}}'
    stuck = f"time() - {sel(m.LAST_EVALUATION)} > {t.monitor_evaluation_age_seconds}"
    return (
        AlertRule(
            "SparkmirrorHeartbeatsStopped",
            f"{sel(m.HEARTBEAT_AGE)} > 30",
            t.heartbeats_stopped_for, "page",
            "Heartbeats of flow {{ $labels.flow }} stopped reaching the target",
            "The newest heartbeat replicated for {{ $labels.flow }} is {{ $value | humanizeDuration }} old "
            "(limit 30s): nothing is crossing from the source to the target "
            "cluster, so the disaster-recovery copy falls further behind every second.",
        ),
        AlertRule(
            "SparkmirrorReplicationLatencyHigh",
            f"{heartbeat_latency_quantile(t.latency_quantile, *config.matchers, window=t.latency_window)} "
            f"> {t.latency_seconds}",
            t.latency_for, "warning",
            "Replication latency of flow {{ $labels.flow }} is high",
            f"p{round(t.latency_quantile * 100)} heartbeat latency (source timestamp to append on the "
            f"target) of {{{{ $labels.flow }}}} over {t.latency_window} is {{{{ $value | humanizeDuration }}}} "
            f"(limit {t.latency_seconds}s): records are replicated, but late.",
        ),
        AlertRule(
            "SparkmirrorLagHigh",
            f"{sel(m.FLOW_LAG_SECONDS)} > {t.lag_seconds}",
            t.lag_for, "warning",
            "Flow {{ $labels.flow }} is far behind the source",
            "The oldest source record of {{ $labels.flow }} not yet on the target is "
            f"{{{{ $value | humanizeDuration }}}} old (limit {t.lag_seconds}s): losing the source now "
            "would lose that much data.",
        ),
        AlertRule(
            "SparkmirrorLagGrowing",
            f"deriv({sel(m.FLOW_LAG_RECORDS)}[{t.lag_growing_window}]) > 0 "
            f"and {sel(m.FLOW_LAG_SECONDS)} > {t.lag_growing_min_seconds}",
            t.lag_growing_for, "warning",
            "Lag of flow {{ $labels.flow }} keeps growing",
            "Records lag of {{ $labels.flow }} grows by {{ $value | humanize }} records/s "
            f"(trend over {t.lag_growing_window}) and the target is more than "
            f"{t.lag_growing_min_seconds}s behind: the source produces faster than the replicator copies.",
        ),
        AlertRule(
            "SparkmirrorCheckpointsStale",
            f"{sel(m.GROUP_CHECKPOINT_AGE)} > {t.checkpoint_age_seconds}",
            t.checkpoint_for, "warning",
            "Checkpoints of group {{ $labels.group }} on flow {{ $labels.flow }} are stale",
            "Group {{ $labels.group }} commits on the source, but its newest checkpoint on the target for "
            "{{ $labels.flow }} is {{ $value | humanizeDuration }} old "
            f"(limit {t.checkpoint_age_seconds}s): a failover now would re-read everything since.",
        ),
        AlertRule(
            "SparkmirrorDataLost",
            f"increase({sel(m.DATA_LOST_RECORDS)}[{t.data_lost_window}]) > 0",
            None, "critical",
            "Records of {{ $labels.topic }} were deleted before flow {{ $labels.flow }} copied them",
            "About {{ $value | humanize }} records of {{ $labels.topic }} left the source log (retention "
            f"or deleteRecords) in the last {t.data_lost_window} before {{{{ $labels.flow }}}} replicated "
            "them: the target has a permanent gap.",
        ),
        AlertRule(
            "SparkmirrorReplicatorDown",
            f"{sel(m.REPLICATOR_UP)} == 0",
            t.replicator_down_for, "critical",
            "Replicator of flow {{ $labels.flow }} shows no sign of life",
            "The monitor sees neither fresh heartbeats nor offset-sync progress for {{ $labels.flow }}: "
            "the replicator is stopped, crashed or cannot reach a cluster.",
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
        ),
        AlertRule(
            "SparkmirrorClusterUnreachable",
            f"{sel(m.CLUSTER_UP)} == 0",
            t.cluster_unreachable_for, "critical",
            "Kafka cluster {{ $labels.cluster }} is unreachable from the monitor",
            "The monitor's requests to cluster {{ $labels.cluster }} fail or time out: its flows' lag and "
            "heartbeats cannot be measured, and the replicator likely cannot reach it either.",
        ),
    )


RULES: tuple[AlertRule, ...] = build()
BY_NAME: dict[str, AlertRule] = {r.name: r for r in RULES}


def rule_file(config: Config = DEFAULT, for_overrides: dict[str, str] | None = None) -> dict:
    """The Prometheus rule file as a dict. ``for_overrides`` (alert name -> duration) is for tests
    that cannot wait minutes; the committed file never uses it."""
    overrides = for_overrides or {}
    unknown = set(overrides) - set(BY_NAME)
    if unknown:
        raise ValueError(f"no such alert: {', '.join(sorted(unknown))}")
    return {"groups": [{
        "name": GROUP,
        "rules": [r.to_rule(config, overrides.get(r.name)) for r in build(config)],
    }]}


def expressions(config: Config = DEFAULT) -> dict[str, str]:
    """Alert name -> PromQL expression."""
    return {r.name: r.expr for r in build(config)}
