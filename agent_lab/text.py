"""Text utilities the runtime, search, lint and the contract tools share (below all of them).

The words of a tool's name and description, as search ranks them and lint compares them: a name split at
its separators and camelCase humps, English inflections folded (`stem`), stop words dropped; and text
shown safely, every invisible or ambiguous character written as an escape (`escaped`).
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["STOP_WORDS", "content_words", "escaped", "name_words", "stem"]

STOP_WORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
him his how i if in into is it its itself just me more most my no nor not now of off on once only or other our
ours out over own same she should so some such than that the their theirs them then there these they this
those through to too under until up very was we were what when where which while who whom why will with would
you your yours tool tools
""".split())

_WORD = re.compile(r"[A-Z]+[0-9]*(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
"""A word of a name: an acronym before a capitalised word (HTTP in HTTPServer), a lowercase run with an
optional capital (get, Server), an acronym (URL), or digits; digits stay with the letters before them."""


def name_words(name: str) -> list[str]:
    """The words of a tool name: split at `_ - . / :` and at camelCase humps (acronyms kept whole:
    getHTTPResponse is get, http, response), lowercased."""
    words: list[str] = []
    for part in re.split(r"[_\-./:]+", name):
        words.extend(word.lower() for word in _WORD.findall(part))
    return words


def _consonant(word: str, index: int) -> bool:
    char = word[index]
    if char in "aeiou":
        return False
    if char == "y":  # a consonant at the start or after a vowel (yes, play), else a vowel (tidy)
        return index == 0 or not _consonant(word, index - 1)
    return True


def _measure(word: str) -> int:
    """How many vowel-consonant sequences the word has (Porter's m: tr 0, tree 0, trouble 1, private 2)."""
    shape = "".join("c" if _consonant(word, index) else "v" for index in range(len(word)))
    return len(re.findall(r"v+c+", shape))


def _has_vowel(word: str) -> bool:
    return any(not _consonant(word, index) for index in range(len(word)))


def _ends_cvc(word: str) -> bool:
    """Consonant, vowel, consonant at the end, the last not w, x or y (hop, fil): a short syllable."""
    size = len(word)
    return (size >= 3 and _consonant(word, size - 3) and not _consonant(word, size - 2) and _consonant(word, size - 1)
            and word[-1] not in "wxy")


@functools.lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """Fold English inflections so that every form of a word meets: plurals and third persons (-s, -es,
    -ies), past tenses (-ed) and gerunds (-ing), and a final silent e (create, creates, created and
    creating all give "creat"; search and searches give "search"). Porter's step 1 and step 5a,
    written for lowercase words; words with digits and words of two letters are kept as they are."""
    if len(word) <= 2 or not word.isalpha():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif not word.endswith(("ss", "us", "is")) and word.endswith("s"):  # class, status, analysis stay
        word = word[:-1]
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:  # agreed -> agree, but need stays
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            base = word[: -len(suffix)]
            if word.endswith(suffix) and _has_vowel(base):  # sing and bed keep theirs
                word = base
                if word.endswith(("at", "bl", "iz")):  # creat(ing) -> create
                    word += "e"
                elif len(word) > 1 and word[-1] == word[-2] and word[-1] not in "lsz" and _consonant(word, len(word) - 1):
                    word = word[:-1]  # stopp(ed) -> stop
                elif _measure(word) == 1 and _ends_cvc(word):  # fil(ed) -> file
                    word += "e"
                break
    if word.endswith("e"):
        base = word[:-1]
        if _measure(base) > 1 or (_measure(base) == 1 and not _ends_cvc(base)):  # update -> updat, file stays
            word = base
    return word


def content_words(text: str) -> list[str]:
    """Lowercased, stemmed words of `text` without stop words (for comparing descriptions)."""
    return [stem(word) for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in STOP_WORDS]


def escaped(text: str) -> str:
    """`text` with control, format (zero-width, bidirectional), private-use and unassigned characters
    written as \\uXXXX (or \\UXXXXXXXX), so what a reader sees is what is there."""
    shown = []
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp") or \
                0xFE00 <= ord(char) <= 0xFE0F or 0xE0100 <= ord(char) <= 0xE01EF:
            code = ord(char)
            shown.append(f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
        else:
            shown.append(char)
    return "".join(shown)
