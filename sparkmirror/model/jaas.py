"""Kafka's ``sasl.jaas.config`` value: the one login module it names, its flag and its options.

The librdkafka translation (:mod:`sparkmirror.model.clients`) reads a SASL
login's username and password, keytab and principal, or OAuth client from
these options. The grammar is Kafka's JaasConfig (a Java StreamTokenizer), not
a split on spaces, because quoted values may hold ``;``, ``=``, spaces and
backslash escapes, and real passwords do. Errors name an option, never a value:
the value may be a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class JaasLogin:
    """The one login module a ``sasl.jaas.config`` value may hold."""

    module: str
    flag: str
    options: dict[str, str]


_JAAS_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<punct>[=;])|(?P<word>[^\s=;"]+)""",
    re.DOTALL,
)
_JAAS_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def parse_jaas(text: str) -> JaasLogin:
    """Parse ``Module flag key="value" ...;`` the way Kafka's JaasConfig (a StreamTokenizer) does.

    Quoted values may contain ``;``, ``=``, spaces and backslash escapes, which
    is exactly where naive splitting on spaces breaks real passwords.
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if not match:
            raise ValueError(f"unterminated quoted value at character {pos + 1}")
        pos = match.end()
        if match.group("quoted") is not None:
            tokens.append(("value", _unquote(match.group("quoted")[1:-1])))
        elif match.group("punct"):
            tokens.append((match.group("punct"), match.group("punct")))
        elif match.group("word"):
            tokens.append(("word", match.group("word")))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("expected '<LoginModule class> <flag> key=\"value\" ... ;'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError(f"{flag!r} is not a JAAS control flag (required, requisite, sufficient, optional)")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in (
                "word", "value"):
            # Name the option before, never its value: that is where the password is.
            where = f"the value of {tokens[i - 3][1]!r}" if i > 2 else repr(flag)
            raise ValueError(f"expected key=\"value\" after {where}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ValueError("missing ';' at the end")
    if i + 1 != len(tokens):
        raise ValueError("Kafka allows exactly one login module in sasl.jaas.config")
    return JaasLogin(module, flag.lower(), options)


def _unquote(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            octal = re.match(r"[0-7]{1,3}", body[i + 1 :])
            if octal and int(octal.group(0), 8) < 256:
                out.append(chr(int(octal.group(0), 8)))
                i += 1 + len(octal.group(0))
                continue
            out.append(_JAAS_ESCAPES.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)
