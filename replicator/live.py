"""Changing a running replication: what the control API (``replicator.api``) and SIGHUP do to a
``ReplicatorService`` (``LiveControl``, one of its bases).

- ``pause`` / ``resume`` one flow (``FlowReplicator.pause``: its query stops, its control
  loops and the heartbeats go on, the pause outlives a restart);
- ``reload``: mm2.properties read again. A file ``validate`` refuses is refused the same way
  (its ``FILE:LINE`` error) and nothing changes. Otherwise flows no longer enabled stop
  (query, then loops; their pause gauges go), new ones start, flows whose settings changed
  restart on their checkpoint with the new settings, the others keep their query untouched,
  and the heartbeat emitters follow the new file (``_HeartbeatLoops.apply``).

A flow that fails to start (at a reload, or a resume) is no refusal of the file: the reload
answers that it applied the file and which flows did not start, the other flows run on,
and the flow shows as ``failed`` in ``GET /api/flows`` with its error while the supervision
loop tries it again (``FAILED_START_FIRST_S``, doubling up to ``FAILED_START_MAX_S``), until
a start works or a reload removes it.

The stop wins over a reload: a reload asked for while the service stops is refused, and one
in progress gives up between two flows once the stop began, so a SIGTERM during a SIGHUP
reload still stops within the grace period (the run's stop waits for it under the same lock).
Nothing raised by a reload ends the replicator: it is logged and answered.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sparkmirror.errors import ConfigError, SparkmirrorError, one_line

log = logging.getLogger("sparkmirror.replicate")

#: Seconds before a flow that failed to start is tried again; doubling up to the max.
FAILED_START_FIRST_S = 5.0
FAILED_START_MAX_S = 60.0
#: Seconds a reload waits for a stopped flow's loops once the run itself is stopping.
STOPPING_JOIN_S = 1.0


@dataclass
class FailedStart:
    """An enabled flow whose start failed: tried again at ``next_at`` (time.monotonic())."""

    flow: object  # its FlowConfig
    error: str
    next_at: float
    delay: float = FAILED_START_FIRST_S


class LiveControl:
    """Pause, resume and reload of a ReplicatorService (the module docstring). The service
    provides ``config``, ``flows``, ``app``, ``_runs``, ``_control_lock``, ``stop_event``,
    ``_stopping``, ``_failed_starts``, ``_prepare_flow``, ``_new_run`` and ``_heartbeat_loops``."""

    def _flow(self, name: str):
        for fr in self.flows:
            if fr.name == name:
                return fr
        raise KeyError(name)

    def flows_state(self) -> list[dict]:
        """What GET /api/flows shows of each flow; nothing from the clients' settings (no secrets)."""
        out = []
        for fr in list(self.flows):
            q = fr.query
            try:
                active = bool(q is not None and q.isActive)
            except Exception:
                active = False
            state = ("paused" if fr.paused is not None else "failed" if fr.failure and not active
                     else "running" if active else "waiting")
            try:
                position = fr.copied_offsets() if active else None
            except Exception:
                position = None
            out.append({
                "flow": fr.name, "state": state, "data_path": fr.path.path, "partitions": fr.partitions,
                "records": fr.stats.records, "bytes": fr.stats.bytes, "batches": fr.stats.batches,
                "last_batch_at": fr.stats.last_batch_at,
                "position": {f"{t}[{p}]": o for (t, p), o in sorted(position.items())} if position else None,
                "paused": fr.paused, "last_error": one_line(fr.failure, 500), "query": _run_id(q) if active else None,
            })
        now = time.monotonic()
        for name, failed in sorted(dict(self._failed_starts).items()):
            out.append({"flow": name, "state": "failed", "data_path": None, "partitions": 0, "records": 0,
                        "bytes": 0, "batches": 0, "last_batch_at": None, "position": None, "paused": None,
                        "last_error": f"did not start: {failed.error}", "query": None,
                        "retry_in_seconds": round(max(0.0, failed.next_at - now), 1)})
        return out

    def pause(self, name: str, who: str) -> bool:
        from replicator.metrics import metrics

        with self._control_lock:
            fr = self._flow(name)
            changed = fr.pause(who)
            metrics().pause_state(name, fr.paused)
            if changed:
                log.info("flow %s: paused by %s: its query stopped, its heartbeats and checkpoints go on", name, who)
            return changed

    def resume(self, name: str, who: str) -> bool:
        from replicator.metrics import metrics

        with self._control_lock:
            fr = self._flow(name)
            changed = fr.resume()
            metrics().pause_state(name, None)
            if changed:
                log.info("flow %s: resumed by %s", name, who)
            return changed

    # --- reload ------------------------------------------------------------------------
    def reload_logged(self, who: str) -> None:
        """A reload whose answer nobody reads (SIGHUP): whatever happens is logged, never raised."""
        try:
            self.reload(who)
        except Exception:
            log.exception("reload by %s failed; the flows run on as they were", who)

    def reload(self, who: str) -> dict:
        """Read mm2.properties again and apply it (the module docstring); what changed, or why not.
        ``http``: the status the control API answers with."""
        from sparkmirror.configfile import load_config
        from sparkmirror.model.flowclients import translate_clients

        if self._stopping or self.stop_event.is_set():
            return self._stopping_answer(who)
        with self._control_lock:
            if self._stopping or self.stop_event.is_set():
                return self._stopping_answer(who)
            try:
                new = load_config(self.config.path)
                translate_clients(new)
                if not new.enabled_flows():
                    raise ConfigError("no flow is enabled", file=self.config.path,
                                      hint="add a line like 'A->B.enabled = true'")
            except SparkmirrorError as exc:
                text = str(exc) if exc.location() else f"sparkmirror: error: {exc}"
                log.error("reload by %s refused, every flow runs on as before: %s", who, text)
                return {"ok": False, "error": text, "http": 400}
            try:
                return self._apply(new, who)
            except Exception as exc:
                log.exception("reload by %s failed while applying the file", who)
                return {"ok": False, "error": f"reload failed: {one_line(str(exc) or repr(exc), 500)}", "http": 500}

    def _stopping_answer(self, who: str) -> dict:
        log.warning("reload by %s refused: the replicator is stopping", who)
        return {"ok": False, "error": "the replicator is stopping: reload refused", "http": 503}

    def _apply(self, new, who: str) -> dict:
        old = {f.name: f for f in self.config.enabled_flows()}
        now = {f.name: f for f in new.enabled_flows()}
        failing = set(self._failed_starts)  # enabled but never started: started again, as if new
        changed = sorted(n for n in old.keys() & now.keys() - failing if self._differs(old[n], now[n], new))
        removed = sorted(old.keys() - now.keys())
        added = sorted((now.keys() - old.keys()) | (failing & now.keys()))
        for name in failing - now.keys():
            del self._failed_starts[name]
        skipped = []
        for name in removed + changed:
            if self.stop_event.is_set():
                skipped.append(name)
                continue
            self._stop_flow(name, forget=name in removed)
        self.config = new
        self._heartbeat_loops.apply(new, self.stop_event)
        started, failed = [], {}
        for name in changed + added:
            if self.stop_event.is_set():
                skipped.append(name)
                continue
            self._failed_starts.pop(name, None)
            try:
                self._start_flow(now[name])
                started.append(name)
            except Exception as exc:
                failed[name] = one_line(str(exc) or repr(exc), 500)
                self._failed_starts[name] = FailedStart(now[name], failed[name],
                                                        time.monotonic() + FAILED_START_FIRST_S)
                log.error("reload by %s: flow %s did not start: %s; it is tried again in %.0f s", who, name,
                          failed[name], FAILED_START_FIRST_S)
        unchanged = sorted(n for n in old.keys() & now.keys() if n not in changed and n not in added)
        log.info("reload by %s: added %s, removed %s, changed %s, unchanged %s%s", who, added or "-",
                 removed or "-", changed or "-", unchanged or "-",
                 f", did not start {sorted(failed)}" if failed else "")
        answer = {"ok": not failed and not skipped, "added": added, "removed": removed, "changed": changed,
                  "unchanged": unchanged, "result": "reloaded", "http": 200}
        if failed:
            answer.update(failed=failed, http=500, result="reloaded; some flows did not start",
                          error="; ".join(f"flow {n} did not start: {e}" for n, e in sorted(failed.items()))
                          + f" (GET /api/flows shows them as failed; tried again from {FAILED_START_FIRST_S:.0f} s)")
        if skipped:
            answer.update(skipped=skipped, http=503, error="the replicator began stopping during the reload: "
                                                             f"not applied to {', '.join(skipped)}")
        return answer

    def retry_failed_starts(self) -> None:
        """Start again the flows whose start failed, once their time came (the supervision loop)."""
        now = time.monotonic()
        if not any(f.next_at <= now for f in list(self._failed_starts.values())):
            return
        with self._control_lock:
            for name, failed in sorted(self._failed_starts.items()):
                if failed.next_at > now or self._stopping or self.stop_event.is_set():
                    continue
                try:
                    self._start_flow(failed.flow)
                except Exception as exc:
                    failed.error = one_line(str(exc) or repr(exc), 500)
                    failed.delay = min(failed.delay * 2, FAILED_START_MAX_S)
                    failed.next_at = time.monotonic() + failed.delay
                    log.warning("flow %s: did not start again: %s; next attempt in %.0f s", name, failed.error,
                                failed.delay)
                else:
                    del self._failed_starts[name]
                    log.info("flow %s: started (it had failed to start: %s)", name, failed.error)

    def _differs(self, before, after, new_config) -> bool:
        """Whether a flow's settings or its clients' settings changed (not where in the file they are)."""
        if before != after:
            return True
        from sparkmirror.model.clients import ROLES

        try:
            return any(dict(self.config.client_config(a, role, before)) != dict(new_config.client_config(a, role, after))
                       for a in (before.source, before.target) for role in ROLES)
        except SparkmirrorError:
            return True  # cannot tell: restarting the flow is the safe side

    def _stop_flow(self, name: str, *, forget: bool = False) -> None:
        """Stop one flow (query, then loops); ``forget``: it is gone from the file, and so are its
        pause gauges."""
        run = self._runs.pop(name, None)
        fr = next((f for f in self.flows if f.name == name), None)
        if fr is not None:
            fr.close()  # the query first: nothing is copied while the loops wind down
        if run is not None:
            # once the run stops, its loops are daemons and need not be waited for: the grace period is short
            run.stop(STOPPING_JOIN_S if self.stop_event.is_set() else self.loop_join_s)
        if fr is not None:
            log.info("summary: %s", fr.summary())
            self.flows.remove(fr)
        if forget:
            _forget_pause_gauges(name)

    def _start_flow(self, flow) -> None:
        fr = self._prepare_flow(flow)
        fr.spark = self.app.spark
        self.flows.append(fr)
        run = self._new_run(flow.name)
        try:
            self.app.fit(fr)
            run.start()
        except BaseException:
            fr.close()
            run.stop(self.loop_join_s)  # the loops it spawned before the failure
            self.flows.remove(fr)
            self._runs.pop(flow.name, None)
            raise
        self._reloaded_runs.append(run)


def _forget_pause_gauges(name: str) -> None:
    from replicator.metrics import metrics

    m = metrics()
    for gauge in (m.paused, m.paused_since):
        try:
            gauge.remove(name)
        except KeyError:
            pass


def _run_id(query) -> str | None:
    """The id of this start of the query (a real-time query: of its shards, joined)."""
    try:
        shards = getattr(query, "queries", None)
        return ",".join(str(q.runId) for q in shards) if shards else str(query.runId)
    except Exception:
        return None
