"""Sets of code points as sorted ranges: ECMA's fixed classes, their arithmetic, and how Python's
``re`` spells a set so that it matches exactly those code points."""

from __future__ import annotations

from typing import List, Sequence, Tuple

from .errors import MAX_CODE_POINT, Range

# Fixed character sets (ECMA-262 22.2.2.9 CharacterClassEscape)

DIGIT_RANGES: Tuple[Range, ...] = ((0x30, 0x39),)
WORD_RANGES: Tuple[Range, ...] = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
LINE_TERMINATOR_RANGES: Tuple[Range, ...] = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
# WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP, Zs) plus LineTerminator.
WHITE_SPACE_RANGES: Tuple[Range, ...] = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)


def normalize_ranges(ranges: Sequence[Range]) -> List[Range]:
    """Sort and merge overlapping or adjacent ranges."""
    merged: List[Range] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def complement_ranges(ranges: Sequence[Range]) -> List[Range]:
    """Every code point not covered by ``ranges``."""
    result: List[Range] = []
    next_low = 0
    for low, high in normalize_ranges(ranges):
        if low > next_low:
            result.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_CODE_POINT:
        result.append((next_low, MAX_CODE_POINT))
    return result


def _escape_code_point(code_point: int) -> str:
    """Spell one code point so Python's ``re`` reads it as a literal anywhere."""
    char = chr(code_point)
    if char.isascii() and char.isalnum():
        return char
    if code_point <= 0xFF:
        return f"\\x{code_point:02x}"
    if code_point <= 0xFFFF:
        return f"\\u{code_point:04x}"
    return f"\\U{code_point:08x}"


def class_body(ranges: Sequence[Range]) -> str:
    """The inside of a Python character class (no brackets) matching exactly `ranges`."""
    parts = []
    for low, high in ranges:
        if low == high:
            parts.append(_escape_code_point(low))
        elif high == low + 1:
            parts.append(_escape_code_point(low) + _escape_code_point(high))
        else:
            parts.append(_escape_code_point(low) + "-" + _escape_code_point(high))
    return "".join(parts)


def ranges_to_python(ranges: Sequence[Range], *, negate: bool = False) -> str:
    """A Python character class matching exactly ``ranges`` (or their complement)."""
    ranges = normalize_ranges(ranges)
    if negate:
        ranges = complement_ranges(ranges)
    if not ranges:
        return "(?!)"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _escape_code_point(ranges[0][0])
    return "[" + class_body(ranges) + "]"


DOT_PYTHON = ranges_to_python(LINE_TERMINATOR_RANGES, negate=True)
_WORD_CLASS = ranges_to_python(WORD_RANGES)
# Spelled out rather than Python's \b and \B: those are Unicode-aware, and
# Python's \B never matches in an empty string where ECMA's does.
WORD_BOUNDARY_PYTHON = (f"(?:(?<={_WORD_CLASS})(?!{_WORD_CLASS})"
                        f"|(?<!{_WORD_CLASS})(?={_WORD_CLASS}))")
NOT_WORD_BOUNDARY_PYTHON = (f"(?:(?<={_WORD_CLASS})(?={_WORD_CLASS})"
                            f"|(?<!{_WORD_CLASS})(?!{_WORD_CLASS}))")

WORD_CASELESS_RANGES: Tuple[Range, ...] = tuple(normalize_ranges(
    list(WORD_RANGES) + [(0x130, 0x131), (0x17F, 0x17F), (0x212A, 0x212A)]))
"""What ``\\w`` matches under Python's IGNORECASE: the ASCII word characters and the four others
Python folds onto them (U+0130, U+0131, U+017F long s, U+212A Kelvin sign). ``\\W`` inside
``(?i:...)`` is its complement: ECMA takes ``\\W`` there as the complement of the word characters
*with* their case variants, so it never matches ``s``, ``k`` or ``K`` (the complement of the ASCII
word class, folded, matched them through U+017F and U+212A)."""


def class_escape_set(lower: str, negate: bool, ignore_case: bool) -> List[Range]:
    """What ``\\d``, ``\\s`` or ``\\w`` (`lower`) matches, or its upper-case complement (`negate`),
    inside ``(?i:...)`` or not."""
    if lower == "w" and negate and ignore_case:
        return complement_ranges(WORD_CASELESS_RANGES)
    ranges = {"d": DIGIT_RANGES, "s": WHITE_SPACE_RANGES, "w": WORD_RANGES}[lower]
    return complement_ranges(ranges) if negate else list(ranges)
