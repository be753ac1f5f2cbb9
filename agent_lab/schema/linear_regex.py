"""A matcher whose time is linear in the input, for the patterns Python's ``re`` could make slow.

Python's ``re`` backtracks: a pattern such as ``^(a+)+$`` or ``[a-z]+@`` can take exponential or
quadratic time on a string chosen to fail, and the string is chosen by a model. This module matches
the same ECMA-262 patterns (the parse tree of ``ecma_regex``) without backtracking, so the time per
character is bounded by the pattern, never by the input.

How: the tree becomes a Thompson NFA (counted repetitions are expanded, so the NFA is bounded by
MAX_NFA_STATES). The NFA is simulated a set of states at a time, and each set met while reading is
remembered as one state of a DFA built lazily: a later character that meets the same set and the
same character class costs one dictionary look-up. The cache of DFA states and transitions is
bounded: `explore` builds every DFA state up front when there are at most MAX_DFA_STATES of them
(the safety analysis only accepts such patterns for model input), and then a character costs a
dictionary look-up, or for a character not seen before one class look-up (a binary search, plus a
call to Python's re per caseless set). A pattern whose DFA is larger still runs in linear time, one
NFA step per new state, with its cache dropped and rebuilt when full.

Semantics are JSON Schema's: a boolean search (the pattern may match anywhere; ``search`` answers
True or None, like ``re.Pattern.search`` answers a match or None). Zero-width assertions ``^ $ \\b
\\B`` are supported, also line-wise inside ``(?m:...)``. Which characters a class matches is taken
from the same ranges the Python translation uses; a class inside ``(?i:...)`` is asked of Python's
``re`` for each new character (once, then cached), so both engines agree on case-insensitivity.
Backreferences and lookarounds cannot be run here (LinearRegexUnsupported), with one exception:
lookaheads right after a leading ``^`` only look at position 0, so ``build_linear_matcher`` runs
``^(?=A)(?!B)R`` as three anchored matchers (A and R must match, B must not).
"""

from __future__ import annotations

import bisect
import re
import threading
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from .ecma.errors import MAX_CODE_POINT, Range
from .ecma.ranges import LINE_TERMINATOR_RANGES, WORD_RANGES, normalize_ranges, ranges_to_python
from .ecma.tree import (END, NOT_WORD_BOUNDARY, START, WORD_BOUNDARY, Alternation, Assertion, Backreference,
                        CharSet, Concatenation, Group, Lookaround, ParsedPattern, RegexNode, Repeat)

__all__ = [
    "MAX_CACHED_CHARACTERS",
    "MAX_DFA_STATES",
    "MAX_NFA_STATES",
    "LinearMatcher",
    "LinearRegexUnsupported",
    "build_linear_matcher",
]

MAX_NFA_STATES = 2_000
"""Largest NFA built (counted repetitions expanded); a larger pattern is not run here. The worst
case per character is one step over at most this many states."""
MAX_DFA_STATES = 2_000
"""Most DFA states a matcher keeps. `explore` builds every state up front and reports whether they
fit: when they do, reading a character never costs more than a class look-up (the guarantee the
safety analysis relies on); a matcher whose DFA does not fit drops and rebuilds its cache instead."""
MAX_CACHED_CHARACTERS = 50_000
"""Remembered (state, character) shortcuts, and characters whose class is known, before those two
caches are cleared (the DFA states and their class transitions are kept)."""
MAX_CASELESS_COMBINATIONS = 64
"""`explore` tries every combination of caseless sets that may cover one code-point interval; more
combinations than this and the DFA is not explored (it stays lazy, without the guarantee)."""

# NFA state kinds.
_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)

# Context bits of a character, for the assertions: what it is, seen from an assertion next to it.
_LINE_TERMINATOR = 1
_WORD = 2
_CASELESS_WORD = 4
_EDGE = 8  # the start or the end of the text
_CONTEXT_BITS = 4  # atom bits start above the context bits

_ASSERT_START, _ASSERT_END, _ASSERT_LINE_START, _ASSERT_LINE_END = range(4)
_ASSERT_BOUNDARY, _ASSERT_NOT_BOUNDARY, _ASSERT_CASELESS_BOUNDARY, _ASSERT_CASELESS_NOT_BOUNDARY = range(4, 8)


class LinearRegexUnsupported(ValueError):
    """The pattern cannot be run by the linear-time matcher; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def starts_anchored(node: RegexNode) -> bool:
    """Whether every match must start at the beginning of the text (a ``^`` outside ``(?m:...)``
    before anything that reads a character, on every alternative)."""
    kind = type(node)
    if kind is Assertion:
        return node.kind == START and not node.multiline  # type: ignore[attr-defined]
    if kind is Concatenation:
        for item in node.items:  # type: ignore[attr-defined]
            if starts_anchored(item):
                return True
            if not _zero_width(item):
                return False
        return False
    if kind is Alternation:
        return all(starts_anchored(item) for item in node.alternatives)  # type: ignore[attr-defined]
    if kind is Group:
        return starts_anchored(node.item)  # type: ignore[attr-defined]
    if kind is Repeat:
        return node.low >= 1 and starts_anchored(node.item)  # type: ignore[attr-defined]
    return False


def _zero_width(node: RegexNode) -> bool:
    """Whether the node never reads a character (assertions, lookarounds, empty parts)."""
    kind = type(node)
    if kind is Assertion or kind is Lookaround:
        return True
    if kind is Backreference:
        return node.number is None  # type: ignore[attr-defined]
    if kind is Concatenation:
        return all(_zero_width(item) for item in node.items)  # type: ignore[attr-defined]
    if kind is Alternation:
        return all(_zero_width(item) for item in node.alternatives)  # type: ignore[attr-defined]
    if kind is Group:
        return _zero_width(node.item)  # type: ignore[attr-defined]
    if kind is Repeat:
        return node.high == 0 or _zero_width(node.item)  # type: ignore[attr-defined]
    return False


class _Nfa:
    """A Thompson NFA in parallel lists, built back to front (each part is compiled knowing what
    follows it, so there are no patch lists). ``atoms`` are the distinct character sets."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kind: List[int] = []
        self.arg: List[int] = []  # atom index (CHAR) or assertion kind (ASSERT)
        self.out: List[int] = []
        self.alt: List[int] = []  # second successor of a SPLIT
        self.atoms: List[Tuple[Tuple[Range, ...], bool, Optional[str]]] = []
        self._atom_index: Dict[Tuple[Tuple[Range, ...], bool, Optional[str]], int] = {}

    def add(self, kind: int, arg: int = -1, out: int = -1, alt: int = -1) -> int:
        if len(self.kind) >= self.limit:
            raise LinearRegexUnsupported(
                f"the pattern needs more than {self.limit} matcher states (long counted repetitions)")
        self.kind.append(kind)
        self.arg.append(arg)
        self.out.append(out)
        self.alt.append(alt)
        return len(self.kind) - 1

    def atom(self, charset: CharSet) -> int:
        key = (charset.ranges, charset.ignore_case, charset.python)
        index = self._atom_index.get(key)
        if index is None:
            index = self._atom_index[key] = len(self.atoms)
            self.atoms.append(key)
        return index

    def compile(self, node: RegexNode, follow: int) -> int:
        """The state that starts matching `node`, then goes on to `follow`."""
        kind = type(node)
        if kind is CharSet:
            return self.add(_CHAR, self.atom(node), follow)  # type: ignore[arg-type]
        if kind is Concatenation:
            for item in reversed(node.items):  # type: ignore[attr-defined]
                follow = self.compile(item, follow)
            return follow
        if kind is Alternation:
            starts = [self.compile(item, follow) for item in node.alternatives]  # type: ignore[attr-defined]
            entry = starts[-1]
            for start in reversed(starts[:-1]):
                entry = self.add(_SPLIT, out=start, alt=entry)
            return entry
        if kind is Group:
            return self.compile(node.item, follow)  # type: ignore[attr-defined]
        if kind is Repeat:
            return self._repeat(node, follow)  # type: ignore[arg-type]
        if kind is Assertion:
            return self.add(_ASSERT, _assertion_kind(node), follow)  # type: ignore[arg-type]
        if kind is Backreference and node.number is None:  # type: ignore[attr-defined]
            return follow  # a reference that always matches empty
        if kind is Lookaround:
            raise LinearRegexUnsupported("lookarounds cannot be matched in linear time here")
        raise LinearRegexUnsupported("backreferences cannot be matched in linear time")

    def _repeat(self, node: Repeat, follow: int) -> int:
        low, high = node.low, node.high
        copies = low if high is None else high
        if copies > self.limit:
            raise LinearRegexUnsupported(
                f"the pattern needs more than {self.limit} matcher states (long counted repetitions)")
        tail = follow
        if high is None:
            loop = self.add(_SPLIT, out=-1, alt=follow)
            self.out[loop] = self.compile(node.item, loop)
            tail = loop
        else:
            for _ in range(high - low):  # x{0,k}: x(x(x)?)? ... built from the inside out
                tail = self.add(_SPLIT, out=self.compile(node.item, tail), alt=follow)
        for _ in range(low):
            tail = self.compile(node.item, tail)
        return tail


def _assertion_kind(node: Assertion) -> int:
    if node.kind == START:
        return _ASSERT_LINE_START if node.multiline else _ASSERT_START
    if node.kind == END:
        return _ASSERT_LINE_END if node.multiline else _ASSERT_END
    if node.kind == WORD_BOUNDARY:
        return _ASSERT_CASELESS_BOUNDARY if node.ignore_case else _ASSERT_BOUNDARY
    assert node.kind == NOT_WORD_BOUNDARY
    return _ASSERT_CASELESS_NOT_BOUNDARY if node.ignore_case else _ASSERT_NOT_BOUNDARY


def _assertion_holds(kind: int, before: int, after: int) -> bool:
    """Whether an assertion holds between a character of context `before` and one of `after`."""
    if kind == _ASSERT_START:
        return bool(before & _EDGE)
    if kind == _ASSERT_END:
        return bool(after & _EDGE)
    if kind == _ASSERT_LINE_START:
        return bool(before & (_EDGE | _LINE_TERMINATOR))
    if kind == _ASSERT_LINE_END:
        return bool(after & (_EDGE | _LINE_TERMINATOR))
    if kind in (_ASSERT_BOUNDARY, _ASSERT_NOT_BOUNDARY):
        differs = bool(before & _WORD) != bool(after & _WORD)
        return differs if kind == _ASSERT_BOUNDARY else not differs
    differs = bool(before & _CASELESS_WORD) != bool(after & _CASELESS_WORD)
    return differs if kind == _ASSERT_CASELESS_BOUNDARY else not differs


class _DfaState:
    """A set of NFA states (those about to read the next character) and what the character before
    them was. ``terminal`` states end the search: ``verdict`` says how."""

    __slots__ = ("core", "before", "by_char", "by_class", "terminal", "verdict", "at_end")

    def __init__(self, core: FrozenSet[int], before: int, *, terminal: bool = False, verdict: bool = False):
        self.core = core
        self.before = before
        self.by_char: Dict[str, "_DfaState"] = {}
        self.by_class: Dict[int, "_DfaState"] = {}
        self.terminal = terminal
        self.verdict = verdict
        self.at_end: Optional[bool] = None


_ACCEPT = _DfaState(frozenset(), 0, terminal=True, verdict=True)
_REJECT = _DfaState(frozenset(), 0, terminal=True, verdict=False)


class LinearMatcher:
    """Boolean ECMA-262 search in time linear in the text (see the module docstring).

    Build it from a parsed pattern; ``search(text)`` answers True (a match somewhere) or None.
    Thread-safe: threads share the lazily built DFA; a race at worst builds a state twice.
    """

    def __init__(self, parsed: ParsedPattern, *, max_states: int = MAX_NFA_STATES) -> None:
        nfa = _Nfa(max_states)
        match = nfa.add(_MATCH)
        self._start = nfa.compile(parsed.root, match)
        self._kind, self._arg, self._out, self._alt = nfa.kind, nfa.arg, nfa.out, nfa.alt
        self.state_count = len(nfa.kind)
        self._searching = not starts_anchored(parsed.root)
        assertions = {nfa.arg[state] for state, kind in enumerate(nfa.kind) if kind == _ASSERT}
        self._context_mask = _context_mask(assertions)
        self._build_classes(nfa.atoms, assertions)
        self._atom_bit = [1 << (_CONTEXT_BITS + arg) if kind == _CHAR else 0
                          for kind, arg in zip(nfa.kind, nfa.arg)]
        self._lock = threading.Lock()
        self.bounded: Optional[bool] = None  # set by explore()
        self._reset()

    # -- character classes -------------------------------------------------------------------------
    def _build_classes(self, atoms: Sequence[Tuple[Tuple[Range, ...], bool, Optional[str]]],
                       assertions: set) -> None:
        """Split the code points into intervals that no exact set cuts, each with the bit mask of the
        sets (and context bits) covering it. A caseless set is asked of Python's re per character;
        its `maybe` bits mark the intervals it could cover at all (for `explore`)."""
        exact: List[Tuple[int, Sequence[Range]]] = [(_LINE_TERMINATOR, LINE_TERMINATOR_RANGES),
                                                   (_WORD, WORD_RANGES)]
        maybe: List[Tuple[int, Sequence[Range]]] = []
        self._caseless: List[Tuple[int, "re.Pattern[str]"]] = []
        caseless_sets = [(1 << (_CONTEXT_BITS + index), ranges, python)
                         for index, (ranges, ignore_case, python) in enumerate(atoms) if ignore_case]
        exact.extend((1 << (_CONTEXT_BITS + index), ranges)
                     for index, (ranges, ignore_case, _python) in enumerate(atoms) if not ignore_case)
        if assertions & {_ASSERT_CASELESS_BOUNDARY, _ASSERT_CASELESS_NOT_BOUNDARY}:
            caseless_sets.append((_CASELESS_WORD, tuple(WORD_RANGES), None))
        for bit, ranges, python in caseless_sets:
            # an inverted class's python matches a subset of `ranges`, so their cover bounds it too
            self._caseless.append((bit, re.compile("(?i:" + (python or ranges_to_python(ranges)) + ")")))
            maybe.append((bit, caseless_cover(ranges)))
        starts = {0, MAX_CODE_POINT + 1}
        for _bit, bounded in exact + maybe:
            for low, high in bounded:
                starts.add(low)
                starts.add(high + 1)
        self._bounds = sorted(starts)
        where = {start: index for index, start in enumerate(self._bounds)}
        self._masks = _interval_masks(exact, where, len(self._bounds))
        self._maybe_masks = _interval_masks(maybe, where, len(self._bounds))

    def _class_of(self, char: str) -> int:
        mask = self._char_classes.get(char)
        if mask is None:
            mask = self._masks[bisect.bisect_right(self._bounds, ord(char)) - 1]
            for bit, caseless in self._caseless:
                if caseless.fullmatch(char) is not None:
                    mask |= bit
            self._char_classes[char] = mask
        return mask

    def _possible_classes(self) -> Optional[List[int]]:
        """Every class mask a character could have (caseless bits in every combination they may
        take), or None when there are too many combinations to try."""
        found = set()
        for exact, maybe in zip(self._masks, self._maybe_masks):
            bits = [1 << position for position in range(maybe.bit_length()) if maybe >> position & 1]
            if 1 << len(bits) > MAX_CASELESS_COMBINATIONS:
                return None
            for combination in range(1 << len(bits)):
                mask = exact
                for index, bit in enumerate(bits):
                    if combination >> index & 1:
                        mask |= bit
                found.add(mask)
        return sorted(found)

    # -- the DFA -----------------------------------------------------------------------------------
    def _reset(self) -> None:
        self._states: Dict[Tuple[FrozenSet[int], int], _DfaState] = {}
        self._char_classes: Dict[str, int] = {}
        self._shortcuts = 0
        self._initial = self._state(frozenset((self._start,)), _EDGE & self._context_mask)

    def _state(self, core: FrozenSet[int], before: int) -> _DfaState:
        key = (core, before)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _DfaState(core, before)
        return state

    def explore(self) -> bool:
        """Build the whole DFA now, over every class a character could have. True when it has at most
        MAX_DFA_STATES states: then no character ever costs more than a class look-up, and the cache
        is never dropped. False: the DFA stays lazy (still linear, with an NFA step per new state)."""
        if self.bounded is not None:
            return self.bounded
        classes = self._possible_classes()
        if classes is None:
            self.bounded = False
            return False
        todo = [self._initial]
        seen = {id(self._initial)}
        while todo:
            state = todo.pop()
            for mask in classes:
                following = self._transition(state, mask)
                if not following.terminal and id(following) not in seen:
                    if len(seen) >= MAX_DFA_STATES:
                        self.bounded = False
                        return False
                    seen.add(id(following))
                    todo.append(following)
        self.bounded = True
        return True

    def _closure(self, core: FrozenSet[int], before: int, after: int) -> Tuple[List[int], bool]:
        """The CHAR states reachable from `core` without reading, between contexts before and after,
        and whether the pattern can end here (a match)."""
        kind, arg, out, alt = self._kind, self._arg, self._out, self._alt
        seen = set()
        stack = list(core)
        reading: List[int] = []
        matched = False
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            state_kind = kind[state]
            if state_kind == _CHAR:
                reading.append(state)
            elif state_kind == _SPLIT:
                stack.append(out[state])
                stack.append(alt[state])
            elif state_kind == _ASSERT:
                if _assertion_holds(arg[state], before, after):
                    stack.append(out[state])
            else:
                matched = True
        return reading, matched

    def _transition(self, state: _DfaState, mask: int) -> _DfaState:
        """The state after reading a character of class `mask` (computed once, then remembered)."""
        following = state.by_class.get(mask)
        if following is not None:
            return following
        after = mask & self._context_mask
        core = state.core | {self._start} if self._searching else state.core
        reading, matched = self._closure(core, state.before, after)
        if matched:
            following = _ACCEPT
        else:
            atom_bit, out = self._atom_bit, self._out
            moved = frozenset(out[s] for s in reading if atom_bit[s] & mask)
            if not moved and not self._searching:
                following = _REJECT
            else:
                if not self.bounded and len(self._states) >= MAX_DFA_STATES:
                    with self._lock:
                        self._reset()  # too many states: start again rather than grow
                following = self._state(moved, after)
        state.by_class[mask] = following
        return following

    def _step(self, state: _DfaState, char: str) -> _DfaState:
        """Slow path of `search`: the transition on a character not seen in this state before."""
        if self._shortcuts >= MAX_CACHED_CHARACTERS:
            with self._lock:
                if self._shortcuts >= MAX_CACHED_CHARACTERS:
                    self._forget_characters()
        following = self._transition(state, self._class_of(char))
        state.by_char[char] = following
        self._shortcuts += 1
        return following

    def _forget_characters(self) -> None:
        """Clear the per-character caches (memory stays bounded); states and class transitions stay."""
        for state in list(self._states.values()):
            state.by_char = {}
        self._char_classes = {}
        self._shortcuts = 0

    def _ends(self, state: _DfaState) -> bool:
        verdict = state.at_end
        if verdict is None:
            core = state.core | {self._start} if self._searching else state.core
            verdict = state.at_end = self._closure(core, state.before, _EDGE & self._context_mask)[1]
        return verdict

    def search(self, text: str) -> Optional[bool]:
        """True when the pattern matches somewhere in `text`, else None (like ``re.search``)."""
        state = self._initial
        for char in text:
            following = state.by_char.get(char)
            if following is None:
                following = self._step(state, char)
            if following.terminal:
                return True if following.verdict else None
            state = following
        return True if self._ends(state) else None


class _LeadingLookaheads:
    """``^(?=A)(?!B)...R``: lookaheads at the very start of an anchored pattern only look at position
    0, so the pattern matches exactly when ``^A`` and ``^R`` match and ``^B`` does not. Each part is a
    linear matcher of its own; the text is read once per part (the password idiom
    ``^(?=.*\\d)(?=.*[a-z]).{8,}$`` runs this way)."""

    def __init__(self, required: Sequence["LinearMatcher"], forbidden: Sequence["LinearMatcher"]) -> None:
        self._required = tuple(required)
        self._forbidden = tuple(forbidden)
        self.state_count = sum(part.state_count for part in self._required + self._forbidden)
        self.bounded: Optional[bool] = None

    def explore(self) -> bool:
        if self.bounded is None:
            self.bounded = all([part.explore() for part in self._required + self._forbidden])
        return self.bounded

    def search(self, text: str) -> Optional[bool]:
        for part in self._required:
            if part.search(text) is None:
                return None
        for part in self._forbidden:
            if part.search(text) is not None:
                return None
        return True


def build_linear_matcher(parsed: ParsedPattern, *, max_states: int = MAX_NFA_STATES):
    """A linear-time matcher for the pattern (``search``, ``explore``, ``bounded``, ``state_count``).

    LinearRegexUnsupported when it has lookarounds (other than lookaheads right after a leading
    ``^``) or backreferences, or would need more than `max_states` NFA states.
    """
    root = parsed.root
    items = root.items if isinstance(root, Concatenation) else ()
    if (len(items) >= 2 and isinstance(items[0], Assertion) and items[0].kind == START
            and not items[0].multiline and isinstance(items[1], Lookaround) and items[1].ahead):
        anchor = items[0]
        required: List[LinearMatcher] = []
        forbidden: List[LinearMatcher] = []
        rest = list(items[1:])
        while rest and isinstance(rest[0], Lookaround) and rest[0].ahead:
            lookahead = rest.pop(0)
            assert isinstance(lookahead, Lookaround)
            part = LinearMatcher(_anchored(parsed, anchor, [lookahead.item]), max_states=max_states)
            (forbidden if lookahead.negated else required).append(part)
        required.append(LinearMatcher(_anchored(parsed, anchor, rest), max_states=max_states))
        return _LeadingLookaheads(required, forbidden)
    return LinearMatcher(parsed, max_states=max_states)


def _anchored(parsed: ParsedPattern, anchor: Assertion, items: Sequence[RegexNode]) -> ParsedPattern:
    return ParsedPattern(parsed.source, Concatenation([anchor, *items]), parsed.groups)


def caseless_cover(ranges: Sequence[Range]) -> Tuple[Range, ...]:
    """A superset of what a set matches under Python's case-insensitive matching: the set itself,
    and, when it holds any letter or non-ASCII character, every ASCII letter and non-ASCII character
    (no case mapping links an ASCII digit, space or symbol to anything else)."""
    for low, high in ranges:
        if high >= 0x80 or any(low <= letter_high and letter_low <= high
                                for letter_low, letter_high in _ASCII_LETTERS):
            return tuple(normalize_ranges(list(ranges) + list(_ASCII_LETTERS) + [(0x80, MAX_CODE_POINT)]))
    return tuple(ranges)


_ASCII_LETTERS: Tuple[Range, ...] = ((0x41, 0x5A), (0x61, 0x7A))


def _interval_masks(sets: Sequence[Tuple[int, Sequence[Range]]], where: Dict[int, int], count: int) -> List[int]:
    """For each interval (indexed through `where`, by its first code point), the OR of the bits of
    the sets that cover it."""
    masks = [0] * count
    for bit, ranges in sets:
        for low, high in ranges:
            for index in range(where[low], where[high + 1]):
                masks[index] |= bit
    return masks


def _context_mask(assertions: set) -> int:
    """The context bits the pattern's assertions look at (fewer bits: fewer DFA states)."""
    mask = 0
    if assertions & {_ASSERT_START, _ASSERT_END}:
        mask |= _EDGE
    if assertions & {_ASSERT_LINE_START, _ASSERT_LINE_END}:
        mask |= _EDGE | _LINE_TERMINATOR
    if assertions & {_ASSERT_BOUNDARY, _ASSERT_NOT_BOUNDARY}:
        mask |= _WORD
    if assertions & {_ASSERT_CASELESS_BOUNDARY, _ASSERT_CASELESS_NOT_BOUNDARY}:
        mask |= _CASELESS_WORD
    return mask
