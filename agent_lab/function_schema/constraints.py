"""Constraint markers applied to a schema: `Len`, `Range`, `Pattern`, `Describe` become JSON Schema keywords.

A JSON Schema keyword constrains only the types it applies to, so a marker on ``str | None`` constrains
the string branch; a marker that fits no branch (``Len`` on an int) is refused, never dropped. A
`Pattern` must be an ECMA-262 regular expression our validator can run in linear time.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..schema.ecma_regex import EcmaRegexError, EcmaRegexUnsupported, compile_ecma
from .annotations import Site
from .markers import Describe, Len, MultipleOf, Pattern, Range, pydantic_markers

__all__ = ["apply_metadata"]

# Which JSON types each constraint keyword applies to.
_LENGTH_KEYWORDS = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems")}
_NUMERIC_TYPES = frozenset({"integer", "number"})


def _schema_types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    return set(declared or ())


def _constrain(schema: dict[str, Any], applies: Callable[[set[str]], bool], add: Callable[[dict[str, Any]], None]) -> bool:
    """Add a constraint to the schema (or to each anyOf branch it fits); False if it fits nowhere."""
    if "anyOf" in schema:
        fitted = [_constrain(branch, applies, add) for branch in schema["anyOf"]]
        return any(fitted)
    if applies(_schema_types(schema)):
        add(schema)
        return True
    return False


def apply_metadata(schema: dict[str, Any], metadata: tuple[Any, ...], site: Site) -> dict[str, Any]:
    """Annotated markers and plain strings become keywords of the schema (JSON Schema keywords only
    constrain the types they apply to, so a marker on ``str | None`` constrains the string).
    pydantic's ``Field(ge=1, max_length=5, description=...)`` and annotated-types constraints mean
    the same as ours (see `pydantic_markers`)."""
    expanded: list[Any] = []
    for marker in metadata:
        translated = pydantic_markers(marker, site)
        expanded.extend([marker] if translated is None else translated)
    for marker in expanded:
        if isinstance(marker, str):
            schema["description"] = marker
        elif isinstance(marker, Describe):
            schema["description"] = marker.text
        elif isinstance(marker, Len):
            _apply_len(schema, marker, site)
        elif isinstance(marker, Range):
            _apply_range(schema, marker, site)
        elif isinstance(marker, Pattern):
            _apply_pattern(schema, marker, site)
        elif isinstance(marker, MultipleOf):
            if not _constrain(schema, lambda kinds: bool(kinds & _NUMERIC_TYPES),
                              lambda target: target.update(multipleOf=marker.value)):
                raise site.refuse("multiple_of applies to int and float only")
        # Other libraries' metadata is not ours to interpret: it is ignored.
    return schema


def _apply_len(schema: dict[str, Any], marker: Len, site: Site) -> None:
    def add(target: dict[str, Any]) -> None:
        kind = "string" if "string" in _schema_types(target) else "array"
        low, high = _LENGTH_KEYWORDS[kind]
        if marker.min is not None:
            target[low] = marker.min
        if marker.max is not None:
            target[high] = marker.max

    if not _constrain(schema, lambda kinds: bool(kinds & {"string", "array"}), add):
        raise site.refuse("Len applies to strings, lists and tuples only")


def _apply_range(schema: dict[str, Any], marker: Range, site: Site) -> None:
    bounds = {"minimum": marker.ge, "maximum": marker.le, "exclusiveMinimum": marker.gt, "exclusiveMaximum": marker.lt}

    def add(target: dict[str, Any]) -> None:
        target.update({keyword: bound for keyword, bound in bounds.items() if bound is not None})

    if not _constrain(schema, lambda kinds: bool(kinds & _NUMERIC_TYPES), add):
        raise site.refuse("Range applies to int and float only")


def _apply_pattern(schema: dict[str, Any], marker: Pattern, site: Site) -> None:
    problem = _ecma_problem(marker.regex)
    if problem:
        raise site.refuse(problem)
    if not _constrain(schema, lambda kinds: "string" in kinds, lambda target: target.update(pattern=marker.regex)):
        raise site.refuse("Pattern applies to strings only")


def _ecma_problem(regex: str) -> str | None:
    """Why `regex` cannot be a JSON Schema pattern here, as one sentence, or None (ECMA-262 rules)."""
    try:
        compile_ecma(regex)
    except EcmaRegexUnsupported as exc:
        return f"Pattern is valid ECMA-262 but not supported here ({exc.reason})"
    except EcmaRegexError as exc:
        where = "" if exc.position is None else f" at position {exc.position}"
        return f"Pattern is not a valid ECMA-262 regular expression ({exc.reason}{where})"
    return None

