"""The numbers behind the alert rules, with why; the dashboards draw the same lines.

Defaults assume MM2's defaults or the demo's settings: heartbeats every 1-5 s
(``emit.heartbeats.interval.seconds``), checkpoints every 60 s
(``emit.checkpoints.interval.seconds``), the monitor refreshing every 5 s and
Prometheus scraping every 15-30 s. Change them here and regenerate
(``python -m alerts.generate && python -m dashboards.generate``).
"""

from __future__ import annotations

#: Newest replicated heartbeat older than this: nothing has crossed from source to
#: target for that long. Heartbeats are emitted every few seconds, so 30 s is many
#: missed heartbeats, yet short enough for a disaster-recovery copy.
HEARTBEAT_AGE_SECONDS = 30
HEARTBEATS_STOPPED_FOR = "1m"

#: p99 of heartbeat latency (source timestamp -> append on the target) over the
#: window: the replicator is alive but slow.
LATENCY_QUANTILE = 0.99
LATENCY_WINDOW = "5m"
LATENCY_SECONDS = 30
LATENCY_FOR = "10m"

#: Age of the oldest source record not yet on the target: the recovery point if the
#: source were lost now. Five minutes is the usual DR objective to start with.
LAG_SECONDS = 300
LAG_FOR = "10m"

#: Lag growing: records lag trending up over the window (the source produces faster
#: than the replicator copies) while the target is already this far behind.
LAG_GROWING_WINDOW = "10m"
LAG_GROWING_MIN_SECONDS = 60
LAG_GROWING_FOR = "15m"

#: A group whose checkpoint is behind its committed offset and older than this:
#: failing over would re-read more and more. 10 x the default checkpoint interval.
CHECKPOINT_AGE_SECONDS = 600
CHECKPOINT_FOR = "5m"

#: Window of the data-lost counter increase: any increase fires at once.
DATA_LOST_WINDOW = "15m"

REPLICATOR_DOWN_FOR = "2m"
CLUSTER_UNREACHABLE_FOR = "2m"

#: The monitor is down when Prometheus cannot scrape it, or when it answers but its
#: last evaluation is older than this (stuck event loop, every cluster timing out).
MONITOR_JOB = "sparkmirror-monitor"
MONITOR_EVALUATION_AGE_SECONDS = 120
MONITOR_DOWN_FOR = "2m"
