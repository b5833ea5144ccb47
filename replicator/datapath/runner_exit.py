"""A quiet end for pyspark's streaming-source runner process when the JVM hangs up.

The direct source's ``latestOffset``/``commit`` run in a Python process of their own
(pyspark's ``python_streaming_source_runner``) that reads calls from a socket to the
JVM. When Spark stops the query, or the JVM stops on SIGTERM, that socket closes: the
runner's read ends with ``EOFError``, it tries to write the error back to the JVM,
and the write fails too (the peer is gone). Python then prints both as a traceback
on the replicator's stderr, although this is the normal end of a stopped query.

``install()`` replaces ``sys.excepthook`` in that process only, so that this one
chain -- the JVM's end of the socket gone, nothing else -- ends the process without a
traceback; any other exception is printed as before.
"""

from __future__ import annotations

import sys

RUNNER_SCRIPT = "python_streaming_source_runner.py"

#: What a read or write on a socket whose peer closed raises.
HANGUP = (EOFError, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def is_hangup(exc: BaseException | None) -> bool:
    """Whether ``exc`` and every exception it was raised while handling are the peer hanging up."""
    seen = 0
    while exc is not None and seen < 10:
        if not isinstance(exc, HANGUP):
            return False
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return seen > 0


def in_runner() -> bool:
    """Whether this process is pyspark's streaming-source runner."""
    main = sys.modules.get("__main__")
    return str(getattr(main, "__file__", "") or "").endswith(RUNNER_SCRIPT)


def install(force: bool = False) -> None:
    """Hide the JVM-hung-up traceback in this process (only in the runner, unless ``force``)."""
    if not (force or in_runner()) or getattr(sys.excepthook, "_sparkmirror_hangup", False):
        return
    previous = sys.excepthook

    def hook(kind, exc, tb):
        if is_hangup(exc):
            return  # the exit status stays non-zero: the JVM is not reading it any more
        previous(kind, exc, tb)

    hook._sparkmirror_hangup = True
    sys.excepthook = hook
