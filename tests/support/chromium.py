"""Headless Chromium (Debian's ``chromium`` package) for tests that look at a page like a person.

``Chromium.dump_dom(url)`` returns the DOM after the page's scripts ran for a
budget of *virtual* time (timers fire, fetches complete: ``--virtual-time-budget``);
``Chromium.screenshot(url, path)`` keeps a PNG. Every run gets a fresh profile
directory (removed afterwards), no network beyond what the page itself asks
for (no component updates, sync, QUIC or background requests), and its own
process group, which is killed when the run ends so no renderer or zygote is
left behind.

``require_chromium()`` fails (never skips) the calling test when the browser is
missing: CI installs it with scripts/install-system-deps.sh.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL_HINT = "install it with scripts/install-system-deps.sh (Debian package chromium)"
CANDIDATES = ("chromium", "chromium-browser")

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
)


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
        if path:
            return path
    return None


def require_chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.fail(f"chromium not found on PATH or in /usr/bin: {INSTALL_HINT}", pytrace=False)
    return path


class ChromiumError(Exception):
    """Chromium exited with an error, timed out, or did not produce what was asked."""


@dataclass
class Chromium:
    binary: str
    timeout: float = 90.0

    def run(self, url: str, *args: str) -> subprocess.CompletedProcess:
        profile = tempfile.mkdtemp(prefix="chromium-profile-")
        command = [self.binary, *FLAGS, f"--user-data-dir={profile}", *args, url]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
            raise ChromiumError(f"chromium did not finish within {self.timeout}s: {' '.join(command)}\n"
                                f"{err.decode(errors='replace')[-2000:]}") from None
        finally:
            _kill_group(proc.pid)  # renderers and the zygote share the group
            shutil.rmtree(profile, ignore_errors=True)
        result = subprocess.CompletedProcess(command, proc.returncode, out.decode(errors="replace"),
                                             err.decode(errors="replace"))
        if result.returncode != 0:
            raise ChromiumError(f"chromium exited with {result.returncode}: {' '.join(command)}\n"
                                f"{result.stderr[-2000:]}")
        return result

    def dump_dom(self, url: str, virtual_time_ms: int = 5000) -> str:
        """The serialized DOM once ``virtual_time_ms`` of the page's timers and fetches have run."""
        dom = self.run(url, f"--virtual-time-budget={virtual_time_ms}", "--dump-dom").stdout
        if "<html" not in dom:
            raise ChromiumError(f"chromium dumped no document for {url}: {dom[:500]!r}")
        return dom

    def screenshot(self, url: str, path: Path, width: int = 1280, height: int = 900,
                   virtual_time_ms: int = 5000) -> Path:
        path = Path(path).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        self.run(url, f"--virtual-time-budget={virtual_time_ms}", f"--screenshot={path}",
                 f"--window-size={width},{height}")
        if not path.exists() or path.stat().st_size == 0:
            raise ChromiumError(f"chromium wrote no screenshot to {path}")
        return path


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
