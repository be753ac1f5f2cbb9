"""Self-contained subschemas, compiled once for every Validator of the process.

A subschema whose keywords compile from their own values (`type`, bounds, `enum`, `pattern`, ...), or
that descends only into such subschemas, compiles to the same node wherever it sits: its key is its
keywords' text (`leaf_key`), and one compiled node per key serves every schema (`SHARED_LEAVES`).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..jsonvalue import escape_pointer_token
from ._dialects import builtin_dialect
from ._index import Place
from ._nodes import Node
from ._shared import SharedTable

if TYPE_CHECKING:  # pragma: no cover
    from ._compiler import DialectTable

__all__ = ["LEAF_KEYWORDS", "SHARED_LEAVES", "json_text", "leaf_key", "record_leaf_patterns", "shared_leaf"]

LEAF_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxProperties",
    "minProperties", "required", "dependentRequired",
})
"""Keywords whose compiled form depends only on their own value (and siblings in this set)."""
_NOT_SHARED = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$schema", "$vocabulary",
                         "$ref", "$dynamicRef", "$recursiveRef", "patternProperties", "prefixItems"})
"""Keywords that make a subschema a resource, an anchor or a reference, or that a shared keyword
would read as a sibling (`additionalProperties` reads `patternProperties`, `items` `prefixItems`)."""
_DESCENDING = ("items", "additionalProperties")
"""Single-subschema keywords that apply their subschema to parts of the value (items, members)."""
_MAX_SHARED_DEPTH = 32
SHARED_LEAVES = SharedTable(4096)
"""Compiled leaf subschemas shared by every Validator (see `leaf_key`)."""


def json_text(value: Any) -> Any:
    """A value's compact JSON text, what equal keyword values share (None: not JSON: nothing is shared)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def leaf_key(schema: dict, place: Place, dialect: DialectTable, *, dynamic: bool) -> Optional[Tuple[Any, ...]]:
    """The key a self-contained subschema is shared by (`SHARED_LEAVES`), or None when it is not one.

    Self-contained: its keywords compile from their own values (`type`, bounds, `enum`,
    `pattern`, `format`, `required`, ...) or descend into parts of the instance through
    subschemas that are self-contained too (`properties`, a single-schema `items`,
    `additionalProperties` without `patternProperties`); it names no resource, anchor or
    reference, and is read in a built-in dialect by a compiler that tracks no dynamic scope. Its
    compiled node then depends on nothing but those keywords' values (in order) and the dialect's
    flags, never on where it sits or in which schema, so every equal one in every schema can share
    one node; and since nothing in it applies a subschema to the value it was given, it never
    needs the per-call memo (`repeated_subschemas`). Words the dialect does not compile
    (`description`, `title`, unknown keywords) are left out of the key; the `format` checkers it
    was compiled with are in it (the table of checkers can change)."""
    if dynamic or builtin_dialect(place.dialect) is None:
        return None
    checkers: List[Any] = []
    text = _content_key(schema, dialect, checkers, 0)
    if text is None:
        return None
    # Indexed by the text's digest (the text itself could be as long as the schema); a hit is
    # confirmed against the found node's own schema (`shared_leaf`).
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return (place.dialect, dialect.format_asserts, dialect.has_validation, digest, tuple(checkers), text)

def shared_leaf(key: Tuple[Any, ...], dialect: DialectTable) -> Optional[Node]:
    """The shared node for `key` (from `leaf_key`), once its own content is confirmed equal."""
    found = SHARED_LEAVES.get(key[:5])
    if found is None or _content_key(found.schema, dialect, [], 0) != key[5]:
        return None
    return found

def _content_key(schema: Any, dialect: DialectTable, checkers: List[Any], depth: int) -> Optional[str]:
    if isinstance(schema, bool):
        return "true" if schema else "false"
    if not isinstance(schema, dict) or depth > _MAX_SHARED_DEPTH or not _NOT_SHARED.isdisjoint(schema.keys()):
        return None
    table = dialect.keywords
    parts: List[Any] = []
    for keyword, value in schema.items():
        if keyword in LEAF_KEYWORDS:  # (draft-04's `maximum` reads `exclusiveMaximum`, which has no entry)
            parts.append((keyword, value))
            if keyword == "format" and dialect.format_asserts:
                from .formats import FORMAT_CHECKERS

                checkers.append(FORMAT_CHECKERS.get(value) if isinstance(value, str) else None)
        elif keyword not in table:
            continue  # not compiled: an annotation or an unknown word
        elif keyword == "properties" and isinstance(value, dict):
            members = []
            for name, child in value.items():
                key = _content_key(child, dialect, checkers, depth + 1)
                if key is None:
                    return None
                members.append(json_text(name) + ":" + key)
            parts.append('["properties",{' + ",".join(members) + "}]")
            continue
        elif keyword in _DESCENDING and isinstance(value, (dict, bool)):
            key = _content_key(value, dialect, checkers, depth + 1)
            if key is None:
                return None
            parts.append(f'["{keyword}",{key}]')
            continue
        else:
            return None
        text = json_text([keyword, value])
        if text is None:
            return None
        parts[-1] = text
    return "[" + ",".join(parts) + "]"  # JSON, whose nested parts are the children's own texts

def keep_pattern(patterns: Dict[str, Any], where: str, pattern: str, safety: Any) -> None:
    """List `pattern` at `where` in a validator's `patterns`, never in place of another one there: two
    resources can share a location (an embedded `"$id": ""` is the root's own base), and a pattern
    dropped from the list was never checked for speed (`ToolSpec` refuses the unsafe ones it lists).
    A second pattern at a taken place is listed as `where (2)`, and so on."""
    from .regex_safety import PatternFinding

    place, number = where, 1
    while place in patterns:
        if patterns[place].pattern == pattern:
            return  # the same pattern, reached again (a shared subschema)
        number += 1
        place = f"{where} ({number})"
    patterns[place] = PatternFinding(place, pattern, safety)


def record_leaf_patterns(patterns: Dict[str, Any], schema: Any, location: str) -> None:
    """A shared node's patterns are still listed in this validator's `patterns`, each at its own pointer."""
    if not isinstance(schema, dict):
        return
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        from .regex_safety import compile_pattern

        keep_pattern(patterns, location + "/pattern", pattern, compile_pattern(pattern)[1])
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, child in properties.items():
            record_leaf_patterns(patterns, child, f"{location}/properties/{escape_pointer_token(name)}")
    for keyword in _DESCENDING:
        if keyword in schema:
            record_leaf_patterns(patterns, schema[keyword], f"{location}/{keyword}")
