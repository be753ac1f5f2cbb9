"""AL4xx: the runtime half of the contract, which only a linter that sees the ToolSpec can check."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Iterator, Optional

from ..spec import DEFAULT_TIMEOUT_MS, ApprovalPolicy
from ..spec_checks import destructive_without_approval, write_without_key
from .language import VERBS, name_words, stem
from .model import CatalogFacts, Hit
from .walk import pointer_token, schema_nodes

__all__ = [
    "check_conditional_approval_undocumented",
    "check_destructive_without_approval",
    "check_no_output_schema",
    "check_open_world_timeout",
    "check_redacted_elsewhere",
    "check_write_without_key",
]


def check_write_without_key(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for message, pointer in write_without_key(spec):  # the runtime's own check (ToolSpec.warnings)
        yield Hit(message, pointer)


def check_destructive_without_approval(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for message, pointer in destructive_without_approval(spec):  # the runtime's own check (ToolSpec.warnings)
        yield Hit(message, pointer)


def check_no_output_schema(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.output_schema is None:
        yield Hit("no output_schema: the registry cannot check what the handler returns (invalid_tool_output), "
                  "and the model is not told what it gets back")


def check_open_world_timeout(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.open_world and spec.timeout_ms == DEFAULT_TIMEOUT_MS:
        yield Hit(f"open-world tool (it reaches systems outside the application) left at the default timeout "
                  f"({DEFAULT_TIMEOUT_MS:g} ms): choose a timeout_ms from what the outside system can promise")


_APPROVAL_WORDS = re.compile(r"\bapprov|\bconfirm|\bsign[- ]?off\b", re.IGNORECASE)


def check_conditional_approval_undocumented(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    if spec.approval is ApprovalPolicy.CONDITIONAL and not _APPROVAL_WORDS.search(spec.description):
        yield Hit("approval is 'conditional' but the description never says which calls need a person's approval: "
                  "the model meets approval_required without warning", "/description")


def _property_pointers(schema: Any, root: str, field_name: str) -> Iterator[str]:
    token = f"/properties/{pointer_token(field_name)}"
    for pointer, _, via in schema_nodes(schema, root):
        if via == "properties" and pointer.endswith(token):
            yield pointer


def check_redacted_elsewhere(specs: Sequence[Any], facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    redacted_by: dict[str, list[str]] = {}
    for spec in specs:
        for field_name in spec.redact:
            redacted_by.setdefault(field_name, []).append(spec.name)
    by_name = {spec.name: spec for spec in specs}
    for spec in specs:
        if spec.output_schema is None or not isinstance(spec.output_schema, Mapping):
            continue
        for field_name, owners in redacted_by.items():
            if field_name in spec.redact:
                continue
            for pointer in _property_pointers(spec.output_schema, "/output_schema", field_name):
                yield Hit(f"returns {field_name!r} unredacted, but {', '.join(repr(o) for o in owners)} redacts "
                          f"that field: the model reads here what the other tool hides (add it to redact)",
                          pointer, tool=spec.name)
            if not any(_same_data(spec, by_name[owner]) for owner in owners):
                continue  # a free-form output of unrelated data (weather beside contacts) is not a sibling
            for pointer, how in _free_form_pointers(spec.output_schema, "/output_schema", field_name):
                yield Hit(f"may return {field_name!r} unredacted: {how}, so nothing keeps the field out, and "
                          f"{', '.join(repr(o) for o in owners)} redacts it (add it to redact, or list the "
                          f"properties)", pointer, tool=spec.name)


def _nouns(name: str) -> set[str]:
    return {stem(word) for word in name_words(name) if word not in VERBS and len(word) > 2}


def _same_data(spec: Any, owner: Any) -> bool:
    """Whether `spec` serves the data `owner` redacts: the same permission, or a noun of their names in
    common (get_event and list_events)."""
    if spec.required_permission is not None and spec.required_permission == owner.required_permission:
        return True
    return bool(_nouns(spec.name) & _nouns(owner.name))


def _free_form_pointers(schema: Any, root: str, field_name: str) -> Iterator[tuple[str, str]]:
    """Where an output object lists no properties yet admits a member named `field_name`: any keys
    (`additionalProperties` absent, true or a schema) or a `patternProperties` pattern matching it."""
    for pointer, node, _ in schema_nodes(schema, root):
        if not isinstance(node, Mapping) or node.get("properties"):
            continue
        declared = node.get("type")
        if not (declared == "object" or (isinstance(declared, list) and "object" in declared)
                or "additionalProperties" in node or "patternProperties" in node):
            continue
        patterns = node.get("patternProperties")
        if isinstance(patterns, Mapping) and any(_pattern_admits(pattern, field_name) for pattern in patterns):
            yield pointer, "its output holds an object whose patternProperties admit that name"
        elif node.get("additionalProperties", True) is not False and not isinstance(patterns, Mapping):
            yield pointer, "its output holds a free-form object (any keys)"


def _pattern_admits(pattern: Any, name: str) -> bool:
    """Whether `pattern` (ECMA-262, as JSON Schema reads it) matches `name`, by our validator, whose
    regex engines are linear-time on whatever pattern a schema holds."""
    if not isinstance(pattern, str):
        return False
    from ..schema import SchemaError, shared_validator

    try:
        return bool(shared_validator({"type": "string", "pattern": pattern}).is_valid(name))
    except (SchemaError, ValueError):
        return False
