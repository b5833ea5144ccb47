"""The one error type users see.

Everything a user can cause (a bad config file, an unreachable cluster, a missing
ACL, malformed bytes on an internal topic) is raised as a SparkmirrorError whose
message names where the problem is (file, line, cluster, topic) and what to do.
The CLI prints it as one line and exits with its exit code; it never prints a
bare traceback for these.
"""

from __future__ import annotations

#: Longest message shown; a config value quoted in one can be megabytes long.
MAX_MESSAGE = 2000
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}


def one_line(text: str | None, limit: int = MAX_MESSAGE) -> str | None:
    """``text`` as one printable line of at most about ``limit`` characters.

    Control characters (a CR or NUL read from a hostile file) are escaped, so a
    message can neither forge another log line nor corrupt a terminal.
    """
    if text is None:
        return None
    if len(text) > limit:
        text = f"{text[:limit - 200]} ...[{len(text) - limit + 100} characters]... {text[-100:]}"
    return text.translate(_CONTROL)


class SparkmirrorError(Exception):
    """A problem the user can fix. ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        cluster: str | None = None,
        topic: str | None = None,
        hint: str | None = None,
    ) -> None:
        message = one_line(message)
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.cluster = one_line(cluster)
        self.topic = one_line(topic)
        self.hint = one_line(hint)

    def location(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or ""

    def __str__(self) -> str:
        parts = []
        loc = self.location()
        text = self.message
        context = []
        if self.cluster:
            context.append(f"cluster {self.cluster}")
        if self.topic:
            context.append(f"topic {self.topic}")
        if context:
            text = f"{text} ({', '.join(context)})"
        if loc:
            parts.append(f"{loc}: {text}")
        else:
            parts.append(text)
        if self.hint:
            parts.append(self.hint)
        return " — ".join(parts)


class ConfigError(SparkmirrorError):
    """The configuration (mm2.properties or command-line options) is wrong."""

    exit_code = 2


class ConfigErrors(ConfigError):
    """Several configuration problems found in one pass, reported together."""

    def __init__(self, errors: list[ConfigError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class UsageError(SparkmirrorError):
    """The command line is wrong."""

    exit_code = 2


class RecordFormatError(SparkmirrorError):
    """Bytes on an internal topic do not decode as the MM2 record they should be."""

    exit_code = 2


class ClusterError(SparkmirrorError):
    """A cluster cannot be reached or refused an operation."""

    exit_code = 1
