"""The typed values of mm2.properties: how one setting's text becomes a number, a flag, a list or a name.

Each parser reads a value the way MM2's ``ConfigDef`` does (Java's int and
long bounds, comma lists, regexes Java would compile) and raises InvalidValue
with the message and hint that the config model (:mod:`sparkmirror.model.config`)
puts next to the file's line. They know nothing of keys or layering, so every
setting that has the same type shares one parser.
"""

from __future__ import annotations

import difflib
import functools
import re
import warnings

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
KNOWN_POLICIES = (DEFAULT_POLICY, IDENTITY_POLICY)
#: What MM2 accepts as a cluster alias or a replication separator: it ends up in topic names.
ALIAS = re.compile(r"[A-Za-z0-9._-]+")
#: A value still holding a template's ``<...>`` placeholder.
PLACEHOLDER = re.compile(r".*<[^<>]*>.*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_GLOB_STAR = re.compile(r"(?<![.)\]}\\])\*")  # a '*' with nothing to repeat
# Java's int and long (MM2's ConfigDef types) and Kafka's INT16 replication factor bound the numbers;
# a loop interval also has to fit every timer that waits for it (threading's limit is 2^33 s).
INT16_MAX, INT32_MAX, INT64_MAX = 2**15 - 1, 2**31 - 1, 2**63 - 1
_MAX_INTERVAL = INT32_MAX
_MAX_REGEX_TEXT = 100_000


class InvalidValue(Exception):
    """A value its parser refuses: ``message`` follows the key in the error, ``hint`` says what to write."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def java_list(raw: str) -> list[str]:
    """ConfigDef LIST parsing: trim, then split on commas with surrounding whitespace."""
    text = raw.strip()
    return re.split(r"\s*,\s*", text) if text else []


def integer(raw: str) -> int:
    text = raw.strip()
    if not _INTEGER.fullmatch(text):
        raise InvalidValue(f"must be a whole number, got {text!r}")
    digits = len(text.lstrip("+-").lstrip("0"))
    if digits > 19:  # also keeps int() under Python's 4300-digit limit (a ValueError otherwise)
        raise InvalidValue(f"is a {digits}-digit number; MM2 reads it as a Java long (at most {2**63 - 1})")
    return int(text)


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise InvalidValue(f"must be true or false, got {raw.strip()!r}")
    return value == "true"


def interval(raw: str) -> int:
    seconds = integer(raw)
    if seconds > _MAX_INTERVAL:
        raise InvalidValue(f"must be at most {_MAX_INTERVAL} seconds (68 years), got {seconds}",
                           "use -1 to switch the loop off")
    if seconds == -1 or seconds > 0:
        return seconds  # MM2 schedules nothing for a negative interval: -1 means "off"
    raise InvalidValue(f"must be a positive number of seconds, or -1 to disable, got {seconds}")


def at_least(minimum: int, *, minus_one: str | None = None, maximum: int | None = None):
    def parse(raw: str) -> int:
        value = integer(raw)
        if (minus_one and value == -1) or (value >= minimum and (maximum is None or value <= maximum)):
            return value
        bound = f"between {minimum} and {maximum}" if maximum is not None and value > maximum else \
            f"at least {minimum}"
        raise InvalidValue(f"must be {bound}{f' (or -1 for {minus_one})' if minus_one else ''}, got {value}")
    return parse


def regex_list(raw: str) -> list[str]:
    return list(_regexes(raw))


@functools.lru_cache(maxsize=1024)
def _regexes(raw: str) -> tuple[str, ...]:
    """Cached: every flow of an n-cluster mesh reads the same top-level (or default) lists again."""
    if len(raw) > _MAX_REGEX_TEXT:  # Python's regex parser alone needs ~5 s per megabyte
        raise InvalidValue(f"is {len(raw)} characters long; sparkmirror reads at most {_MAX_REGEX_TEXT} characters "
                           "of patterns per setting", "topic names have at most 249 characters: list broader "
                           "patterns (orders\\..*) instead of every name")
    patterns = java_list(raw)
    for pattern in patterns:
        if PLACEHOLDER.fullmatch(pattern):
            raise InvalidValue(f"has the placeholder {pattern!r}; replace it with a real name or regex")
        try:
            with warnings.catch_warnings():  # Java-only class syntax: judged by the filters module
                warnings.simplefilter("ignore", FutureWarning)
                re.compile(pattern)
        except re.error as exc:
            hint = None
            if "*" in pattern:
                fixed = _GLOB_STAR.sub(".*", pattern)
                hint = f"did you mean {fixed}? (these are regexes, not globs)"
            raise InvalidValue(f"has an invalid regex {pattern!r}: {exc.msg}", hint) from None
    return tuple(patterns)


def policy_class(raw: str) -> str:
    value = raw.strip()
    if value in KNOWN_POLICIES:
        return value
    close = difflib.get_close_matches(value, KNOWN_POLICIES, n=1, cutoff=0.5)
    short = [p for p in KNOWN_POLICIES if p.rsplit(".", 1)[-1] == value.rsplit(".", 1)[-1]]
    suggestion = (short or close or [None])[0]
    raise InvalidValue(f"names an unknown replication policy {value!r}",
                       f"did you mean {suggestion}?" if suggestion else f"use one of {', '.join(KNOWN_POLICIES)}")


def separator(raw: str) -> str:
    if raw == "":
        raise InvalidValue("must not be empty", "to keep topic names unchanged use "
                           "replication.policy.class = " + IDENTITY_POLICY)
    if not ALIAS.fullmatch(raw):
        raise InvalidValue(f"{raw!r} would make illegal topic names (allowed: letters, digits, '.', '_', '-')")
    return raw


def choice(*options: str, lower: bool = False):
    def parse(raw: str) -> str:
        value = raw.strip().lower() if lower else raw.strip()
        if value not in options:
            raise InvalidValue(f"must be one of {', '.join(options)}, got {raw.strip()!r}")
        return value
    return parse


REPLICATION_FACTOR = at_least(1, minus_one="the broker default", maximum=INT16_MAX)  # a topic's replication factor
EXACTLY_ONCE = choice("disabled", "preparing", "enabled", lower=True)
EXACTLY_ONCE_CONNECTOR = choice("requested", "required", lower=True)
