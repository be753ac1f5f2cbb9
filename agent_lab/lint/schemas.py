"""AL3xx: the input and output schemas (what the model writes, and what it is promised back)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, Optional

from ..adapters import (ExportSchemaError, StrictSchemaError, host_schema, strict_refusal_in_original,
                        to_strict_schema)
from ..schema import PatternEngine
from ..schema.formats import FORMAT_CHECKERS
from ..spec_checks import backtracking_input_patterns
from .model import CatalogFacts, Hit
from ..schema.walk import local_target
from .walk import schema_nodes

__all__ = [
    "check_backtracking_patterns",
    "check_empty_enum",
    "check_format_not_asserted",
    "check_free_form_objects",
    "check_linear_matcher_patterns",
    "check_required_undefined",
    "check_schema_depth",
    "check_strict_convertible",
    "check_undescribed_properties",
    "check_untyped_properties",
]

_TYPING_KEYWORDS = ("type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "$dynamicRef")


def _input_nodes(spec: Any) -> Iterator[tuple[str, Any, str]]:
    return schema_nodes(spec.input_schema, "/input_schema")


def _both_schemas(spec: Any) -> Iterator[tuple[str, Any, str]]:
    yield from _input_nodes(spec)
    if spec.output_schema is not None:
        yield from schema_nodes(spec.output_schema, "/output_schema")


_BRANCHES = ("allOf", "anyOf", "oneOf", "then", "else")
_ALTERNATIVES = ("anyOf", "oneOf", "then", "else")  # each holds for some instances only


def _conjoined(node: Any, root: Any) -> Iterator[Mapping[str, Any]]:
    """`node` and every subschema reached from it through allOf and same-document `$ref` only:
    schemas that all hold for every instance `node` accepts (a `$ref`'s target applies in every
    dialect, beside its siblings or instead of them). Each once: references may form cycles."""
    seen: set[int] = set()
    waiting = [node]
    while waiting and len(seen) <= _MAX_CONJOINED:
        member = waiting.pop()
        if not isinstance(member, Mapping) or id(member) in seen:
            continue
        seen.add(id(member))
        yield member
        if "$ref" in member:
            waiting.append(local_target(root, member["$ref"]))
        members = member.get("allOf")
        if isinstance(members, list):
            waiting.extend(reversed(members))


_MAX_CONJOINED = 256
"""At most this many conjoined subschemas are read for one schema (a hostile server's can be huge)."""


def _property_families(schema: Any) -> dict[int, list[Any]]:
    """For each property subschema (by id), the definitions of that property name that hold together
    for one instance: the object's own `properties` and those its allOf branches and `$ref` targets add
    (a property typed in one and described in another, `allOf` refining a base, is typed and
    described), and within an anyOf/oneOf/then/else branch, that branch's own with everything above it.
    A definition in one alternative never types or describes the property of another alternative, or
    of the base: the instances the other alternative accepts are not bound by it."""
    families: dict[int, list[Any]] = {}

    def gather(node: Any, inherited: Mapping[str, list[Any]], depth: int) -> None:
        members = list(_conjoined(node, schema))
        by_name = {name: list(definitions) for name, definitions in inherited.items()}
        for member in members:
            properties = member.get("properties")
            if isinstance(properties, Mapping):
                for name, definition in properties.items():
                    by_name.setdefault(name, []).append(definition)
        for definitions in by_name.values():
            for definition in definitions:
                families.setdefault(id(definition), definitions)
        if depth > 16:
            return
        for member in members:
            for keyword in _ALTERNATIVES:
                branches = member.get(keyword)
                for branch in branches if isinstance(branches, list) else [branches] if branches is not None else []:
                    gather(branch, by_name, depth + 1)

    for _, node, via in schema_nodes(schema, ""):
        if via in _BRANCHES or not isinstance(node, Mapping):
            continue  # a branch belongs to the family of the schema it refines
        gather(node, {}, 0)
    return families


def _typed(node: Any) -> bool:
    return node is False or (isinstance(node, Mapping) and any(key in node for key in _TYPING_KEYWORDS))


def _described(node: Any, root: Any) -> bool:
    """A description (or title) on the property's schema, or on what it refers to or conjoins: a
    `$ref` to a described definition describes the property to a model that reads it."""
    return any(member.get("description") or member.get("title") for member in _conjoined(node, root))


def check_untyped_properties(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    families = _property_families(spec.input_schema)
    for pointer, node, via in _input_nodes(spec):
        if via not in ("properties", "items", "prefixItems"):
            continue
        family = families.get(id(node), [node]) if via == "properties" else [node]
        if any(_typed(other) for other in family) or family[0] is not node:
            continue  # typed somewhere for this instance, or reported at its first definition
        if node is True or (isinstance(node, Mapping) and not _typed(node)):
            yield Hit("property accepts any JSON value (no type, enum, const or $ref): say what the model must "
                      "send", pointer)


def check_undescribed_properties(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    root = spec.input_schema
    families = _property_families(root)
    for pointer, node, via in _input_nodes(spec):
        family = families.get(id(node), [node])
        if via == "properties" and isinstance(node, Mapping) and family[0] is node \
                and not any(_described(other, root) for other in family):
            yield Hit("input property has no description: the model learns what to put here only from its "
                      "name", pointer)


def check_empty_enum(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for pointer, node, _ in _both_schemas(spec):
        if isinstance(node, Mapping) and node.get("enum") == []:
            yield Hit("enum is empty: no value can ever be valid here", f"{pointer}/enum")


def check_required_undefined(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for pointer, node, _ in _both_schemas(spec):
        if not isinstance(node, Mapping) or not isinstance(node.get("required"), list):
            continue
        properties: Mapping[str, Any] = node["properties"] if isinstance(node.get("properties"), Mapping) else {}
        if node.get("patternProperties") or isinstance(node.get("additionalProperties"), Mapping):
            continue  # a required key may be defined by a pattern or by additionalProperties
        for index, name in enumerate(node["required"]):
            if name not in properties:
                yield Hit(f"required names {name!r}, which is not among the properties: the model cannot know "
                          f"what to send (and with additionalProperties: false nothing is valid)",
                          f"{pointer}/required/{index}")


def _object_depth(node: Any, level: int = 0, guard: int = 0) -> int:
    """How many objects deep `node` nests (the root object is level 1); arrays add no level."""
    if not isinstance(node, Mapping) or guard > 64:
        return level
    here = level + 1 if (_is_object(node) or "properties" in node) else level
    children: list[Any] = []
    if isinstance(node.get("properties"), Mapping):
        children.extend(node["properties"].values())
    for keyword in ("items", "additionalProperties"):
        if isinstance(node.get(keyword), Mapping):
            children.append(node[keyword])
    for keyword in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(node.get(keyword), list):
            children.extend(node[keyword])
    return max([here, *(_object_depth(child, here, guard + 1) for child in children)])


def check_schema_depth(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    maximum = facts.options["max_schema_depth"]
    depth = _object_depth(spec.input_schema)
    if depth > maximum:
        yield Hit(f"input objects nest {depth} levels deep (more than {maximum}): models fill deep structures "
                  f"badly; flatten them or split the tool", "/input_schema")


def _is_object(node: Mapping[str, Any]) -> bool:
    declared = node.get("type")
    return declared == "object" or (isinstance(declared, list) and "object" in declared)


def check_free_form_objects(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for pointer, node, _ in _input_nodes(spec):
        if not isinstance(node, Mapping) or not _is_object(node):
            continue
        if node.get("properties") or node.get("patternProperties") or "$ref" in node:
            continue
        additional = node.get("additionalProperties", True)
        if additional is True or additional == {}:
            if pointer == "/input_schema" and "properties" in node:
                continue  # "properties": {} at the root says "no arguments" (open, but nothing to fill in)
            yield Hit("free-form object: any keys with any values; the model must guess its shape (list the "
                      "properties, or close it with additionalProperties: false)", pointer)


def check_strict_convertible(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    """Judges what `export --strict` sends (`host_schema`: an older dialect converted to 2020-12, what
    that dialect ignores left out) and names the place in the schema as written."""
    try:
        to_strict_schema(host_schema(spec))
    except StrictSchemaError as error:
        keyword, path = strict_refusal_in_original(spec.input_schema, error)
        yield Hit(f"cannot be exported in OpenAI strict mode: {keyword}: {error.reason}", f"/input_schema{path}")
    except ExportSchemaError as error:  # no faithful 2020-12 form at all (the OpenAI export refuses it too)
        yield Hit(f"cannot be exported in OpenAI strict mode: {error.keyword}: {error.reason}",
                  f"/input_schema{error.path}")


def _pattern_findings(spec: Any, *, output: bool = True) -> Iterator[tuple[str, Any]]:
    """("/input_schema" or "/output_schema", PatternFinding) for every regex of the spec's schemas, with
    the verdict of the regex-safety analysis its validators made when they were compiled
    (`Validator.patterns`: the same verdicts that choose each pattern's engine at run time). A ToolSpec
    refuses a pattern with no linear-time guarantee in either schema when it is built, so AL308 finds one
    only in a definition read from a server."""
    for root, validator in (("/input_schema", spec.input_validator),
                            ("/output_schema", spec.output_validator if output else None)):
        for finding in validator.patterns if validator is not None else ():
            yield root, finding


def check_unsafe_patterns(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for root, finding in _pattern_findings(spec):
        if not finding.safety.safe:
            runs_on = "the handler's output, which may echo model text" if root == "/output_schema" else "model input"
            yield Hit(f"{root[1:]} pattern at {finding.pointer} has no linear-time guarantee "
                      f"({finding.safety.reason}): it runs on {runs_on}", f"{root}{finding.pointer}")


def check_backtracking_patterns(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for message, pointer in backtracking_input_patterns(spec):  # the runtime's own check (ToolSpec.warnings)
        yield Hit(message, pointer)


def check_linear_matcher_patterns(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    for root, finding in _pattern_findings(spec, output=False):
        if finding.safety.engine is PatternEngine.LINEAR and not finding.safety.backtracking:
            yield Hit(f"input_schema pattern at {finding.pointer} runs on agent-lab's linear-time matcher, not "
                      f"Python's re ({finding.safety.reason}); it is safe, and anchoring it with ^ usually "
                      f"lets the faster re run it", f"{root}{finding.pointer}")


def check_format_not_asserted(spec: Any, facts: CatalogFacts, host: Optional[str]) -> Iterator[Hit]:
    asserted = getattr(spec, "format_assertion", False) is True
    for pointer, node, _ in _input_nodes(spec):
        if not isinstance(node, Mapping) or not isinstance(node.get("format"), str):
            continue
        name = node["format"]
        if not asserted:
            yield Hit(f"format {name!r} is shown to the model but not checked at run time (the spec sets "
                      f"format_assertion=False): a value like 'next tuesday' reaches the handler", f"{pointer}/format")
        elif name not in FORMAT_CHECKERS:
            yield Hit(f"format {name!r} is not one agent-lab can check (it knows {len(FORMAT_CHECKERS)} formats: "
                      f"date-time, email, uuid, ...), so it is an annotation only: any string reaches the handler; "
                      f"use a pattern or an enum", f"{pointer}/format")
