"""Unicode property tables for ``\\p{...}``, built lazily from `unicodedata` and cached as ranges."""

from __future__ import annotations

import threading
import unicodedata
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .errors import MAX_CODE_POINT, EcmaRegexUnsupported, Range
from .ranges import complement_ranges, normalize_ranges

GENERAL_CATEGORY_ALIASES: Dict[str, Tuple[str, ...]] = {
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
SCRIPT_ALIASES: Dict[str, str] = {
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
    for script in set(SCRIPT_ALIASES.values()) - _UNDERIVABLE_SCRIPTS - {"Unknown"}:
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
BINARY_PROPERTY_ALIASES: Dict[str, str] = {
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


SCRIPT_PROPERTY_NAMES = frozenset({"Script", "sc", "Script_Extensions", "scx"})
CATEGORY_PROPERTY_NAMES = frozenset({"General_Category", "gc"})
