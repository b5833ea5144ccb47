"""A stop signal that arrives while the main thread is inside the stop event's own code — as a
terminal's Ctrl-C followed at once by a supervisor's SIGTERM does — still stops the replicator
instead of hanging it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import logging, os, signal, sys, threading, time
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")

    class Reports(logging.Handler):
        count = 0

        def emit(self, record):
            if record.getMessage().startswith("received"):
                Reports.count += 1

    reports = Reports()
    logging.getLogger().addHandler(reports)
    from replicator.service import ReplicatorService

    svc = object.__new__(ReplicatorService)  # only what its signal handling needs
    from replicator.settings import ReplicatorSettings

    svc.stop_event, svc.app, svc.settings = threading.Event(), None, ReplicatorSettings()
    svc._install_signal_handlers()
    event = svc.stop_event
    # The main thread holds the event's own lock, as it does for a few bytecodes inside
    # Event.wait and Event.set, when SIGINT and then SIGTERM arrive: their Python-level
    # handlers run right here, between two bytecodes of this loop.
    with event._cond:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(20):
            time.sleep(0.01)
    # Through logging, whose handler lock keeps these lines whole: a print() writes its text and
    # its newline separately, and the reading thread's report could land in between.
    logging.info("handlers returned")
    logging.info("stopped" if event.wait(5) else "not stopped")
    # The reading thread reports each signal, the second maybe after the event is set.
    deadline = time.monotonic() + 5
    while reports.count < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
""")


def test_signals_while_the_main_thread_holds_the_stop_events_lock_stop_without_hanging():
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the process hung in its signal handler: {exc.stdout!r} {exc.stderr!r}") from None
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "handlers returned" in lines and "stopped" in lines, proc.stdout
    # Each signal is reported, in order, from the thread that reads them.
    assert [line.split(":")[0] for line in lines if line.startswith("received")] == \
        ["received SIGINT", "received SIGTERM"], proc.stdout
