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
derive, repetition counts above Python's limit, a backreference that would
read a capture ECMA resets: ``^(?:(a)|b){2}\\1$``, see ``ecma.captures``).
They raise :class:`EcmaRegexUnsupported`, a subclass of
:class:`EcmaRegexError`, so callers can tell "invalid" from "cannot run
here"; :func:`is_ecma_regex` answers the syntax question alone (the
``format: regex`` question).

Semantic differences that remain (rare in schemas): ``re`` does not reset
captures inside a repeated group at each iteration, and an iteration of a
quantified group may match the empty string where ECMA stops the loop: only
a backreference can observe them, and one that would is refused above; the ``i``
modifier uses Python's case folding, and ``\\p{Script=...}`` (and
``Script_Extensions``) membership is derived from character names, an
approximation of Scripts.txt, which the standard library lacks; Common and
Inherited cannot be derived and are unsupported.
"""

from __future__ import annotations

import functools
import re

from .ecma.errors import EcmaRegexError, EcmaRegexUnsupported
from .ecma.parser import parse_pattern
from .ecma.tree import ParsedPattern, python_source

__all__ = [
    "EcmaRegexError",
    "EcmaRegexUnsupported",
    "compile_ecma",
    "is_ecma_regex",
    "parse_ecma",
    "translate_ecma",
]

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
    return parse_pattern(pattern)


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
        parse_pattern(pattern, resolve_properties=False)
    except EcmaRegexUnsupported:
        return True
    except EcmaRegexError:
        return False
    return True
