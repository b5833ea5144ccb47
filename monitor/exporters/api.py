"""The /api/status document: an Evaluation as JSON.

By default a flow lists its topics, its groups, the partitions that are not OK
(at most SUMMARY_PARTITIONS; ``partitions_omitted`` counts the rest) and the
``top`` partitions with the most seconds (then records) of lag; with
``detail=partitions`` it lists every partition. Numbers keep their units in
their names (``_seconds``, ``_ms`` timestamps), unknown values are ``null``.
This document is the contract of the status page at ``/``: the page reads only it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from monitor import catchup
from monitor.evaluator.results import Evaluation, FlowResult, GroupResult, PartitionResult
from monitor.exporters.samples import histogram

SCHEMA_VERSION = 1
#: The summary lists at most this many partitions that are not OK (``detail=partitions`` lists all).
SUMMARY_PARTITIONS = 100


def _plain(obj: Any) -> Any:
    return dataclasses.asdict(obj)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _partition(p: PartitionResult) -> dict[str, Any]:
    d = _plain(p)
    d["lag_seconds"] = _round(p.lag_seconds)
    d["retention_headroom_seconds"] = _round(p.retention_headroom_seconds)
    d["copy_rate"], d["source_rate"] = _round(p.copy_rate), _round(p.source_rate)
    d["catchup_eta_seconds"] = _round(p.catchup_eta_seconds)
    return d


def _catchup(state: str, copy_rate: float | None, source_rate: float | None, eta: float | None) -> dict[str, Any]:
    """Catch-up figures (monitor.catchup): rates in records/s, ETA null when unknown or not catching up."""
    pace = catchup.CatchUp(state, copy_rate, source_rate, eta)
    return {"state": state, "copy_rate": _round(copy_rate), "source_rate": _round(source_rate),
            "net_rate": _round(pace.net_rate), "eta_seconds": _round(eta), "text": catchup.text(pace)}


def _group(g: GroupResult) -> dict[str, Any]:
    """A group with its failover readiness; only the partitions that block it are listed there."""
    d = _plain(g)
    fo = g.failover
    if fo is not None:
        d["failover"] = {
            "ready": fo.ready, "summary": fo.summary, "blockers": fo.blockers,
            "reread_records": fo.reread_records, "reread_seconds": _round(fo.reread_seconds),
            "skipped_records": fo.skipped_records,
            "blocked_partitions": [_plain(p) for p in fo.partitions if p.blocker][:SUMMARY_PARTITIONS],
        }
    return d


def _lag_key(p: PartitionResult) -> tuple[float, int]:
    return (p.lag_seconds or 0.0, p.lag_records or 0)


#: findings shown in full per flow (the counts cover every one)
AUDIT_FINDINGS_SHOWN = 20


def audit_document(snap: dict | None) -> dict[str, Any] | None:
    """The flow's audit (monitor.audit): counts, coverage and the first findings in full; None when
    the flow is not audited (--audit off, or no offset-syncs to pair records by)."""
    if snap is None:
        return None
    findings = snap.get("findings") or []
    return {"counts": snap["counts"], "coverage": snap["coverage"], "verified_last_hour": snap["verified_last_hour"],
            "topics": snap["topics"], "partitions": snap["partitions"],
            "unchecked_records": snap["unchecked_records"], "pending_windows": snap["pending_windows"],
            "exactly_once": snap["exactly_once"], "source_isolation": snap["source_isolation"],
            "rounds": snap["rounds"], "read_bytes": snap["read_bytes"],
            "findings": findings[:AUDIT_FINDINGS_SHOWN], "findings_total": len(findings)}


def flow_document(f: FlowResult, detail: str = "summary", top: int = 10, rpo: dict | None = None,
                  audit: dict | None = None) -> dict[str, Any]:
    """``rpo``: the flow's recovery-point objective, budget left and lag percentiles (monitor.rpo);
    ``audit``: the audit's newest snapshot of the flow (monitor.audit)."""
    hb = f.heartbeat
    buckets, total = histogram(f)
    lagging = sorted((p for p in f.partitions if p.lag_records), key=_lag_key, reverse=True)
    doc: dict[str, Any] = {
        "name": f.name, "source": f.source, "target": f.target,
        "status": f.status, "reasons": f.reasons, "replicator_up": f.replicator_up,
        # paused on purpose (who, when), from the replicator's control API (--replicator-url)
        "paused": f.paused,
        "heartbeat": {
            "topic": hb.topic, "expected": hb.expected, "timeout_seconds": hb.timeout_seconds,
            "age_seconds": _round(hb.age_seconds), "last_timestamp_ms": hb.last_timestamp_ms,
            "arrival_age_seconds": _round(hb.arrival_age_seconds),
            "received_total": hb.received_total, "stopped": hb.stopped,
            "latency": {"count": hb.latency_count, "sum_seconds": _round(hb.latency_sum),
                        "last_seconds": _round(hb.last_latency_seconds),
                        "buckets": [[le, count] for le, count in buckets]},
        },
        "offset_sync": {"age_seconds": _round(f.offset_sync_age_seconds), "received_total": f.offset_syncs_total},
        # over the partitions whose position is known: a lower bound while unknown_partitions > 0
        "lag": {"records": f.lag_records, "seconds": _round(f.lag_seconds),
                "unknown_partitions": f.lag_unknown_partitions},
        "rpo": rpo,
        "audit": audit_document(audit),
        "catchup": _catchup(f.catchup_state, f.copy_rate, f.source_rate, f.catchup_eta_seconds),
        "replicated_records_total": f.replicated_total, "source_records_total": f.source_total,
        "lag_probes_total": f.probes_total,
        "data_lost_records_total": sum(f.lost_total.values()),
        "partitions_by_status": f.partitions_by_status,
        "retention": {"headroom_seconds": _round(f.retention_headroom_seconds), "unlimited": f.retention_unlimited,
                      "low_partitions": f.retention_low_partitions},
        "failover": {"groups_not_ready": f.failover_groups_not_ready},
        "topics": [_plain(t) | {"lag_seconds": _round(t.lag_seconds),
                                "retention_headroom_seconds": _round(t.retention_headroom_seconds)}
                   for t in f.topics],
        "groups": [_group(g) for g in f.groups],
        # per group committing on the mirror topics of the target: could it fail back now (monitor.failback)
        "failback": [{"group": g.group, "ready": g.ready, "summary": g.summary, "reread_records": g.reread_records,
                      "partitions": [_plain(p) for p in g.partitions][:SUMMARY_PARTITIONS]}
                     for g in f.failback],
        "top_partitions": [_partition(p) for p in lagging[:top]],
        "collector_seconds": {k: _round(v, 4) for k, v in f.collector_seconds.items()},
        # each loop's rounds over the last minute: how many, the median and the longest (s)
        "collector_last_minute": {k: {"rounds": n, "p50_seconds": _round(p50, 4), "max_seconds": _round(worst, 4)}
                                  for k, (n, p50, worst) in f.collector_last_minute.items()},
    }
    if detail == "partitions":
        doc["partitions"] = [_partition(p) for p in f.partitions]
    else:
        unwell = [p for p in f.partitions if p.status != "OK"]
        doc["partitions"] = [_partition(p) for p in unwell[:SUMMARY_PARTITIONS]]
        doc["partitions_omitted"] = max(0, len(unwell) - SUMMARY_PARTITIONS)
    return doc


def status_document(ev: Evaluation | None, detail: str = "summary", top: int = 10,
                    version: str = "") -> dict[str, Any]:
    if ev is None:
        return {"schema": SCHEMA_VERSION, "status": None, "message": "no evaluation yet", "flows": []}
    return {
        "schema": SCHEMA_VERSION,
        "generated_at": ev.generated_at,
        "monitor": {"version": version, "started_at": ev.started_at, "granularity": ev.granularity,
                    "evaluation_seconds": _round(ev.duration_seconds, 4),
                    # the longest the evaluation kept the event loop busy at once (it runs in steps)
                    "evaluation_longest_step_seconds": _round(ev.extra.get("longest_step_seconds"), 4),
                    # of which the evaluator's own CPU time (the rest: waiting for the GIL, collections)
                    "evaluation_longest_step_cpu_seconds": _round(ev.extra.get("longest_step_cpu_seconds"), 4),
                    # of the longest step's wall time, how long the monitor waited for a core
                    "evaluation_longest_step_runqueue_seconds":
                        _round(ev.extra.get("longest_step_runqueue_seconds"), 4),
                    # the longest garbage collection since the evaluation before (it stops every thread)
                    "gc_longest_pause_seconds": _round(ev.extra.get("longest_gc_pause_seconds"), 4),
                    # of which the collector's own CPU time (the rest: the thread waiting for a core)
                    "gc_longest_pause_cpu_seconds": _round(ev.extra.get("longest_gc_pause_cpu_seconds"), 4),
                    # times the long-lived state was frozen (monitor.gcpauses; one full collection each)
                    "gc_state_freezes": ev.extra.get("gc_state_freezes"),
                    # times the frozen state was topped up with the idle partitions' results built since
                    "gc_state_top_ups": ev.extra.get("gc_state_top_ups")},
        "status": ev.status,
        "clusters": [_plain(c) for c in ev.clusters],
        "flows": [flow_document(f, detail, top, ev.extra.get("rpo", {}).get(f.name),
                                ev.extra.get("audit", {}).get(f.name)) for f in ev.flows],
        "decode_errors": [{"cluster": c, "topic": t, "record_type": r, "count": n}
                          for (c, t, r), n in sorted(ev.decode_errors.items())],
    }
