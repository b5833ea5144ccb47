"""How every sparkmirror command logs: human-readable lines, or one JSON object per line.

``--log-format json`` is for log shippers (Fluent Bit, Vector, Promtail, the Kubernetes
logging stacks): each line is an object with ``time`` (UTC, ISO 8601, milliseconds),
``level``, ``logger``, ``message``, ``thread``, and — where the code knows them — ``flow``,
``cluster``, ``topic`` and ``partition``, plus ``exception`` with the formatted traceback
when there is one. Those fields come from ``extra=`` on a log call or from
:func:`log_context`, which a thread working for one flow (heartbeats, topic refresh,
checkpoints) sets once so every line it logs carries the flow.

Spark's own JVM logging (log4j) is routed the same way: in JSON mode the replicator starts
the driver JVM with a log4j2 configuration whose layout writes the same fields
(:func:`spark_log4j_options`), so stderr holds one format only. Messages are written by
sparkmirror's own code, which never puts a secret in a message; JSON encoding does not
change that.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
import time

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Fields a record may carry (``extra=`` or :func:`log_context`), written when present.
CONTEXT_FIELDS = ("flow", "cluster", "topic", "partition")

_context = threading.local()


class LibrdkafkaLog:
    """librdkafka's own log lines (connection refused every backoff...) at DEBUG only, with the cluster.

    Pass as a confluent-kafka client's ``logger``. What a person must know (a cluster down,
    credentials refused) is reported by the code that called the client; repeating it on
    stderr every few seconds helps nobody. A line that does not format is dropped: this
    runs on librdkafka's threads, where an exception helps nobody either.
    """

    def __init__(self, logger_name: str, cluster: str) -> None:
        self._log = logging.getLogger(logger_name)
        self._fields = {"cluster": cluster}

    def log(self, _level: int, fmt: str, *args) -> None:
        if not self._log.isEnabledFor(logging.DEBUG):
            return
        try:
            self._log.debug(fmt % args if args else fmt, extra=self._fields)
        except Exception:
            pass


@contextlib.contextmanager
def log_context(**fields):
    """Stamp every record logged by this thread inside the block with ``fields``."""
    before = dict(getattr(_context, "fields", {}))
    _context.fields = {**before, **{k: v for k, v in fields.items() if v is not None}}
    try:
        yield
    finally:
        _context.fields = before


def set_thread_context(**fields) -> None:
    """Like :func:`log_context` for the rest of the current thread's life (thread targets)."""
    _context.fields = {**getattr(_context, "fields", {}), **{k: v for k, v in fields.items() if v is not None}}


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in getattr(_context, "fields", {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in messages are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        for key in CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value if isinstance(value, (int, float, bool)) else str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, ensure_ascii=False, default=str)


def configure(log_format: str = "text", verbose: bool = False) -> None:
    """Install the root handler (stderr) once, for the whole process."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler(_json_stderr() if log_format == "json" else None)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.captureWarnings(True)  # Python warnings (pyspark's among them) in the same format
    _state["format"] = log_format


_state = {"format": "text"}


def _json_stderr():
    """Make everything else written to this process's stderr JSON too, and return the
    stream the logging handler writes to (the real stderr).

    Not every line reaches a logger: the JVM launcher prints ``WARNING: Using incubator
    modules`` before log4j starts, native libraries print directly. So fd 2 becomes a pipe,
    inherited by child processes (Spark's JVM, its Python workers); a thread copies each line
    to the real stderr, as is when it already is a JSON object, else wrapped as
    ``{"logger": "stderr", "message": line}``."""
    if "stream" in _state:
        return _state["stream"]
    real = os.dup(2)
    stream = os.fdopen(real, "w", buffering=1, encoding="utf-8", errors="replace")
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    lock = threading.Lock()

    def copy() -> None:
        with os.fdopen(read_fd, "r", encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                text = line.rstrip("\n")
                if not text.strip():
                    continue
                if not (text.startswith("{") and text.endswith("}")):
                    now = time.time()
                    text = json.dumps({
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z",
                        "level": "WARNING" if "warn" in text[:20].lower() else "INFO",
                        "logger": "stderr", "message": text}, ensure_ascii=False)
                with lock:
                    stream.write(text + "\n")

    reader = threading.Thread(target=copy, name="stderr-json", daemon=True)
    reader.start()

    def drain() -> None:  # at exit: close our ends of the pipe, let the copier finish
        try:
            sys.stderr.flush()
            os.dup2(real, 2)
            sys.stderr.close()
        except OSError:
            pass
        reader.join(2)

    atexit.register(drain)
    _state["stream"] = _LockedStream(stream, lock)
    return _state["stream"]


class _LockedStream:
    """The real stderr, shared by the logging handler and the copier thread line by line."""

    def __init__(self, stream, lock) -> None:
        self._stream, self._lock = stream, lock

    def write(self, text: str) -> int:
        with self._lock:
            return self._stream.write(text)

    def flush(self) -> None:
        with self._lock:
            self._stream.flush()


def current_format() -> str:
    return _state["format"]


#: log4j2 configuration for Spark's JVM in JSON mode: the same field names as
#: JsonFormatter, each value JSON-escaped by the layout's ``%enc{...}{JSON}``.
_LOG4J2_JSON = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.alwaysWriteExceptions = false
appender.console.layout.pattern = {"time":"%d{yyyy-MM-dd'T'HH:mm:ss.SSS'Z'}{UTC}","level":"%enc{%p}{JSON}","logger":"%enc{%c}{JSON}","message":"%enc{%m}{JSON}","thread":"%enc{%t}{JSON}","source":"spark"%notEmpty{,"exception":"%enc{%throwable}{JSON}"}}%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
"""


def spark_log4j_options() -> dict[str, str]:
    """Spark settings that make the driver JVM (and local-mode executors) log JSON lines.

    Only in JSON mode, and only where sparkmirror launches the JVM itself (local master):
    under spark-submit the JVM's logging is the submitter's to configure (README)."""
    if current_format() != "json":
        return {}
    fd, name = tempfile.mkstemp(prefix="sparkmirror-log4j2-", suffix=".properties")
    with open(fd, "w") as f:
        f.write(_LOG4J2_JSON)
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{name}"}
