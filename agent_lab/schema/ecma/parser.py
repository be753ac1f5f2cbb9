"""The recursive-descent parser of ECMA-262 patterns (Unicode mode, no Annex B leniency): the
pattern's text in, its tree (`.tree`) out, or the `EcmaRegexError` that says where and why."""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from .captures import reset_sensitive_reference
from .errors import MAX_CODE_POINT, MAX_GROUP_DEPTH, MAX_NAME_REPEATS, MAX_REPETITION, EcmaRegexError, \
    EcmaRegexUnsupported, Range
from .ranges import LINE_TERMINATOR_RANGES, WORD_CASELESS_RANGES, class_escape_set, complement_ranges
from .tree import (END, NOT_WORD_BOUNDARY, START, WORD_BOUNDARY, Alternation, Assertion, Backreference, CharSet,
                   Concatenation, Group, Lookaround, ParsedPattern, RegexNode, Repeat)
from .unicode import (BINARY_PROPERTY_ALIASES, CATEGORY_PROPERTY_NAMES, GENERAL_CATEGORY_ALIASES,
                      SCRIPT_ALIASES, SCRIPT_PROPERTY_NAMES, binary_property_ranges, category_ranges,
                      script_ranges)

__all__ = ["parse_pattern"]

_Key = TypeVar("_Key")  # what a property table is keyed by: categories, a script or a property name

SYNTAX_CHARACTERS = frozenset("^$\\.*+?()[]{}|")
CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
DECIMAL_DIGITS = frozenset("0123456789")
ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_DECIMAL_RUN = re.compile("[0-9]*")
_HEX_RUN = re.compile("[0-9A-Fa-f]*")
_GROUP_SYNTAX = re.compile(r"\\|[\[\]()]")
"""What the bracket pre-scan stops at: an escape, a class bracket or a parenthesis."""
_PLAIN_RUN = re.compile(r"[^\\^$.*+?()\[\]{}|]+")
"""Characters that stand for themselves, read as a run (a quantifier after it takes the last one)."""

_FIXED_ESCAPES: Dict[Tuple[str, bool], CharSet] = {
    (letter, ignore_case): CharSet(class_escape_set(lower, letter.isupper(), ignore_case), ignore_case)
    for ignore_case in (False, True)
    for lower in ("d", "s", "w")
    for letter in (lower, lower.upper())
}
"""\\d \\D \\s \\S \\w \\W as shared nodes (nodes are never changed after parsing)."""

_SIMPLE_QUANTIFIERS: Dict[str, Tuple[int, Optional[int]]] = {"*": (0, None), "+": (1, None), "?": (0, 1)}


def _code_points(pattern: str) -> List[int]:
    """Code points of the pattern, joining UTF-16 surrogate pairs into one."""
    if _SURROGATE_PAIR.search(pattern) is None:
        return list(map(ord, pattern))
    points: List[int] = []
    index = 0
    while index < len(pattern):
        code_point = ord(pattern[index])
        if 0xD800 <= code_point <= 0xDBFF and index + 1 < len(pattern):
            trail = ord(pattern[index + 1])
            if 0xDC00 <= trail <= 0xDFFF:
                code_point = 0x10000 + ((code_point - 0xD800) << 10) + (trail - 0xDC00)
                index += 1
        points.append(code_point)
        index += 1
    return points


def _is_id_start(code_point: int) -> bool:
    char = chr(code_point)
    return char in "$_" or char.isidentifier()


def _is_id_part(code_point: int) -> bool:
    char = chr(code_point)
    return char in "$\u200c\u200d" or ("a" + char).isidentifier()


def _decimal_order(digits: str) -> Tuple[int, str]:
    """Sort key of a decimal digit string without leading zeros, of any length."""
    return len(digits), digits


class _NameScopes:
    """Where each group name was declared, as a trie of (disjunction, alternative) paths.

    ES2025 lets a name repeat only in alternatives that exclude each other:
    two declarations are compatible when their paths first part in different
    alternatives of one disjunction. Walking a trie checks a new declaration
    against all earlier ones in time proportional to its own depth.
    """

    __slots__ = ("children", "ends_here", "count")

    def __init__(self) -> None:
        # disjunction id -> alternative index -> subtree
        self.children: Dict[int, Dict[int, "_NameScopes"]] = {}
        self.ends_here = False
        self.count = 0

    def add(self, path: Sequence[Tuple[int, int]]) -> bool:
        """Record a declaration at ``path``; False when it clashes with an earlier one."""
        node = self
        for disjunction, alternative in path:
            if node.ends_here:
                return False  # an earlier declaration encloses this one
            if node.children and disjunction not in node.children:
                return False  # an earlier one parts from this path outside any shared disjunction
            node = node.children.setdefault(disjunction, {}).setdefault(alternative, _NameScopes())
        if node.ends_here or node.children:
            return False  # the same place, or enclosing an earlier declaration
        node.ends_here = True
        return True

class _Scanner:
    """The lexical level of the grammar: a cursor over the pattern's code points, and what reads one
    token there (an escape, a character class, a Unicode property, a group name), whatever the
    grammar around it. `_Parser` builds the grammar on it.
    """

    def __init__(self, pattern: str, *, resolve_properties: bool) -> None:
        self.resolve_properties = resolve_properties
        self.source = _code_points(pattern)
        # The same code points as text (a str holds any code point), so reading one is an index.
        self.text = pattern if len(self.source) == len(pattern) else "".join(map(chr, self.source))
        self.position = 0
        self.ignore_case = False  # inside (?i:...): what is read there matches case-insensitively
        self.unsupported_reasons: List[str] = []

    # -- the cursor ------------------------------------------------------------
    def fail(self, reason: str, *, position: Optional[int] = None) -> EcmaRegexError:
        where = self.position if position is None else position
        return EcmaRegexError(reason, position=where)

    def peek(self, offset: int = 0) -> Optional[str]:
        index = self.position + offset
        if index < len(self.text):
            return self.text[index]
        return None

    def at_end(self) -> bool:
        return self.position >= len(self.text)

    def take(self) -> str:
        char = self.peek()
        if char is None:
            raise self.fail("unexpected end of pattern")
        self.position += 1
        return char

    def accept(self, text: str) -> bool:
        """Consume ``text`` if it comes next."""
        if self.text.startswith(text, self.position):
            self.position += len(text)
            return True
        return False

    def _decimal_digits(self) -> Optional[str]:
        """The decimal digits that come next, leading zeros dropped (a string:
        ECMA puts no bound on them, and int() refuses very long ones)."""
        found = _DECIMAL_RUN.match(self.text, self.position)
        assert found is not None  # the pattern matches the empty string
        digits = found.group()
        if not digits:
            return None
        self.position = found.end()
        return digits.lstrip("0") or "0"

    # -- group names, escapes and properties -----------------------------------
    def group_name(self) -> str:
        """RegExpIdentifierName up to ``>``; ``\\u`` escapes are allowed in names."""
        start = self.position
        name_points: List[int] = []
        while True:
            char = self.peek()
            if char is None:
                raise self.fail("unterminated group name", position=start)
            if char == ">":
                self.position += 1
                break
            if char == "\\":
                self.position += 1
                if self.take() != "u":
                    raise self.fail("invalid escape in group name")
                code_point = self.unicode_escape()
            else:
                code_point = self.source[self.position]
                self.position += 1
            valid = _is_id_part(code_point) if name_points else _is_id_start(code_point)
            if not valid:
                raise self.fail("invalid character in group name")
            name_points.append(code_point)
        if not name_points:
            raise self.fail("empty group name", position=start)
        return "".join(chr(point) for point in name_points)

    def class_escape_ranges(self) -> Optional[Tuple[List[Range], bool]]:
        """\\d \\D \\s \\S \\w \\W \\p{..} \\P{..}: (ranges, negated), or None."""
        char = self.peek()
        if char in ("d", "s", "w", "D", "S", "W"):
            self.position += 1
            if char == "W" and self.ignore_case:
                return list(WORD_CASELESS_RANGES), True
            return class_escape_set(char.lower(), False, False), char.isupper()
        if char in ("p", "P"):
            self.position += 1
            return self.property_ranges(), char == "P"
        return None

    def property_ranges(self) -> List[Range]:
        start = self.position - 2
        if not self.accept("{"):
            raise self.fail("\\p must be followed by {property}", position=start)
        name = self._property_word()
        value = self._property_word() if self.accept("=") else None
        if not self.accept("}"):
            raise self.fail("unterminated Unicode property escape", position=start)
        if value is not None:
            if name in CATEGORY_PROPERTY_NAMES and value in GENERAL_CATEGORY_ALIASES:
                return self._resolve(category_ranges, GENERAL_CATEGORY_ALIASES[value])
            if name in SCRIPT_PROPERTY_NAMES and value in SCRIPT_ALIASES:
                return self._resolve(script_ranges, SCRIPT_ALIASES[value])
            raise self.fail("unknown Unicode property or value", position=start)
        if name in GENERAL_CATEGORY_ALIASES:
            return self._resolve(category_ranges, GENERAL_CATEGORY_ALIASES[name])
        if name in BINARY_PROPERTY_ALIASES:
            return self._resolve(binary_property_ranges, BINARY_PROPERTY_ALIASES[name])
        raise self.fail("unknown Unicode property", position=start)

    def _resolve(self, table: Callable[[_Key], List[Range]], key: _Key) -> List[Range]:
        """Ranges of a valid property, unless only the syntax is being checked.

        A property that cannot be computed is noted, and parsing goes on so
        later syntax errors are still found.
        """
        if not self.resolve_properties:
            return []
        try:
            return table(key)
        except EcmaRegexUnsupported as unsupported:
            self.unsupported_reasons.append(unsupported.reason)
            return []

    def _property_word(self) -> str:
        start = self.position
        while (char := self.peek()) is not None and char.isascii() and (char.isalnum() or char == "_"):
            self.position += 1
        if self.position == start:
            raise self.fail("empty Unicode property name")
        return "".join(chr(point) for point in self.source[start:self.position])

    def character_escape(self) -> int:
        """CharacterEscape[+UnicodeMode]: returns the code point it stands for."""
        start = self.position - 1
        char = self.take()
        if char in CONTROL_ESCAPES:
            return CONTROL_ESCAPES[char]
        if char == "c":
            letter = self.peek()
            if letter is None or letter not in ASCII_LETTERS:
                raise self.fail("\\c must be followed by an ASCII letter", position=start)
            self.position += 1
            return ord(letter) % 32
        if char == "0":
            if self.peek() is not None and self.peek() in DECIMAL_DIGITS:
                raise self.fail("octal escapes are not allowed in Unicode mode", position=start)
            return 0
        if char == "x":
            return self._hex_digits(2, start)
        if char == "u":
            return self.unicode_escape()
        if char in SYNTAX_CHARACTERS or char == "/":
            return ord(char)
        raise self.fail("invalid escape in Unicode mode", position=start)

    def _hex_digits(self, count: int, start: int) -> int:
        digits = ""
        for _ in range(count):
            char = self.peek()
            if char is None or char not in HEX_DIGITS:
                raise self.fail("invalid hexadecimal escape", position=start)
            digits += char
            self.position += 1
        return int(digits, 16)

    def unicode_escape(self) -> int:
        """After ``\\u``: ``HHHH`` (surrogate pairs joined) or ``{H...}``."""
        start = self.position - 2
        if self.accept("{"):
            found = _HEX_RUN.match(self.text, self.position)
            assert found is not None  # the pattern matches the empty string
            digits = found.group()
            self.position = found.end()
            if not digits or not self.accept("}"):
                raise self.fail("invalid \\u{...} escape", position=start)
            code_point = int(digits, 16)
            if code_point > MAX_CODE_POINT:
                raise self.fail("code point out of range", position=start)
            return code_point
        lead = self._hex_digits(4, start)
        if 0xD800 <= lead <= 0xDBFF and self.peek() == "\\" and self.peek(1) == "u":
            saved = self.position
            self.position += 2
            try:
                trail = self._hex_digits(4, start)
            except EcmaRegexError:
                trail = -1
            if 0xDC00 <= trail <= 0xDFFF:
                return 0x10000 + ((lead - 0xD800) << 10) + (trail - 0xDC00)
            self.position = saved
        return lead

    # -- character classes ------------------------------------------------------
    def character_class(self) -> RegexNode:
        start = self.position - 1
        negate = self.accept("^")
        ranges: List[Range] = []
        while True:
            if self.at_end():
                raise self.fail("unterminated character class", position=start)
            if self.accept("]"):
                break
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in (None, "]"):
                self.position += 1
                second = self.class_atom()
                if isinstance(first, list) or isinstance(second, list):
                    raise self.fail("a class escape cannot bound a range")
                if first > second:
                    raise self.fail("range out of order in character class")
                ranges.append((first, second))
            elif isinstance(first, list):
                ranges.extend(first)
            else:
                ranges.append((first, first))
        return CharSet.inverted(ranges, self.ignore_case) if negate else CharSet(ranges, self.ignore_case)

    def class_atom(self):
        """One class member: a code point (int) or a set of ranges (list)."""
        start = self.position
        char = self.take()
        if char != "\\":
            return self.source[start]
        char = self.peek()
        if char is None:
            raise self.fail("pattern ends with a backslash", position=start)
        if char == "b":
            self.position += 1
            return 0x08
        if char == "-":
            self.position += 1
            return ord("-")
        class_ranges = self.class_escape_ranges()
        if class_ranges is not None:
            ranges, negate = class_ranges
            return complement_ranges(ranges) if negate else list(ranges)
        return self.character_escape()


class _Parser(_Scanner):
    """Recursive-descent parser over the ECMA grammar (Unicode mode) that builds a tree.

    One instance parses one pattern. Methods are named after grammar productions; the tokens they
    read come from `_Scanner`.
    """

    def __init__(self, pattern: str, *, resolve_properties: bool = True) -> None:
        super().__init__(pattern, resolve_properties=resolve_properties)
        self.multiline = False
        self.dot_all = False
        self.depth = 0
        self.lookbehind_depth = 0
        self.group_count, self.group_names = self._scan_groups()
        self.groups_opened = 0
        self.open_groups: List[int] = []
        self.groups: Dict[int, Group] = {}
        self.python_names: Dict[str, str] = {}
        self.name_scopes: Dict[str, _NameScopes] = {}
        self.alternative_path: List[Tuple[int, int]] = []
        self.disjunctions_seen = 0
        self.reads_captures = False  # a backreference that can read a capture was seen (see .captures)

    # -- pre-scan ------------------------------------------------------------
    def _scan_groups(self) -> Tuple[int, Dict[str, int]]:
        """Count capturing groups, collect names and check bracket balance first.

        ECMA allows a backreference to a group that appears later, so the
        totals must be known up front. Balance is checked here too, so an
        unbalanced pattern is invalid even when it nests deeper than the
        parser recurses. Escapes and class bodies are skipped.
        """
        count = 0
        names: Dict[str, int] = {}
        open_positions: List[int] = []
        class_start: Optional[int] = None
        self.position = 0
        text = self.text
        for found in _GROUP_SYNTAX.finditer(text):
            here = found.start()
            if here < self.position:
                continue  # inside an escape or a group name already read
            char = found.group()
            self.position = here + 1
            if char == "\\":
                self.position += 1
            elif class_start is not None:
                if char == "]":
                    class_start = None
            elif char == "[":
                class_start = here
            elif char == ")":
                if not open_positions:
                    raise self.fail("unmatched closing parenthesis", position=here)
                open_positions.pop()
            elif char == "(":
                open_positions.append(here)
                if self.peek() != "?":
                    count += 1
                elif self.peek(1) == "<" and self.peek(2) not in ("=", "!"):
                    count += 1
                    self.position += 2
                    names.setdefault(self.group_name(), count)
        if class_start is not None:
            raise self.fail("unterminated character class", position=class_start)
        if open_positions:
            raise self.fail("unterminated group", position=open_positions[-1])
        self.position = 0
        return count, names

    # -- grammar -------------------------------------------------------------
    def parse(self) -> ParsedPattern:
        """The whole pattern; EcmaRegexUnsupported when it is valid but cannot run here."""
        root = self.disjunction()
        if not self.at_end():
            if self.peek() == ")":
                raise self.fail("unmatched closing parenthesis")
            raise self.fail("unexpected character")
        if self.reads_captures and self.resolve_properties:  # (the syntax question alone needs no run)
            number = reset_sensitive_reference(root)
            if number is not None:
                self.unsupported_reasons.append(
                    f"a backreference to group {number} reads a capture that ECMA-262 and Python's re keep "
                    "differently (ECMA resets a repeated group at each iteration and drops an empty iteration; re "
                    "keeps both)")
        if self.unsupported_reasons:
            raise EcmaRegexUnsupported(self.unsupported_reasons[0])
        return ParsedPattern(self.text, root, self.groups)

    def disjunction(self) -> RegexNode:
        self.disjunctions_seen += 1
        disjunction_id = self.disjunctions_seen
        alternatives: List[RegexNode] = []
        while True:
            self.alternative_path.append((disjunction_id, len(alternatives)))
            alternatives.append(self.alternative())
            self.alternative_path.pop()
            if not self.accept("|"):
                return alternatives[0] if len(alternatives) == 1 else Alternation(alternatives)

    def alternative(self) -> RegexNode:
        terms: List[RegexNode] = []
        text = self.text
        length = len(text)
        plain_run = _PLAIN_RUN.match
        while self.position < length and text[self.position] not in "|)":
            run = plain_run(text, self.position)
            if run is not None:
                end = run.end()
                if end < length and text[end] in "*+?{":
                    end -= 1  # the last character is the one a quantifier repeats
                if end > self.position:
                    ignore_case = self.ignore_case
                    terms.extend(CharSet.literal(ord(literal), ignore_case) for literal in text[self.position:end])
                    self.position = end
                    continue
            elif text[self.position] == "(" and text[self.position + 1:self.position + 2] != "?":
                start = self.position  # a plain capturing group, the commonest group: read it directly
                self.position += 1
                self.groups_opened += 1
                terms.append(self.quantifier(self._capturing_group("(", start)))
                continue
            terms.append(self.term())
        return Concatenation(terms)

    def term(self) -> RegexNode:
        assertion = self.assertion()
        if assertion is not None:
            if self._quantifier_follows():
                raise self.fail("nothing to repeat: an assertion cannot be quantified")
            return assertion
        atom = self.atom()
        return self.quantifier(atom)

    def _quantifier_follows(self) -> bool:
        return self.peek() in ("*", "+", "?", "{")

    def assertion(self) -> Optional[RegexNode]:
        text, position = self.text, self.position
        char = text[position]
        if char == "^" or char == "$":
            self.position += 1
            return Assertion(START if char == "^" else END, self.multiline, self.ignore_case)
        if char == "\\":
            following = text[position + 1:position + 2]
            if following == "b" or following == "B":
                self.position += 2
                return Assertion(WORD_BOUNDARY if following == "b" else NOT_WORD_BOUNDARY,
                                 self.multiline, self.ignore_case)
            return None
        if char != "(" or text[position + 1:position + 2] != "?":
            return None
        opener = text[position:position + 3]
        if opener == "(?=" or opener == "(?!":
            self.position += 3
            return Lookaround(self._group_body(position), opener)
        opener = text[position:position + 4]
        if opener == "(?<=" or opener == "(?<!":
            self.position += 4
            self.lookbehind_depth += 1
            body = self._group_body(position)
            self.lookbehind_depth -= 1
            return Lookaround(body, opener)
        return None

    def quantifier(self, atom: RegexNode) -> RegexNode:
        start = self.position
        char = self.text[start:start + 1]
        if char in _SIMPLE_QUANTIFIERS:
            self.position += 1
            low, high = _SIMPLE_QUANTIFIERS[char]
            text = char
        elif char == "{":
            self.position += 1
            low, high, text = self._braced_quantifier(start)
        else:
            return atom
        lazy = self.text[self.position:self.position + 1] == "?"
        if lazy:
            self.position += 1
        return Repeat(atom, low, high, lazy, text + "?" if lazy else text)

    def _braced_quantifier(self, start: int) -> Tuple[int, Optional[int], str]:
        low = self._decimal_digits()
        if low is None:
            raise self.fail("incomplete quantifier", position=start)
        if self.accept("}"):
            return self._count(low), self._count(low), "{" + self._repetition_count(low) + "}"
        if not self.accept(","):
            raise self.fail("incomplete quantifier", position=start)
        high = self._decimal_digits()
        if not self.accept("}"):
            raise self.fail("incomplete quantifier", position=start)
        if high is None:
            return self._count(low), None, "{" + self._repetition_count(low) + ",}"
        if _decimal_order(high) < _decimal_order(low):
            raise self.fail("numbers out of order in quantifier", position=start)
        text = "{" + self._repetition_count(low) + "," + self._repetition_count(high) + "}"
        return self._count(low), self._count(high), text

    def _repetition_count(self, digits: str) -> str:
        if _decimal_order(digits) > _decimal_order(str(MAX_REPETITION)):
            self.unsupported_reasons.append(f"repetition counts above {MAX_REPETITION}")
        return digits

    @staticmethod
    def _count(digits: str) -> int:
        """The count as an int, capped just above MAX_REPETITION (longer digit strings are not read)."""
        if _decimal_order(digits) > _decimal_order(str(MAX_REPETITION)):
            return MAX_REPETITION + 1
        return int(digits)

    def atom(self) -> RegexNode:
        start = self.position
        char = self.text[start]  # the caller has checked that the pattern goes on
        self.position += 1
        if char == ".":
            dot = [(0, MAX_CODE_POINT)] if self.dot_all else complement_ranges(LINE_TERMINATOR_RANGES)
            return CharSet(dot, self.ignore_case)
        if char == "(":
            return self.group()
        if char == "[":
            return self.character_class()
        if char == "\\":
            return self.atom_escape()
        if char in ("*", "+", "?", "{"):
            raise self.fail("nothing to repeat", position=start)
        if char in ("]", "}"):
            raise self.fail("lone quantifier bracket or class bracket", position=start)
        return CharSet.literal(self.source[start], self.ignore_case)

    # -- groups --------------------------------------------------------------
    def group(self) -> RegexNode:
        start = self.position - 1
        if self.text[self.position:self.position + 1] != "?":
            self.groups_opened += 1
            return self._capturing_group("(", start)
        if self.accept("?:"):
            return Group(self._group_body(start), "(?:", None)
        if self.accept("?<"):
            name = self.group_name()
            self.groups_opened += 1
            self._record_group_name(name, start)
            python_name = self._python_group_name(name)
            return self._capturing_group(f"(?P<{python_name}>", start)
        if self.peek() == "?":
            return self._modifier_group(start)
        self.groups_opened += 1
        return self._capturing_group("(", start)

    def _record_group_name(self, name: str, start: int) -> None:
        """ES2025: a name may repeat only in alternatives that exclude each other."""
        scopes = self.name_scopes.get(name)
        if scopes is None:
            scopes = self.name_scopes[name] = _NameScopes()
        if scopes.count >= MAX_NAME_REPEATS:
            raise self.fail(f"more than {MAX_NAME_REPEATS} groups share one name", position=start)
        if not scopes.add(self.alternative_path):
            raise self.fail("duplicate capture group name", position=start)
        scopes.count += 1
        if scopes.count > 1:
            self.unsupported_reasons.append("a group name repeated in exclusive alternatives")

    def _capturing_group(self, opener: str, start: int) -> Group:
        number = self.groups_opened
        self.open_groups.append(number)
        group = Group(self._group_body(start), opener, number)
        self.open_groups.pop()  # (after an error the parser is dropped, so no finally is needed)
        self.groups[number] = group
        return group

    def _group_body(self, start: int) -> RegexNode:
        self.depth += 1
        if self.depth > MAX_GROUP_DEPTH:
            raise EcmaRegexUnsupported(f"groups nested deeper than {MAX_GROUP_DEPTH} levels")
        body = self.disjunction()
        self.depth -= 1
        if self.text[self.position:self.position + 1] != ")":
            raise self.fail("unterminated group", position=start)
        self.position += 1
        return body

    def _modifier_group(self, start: int) -> RegexNode:
        """``(?ims-ims:...)`` (ES2025 modifiers); any other ``(?`` form is invalid."""
        self.position += 1  # the "?"
        enable = self._modifier_flags()
        disable = self._modifier_flags() if self.accept("-") else None
        if not self.accept(":"):
            raise self.fail("invalid group: only (?:, (?=, (?!, (?<=, (?<!, (?<name> "
                            "and (?flags-flags: are ECMA-262", position=start)
        if disable is not None and not enable and not disable:
            raise self.fail("empty modifier group", position=start)
        if set(enable) & set(disable or ""):
            raise self.fail("a modifier is both enabled and disabled", position=start)
        saved = (self.ignore_case, self.multiline, self.dot_all)
        for flag, value in [(f, True) for f in enable] + [(f, False) for f in disable or ""]:
            if flag == "i":
                self.ignore_case = value
            elif flag == "m":
                self.multiline = value
            else:
                self.dot_all = value
        python_flags = ""
        if "i" in enable:
            python_flags = "(?i:"
        elif disable and "i" in disable:
            python_flags = "(?-i:"
        try:
            body = self._group_body(start)
        finally:
            self.ignore_case, self.multiline, self.dot_all = saved
        return Group(body, python_flags or "(?:", None)

    def _modifier_flags(self) -> str:
        flags = ""
        while (char := self.peek()) is not None and char in "ims":
            flag = self.take()
            if flag in flags:
                raise self.fail("repeated modifier flag")
            flags += flag
        if char is not None and char.isalpha():
            raise self.fail("unknown modifier flag")
        return flags

    def _python_group_name(self, name: str) -> str:
        python_name = name if name.isidentifier() and not name.startswith("_ecma_") else (
            "_ecma_" + "_".join(f"{ord(char):x}" for char in name))
        self.python_names[name] = python_name
        return python_name

    # -- escapes ---------------------------------------------------------------
    def atom_escape(self) -> RegexNode:
        start = self.position - 1
        char = self.peek()
        if char is None:
            raise self.fail("pattern ends with a backslash", position=start)
        if char in "123456789":
            digits = self._decimal_digits()
            assert digits is not None  # the next character is a digit, so there is at least one
            if _decimal_order(digits) > _decimal_order(str(self.group_count)):
                raise self.fail("backreference to a group that does not exist", position=start)
            return self._backreference(int(digits), digits)
        if char == "k":
            self.position += 1
            if not self.accept("<"):
                raise self.fail("invalid named reference", position=start)
            name = self.group_name()
            if name not in self.group_names:
                raise self.fail("named reference to a group that does not exist", position=start)
            number = self.group_names[name]
            return self._backreference(number, self._python_group_name(name))
        fixed = _FIXED_ESCAPES.get((char, self.ignore_case))
        if fixed is not None:
            self.position += 1
            return fixed
        class_ranges = self.class_escape_ranges()
        if class_ranges is not None:
            ranges, negate = class_ranges
            return CharSet(complement_ranges(ranges) if negate else ranges, self.ignore_case)
        return CharSet.literal(self.character_escape(), self.ignore_case)

    def _backreference(self, number: int, python_reference: str) -> Backreference:
        """ECMA: a reference to a group that has not captured matches empty."""
        if self.lookbehind_depth:
            # ECMA matches lookbehinds right to left, so references there see
            # groups to their right; Python's re has no such mode.
            self.unsupported_reasons.append("backreferences inside lookbehind")
        if number in self.open_groups or number > self.groups_opened:
            return Backreference(None, "(?:)")
        self.reads_captures = True
        if python_reference.isdigit():
            return Backreference(number, f"(?({python_reference})\\{python_reference})")
        return Backreference(number, f"(?({python_reference})(?P={python_reference}))")


def parse_pattern(pattern: str, *, resolve_properties: bool = True) -> ParsedPattern:
    """The tree of `pattern` (a str). Raises EcmaRegexError when it is not ECMA-262, and
    EcmaRegexUnsupported when it is but cannot run here. Without `resolve_properties` no Unicode
    property table is built (the syntax question alone: linear in the pattern's length)."""
    return _Parser(pattern, resolve_properties=resolve_properties).parse()
