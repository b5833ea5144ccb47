"""The catastrophic-backtracking check: what it refuses, what it lets through, and that it never runs the regex."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sparkmirror.model.backtracking import MAX_POLYNOMIAL_DEGREE, backtracking_risk
from sparkmirror.model.config import TOPICS_EXCLUDE_DEFAULT
from sparkmirror.model.values import java_list

EXPONENTIAL = ["(a+)+$", "(a+)+", "(.*a){20}", "(a|aa)*b", "(a*)*", "(.*)*x", r"(\w+\d+)+", "(x+x+)+y",
               "^(([a-z])+.)+[A-Z]([a-z])+$", r"(\d+)*\.", "(a|b|ab)*c", "((a+)+|b)", "(?:a{1,5})+b", "(.+)+@",
               "(?=(a+)+b)c", "(?>(a+)+b)", "(a?){25}a{25}", "(?:(?:bb|a{0,5}){0,5}){0,5}", "(?:x?[ab](?:[ab]|.)){0,5}!", "(?i)(ab|AB)+c", "(" * 60 + "a" + ")*" * 60]
POLYNOMIAL = [".*a.*a.*a.*a", ".*a.*b.*c.*d", r"\d*\d*\d*\d*x", "[a-z]*[0-9]*[a-z]*[0-9]*[a-z]*[0-9]*[a-z]*x"]
HARMLESS = ["orders", ".*", r"orders\..*", r"(\w+\.)*x", "(?>a+)+", "a++", "[a-z]{1,64}", "(ab|a){1,100}",
            ".*prod.*orders.*v2.*", ".*a.*a.*a", r"(\d{1,3}\.){3}\d{1,3}", "(?i)orders|payments|users", r"[a-z0-9]+(-[a-z0-9]+)*",
            r"(\d+\.)*\d+", "(a|b)*c", "(a?)*b", r"dc1\.(orders|payments)\..*", r"[^.]+\.[^.]+",
            "(A|a)+x", r"(\w|\d)+!",  # Python's parser turns one-character alternatives into a set
            "|".join(f"topic-{i}" for i in range(2000)), "x" * 100_000,
            *java_list(TOPICS_EXCLUDE_DEFAULT), "console-consumer-.*", "connect-.*", "__.*"]


@pytest.mark.parametrize("pattern", EXPONENTIAL)
def test_exponential_patterns_are_refused(pattern):
    risk = backtracking_risk(pattern)
    assert risk is not None and risk.kind == "exponential", risk


@pytest.mark.parametrize("pattern", POLYNOMIAL)
def test_high_degree_polynomial_patterns_are_refused(pattern):
    risk = backtracking_risk(pattern)
    assert risk is not None and risk.kind == "polynomial" and risk.degree > MAX_POLYNOMIAL_DEGREE, risk
    assert f"n^{risk.degree}" in str(risk)


@pytest.mark.parametrize("pattern", HARMLESS, ids=lambda p: p[:40])
def test_harmless_patterns_pass(pattern):
    assert backtracking_risk(pattern) is None


def test_too_complex_to_check_is_refused_quickly():
    started = time.monotonic()
    risk = backtracking_risk("(?:" + "|".join(f"x{i:04d}" for i in range(2000)) + ")+")
    assert risk is not None and risk.kind == "too-complex"
    assert time.monotonic() - started < 10


# A small regex grammar over few characters, so that repeats overlap often.
_atoms = st.sampled_from(["a", "b", ".", "[ab]", r"\w", r"\d", "[^a]", "(?:)", "$", "^"])


def _regexes():
    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,12}", "*?", "++", "{11,}"])).map(
                "".join),
            st.lists(inner, min_size=2, max_size=4).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
            inner.map(lambda x: f"(?>{x})"),
            inner.map(lambda x: f"(?={x})"),
        )
    return st.recursive(_atoms, extend, max_leaves=12)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # repr of the recursive strategy
@settings(max_examples=300, deadline=None)
@given(_regexes())
def test_any_compilable_pattern_gets_an_answer_never_an_exception(pattern):
    try:
        re.compile(pattern)
    except re.error:
        assume(False)
    risk = backtracking_risk(pattern)
    assert risk is None or risk.kind in ("exponential", "polynomial", "too-complex")
