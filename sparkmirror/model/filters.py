"""Which topics and consumer groups a flow replicates.

``TopicFilter`` and ``GroupFilter`` follow MM2's DefaultTopicFilter and
DefaultGroupFilter: ``topics``/``groups`` list the names to include and
``topics.exclude``/``groups.exclude`` the names to leave out, each entry a regex
matched against the WHOLE name (Java's ``Matcher.matches``), exclude wins, and an
empty include list matches nothing (MM2 turns a blank list into "no pattern").

Patterns are Python ``re`` patterns. For what people put in mm2.properties
(``.*``, ``orders\\..*``, ``[\\-\\.]``, ``(?i)``, possessive ``++``) the two
dialects agree. Java-only syntax that Python would read differently is refused
with a ConfigError instead of silently matching something else: character-class
set operations and nested classes (``[a-z&&[^x]]``), which Python flags with a
FutureWarning, and ``\\Q...\\E`` quoting, which Python rejects as a bad escape.
MM2 joins all entries with ``|`` into one regex; sparkmirror compiles each entry on
its own so that an error names the entry at fault and an entry cannot change the
meaning of its neighbours (only an entry that is not valid on its own differs).

Catastrophic backtracking: Python's ``re`` (like Java's) backtracks, so a pattern
such as ``(a+)+$`` (exponential) or ``(.*a){20}`` (n^20) can take minutes on one
unlucky name, and a filter runs on every topic and group at every refresh. Such
patterns are refused with a ConfigError when the filter is built
(``sparkmirror.model.backtracking`` says why); the regex is never run. Harmless
nested shapes such as ``(\\w+\\.)*orders`` and possessive or atomic forms
(``a++``, ``(?>a+)+``) are accepted.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable

from sparkmirror.errors import ConfigError
from sparkmirror.model.backtracking import backtracking_risk
from sparkmirror.model.policy import ReplicationPolicy

DEFAULT_TOPICS: tuple[str, ...] = (".*",)
DEFAULT_TOPICS_EXCLUDE: tuple[str, ...] = (r".*[\-\.]internal", r".*\.replica", r"__.*")
DEFAULT_GROUPS: tuple[str, ...] = (".*",)
DEFAULT_GROUPS_EXCLUDE: tuple[str, ...] = ("console-consumer-.*", "connect-.*", "__.*")

try:  # private, but stable across 3.11-3.13; the check is skipped if it moves
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover
    _sre_parse = None


def _compile(pattern: object, setting: str) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise ConfigError(f"{setting}: entry {pattern!r} is not a string")
    result = _checked(pattern)
    if isinstance(result, tuple):
        problem, hint = result
        raise ConfigError(f"{setting}: pattern {_shown(pattern)} {problem}", hint=hint)
    return result


@functools.lru_cache(maxsize=4096)
def _checked(pattern: str) -> re.Pattern[str] | tuple[str, str | None]:
    """The compiled pattern, or (problem, hint). Cached: every flow of a large mesh asks again."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        try:
            if _sre_parse is not None:
                # re.compile is cached and warns only once per process; the parser always warns.
                _sre_parse.parse(pattern)
            compiled = re.compile(pattern)
        except FutureWarning as exc:
            return (f"uses Java-only character-class syntax ({exc})",
                    "list the characters explicitly, e.g. [a-wyz] instead of [a-z&&[^x]]")
        except re.error as exc:
            quoting = "\\Q" in pattern
            return f"is not a valid regex ({exc})", (
                "\\Q...\\E quoting is Java-only; escape the characters with a backslash" if quoting else None)
    risk = backtracking_risk(pattern)
    if risk is not None:
        return (f"would backtrack catastrophically: {risk}",
                "refused so that one topic or group name cannot stall replication; drop the nested repeat "
                "((a+)+ -> a+), split it into several comma-separated entries, or make the repeat possessive "
                "(a++) or atomic ((?>...)), which Java's regex reads the same way")
    return compiled


def _shown(pattern: str, limit: int = 200) -> str:
    """The pattern for a message: repr, cut short (a value can be megabytes long)."""
    return repr(pattern) if len(pattern) <= limit else f"{pattern[:limit]!r}... ({len(pattern)} characters)"


class _PatternList:
    """Compiled include/exclude lists; each entry must match the whole name."""

    def __init__(self, include: Iterable[str], exclude: Iterable[str], kind: str) -> None:
        for value, setting in ((include, kind), (exclude, f"{kind}.exclude")):
            if isinstance(value, str):
                raise TypeError(f"{setting} must be a list of patterns, not one string")
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self._include = [_compile(p, kind) for p in self.include]
        self._exclude = [_compile(p, f"{kind}.exclude") for p in self.exclude]

    def accepts(self, name: str) -> bool:
        if not any(p.fullmatch(name) for p in self._include):
            return False
        return not any(p.fullmatch(name) for p in self._exclude)


class TopicFilter:
    """MM2's DefaultTopicFilter: ``topics`` minus ``topics.exclude``."""

    def __init__(
        self,
        include: Iterable[str] = DEFAULT_TOPICS,
        exclude: Iterable[str] = DEFAULT_TOPICS_EXCLUDE,
    ) -> None:
        self._patterns = _PatternList(include, exclude, "topics")
        self.include = self._patterns.include
        self.exclude = self._patterns.exclude

    def __repr__(self) -> str:
        return f"TopicFilter(include={list(self.include)!r}, exclude={list(self.exclude)!r})"

    def should_replicate_topic(self, topic: str) -> bool:
        return self._patterns.accepts(topic)


class GroupFilter:
    """MM2's DefaultGroupFilter: ``groups`` minus ``groups.exclude``."""

    def __init__(
        self,
        include: Iterable[str] = DEFAULT_GROUPS,
        exclude: Iterable[str] = DEFAULT_GROUPS_EXCLUDE,
    ) -> None:
        self._patterns = _PatternList(include, exclude, "groups")
        self.include = self._patterns.include
        self.exclude = self._patterns.exclude

    def __repr__(self) -> str:
        return f"GroupFilter(include={list(self.include)!r}, exclude={list(self.exclude)!r})"

    def should_replicate_group(self, group: str) -> bool:
        return self._patterns.accepts(group)


def is_cycle(policy: ReplicationPolicy, target_alias: str, topic: str) -> bool:
    """True if ``topic`` came from ``target_alias`` at any hop (MirrorSourceConnector.isCycle).

    This is what stops active-active A<->B from sending ``A.orders`` back to A: its
    source is A. It walks upstream (``B.A.orders`` -> ``A.orders``) and stops when
    the policy cannot tell (Identity returns the topic itself as its upstream).
    """
    seen: set[str] = set()
    while True:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic or upstream in seen:
            return False
        seen.add(topic)
        topic = upstream


def replicable_topic(
    policy: ReplicationPolicy,
    topic_filter: TopicFilter,
    target_alias: str,
    topic: str,
    *,
    heartbeats_replication_enabled: bool = True,
) -> bool:
    """MirrorSourceConnector.shouldReplicateTopic for one source topic of a flow to ``target_alias``.

    (filter passes, or it is a heartbeats topic and heartbeats.replication.enabled)
    and it is not internal and it would not close a cycle.
    """
    wanted = topic_filter.should_replicate_topic(topic) or (
        heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    return wanted and not policy.is_internal_topic(topic) and not is_cycle(policy, target_alias, topic)
