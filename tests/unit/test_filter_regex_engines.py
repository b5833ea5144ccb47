"""Real-world MM2 topic and group filters: which a linear-time engine (RE2) could run instead of ``re``.

The corpus is what MM2 users write in ``topics``/``groups`` and their ``.exclude``
lists (MM2's own defaults, the seed articles' files, and the Java-regex features
the filter docs name). Each entry records whether sparkmirror's filter accepts
it today and whether RE2 (``google-re2``) compiles it; docs/filters.md gives the
decision these verdicts support.
"""

from __future__ import annotations

import pytest

from sparkmirror.errors import ConfigError
from sparkmirror.model.filters import TopicFilter

# (pattern, where it comes from, sparkmirror accepts, RE2 compiles, names it must match / not match)
CORPUS = [
    (".*", "MM2's default topics and groups", True, True, ["orders", "a.b-c"], []),
    (r".*[\-\.]internal", "MM2's default topics.exclude", True, True, ["x.internal", "x-internal"], ["internal"]),
    (r".*\.replica", "MM2's default topics.exclude", True, True, ["x.replica"], ["xreplica"]),
    ("__.*", "MM2's default topics.exclude and groups.exclude", True, True, ["__consumer_offsets"], ["_x"]),
    ("console-consumer-.*", "MM2's default groups.exclude", True, True, ["console-consumer-1"], ["console"]),
    ("connect-.*", "MM2's default groups.exclude", True, True, ["connect-mm2"], ["kconnect-x"]),
    ("orders|payments|users", "seed src->dst.topics", True, True, ["payments"], ["orders2"]),
    ("toa.evehicles-latest-dev", "seed source->destination.topics", True, True, ["toa.evehicles-latest-dev"], []),
    (r"orders\..*", "the filter docs' prefix example", True, True, ["orders.eu"], ["ordersXeu"]),
    (r"prod\.(orders|payments)\..*", "a prefix with alternatives", True, True, ["prod.orders.v1"], ["prod.users.v1"]),
    ("(?i)orders.*", "case-insensitive flag", True, True, ["ORDERS.eu"], ["shipments"]),
    (r"(\w+\.)*orders", "nested repeat the backtracking check lets through", True, True, ["a.b.orders"], ["a.b"]),
    ("a++", "possessive repeat (Java; the backtracking hint suggests it)", True, False, ["aaa"], ["b"]),
    ("(?>a+)+", "atomic group (Java; the backtracking hint suggests it)", True, False, ["aaa"], ["b"]),
    ("(?!internal).*", "negative lookahead: 'everything but' in one include entry", True, False,
     ["orders"], ["internal.x"]),
    (".*(?<!-internal)", "negative lookbehind: 'not ending in'", True, False, ["orders"], ["x-internal"]),
    (r"(\w+)-\1", "backreference", True, False, ["a-a"], ["a-b"]),
    (r"\Qorders.eu\E", "Java quoting: refused by sparkmirror (Python reads it otherwise)", False, True, [], []),
    ("[a-z&&[^x]]+", "Java class intersection: refused by sparkmirror; RE2 reads it as a plain class",
     False, True, [], []),
    ("(a+)+$", "catastrophic nested repeat: refused by sparkmirror, linear in RE2", False, True, [], []),
]
IDS = [entry[0] for entry in CORPUS]


@pytest.mark.parametrize("pattern, origin, accepted, _re2, matches, rejects", CORPUS, ids=IDS)
def test_sparkmirror_filter_verdict_on_real_world_patterns(pattern, origin, accepted, _re2, matches, rejects):
    if not accepted:
        with pytest.raises(ConfigError):
            TopicFilter([pattern], ())
        return
    topic_filter = TopicFilter([pattern], ())
    assert all(topic_filter.should_replicate_topic(n) for n in matches), origin
    assert not any(topic_filter.should_replicate_topic(n) for n in rejects), origin


@pytest.mark.parametrize("pattern, origin, _accepted, compiles, matches, rejects", CORPUS, ids=IDS)
def test_re2_verdict_on_real_world_patterns(pattern, origin, _accepted, compiles, matches, rejects):
    re2 = pytest.importorskip("re2", reason="google-re2 is only needed to re-check this evaluation")
    try:
        compiled = re2.compile(pattern)
    except re2.error:
        assert not compiles, f"RE2 now compiles {pattern!r} ({origin}): revisit the engine decision"
        return
    assert compiles, f"RE2 compiles {pattern!r} ({origin}), recorded as refused"
    assert all(compiled.fullmatch(n) for n in matches), origin
    assert not any(compiled.fullmatch(n) for n in rejects), origin
