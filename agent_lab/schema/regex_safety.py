"""Which engine may run a pattern on hostile input: Python's ``re``, the linear matcher, or neither.

A JSON Schema ``pattern`` is written by a tool's author and run on text a model chooses. Python's
``re`` backtracks, so some patterns take exponential time (``^(a+)+$``, ``(a|aa)+``) or quadratic
time (``\\d+\\d+x``, or ``[a-z]+@`` searched in ``aaaa...``: a failed attempt is retried at every
position) on a string chosen to fail. `analyze_pattern` decides, once per pattern:

* ``re``: the analysis below proves that ``re`` runs the pattern in time linear in the text (it is
  faster than the linear matcher, so it is preferred whenever it is proven safe);
* ``linear``: otherwise, when the pattern has no lookaround or backreference and its DFA fits
  (`linear_regex.MAX_DFA_STATES`), the package's linear-time matcher runs it;
* ``unsafe``: neither. The Validator still runs it (with the lazy linear matcher when it can, with
  ``re`` otherwise), lists it in ``Validator.patterns``, and ``ToolSpec`` refuses it in an input
  schema, naming the pattern's JSON Pointer and this reason.

The proof for ``re`` (sound, not complete: what it cannot prove goes to the linear matcher). A
backtracking matcher's work is the number of nodes of its search tree. Two rules bound it:

1. Bounded width, few paths. If every match is at most MAX_PROVEN_WIDTH characters long and has
   no backreference, the search tree of one attempt has at most as many nodes as there are paths of
   that length through the pattern's Thompson NFA (characters ignored, so this over-counts). These
   paths are counted by dynamic programming. One attempt (a pattern anchored with ``^``) may have up
   to MAX_ANCHORED_PATHS; a pattern ``re`` tries at every position MAX_PATHS_PER_START.
2. Unambiguous repetition. Otherwise the pattern must be anchored (one attempt; ``re`` tries only
   position 0 when a pattern starts with ``\\A``), and its choices must not be ambiguous where it
   repeats. The pattern becomes an NFA where a counted repetition ``x{n,m}`` is expanded when ``m``
   is small and otherwise stands for ``x+`` (or ``x*``): that only adds choices, so it can only make
   the check stricter.
   Lookarounds and assertions count as empty (this only adds surviving paths), a backreference as
   one character of its group (and optional). A choice (an alternation, or a quantifier's "once
   more or go on") is ambiguous when two of its branches can start by reading the same character,
   or reach the same next step by two empty paths. An ambiguous choice inside a repetition is
   refused: that is what nested or overlapping quantifiers (``(a+)+``, ``(a|a)*``, ``(\\w|\\d)+``,
   ``\\d+\\d+``, ``(.*a){12}``) look like. Outside every repetition at most MAX_AMBIGUOUS_CHOICES
   are allowed (each at most doubles the work). A repeated part that can match empty is refused.
   With unambiguous repetitions, each character is read once on the surviving path and every
   failing branch fails at its first character: an attempt costs O(2^k x length x pattern size).
3. Lookarounds and backreferences: ``re`` runs a lookaround as a sub-match each time it reaches it,
   so its body must be at most MAX_LOOKAROUND_WIDTH characters long and pass rule 1 or 2 itself; a
   backreference compares what its group captured, which must be at most MAX_BACKREF_WIDTH long.

The verdict also says how a backtracking engine fares with the pattern (``backtracking``), from the
same automaton: "exponential" when a choice inside a repetition has two branches that can both read
the same character and come back round the same repetition (``(a+)+``, ``(a|aa)*``, ``(a*)*``);
"polynomial" when a repetition can hand a run of characters over to a later repetition that reads
them too (``\\d+\\d+``, ``\\S+@\\S+$``, ``(a+){2,5}``). Retrying an unanchored pattern at every
position (which adds one degree) is not counted: that is how searching works, not a flaw of the
pattern. Our runtime is safe either way; ``ToolSpec.warnings`` mentions such a pattern because the
same schema, exported to a host or client that validates with a backtracking engine, is not.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .ecma.errors import Range
from .ecma.ranges import normalize_ranges
from .ecma.tree import (Alternation, Assertion, Backreference, CharSet, Concatenation, Group, Lookaround,
                        ParsedPattern, RegexNode, Repeat, children)
from .ecma_regex import compile_ecma, parse_ecma
from .linear_regex import LinearRegexUnsupported, build_linear_matcher, caseless_cover, starts_anchored

__all__ = [
    "MAX_AMBIGUOUS_CHOICES",
    "MAX_ANCHORED_PATHS",
    "MAX_BACKREF_WIDTH",
    "MAX_LOOKAROUND_WIDTH",
    "MAX_PATHS_PER_START",
    "MAX_PROVEN_WIDTH",
    "PatternEngine",
    "PatternFinding",
    "PatternSafety",
    "analyze_pattern",
    "compile_pattern",
]

MAX_PROVEN_WIDTH = 256
"""Rule 1 applies to patterns whose matches are at most this many characters long."""
MAX_ANCHORED_PATHS = 20_000
"""Rule 1, anchored pattern: most NFA paths (search-tree nodes) of its one attempt."""
MAX_PATHS_PER_START = 512
"""Rule 1, unanchored pattern: most NFA paths per attempt (re makes one attempt per position)."""
MAX_AMBIGUOUS_CHOICES = 4
"""Rule 2: most ambiguous choices outside every repetition (each may double an attempt's work)."""
MAX_LOOKAROUND_WIDTH = 256
"""Rule 3: longest text a lookaround's body may read."""
MAX_BACKREF_WIDTH = 256
"""Rule 3: longest text a backreference's group may capture."""
MAX_EXPANDED_COUNT = 64
"""Rule 2: a counted repetition up to this count is analysed exactly (x{2,4} as x x (x (x)?)?);
a larger one stands for x+ or x*, which has every choice it has and more."""
MAX_ANALYSED_STATES = 5_000
"""Patterns whose analysis automaton is larger are not proven for re (the analysis stays cheap)."""

_UNBOUNDED = -1


class PatternEngine(str, enum.Enum):
    """What runs a pattern: see the module docstring."""

    RE = "re"
    LINEAR = "linear"
    UNSAFE = "unsafe"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PatternSafety:
    """The verdict on one pattern.

    ``reason`` is one sentence: for ``re``, which rule proved it; otherwise why ``re`` is not proven
    safe (and, for ``unsafe``, why the linear matcher cannot run it either). ``backtracking`` is
    ``"exponential"`` or ``"polynomial"`` when a backtracking engine (Python's re, JavaScript's, a
    host's validator) can be made that slow by the pattern's own repetitions, else ``""``.
    """

    engine: PatternEngine
    reason: str
    backtracking: str = ""

    @property
    def safe(self) -> bool:
        """Whether hostile text is matched in bounded time per character (engine re or linear)."""
        return self.engine is not PatternEngine.UNSAFE


@dataclass(frozen=True)
class PatternFinding:
    """A pattern of a schema and its verdict: ``pointer`` is the JSON Pointer of the ``pattern``
    keyword (or of the ``patternProperties`` key) in the schema, ``pattern`` its text."""

    pointer: str
    pattern: str
    safety: PatternSafety

    def describe(self) -> str:
        """One sentence for a person: where, what, and why (no instance data: patterns are schema)."""
        return f"pattern at {self.pointer or '/'} ({self.safety.engine}): {self.safety.reason}"


@dataclass(frozen=True)
class _Refusal:
    reason: str
    backtracking: str = ""


def analyze_pattern(pattern: str) -> PatternSafety:
    """The safety verdict on an ECMA-262 pattern (raises EcmaRegexError when it is invalid)."""
    return compile_pattern(pattern)[1]


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Tuple[Any, PatternSafety]:
    """(matcher, verdict): an object whose ``search(text)`` answers a truthy value or None, and why.

    The matcher is ``re`` when proven safe, the linear matcher when it can serve the pattern, and
    for an unsafe pattern the lazy linear matcher (still linear, with no bound on the cost per
    character) or, failing that, ``re``. Raises EcmaRegexError (or its EcmaRegexUnsupported) when
    the pattern is invalid or cannot run at all. Cached.
    """
    parsed = parse_ecma(pattern)
    compiled = compile_ecma(pattern)  # also proves Python's re can run it
    refusal = _prove_re(parsed)
    if isinstance(refusal, str):
        return compiled, PatternSafety(PatternEngine.RE, refusal)
    try:
        matcher = build_linear_matcher(parsed)
    except LinearRegexUnsupported as unsupported:
        return compiled, PatternSafety(PatternEngine.UNSAFE, f"{_sentence_body(refusal.reason)}, and "
                                       f"{unsupported.reason}", refusal.backtracking)
    if matcher.explore():
        return matcher, PatternSafety(PatternEngine.LINEAR, refusal.reason, refusal.backtracking)
    return matcher, PatternSafety(
        PatternEngine.UNSAFE,
        f"{_sentence_body(refusal.reason)}, and its linear-time automaton needs more than "
        f"{_dfa_limit()} states (a pattern that must remember many positions at once, such as "
        "a.{20}b searched anywhere)",
        refusal.backtracking,
    )


def _dfa_limit() -> int:
    from .linear_regex import MAX_DFA_STATES

    return MAX_DFA_STATES


def _sentence_body(reason: str) -> str:
    return reason.rstrip(".")


# ---------------------------------------------------------------------------------------------
# The proof
# ---------------------------------------------------------------------------------------------

_PROVEN_BY_PATHS = ("proven linear on Python's re: matches are at most {width} characters long and an "
                    "attempt has at most {paths} paths")
_PROVEN_UNAMBIGUOUS = ("proven linear on Python's re: anchored with ^, and no repetition can divide the "
                       "same text in two ways")


def _prove_re(parsed: ParsedPattern):
    """A sentence saying which rule proves re safe for this pattern, or a _Refusal saying why none does."""
    widths = _Widths(parsed)
    root = parsed.root
    refusal = _check_lookarounds_and_backreferences(parsed, root, widths)
    if refusal is not None:
        return refusal
    anchored = starts_anchored(root)
    if widths.max_width(root) != _UNBOUNDED and widths.max_width(root) <= MAX_PROVEN_WIDTH \
            and not widths.has_backreference(root):
        limit = MAX_ANCHORED_PATHS if anchored else MAX_PATHS_PER_START
        paths = _path_count(parsed, root, limit)
        if paths <= limit:
            return _PROVEN_BY_PATHS.format(width=widths.max_width(root), paths=paths)
    ambiguity = _ambiguity(parsed, root)  # rule 2, asked only when rule 1 (few paths) proves nothing
    if ambiguity is not None:
        return ambiguity
    if not anchored:
        return _Refusal("the pattern is not anchored with ^ and can match text of any length, so "
                        "Python's re would retry a failing match at every position (quadratic time)")
    return _PROVEN_UNAMBIGUOUS


def _check_lookarounds_and_backreferences(parsed: ParsedPattern, node: RegexNode,
                                          widths: "_Widths") -> Optional[_Refusal]:
    for item in _walk(node):
        if isinstance(item, Lookaround):
            width = widths.max_width(item.item)
            if width == _UNBOUNDED or width > MAX_LOOKAROUND_WIDTH:
                inner = _ambiguity(parsed, item.item)
                return _Refusal("a lookaround can read text of any length (more than "
                                f"{MAX_LOOKAROUND_WIDTH} characters), and Python's re runs it again at "
                                "every position it is tried", inner.backtracking if inner is not None else "")
            if widths.has_backreference(item.item) or _path_count(parsed, item.item, MAX_PATHS_PER_START) > MAX_PATHS_PER_START:
                inner = _ambiguity(parsed, item.item)
                if inner is not None:
                    return _Refusal(f"inside a lookaround, {inner.reason}", inner.backtracking)
        elif isinstance(item, Backreference) and item.number is not None:
            width = widths.max_width(parsed.groups[item.number])
            if width == _UNBOUNDED or width > MAX_BACKREF_WIDTH:
                return _Refusal("a backreference refers to a group that can capture text of any length "
                                f"(more than {MAX_BACKREF_WIDTH} characters), and comparing it again and "
                                "again can take quadratic time")
    return None


def _walk(node: RegexNode):
    """Every node of a tree, the root first (iterative: trees may be deep)."""
    stack = [node]
    while stack:
        item = stack.pop()
        yield item
        stack.extend(children(item))


class _Widths:
    """Shortest and longest text each node can match (memoised; _UNBOUNDED for no limit)."""

    def __init__(self, parsed: ParsedPattern) -> None:
        self.parsed = parsed
        self._max: Dict[int, int] = {}
        self._backreference: Dict[int, bool] = {}
        self._in_progress: set = set()

    def max_width(self, node: RegexNode) -> int:
        key = id(node)
        cached = self._max.get(key)
        if cached is not None:
            return cached
        if key in self._in_progress:  # a backreference inside the group it names
            return 0
        self._in_progress.add(key)
        try:
            width = self._compute_max(node)
        finally:
            self._in_progress.discard(key)
        self._max[key] = width
        return width

    def _compute_max(self, node: RegexNode) -> int:
        if isinstance(node, CharSet):
            return 1
        if isinstance(node, (Assertion, Lookaround)):
            return 0
        if isinstance(node, Backreference):
            return 0 if node.number is None else self.max_width(self.parsed.groups[node.number])
        if isinstance(node, Concatenation):
            total = 0
            for item in node.items:
                width = self.max_width(item)
                if width == _UNBOUNDED:
                    return _UNBOUNDED
                total += width
            return total
        if isinstance(node, Alternation):
            widths = [self.max_width(item) for item in node.alternatives]
            return _UNBOUNDED if _UNBOUNDED in widths else max(widths)
        if isinstance(node, Group):
            return self.max_width(node.item)
        assert isinstance(node, Repeat)
        width = self.max_width(node.item)
        if width == 0 or node.high == 0:
            return 0
        if width == _UNBOUNDED or node.high is None:
            return _UNBOUNDED
        return width * node.high

    def has_backreference(self, node: RegexNode) -> bool:
        key = id(node)
        cached = self._backreference.get(key)
        if cached is None:
            cached = self._backreference[key] = any(
                isinstance(item, Backreference) and item.number is not None for item in _walk(node))
        return cached


# -- rule 1: counting paths ------------------------------------------------------------------------

def _path_count(parsed: ParsedPattern, node: RegexNode, limit: int) -> int:
    """Paths through the exact NFA of `node` (lookarounds as empty), counted up to limit + 1.

    Layer by layer over characters read: ways[state] is the number of distinct paths that reach the
    state having read that many characters. Every node of a backtracking search tree is the end of
    one such path, so their total bounds an attempt's work. An empty loop makes it unbounded.
    """
    try:
        graph = _Graph(parsed, node, exact=True)
    except _TooLarge:
        return limit + 1
    order = _topological_order(len(graph.kind), graph.empty_moves)
    if order is None:
        return limit + 1
    total = 0
    layer: Dict[int, int] = {graph.start: 1}
    while layer:
        for state in order:  # spread along empty moves, in topological order
            ways = layer.get(state)
            if ways:
                for following in graph.empty_moves(state):
                    layer[following] = min(layer.get(following, 0) + ways, limit + 1)
        total += sum(layer.values())
        if total > limit:
            return limit + 1
        next_layer: Dict[int, int] = {}
        for state, ways in layer.items():
            if graph.kind[state] == _READ:
                following = graph.out[state]
                next_layer[following] = min(next_layer.get(following, 0) + ways, limit + 1)
        layer = next_layer
    return total


_READ, _CHOICE, _END = range(3)
_LOOP, _OPTION, _ALTERNATIVE = "loop", "option", "alternative"


class _TooLarge(Exception):
    pass


class _Graph:
    """A Thompson NFA of a pattern tree for the analysis, built back to front (each part knows what
    follows it). States read a character (with the set it may be), choose between two ways on, or
    end; lookarounds and assertions are empty moves. A backreference reads one character of its
    group, optionally. Each choice remembers where it comes from (its origin).

    `exact` (rule 1) expands every counted repetition, so paths can be counted; otherwise (rule 2)
    only counts up to MAX_EXPANDED_COUNT are, and larger ones stand for x+ or x*.
    """

    def __init__(self, parsed: ParsedPattern, node: RegexNode, *, exact: bool) -> None:
        self.parsed = parsed
        self.exact = exact
        self.kind: List[int] = []
        self.out: List[int] = []
        self.alt: List[int] = []
        self.chars: List[Tuple[Range, ...]] = []
        self.origin: List[str] = []
        end = self._add(_END)
        self.start = self._compile(node, end)

    def _add(self, kind: int, out: int = -1, alt: int = -1, chars: Tuple[Range, ...] = (),
             origin: str = "") -> int:
        if len(self.kind) >= MAX_ANALYSED_STATES:
            raise _TooLarge()
        self.kind.append(kind)
        self.out.append(out)
        self.alt.append(alt)
        self.chars.append(chars)
        self.origin.append(origin)
        return len(self.kind) - 1

    def _compile(self, node: RegexNode, follow: int) -> int:
        if isinstance(node, CharSet):
            chars = caseless_cover(node.ranges) if node.ignore_case else node.ranges
            return self._add(_READ, follow, chars=tuple(chars))
        if isinstance(node, (Assertion, Lookaround)):
            return follow
        if isinstance(node, Backreference):
            if node.number is None:
                return follow
            read = self._add(_READ, follow, chars=_chars_in(self.parsed.groups[node.number]))
            return self._add(_CHOICE, read, follow, origin=_OPTION)
        if isinstance(node, Concatenation):
            for item in reversed(node.items):
                follow = self._compile(item, follow)
            return follow
        if isinstance(node, Alternation):
            starts = [self._compile(item, follow) for item in node.alternatives]
            entry = starts[-1]
            for start in reversed(starts[:-1]):
                entry = self._add(_CHOICE, start, entry, origin=_ALTERNATIVE)
            return entry
        if isinstance(node, Group):
            return self._compile(node.item, follow)
        assert isinstance(node, Repeat)
        return self._repeat(node, follow)

    def _repeat(self, node: Repeat, follow: int) -> int:
        if (node.high if node.high is not None else node.low) > MAX_ANALYSED_STATES:
            if self.exact:
                raise _TooLarge()
        elif node.high is not None and (self.exact or node.high <= MAX_EXPANDED_COUNT):
            tail = follow  # counted exactly: x{2,4} is x x (x (x)?)?
            for _ in range(node.high - node.low):
                tail = self._add(_CHOICE, self._compile(node.item, tail), follow, origin=_OPTION)
            for _ in range(node.low):
                tail = self._compile(node.item, tail)
            return tail
        loop = self._add(_CHOICE, -1, follow, origin=_LOOP)  # x{n,}: n copies (or one), then x*
        self.out[loop] = self._compile(node.item, loop)
        if not self.exact:
            return self.out[loop] if node.low >= 1 else loop
        tail = loop
        for _ in range(node.low):
            tail = self._compile(node.item, tail)
        return tail

    def empty_moves(self, state: int) -> Tuple[int, ...]:
        return (self.out[state], self.alt[state]) if self.kind[state] == _CHOICE else ()

    def all_moves(self, state: int) -> Tuple[int, ...]:
        kind = self.kind[state]
        if kind == _CHOICE:
            return (self.out[state], self.alt[state])
        if kind == _READ:
            return (self.out[state],)
        return ()


def _topological_order(count: int, moves) -> Optional[List[int]]:
    incoming = [0] * count
    for state in range(count):
        for following in moves(state):
            incoming[following] += 1
    ready = [state for state in range(count) if incoming[state] == 0]
    order: List[int] = []
    while ready:
        state = ready.pop()
        order.append(state)
        for following in moves(state):
            incoming[following] -= 1
            if incoming[following] == 0:
                ready.append(following)
    return order if len(order) == count else None


# -- rule 2: ambiguous choices in repetitions -------------------------------------------------------

def _chars_in(node: RegexNode) -> Tuple[Range, ...]:
    """Every character a part of the pattern could read (a superset of what it starts with)."""
    ranges: List[Range] = []
    for item in _walk(node):
        if isinstance(item, CharSet):
            ranges.extend(caseless_cover(item.ranges) if item.ignore_case else item.ranges)
    return tuple(normalize_ranges(ranges))


def _ambiguity(parsed: ParsedPattern, node: RegexNode) -> Optional[_Refusal]:
    """Rule 2 for `node`: None when no repetition is ambiguous (and few other choices are); the
    refusal also classifies the backtracking (see the module docstring)."""
    try:
        graph = _Graph(parsed, node, exact=False)
    except _TooLarge:
        return _Refusal("the pattern is too large to analyse")
    order = _topological_order(len(graph.kind), graph.empty_moves)
    if order is None:
        return _Refusal("a repeated part can match the empty string, so the repetition can go round "
                        "in more ways than the text has characters (like (a*)*)", "exponential")
    targets = _first_reads(graph, order)
    component, cyclic = _components(len(graph.kind), graph.all_moves)
    first_in_loop: Optional[int] = None
    backtracking = ""
    ambiguous_outside = 0
    for state in range(len(graph.kind)):
        if graph.kind[state] != _CHOICE:
            continue
        conflict = _conflict(graph, targets[graph.out[state]], targets[graph.alt[state]])
        if conflict is None:
            continue
        if not cyclic[component[state]]:
            ambiguous_outside += 1
            continue
        if first_in_loop is None:
            first_in_loop = state
        kind = _backtracking(graph, component, cyclic, state, conflict)
        if kind == "exponential" or not backtracking:
            backtracking = kind or backtracking
    if first_in_loop is not None:
        return _Refusal(_AMBIGUITY_REASONS[graph.origin[first_in_loop]], backtracking)
    if ambiguous_outside > MAX_AMBIGUOUS_CHOICES:
        return _Refusal(f"more than {MAX_AMBIGUOUS_CHOICES} of its choices are ambiguous (each can "
                        "double the work of Python's re)")
    return None


def _backtracking(graph: "_Graph", component: List[int], cyclic: List[bool], choice: int,
                  conflict: Tuple[List[int], List[int], List[Range]]) -> str:
    """How bad an ambiguous choice inside a repetition is for a backtracking engine.

    Exponential: both branches go on with a conflicting step in the choice's own repetition (it can
    go round again either way). Polynomial: one branch leaves the repetition, and from where it goes
    a later repetition can be reached reading only the shared characters (the run can be split
    between the two). Otherwise (like ``.*x``) an attempt stays linear: "".
    """
    first, second, shared = conflict
    home = component[choice]
    if any(component[t] == home for t in first) and any(component[t] == home for t in second):
        return "exponential"
    leaving = [t for t in first + second if component[t] != home]
    seen = set()
    stack = list(leaving)
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        if cyclic[component[state]] and component[state] != home:
            return "polynomial"
        kind = graph.kind[state]
        if kind == _CHOICE:
            stack.extend((graph.out[state], graph.alt[state]))
        elif kind == _READ and _ranges_overlap(graph.chars[state], shared):
            stack.append(graph.out[state])
    return ""


_AMBIGUITY_REASONS = {
    _LOOP: "a repetition can divide the same text in more than one way (nested or overlapping "
           "quantifiers such as (a+)+, \\d+\\d+ or (.*a){2}), which Python's re tries one by one "
           "(exponential or polynomial time)",
    _OPTION: "an optional part inside a repetition overlaps what follows it (such as (a?a)+), so the "
             "same text can be matched in more than one way, which Python's re tries one by one "
             "(exponential time)",
    _ALTERNATIVE: "alternatives inside a repetition can match the same text (such as (a|aa)+ or "
                  "(\\w|\\d)+), which Python's re tries one by one (exponential time)",
}


def _first_reads(graph: _Graph, order: List[int]) -> List[Dict[int, int]]:
    """For each state, the reading (or end) states reachable by empty moves, with how many empty
    paths reach each (capped at 2: two is already ambiguous)."""
    targets: List[Dict[int, int]] = [{} for _ in graph.kind]
    for state in reversed(order):
        kind = graph.kind[state]
        if kind == _CHOICE:
            merged = dict(targets[graph.out[state]])
            for target, count in targets[graph.alt[state]].items():
                merged[target] = min(merged.get(target, 0) + count, 2)
            targets[state] = merged
        else:
            targets[state] = {state: 1}
    return targets


def _conflict(graph: _Graph, first: Dict[int, int],
              second: Dict[int, int]) -> Optional[Tuple[List[int], List[int], List[Range]]]:
    """Whether two branches of a choice can go on with the same step or the same character: None,
    or (the conflicting targets of each branch, the characters both can read)."""
    shared_targets = first.keys() & second.keys()
    union_first, union_second = _union(graph, first), _union(graph, second)
    if not shared_targets and not _ranges_overlap(union_first, union_second):
        return None
    shared = _intersection(union_first, union_second)
    if shared_targets:
        shared = normalize_ranges(shared + [r for t in shared_targets for r in graph.chars[t]])

    def conflicting(targets: Dict[int, int]) -> List[int]:
        return [t for t in targets if t in shared_targets or _ranges_overlap(graph.chars[t], shared)]

    return conflicting(first), conflicting(second), shared


def _intersection(first: Sequence[Range], second: Sequence[Range]) -> List[Range]:
    result: List[Range] = []
    index_a = index_b = 0
    while index_a < len(first) and index_b < len(second):
        low = max(first[index_a][0], second[index_b][0])
        high = min(first[index_a][1], second[index_b][1])
        if low <= high:
            result.append((low, high))
        if first[index_a][1] < second[index_b][1]:
            index_a += 1
        else:
            index_b += 1
    return result


def _union(graph: _Graph, targets: Dict[int, int]) -> List[Range]:
    ranges: List[Range] = []
    for target in targets:
        ranges.extend(graph.chars[target])
    return normalize_ranges(ranges)


def _ranges_overlap(first: Sequence[Range], second: Sequence[Range]) -> bool:
    index_a = index_b = 0
    while index_a < len(first) and index_b < len(second):
        low_a, high_a = first[index_a]
        low_b, high_b = second[index_b]
        if low_a <= high_b and low_b <= high_a:
            return True
        if high_a < high_b:
            index_a += 1
        else:
            index_b += 1
    return False


def _components(count: int, moves) -> Tuple[List[int], List[bool]]:
    """Strongly connected components (Tarjan, iterative): each state's component, and for each
    component whether it has a cycle (a repetition)."""
    index_of = [-1] * count
    lowlink = [0] * count
    on_stack = [False] * count
    stack: List[int] = []
    component = [-1] * count
    cyclic: List[bool] = []
    counter = 0
    for root in range(count):
        if index_of[root] != -1:
            continue
        work = [(root, iter(moves(root)))]
        index_of[root] = lowlink[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            state, successors = work[-1]
            advanced = False
            for following in successors:
                if index_of[following] == -1:
                    index_of[following] = lowlink[following] = counter
                    counter += 1
                    stack.append(following)
                    on_stack[following] = True
                    work.append((following, iter(moves(following))))
                    advanced = True
                    break
                if on_stack[following]:
                    lowlink[state] = min(lowlink[state], index_of[following])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                lowlink[parent] = min(lowlink[parent], lowlink[state])
            if lowlink[state] == index_of[state]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    members.append(member)
                    if member == state:
                        break
                for member in members:
                    component[member] = len(cyclic)
                cyclic.append(len(members) > 1 or state in moves(state))
    return component, cyclic
