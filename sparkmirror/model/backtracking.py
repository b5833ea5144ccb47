"""Find the topic and group regexes that would backtrack catastrophically, before any name is matched.

Python's ``re`` (like Java's ``java.util.regex``, which MM2 uses) is a
backtracking matcher: on a name that does *not* match it tries every way the
pattern could have read the name. ``(a+)+$`` has 2^n ways to read n ``a``s, so a
30-character topic name takes minutes; ``.*a.*a.*a.*a`` has about n^4, seconds
for one 249-character name. A filter runs on every topic and group at every
refresh, so one such entry in mm2.properties would stall the replicator and
the monitor. They are refused when the configuration is read; the regex is
never run.

The check follows Weideman, van der Merwe, Berglund and Watson, "Analyzing
Matching Time Behavior of Backtracking Regular Expression Matchers by Using
Ambiguity of NFA" (2016), on an NFA built the way the matcher walks the pattern
(every epsilon path is one thing the matcher tries):

* **exponential** when a state can come back to itself in two different ways
  reading the same text: in the automaton of pairs of states, a cycle through
  a diagonal pair (q, q) leaves the diagonal, or takes two epsilon paths;
* **polynomial of degree d** when d loops can read the same text in a chain
  (p -> p and p -> q on one text, p -> q and q -> q on one text, ...); the
  matcher then tries about n^d splits. CPython needs 0.05 s for degree 3 and
  4 s for degree 4 on a 249-character name, so degree 4 and more is refused.

Approximations, each on the side of refusing: characters are a sample (every
character the pattern names, its neighbours, ASCII and a few non-ASCII
letters, digits and spaces); a bounded repeat is unrolled only when it repeats
a plain run of characters at most 10 times and is read as unbounded otherwise;
lookarounds and atomic bodies are also checked on their own. On the other side:
back-references read as empty; an atomic group or possessive repeat, which
the matcher never re-enters, reads as one step; an iteration must read
something before the loop repeats (as in ``re``); and a trailing loop over
every character that may end the match (``.*`` at the end) stops the search,
as the matcher succeeds there.
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass

try:  # private, but stable across 3.11-3.13 (filters.py uses it too)
    from re import _constants as _c
    from re import _parser as _p
except ImportError:  # pragma: no cover
    _c = _p = None

#: Polynomial degrees above this one are refused (see the module doc for the measurement).
MAX_POLYNOMIAL_DEGREE = 3
_UNROLL = 10
_MAX_STATES = 400_000  # a 100,000-character pattern (values.py reads no longer ones) fits
_MAX_STEPS = 2_000_000  # work budget of one analysis; beyond it the pattern is "too complex"
_SAMPLE = (set(string.printable) - {"\n"}) | set("éßΣЖ中٣\u00a0\u2028\x00\x7f\U0001F600")
_READS = frozenset({_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN}) if _c else frozenset()  # read one character
_CATEGORIES = {"DIGIT": r"\d", "NOT_DIGIT": r"\D", "SPACE": r"\s", "NOT_SPACE": r"\S", "WORD": r"\w",
               "NOT_WORD": r"\W", "LINEBREAK": r"\n", "NOT_LINEBREAK": r"[^\n]"}


@dataclass(frozen=True)
class Risk:
    """Why a pattern is refused: ``kind`` is exponential, polynomial (with ``degree``) or too-complex."""

    kind: str
    degree: int | None = None

    def __str__(self) -> str:
        if self.kind == "exponential":
            return "nested or overlapping repeats can read the same text in exponentially many ways"
        if self.kind == "polynomial":
            return (f"{self.degree} repeats in a row can share the same text, about n^{self.degree} attempts "
                    "on an n-character name")
        return "too large or nested to be checked for catastrophic backtracking"


class _TooComplex(Exception):
    pass


@functools.lru_cache(maxsize=2048)
def backtracking_risk(pattern: str) -> Risk | None:
    """None if matching ``pattern`` is at most cubic in the name's length, else why it is not.

    ``pattern`` must already compile; the regex itself is never run.
    """
    if _p is None:  # pragma: no cover - parser moved; refuse nothing rather than everything
        return None
    try:
        parsed = _p.parse(pattern)
        if not any(op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) for op, _ in _walk(parsed)):
            return None  # without a repeat every attempt is bounded by the pattern's length
        return _Analysis(parsed, parsed.state.flags, [0]).risk()
    except re.error:
        return None  # not a regex at all: compiling it reports that
    except (_TooComplex, RecursionError):
        return Risk("too-complex")


def _walk(items):
    """Every (op, av) node of a parsed pattern, nested ones included."""
    for op, av in items:
        yield op, av
        if op != _c.IN:
            yield from _walk_within(av)


def _walk_within(value):
    if isinstance(value, _p.SubPattern):
        yield from _walk(value)
    elif isinstance(value, (tuple, list)):
        for part in value:
            yield from _walk_within(part)


def _nullable(items) -> bool:
    for op, av in items:
        if op in _READS or (op == _c.SUBPATTERN and not _nullable(av[3])) or (
                op == _c.BRANCH and not any(_nullable(alt) for alt in av[1])) or (
                op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) and av[0] and not _nullable(av[2])) or (
                op == _c.ATOMIC_GROUP and not _nullable(av)):
            return False
    return True


def _plain(items) -> bool:
    """A fixed run of characters and anchors: no choice the matcher could come back to."""
    return all(op in _READS or op == _c.AT or (op == _c.SUBPATTERN and _plain(av[3])) for op, av in items)


# ---------------------------------------------------------------------------- characters


class _Alphabet:
    """Sample characters; a character class becomes the bit mask of the samples it contains."""

    def __init__(self, tree) -> None:
        chars = set(_SAMPLE)
        for op, av in _walk(tree):
            codes = [av] if op in (_c.LITERAL, _c.NOT_LITERAL) else av if op == _c.RANGE else []
            chars.update(chr(c) for code in codes for c in (code - 1, code, code + 1) if 0 <= c <= 0x10FFFF)
        chars.discard("\n")
        self.chars = sorted(chars)
        self.index = {ch: i for i, ch in enumerate(self.chars)}
        self.full = (1 << len(self.chars)) - 1
        self._masks: dict[tuple, int] = {}

    def mask(self, op, av, flags: int) -> int:
        if op == _c.LITERAL and not flags & re.IGNORECASE:
            return 1 << self.index[chr(av)] if chr(av) in self.index else 0
        key = (op, repr(av), flags)
        if key not in self._masks:
            test = _char_test(op, av, flags)
            self._masks[key] = sum(1 << i for i, ch in enumerate(self.chars) if test(ch))
        return self._masks[key]


def _char_test(op, av, flags: int):
    """A predicate for one character-reading node (LITERAL, NOT_LITERAL, ANY, IN)."""
    fold = bool(flags & re.IGNORECASE)

    def variants(ch: str) -> set[int]:
        return {ord(v) for v in (ch, ch.lower(), ch.upper()) if len(v) == 1} if fold else {ord(ch)}

    if op == _c.LITERAL:
        return lambda ch: av in variants(ch)
    if op == _c.NOT_LITERAL:
        return lambda ch: av not in variants(ch)
    if op == _c.ANY:
        return lambda ch: True
    negate = bool(av) and av[0][0] == _c.NEGATE
    tests = []
    for item_op, item_av in av[1:] if negate else av:
        if item_op == _c.LITERAL:
            tests.append(lambda ch, code=item_av: code in variants(ch))
        elif item_op == _c.RANGE:
            tests.append(lambda ch, lo=item_av[0], hi=item_av[1]: any(lo <= v <= hi for v in variants(ch)))
        elif item_op == _c.CATEGORY:
            name = str(item_av).removeprefix("CATEGORY_").removeprefix("UNI_")
            regex = re.compile(_CATEGORIES.get(name, r"[\s\S]"), re.ASCII if flags & re.ASCII else 0)
            tests.append(lambda ch, regex=regex: regex.fullmatch(ch) is not None)
        else:  # unexpected: say it reads anything (errs towards refusing)
            tests.append(lambda ch: True)
    return lambda ch: negate != any(t(ch) for t in tests)


# ---------------------------------------------------------------------------- the NFA


class _Analysis:
    def __init__(self, tree, flags: int, steps: list[int]) -> None:
        self.alphabet = _Alphabet(tree)
        self.eps: list[list[tuple[int, tuple[str, int] | None]]] = []  # state -> (target, loop tag)
        self.label: dict[int, int] = {}  # char state -> mask of the characters it reads
        self.out: dict[int, int] = {}    # char state -> the state after the character
        self.loops = 0
        self.steps = steps  # shared with nested analyses: one budget per pattern
        self.nested: list[Risk] = []
        self.start, self.final = self._seq(tree, flags)

    def _tick(self, n: int = 1) -> None:
        self.steps[0] += n
        if self.steps[0] > _MAX_STEPS:
            raise _TooComplex

    def _state(self) -> int:
        if len(self.eps) >= _MAX_STATES:
            raise _TooComplex
        self.eps.append([])
        return len(self.eps) - 1

    def _char(self, mask: int) -> tuple[int, int]:
        s, e = self._state(), self._state()
        self.label[s], self.out[s] = mask, e
        return s, e

    def _link(self, a: int, b: int, tag: tuple[str, int] | None = None) -> None:
        self.eps[a].append((b, tag))

    def _seq(self, items, flags: int) -> tuple[int, int]:
        start = cur = self._state()
        for op, av in items:
            a, b = self._node(op, av, flags)
            self._link(cur, a)
            cur = b
        return start, cur

    def _node(self, op, av, flags: int) -> tuple[int, int]:
        self._tick()
        if op in _READS:
            return self._char(self.alphabet.mask(op, av, flags))
        if op == _c.SUBPATTERN:
            return self._seq(av[3], (flags | av[1]) & ~av[2])
        if op in (_c.BRANCH, _c.GROUPREF_EXISTS):
            alternatives = av[1] if op == _c.BRANCH else [av[1], av[2] if av[2] is not None else []]
            s, e = self._state(), self._state()
            for alt in alternatives:
                a, b = self._seq(alt, flags)
                self._link(s, a)
                self._link(b, e)
            return s, e
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            low, high, body = av
            if min(low, high) > _UNROLL and _nullable(body) and any(o in _READS for o, _ in _walk(body)):
                self.nested.append(Risk("exponential"))  # (a?){25}: each must-do iteration reads 0 or 1
            # Unrolled, a bounded repeat of anything with choices inside ((a{0,5}){0,5}, (x|.y){5})
            # multiplies their ways to read a name; read as unbounded, that shows as exponential.
            if high > _UNROLL or (high > 1 and not _plain(body)):
                high = _c.MAXREPEAT
            return self._repeat(low, high, lambda: self._seq(body, flags))
        if op in (_c.POSSESSIVE_REPEAT, _c.ATOMIC_GROUP):
            body = av[2] if op == _c.POSSESSIVE_REPEAT else av
            self._check_alone(body, flags)  # an atomic body backtracks inside until it first succeeds
            mask = 0
            for inner_op, inner_av in _walk(body):
                if inner_op in _READS:
                    mask |= self.alphabet.mask(inner_op, inner_av, flags)
            first, e = self._char(mask)
            if (op == _c.POSSESSIVE_REPEAT and av[0] == 0) or _nullable(body):
                skip = self._state()  # it may read nothing: the step can be left out
                self._link(skip, first)
                self._link(skip, e)
                return skip, e
            return first, e
        if op in (_c.ASSERT, _c.ASSERT_NOT):
            self._check_alone(av[1], flags)
        s = self._state()  # anchors, lookarounds, back-references: read as empty
        return s, s

    def _repeat(self, low: int, high: int, body) -> tuple[int, int]:
        start = cur = self._state()
        unbounded = high == _c.MAXREPEAT
        for _ in range(min(low, 3) if unbounded else low):
            a, b = body()
            self._link(cur, a)
            cur = b
        if unbounded:
            loop, self.loops = self.loops, self.loops + 1
            s, e = self._state(), self._state()
            a, b = body()
            self._link(s, a, ("in", loop))
            self._link(s, e)
            self._link(b, s, ("back", loop))
            self._link(cur, s)
            return start, e
        skips = []
        for _ in range(high - low):
            a, b = body()
            skips.append(cur)
            self._link(cur, a)
            cur = b
        for skip in skips:
            self._link(skip, cur)
        return start, cur

    def _check_alone(self, body, flags: int) -> None:
        risk = _Analysis(body, flags, self.steps).risk()
        if risk is not None:
            self.nested.append(risk)

    # ------------------------------------------------------------------------ analysis

    def _closure(self, state: int) -> dict[int, int]:
        """Char states (and the final state) reachable by epsilon moves, with path counts capped at 2."""
        memo: dict[tuple[int, frozenset], dict[int, int]] = {}

        def walk(node: int, entered: frozenset) -> dict[int, int]:
            if (node, entered) in memo:
                return memo[node, entered]
            self._tick()
            found = {node: 1} if node in self.label or node == self.final else {}
            for target, tag in self.eps[node]:
                now = entered
                if tag is not None:
                    if tag[0] == "back" and tag[1] in entered:
                        continue  # an iteration that read nothing does not repeat (as in re)
                    if tag[0] == "in":
                        now = entered | {tag[1]}
                for k, n in walk(target, now).items():
                    found[k] = min(2, found.get(k, 0) + n)
            memo[node, entered] = found
            return found

        return walk(state, frozenset())

    def risk(self) -> Risk | None:
        succ = {p: self._closure(self.out[p]) for p in self.label}
        done = {p for p in self.label if self.label[p] == self.alphabet.full and self.final in succ[p]
                and p in succ[p]}  # a loop over every character that may end the match: success
        graph = {p: {q: n for q, n in reach.items() if q in self.label and q not in done}
                 for p, reach in succ.items() if p not in done}
        component = _components({p: set(q) for p, q in graph.items()})
        loops: dict[int, set[int]] = {}
        for p in graph:
            if any(component[q] == component[p] for q in graph[p]):
                loops.setdefault(component[p], set()).add(p)
        for loop in loops.values():  # a cycle through (q, q) stays in q's component on both tracks
            pairs, divergent = self._pairs(graph, [(p, p) for p in loop], loop, loop)
            if _exponential(pairs, divergent):
                return Risk("exponential")
        if self.nested:
            return self.nested[0]
        degree = self._degree(graph, component, loops)
        return Risk("polynomial", degree) if degree > MAX_POLYNOMIAL_DEGREE else None

    def _pairs(self, graph, starts, allowed_a, allowed_b):
        """Pairs (a, b) reachable from ``starts`` reading the same characters on both tracks."""
        edges: dict[tuple[int, int], set[tuple[int, int]]] = {}
        divergent: set[tuple[tuple[int, int], tuple[int, int]]] = set()  # two epsilon paths, same states
        todo = list(starts)
        while todo:
            pair = todo.pop()
            if pair in edges:
                continue
            a, b = pair
            out = set()
            for a2, n in graph[a].items():
                if a2 in allowed_a:
                    for b2 in graph[b]:
                        self._tick()
                        if b2 in allowed_b and self.label[a2] & self.label[b2]:
                            out.add((a2, b2))
                            if a == b and a2 == b2 and n > 1:
                                divergent.add((pair, (a2, b2)))
            edges[pair] = out
            todo.extend(nxt for nxt in out if nxt not in edges)
        return edges, divergent

    def _degree(self, graph, component, loops) -> int:
        """Longest chain of loops that can read the same text one after the other (0 without loops)."""
        before: dict[int, set[int]] = {p: set() for p in graph}
        for p, targets in graph.items():
            for q in targets:
                before[q].add(p)

        def reaching(targets: set[int]) -> set[int]:
            seen, todo = set(targets), list(targets)
            while todo:
                new = before[todo.pop()] - seen
                seen |= new
                todo.extend(new)
            return seen

        into_loops = reaching(set().union(*loops.values())) if loops else set()
        follows: dict[int, set[int]] = {}  # loop -> the later loops a chain can continue into
        for c, loop in loops.items():
            for p in loop:
                # track 1 reads w from p back to p, track 2 the same w from p to a later loop's q ...
                for a, q in self._pairs(graph, [(p, p)], loop, into_loops)[0]:
                    d = component[q]
                    if a == p and d != c and d in loops and d not in follows.get(c, ()):
                        # ... and some text leads both from p to q and from q back to q
                        if (q, q) in self._pairs(graph, [(p, q)], reaching(loops[d]), loops[d])[0]:
                            follows.setdefault(c, set()).add(d)
        longest: dict[int, int] = {}

        def chain(c: int) -> int:
            if c not in longest:
                longest[c] = 1 + max((chain(n) for n in follows.get(c, ())), default=0)
            return longest[c]

        return max((chain(c) for c in loops), default=0)


def _exponential(pairs, divergent) -> bool:
    """A diagonal pair shares a strongly connected component with an off-diagonal pair or a split."""
    component = _components(pairs)
    kinds: dict[int, set[bool]] = {}
    for (a, b), c in component.items():
        kinds.setdefault(c, set()).add(a == b)
    return any(len(k) == 2 for k in kinds.values()) or any(component[a] == component[b] for a, b in divergent)


def _components(graph) -> dict:
    """Strongly connected components (iterative Tarjan): node -> component id."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    component: dict = {}
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph.get(root, ())))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component[member] = index[node]
                        if member == node:
                            break
    return component
