"""The numbers behind the alert rules, with why; the dashboards draw the same lines.

Defaults assume MM2's defaults or the demo's settings: heartbeats every 1-5 s
(``emit.heartbeats.interval.seconds``), checkpoints every 60 s
(``emit.checkpoints.interval.seconds``), the monitor refreshing every 5 s and
Prometheus scraping every 15-30 s. A deployment changes them in its mixin
config (``thresholds:`` in the YAML given to ``python -m alerts.generate
--config``, see alerts/config.py); the committed files use these defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Thresholds:
    #: Heartbeats: the rule compares each flow's heartbeat age with the timeout the
    #: monitor exports for it (``sparkmirror_heartbeat_timeout_seconds``, 2 x the flow's
    #: ``emit.heartbeats.interval.seconds`` unless ``--heartbeat-timeout``), so there is
    #: no fixed age here. A flow where the monitor has not seen any heartbeat yet pages
    #: once it has watched it this long (the replicator never started, or the heartbeats
    #: topic does not exist on the target): long enough for a replicator started together
    #: with the monitor to emit and copy its first heartbeat.
    heartbeat_grace_seconds: int = 120
    #: The page fires once no heartbeat has arrived for the timeout plus this margin, with no
    #: ``for``: the age only grows while heartbeats are missing, so one scrape above it is the
    #: silence itself, where a ``for`` would add up to an evaluation interval more. With the
    #: shipped intervals a kill -9 pages within a minute (docs/alerts.md, Time to page) and a
    #: silence up to timeout + margin (20 s at 1-s heartbeats) never pages.
    heartbeats_stopped_margin_seconds: int = 10
    heartbeats_stopped_for: str = "0s"

    #: p99 of heartbeat latency (source timestamp -> append on the target) over the
    #: window: the replicator is alive but slow.
    latency_quantile: float = 0.99
    latency_window: str = "5m"
    latency_seconds: int = 30
    latency_for: str = "10m"

    #: Recovery-point objectives (the mixin config's ``rpo:``, alerts/slo.py): the SRE workbook's
    #: burn rates. Critical when the last hour and the last 5 minutes both spend the budget
    #: 14.4 times as fast as the period allows (2 % of a 30-day budget in an hour); warning at 6x
    #: over 6 hours and 30 minutes, or 1x over 3 days and 6 hours (the budget would run out).
    #: The short window already filters a blip, so the ``for`` only rides out one evaluation.
    rpo_fast_burn: float = 14.4
    rpo_fast_burn_for: str = "1m"
    rpo_slow_burn: float = 6.0
    rpo_steady_burn: float = 1.0
    rpo_slow_burn_for: str = "15m"

    #: A flow paused on purpose (``sparkmirror ctl pause``) raises an info alert that inhibits its
    #: flow alerts (alertmanager.yml); paused longer than this, a warning says it may be forgotten.
    flow_paused_warn_seconds: int = 4 * 3600
    #: A resumed flow's query needs a moment to start and copy its first heartbeat: its heartbeats page
    #: waits this long after the pause ended; the fast burn waits its 5-minute short window plus 5 minutes
    #: to catch up on what the pause left behind. So resuming a flow pages nobody, while one that does not
    #: recover does.
    flow_resumed_grace: str = "1m"
    flow_resumed_burn_grace: str = "10m"

    #: The fixed lag alerts below apply only to flows without an objective.
    #: Age of the oldest source record not yet on the target: the recovery point if the
    #: source were lost now. Five minutes is the usual DR objective to start with.
    lag_seconds: int = 300
    lag_for: str = "10m"

    #: Lag growing: records lag trending up over the window (the source produces faster
    #: than the replicator copies) while the target is already this far behind.
    lag_growing_window: str = "10m"
    lag_growing_min_seconds: int = 60
    lag_growing_for: str = "15m"

    #: A group whose checkpoint is behind its committed offset and older than this:
    #: failing over would re-read more and more. 10 x the default checkpoint interval.
    checkpoint_age_seconds: int = 600
    checkpoint_for: str = "5m"

    #: Partitions where a group commits but has no checkpoint on the target (the monitor
    #: already waits 2 checkpoint intervals before counting one as missing).
    checkpoints_missing_for: str = "10m"

    #: Window of the loss counters (data lost, records the replicator lost, undecodable
    #: internal records): any increase fires at once, and so does a series that appears
    #: already above 0 (a monitor started after the loss).
    data_lost_window: str = "15m"

    #: A flow with records to copy whose newest offset-sync is older than this: the
    #: replicator writes one at the end of every batch that copied records.
    offset_sync_age_seconds: int = 600
    offset_syncs_stale_for: str = "5m"

    #: How long a flow may stay in STALL (position unchanged with records to copy over
    #: the monitor's window) or ERR before it alerts.
    flow_stalled_for: str = "5m"
    flow_error_for: str = "2m"

    #: A group that cannot fail over (sparkmirror_failover_blocked: the monitor decides
    #: with its --failover-max-reread-* limits) for this long. MM2 checkpoints every
    #: 60 s by default and the monitor reads committed offsets every 30 s, so a shorter
    #: blip is the normal rhythm of a busy group, not a problem.
    failover_not_ready_for: str = "10m"

    #: Retention may delete records not yet on the target soon (the monitor counts the
    #: partitions below --retention-headroom-warn, or half the topic's retention.ms).
    retention_headroom_low_for: str = "2m"

    replicator_down_for: str = "2m"
    #: When a cluster goes away, its alert must be firing before the alerts of the flows through it,
    #: which it inhibits (alerts/alertmanager.yml); the heartbeats page of such a flow waits while
    #: the monitor's requests to one of its clusters fail (up to heartbeat_cluster_wait_seconds of
    #: silence). The monitor itself only reports a cluster down after consecutive failed refreshes.
    cluster_unreachable_for: str = "30s"
    heartbeat_cluster_wait_seconds: int = 120

    #: The monitor is down when Prometheus cannot scrape it, or when it answers but its
    #: last evaluation is older than this (stuck event loop, every cluster timing out).
    monitor_evaluation_age_seconds: int = 120
    monitor_down_for: str = "2m"

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


DEFAULT = Thresholds()
