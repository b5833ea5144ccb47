"""Every PromQL expression the dashboards show, built from ``sparkmirror.metrics``.

Metric names are never typed here: each selector starts from a ``MetricSpec``
(``sel(m.FLOW_LAG_SECONDS, FLOW)``), so renaming a metric in the monitor
renames it in every panel, and a test can evaluate each expression against a
real Prometheus.

Expressions use Grafana's template variables: ``$flow``, ``$topic`` and
``$group`` (multi-value, "All" is ``.*``, so they are always matched with
``=~``), ``$k`` (top-k size), ``$__rate_interval`` and ``$__range``.
``instantiate()`` replaces them with concrete values for evaluation outside
Grafana.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from alerts import slo
from alerts.promql import heartbeat_latency_quantile, rate, sel
from sparkmirror import metrics as m

FLOW = 'flow=~"$flow"'
TOPIC = 'topic=~"$topic"'
GROUP = 'group=~"$group"'

#: Quantiles of the heartbeat latency histogram shown on the overview.
LATENCY_QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class Query:
    """One panel target: a PromQL expression and its legend (Grafana ``{{label}}`` syntax)."""

    expr: str
    legend: str = ""
    instant: bool = False  # tables of "now" (top-k) query one instant, not a range


def status_code(*matchers: str, by: str = "flow") -> str:
    """The flow status as its numeric code (0 OK ... 5 ERR, ``sparkmirror.metrics.STATUS_CODES``).

    ``sparkmirror_flow_status`` is one-hot over the ``status`` label; multiplying
    each status series by its code and taking the maximum gives the code of the
    status that is 1 (all others contribute 0), so a stat panel can colour it.
    """
    parts = []
    for status, code in m.STATUS_CODES.items():
        one_status = 'status="%s"' % status
        parts.append(f"{sel(m.FLOW_STATUS, *matchers, one_status)} * {code}")
    return f"max by ({by}) ({' or '.join(parts)})"


# --- overview: summary line ----------------------------------------------------
def flows_by_status() -> Query:
    return Query(f"sum by (status) ({sel(m.FLOW_STATUS, FLOW)})", "{{status}}")


def clusters_up() -> Query:
    return Query(sel(m.CLUSTER_UP), "{{cluster}}")


def monitor_evaluation_age() -> Query:
    return Query(f"time() - max({sel(m.LAST_EVALUATION)})", "seconds since the last evaluation")


def data_lost_in_range() -> Query:
    return Query(f"sum(increase({sel(m.DATA_LOST_RECORDS, FLOW)}[$__range]))", "records lost")


def firing_alerts(names: list[str]) -> Query:
    """Prometheus' own ``ALERTS`` series of the given alerts, firing ones only."""
    return Query(f'ALERTS{{alertstate="firing",alertname=~"{"|".join(names)}"}}', instant=True)


# --- overview: one row per flow -------------------------------------------------
def flow_status_code() -> Query:
    return Query(status_code(FLOW), "{{flow}}")


def replicator_up() -> Query:
    return Query(sel(m.REPLICATOR_UP, FLOW), "{{flow}}")


def heartbeat_age() -> Query:
    return Query(sel(m.HEARTBEAT_AGE, FLOW), "{{flow}}")


def flow_lag_records() -> Query:
    return Query(sel(m.FLOW_LAG_RECORDS, FLOW), "{{flow}}")


def flow_lag_seconds() -> Query:
    return Query(sel(m.FLOW_LAG_SECONDS, FLOW), "{{flow}}")


def flow_lag_unknown_partitions() -> Query:
    return Query(sel(m.FLOW_LAG_UNKNOWN_PARTITIONS, FLOW), "{{flow}}")


def flow_catchup_eta() -> Query:
    # +Inf (not gaining on the source) is mapped to a word on the stat panel
    return Query(sel(m.FLOW_CATCHUP_ETA, FLOW), "{{flow}}")


def flow_catchup_rate() -> Query:
    return Query(sel(m.FLOW_CATCHUP_RATE, FLOW), "{{flow}} net")


def flow_data_lost() -> Query:
    return Query(f"sum by (flow) (increase({sel(m.DATA_LOST_RECORDS, FLOW)}[$__range]))", "{{flow}}")


def heartbeat_latency_percentiles() -> list[Query]:
    return [Query(heartbeat_latency_quantile(q, FLOW), f"p{round(q * 100)}") for q in LATENCY_QUANTILES]


def throughput() -> list[Query]:
    return [
        Query(rate(m.FLOW_REPLICATED_RECORDS, FLOW), "replicated"),
        Query(rate(m.FLOW_SOURCE_RECORDS, FLOW), "produced on the source"),
    ]


# --- drill-down: partitions and topics --------------------------------------------
def top_partitions_lag_records() -> Query:
    return Query(f"topk($k, {sel(m.PARTITION_LAG_RECORDS, FLOW, TOPIC)})", instant=True)


def top_partitions_lag_seconds() -> Query:
    return Query(f"topk($k, {sel(m.PARTITION_LAG_SECONDS, FLOW, TOPIC)})", instant=True)


def top_partitions_catchup_eta() -> Query:
    return Query(f"topk($k, {sel(m.PARTITION_CATCHUP_ETA, FLOW, TOPIC)})", instant=True)


def bottom_partitions_catchup_rate() -> Query:
    return Query(f"bottomk($k, {sel(m.PARTITION_CATCHUP_RATE, FLOW, TOPIC)})", instant=True)


def partitions_not_ok() -> Query:
    return Query(f"{sel(m.PARTITION_STATUS_CODE, FLOW, TOPIC)} > 0", instant=True)


def partitions_by_status() -> Query:
    return Query(f"sum by (status) ({sel(m.FLOW_PARTITIONS, FLOW)})", "{{status}}")


def topic_lag_records() -> Query:
    return Query(sel(m.TOPIC_LAG_RECORDS, FLOW, TOPIC), "{{flow}} {{topic}}")


def topic_lag_seconds() -> Query:
    return Query(sel(m.TOPIC_LAG_SECONDS, FLOW, TOPIC), "{{flow}} {{topic}}")


def topic_data_lost() -> Query:
    return Query(f"increase({sel(m.DATA_LOST_RECORDS, FLOW, TOPIC)}[$__rate_interval])", "{{flow}} {{topic}}")


# --- drill-down: consumer-group checkpoints ------------------------------------------
def group_checkpoint_age() -> Query:
    return Query(sel(m.GROUP_CHECKPOINT_AGE, FLOW, GROUP), "{{flow}} {{group}}")


def group_checkpoint_lag() -> Query:
    return Query(sel(m.GROUP_CHECKPOINT_LAG, FLOW, GROUP), "{{flow}} {{group}}")


def group_checkpoint_missing() -> Query:
    return Query(sel(m.GROUP_CHECKPOINT_MISSING, FLOW, GROUP), instant=True)


def top_partitions_checkpoint_lag() -> Query:
    return Query(f"topk($k, {sel(m.CHECKPOINT_LAG, FLOW, GROUP, TOPIC)})", instant=True)


def top_partitions_checkpoint_age() -> Query:
    return Query(f"topk($k, {sel(m.CHECKPOINT_AGE, FLOW, GROUP, TOPIC)})", instant=True)


def failover_ready() -> Query:
    return Query(sel(m.FAILOVER_READY, FLOW, GROUP), instant=True)


def failback_ready() -> Query:
    """Per group consuming the mirror topics on the target: could it fail back now (``sparkmirror failback``)."""
    return Query(sel(m.FAILBACK_READY, FLOW, GROUP), instant=True)


def failover_blocked() -> Query:
    """Every group and reason, 1 where it applies (a table sorted by value lists those first)."""
    return Query(sel(m.FAILOVER_BLOCKED, FLOW, GROUP), instant=True)


def failover_reread_seconds() -> Query:
    return Query(sel(m.FAILOVER_REREAD_SECONDS, FLOW, GROUP), "{{flow}} {{group}}")


def failover_reread_records() -> list[Query]:
    return [Query(sel(m.FAILOVER_REREAD_RECORDS, FLOW, GROUP), "{{flow}} {{group}} re-read"),
            Query(sel(m.FAILOVER_SKIPPED_RECORDS, FLOW, GROUP), "{{flow}} {{group}} skipped")]


def failover_groups_not_ready() -> Query:
    return Query(sel(m.FAILOVER_GROUPS_NOT_READY, FLOW), "{{flow}}")


# --- drill-down: audit of the copy --------------------------------------------------
def audit_findings() -> list[Query]:
    """Records found missing, altered and written twice, per second (0 on a whole mirror)."""
    return [Query(f"sum by (flow, topic) ({rate(spec, FLOW, TOPIC)})", "{{flow}} {{topic}} " + what)
            for spec, what in ((m.AUDIT_MISSING, "missing"), (m.AUDIT_MISMATCHED, "altered"),
                               (m.AUDIT_DUPLICATED, "duplicated"))]


def audit_verified_rate() -> Query:
    return Query(f"sum by (flow) ({rate(m.AUDIT_VERIFIED, FLOW, TOPIC)})", "{{flow}}")


def audit_coverage() -> Query:
    return Query(sel(m.AUDIT_COVERAGE, FLOW), "{{flow}} {{kind}}")


# --- drill-down: retention headroom ----------------------------------------------------
def retention_headroom() -> list[Query]:
    return [Query(sel(m.TOPIC_RETENTION_HEADROOM, FLOW, TOPIC), "{{flow}} {{topic}}"),
            Query(sel(m.FLOW_RETENTION_HEADROOM, FLOW), "{{flow}} (least)")]


def bottom_partitions_retention_headroom() -> Query:
    return Query(f"bottomk($k, {sel(m.PARTITION_RETENTION_HEADROOM, FLOW, TOPIC)})", instant=True)


def retention_low_partitions() -> Query:
    return Query(sel(m.FLOW_RETENTION_LOW, FLOW), "{{flow}}")


# --- drill-down: replicator -----------------------------------------------------------
def replicator_up_over_time() -> Query:
    return Query(sel(m.REPLICATOR_UP, FLOW), "{{flow}}")


def offset_sync_age() -> Query:
    return Query(sel(m.OFFSET_SYNC_AGE, FLOW), "{{flow}}")


#: Batch rates over a window that holds several batches: a real-time batch lasts its checkpoint
#: interval (60 s by default in local mode), a micro-batch up to about 30 s.
BATCH_WINDOW = "5m"


def replicator_batch_duration() -> list[Query]:
    def quantile(q: float) -> str:
        buckets = (f"sum by (flow, le) "
                   f"({rate(m.REPLICATOR_BATCH_DURATION, FLOW, window=BATCH_WINDOW, suffix='_bucket')})")
        return f"histogram_quantile({q}, {buckets})"

    return [Query(quantile(0.5), "{{flow}} p50"), Query(quantile(0.99), "{{flow}} p99"),
            Query(f"time() - {sel(m.REPLICATOR_LAST_BATCH, FLOW)}", "{{flow}} since last batch")]


def replicator_throughput() -> list[Query]:
    return [
        Query(rate(m.REPLICATOR_RECORDS, FLOW), "{{flow}} records/s"),
        Query(rate(m.REPLICATOR_RECORDS_LOST, FLOW), "{{flow}} records lost/s (deleted on the source first)"),
    ]


def replicator_bytes() -> Query:
    return Query(rate(m.REPLICATOR_BYTES, FLOW), "{{flow}}")


def replicator_batch_latency() -> Query:
    return Query(sel(m.REPLICATOR_LATENCY_MAX, FLOW), "{{flow}} max latency")


def replicator_backlog() -> Query:
    return Query(sel(m.REPLICATOR_BACKLOG, FLOW), "{{flow}}")


def replicator_catchup_eta() -> Query:
    # +Inf (not gaining on the source) would flatten the axis: shown as a gap instead
    return Query(f"{sel(m.REPLICATOR_CATCHUP_ETA, FLOW)} < Inf", "{{flow}}")


def replicator_partitions() -> Query:
    return Query(sel(m.REPLICATOR_PARTITIONS, FLOW), "{{flow}}")


def replicator_writes() -> list[Query]:
    return [Query(rate(m.REPLICATOR_BATCHES, FLOW, window=BATCH_WINDOW), "{{flow}} batches/s"),
            Query(rate(m.REPLICATOR_OFFSET_SYNCS, FLOW), "{{flow}} offset-syncs written/s"),
            Query(rate(m.REPLICATOR_HEARTBEATS_SENT, FLOW), "{{flow}} heartbeats written/s")]


def replicator_activity() -> list[Query]:
    return [
        Query(rate(m.HEARTBEATS, FLOW), "{{flow}} heartbeats/s"),
        Query(rate(m.OFFSET_SYNCS, FLOW), "{{flow}} offset-syncs/s"),
    ]


# --- drill-down: monitor and clusters ---------------------------------------------------
def cluster_errors() -> Query:
    return Query(rate(m.CLUSTER_ERRORS), "{{cluster}}")


def decode_errors() -> Query:
    return Query(rate(m.DECODE_ERRORS), "{{cluster}} {{topic}} ({{record_type}})")


def collector_durations() -> list[Query]:
    return [
        Query(sel(m.COLLECTOR_DURATION, FLOW), "{{flow}} {{collector}}"),
        Query(sel(m.EVALUATION_DURATION), "evaluation"),
    ]


def lag_probes() -> Query:
    return Query(rate(m.LAG_PROBES, FLOW), "{{flow}}")


# --- recovery-point objectives (the recording rules of alerts/slo.py) ---------------------
def _flow(series: str) -> str:
    return f"{series}{{{FLOW}}}"


def rpo_objective() -> Query:
    return Query(_flow(slo.OBJECTIVE), "{{flow}}")


def rpo_budget_left() -> Query:
    return Query(_flow(slo.BUDGET_REMAINING), "{{flow}}")


def rpo_good_now() -> Query:
    return Query(_flow(slo.GOOD), "{{flow}}")


def rpo_burn_rates() -> list[Query]:
    return [Query(_flow(slo.burn_rate(w)), "{{flow}} " + w) for w in slo.WINDOWS]


def rpo_lag_percentiles() -> list[Query]:
    """p50 and p99 of the flow's lag over the last 5 minutes and hour, from the histogram every
    evaluation feeds (sums over monitors, so two monitors of one flow give one answer)."""
    return [Query(f"histogram_quantile({q}, sum by (flow, le) "
                  f"({rate(m.FLOW_LAG_OBSERVED, FLOW, window=w, suffix='_bucket')}))",
                  f"{{{{flow}}}} p{round(q * 100)} over {w}")
            for w in ("5m", "1h") for q in (0.5, 0.99)]


def rpo_bad_periods() -> list[Query]:
    """When the budget burned: the share of bad samples over the last 5 minutes and hour, at each time."""
    return [Query(_flow(slo.errors(w)), "{{flow}} bad share of the last " + w) for w in ("5m", "1h")]


# --- template variables (Grafana's label_values(), not PromQL) ---------------------------
def variable_queries() -> dict[str, str]:
    """Query of each template variable: ``label_values(<selector>, <label>)``."""
    return {
        "flow": f"label_values({sel(m.FLOW_STATUS)}, flow)",
        "topic": f"label_values({sel(m.TOPIC_LAG_RECORDS, FLOW)}, topic)",
        "group": f"label_values({sel(m.GROUP_CHECKPOINT_LAG, FLOW)}, group)",
    }


_VARIABLE = re.compile(r"\$(__rate_interval|__range|flow|topic|group|k)\b")

#: Values that make a dashboard expression plain PromQL: every flow, topic and group.
EVALUATION_DEFAULTS = {
    "flow": ".*", "topic": ".*", "group": ".*", "k": "10", "__rate_interval": "1m", "__range": "1h",
}


def instantiate(expr: str, values: dict[str, str] | None = None) -> str:
    """``expr`` with its template variables replaced (``EVALUATION_DEFAULTS`` unless given)."""
    table = {**EVALUATION_DEFAULTS, **(values or {})}
    return _VARIABLE.sub(lambda match: table[match.group(1)], expr)
