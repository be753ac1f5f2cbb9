"""Walking a JSON Schema: every subschema, with the JSON Pointer and the keyword that reached it.

Shared by search (it indexes input properties) and lint (it reads every subschema a model sees), below
both. Schemas of older dialects are walked as written: draft-07's list-form `items`, `additionalItems`
and the schemas of `dependencies` are subschemas too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Iterator

from ._uri import pointer_tokens

__all__ = ["MAX_WALK_DEPTH", "follow_pointer", "local_target", "pointer_token", "schema_nodes"]

MAX_WALK_DEPTH = 64
"""Subschemas nested deeper than this are not looked into (the validator refuses deeper instances)."""

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SCHEMA_LISTS = ("prefixItems", "items", "allOf", "anyOf", "oneOf")  # items: a list before 2020-12
_SCHEMA_SINGLES = ("items", "additionalItems", "additionalProperties", "contains", "not", "if", "then", "else",
                   "propertyNames", "unevaluatedItems", "unevaluatedProperties")


def pointer_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def local_target(root: Any, reference: Any) -> Any:
    """The subschema of `root` a same-document `$ref` ("#", "#/$defs/name", any "#/..." JSON Pointer)
    names, or None: another document, an anchor, or a pointer to nothing. Nothing is fetched."""
    if not isinstance(reference, str) or not (reference == "#" or reference.startswith("#/")):
        return None
    return follow_pointer(root, pointer_tokens(reference[1:]))


def follow_pointer(root: Any, tokens: Iterable[str]) -> Any:
    """The value at the decoded JSON Pointer `tokens` in `root`, or None where it leads to nothing."""
    target = root
    for token in tokens:
        if isinstance(target, Mapping) and token in target:
            target = target[token]
        elif isinstance(target, list) and token.isascii() and token.isdigit() and int(token) < len(target):
            target = target[int(token)]
        else:
            return None
    return target


def schema_nodes(schema: Any, pointer: str, *, via: str = "", depth: int = 0) -> Iterator[tuple[str, Any, str]]:
    """(pointer, subschema, how it was reached) for `schema` and every subschema in it.

    `via` is the keyword that led here: "properties" for a property's schema, "items", "anyOf", ...;
    "" for the root. Data keywords (`const`, `enum`, `default`, `examples`) hold values, not schemas,
    and are not walked into.
    """
    yield pointer, schema, via
    if not (isinstance(schema, dict) or isinstance(schema, Mapping)) or depth >= MAX_WALK_DEPTH:  # dict: no ABC check
        return
    for keyword in _SCHEMA_MAPS:
        members = schema.get(keyword)
        if members is not None and isinstance(members, Mapping):  # most keywords are absent
            for name, sub in members.items():
                if keyword == "dependencies" and not isinstance(sub, (Mapping, bool)):
                    continue  # a list of property names (draft-07's dependentRequired), not a schema
                where = f"{pointer}/{keyword}/{pointer_token(str(name))}"
                yield from schema_nodes(sub, where, via=keyword, depth=depth + 1)
    for keyword in _SCHEMA_LISTS:
        members = schema.get(keyword)
        if isinstance(members, list):
            for index, sub in enumerate(members):
                yield from schema_nodes(sub, f"{pointer}/{keyword}/{index}", via=keyword, depth=depth + 1)
    for keyword in _SCHEMA_SINGLES:
        if keyword in schema and isinstance(schema[keyword], (Mapping, bool)):
            yield from schema_nodes(schema[keyword], f"{pointer}/{keyword}", via=keyword, depth=depth + 1)
