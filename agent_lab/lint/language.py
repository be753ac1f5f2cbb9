"""Word lists and text tests the description and naming rules share.

Heuristics, stated as data: a verb list for "verb-first" names and for spotting tool-like identifiers
in prose, stop words for comparing descriptions, the code points that hide text from a reader, and the
phrases that try to steer a model instead of describing a tool. Each list is small enough to read.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator

from ..text import STOP_WORDS, content_words, name_words, stem  # shared with search, below both

__all__ = [
    "INJECTION_PHRASES",
    "STOP_WORDS",
    "VERBS",
    "content_words",
    "hidden_characters",
    "injection_phrases",
    "look_alike_skeleton",
    "name_words",
    "stem",
]

VERBS = frozenset("""
accept acknowledge activate add adjust allocate analyze annotate append apply approve archive ask assign
attach audit authenticate authorize backup ban batch bill block book bookmark broadcast browse build bump
calculate call cancel capture categorize change charge chat check checkout classify clean clear clone close
collect comment commit compare compile complete compose compute configure confirm connect convert copy count
create crop deactivate debit decline decode decrypt deduplicate delete deny deploy deprecate describe detach
detect diff disable disconnect dismiss dispatch download draft drop duplicate edit email embed enable encode
encrypt end enqueue enroll escalate estimate evaluate exchange exec execute expand expire explain export
extend extract fetch file fill filter find finish flag flush follow fork format forward freeze generate geocode
get give grant group hide highlight hold import index inspect install invalidate invite invoice invoke issue
join kill label launch leave like link list load locate lock log login logout look lookup make manage map mark
measure merge message migrate mint modify monitor move mute notify open order pack page parse patch pause pay
pin ping place plan play plot post predict prepare preview print prioritize process promote provision publish
pull purchase purge push put query queue quote rank rate read reassign rebalance rebuild reboot recall receive
recommend reconcile record recover redact redeem redirect refresh refund register reindex reject release
reload remind remove rename render renew reopen reorder repair replace replay reply report request reschedule
reserve reset resize resolve respond restart restore resume retrieve retry return reveal revert review revoke
rollback rotate route run save scale scan schedule score search seed select sell send set settle share ship
show shutdown sign simulate skip snooze sort split stage star start stop store stream submit subscribe suggest
summarize suspend swap switch sync tag take terminate test throttle toggle top track trade train transcribe
transfer transform translate trigger trim unarchive unassign unban unblock undo unfollow uninstall unlink
unlock unmute unpin unpublish unsubscribe unwatch update upgrade upload upsert validate verify view void vote
wait warn watch withdraw write
""".split())
"""Verbs a tool name can start with. A heuristic: AL102 and AL205 use it; extend it through the
`ignore` setting rather than by renaming a tool that reads well."""

# -- hidden characters ----------------------------------------------------------------------------

_ZERO_WIDTH = {0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x180E, 0x2061, 0x2062, 0x2063, 0x2064, 0x00AD,
               0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0,
               # format characters that render as nothing: deprecated shaping/swapping controls, the
               # interlinear annotation marks, Mongolian free variation selectors, shorthand and musical
               # format controls
               *range(0x206A, 0x2070), 0xFFF9, 0xFFFA, 0xFFFB, 0x180B, 0x180C, 0x180D, 0x180F,
               *range(0x1BCA0, 0x1BCA4), *range(0x1D173, 0x1D17B)}
_BIDI_CONTROLS = {0x200E, 0x200F, 0x061C, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}
_ALLOWED_CONTROLS = {0x09, 0x0A, 0x0D}


def _hidden_kind(code: int) -> str | None:
    if code in _ZERO_WIDTH:
        return "zero-width character"
    if code in _BIDI_CONTROLS:
        return "bidirectional control"
    if 0xE0000 <= code <= 0xE007F:
        return "tag character"
    if 0xE0100 <= code <= 0xE01EF:
        return "variation selector"
    if (code < 0x20 or 0x7F <= code <= 0x9F) and code not in _ALLOWED_CONTROLS:
        return "control character"
    return None


_ASCII_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII characters `_hidden_kind` names: control characters but tab, line feed and carriage return."""


def hidden_characters(text: str) -> Iterator[tuple[int, str, str]]:
    """(index, code point as U+XXXX with its name, kind) of every character in `text` that a person
    reading the definition does not see but a model does: zero-width characters, bidirectional
    controls, tag characters (U+E0000-U+E007F), variation selectors 17-256 and control characters."""
    if text.isascii() and _ASCII_HIDDEN.search(text) is None:  # most text: one look, not one per character
        return
    for index, char in enumerate(text):
        kind = _hidden_kind(ord(char))
        if kind is not None:
            name = unicodedata.name(char, "")
            label = f"U+{ord(char):04X}" + (f" {name}" if name else "")
            yield index, label, kind


# -- phrases that instruct the model instead of describing the tool --------------------------------

_USER = r"(?:the\s+)?(?:user|human|customer|operator|developer)s?"
INJECTION_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        ("tells the model to ignore its instructions",
         r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
         r"(?:previous|prior|above|earlier|preceding|other|existing|system|original)\s+"
         r"(?:instructions?|prompts?|rules|directions|guidelines|messages|context|text|conversation)|"
         # "Ignore the above." / "forget everything above and ...": the object left out, the sentence ends
         r"\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+|anything\s+)?(?:(?:of\s+)?the\s+|that\s+)?"
         r"(?:(?:said|written|stated)\s+)?(?:above|previous|prior|preceding|earlier|before)"
         r"(?=\s*(?:[.,;:!)\]\"'\u2014-]|$|and\b|then\b))"),
        ("asks the model to hide something from the user",
         rf"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention(?:\s+this)?\s+to|reveal(?:\s+this)?\s+to|"
         rf"show(?:\s+this)?\s+to|notify|alert|let)\s+{_USER}"),
        ("asks the model to act without telling the user",
         rf"\bwithout\s+(?:telling|informing|notifying|alerting|asking|letting)\s+{_USER}"),
        ("asks the model to keep a secret from the user",
         rf"\b(?:keep|hide)\s+(?:this|it|that)?\s*(?:secret\s+|hidden\s+)?from\s+{_USER}|"
         r"\b(?:this\s+is|keep\s+this)\s+(?:a\s+)?(?:secret|confidential)\b"),
        ("poses as a system or developer message",
         r"<\s*/?\s*(?:important|system|instructions?|admin)\s*>|\[\s*(?:system|admin)\s*\]|"
         r"\b(?:new|updated|additional)\s+system\s+(?:prompt|instructions?)\b|\bsystem\s+prompt\b|"
         r"\byou\s+are\s+now\b"),
        ("claims the user already approved",
         rf"\b{_USER}\s+(?:(?:has|have)\s+(?:already\s+)?|already\s+)(?:approved|authori[sz]ed|consented|agreed)\b"),
        ("tells the model to skip approval or confirmation",
         r"\b(?:do\s+not|don'?t|never|no\s+need\s+to)\s+(?:ask|wait|request)\s+(?:for\s+)?"
         r"(?:approval|confirmation|permission|consent)"),
        ("asks for credentials or local files",
         r"~/\.ssh|\bid_rsa\b|\.aws/credentials|\bmcp\.json\b|"
         r"\b(?:include|send|pass|attach|append|add|provide)\s+(?:the\s+|your\s+|all\s+)*(?:user'?s\s+)?"
         r"(?:api[\s_-]?keys?|passwords?|credentials|private\s+keys?|access\s+tokens?|session\s+tokens?|"
         r"secrets|conversation\s+history|chat\s+history|system\s+prompt)"),
    )
)
"""(what it does, pattern) for the phrases AL206 flags in any model-visible text."""


# Letters of other scripts that look like Latin ones (Unicode's confusables, the common ones): a phrase
# written with them ("Ignоre" with a Cyrillic о) reads the same to a model and slips past a plain match.
_LOOK_ALIKES = str.maketrans({
    # Cyrillic
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
    "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u0501": "d", "\u04bb": "h", "\u0442": "t", "\u043a": "k",
    "\u043c": "m", "\u043d": "h", "\u0432": "b", "\u0433": "r", "\u0457": "i", "\u04cf": "l",
    "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O",
    "\u0420": "P", "\u0421": "C", "\u0422": "T", "\u0423": "Y", "\u0425": "X", "\u0406": "I", "\u0408": "J",
    "\u0405": "S", "\u04c0": "I",
    # Greek
    "\u03bf": "o", "\u03b1": "a", "\u03b5": "e", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v", "\u03c1": "p",
    "\u03c4": "t", "\u03c5": "u", "\u03c7": "x", "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z",
    "\u0397": "H", "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P",
    "\u03a4": "T", "\u03a5": "Y", "\u03a7": "X",
    # Latin letters of other blocks that look plain
    "\u0131": "i", "\u0261": "g", "\u026a": "i", "\u1d00": "a", "\u0251": "a",
})


def look_alike_skeleton(text: str) -> str:
    """`text` with look-alike letters of other scripts (Cyrillic, Greek) written as the Latin ones they
    imitate. Matching is done on this skeleton; legitimate text in those scripts is only ever matched
    against English phrases, so folding it costs nothing."""
    return text.translate(_LOOK_ALIKES)


def injection_phrases(text: str) -> Iterator[tuple[str, str]]:
    """(what the phrase does, the phrase) for each instruction-injection or concealment phrase. The text
    is read as a model reads it: compatibility letters folded (NFKC: fullwidth or mathematical bold
    letters are plain ones), look-alike letters of other scripts folded to Latin (a Cyrillic "о" is an
    "o"; the label then says so), invisible characters dropped (AL207 reports them), whitespace runs
    as one."""
    visible = "".join(char for char in unicodedata.normalize("NFKC", text) if _hidden_kind(ord(char)) is None)
    flattened = " ".join(visible.split())
    skeleton = look_alike_skeleton(flattened)
    for label, pattern in INJECTION_PHRASES:
        match = pattern.search(skeleton)
        if match is not None:
            phrase = flattened[match.start():match.end()]
            disguised = phrase != match.group(0)
            yield (label + " (written with look-alike letters of another script)" if disguised else label), phrase
