"""ECMA-262 regular expressions (Unicode mode) translated into Python ``re``.

JSON Schema's ``pattern``, ``patternProperties`` and ``format: regex`` speak
ECMA-262, and the specification recommends the ``u`` flag. Python's ``re``
looks similar but differs in ways that change verdicts: ``\\d`` and ``\\w`` are
Unicode-wide, ``$`` also matches before a final newline, ``\\s`` is a different
set, and it accepts syntax ECMA does not (``(?P<n>...)``, ``\\A``, ``(?i)``).

So patterns are not passed to ``re`` as they are. A small recursive-descent
parser reads the ECMA grammar (Unicode mode, no Annex B leniency) and writes
an equivalent Python pattern in which every construct is spelled explicitly:
literal characters are escaped, character classes become explicit code-point
ranges, anchors become ``\\A``/``\\Z``. Anything the grammar does not allow
raises :class:`EcmaRegexError` with the position and the reason (never the
pattern text itself, which may come from an instance).

Some valid ECMA patterns have no Python equivalent (variable-width
lookbehind, backreferences inside lookbehind, a group name repeated in
exclusive alternatives, Unicode properties the standard library cannot
derive, repetition counts above Python's limit). They raise
:class:`EcmaRegexUnsupported`, a subclass of :class:`EcmaRegexError`, so
callers can tell "invalid" from "cannot run here"; :func:`is_ecma_regex`
answers the syntax question alone (the ``format: regex`` question).

Semantic differences that remain (rare in schemas): captures inside a
repeated group are not reset at each iteration, an iteration of a quantified
group may match the empty string where ECMA stops the loop, the ``i``
modifier uses Python's case folding, and ``\\p{Script=...}`` (and
``Script_Extensions``) membership is derived from character names, an
approximation of Scripts.txt, which the standard library lacks; Common and
Inherited cannot be derived and are unsupported.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

__all__ = [
    "EcmaRegexError",
    "EcmaRegexUnsupported",
    "compile_ecma",
    "is_ecma_regex",
    "translate_ecma",
]

MAX_CODE_POINT = 0x10FFFF
MAX_REPETITION = 4_294_967_295
"""Largest repetition count Python's re accepts (its MAXREPEAT); larger ones are unsupported."""
MAX_NAME_REPEATS = 1000
"""Most groups sharing one name (ES2025); checking them is quadratic, so more are refused."""
MAX_GROUP_DEPTH = 64
"""Deepest nesting of groups translated; deeper patterns are refused, not recursed into."""

Range = Tuple[int, int]
_Key = TypeVar("_Key")  # what a property table is keyed by: categories, a script or a property name


class EcmaRegexError(ValueError):
    """The pattern is not a valid ECMA-262 (Unicode mode) regular expression.

    ``reason`` says what is wrong and ``position`` (a code-point index, or
    None) where; the message is built from them, so a caller that adds its
    own context can use the parts instead of repeating the message.
    """

    def __init__(self, reason: str, *, position: Optional[int] = None) -> None:
        self.reason = reason
        self.position = position
        super().__init__(self.describe())

    def describe(self) -> str:
        where = "" if self.position is None else f" at position {self.position}"
        return f"invalid ECMA-262 regular expression{where}: {self.reason}"


class EcmaRegexUnsupported(EcmaRegexError):
    """The pattern is valid ECMA-262 but cannot be run by Python's ``re``."""

    def describe(self) -> str:
        return f"valid ECMA-262 regular expression that Python's re cannot run: {self.reason}"


# ---------------------------------------------------------------------------
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
SYNTAX_CHARACTERS = frozenset("^$\\.*+?()[]{}|")
CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
DECIMAL_DIGITS = frozenset("0123456789")
ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


# ---------------------------------------------------------------------------
# Range arithmetic


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


def _class_body(ranges: Sequence[Range]) -> str:
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
    return "[" + _class_body(ranges) + "]"


DOT_PYTHON = ranges_to_python(LINE_TERMINATOR_RANGES, negate=True)
_WORD_CLASS = ranges_to_python(WORD_RANGES)
# Spelled out rather than Python's \b and \B: those are Unicode-aware, and
# Python's \B never matches in an empty string where ECMA's does.
WORD_BOUNDARY_PYTHON = (f"(?:(?<={_WORD_CLASS})(?!{_WORD_CLASS})"
                        f"|(?<!{_WORD_CLASS})(?={_WORD_CLASS}))")
NOT_WORD_BOUNDARY_PYTHON = (f"(?:(?<={_WORD_CLASS})(?={_WORD_CLASS})"
                            f"|(?<!{_WORD_CLASS})(?!{_WORD_CLASS}))")


# ---------------------------------------------------------------------------
# Unicode property tables, built lazily from unicodedata and cached as ranges

_GENERAL_CATEGORY_ALIASES: Dict[str, Tuple[str, ...]] = {
    # value (every ECMA-accepted spelling) -> two-letter categories
    "C": ("Cc", "Cf", "Cn", "Co", "Cs"), "Other": ("Cc", "Cf", "Cn", "Co", "Cs"),
    "Cc": ("Cc",), "Control": ("Cc",), "cntrl": ("Cc",),
    "Cf": ("Cf",), "Format": ("Cf",),
    "Cn": ("Cn",), "Unassigned": ("Cn",),
    "Co": ("Co",), "Private_Use": ("Co",),
    "Cs": ("Cs",), "Surrogate": ("Cs",),
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"), "Letter": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"), "Cased_Letter": ("Lu", "Ll", "Lt"),
    "Ll": ("Ll",), "Lowercase_Letter": ("Ll",),
    "Lm": ("Lm",), "Modifier_Letter": ("Lm",),
    "Lo": ("Lo",), "Other_Letter": ("Lo",),
    "Lt": ("Lt",), "Titlecase_Letter": ("Lt",),
    "Lu": ("Lu",), "Uppercase_Letter": ("Lu",),
    "M": ("Mc", "Me", "Mn"), "Mark": ("Mc", "Me", "Mn"), "Combining_Mark": ("Mc", "Me", "Mn"),
    "Mc": ("Mc",), "Spacing_Mark": ("Mc",),
    "Me": ("Me",), "Enclosing_Mark": ("Me",),
    "Mn": ("Mn",), "Nonspacing_Mark": ("Mn",),
    "N": ("Nd", "Nl", "No"), "Number": ("Nd", "Nl", "No"),
    "Nd": ("Nd",), "Decimal_Number": ("Nd",), "digit": ("Nd",),
    "Nl": ("Nl",), "Letter_Number": ("Nl",),
    "No": ("No",), "Other_Number": ("No",),
    "P": ("Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps"),
    "Punctuation": ("Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps"),
    "punct": ("Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps"),
    "Pc": ("Pc",), "Connector_Punctuation": ("Pc",),
    "Pd": ("Pd",), "Dash_Punctuation": ("Pd",),
    "Pe": ("Pe",), "Close_Punctuation": ("Pe",),
    "Pf": ("Pf",), "Final_Punctuation": ("Pf",),
    "Pi": ("Pi",), "Initial_Punctuation": ("Pi",),
    "Po": ("Po",), "Other_Punctuation": ("Po",),
    "Ps": ("Ps",), "Open_Punctuation": ("Ps",),
    "S": ("Sc", "Sk", "Sm", "So"), "Symbol": ("Sc", "Sk", "Sm", "So"),
    "Sc": ("Sc",), "Currency_Symbol": ("Sc",),
    "Sk": ("Sk",), "Modifier_Symbol": ("Sk",),
    "Sm": ("Sm",), "Math_Symbol": ("Sm",),
    "So": ("So",), "Other_Symbol": ("So",),
    "Z": ("Zl", "Zp", "Zs"), "Separator": ("Zl", "Zp", "Zs"),
    "Zl": ("Zl",), "Line_Separator": ("Zl",),
    "Zp": ("Zp",), "Paragraph_Separator": ("Zp",),
    "Zs": ("Zs",), "Space_Separator": ("Zs",),
}

_table_lock = threading.RLock()
_category_ranges: Optional[Dict[str, List[Range]]] = None


def _scan_categories() -> Dict[str, List[Range]]:
    """One pass over every code point, grouping runs by general category."""
    table: Dict[str, List[Range]] = {}
    category_of = unicodedata.category
    run_start = 0
    run_category = category_of(chr(0))
    for code_point in range(1, MAX_CODE_POINT + 1):
        category = category_of(chr(code_point))
        if category != run_category:
            table.setdefault(run_category, []).append((run_start, code_point - 1))
            run_start, run_category = code_point, category
    table.setdefault(run_category, []).append((run_start, MAX_CODE_POINT))
    return table


def category_ranges(categories: Sequence[str]) -> List[Range]:
    """Ranges of the union of two-letter general categories (table built once)."""
    global _category_ranges
    if _category_ranges is None:
        with _table_lock:
            if _category_ranges is None:
                _category_ranges = _scan_categories()
    table = _category_ranges
    ranges: List[Range] = []
    for category in categories:
        ranges.extend(table.get(category, ()))
    return normalize_ranges(ranges)


# Scripts: every Script value ECMA-262 accepts (Unicode 16 PropertyValueAliases,
# "Long_Name:Alias[:Alias]"), so unknown names are rejected as syntax errors.
_SCRIPT_VALUE_TABLE = """
    Adlam:Adlm Ahom:Ahom Anatolian_Hieroglyphs:Hluw Arabic:Arab Armenian:Armn Avestan:Avst
    Balinese:Bali Bamum:Bamu Bassa_Vah:Bass Batak:Batk Bengali:Beng Bhaiksuki:Bhks
    Bopomofo:Bopo Brahmi:Brah Braille:Brai Buginese:Bugi Buhid:Buhd Canadian_Aboriginal:Cans
    Carian:Cari Caucasian_Albanian:Aghb Chakma:Cakm Cham:Cham Cherokee:Cher Chorasmian:Chrs
    Common:Zyyy Coptic:Copt:Qaac Cuneiform:Xsux Cypriot:Cprt Cypro_Minoan:Cpmn Cyrillic:Cyrl
    Deseret:Dsrt Devanagari:Deva Dives_Akuru:Diak Dogra:Dogr Duployan:Dupl
    Egyptian_Hieroglyphs:Egyp Elbasan:Elba Elymaic:Elym Ethiopic:Ethi Garay:Gara Georgian:Geor
    Glagolitic:Glag Gothic:Goth Grantha:Gran Greek:Grek Gujarati:Gujr Gunjala_Gondi:Gong
    Gurmukhi:Guru Gurung_Khema:Gukh Han:Hani Hangul:Hang Hanifi_Rohingya:Rohg Hanunoo:Hano
    Hatran:Hatr Hebrew:Hebr Hiragana:Hira Imperial_Aramaic:Armi Inherited:Zinh:Qaai
    Inscriptional_Pahlavi:Phli Inscriptional_Parthian:Prti Javanese:Java Kaithi:Kthi
    Kannada:Knda Katakana:Kana Kawi:Kawi Kayah_Li:Kali Kharoshthi:Khar Khitan_Small_Script:Kits
    Khmer:Khmr Khojki:Khoj Khudawadi:Sind Kirat_Rai:Krai Lao:Laoo Latin:Latn Lepcha:Lepc
    Limbu:Limb Linear_A:Lina Linear_B:Linb Lisu:Lisu Lycian:Lyci Lydian:Lydi Mahajani:Mahj
    Makasar:Maka Malayalam:Mlym Mandaic:Mand Manichaean:Mani Marchen:Marc Masaram_Gondi:Gonm
    Medefaidrin:Medf Meetei_Mayek:Mtei Mende_Kikakui:Mend Meroitic_Cursive:Merc
    Meroitic_Hieroglyphs:Mero Miao:Plrd Modi:Modi Mongolian:Mong Mro:Mroo Multani:Mult
    Myanmar:Mymr Nabataean:Nbat Nag_Mundari:Nagm Nandinagari:Nand New_Tai_Lue:Talu Newa:Newa
    Nko:Nkoo Nushu:Nshu Nyiakeng_Puachue_Hmong:Hmnp Ogham:Ogam Ol_Chiki:Olck Ol_Onal:Onao
    Old_Hungarian:Hung Old_Italic:Ital Old_North_Arabian:Narb Old_Permic:Perm Old_Persian:Xpeo
    Old_Sogdian:Sogo Old_South_Arabian:Sarb Old_Turkic:Orkh Old_Uyghur:Ougr Oriya:Orya
    Osage:Osge Osmanya:Osma Pahawh_Hmong:Hmng Palmyrene:Palm Pau_Cin_Hau:Pauc Phags_Pa:Phag
    Phoenician:Phnx Psalter_Pahlavi:Phlp Rejang:Rjng Runic:Runr Samaritan:Samr Saurashtra:Saur
    Sharada:Shrd Shavian:Shaw Siddham:Sidd SignWriting:Sgnw Sinhala:Sinh Sogdian:Sogd
    Sora_Sompeng:Sora Soyombo:Soyo Sundanese:Sund Sunuwar:Sunu Syloti_Nagri:Sylo Syriac:Syrc
    Tagalog:Tglg Tagbanwa:Tagb Tai_Le:Tale Tai_Tham:Lana Tai_Viet:Tavt Takri:Takr Tamil:Taml
    Tangsa:Tnsa Tangut:Tang Telugu:Telu Thaana:Thaa Thai:Thai Tibetan:Tibt Tifinagh:Tfng
    Tirhuta:Tirh Todhri:Todr Toto:Toto Tulu_Tigalari:Tutg Ugaritic:Ugar Unknown:Zzzz Vai:Vaii
    Vithkuqi:Vith Wancho:Wcho Warang_Citi:Wara Yezidi:Yezi Yi:Yiii Zanabazar_Square:Zanb
"""
_SCRIPT_ALIASES: Dict[str, str] = {
    alias: entry.split(":")[0] for entry in _SCRIPT_VALUE_TABLE.split() for alias in entry.split(":")
}
# The standard library has no Scripts.txt, so membership is derived from
# character names: "GREEK SMALL LETTER ALPHA" is Greek. This approximates the
# letters, marks and digits of each script well; punctuation shared between
# scripts (Common) and combining marks (Inherited) cannot be derived.
_SCRIPT_NAME_OVERRIDES: Dict[str, Tuple[str, ...]] = {
    "Canadian_Aboriginal": ("CANADIAN SYLLABICS ",),
    "Cypro_Minoan": ("CYPRO-MINOAN ",),
    "Cyrillic": ("CYRILLIC ", "COMBINING CYRILLIC "),
    "Han": ("CJK UNIFIED IDEOGRAPH-", "CJK COMPATIBILITY IDEOGRAPH-", "CJK RADICAL ",
            "KANGXI RADICAL "),
    "Hangul": ("HANGUL ", "HALFWIDTH HANGUL ", "CIRCLED HANGUL ", "PARENTHESIZED HANGUL "),
    "Hiragana": ("HIRAGANA ", "HENTAIGANA "),
    "Katakana": ("KATAKANA ", "HALFWIDTH KATAKANA ", "CIRCLED KATAKANA "),
    "Anatolian_Hieroglyphs": ("ANATOLIAN HIEROGLYPH ",),
    "Egyptian_Hieroglyphs": ("EGYPTIAN HIEROGLYPH ",),
    "Latin": ("LATIN ", "FULLWIDTH LATIN "),
    "Meroitic_Hieroglyphs": ("MEROITIC HIEROGLYPHIC ",),
    "Phags_Pa": ("PHAGS-PA ",),
    "Yi": ("YI SYLLABLE ", "YI RADICAL "),
}
_UNDERIVABLE_SCRIPTS = frozenset({"Common", "Inherited"})
# Han ideographs whose names do not say so (iteration and number marks).
_HAN_EXTRA: Tuple[Range, ...] = ((0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B))
_script_table: Optional[Dict[str, List[Range]]] = None


def _script_name_prefixes() -> Dict[str, List[Tuple[str, str]]]:
    """First word of a character name -> [(name prefix, script)], longest prefix first."""
    by_first_word: Dict[str, List[Tuple[str, str]]] = {}
    for script in set(_SCRIPT_ALIASES.values()) - _UNDERIVABLE_SCRIPTS - {"Unknown"}:
        default = (script.upper().replace("_", " ") + " ",)
        for prefix in _SCRIPT_NAME_OVERRIDES.get(script, default):
            by_first_word.setdefault(prefix.split(" ", 1)[0], []).append((prefix, script))
    for candidates in by_first_word.values():
        candidates.sort(key=lambda candidate: -len(candidate[0]))
    return by_first_word


def _scan_scripts() -> Dict[str, List[Range]]:
    """One pass over every character name, sorting code points into scripts."""
    by_first_word = _script_name_prefixes()
    points: Dict[str, List[Range]] = {"Han": list(_HAN_EXTRA)}
    name_of = unicodedata.name
    for code_point in range(MAX_CODE_POINT + 1):
        name = name_of(chr(code_point), "")
        for prefix, script in by_first_word.get(name.split(" ", 1)[0], ()):
            if name.startswith(prefix):
                points.setdefault(script, []).append((code_point, code_point))
                break
    table = {script: normalize_ranges(ranges) for script, ranges in points.items()}
    table["Unknown"] = category_ranges(("Cn", "Co", "Cs"))  # what no script claims
    return table


def script_ranges(script: str) -> List[Range]:
    """Approximate code-point ranges of a script (long name); tables built once."""
    global _script_table
    if script in _UNDERIVABLE_SCRIPTS:
        raise EcmaRegexUnsupported(f"script {script} is not derivable from the standard library")
    if _script_table is None:
        with _table_lock:
            if _script_table is None:
                _script_table = _scan_scripts()
    return _script_table.get(script, [])


# ECMA-262 table 67: binary properties. Those computable from the standard
# library map to their ranges (or a builder); the rest are valid syntax that
# this module cannot run.
_BINARY_PROPERTY_ALIASES: Dict[str, str] = {
    "ASCII": "ASCII", "ASCII_Hex_Digit": "ASCII_Hex_Digit", "AHex": "ASCII_Hex_Digit",
    "Alphabetic": "Alphabetic", "Alpha": "Alphabetic", "Any": "Any", "Assigned": "Assigned",
    "Bidi_Control": "Bidi_Control", "Bidi_C": "Bidi_Control",
    "Bidi_Mirrored": "Bidi_Mirrored", "Bidi_M": "Bidi_Mirrored",
    "Case_Ignorable": "Case_Ignorable", "CI": "Case_Ignorable", "Cased": "Cased",
    "Changes_When_Casefolded": "Changes_When_Casefolded", "CWCF": "Changes_When_Casefolded",
    "Changes_When_Casemapped": "Changes_When_Casemapped", "CWCM": "Changes_When_Casemapped",
    "Changes_When_Lowercased": "Changes_When_Lowercased", "CWL": "Changes_When_Lowercased",
    "Changes_When_NFKC_Casefolded": "Changes_When_NFKC_Casefolded",
    "CWKCF": "Changes_When_NFKC_Casefolded",
    "Changes_When_Titlecased": "Changes_When_Titlecased", "CWT": "Changes_When_Titlecased",
    "Changes_When_Uppercased": "Changes_When_Uppercased", "CWU": "Changes_When_Uppercased",
    "Dash": "Dash", "Default_Ignorable_Code_Point": "Default_Ignorable_Code_Point",
    "DI": "Default_Ignorable_Code_Point", "Deprecated": "Deprecated", "Dep": "Deprecated",
    "Diacritic": "Diacritic", "Dia": "Diacritic", "Emoji": "Emoji",
    "Emoji_Component": "Emoji_Component", "EComp": "Emoji_Component",
    "Emoji_Modifier": "Emoji_Modifier", "EMod": "Emoji_Modifier",
    "Emoji_Modifier_Base": "Emoji_Modifier_Base", "EBase": "Emoji_Modifier_Base",
    "Emoji_Presentation": "Emoji_Presentation", "EPres": "Emoji_Presentation",
    "Extended_Pictographic": "Extended_Pictographic", "ExtPict": "Extended_Pictographic",
    "Extender": "Extender", "Ext": "Extender", "Grapheme_Base": "Grapheme_Base",
    "Gr_Base": "Grapheme_Base", "Grapheme_Extend": "Grapheme_Extend", "Gr_Ext": "Grapheme_Extend",
    "Hex_Digit": "Hex_Digit", "Hex": "Hex_Digit",
    "IDS_Binary_Operator": "IDS_Binary_Operator", "IDSB": "IDS_Binary_Operator",
    "IDS_Trinary_Operator": "IDS_Trinary_Operator", "IDST": "IDS_Trinary_Operator",
    "ID_Continue": "ID_Continue", "IDC": "ID_Continue", "ID_Start": "ID_Start", "IDS": "ID_Start",
    "Ideographic": "Ideographic", "Ideo": "Ideographic", "Join_Control": "Join_Control",
    "Join_C": "Join_Control", "Logical_Order_Exception": "Logical_Order_Exception",
    "LOE": "Logical_Order_Exception", "Lowercase": "Lowercase", "Lower": "Lowercase",
    "Math": "Math", "Noncharacter_Code_Point": "Noncharacter_Code_Point",
    "NChar": "Noncharacter_Code_Point", "Pattern_Syntax": "Pattern_Syntax",
    "Pat_Syn": "Pattern_Syntax", "Pattern_White_Space": "Pattern_White_Space",
    "Pat_WS": "Pattern_White_Space", "Quotation_Mark": "Quotation_Mark", "QMark": "Quotation_Mark",
    "Radical": "Radical", "Regional_Indicator": "Regional_Indicator", "RI": "Regional_Indicator",
    "Sentence_Terminal": "Sentence_Terminal", "STerm": "Sentence_Terminal",
    "Soft_Dotted": "Soft_Dotted", "SD": "Soft_Dotted",
    "Terminal_Punctuation": "Terminal_Punctuation", "Term": "Terminal_Punctuation",
    "Unified_Ideograph": "Unified_Ideograph", "UIdeo": "Unified_Ideograph",
    "Uppercase": "Uppercase", "Upper": "Uppercase",
    "Variation_Selector": "Variation_Selector", "VS": "Variation_Selector",
    "White_Space": "White_Space", "space": "White_Space",
    "XID_Continue": "XID_Continue", "XIDC": "XID_Continue", "XID_Start": "XID_Start",
    "XIDS": "XID_Start",
}
_FIXED_BINARY_PROPERTIES: Dict[str, Tuple[Range, ...]] = {
    "ASCII": ((0, 0x7F),),
    "ASCII_Hex_Digit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
    "Any": ((0, MAX_CODE_POINT),),
    "Hex_Digit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66), (0xFF10, 0xFF19), (0xFF21, 0xFF26),
                  (0xFF41, 0xFF46)),
    "Join_Control": ((0x200C, 0x200D),),
    "Noncharacter_Code_Point": ((0xFDD0, 0xFDEF),) + tuple(
        (plane * 0x10000 + 0xFFFE, plane * 0x10000 + 0xFFFF) for plane in range(17)),
    "Pattern_White_Space": ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0x200E, 0x200F),
                            (0x2028, 0x2029)),
    "Regional_Indicator": ((0x1F1E6, 0x1F1FF),),
    "Variation_Selector": ((0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F),
                           (0xE0100, 0xE01EF)),
    "White_Space": ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                    (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                    (0x3000, 0x3000)),
}
_predicate_cache: Dict[str, List[Range]] = {}


def _ranges_where(predicate: Callable[[str], bool]) -> List[Range]:
    ranges: List[Range] = []
    for code_point in range(MAX_CODE_POINT + 1):
        if predicate(chr(code_point)):
            if ranges and ranges[-1][1] == code_point - 1:
                ranges[-1] = (ranges[-1][0], code_point)
            else:
                ranges.append((code_point, code_point))
    return ranges


# Properties the standard library exposes exactly (CPython's str methods use
# the derived core properties Uppercase/Lowercase and XID_Start/XID_Continue).
def _changes_when(mapping: Callable[[str], str]) -> Callable[[str], bool]:
    """Changes_When_*: the per-character mapping alters the canonical decomposition (UAX #44)."""

    def changes(char: str) -> bool:
        decomposed = unicodedata.normalize("NFD", char)
        return "".join(mapping(part) for part in decomposed) != decomposed

    return changes


def _is_cased(char: str) -> bool:
    return char.isupper() or char.islower() or unicodedata.category(char) == "Lt"


def _titlecase(text: str) -> str:
    """Unicode toTitlecase of one word: first cased character titlecased, the rest lowercased."""
    for index, char in enumerate(text):
        if _is_cased(char):
            return text[:index] + char.title() + text[index + 1:].lower()
    return text


_PREDICATE_PROPERTIES: Dict[str, Callable[[str], bool]] = {
    "Bidi_Mirrored": lambda char: bool(unicodedata.mirrored(char)),
    "Uppercase": str.isupper,
    "Lowercase": str.islower,
    "Cased": _is_cased,
    "Changes_When_Lowercased": _changes_when(str.lower),
    "Changes_When_Uppercased": _changes_when(str.upper),
    "Changes_When_Titlecased": lambda char: _titlecase(unicodedata.normalize("NFD", char))
    != unicodedata.normalize("NFD", char),
    "Changes_When_Casefolded": _changes_when(str.casefold),
    "Changes_When_Casemapped": lambda char: any(
        _PREDICATE_PROPERTIES[name](char) for name in (
            "Changes_When_Lowercased", "Changes_When_Uppercased", "Changes_When_Titlecased")),
    "XID_Start": lambda char: char != "_" and char.isidentifier(),
    "XID_Continue": lambda char: ("a" + char).isidentifier(),
}


def binary_property_ranges(canonical: str) -> List[Range]:
    """Ranges of a binary property, or EcmaRegexUnsupported when not derivable."""
    if canonical in _FIXED_BINARY_PROPERTIES:
        return list(_FIXED_BINARY_PROPERTIES[canonical])
    if canonical == "Assigned":
        return complement_ranges(category_ranges(("Cn",)))
    predicate = _PREDICATE_PROPERTIES.get(canonical)
    if predicate is None:
        raise EcmaRegexUnsupported(
            f"Unicode property {canonical} cannot be derived from the standard library")
    cached = _predicate_cache.get(canonical)
    if cached is None:
        cached = _ranges_where(predicate)
        _predicate_cache[canonical] = cached
    return cached


_SCRIPT_PROPERTY_NAMES = frozenset({"Script", "sc", "Script_Extensions", "scx"})
_CATEGORY_PROPERTY_NAMES = frozenset({"General_Category", "gc"})


# ---------------------------------------------------------------------------
# The translator


_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_DECIMAL_RUN = re.compile("[0-9]*")
_HEX_RUN = re.compile("[0-9A-Fa-f]*")
_GROUP_SYNTAX = re.compile(r"\\|[\[\]()]")
_PLAIN_RUN = re.compile(r"[^\\^$.*+?()\[\]{}|]+")
"""Characters that stand for themselves, read as a run (a quantifier after it takes the last one)."""
"""What the bracket pre-scan stops at: an escape, a class bracket or a parenthesis."""


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


# ---------------------------------------------------------------------------
# The parse tree
#
# The parser builds a small tree; Python source is written from it, and the
# same tree feeds the regex safety analysis (regex_safety.py) and the
# linear-time matcher (linear_regex.py), so all three read one grammar.


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
            return cls(complement_ranges(members), True, "[^" + _class_body(members) + "]")
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


class ParsedPattern:
    """A parsed pattern: its tree and its capturing groups (number -> Group)."""

    __slots__ = ("source", "root", "groups")

    def __init__(self, source: str, root: RegexNode, groups: Dict[int, Group]) -> None:
        self.source = source
        self.root = root
        self.groups = groups


WORD_CASELESS_RANGES: Tuple[Range, ...] = tuple(normalize_ranges(
    list(WORD_RANGES) + [(0x130, 0x131), (0x17F, 0x17F), (0x212A, 0x212A)]))
"""What ``\\w`` matches under Python's IGNORECASE: the ASCII word characters and the four others
Python folds onto them (U+0130, U+0131, U+017F long s, U+212A Kelvin sign). ``\\W`` inside
``(?i:...)`` is its complement: ECMA takes ``\\W`` there as the complement of the word characters
*with* their case variants, so it never matches ``s``, ``k`` or ``K`` (the complement of the ASCII
word class, folded, matched them through U+017F and U+212A)."""


def _class_escape(lower: str, negate: bool, ignore_case: bool) -> List[Range]:
    if lower == "w" and negate and ignore_case:
        return complement_ranges(WORD_CASELESS_RANGES)
    ranges = {"d": DIGIT_RANGES, "s": WHITE_SPACE_RANGES, "w": WORD_RANGES}[lower]
    return complement_ranges(ranges) if negate else list(ranges)


_FIXED_ESCAPES: Dict[Tuple[str, bool], CharSet] = {
    (letter, ignore_case): CharSet(_class_escape(lower, letter.isupper(), ignore_case), ignore_case)
    for ignore_case in (False, True)
    for lower in ("d", "s", "w")
    for letter in (lower, lower.upper())
}
"""\\d \\D \\s \\S \\w \\W as shared nodes (nodes are never changed after parsing)."""

_SIMPLE_QUANTIFIERS: Dict[str, Tuple[int, Optional[int]]] = {"*": (0, None), "+": (1, None), "?": (0, 1)}

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
            return "[^" + _class_body(left_out) + "]"
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


class _Parser:
    """Recursive-descent parser over the ECMA grammar (Unicode mode) that builds a tree.

    One instance parses one pattern. Methods are named after grammar productions.
    """

    def __init__(self, pattern: str, *, resolve_properties: bool = True) -> None:
        self.resolve_properties = resolve_properties
        self.source = _code_points(pattern)
        # The same code points as text (a str holds any code point), so reading one is an index.
        self.text = pattern if len(self.source) == len(pattern) else "".join(map(chr, self.source))
        self.position = 0
        self.ignore_case = False
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
        self.unsupported_reasons: List[str] = []

    # -- cursor helpers ----------------------------------------------------
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
        if python_reference.isdigit():
            return Backreference(number, f"(?({python_reference})\\{python_reference})")
        return Backreference(number, f"(?({python_reference})(?P={python_reference}))")

    def class_escape_ranges(self) -> Optional[Tuple[List[Range], bool]]:
        """\\d \\D \\s \\S \\w \\W \\p{..} \\P{..}: (ranges, negated), or None."""
        char = self.peek()
        if char in ("d", "s", "w", "D", "S", "W"):
            self.position += 1
            if char == "W" and self.ignore_case:
                return list(WORD_CASELESS_RANGES), True
            return _class_escape(char.lower(), False, False), char.isupper()
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
            if name in _CATEGORY_PROPERTY_NAMES and value in _GENERAL_CATEGORY_ALIASES:
                return self._resolve(category_ranges, _GENERAL_CATEGORY_ALIASES[value])
            if name in _SCRIPT_PROPERTY_NAMES and value in _SCRIPT_ALIASES:
                return self._resolve(script_ranges, _SCRIPT_ALIASES[value])
            raise self.fail("unknown Unicode property or value", position=start)
        if name in _GENERAL_CATEGORY_ALIASES:
            return self._resolve(category_ranges, _GENERAL_CATEGORY_ALIASES[name])
        if name in _BINARY_PROPERTY_ALIASES:
            return self._resolve(binary_property_ranges, _BINARY_PROPERTY_ALIASES[name])
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


def _check_pattern_type(pattern: object) -> None:
    if not isinstance(pattern, str):
        raise EcmaRegexError("a regular expression must be a string")


@functools.lru_cache(maxsize=1024)
def parse_ecma(pattern: str) -> ParsedPattern:
    """Parse an ECMA-262 pattern (``u`` flag) into a tree. Cached.

    Raises EcmaRegexError when the pattern is not valid ECMA-262, and
    EcmaRegexUnsupported when it is valid but cannot run here.
    """
    _check_pattern_type(pattern)
    return _Parser(pattern).parse()


def translate_ecma(pattern: str) -> str:
    """The Python ``re`` source equivalent to an ECMA-262 pattern (``u`` flag).

    Raises EcmaRegexError when the pattern is not valid ECMA-262, and
    EcmaRegexUnsupported when it is valid but has no Python spelling here.
    """
    _check_pattern_type(pattern)
    return python_source(parse_ecma(pattern).root)


@functools.lru_cache(maxsize=1024)
def compile_ecma(pattern: str) -> "re.Pattern[str]":
    """Compile an ECMA-262 pattern into a Python pattern with ECMA semantics.

    Use ``.search()``: ECMA patterns are not anchored. Cached, because
    schemas compile the same patterns again and again. This is Python's
    backtracking engine whatever the pattern; ``regex_safety.compile_safe``
    picks an engine that a hostile input cannot make slow.
    """
    source = translate_ecma(pattern)
    try:
        return re.compile(source)
    except (re.error, OverflowError, RecursionError) as error:
        reason = getattr(error, "msg", None) or type(error).__name__
        raise EcmaRegexUnsupported(reason) from None


def is_ecma_regex(pattern: str) -> bool:
    """Whether ``pattern`` is valid ECMA-262 syntax (Unicode mode).

    This is the ``format: regex`` question: valid patterns that Python cannot
    run (variable-width lookbehind, say) still count as valid. It runs on
    untrusted instances, so it takes time linear in the pattern's length:
    no Unicode property table is built and nothing is compiled.
    """
    if not isinstance(pattern, str):
        return False
    try:
        _Parser(pattern, resolve_properties=False).parse()
    except EcmaRegexUnsupported:
        return True
    except EcmaRegexError:
        return False
    return True
