"""The parse tree of an ECMA-262 pattern, and its Python ``re`` spelling.

The parser builds a small tree; Python source is written from it, and the
same tree feeds the regex safety analysis (regex_safety.py) and the
linear-time matcher (linear_regex.py), so all three read one grammar.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from .errors import MAX_CODE_POINT, Range
from .ranges import (NOT_WORD_BOUNDARY_PYTHON, WORD_BOUNDARY_PYTHON, class_body, complement_ranges,
                     normalize_ranges, ranges_to_python)

class RegexNode:
    """One node of a parsed ECMA-262 pattern (plain data; see the subclasses)."""

    __slots__ = ()


class CharSet(RegexNode):
    """One character out of a set: a literal, ``.``, an escape such as ``\\d``, or a class.

    ``ranges`` are the code points it matches (negation already applied,
    sorted and merged); ``ignore_case`` is set inside an ``(?i:...)`` group,
    where Python's case-insensitive matching applies on top of them.

    ``python`` is the Python class to match instead, or None for ``ranges``. It
    is set for a class inverted inside ``(?i:...)``: ECMA's ``[^a]`` there
    rejects every case of ``a``, which is Python's ``[^a]`` under IGNORECASE,
    while the complement of ``a`` with case folding on top accepts ``a`` (its
    ``A`` is in the complement). ``ranges`` is then the plain complement, a
    superset of what the set matches, for the analysis.
    """

    __slots__ = ("ranges", "ignore_case", "python")

    def __init__(self, ranges: Sequence[Range], ignore_case: bool, python: Optional[str] = None) -> None:
        self.ranges: Tuple[Range, ...] = tuple(normalize_ranges(ranges))
        self.ignore_case = ignore_case
        self.python = python

    @classmethod
    def literal(cls, code_point: int, ignore_case: bool) -> "CharSet":
        """One code point (the parser's commonest node, made without sorting anything)."""
        charset = cls.__new__(cls)
        charset.ranges = ((code_point, code_point),)
        charset.ignore_case = ignore_case
        charset.python = None
        return charset

    @classmethod
    def inverted(cls, members: Sequence[Range], ignore_case: bool) -> "CharSet":
        """What an inverted class (``[^...]``) over `members` matches."""
        members = normalize_ranges(members)
        if ignore_case and members:
            return cls(complement_ranges(members), True, "[^" + class_body(members) + "]")
        return cls(complement_ranges(members), ignore_case)


class Concatenation(RegexNode):
    """Terms matched one after another (possibly none: the empty pattern)."""

    __slots__ = ("items",)

    def __init__(self, items: Sequence[RegexNode]) -> None:
        self.items: Tuple[RegexNode, ...] = tuple(items)


class Alternation(RegexNode):
    """``a|b|...``: two or more alternatives, tried in order."""

    __slots__ = ("alternatives",)

    def __init__(self, alternatives: Sequence[RegexNode]) -> None:
        self.alternatives: Tuple[RegexNode, ...] = tuple(alternatives)


class Repeat(RegexNode):
    """A quantified atom: ``low`` to ``high`` times (``high`` None: unbounded).

    ``suffix`` is the quantifier as Python spells it (``*``, ``{2,5}?``, ...).
    Counts above MAX_REPETITION (valid syntax, refused when compiled) are
    stored as MAX_REPETITION + 1.
    """

    __slots__ = ("item", "low", "high", "lazy", "suffix")

    def __init__(self, item: RegexNode, low: int, high: Optional[int], lazy: bool, suffix: str) -> None:
        self.item = item
        self.low = low
        self.high = high
        self.lazy = lazy
        self.suffix = suffix


class Group(RegexNode):
    """A group: capturing (``number`` set), non-capturing or a modifier group.

    ``opener`` is its Python spelling up to the body (``(``, ``(?:``,
    ``(?P<name>``, ``(?i:``, ``(?-i:``).
    """

    __slots__ = ("item", "opener", "number")

    def __init__(self, item: RegexNode, opener: str, number: Optional[int]) -> None:
        self.item = item
        self.opener = opener
        self.number = number


START, END, WORD_BOUNDARY, NOT_WORD_BOUNDARY = "start", "end", "word_boundary", "not_word_boundary"
"""The kinds of Assertion: ``^``, ``$``, ``\\b``, ``\\B``."""


class Assertion(RegexNode):
    """A zero-width assertion: ``^``, ``$`` (line-wise when ``multiline``), ``\\b`` or ``\\B``.

    ``ignore_case`` matters for ``\\b`` and ``\\B`` only: Python's word class
    then also matches characters that case-fold into it.
    """

    __slots__ = ("kind", "multiline", "ignore_case")

    def __init__(self, kind: str, multiline: bool, ignore_case: bool) -> None:
        self.kind = kind
        self.multiline = multiline
        self.ignore_case = ignore_case


class Lookaround(RegexNode):
    """``(?=...)``, ``(?!...)``, ``(?<=...)`` or ``(?<!...)``; ``opener`` is that prefix."""

    __slots__ = ("item", "opener")

    def __init__(self, item: RegexNode, opener: str) -> None:
        self.item = item
        self.opener = opener

    @property
    def ahead(self) -> bool:
        return not self.opener.startswith("(?<")

    @property
    def negated(self) -> bool:
        return self.opener.endswith("!")


class Backreference(RegexNode):
    """``\\1`` or ``\\k<name>``. ``number`` is None when it always matches empty
    (ECMA: a reference to a group that has not captured, such as one it sits in)."""

    __slots__ = ("number", "python")

    def __init__(self, number: Optional[int], python: str) -> None:
        self.number = number
        self.python = python


def children(node: RegexNode) -> Sequence[RegexNode]:
    """The nodes right under `node`, in pattern order (none under a leaf)."""
    if isinstance(node, Concatenation):
        return node.items
    if isinstance(node, Alternation):
        return node.alternatives
    if isinstance(node, (Repeat, Group, Lookaround)):
        return (node.item,)
    return ()


class ParsedPattern:
    """A parsed pattern: its tree and its capturing groups (number -> Group)."""

    __slots__ = ("source", "root", "groups")

    def __init__(self, source: str, root: RegexNode, groups: Dict[int, Group]) -> None:
        self.source = source
        self.root = root
        self.groups = groups


_ASSERTION_PYTHON = {
    (START, False): r"\A",
    (START, True): r"(?<![^\n\r\u2028\u2029])",
    (END, False): r"\Z",
    (END, True): r"(?![^\n\r\u2028\u2029])",
}


def _charset_python(ranges: Sequence[Range], ignore_case: bool) -> str:
    """The Python class for a set's code points. A set that runs to the last code point (``.``,
    ``[^#]``, ``\\S``) is spelled as the negation of what it leaves out, the same code points, except
    inside ``(?i:...)``, where Python negates after case folding (see `CharSet`): Python's ``re``
    compiles a class of explicit ranges into a map of the Basic Multilingual Plane one code point at a
    time (about 2 ms per pattern), a negated one without it."""
    if not ignore_case and ranges and ranges[-1][1] == MAX_CODE_POINT:
        left_out = complement_ranges(ranges)
        if left_out:
            return "[^" + class_body(left_out) + "]"
    return ranges_to_python(ranges)


def python_source(node: RegexNode) -> str:
    """The Python ``re`` spelling of a parse tree (every construct spelled explicitly)."""
    kind = type(node)
    if kind is CharSet:
        return node.python or _charset_python(node.ranges, node.ignore_case)  # type: ignore[attr-defined]
    if kind is Concatenation:
        return "".join(python_source(item) for item in node.items)  # type: ignore[attr-defined]
    if kind is Alternation:
        return "|".join(python_source(item) for item in node.alternatives)  # type: ignore[attr-defined]
    if kind is Repeat:
        return python_source(node.item) + node.suffix  # type: ignore[attr-defined]
    if kind is Group or kind is Lookaround:
        return node.opener + python_source(node.item) + ")"  # type: ignore[attr-defined]
    if kind is Assertion:
        if node.kind == WORD_BOUNDARY:  # type: ignore[attr-defined]
            return WORD_BOUNDARY_PYTHON
        if node.kind == NOT_WORD_BOUNDARY:  # type: ignore[attr-defined]
            return NOT_WORD_BOUNDARY_PYTHON
        return _ASSERTION_PYTHON[node.kind, node.multiline]  # type: ignore[attr-defined]
    if kind is Backreference:
        return node.python  # type: ignore[attr-defined]
    raise TypeError(f"not a regex node: {kind.__name__}")


# ---------------------------------------------------------------------------
# The parser
