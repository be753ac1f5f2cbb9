"""AL1xx: tool names, as each host receives them (see `adapters.NameMap`)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Iterator, Optional, Sequence

from ..adapters import HOST_NAME_PATTERN
from .language import VERBS, name_words
from .model import CatalogFacts, Hit

__all__ = ["HOST_NAME_RULES", "check_host_charset", "check_name_collisions", "check_separators", "check_verb_first"]

HOST_NAME_RULES = {
    "openai": (HOST_NAME_PATTERN, "[A-Za-z0-9_-], at most 64 characters"),
    "openai-chat": (HOST_NAME_PATTERN, "[A-Za-z0-9_-], at most 64 characters"),
    "anthropic": (HOST_NAME_PATTERN, "[A-Za-z0-9_-], at most 64 characters"),
    "mcp": (re.compile(r"[A-Za-z0-9_.\-]{1,128}"), "[A-Za-z0-9_.-], at most 128 characters"),
}


def check_host_charset(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    pattern, rule = HOST_NAME_RULES[host or "mcp"]
    if pattern.fullmatch(spec.name):
        return
    mapped = facts.host_names.get(spec.name)
    shown = f"exports rename it to {mapped!r}" if mapped else "no unique host name can be made for it"
    yield Hit(f"name {spec.name!r} is not a legal name for this host ({rule}); {shown}, so the model, "
              f"its traces and your code call the tool by different names", "/name")


def _words_after_namespace(name: str) -> list[str]:
    return name_words(name.rsplit(".", 1)[-1]) or name_words(name)


def check_verb_first(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    words = _words_after_namespace(spec.name)
    if not words or words[0] in VERBS or (len(words) > 1 and words[1] in VERBS):
        return  # verb first, or a one-word namespace prefix then the verb (github_create_issue)
    yield Hit(f"name {spec.name!r} does not start with a verb (after any namespace): a name like "
              f"'get_...', 'list_...' or 'create_...' tells the model what calling it does", "/name")


def _separator(name: str) -> Optional[str]:
    """The namespace separator a name uses, if any: '.', '/', ':' or '__'."""
    for separator in (".", "/", ":", "__"):
        if separator in name:
            return separator
    return None


def _word_style(name: str) -> Optional[str]:
    base = re.sub(r"[./:]|__", "", name)
    if "_" in base and "-" in base:
        return "mixed"
    if "-" in base:
        return "kebab-case"
    if "_" in base:
        return "snake_case"
    if re.search(r"[a-z][A-Z]", base):
        return "camelCase"
    return None


def check_separators(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for describe, classify in (("namespace separator", _separator), ("word style", _word_style)):
        styles = {spec.name: classify(spec.name) for spec in specs}
        counts = Counter(style for style in styles.values() if style is not None)
        if len(counts) < 2 and "mixed" not in counts:
            continue
        usual, _ = max(counts.items(), key=lambda item: (item[1], item[0] != "mixed"))
        for spec in specs:
            style = styles[spec.name]
            if style is not None and (style != usual or style == "mixed"):
                yield Hit(f"name {spec.name!r} uses the {describe} {style!r} while {counts[usual]} other "
                          f"tool(s) use {usual!r}: one convention lets the model guess names right", "/name",
                          tool=spec.name)


def _readable(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name.replace(".", "__"))


def _folded(name: str) -> str:
    return re.sub(r"[_\-.]", "", name).lower()


def check_name_collisions(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    # For OpenAI and Anthropic, the readable form NameMap gives a dotted name (tickets.get -> tickets__get),
    # before any hash it adds to keep two such names apart: the model reads the readable part.
    shown = {spec.name: (_readable(spec.name) if host != "mcp" else spec.name) for spec in specs}
    groups: dict[str, list[str]] = defaultdict(list)
    for spec in specs:
        groups[_folded(shown[spec.name])].append(spec.name)
    for names in groups.values():
        for later in names[1:]:
            yield Hit(f"name {later!r} differs from {names[0]!r} only in case or separators as the host "
                      f"shows them: a model can call one for the other (tool shadowing)", "/name", tool=later)
