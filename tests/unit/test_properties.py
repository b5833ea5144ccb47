"""The .properties reader must read mm2.properties exactly as Java's Properties.load does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.errors import ConfigError
from sparkmirror.model.properties import Entry, Properties, parse_properties


def values(text: str) -> dict[str, str]:
    return {k: e.value for k, e in parse_properties(text, "t.properties").items()}


def lines(text: str) -> dict[str, int]:
    return {k: e.line for k, e in parse_properties(text, "t.properties").items()}


# --- a Java-style writer, the same rules as Properties.store (saveConvert) ---------


def java_escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if 61 < code < 127:
            out.append("\\\\" if ch == "\\" else ch)
        elif ch == " ":
            out.append("\\ " if (i == 0 or is_key) else " ")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif code < 0x20 or code > 0x7E:
            for unit in _utf16_units(ch):
                out.append(f"\\u{unit:04X}")
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


# --- separators, comments, blank lines ------------------------------------------


def test_three_separators_and_surrounding_whitespace():
    text = "a=1\nb : 2\nc 3\n  d\t=\t4\ne\f:5\n"
    assert values(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}


def test_only_one_separator_is_consumed_after_whitespace():
    # Java: key "a", whitespace, '=' consumed, whitespace, then "= b" is the value
    assert values("a = = b") == {"a": "= b"}
    assert values("a==b") == {"a": "=b"}
    assert values("a:=b") == {"a": "=b"}


def test_key_without_value_and_trailing_whitespace_kept():
    assert values("lonely\nempty=\nspaced = v  \n") == {"lonely": "", "empty": "", "spaced": "v  "}


def test_comments_and_blank_lines_are_skipped_with_correct_line_numbers():
    text = "# comment\n! also comment\n\n   \n  # indented comment\nkey = v\n"
    assert lines(text) == {"key": 6}


def test_comment_line_is_never_continued():
    text = "# comment ending in backslash \\\nkey = v\n"
    assert values(text) == {"key": "v"}


def test_hash_inside_value_is_not_a_comment():
    assert values("a = b # not a comment") == {"a": "b # not a comment"}


# --- continuation lines -----------------------------------------------------------


def test_continuation_drops_leading_whitespace_of_next_line():
    text = "list = a,\\\n        b,\\\n\t c\nnext = 1\n"
    assert values(text) == {"list": "a,b,c", "next": "1"}
    assert lines(text) == {"list": 1, "next": 4}


def test_even_backslashes_do_not_continue():
    assert values("a = x\\\\\nb = y") == {"a": "x\\", "b": "y"}


def test_continued_line_starting_with_hash_is_content():
    assert values("a = 1\\\n  # two\n") == {"a": "1# two"}


def test_blank_continuation_line_ends_the_logical_line():
    assert values("a = 1\\\n\nb = 2") == {"a": "1", "b": "2"}


def test_trailing_backslash_at_end_of_file_is_dropped():
    assert values("a = 1\\") == {"a": "1"}


def test_jaas_config_over_several_lines():
    text = (
        "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="u" \\\n'
        '    password="p";\n'
    )
    assert values(text)["A.sasl.jaas.config"].endswith('required username="u" password="p";')


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_all_line_terminators(eol):
    text = eol.join(["a = 1", "b = x\\", "  y", "# c", "d = 4"])
    assert values(text) == {"a": "1", "b": "xy", "d": "4"}
    assert lines(text) == {"a": 1, "b": 2, "d": 5}


# --- escapes ----------------------------------------------------------------------


def test_escapes_in_values():
    assert values(r"a = tab\there\nnl\rcr\fff\u0041\\back\q") == {"a": "tab\there\nnl\rcr\fffA\\backq"}


def test_escaped_separators_and_spaces_in_keys():
    assert values(r"a\=b\:c\ d = v") == {"a=b:c d": "v"}
    assert values(r"\#not-comment = v") == {"#not-comment": "v"}


def test_regex_backslashes_are_consumed_like_java():
    # the reason the config model warns: \. in a .properties value is just '.'
    assert values(r"topics.exclude = .*[\-\.]internal, .*\.replica") == {
        "topics.exclude": ".*[-.]internal, .*.replica"
    }
    assert values(r"topics.exclude = .*\\.replica") == {"topics.exclude": r".*\.replica"}


def test_surrogate_pair_escape_is_one_character():
    assert values(r"emoji = \uD83D\uDE00") == {"emoji": "\U0001F600"}


def test_unicode_text_passes_through():
    assert values("k = 有効化") == {"k": "有効化"}


@pytest.mark.parametrize("bad", [r"a = \u12", r"a = \u12G4", "a = x\\u"])
def test_unterminated_unicode_escape_is_a_config_error_with_file_and_line(bad):
    with pytest.raises(ConfigError) as info:
        parse_properties("ok = 1\n" + bad + "\n", "mm2.properties")
    errors = getattr(info.value, "errors", [info.value])
    assert [(e.file, e.line) for e in errors] == [("mm2.properties", 2)]
    assert "\\u" in errors[0].message


def test_all_malformed_lines_are_reported_together():
    with pytest.raises(ConfigError) as info:
        parse_properties("a = \\u1\nb = ok\nc = \\uZZZZ\n", "f")
    assert [e.line for e in info.value.errors] == [1, 3]


# --- duplicates --------------------------------------------------------------------


def test_last_duplicate_wins_and_is_recorded():
    props = parse_properties("a = 1\nb = 2\na = 3\n", "f")
    assert isinstance(props, Properties)
    assert props["a"] == Entry("a", "3", 3)
    assert [(d.key, d.line, d.previous_line) for d in props.duplicates] == [("a", 3, 1)]
    assert list(props) == ["b", "a"]


def test_entry_is_frozen():
    entry = parse_properties("a=1", "f")["a"]
    with pytest.raises(AttributeError):
        entry.value = "2"  # type: ignore[misc]


# --- property tests ------------------------------------------------------------------

keys = st.text(min_size=1, max_size=20)
vals = st.text(max_size=40)


@given(st.dictionaries(keys, vals, max_size=8), st.sampled_from(["=", ":", " = ", " ", "\t:\t"]),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_round_trip_of_java_escaped_keys_and_values(data, sep, eol):
    text = eol.join(f"{java_escape(k, is_key=True)}{sep}{java_escape(v, is_key=False)}" for k, v in data.items())
    parsed = values(text)
    assert parsed == data


@given(st.text(min_size=1, max_size=15), st.text(max_size=60), st.data())
def test_continuations_anywhere_outside_escapes_do_not_change_the_value(key, value, data):
    escaped = java_escape(value, is_key=False)
    # legal split points: not inside an escape sequence, and not before whitespace
    # (Java drops the continued line's leading whitespace)
    safe = []
    i = 0
    while i < len(escaped):
        if escaped[i] == "\\":
            i += 6 if escaped[i + 1] == "u" else 2
        else:
            i += 1
        if i < len(escaped) and escaped[i] not in " \t\f":
            safe.append(i)
    cuts = sorted(set(data.draw(st.lists(st.sampled_from(safe), max_size=4)))) if safe else []
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(escaped[last:cut])
        last = cut
    pieces.append(escaped[last:])
    text = f"{java_escape(key, is_key=True)} = " + "\\\n    ".join(pieces) + "\n# trailing comment\n"
    assert values(text) == {key: value}


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.text(alphabet="xyz", max_size=3)), max_size=10))
def test_last_duplicate_wins_for_any_sequence(assignments):
    text = "\n".join(f"{k}={v}" for k, v in assignments)
    expected: dict[str, str] = {}
    for k, v in assignments:
        expected[k] = v
    parsed = parse_properties(text, "f")
    assert {k: e.value for k, e in parsed.items()} == expected
    assert len(parsed.duplicates) == len(assignments) - len(expected)
    for k, e in parsed.items():
        assert e.line == max(i + 1 for i, (kk, _) in enumerate(assignments) if kk == k)
