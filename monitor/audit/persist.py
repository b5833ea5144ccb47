"""The audit's state file: the syncs it has seen, its positions, its counts and findings.

The offset-syncs topic is compacted, so syncs the audit did not keep may be gone when
it restarts; without this file a restarted audit could only call the older ranges
unverifiable. Written whole to a temporary file and renamed over the old one, so a
crash leaves either the old state or the new, never half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sparkmirror.errors import ConfigError

VERSION = 1


def load(path: Path | None, flow: str) -> dict | None:
    """The saved state of ``flow``, or None (no file yet, or it holds other flows only)."""
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the audit state file cannot be read: {exc}", file=str(path),
                          hint="move it away to start the audit afresh (older ranges then count as unverifiable)")
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ConfigError(f"the audit state file is not of version {VERSION}", file=str(path),
                          hint="move it away to start the audit afresh")
    return data.get("flows", {}).get(flow)


def save(path: Path | None, flow: str, state: dict) -> None:
    if path is None:
        return
    data = {"version": VERSION, "flows": {}}
    if path.exists():
        try:
            old = json.loads(path.read_text())
            if isinstance(old, dict) and old.get("version") == VERSION:
                data = old
        except (OSError, ValueError):
            pass
    data["flows"][flow] = state
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(data, separators=(",", ":")))
    os.replace(tmp, path)
