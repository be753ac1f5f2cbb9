"""Checkers for the JSON Schema ``format`` keyword (asserted on request).

Each checker takes a ``str`` and answers ``bool``; none of them raises. The
validator calls them only for string instances (formats ignore other types)
and only when format assertion is switched on.

The grammars are hand-written from the RFCs the 2020-12 specification cites:
RFC 3339 (date, time, date-time, duration), RFC 5321/5322 and RFC 6531
(email, idn-email), RFC 1123 and RFC 5890-5893 (hostname, idn-hostname),
RFC 2673/4291 (ipv4, ipv6), RFC 3986/3987 (uri, iri and references),
RFC 4122 (uuid), RFC 6901 and the Relative JSON Pointer draft, RFC 6570
(uri-template), and ECMA-262 (regex). Every digit class is spelled ``[0-9]``
and every match is a full match, so non-ASCII digits and trailing newlines
never slip through.

Formats are asserted on model input at the tool boundary, so every check
takes time linear in the value: each regular expression here is proven
linear for Python's re by ``regex_safety`` (as a full match; the test suite
checks it), and the rest splits, counts or is bounded by a length check
made before any per-label work.
"""

from __future__ import annotations

import functools
import re
import types
import unicodedata
from typing import Callable, Dict, Mapping, Optional, Sequence

from agent_lab.schema.ecma_regex import is_ecma_regex

__all__ = ["FORMAT_CHECKERS"]

Checker = Callable[[str], bool]


# ---------------------------------------------------------------------------
# Dates and times (RFC 3339 section 5.6, appendix A)

class _LazyPattern:
    """A regular expression compiled on first use: most processes check no format (it is an annotation
    unless asked for), and compiling this table's patterns when the module loads cost them all."""

    __slots__ = ("_source", "_compiled")

    def __init__(self, source: str) -> None:
        self._source = source
        self._compiled: Optional[re.Pattern[str]] = None

    @property
    def pattern(self) -> str:
        """The source, as `re.Pattern.pattern` gives it."""
        return self._source

    def _pattern(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:  # two threads may both compile it: equal patterns, either will do
            compiled = self._compiled = re.compile(self._source)
        return compiled

    def fullmatch(self, text: str) -> Optional[re.Match[str]]:
        return self._pattern().fullmatch(text)

    def split(self, text: str) -> list[str]:
        return self._pattern().split(text)


_DATE = _LazyPattern(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = _LazyPattern(
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))")
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MINUTES_PER_DAY = 24 * 60
_LAST_MINUTE_OF_DAY = 23 * 60 + 59


def _is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def is_date(value: str) -> bool:
    """RFC 3339 full-date: YYYY-MM-DD with a real day of that month."""
    match = _DATE.fullmatch(value)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups())
    if not 1 <= month <= 12:
        return False
    last_day = 29 if month == 2 and _is_leap_year(year) else _DAYS_IN_MONTH[month - 1]
    return 1 <= day <= last_day


def is_time(value: str) -> bool:
    """RFC 3339 full-time with a mandatory offset.

    A leap second (``:60``) is valid only where UTC is 23:59, after the
    offset is applied.
    """
    match = _TIME.fullmatch(value)
    if match is None:
        return False
    hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3))
    if hour > 23 or minute > 59 or second > 60:
        return False
    offset_minutes = 0
    if match.group(4) is None:
        offset_hour, offset_minute = int(match.group(6)), int(match.group(7))
        if offset_hour > 23 or offset_minute > 59:
            return False
        offset_minutes = offset_hour * 60 + offset_minute
        if match.group(5) == "-":
            offset_minutes = -offset_minutes
    if second == 60:
        utc_minute = (hour * 60 + minute - offset_minutes) % _MINUTES_PER_DAY
        return utc_minute == _LAST_MINUTE_OF_DAY
    return True


def is_date_time(value: str) -> bool:
    """RFC 3339 date-time: full-date "T" full-time (T and Z case-insensitive)."""
    if len(value) < 11 or value[10] not in "Tt":
        return False
    return is_date(value[:10]) and is_time(value[11:])


# RFC 3339 appendix A, with the digits each production starts with taken out in front, so no two
# alternatives begin alike and no choice needs backtracking (regex_safety proves it):
#   dur-time = "T" (dur-hour / dur-minute / dur-second), each 1*DIGIT then H, M or S
#   duration = "P" (dur-date / dur-time / dur-week), dur-date being dur-day / dur-month / dur-year
_DUR_TIME = r"T[0-9]+(?:H(?:[0-9]+M(?:[0-9]+S)?)?|M(?:[0-9]+S)?|S)"
_DUR_DATE_END = r"(?:D|M(?:[0-9]+D)?|Y(?:[0-9]+M(?:[0-9]+D)?)?)"
_DURATION = _LazyPattern(rf"P(?:[0-9]+(?:W|{_DUR_DATE_END}(?:{_DUR_TIME})?)|{_DUR_TIME})")


def is_duration(value: str) -> bool:
    """RFC 3339 appendix A duration (ISO 8601 subset: no fractions, no signs)."""
    return _DURATION.fullmatch(value) is not None


# ---------------------------------------------------------------------------
# IP addresses

_IPV4 = _LazyPattern(r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
                   r"(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}")
_HEX_GROUP = _LazyPattern(r"[0-9A-Fa-f]{1,4}")
_IPV6_GROUPS = 8


def is_ipv4(value: str) -> bool:
    """Dotted-quad IPv4 (RFC 2673): four decimal octets, no leading zeros."""
    return _IPV4.fullmatch(value) is not None


def _count_hex_groups(part: str, *, allow_ipv4_tail: bool) -> Optional[int]:
    """Number of 16-bit groups in a colon-separated run, or None if malformed."""
    if part == "":
        return 0
    pieces = part.split(":")
    count = 0
    for index, piece in enumerate(pieces):
        is_last = index == len(pieces) - 1
        if is_last and allow_ipv4_tail and "." in piece:
            if not is_ipv4(piece):
                return None
            count += 2
        elif _HEX_GROUP.fullmatch(piece):
            count += 1
        else:
            return None
    return count


def is_ipv6(value: str) -> bool:
    """RFC 4291 text form: eight groups, one optional "::", optional IPv4 tail.

    Zone identifiers, prefixes and brackets are not part of an address.
    """
    if value.count("::") > 1:
        return False
    if "::" in value:
        head, tail = value.split("::")
        head_count = _count_hex_groups(head, allow_ipv4_tail=False)
        tail_count = _count_hex_groups(tail, allow_ipv4_tail=True)
        if head_count is None or tail_count is None:
            return False
        return head_count + tail_count < _IPV6_GROUPS
    return _count_hex_groups(value, allow_ipv4_tail=True) == _IPV6_GROUPS


# ---------------------------------------------------------------------------
# Host names (RFC 1123) and IDNA2008 labels (RFC 5890-5893)

MAX_HOSTNAME_LENGTH = 253
MAX_LABEL_LENGTH = 63
_LDH_LABEL = _LazyPattern(r"[A-Za-z0-9]+(?:-+[A-Za-z0-9]+)*")  # letters, digits, inner hyphens
_ACE_PREFIX = "xn--"

# RFC 5892 section 2.6 exceptions.
_PVALID = "PVALID"
_CONTEXTJ = "CONTEXTJ"
_CONTEXTO = "CONTEXTO"
_DISALLOWED = "DISALLOWED"
_IDNA_EXCEPTIONS: Dict[int, str] = {
    0x00DF: _PVALID, 0x03C2: _PVALID, 0x06FD: _PVALID, 0x06FE: _PVALID, 0x0F0B: _PVALID,
    0x3007: _PVALID,
    0x00B7: _CONTEXTO, 0x0375: _CONTEXTO, 0x05F3: _CONTEXTO, 0x05F4: _CONTEXTO, 0x30FB: _CONTEXTO,
    **{code_point: _CONTEXTO for code_point in range(0x0660, 0x066A)},
    **{code_point: _CONTEXTO for code_point in range(0x06F0, 0x06FA)},
    0x0640: _DISALLOWED, 0x07FA: _DISALLOWED, 0x302E: _DISALLOWED, 0x302F: _DISALLOWED,
    **{code_point: _DISALLOWED for code_point in range(0x3031, 0x3036)},
    0x303B: _DISALLOWED,
}
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
_IGNORABLE_BLOCKS = ((0x20D0, 0x20FF), (0x1D100, 0x1D1FF), (0x1D200, 0x1D24F))
_OLD_HANGUL_JAMO = ((0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF))
_LETTER_DIGIT_CATEGORIES = frozenset({"Ll", "Lu", "Lo", "Nd", "Lm", "Mn", "Mc"})
_VIRAMA_COMBINING_CLASS = 9


def _in_ranges(code_point: int, ranges: Sequence) -> bool:
    return any(low <= code_point <= high for low, high in ranges)


def _is_noncharacter(code_point: int) -> bool:
    return 0xFDD0 <= code_point <= 0xFDEF or (code_point & 0xFFFE) == 0xFFFE


def idna_property(char: str) -> str:
    """RFC 5892 section 3 derived property of one code point."""
    code_point = ord(char)
    if code_point in _IDNA_EXCEPTIONS:
        return _IDNA_EXCEPTIONS[code_point]
    category = unicodedata.category(char)
    if category == "Cn" and not _is_noncharacter(code_point):
        return _DISALLOWED  # UNASSIGNED: never valid in a label
    if char in "abcdefghijklmnopqrstuvwxyz0123456789-":
        return _PVALID
    if code_point in (0x200C, 0x200D):
        return _CONTEXTJ
    stable = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", char).casefold())
    if stable != char:
        return _DISALLOWED
    if (_in_ranges(code_point, _DEFAULT_IGNORABLE) or char.isspace()
            or _is_noncharacter(code_point) or _in_ranges(code_point, _IGNORABLE_BLOCKS)
            or _in_ranges(code_point, _OLD_HANGUL_JAMO)):
        return _DISALLOWED
    return _PVALID if category in _LETTER_DIGIT_CATEGORIES else _DISALLOWED


def _script_is(char: str, *prefixes: str) -> bool:
    """Approximate Script property from the character name (stdlib has no Scripts.txt)."""
    name = unicodedata.name(char, "")
    return name.startswith(prefixes)


def _is_han(char: str) -> bool:
    code_point = ord(char)
    return (_script_is(char, "CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")
            or code_point in (0x3005, 0x3007) or 0x3021 <= code_point <= 0x3029
            or 0x3038 <= code_point <= 0x303B)


# Joining types for the ZERO WIDTH NON-JOINER rule (ArabicShaping.txt is not
# in the standard library): right-joining Arabic letters are listed; other
# Arabic, Syriac, N'Ko and Mongolian letters are treated as dual-joining.
_RIGHT_JOINING = frozenset(
    [0x0622, 0x0623, 0x0624, 0x0625, 0x0627, 0x0629, 0x062F, 0x0630, 0x0631, 0x0632, 0x0648,
     0x0671, 0x0672, 0x0673, 0x0675, 0x0676, 0x0677, 0x06C0, 0x06CD, 0x06CF, 0x06D2, 0x06D3,
     0x06D5, 0x06EE, 0x06EF, 0x0710, 0x0715, 0x0716, 0x0717, 0x0718, 0x0719, 0x071E, 0x0728,
     0x072A, 0x072C, 0x072F]
    + list(range(0x0688, 0x069A)) + list(range(0x06C3, 0x06CC)))


def _joining_type(char: str) -> str:
    if unicodedata.category(char) in ("Mn", "Me", "Cf") and char not in "\u200c\u200d":
        return "T"
    if _script_is(char, "ARABIC LETTER", "SYRIAC LETTER", "NKO LETTER", "MONGOLIAN LETTER"):
        return "R" if ord(char) in _RIGHT_JOINING else "D"
    return "U"


def _zwnj_allowed(label: str, index: int) -> bool:
    if index > 0 and unicodedata.combining(label[index - 1]) == _VIRAMA_COMBINING_CLASS:
        return True
    before = index - 1
    while before >= 0 and _joining_type(label[before]) == "T":
        before -= 1
    after = index + 1
    while after < len(label) and _joining_type(label[after]) == "T":
        after += 1
    return (before >= 0 and _joining_type(label[before]) in ("L", "D")
            and after < len(label) and _joining_type(label[after]) in ("R", "D"))


def _context_allowed(label: str, index: int) -> bool:
    """RFC 5892 appendix A contextual rules for CONTEXTJ and CONTEXTO code points."""
    char = label[index]
    previous = label[index - 1] if index > 0 else ""
    following = label[index + 1] if index + 1 < len(label) else ""
    code_point = ord(char)
    if code_point == 0x200C:
        return _zwnj_allowed(label, index)
    if code_point == 0x200D:
        return bool(previous) and unicodedata.combining(previous) == _VIRAMA_COMBINING_CLASS
    if code_point == 0x00B7:
        return previous == "l" and following == "l"
    if code_point == 0x0375:
        return bool(following) and _script_is(following, "GREEK")
    if code_point in (0x05F3, 0x05F4):
        return bool(previous) and _script_is(previous, "HEBREW")
    if code_point == 0x30FB:
        return any(other != "\u30fb" and (_script_is(other, "HIRAGANA", "KATAKANA",
                                                     "HALFWIDTH KATAKANA") or _is_han(other))
                   for other in label)
    if 0x0660 <= code_point <= 0x0669:
        return not any("\u06f0" <= other <= "\u06f9" for other in label)
    if 0x06F0 <= code_point <= 0x06F9:
        return not any("\u0660" <= other <= "\u0669" for other in label)
    return False


_RTL_CLASSES = frozenset({"R", "AL"})
_RTL_ALLOWED = frozenset({"R", "AL", "AN", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"})
_LTR_ALLOWED = frozenset({"L", "EN", "ES", "CS", "ET", "ON", "BN", "NSM"})


def _satisfies_bidi_rule(label: str) -> bool:
    """RFC 5893 section 2, conditions 1-6, for one label of a Bidi domain name."""
    classes = [unicodedata.bidirectional(char) for char in label]
    first = classes[0]
    if first not in ("L", "R", "AL"):
        return False
    last_index = len(classes) - 1
    while last_index > 0 and classes[last_index] == "NSM":
        last_index -= 1
    last = classes[last_index]
    if first in _RTL_CLASSES:
        if not set(classes) <= _RTL_ALLOWED:
            return False
        if last not in ("R", "AL", "EN", "AN"):
            return False
        return not ("EN" in classes and "AN" in classes)
    return set(classes) <= _LTR_ALLOWED and last in ("L", "EN")


def _is_bidi_domain(labels: Sequence[str]) -> bool:
    return any(unicodedata.bidirectional(char) in ("R", "AL", "AN")
               for label in labels for char in label)


def is_u_label(label: str) -> bool:
    """RFC 5891 section 5.4 checks of one Unicode label (Bidi checked per name)."""
    if not label or unicodedata.normalize("NFC", label) != label:
        return False
    if label[2:4] == "--" or label.startswith("-") or label.endswith("-"):
        return False
    if unicodedata.category(label[0]).startswith("M"):
        return False
    for index, char in enumerate(label):
        status = idna_property(char)
        if status == _PVALID:
            continue
        if status in (_CONTEXTJ, _CONTEXTO) and _context_allowed(label, index):
            continue
        return False
    return True


def decode_a_label(label: str) -> Optional[str]:
    """The U-label an "xn--" label stands for, or None when it is not a valid A-label."""
    encoded = label[len(_ACE_PREFIX):].lower()  # A-labels compare case-insensitively
    if not encoded or not encoded.isascii():
        return None
    try:
        decoded = encoded.encode("ascii").decode("punycode")
        reencoded = decoded.encode("punycode").decode("ascii")
    except (UnicodeError, ValueError, IndexError, OverflowError):
        return None
    if reencoded != encoded or decoded.isascii():
        return None
    return decoded


def _labels_are_idna(unicode_labels: Sequence[str]) -> bool:
    if not all(is_u_label(label) for label in unicode_labels):
        return False
    if _is_bidi_domain(unicode_labels):
        return all(_satisfies_bidi_rule(label) for label in unicode_labels)
    return True


def is_hostname(value: str) -> bool:
    """RFC 1123 host name; "xn--" labels must be valid IDNA2008 A-labels."""
    if not value or len(value) > MAX_HOSTNAME_LENGTH or not value.isascii():
        return False
    labels = value.split(".")
    unicode_labels = []
    for label in labels:
        if len(label) > MAX_LABEL_LENGTH or _LDH_LABEL.fullmatch(label) is None:
            return False
        if label[:4].lower() == _ACE_PREFIX:
            decoded = decode_a_label(label)
            if decoded is None:
                return False
            unicode_labels.append(decoded)
        else:
            unicode_labels.append(label.lower())
    return _labels_are_idna(unicode_labels) if any(
        label[:4].lower() == _ACE_PREFIX for label in labels) else True


_IDN_SEPARATORS = _LazyPattern("[.\u3002\uff0e\uff61]")


def _a_label_length(u_label: str) -> int:
    if u_label.isascii():
        return len(u_label)
    try:
        return len(_ACE_PREFIX) + len(u_label.encode("punycode"))
    except UnicodeError:
        return MAX_LABEL_LENGTH + 1


def is_idn_hostname(value: str) -> bool:
    """RFC 5890 internationalized host name: U-labels or A-labels, IDNA2008 rules."""
    # A U-label is never longer than its A-label, so over-long input is
    # refused before any (quadratic) Punycode work.
    if not value or len(value) > MAX_HOSTNAME_LENGTH:
        return False
    labels = _IDN_SEPARATORS.split(value)
    unicode_labels = []
    total_length = len(labels) - 1
    for label in labels:
        if not label or len(label) > MAX_LABEL_LENGTH:
            return False
        if label[:4].lower() == _ACE_PREFIX:
            if _LDH_LABEL.fullmatch(label) is None:
                return False
            decoded = decode_a_label(label)
            if decoded is None:
                return False
            unicode_labels.append(decoded)
            length = len(label)
        elif label.isascii():
            if _LDH_LABEL.fullmatch(label) is None:
                return False
            unicode_labels.append(label.lower())
            length = len(label)
        else:
            unicode_labels.append(label)
            length = _a_label_length(label)
        if length > MAX_LABEL_LENGTH:
            return False
        total_length += length
    if total_length > MAX_HOSTNAME_LENGTH:
        return False
    return _labels_are_idna(unicode_labels)


# ---------------------------------------------------------------------------
# E-mail addresses (RFC 5321 section 4.1.2 Mailbox, RFC 6531 for idn-email)

_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
_DOT_ATOM = _LazyPattern(rf"{_ATEXT}+(?:\.{_ATEXT}+)*")
_QUOTED_STRING = _LazyPattern(r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"')
_IDN_ATEXT = r"(?:[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]|[^\x00-\x7f])"
_IDN_DOT_ATOM = _LazyPattern(rf"{_IDN_ATEXT}+(?:\.{_IDN_ATEXT}+)*")
_IDN_QUOTED_STRING = _LazyPattern(r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|[^\x00-\x7f]|\\[\x20-\x7e])*"')
MAX_LOCAL_PART_OCTETS = 64


def _is_address_literal(domain: str) -> bool:
    if not (domain.startswith("[") and domain.endswith("]")):
        return False
    inner = domain[1:-1]
    if inner[:5].lower() == "ipv6:":
        return is_ipv6(inner[5:])
    return is_ipv4(inner)


def _split_mailbox(value: str) -> Optional[tuple]:
    at = value.rfind("@")
    if at <= 0 or at == len(value) - 1:
        return None
    return value[:at], value[at + 1:]


def is_email(value: str) -> bool:
    """RFC 5321 Mailbox: dot-atom or quoted local part, host name or address literal."""
    parts = _split_mailbox(value)
    if parts is None:
        return False
    local, domain = parts
    if len(local) > MAX_LOCAL_PART_OCTETS:
        return False
    if _DOT_ATOM.fullmatch(local) is None and _QUOTED_STRING.fullmatch(local) is None:
        return False
    return _is_address_literal(domain) or is_hostname(domain)


def is_idn_email(value: str) -> bool:
    """RFC 6531 Mailbox: UTF-8 allowed in the local part; domain is an IDN host name."""
    parts = _split_mailbox(value)
    if parts is None:
        return False
    local, domain = parts
    if len(local.encode("utf-8", "surrogatepass")) > MAX_LOCAL_PART_OCTETS:
        return False
    if _IDN_DOT_ATOM.fullmatch(local) is None and _IDN_QUOTED_STRING.fullmatch(local) is None:
        return False
    if _is_address_literal(domain):
        return True
    return is_idn_hostname(unicodedata.normalize("NFC", domain))


# ---------------------------------------------------------------------------
# URIs and IRIs (RFC 3986 appendix A, RFC 3987 section 2.2)


@functools.lru_cache(maxsize=2)
def _uri_grammar(international: bool) -> Dict[str, "re.Pattern[str]"]:
    """Compile the RFC 3986 (or RFC 3987) productions into full-match patterns.

    Built on first use: compiling them takes tens of milliseconds, which
    importing the validator should not pay.

    The authority's IP literal is checked separately by is_ipv6, so an
    embedded IPv4 tail with a leading zero is refused as RFC 3986 requires.
    """
    ucschar = ("\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef\U00010000-\U0001fffd"
               "\U00020000-\U0002fffd\U00030000-\U0003fffd\U00040000-\U0004fffd"
               "\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd"
               "\U00080000-\U0008fffd\U00090000-\U0009fffd\U000a0000-\U000afffd"
               "\U000b0000-\U000bfffd\U000c0000-\U000cfffd\U000d0000-\U000dfffd"
               "\U000e1000-\U000efffd") if international else ""
    iprivate = ("\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
                if international else "")
    unreserved = f"A-Za-z0-9\\-._~{ucschar}"
    sub_delims = "!$&'()*+,;="
    pct = "%[0-9A-Fa-f]{2}"
    pchar = f"(?:[{unreserved}{sub_delims}:@]|{pct})"
    segment_nz_nc = f"(?:[{unreserved}{sub_delims}@]|{pct})+"
    query = f"(?:{pchar}|[/?{iprivate}])*"
    fragment = f"(?:{pchar}|[/?])*"
    userinfo = f"(?:[{unreserved}{sub_delims}:]|{pct})*"
    reg_name = f"(?:[{unreserved}{sub_delims}]|{pct})*"
    ip_literal = r"\[[^\]]*\]"
    authority = f"(?:({userinfo})@)?({ip_literal}|{reg_name})(?::([0-9]*))?"
    path_abempty = f"(?:/{pchar}*)*"
    path_absolute = f"/(?:{pchar}+(?:/{pchar}*)*)?"
    path_rootless = f"{pchar}+(?:/{pchar}*)*"
    path_noscheme = f"{segment_nz_nc}(?:/{pchar}*)*"
    scheme = "[A-Za-z][A-Za-z0-9+\\-.]*"
    hier_part = f"(?://{authority}{path_abempty}|{path_absolute}|{path_rootless}|)"
    relative_part = f"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme}|)"
    tail = f"(?:\\?{query})?(?:#{fragment})?"
    return {
        "absolute": re.compile(f"{scheme}:{hier_part}{tail}"),
        "relative": re.compile(f"{relative_part}{tail}"),
    }


_IP_FUTURE = _LazyPattern(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")


def _authority_is_valid(match: "re.Match[str]") -> bool:
    host = match.group(2)
    if host is not None and host.startswith("["):
        inner = host[1:-1]
        return is_ipv6(inner) or _IP_FUTURE.fullmatch(inner) is not None
    return True


def _matches(kind: str, value: str, *, international: bool) -> bool:
    match = _uri_grammar(international)[kind].fullmatch(value)
    return match is not None and _authority_is_valid(match)


def is_uri(value: str) -> bool:
    """RFC 3986 URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ]."""
    return _matches("absolute", value, international=False)


def is_uri_reference(value: str) -> bool:
    """RFC 3986 URI-reference: a URI or a relative reference."""
    return (_matches("absolute", value, international=False)
            or _matches("relative", value, international=False))


def is_iri(value: str) -> bool:
    """RFC 3987 IRI: a URI that may also carry non-ASCII characters."""
    return _matches("absolute", value, international=True)


def is_iri_reference(value: str) -> bool:
    """RFC 3987 IRI-reference."""
    return (_matches("absolute", value, international=True)
            or _matches("relative", value, international=True))


# RFC 6570 section 2: literals and expressions of any level. The apostrophe
# is accepted as a literal (RFC 6570 errata; the official suite agrees).
_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_EXPRESSION = rf"\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}}"
_TEMPLATE_LITERAL = r'(?:[^\x00-\x20"%<>\\^`{|}\x7f]|%[0-9A-Fa-f]{2})'
_URI_TEMPLATE = _LazyPattern(rf"(?:{_TEMPLATE_LITERAL}|{_EXPRESSION})*")


def is_uri_template(value: str) -> bool:
    """RFC 6570 URI Template (levels 1 to 4)."""
    return _URI_TEMPLATE.fullmatch(value) is not None


# ---------------------------------------------------------------------------
# Identifiers and pointers

_UUID = _LazyPattern(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_JSON_POINTER = _LazyPattern(r"(?:/(?:[^~/]|~[01])*)*")
_RELATIVE_JSON_POINTER = _LazyPattern(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)")


def is_uuid(value: str) -> bool:
    """RFC 4122 textual UUID: 8-4-4-4-12 hex digits, any version and variant."""
    return _UUID.fullmatch(value) is not None


def is_json_pointer(value: str) -> bool:
    """RFC 6901 JSON Pointer: "" or "/"-prefixed tokens with ~0 and ~1 escapes."""
    return _JSON_POINTER.fullmatch(value) is not None


def is_relative_json_pointer(value: str) -> bool:
    """Relative JSON Pointer: a non-negative integer, then "#" or a JSON Pointer."""
    return _RELATIVE_JSON_POINTER.fullmatch(value) is not None


def is_regex(value: str) -> bool:
    """ECMA-262 regular expression syntax (Unicode mode)."""
    return is_ecma_regex(value)


# ---------------------------------------------------------------------------


def _never_raises(checker: Checker) -> Checker:
    """Wrap a checker so an unexpected error counts as "not this format"."""

    def checked(value: str) -> bool:
        try:
            return bool(checker(value))
        except Exception:  # a checker bug must not crash validation
            return False

    checked.__name__ = checker.__name__
    checked.__doc__ = checker.__doc__
    return checked


FORMAT_CHECKERS: Mapping[str, Checker] = types.MappingProxyType({
    name: _never_raises(checker) for name, checker in {
        "date": is_date,
        "date-time": is_date_time,
        "duration": is_duration,
        "email": is_email,
        "hostname": is_hostname,
        "idn-email": is_idn_email,
        "idn-hostname": is_idn_hostname,
        "ipv4": is_ipv4,
        "ipv6": is_ipv6,
        "iri": is_iri,
        "iri-reference": is_iri_reference,
        "json-pointer": is_json_pointer,
        "regex": is_regex,
        "relative-json-pointer": is_relative_json_pointer,
        "time": is_time,
        "uri": is_uri,
        "uri-reference": is_uri_reference,
        "uri-template": is_uri_template,
        "uuid": is_uuid,
    }.items()
})
"""Format name -> checker; read-only. Checkers take a str and never raise."""
