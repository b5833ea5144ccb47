"""A flow's pause on disk: a file next to its checkpoint, so that a restart or a kill -9 keeps it.

``PAUSED_FILE`` holds who paused the flow and when (JSON). It is written to a temporary name,
synced and renamed, so a crash leaves the old state or the new one; a file that cannot be read
still means paused (never copy what someone paused).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

#: In the flow's checkpoint folder while the flow is paused.
PAUSED_FILE = "paused.json"


def read_pause(flow_dir: Path) -> dict | None:
    """Who paused the flow and when (``{"by": ..., "at": epoch seconds}``), or None when it runs."""
    path = Path(flow_dir) / PAUSED_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"by": "unknown", "at": path.stat().st_mtime}


def write_pause(flow_dir: Path, by: str) -> dict:
    flow_dir = Path(flow_dir)
    flow_dir.mkdir(parents=True, exist_ok=True)
    paused = {"by": by, "at": time.time()}
    tmp = flow_dir / (PAUSED_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(paused))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, flow_dir / PAUSED_FILE)
    return paused


def clear_pause(flow_dir: Path) -> None:
    (Path(flow_dir) / PAUSED_FILE).unlink(missing_ok=True)
