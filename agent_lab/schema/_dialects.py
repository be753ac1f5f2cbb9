"""The JSON Schema dialects this validator knows, and what sets each apart from the others.

A dialect is data, read once when a schema is compiled, never while it validates:
- its keyword table (drafts 4 to 7) or its default vocabularies (2019-09 and 2020-12, whose keyword
  tables are assembled per vocabulary, so a meta-schema's `$vocabulary` can narrow them);
- the rules the index needs to find schema resources: which keyword names a resource (`id` in
  draft-04, `$id` later), whether a `$ref` hides its siblings (up to draft-07, an `$id` beside it
  included), whether an `$id` fragment is a plain-name anchor (drafts 4 to 7), which keywords name
  anchors (`$anchor`, `$dynamicAnchor`), and which keywords hold subschemas.

`$schema` chooses the dialect of a schema resource; `Validator(schema, dialect=...)` the dialect of
documents that do not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from . import _keywords as keywords

__all__ = [
    "DIALECTS",
    "DRAFT_04",
    "DRAFT_06",
    "DRAFT_07",
    "DRAFT_2019_09",
    "DRAFT_2020_12",
    "Dialect",
    "builtin_dialect",
    "dialect_label",
    "dialect_name",
    "normalize_uri",
]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_2019_09 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_06 = "http://json-schema.org/draft-06/schema#"
DRAFT_04 = "http://json-schema.org/draft-04/schema#"


def normalize_uri(uri: str) -> str:
    """Drop an empty fragment: "x#" and "x" name the same resource."""
    return uri[:-1] if uri.endswith("#") else uri


@dataclass(frozen=True)
class Dialect:
    """What the compiler and the index need to know about one dialect (see the module docstring)."""

    uri: str  # the `$schema` value, as the specification writes it
    label: str  # how messages name it: "draft 2020-12", "draft-07"
    identifier: str  # the keyword that gives a schema resource its URI
    ref_hides_siblings: bool
    anchor_in_identifier: bool
    anchor_keywords: Tuple[str, ...]
    single_subschemas: Tuple[str, ...]  # keywords whose value is one subschema
    list_subschemas: Tuple[str, ...]  # keywords whose value is a list of subschemas
    map_subschemas: Tuple[str, ...]  # keywords whose value maps names to subschemas
    items_may_be_a_list: bool  # `items` is a subschema or (before 2020-12) a list of them
    table: Optional[Mapping[str, Callable[..., Any]]] = None  # drafts 4 to 7: the whole keyword table
    vocabularies: Optional[frozenset] = None  # 2019-09 and 2020-12: the vocabularies in force by default

    def identifier_of(self, schema: Mapping[str, Any]) -> Optional[str]:
        """The URI reference that names `schema` as a resource (or an anchor), if it has one."""
        value = schema.get(self.identifier)
        if not isinstance(value, str):
            return None
        if self.ref_hides_siblings and "$ref" in schema:
            return None  # before 2019-09 every keyword beside $ref is ignored, its $id too
        return value


_APPLICATORS_2020_12 = ("additionalProperties", "unevaluatedProperties", "items", "contains", "propertyNames",
                        "not", "if", "then", "else", "unevaluatedItems")
_APPLICATORS_2019_09 = ("additionalItems", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
                        "contains", "propertyNames", "not", "if", "then", "else")
_APPLICATORS_07 = ("additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then",
                   "else")
_APPLICATORS_06 = ("additionalItems", "additionalProperties", "contains", "propertyNames", "not")
_APPLICATORS_04 = ("additionalItems", "additionalProperties", "not")

DIALECTS: Dict[str, Dialect] = {
    normalize_uri(dialect.uri): dialect for dialect in (
        Dialect(DRAFT_2020_12, "draft 2020-12", "$id", False, False, ("$anchor", "$dynamicAnchor"),
                _APPLICATORS_2020_12, ("allOf", "anyOf", "oneOf", "prefixItems"),
                ("properties", "patternProperties", "$defs", "dependentSchemas", "dependencies"), False,
                vocabularies=keywords.DEFAULT_VOCABULARIES),
        Dialect(DRAFT_2019_09, "draft 2019-09", "$id", False, False, ("$anchor",),
                _APPLICATORS_2019_09, ("allOf", "anyOf", "oneOf"),
                ("properties", "patternProperties", "$defs", "dependentSchemas", "dependencies"), True,
                vocabularies=keywords.DEFAULT_VOCABULARIES_2019_09),
        Dialect(DRAFT_07, "draft-07", "$id", True, True, (), _APPLICATORS_07, ("allOf", "anyOf", "oneOf"),
                ("properties", "patternProperties", "definitions", "dependencies"), True, table=keywords.DRAFT_07_TABLE),
        Dialect(DRAFT_06, "draft-06", "$id", True, True, (), _APPLICATORS_06, ("allOf", "anyOf", "oneOf"),
                ("properties", "patternProperties", "definitions", "dependencies"), True, table=keywords.DRAFT_06_TABLE),
        Dialect(DRAFT_04, "draft-04", "id", True, True, (), _APPLICATORS_04, ("allOf", "anyOf", "oneOf"),
                ("properties", "patternProperties", "definitions", "dependencies"), True, table=keywords.DRAFT_04_TABLE),
    )
}


def builtin_dialect(uri: str) -> Optional[Dialect]:
    """The built-in dialect whose `$schema` is `uri` (with or without its empty fragment), or None."""
    return DIALECTS.get(normalize_uri(uri))


def dialect_label(uri: str) -> str:
    """How a message names a dialect: "draft-07" for a built-in one, its URI for a custom meta-schema."""
    dialect = builtin_dialect(uri)
    return dialect.label if dialect is not None else repr(uri)


def dialect_name(schema: Any) -> str:
    """The dialect a schema declares, named for people: "2020-12" (also without `$schema`), "draft-07"."""
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    if not isinstance(declared, str):
        return "2020-12"
    dialect = builtin_dialect(declared)
    return dialect.label.replace("draft 20", "20") if dialect is not None else declared


def known_dialects_text() -> str:
    return ", ".join(dialect.label for dialect in DIALECTS.values())
