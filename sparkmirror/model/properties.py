"""A Java ``.properties`` reader that remembers where every key was written.

MM2 reads mm2.properties with ``java.util.Properties.load``; sparkmirror promises
to read the same file the same way, so this follows that method's grammar
exactly (separators, comments, continuation lines, escapes, last duplicate
wins) instead of a "close enough" INI parser. Unlike Java it keeps the line of
every key, because every configuration error we report names FILE:LINE.

Grammar, as implemented by ``Properties.load`` (JDK 9+):

* natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading spaces, tabs and
  form feeds are skipped; blank lines are ignored;
* a line whose first non-blank character is ``#`` or ``!`` is a comment, and a
  comment never continues onto the next line;
* an odd number of trailing backslashes joins the next natural line, whose
  leading whitespace is dropped (a trailing backslash at end of file is dropped);
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace and
  at most one ``=``/``:`` after it are skipped; the rest is the value, trailing
  whitespace included;
* escapes: ``\\t \\n \\r \\f``, ``\\uXXXX`` (exactly four hex digits, surrogate pairs
  combine), and a backslash before any other character means that character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sparkmirror.errors import ConfigError, ConfigErrors

_WHITESPACE = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Entry:
    """One key as written: its unescaped value and the line the key starts on.

    ``raw_value`` is the value text before unescaping (continuations joined); it
    lets the config model warn when the escaping changed what the user meant,
    e.g. a regex ``.*\\.replica`` that ``.properties`` turns into ``.*.replica``.
    """

    key: str
    value: str
    line: int
    raw_value: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Duplicate:
    """A key written more than once; the later one (``line``) wins, as in Java."""

    key: str
    line: int
    previous_line: int


class Properties(dict[str, Entry]):
    """``key -> Entry`` in file order, plus the duplicates seen while reading."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.duplicates: list[Duplicate] = []


def parse_properties(text: str, path: str) -> dict[str, Entry]:
    """Parse ``text`` (the content of ``path``) with Java's ``Properties.load`` rules.

    Returns a :class:`Properties` (a ``dict[str, Entry]``) whose ``duplicates``
    lists keys written more than once. Malformed ``\\uXXXX`` escapes are collected
    for the whole file and raised together as ConfigErrors naming file and line.
    """
    props = Properties(path)
    errors: list[ConfigError] = []
    for line_no, logical in _logical_lines(text):
        key_text, value_text = _split_key_value(logical)
        try:
            key = _unescape(key_text)
            value = _unescape(value_text)
        except ValueError as exc:
            errors.append(
                ConfigError(
                    str(exc),
                    file=path,
                    line=line_no,
                    hint="write a backslash as \\\\ or give exactly four hex digits after \\u",
                )
            )
            continue
        previous = props.pop(key, None)  # re-insert so file order follows the winner
        if previous is not None:
            props.duplicates.append(Duplicate(key, line_no, previous.line))
        props[key] = Entry(key, value, line_no, value_text)
    if errors:
        raise ConfigErrors(errors)
    return props


def _logical_lines(text: str):
    """Yield ``(first natural line number, logical line)``, continuations joined.

    The returned logical line has its leading whitespace removed and the
    backslash-newline pairs taken out, exactly like Java's LineReader.
    """
    lines = _LINE_BREAK.split(text)
    i = 0
    while i < len(lines):
        start = i + 1
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(lines):  # backslash at end of file: Java drops it
                break
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        yield start, "".join(parts)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line into raw (still escaped) key and value text."""
    escaped = False
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    for idx, c in enumerate(line):
        if not escaped and c in "=:":
            key_end, value_start, has_separator = idx, idx + 1, True
            break
        if not escaped and c in _WHITESPACE:
            key_end, value_start = idx, idx + 1
            break
        escaped = c == "\\" and not escaped
    while value_start < len(line):
        c = line[value_start]
        if c not in _WHITESPACE:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(text: str) -> str:
    """Apply Java's loadConvert: resolve escapes, combine UTF-16 surrogate pairs."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # only reachable for a lone trailing backslash; Java ignores it
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) < 4 or not set(digits) <= _HEX:
                raise ValueError(f"unterminated or malformed \\u escape: '\\u{digits}' needs four hex digits")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(c, c))
    return _combine_surrogates("".join(out))


def _combine_surrogates(text: str) -> str:
    """Java strings are UTF-16: ``\\uD83D\\uDE00`` is one character. Make it one here too."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if "\ud800" <= ch <= "\udbff" and "\udc00" <= nxt <= "\udfff":
            out.append(chr(0x10000 + ((ord(ch) - 0xD800) << 10) + (ord(nxt) - 0xDC00)))
            i += 2
        else:
            out.append(ch)  # a lone surrogate stays as Java would keep it
            i += 1
    return "".join(out)
