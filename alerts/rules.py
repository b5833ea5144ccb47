"""sparkmirror's Prometheus alert rules, built from the metric specs in ``monitor.metrics``.

Every rule carries ``severity`` (``page`` wakes someone up, ``critical`` needs a
person today, ``warning`` needs a look), a ``summary``, a ``description`` and a
``runbook_url`` pointing at the rule's own section of docs/runbooks.md (the
section heading is the alert name). Thresholds and durations come from
``alerts.thresholds``. ``python -m alerts.generate`` writes the rule file.
"""

from __future__ import annotations

from dataclasses import dataclass

from alerts import thresholds as t
from dashboards.queries import heartbeat_latency_quantile, sel
from monitor import metrics as m

GROUP = "sparkmirror"
SEVERITIES = ("page", "critical", "warning")

#: Where runbook links point unless the generator is given ``--runbook-base``
#: (a deployment sets its repository's web URL of docs/runbooks.md there).
RUNBOOK_BASE = "docs/runbooks.md"


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

    @property
    def runbook_anchor(self) -> str:
        """GitHub's anchor of the runbook section titled with the alert name."""
        return self.name.lower()

    def to_rule(self, runbook_base: str = RUNBOOK_BASE, for_: str | None = None) -> dict:
        rule: dict = {"alert": self.name, "expr": self.expr}
        duration = for_ or self.for_
        if duration:
            rule["for"] = duration
        rule["labels"] = {"severity": self.severity}
        rule["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook_url": f"{runbook_base}#{self.runbook_anchor}",
        }
        return rule


def _monitor_down() -> str:
    up = f'up{{job="{t.MONITOR_JOB}"}}'
    stuck = f"time() - {sel(m.LAST_EVALUATION)} > {t.MONITOR_EVALUATION_AGE_SECONDS}"
    return f"{up} == 0 or absent({up}) or ({stuck})"


RULES: tuple[AlertRule, ...] = (
    AlertRule(
        "SparkmirrorHeartbeatsStopped",
        f"{sel(m.HEARTBEAT_AGE)} > {t.HEARTBEAT_AGE_SECONDS}",
        t.HEARTBEATS_STOPPED_FOR, "page",
        "Heartbeats of flow {{ $labels.flow }} stopped reaching the target",
        "The newest heartbeat replicated for {{ $labels.flow }} is {{ $value | humanizeDuration }} old "
        f"(limit {t.HEARTBEAT_AGE_SECONDS}s): nothing is crossing from the source to the target "
        "cluster, so the disaster-recovery copy falls further behind every second.",
    ),
    AlertRule(
        "SparkmirrorReplicationLatencyHigh",
        f"{heartbeat_latency_quantile(t.LATENCY_QUANTILE, window=t.LATENCY_WINDOW)} > {t.LATENCY_SECONDS}",
        t.LATENCY_FOR, "warning",
        "Replication latency of flow {{ $labels.flow }} is high",
        f"p{round(t.LATENCY_QUANTILE * 100)} heartbeat latency (source timestamp to append on the "
        f"target) of {{{{ $labels.flow }}}} over {t.LATENCY_WINDOW} is {{{{ $value | humanizeDuration }}}} "
        f"(limit {t.LATENCY_SECONDS}s): records are replicated, but late.",
    ),
    AlertRule(
        "SparkmirrorLagHigh",
        f"{sel(m.FLOW_LAG_SECONDS)} > {t.LAG_SECONDS}",
        t.LAG_FOR, "warning",
        "Flow {{ $labels.flow }} is far behind the source",
        "The oldest source record of {{ $labels.flow }} not yet on the target is "
        f"{{{{ $value | humanizeDuration }}}} old (limit {t.LAG_SECONDS}s): losing the source now "
        "would lose that much data.",
    ),
    AlertRule(
        "SparkmirrorLagGrowing",
        f"deriv({sel(m.FLOW_LAG_RECORDS)}[{t.LAG_GROWING_WINDOW}]) > 0 "
        f"and {sel(m.FLOW_LAG_SECONDS)} > {t.LAG_GROWING_MIN_SECONDS}",
        t.LAG_GROWING_FOR, "warning",
        "Lag of flow {{ $labels.flow }} keeps growing",
        "Records lag of {{ $labels.flow }} grows by {{ $value | humanize }} records/s "
        f"(trend over {t.LAG_GROWING_WINDOW}) and the target is more than "
        f"{t.LAG_GROWING_MIN_SECONDS}s behind: the source produces faster than the replicator copies.",
    ),
    AlertRule(
        "SparkmirrorCheckpointsStale",
        f"{sel(m.GROUP_CHECKPOINT_AGE)} > {t.CHECKPOINT_AGE_SECONDS}",
        t.CHECKPOINT_FOR, "warning",
        "Checkpoints of group {{ $labels.group }} on flow {{ $labels.flow }} are stale",
        "Group {{ $labels.group }} commits on the source, but its newest checkpoint on the target for "
        "{{ $labels.flow }} is {{ $value | humanizeDuration }} old "
        f"(limit {t.CHECKPOINT_AGE_SECONDS}s): a failover now would re-read everything since.",
    ),
    AlertRule(
        "SparkmirrorDataLost",
        f"increase({sel(m.DATA_LOST_RECORDS)}[{t.DATA_LOST_WINDOW}]) > 0",
        None, "critical",
        "Records of {{ $labels.topic }} were deleted before flow {{ $labels.flow }} copied them",
        "About {{ $value | humanize }} records of {{ $labels.topic }} left the source log (retention "
        f"or deleteRecords) in the last {t.DATA_LOST_WINDOW} before {{{{ $labels.flow }}}} replicated "
        "them: the target has a permanent gap.",
    ),
    AlertRule(
        "SparkmirrorReplicatorDown",
        f"{sel(m.REPLICATOR_UP)} == 0",
        t.REPLICATOR_DOWN_FOR, "critical",
        "Replicator of flow {{ $labels.flow }} shows no sign of life",
        "The monitor sees neither fresh heartbeats nor offset-sync progress for {{ $labels.flow }}: "
        "the replicator is stopped, crashed or cannot reach a cluster.",
    ),
    AlertRule(
        "SparkmirrorMonitorDown",
        _monitor_down(),
        t.MONITOR_DOWN_FOR, "critical",
        "The sparkmirror monitor is down or not evaluating",
        f"Prometheus cannot scrape job {t.MONITOR_JOB}{{{{ with $labels.instance }}}} at {{{{ . }}}}{{{{ end }}}}, "
        "or the monitor "
        f"answers but has not evaluated for more than {t.MONITOR_EVALUATION_AGE_SECONDS}s: replication "
        "is not watched and no other sparkmirror alert can fire.",
    ),
    AlertRule(
        "SparkmirrorClusterUnreachable",
        f"{sel(m.CLUSTER_UP)} == 0",
        t.CLUSTER_UNREACHABLE_FOR, "critical",
        "Kafka cluster {{ $labels.cluster }} is unreachable from the monitor",
        "The monitor's requests to cluster {{ $labels.cluster }} fail or time out: its flows' lag and "
        "heartbeats cannot be measured, and the replicator likely cannot reach it either.",
    ),
)

BY_NAME: dict[str, AlertRule] = {r.name: r for r in RULES}


def rule_file(runbook_base: str = RUNBOOK_BASE, for_overrides: dict[str, str] | None = None) -> dict:
    """The Prometheus rule file as a dict. ``for_overrides`` (alert name -> duration) is for tests
    that cannot wait minutes; the committed file never uses it."""
    overrides = for_overrides or {}
    unknown = set(overrides) - set(BY_NAME)
    if unknown:
        raise ValueError(f"no such alert: {', '.join(sorted(unknown))}")
    return {"groups": [{
        "name": GROUP,
        "rules": [r.to_rule(runbook_base, overrides.get(r.name)) for r in RULES],
    }]}


def expressions() -> dict[str, str]:
    """Alert name -> PromQL expression."""
    return {r.name: r.expr for r in RULES}
