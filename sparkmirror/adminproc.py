"""An AdminClient in a child process, for the requests that can abort the whole process.

librdkafka (up to at least 2.16.0) aborts the process with ``rd_kafka_enq_once_del_source_return:
Assertion `eonce->refcnt > 0' failed`` when a group coordinator's connection drops under an
Admin API group request (OffsetFetch, DescribeGroups, OffsetCommit through the AdminClient;
confluentinc/librdkafka#4605). On a multi-broker cluster that happens whenever the broker
leading ``__consumer_offsets`` dies. An abort is no exception: it takes every thread with
it. So these requests run in a child process: when librdkafka aborts there, the caller gets
an ``AdminProcessDied`` for that one request, the next request starts a fresh child, and
the calling process (the monitor, the replicator's driver) keeps running.

``AdminProcess.call(fn, *args)`` runs ``fn(admin, *args)`` in the child: ``fn`` must be a
module-level function (it travels by name) and its arguments and result picklable. An
exception raised there comes back as ``AdminProcessError`` with the same message and, for a
Kafka error, its code. Messages are length-prefixed pickles over the child's stdin and
stdout; the child is ``python -m sparkmirror.adminproc`` and exits when its stdin closes, so
it never outlives its parent.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">I")
#: the package root, so that the child imports the same code as its parent
_ROOT = str(Path(__file__).resolve().parents[1])


#: Kafka error codes after which the child's AdminClient is replaced by a new one:
#: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, and librdkafka's local _TIMED_OUT. librdkafka
#: (2.16) keeps sending a group's Admin requests to the coordinator it found first: once the
#: coordinator has moved to another live broker (a leader election of ``__consumer_offsets``,
#: which follows every broker restart and reassignment), a long-lived client is answered
#: NOT_COORDINATOR, or times out, request after request, while a new client finds the new
#: coordinator at once.
STALE_CLIENT_CODES = frozenset({15, 16, -185})
#: At most one such replacement per this many seconds and child: a coordinator that is really
#: unavailable for a while does not start a process per request.
REPLACE_STALE_EVERY = 10.0


class AdminProcessError(Exception):
    """A request run in the child failed there; ``code`` is the Kafka error code, if any.
    ``replaced``: the error made the child be replaced, so asking again may help."""

    def __init__(self, message: str, code: int | None = None, retriable: bool = False,
                 text: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable
        self.text = text or message  # the readable part (a KafkaError's own text)
        self.replaced = False


class AdminProcessDied(AdminProcessError):
    """The child exited (librdkafka aborted it) or stopped answering during a request."""


def _write(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _readable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` has data within ``seconds``; poll(), since select() refuses descriptors above
    1023, which a monitor of many flows (each with its Kafka clients' sockets) goes past."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(0, int(seconds * 1000))))


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline`` (monotonic)."""
    out = bytearray()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not _readable(fd, left):
                raise TimeoutError
        chunk = os.read(fd, n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _read(fd: int, deadline: float | None = None) -> Any:
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        raise EOFError
    body = _read_exactly(fd, _HEADER.unpack(header)[0], deadline)
    if body is None:
        raise EOFError
    return pickle.loads(body)


class AdminProcess:
    """One AdminClient with ``config`` in a child process, started on first use and again after
    it died. ``what`` names it in log lines (e.g. "cluster dr"). Thread-safe: calls run one at a
    time."""

    def __init__(self, config: dict[str, Any], what: str) -> None:
        # callbacks (logger, error_cb) cannot cross processes; the child keeps librdkafka quiet,
        # its failures come back as exceptions
        self._config = {k: v for k, v in config.items() if not callable(v)}
        self._config["log_level"] = 0
        self.what = what
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self.restarts = 0  # children that died and were replaced
        self.stale_replaced = 0  # children replaced after a coordinator error (STALE_CLIENT_CODES)
        self._stale_at = float("-inf")
        self._closed = False

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen([sys.executable, "-m", "sparkmirror.adminproc"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, close_fds=True)
        _write(proc.stdin, self._config)
        return proc

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 30.0) -> Any:
        """``fn(admin, *args)`` in the child; its result, or an AdminProcessError."""
        with self._lock:
            if self._closed:
                raise AdminProcessError(f"admin requests to {self.what}: closed")
            if self._proc is not None and self._proc.poll() is not None:
                # died since its last request (an abort between requests): a restart all the same
                gone = self._proc
                self._replace(gone, EOFError())
                self._died_message(gone, EOFError())
            if self._proc is None:
                self._proc = self._start()
            proc = self._proc
            try:
                _write(proc.stdin, (fn, args))
                kind, value = _read(proc.stdout.fileno(), time.monotonic() + timeout)
            except (EOFError, BrokenPipeError, TimeoutError) as exc:
                if self._closed:  # close() stopped the child under this request: no death to report
                    raise AdminProcessDied(f"admin requests to {self.what}: closed while a request was "
                                           f"in flight") from None
                self._replace(proc, exc)
                raise AdminProcessDied(self._died_message(proc, exc)) from None
            if kind == "ok":
                return value
            error = AdminProcessError(*value)
            now = time.monotonic()
            if error.code in STALE_CLIENT_CODES and now - self._stale_at >= REPLACE_STALE_EVERY:
                self._stale_at = now
                self._retire(proc)
                error.replaced = True
                log.info("admin requests to %s: %s; the next request starts a new client (one that "
                         "looks the group coordinator up again)", self.what, error)
            raise error

    def _retire(self, proc: subprocess.Popen) -> None:
        """Let a working child go (it exits when its stdin closes); the next call starts another."""
        self._proc = None
        self.stale_replaced += 1
        try:
            proc.stdin.close()
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()

    def _replace(self, proc: subprocess.Popen, exc: BaseException) -> None:
        if isinstance(exc, TimeoutError) and proc.poll() is None:
            proc.kill()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        self._proc = None
        self.restarts += 1

    def _died_message(self, proc: subprocess.Popen, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError):
            message = f"admin requests to {self.what}: no answer from the helper process; it was replaced"
        else:
            code = proc.returncode
            how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            message = (f"admin requests to {self.what}: the helper process died ({how}; librdkafka aborts "
                       f"when a group coordinator's connection drops under an admin group request, "
                       f"confluentinc/librdkafka#4605); the next request starts a new one")
        log.warning("%s", message)
        return message

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def close(self) -> None:
        """Stop the child for good, without waiting for a request in flight: against a cluster
        that does not answer, one waits up to its timeout, and stopping the monitor waited that
        long for every such child in turn (a minute and more with one cluster down). That
        request fails (its child is gone); no later call starts another child."""
        self._closed = True
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if self._lock.locked():
            proc.kill()  # busy with a request: it would not read its stdin before answering
        else:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def run_admin(admin: Any, fn: Callable[..., Any], *args: Any, timeout: float = 75.0) -> Any:
    """``fn(admin, *args)``: in the child when ``admin`` is an AdminProcess, else right here (an
    AdminClient, as one-shot commands and tests pass)."""
    if isinstance(admin, AdminProcess):
        try:
            return admin.call(fn, *args, timeout=timeout)
        except AdminProcessDied:
            return admin.call(fn, *args, timeout=timeout)  # once more, on a fresh child
        except AdminProcessError as exc:
            if not exc.replaced:
                raise
            return admin.call(fn, *args, timeout=timeout)  # once more, from a new client
    return fn(admin, *args)


def _serve() -> None:
    """The child: read the config, then run requests until stdin closes."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    # A Ctrl-C or a SIGTERM to the whole process group (systemd's default stop) is the parent's
    # to handle: it may still need this child while it stops, and closes stdin when done.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdin, stdout = sys.stdin.buffer.fileno(), sys.stdout.buffer
    config = _read(stdin)
    admin = AdminClient(config)
    while True:
        try:
            fn, args = _read(stdin)
        except EOFError:
            return
        try:
            reply = ("ok", fn(admin, *args))
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if hasattr(err, "code"):
                reply = ("error", (str(exc), err.code(), bool(err.retriable()), err.str()))
            else:
                reply = ("error", (str(exc), None, False, None))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the caller
            reply = ("error", (f"{type(exc).__name__}: {exc}", None, False, None))
        _write(stdout, reply)


if __name__ == "__main__":
    _serve()
