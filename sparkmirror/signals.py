"""Stop on SIGTERM or SIGINT without doing anything inside the signal handler.

Python runs a signal handler in the main thread between two bytecodes, wherever the main
thread is — also inside ``threading.Event.wait`` or ``Event.set`` of the very event the
handler would set, which hold that event's lock (not reentrant) for a few bytecodes, and
inside the handler of an earlier signal. A handler that sets the event there waits for a lock
its own thread holds, forever: a terminal's Ctrl-C followed at once by a supervisor's SIGTERM
hung the replicator that way. So the handler here does nothing; the interpreter's C-level
handler writes each signal's number to a wakeup pipe (``signal.set_wakeup_fd``), and a
thread of its own reads it, reports the signal and sets the event, outside any handler.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _noted(_signum, _frame) -> None:
    """The Python-level handler: nothing to do (the wakeup pipe has the signal), and nothing
    that could take a lock."""


class StopSignals:
    """SIGTERM and SIGINT set ``event``; ``on_signal(name)`` is called first, for each signal,
    from the thread that reads them (a report, a log line: any code may run there)."""

    def __init__(self, event: threading.Event, on_signal: Callable[[str], None] | None = None) -> None:
        self.event = event
        self.on_signal = on_signal

    def install(self) -> bool:
        """Take over SIGTERM and SIGINT; only the main thread can (False elsewhere: nothing done)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)  # the C-level handler must never block
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            signal.signal(signum, _noted)
        threading.Thread(target=self._watch, args=(read_end,), name="stop-signals", daemon=True).start()
        return True

    def _watch(self, read_end: int) -> None:
        wanted = {int(s) for s in STOP_SIGNALS}
        while True:
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:  # one byte per signal caught: its number
                if signum not in wanted:
                    continue
                if self.on_signal is not None:
                    try:
                        self.on_signal(signal.Signals(signum).name)
                    except Exception:  # a failed report must not keep the stop from happening
                        pass
                self.event.set()
