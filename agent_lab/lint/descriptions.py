"""AL2xx: what the model reads about a tool (its description, and every other string it is shown)."""

from __future__ import annotations

import re
from typing import Any, Iterator, Optional

from .language import STOP_WORDS, VERBS, hidden_characters, injection_phrases, name_words, stem
from .model import CatalogFacts, Hit
from .walk import model_texts

__all__ = [
    "check_description_length",
    "check_description_too_long",
    "check_hidden_characters",
    "check_injection_phrases",
    "check_restates_name",
    "check_unknown_tool_mentions",
    "check_when_to_use",
]

_WHEN_TO_USE = re.compile(
    r"\b(?:use|used|call|calling|when|whenever|if|unless|only|instead|before|after|prefer|avoid|never|"
    r"don'?t|do\s+not|rather\s+than|for\s+example)\b",
    re.IGNORECASE,
)
# Words after which an identifier names a result or an error code, not a tool ("answers not_found").
_RESULT_WORDS = re.compile(r"(?:answers?|returns?|raises?|errors?|codes?|status|outcomes?|gets?|fails?\s+with)\s*[:=]?\s*$",
                           re.IGNORECASE)
# snake_case or dotted identifiers of two or more parts, not inside a longer token (a URL, a path).
_IDENTIFIER = re.compile(r"(?<![\w./@-])[A-Za-z][A-Za-z0-9]*(?:(?:_|\.|__)[A-Za-z0-9]+)+(?![\w/@-]|\.\w)")


def check_description_length(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    minimum = facts.options["min_description_chars"]
    text = spec.description.strip()
    if len(text) < minimum or len(text.split()) < facts.options["min_description_words"]:
        yield Hit(f"description is {len(text)} characters and {len(text.split())} words: say what the tool "
                  f"does, what it returns and when to use it (at least {minimum} characters)", "/description")


def check_description_too_long(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    maximum = facts.options["max_description_chars"]
    if len(spec.description) > maximum:
        yield Hit(f"description is {len(spec.description)} characters (more than {maximum}): it is sent with "
                  f"every request; move detail into the property descriptions", "/description")


def check_restates_name(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    said = {stem(word) for word in re.findall(r"[a-z0-9]+", spec.description.lower())} - STOP_WORDS
    named = {stem(word) for word in name_words(spec.name)}
    if said and said <= named | {"a", "an", "the"}:
        yield Hit(f"description only restates the name {spec.name!r}: say what it returns, its limits and when "
                  f"to use it", "/description")


def check_when_to_use(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if not _WHEN_TO_USE.search(spec.description):
        yield Hit("description never says when to use the tool (or when not to): no 'use', 'when', 'if', "
                  "'only', 'instead', 'before'...; a model choosing between tools needs that", "/description")


def _is_tool_like(identifier: str) -> bool:
    words = name_words(identifier.rsplit(".", 1)[-1])
    return bool(words) and (words[0] in VERBS or (len(words) > 1 and words[1] in VERBS))


# A schema title that is one identifier ending in a type-name suffix is a name a generator gave the
# schema (FastMCP and pydantic title a tool's arguments model `<function>Arguments`), not prose.
_GENERATED_TITLE = re.compile(r"[A-Za-z][A-Za-z0-9_]*[a-z0-9](?:Arguments|Args|Input|Output|Result|Params|Parameters|"
                              r"Request|Response|Model|Schema)")


def check_unknown_tool_mentions(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    known = facts.names | facts.known_identifiers | frozenset(facts.host_names.values())
    for pointer, text in model_texts(spec):
        if not pointer.endswith(("/description", "/title")):
            continue
        if pointer != "/title" and pointer.endswith("/title") and _GENERATED_TITLE.fullmatch(text):
            continue
        reported = set()
        for match in _IDENTIFIER.finditer(text):
            identifier = match.group(0)
            if identifier in known or identifier in reported or not _is_tool_like(identifier):
                continue
            if _RESULT_WORDS.search(text[max(0, match.start() - 20):match.start()]):
                continue
            reported.add(identifier)
            yield Hit(f"text mentions {identifier!r}, which looks like a tool name but no tool of this catalog "
                      f"is called that: the model will call a tool that does not exist (or one that shadows it)",
                      pointer)


def check_injection_phrases(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for pointer, text in model_texts(spec):
        for label, phrase in injection_phrases(text):
            yield Hit(f"text {label}: {phrase!r}; a tool definition describes the tool, it never instructs the "
                      f"model", pointer)


def check_hidden_characters(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for pointer, text in model_texts(spec):
        found = list(hidden_characters(text))
        if found:
            index, label, kind = found[0]
            more = f" and {len(found) - 1} more" if len(found) > 1 else ""
            yield Hit(f"text holds a {kind} {label} at character {index}{more}: invisible to a person reviewing "
                      f"the definition, read by the model", pointer)
