"""The control-plane loops of one flow, started by replicator.service.

``start_control_loops`` is the one place that decides which loops run for a
flow and on which MM2 interval: checkpoints (``emit.checkpoints.*``; none
without offset-syncs, as in MM2), group
offset sync (``sync.group.offsets.*``, fed by the checkpoint loop), topic config
sync (``sync.topic.configs.*``) and topic ACL sync (``sync.topic.acls.*``).
Heartbeats and topic/partition refresh are started by replicator.service
(replicator.control.heartbeats, replicator.control.topics.TopicSync).

Each loop runs on a daemon thread of the driver, in ``replicator.control.loop.run_loop``
(the heartbeats' loop too): it prepares (retrying until it succeeds or the run
stops), then runs one round per interval. A failed round is logged and the next one
tries again; a loop never takes the run down.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from replicator.control.checkpoints import CheckpointEmitter
from replicator.control.configsync import AclSync, TopicConfigSync
from replicator.control.groups import GroupOffsetSync
from replicator.control.loop import run_loop

log = logging.getLogger("sparkmirror.control")

@dataclass
class ControlPlane:
    """The loop objects started for one flow (for logs and tests)."""

    flow: str
    checkpoints: CheckpointEmitter | None = None
    group_sync: GroupOffsetSync | None = None
    config_sync: TopicConfigSync | None = None
    acl_sync: AclSync | None = None
    loops: list[str] = field(default_factory=list)


def _wait_for(ready: threading.Event, stop: threading.Event) -> None:
    while not ready.wait(1.0) and not stop.is_set():
        pass


def start_control_loops(config, flow, source_admin, target_admin, assignment, stop: threading.Event,
                        spawn) -> ControlPlane:
    """Start the enabled control loops of ``flow`` (a FlowConfig); ``assignment()``: the source
    topics the data path copies now, with their partition counts; ``spawn(name, target, *args)``
    runs a thread."""
    name = flow.name
    plane = ControlPlane(name)
    checkpoints_interval = flow.interval_seconds("emit.checkpoints")
    if checkpoints_interval and not flow.emit_offset_syncs_enabled:
        # Checkpoints are translated through the offset-syncs; MM2 refuses its checkpoint connector without them.
        log.warning("flow %s: emit.offset-syncs.enabled = false, so no checkpoints are emitted and no consumer-group "
                    "offsets are synced (MM2 refuses its MirrorCheckpointConnector without offset-syncs)", name)
    elif checkpoints_interval:
        emitter = CheckpointEmitter(config, flow, source_admin=source_admin, target_admin=target_admin)
        plane.checkpoints = emitter
        ready = threading.Event()
        spawn(f"checkpoints {name}", run_loop, f"checkpoints {name}", float(checkpoints_interval),
              emitter.emit_once, stop, emitter.prepare, ready, emitter.close)
        plane.loops.append(f"checkpoints every {checkpoints_interval} s")
        sync_interval = flow.interval_seconds("sync.group.offsets")
        if sync_interval:
            plane.group_sync = GroupOffsetSync(config, flow, emitter)  # its own child process for group requests
            spawn(f"group offset sync {name}", run_loop, f"group offset sync {name}", float(sync_interval),
                  plane.group_sync.sync_once, stop, lambda: _wait_for(ready, stop), None, plane.group_sync.close)
            plane.loops.append(f"group offset sync every {sync_interval} s")
    elif flow.sync_group_offsets_enabled:
        log.warning("flow %s: sync.group.offsets.enabled needs emit.checkpoints.enabled (the synced offsets are the "
                    "checkpoints), so consumer-group offsets are not synced", name)
    configs_interval = flow.interval_seconds("sync.topic.configs")
    if configs_interval:
        plane.config_sync = TopicConfigSync(flow, source_admin, target_admin, assignment)
        spawn(f"config sync {name}", run_loop, f"config sync {name}", float(configs_interval),
              plane.config_sync.sync_once, stop)
        plane.loops.append(f"topic config sync every {configs_interval} s")
    acls_interval = flow.interval_seconds("sync.topic.acls")
    if acls_interval:
        plane.acl_sync = AclSync(flow, source_admin, target_admin)
        spawn(f"acl sync {name}", run_loop, f"acl sync {name}", float(acls_interval),
              plane.acl_sync.sync_once, stop)
        plane.loops.append(f"topic ACL sync every {acls_interval} s")
    log.info("control plane %s: %s", name, ", ".join(plane.loops) or "no loops enabled")
    return plane
