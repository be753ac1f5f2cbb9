"""Exports of a tool catalog to OpenAI, Anthropic and MCP hosts, and the way back.

Only the model-facing half of a `ToolSpec` (name, title, description, input and output schema) leaves
the process; the runtime half (permissions, approvals, idempotency key, timeouts, budgets, redaction)
never does, except as MCP's documented hints (read-only, destructive, idempotent, open world).

Four differences between hosts are handled here, each in one place:
- dialects: hosts read tool schemas as JSON Schema 2020-12, so a schema written in an older dialect
  (`$schema` draft-07, say, as the TypeScript MCP SDK emits) is converted by
  `agent_lab.schema.convert.to_draft_2020_12` into one that accepts the same arguments, or the export
  raises `ExportSchemaError` naming the tool, the keyword and its JSON Pointer. (The MCP export, whose
  protocol lets a schema declare its own `$schema`, keeps such a schema unchanged instead.)
- names: MCP allows dots and 128 characters, OpenAI and Anthropic only ``[A-Za-z0-9_-]{1,64}``;
  `NameMap` maps a catalog's names reversibly and `from_host` maps a call's name back.
- strictness: OpenAI's strict mode wants every object closed and every property required;
  `to_strict_schema` converts (optional properties become nullable) or raises `StrictSchemaError`
  naming the keyword and its JSON Pointer, and `strip_strict_nulls` turns "null meaning absent" back
  into absent so the original schema still judges the arguments.
- wire shapes: one conversion function per host for tools, calls and results; camelCase only in the
  MCP functions, because MCP's wire format says so.

Parsers never raise, whatever object a host library hands over (a Mapping whose methods raise or
lie, an object whose attributes raise, a recursion bomb): a malformed call becomes a `ToolCall` that
the registry rejects (``invalid_arguments``, or ``tool_not_found`` when no name can be read). Everything a result shows the model comes from `ToolResult.to_model()`,
which is already redacted.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import math
import re
import urllib.parse
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Callable, TypeVar, cast

from .calls import InvalidJSONArguments, ToolCall, ToolResult
from .frozenjson import thaw
from .policy import Actor
from .spec import Effect, ToolSpec

__all__ = [
    "EXPORT_FORMATS",
    "ExportSchemaError",
    "HostBridge",
    "InvalidJSONArguments",
    "NameMap",
    "StrictSchemaError",
    "anthropic_tool",
    "export_catalog",
    "with_deferred_loading",
    "mcp_annotations",
    "mcp_tool",
    "openai_chat_tool",
    "openai_tool",
    "parse_anthropic_call",
    "parse_mcp_call",
    "parse_openai_call",
    "parse_openai_chat_call",
    "render_anthropic_result",
    "render_mcp_result",
    "render_openai_chat_result",
    "render_openai_result",
    "strict_refusal_in_original",
    "strip_strict_nulls",
    "to_strict_schema",
]

EXPORT_FORMATS = ("openai", "openai-chat", "anthropic", "mcp")
STRICT_FORMATS = frozenset({"openai", "openai-chat"})

# OpenAI: "a-z, A-Z, 0-9, underscores and dashes, maximum length 64"; Anthropic: ^[a-zA-Z0-9_-]{1,64}$.
HOST_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
HOST_NAME_MAX_LENGTH = 64
NAME_HASH_LENGTH = 10  # hex digits of sha256 that make a shortened name unique

MAX_ARGUMENTS_CHARS = 1_000_000  # a model-written arguments string longer than this is not parsed
MAX_ARGUMENT_MEMBERS = 100_000  # members read from an arguments object a host hands over already parsed
MAX_SCHEMA_DEPTH = 64  # nesting limit when walking schemas and arguments


# -- names ---------------------------------------------------------------------------------------


class NameMap:
    """A reversible, collision-free mapping between a catalog's tool names and host-legal names.

    Deterministic for a given set of names (the order they come in does not matter): a name that is
    already legal keeps itself; another name has '.' (and any other illegal character) replaced by
    '__'/'_' when that is free and short enough; otherwise a readable prefix plus a hash of the full
    name. Going back is a table lookup, never a decoding, so no mapped name can be mistaken for another.
    """

    def __init__(self, names: Iterable[str]) -> None:
        unique = sorted(set(names))
        self._to_host: dict[str, str] = {}
        taken: set[str] = set()
        for name in unique:
            if HOST_NAME_PATTERN.fullmatch(name):
                self._to_host[name] = name
                taken.add(name)
        for name in unique:
            if name in self._to_host:
                continue
            host = self._host_name_for(name, taken)
            self._to_host[name] = host
            taken.add(host)
        self._from_host = {host: name for name, host in self._to_host.items()}

    @classmethod
    def from_specs(cls, specs: Iterable[ToolSpec]) -> NameMap:
        return cls(spec.name for spec in specs)

    @staticmethod
    def _host_name_for(name: str, taken: set[str]) -> str:
        readable = re.sub(r"[^A-Za-z0-9_-]", "_", name.replace(".", "__")) or "tool"
        if len(readable) <= HOST_NAME_MAX_LENGTH and readable not in taken:
            return readable
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:NAME_HASH_LENGTH]
        hashed = readable[: HOST_NAME_MAX_LENGTH - NAME_HASH_LENGTH - 1] + "_" + digest
        if hashed in taken:  # two names with the same 40-bit hash prefix: refuse rather than guess
            raise ValueError(f"tool name {name!r} cannot be mapped to a unique host name")
        return hashed

    def to_host(self, name: str) -> str:
        """The host-legal name of a catalog tool (KeyError for a name not in the catalog)."""
        try:
            return self._to_host[name]
        except KeyError:
            raise KeyError(f"tool {name!r} is not in this name map") from None

    def from_host(self, host_name: str) -> str:
        """The catalog name behind a host name; an unknown name is returned unchanged, so the
        registry answers tool_not_found for it."""
        return self._from_host.get(host_name, host_name)

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._to_host.items())


# -- strict conversion for OpenAI -----------------------------------------------------------------


class ExportSchemaError(ValueError):
    """A tool's schema cannot be exported to a host without changing what it accepts."""

    def __init__(self, keyword: str, path: str, reason: str, *, tool: str | None = None,
                 schema: str = "input schema") -> None:
        self.keyword = keyword
        self.path = path  # JSON Pointer into the original schema, "" for the root
        self.reason = reason
        self.tool = tool
        self.schema = schema  # "input schema" or "output schema"
        prefix = f"tool {tool!r}: " if tool is not None else ""
        super().__init__(f"{prefix}{schema} at #{path}: {keyword}: {reason}")


class StrictSchemaError(ExportSchemaError):
    """A schema cannot be converted to OpenAI's strict subset without changing what it accepts."""


# Keywords OpenAI's strict mode accepts (its "supported schemas" guide). Everything else is refused,
# except pure annotations, which are dropped, and string lengths, which move into the description.
STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "$ref", "$defs", "definitions", "description", "title", "default",
    "pattern", "format", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems",
})
STRICT_STRING_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
# Annotations that do not change which values are valid: safe to leave out of a strict schema.
DROPPED_ANNOTATIONS = frozenset({"$schema", "$comment", "examples", "deprecated", "readOnly", "writeOnly"})
# Not accepted by strict mode, but only narrowing strings: stated in the description instead. The
# registry still validates the arguments against the original schema, so the limit is still enforced.
LENGTH_KEYWORDS = ("minLength", "maxLength")

_STRICT_REFUSALS: Mapping[str, str] = {
    "oneOf": "strict mode does not support oneOf; use anyOf with disjoint branches",
    "allOf": "strict mode does not support allOf; merge the subschemas",
    "not": "strict mode does not support not",
    "if": "strict mode does not support if/then/else",
    "then": "strict mode does not support if/then/else",
    "else": "strict mode does not support if/then/else",
    "patternProperties": "strict mode objects must list their properties; patternProperties is not supported",
    "propertyNames": "strict mode does not support propertyNames",
    "unevaluatedProperties": "strict mode does not support unevaluatedProperties; use additionalProperties: false",
    "unevaluatedItems": "strict mode does not support unevaluatedItems",
    "dependentRequired": "strict mode does not support dependentRequired",
    "dependentSchemas": "strict mode does not support dependentSchemas",
    "prefixItems": "strict mode does not support tuples (prefixItems); use an object with named properties",
    "contains": "strict mode does not support contains",
    "minContains": "strict mode does not support minContains",
    "maxContains": "strict mode does not support maxContains",
    "uniqueItems": "strict mode does not support uniqueItems",
    "minProperties": "strict mode does not support minProperties",
    "maxProperties": "strict mode does not support maxProperties",
}


def _pointer(path: str, *tokens: object) -> str:
    for token in tokens:
        path += "/" + str(token).replace("~", "~0").replace("/", "~1")
    return path


def _types_of(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    return list(declared) if isinstance(declared, list) else []


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    return "object" in _types_of(schema) or "properties" in schema


def to_strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A new schema in OpenAI's strict subset that accepts the same arguments once `strip_strict_nulls`
    has turned "null meaning absent" back into absent. Never mutates `schema`.

    Every object is closed and lists every property in ``required``; a property that was optional
    becomes nullable. Raises StrictSchemaError (keyword + JSON Pointer) for what cannot be converted.
    """
    if not isinstance(schema, Mapping) or "object" not in _types_of(schema):
        raise StrictSchemaError("type", "", "the root of a strict schema must be an object (\"type\": \"object\")")
    return _strict_node(schema, "", 0)


def _strict_node(node: Any, path: str, depth: int) -> dict[str, Any]:
    if depth > MAX_SCHEMA_DEPTH:
        raise StrictSchemaError("depth", path, f"nested deeper than {MAX_SCHEMA_DEPTH} levels")
    if not isinstance(node, Mapping):
        raise StrictSchemaError("schema", path, "boolean schemas (true/false) are not supported in strict mode")
    _refuse_unsupported(node, path)
    if "$ref" in node and len(node.keys() - DROPPED_ANNOTATIONS) > 1:
        return _wrapped_reference(node, path)
    out: dict[str, Any] = {}
    for keyword, value in node.items():
        if keyword in DROPPED_ANNOTATIONS or keyword in LENGTH_KEYWORDS:
            continue
        # Subschemas are rebuilt below; everything else (enum values, defaults...) is copied.
        out[keyword] = value if keyword in _REBUILT_KEYWORDS else copy.deepcopy(value)
    if "const" in out:
        out["enum"] = [out.pop("const")]  # the same single value, in the form strict mode documents
    _move_lengths_to_description(node, out)
    if _is_object_schema(node):
        _strict_object(node, out, path, depth)
    if "array" in _types_of(node) or "items" in node:
        if "items" not in node:
            raise StrictSchemaError("items", path, "a strict array must say what its items are")
        out["items"] = _strict_node(node["items"], _pointer(path, "items"), depth + 1)
    if "anyOf" in node:
        if not isinstance(node["anyOf"], list):
            raise StrictSchemaError("anyOf", _pointer(path, "anyOf"), "anyOf must be a list of schemas")
        out["anyOf"] = [_strict_node(branch, _pointer(path, "anyOf", index), depth + 1)
                        for index, branch in enumerate(node["anyOf"])]
    for defs in ("$defs", "definitions"):
        if defs in node:
            out[defs] = {name: _strict_node(sub, _pointer(path, defs, name), depth + 1)
                         for name, sub in node[defs].items()}
    return out


_REBUILT_KEYWORDS = frozenset({"properties", "items", "anyOf", "$defs", "definitions"})
# Annotations that may sit beside a reference: they say what the value means, not which values are valid.
_REFERENCE_ANNOTATIONS = frozenset({"description", "title", "default"})


def _wrapped_reference(node: Mapping[str, Any], path: str) -> dict[str, Any]:
    """OpenAI's strict mode refuses any keyword next to "$ref"; an anyOf of that one reference accepts the
    same values and may carry the annotations. Constraints beside a reference are refused, because
    closing or merging them could change which values are valid."""
    constraints = sorted(set(node) - DROPPED_ANNOTATIONS - _REFERENCE_ANNOTATIONS - {"$ref"})
    if constraints:
        raise StrictSchemaError(
            "$ref", _pointer(path, "$ref"),
            f"strict mode allows no keywords next to $ref ({', '.join(constraints)}); "
            "move them into the referenced schema",
        )
    wrapped = {keyword: copy.deepcopy(value) for keyword, value in node.items() if keyword in _REFERENCE_ANNOTATIONS}
    wrapped["anyOf"] = [{"$ref": node["$ref"]}]
    return wrapped


def _refuse_unsupported(node: Mapping[str, Any], path: str) -> None:
    for keyword in node:
        if keyword in STRICT_KEYWORDS or keyword in DROPPED_ANNOTATIONS or keyword in LENGTH_KEYWORDS:
            continue
        reason = _STRICT_REFUSALS.get(keyword, "strict mode does not support this keyword")
        raise StrictSchemaError(keyword, _pointer(path, keyword), reason)
    if "format" in node and node["format"] not in STRICT_STRING_FORMATS:
        supported = ", ".join(sorted(STRICT_STRING_FORMATS))
        raise StrictSchemaError("format", _pointer(path, "format"), f"strict mode supports only the formats {supported}")
    if "const" in node and "enum" in node:
        raise StrictSchemaError("const", _pointer(path, "const"), "use enum or const, not both")
    if isinstance(node.get("$ref"), str) and not node["$ref"].startswith("#"):
        raise StrictSchemaError("$ref", _pointer(path, "$ref"), "only references inside the schema are supported")
    if not any(keyword in node for keyword in ("type", "enum", "const", "anyOf", "$ref")):
        raise StrictSchemaError("type", path, "a strict schema must say its type (this one accepts any value)")


def _move_lengths_to_description(node: Mapping[str, Any], out: dict[str, Any]) -> None:
    low, high = node.get("minLength"), node.get("maxLength")
    if low is None and high is None:
        return
    if low is not None and high is not None:
        sentence = f"Length: {low} to {high} characters."
    elif high is not None:
        sentence = f"Length: at most {high} characters."
    else:
        sentence = f"Length: at least {low} characters."
    description = out.get("description")
    out["description"] = f"{description} {sentence}" if description else sentence


def _strict_object(node: Mapping[str, Any], out: dict[str, Any], path: str, depth: int) -> None:
    properties = node.get("properties") or {}
    additional = node.get("additionalProperties", None)
    # An object that lists its properties (even none, as a tool without arguments does) is closed over
    # exactly those; one that lists none and says nothing else is a map of any keys, which cannot be
    # strict, except at the root: the arguments of a tool that takes none.
    if additional is None and not properties and "properties" not in node and path != "":
        raise StrictSchemaError(
            "properties", path, "a free-form object cannot be strict: list its properties (or use an array of pairs)"
        )
    if "additionalProperties" in node and additional is not False:
        raise StrictSchemaError(
            "additionalProperties", _pointer(path, "additionalProperties"),
            "strict mode needs additionalProperties: false (a map of arbitrary keys cannot be strict)",
        )
    required = set(node.get("required") or ())
    undefined = sorted(required - set(properties))
    if undefined:
        raise StrictSchemaError(
            "required", _pointer(path, "required"),
            f"required names properties that are not listed ({', '.join(undefined)}); list them under properties",
        )
    strict_properties = {}
    for name, sub in properties.items():
        converted = _strict_node(sub, _pointer(path, "properties", name), depth + 1)
        strict_properties[name] = converted if name in required else _nullable(converted)
    out["properties"] = strict_properties
    out["required"] = list(properties)
    out["additionalProperties"] = False


def _accepts_null(schema: Any) -> bool:
    """Whether a schema (without following $ref) accepts null."""
    if not isinstance(schema, Mapping):
        return schema is True
    if "anyOf" in schema:
        return any(_accepts_null(branch) for branch in schema["anyOf"])
    if "const" in schema:
        return schema["const"] is None
    if "enum" in schema:
        return None in schema["enum"]
    if "$ref" in schema:
        return False
    return "null" in _types_of(schema)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema also accepting null (the strict-mode spelling of "may be left out")."""
    if _accepts_null(schema):
        return schema
    if "$ref" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    result = dict(schema)
    if "anyOf" in schema:
        result["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        return result
    if "enum" in schema:
        result["enum"] = [*schema["enum"], None]
    if "type" in schema and "null" not in _types_of(schema):
        result["type"] = [*_types_of(schema), "null"]
    return result


def strip_strict_nulls(arguments: Any, original_schema: Mapping[str, Any]) -> Any:
    """Arguments from a strict-mode host with "null meaning absent" turned back into absent.

    A property that the original schema does not require and whose original subschema does not accept
    null is dropped when its value is null; everything else is kept as sent, so the registry's schema
    step still judges the arguments against the original schema. Never mutates `arguments`.
    """
    return _NullStripper(original_schema).strip(arguments, original_schema, "", 0)


_STRIP_ROOT_URI = "urn:agent-lab:strip-strict-nulls"  # names the original schema for branch checks


class _NullStripper:
    """Walks arguments beside the original schema, keeping the JSON Pointer of each schema it is at.

    Where an anyOf leaves open which branch an object or array was written for, it tries the branches,
    likeliest first, and keeps the first stripped value that branch of the original schema accepts.
    Each part of the arguments is stripped once per schema node it meets (`_stripped`): branches that
    share a subschema (a recursive `$ref`) would otherwise strip the same subtree again for every
    branch tried above it, 2**depth times for a tree of two-way anyOfs (311 characters of strict-valid
    arguments took 94 s), all before the call reaches the registry and its deadline.
    """

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._validators: dict[str, Any] = {}
        # (id of a part of the arguments, schema pointer, depth) -> (that part, stripped). The part is kept
        # so that its id is never another's during the walk: arguments that are not decoded JSON (a list
        # whose iteration makes its items anew) would free one part and hand its id to the next.
        self._stripped: dict[tuple[int, str, int], tuple[Any, Any]] = {}

    def resolve(self, schema: Any, pointer: str) -> tuple[Any, str]:
        """Follow local $ref chains ("#/..."), a bounded number of times."""
        for _ in range(MAX_SCHEMA_DEPTH):
            if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
                break
            reference = schema["$ref"]
            fragment = urllib.parse.unquote(reference[1:])  # a URI fragment: percent-encoded, as the validator reads it
            if not reference.startswith("#") or fragment[:1] not in ("", "/"):
                break  # another document, or a plain-name anchor: left to the registry's validator
            target: Any = self.root
            for token in fragment.split("/")[1:]:  # every token, the empty one too (a property named "")
                token = token.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or token not in target:
                    return schema, pointer
                target = target[token]
            schema, pointer = target, reference[1:]
        return schema, pointer

    def strip(self, value: Any, schema: Any, pointer: str, depth: int) -> Any:
        schema, pointer = self.resolve(schema, pointer)
        if depth > MAX_SCHEMA_DEPTH or not isinstance(schema, Mapping) or not isinstance(value, (dict, list)):
            return value
        key = (id(value), pointer, depth)
        if key not in self._stripped:
            self._stripped[key] = (value, self._strip_container(value, schema, pointer, depth))
        return self._stripped[key][1]

    def _strip_container(self, value: Any, schema: Mapping[str, Any], pointer: str, depth: int) -> Any:
        if isinstance(value, dict):
            if isinstance(schema.get("properties"), Mapping):
                return self.strip_object(value, schema, pointer, depth)
            return self.strip_by_branch(value, self.object_branches(value, schema, pointer), depth)
        if isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, Mapping):
                return [self.strip(item, items, _pointer(pointer, "items"), depth + 1) for item in value]
            arrays = [(branch, at) for branch, at in self.branches(schema, pointer, 0)
                      if isinstance(branch, Mapping) and "items" in branch]
            return self.strip_by_branch(value, arrays, depth)
        return value

    def strip_object(self, value: dict[str, Any], schema: Mapping[str, Any], pointer: str, depth: int) -> dict[str, Any]:
        properties = schema["properties"]
        required = set(schema.get("required") or ())
        stripped = {}
        for name, item in value.items():
            sub = properties.get(name)
            if sub is None:
                stripped[name] = item
            elif item is None and name not in required and not _accepts_null(self.resolve(sub, "")[0]):
                continue  # null was the strict-mode spelling of "left out"
            else:
                stripped[name] = self.strip(item, sub, _pointer(pointer, "properties", name), depth + 1)
        return stripped

    def branches(self, schema: Mapping[str, Any], pointer: str, depth: int) -> list[tuple[Any, str]]:
        """The alternatives of an anyOf with their pointers, references followed and nested anyOfs
        flattened (bounded)."""
        found: list[tuple[Any, str]] = []
        for index, branch in enumerate(schema.get("anyOf") or ()):
            branch, at = self.resolve(branch, _pointer(pointer, "anyOf", index))
            if isinstance(branch, Mapping) and "anyOf" in branch and depth < MAX_SCHEMA_DEPTH:
                found.extend(self.branches(branch, at, depth + 1))
            else:
                found.append((branch, at))
        return found

    def object_branches(self, value: Mapping[str, Any], schema: Mapping[str, Any], pointer: str) -> list[tuple[Any, str]]:
        """The object branches that name all of the value's keys, likeliest first: strict mode sends every
        property of the chosen branch, so one naming exactly the value's keys and able to read each of
        its nulls (the property accepts null or may be left out) comes first."""
        keys = set(value)
        fitting = [(branch, at) for branch, at in self.branches(schema, pointer, 0)
                   if isinstance(branch, Mapping) and _is_object_schema(branch)
                   and keys <= set(branch.get("properties") or ())]

        def rank(candidate: tuple[Any, str]) -> tuple[bool, bool]:
            branch = candidate[0]
            return keys == set(branch.get("properties") or ()), self.reads_its_nulls(value, branch)

        return sorted(fitting, key=rank, reverse=True)  # stable: equally likely branches keep their order

    def reads_its_nulls(self, value: Mapping[str, Any], branch: Mapping[str, Any]) -> bool:
        properties = branch.get("properties") or {}
        required = set(branch.get("required") or ())
        return all(
            item is not None or name not in required or _accepts_null(self.resolve(properties.get(name), "")[0])
            for name, item in value.items()
        )

    def strip_by_branch(self, value: Any, candidates: list[tuple[Any, str]], depth: int) -> Any:
        """The value stripped for the first candidate branch that accepts the result; unchanged when none
        does (the registry's schema step then says what is wrong)."""
        for branch, at in candidates:
            stripped = self.strip(value, branch, at, depth + 1)
            if self.accepts(at, stripped):
                return stripped
        return value

    def accepts(self, pointer: str, value: Any) -> bool:
        """Whether the original schema's node at `pointer` accepts `value` (compiled once per call)."""
        from .schema import Validator

        validator = self._validators.get(pointer)
        if validator is None:
            reference = _STRIP_ROOT_URI + "#" + urllib.parse.quote(pointer, safe="/~$!&'()*+,;=:@")
            try:
                validator = Validator({"$ref": reference}, resources={_STRIP_ROOT_URI: self.root})
            except ValueError:  # a node our validator cannot compile on its own: take the likeliest branch
                return True
            self._validators[pointer] = validator
        return bool(validator.is_valid(value))


# -- tool exports: one function per host ------------------------------------------------------------


def _host_name(spec: ToolSpec, names: NameMap | None) -> str:
    return (names or NameMap([spec.name])).to_host(spec.name)


def host_schema(spec: ToolSpec, which: str = "input_schema") -> dict[str, Any]:
    """The spec's input (or output) schema as hosts read it: JSON Schema 2020-12, converted from an older
    dialect when it declares one (a new object; the spec's own schema is untouched). A tool's arguments
    always list their properties, `{}` for a tool that takes none (some hosts refuse an object schema
    without `properties`). Raises ExportSchemaError for what has no faithful 2020-12 form."""
    from .schema.convert import SchemaConversionError, to_draft_2020_12

    schema = getattr(spec, which)  # read-only; the conversion below returns a new, plain schema
    try:
        converted: dict[str, Any] = to_draft_2020_12(schema)
    except SchemaConversionError as exc:
        raise ExportSchemaError(exc.keyword, exc.path, f"no faithful JSON Schema 2020-12 form: {exc.reason}",
                                tool=spec.name, schema=which.replace("_", " ")) from None
    if which == "input_schema" and "properties" not in converted:
        converted["properties"] = {}
    return converted


def _parameters(spec: ToolSpec, strict: bool) -> dict[str, Any]:
    schema = host_schema(spec)
    if not strict:
        return schema
    try:
        return to_strict_schema(schema)
    except StrictSchemaError as exc:
        keyword, path = strict_refusal_in_original(spec.input_schema, exc)
        raise StrictSchemaError(keyword, path, exc.reason, tool=spec.name) from None


def strict_refusal_in_original(schema: Mapping[str, Any], refusal: StrictSchemaError) -> tuple[str, str]:
    """(keyword, JSON Pointer) of a strict-mode refusal of `host_schema(...)`, read back into `schema` as
    its author wrote it: an older dialect's converted keywords (`dependentRequired`, `prefixItems`,
    `$defs`) are named by the keywords they came from (`dependencies`, `items`, `definitions`)."""
    from .schema.convert import original_pointer

    path = original_pointer(schema, refusal.path)
    keyword = refusal.keyword
    if path != refusal.path and refusal.path.rsplit("/", 1)[-1] == keyword:
        keyword = path.rsplit("/", 1)[-1]
    return keyword, path


def openai_tool(spec: ToolSpec, *, names: NameMap | None = None, strict: bool = False) -> dict[str, Any]:
    """An OpenAI Responses API function tool: {"type", "name", "description", "parameters", "strict"}."""
    return {
        "type": "function",
        "name": _host_name(spec, names),
        "description": spec.description,
        "parameters": _parameters(spec, strict),
        "strict": strict,
    }


def openai_chat_tool(spec: ToolSpec, *, names: NameMap | None = None, strict: bool = False) -> dict[str, Any]:
    """A Chat Completions tool: {"type": "function", "function": {"name", "description", "parameters", "strict"}}."""
    function: dict[str, Any] = {
        "name": _host_name(spec, names),
        "description": spec.description,
        "parameters": _parameters(spec, strict),
    }
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def anthropic_tool(spec: ToolSpec, *, names: NameMap | None = None) -> dict[str, Any]:
    """An Anthropic Messages API tool: {"name", "description", "input_schema"}."""
    return {"name": _host_name(spec, names), "description": spec.description, "input_schema": _parameters(spec, False)}


def mcp_annotations(spec: ToolSpec) -> dict[str, Any]:
    """MCP ToolAnnotations derived from the runtime contract (hints for hosts, never a guarantee).

    Every hint is stated, because MCP's defaults are the cautious ones (not read-only, destructive,
    not idempotent, open world). A write is idempotent when the registry deduplicates it by key.
    """
    hints: dict[str, Any] = {}
    if spec.title is not None:
        hints["title"] = spec.title
    hints["readOnlyHint"] = spec.effect is Effect.READ
    hints["destructiveHint"] = spec.effect is Effect.DESTRUCTIVE
    hints["idempotentHint"] = spec.effect is Effect.READ or spec.idempotency_key is not None
    hints["openWorldHint"] = spec.open_world
    return hints


def _mcp_schema(spec: ToolSpec, which: str) -> dict[str, Any]:
    """MCP reads a schema without `$schema` as 2020-12 and lets a schema declare another dialect: an
    older schema is converted when that is faithful, and otherwise kept as it is, `$schema` and all."""
    try:
        return host_schema(spec, which)
    except ExportSchemaError:
        return thaw(getattr(spec, which))


class _NotRedactionTolerant(Exception):
    """The schema has a keyword for which accepting more at a redacted field could accept less overall."""


# Keywords under which widening a subschema can narrow what the whole schema accepts (or, for
# patternProperties, where a redacted name may be checked by a pattern we do not evaluate here).
_NARROWING_KEYWORDS = frozenset({"not", "if", "oneOf", "patternProperties", "maxContains"})
_NOT_SCHEMAS = frozenset({"default", "examples", "description", "title", "$comment"})


def redaction_tolerant_schema(schema: Any, redact: Collection[str]) -> Any:
    """`schema` accepting any value at a member named in `redact` (wherever it is checked), so the
    redacted view of an output that fits `schema` fits the result; None when that cannot be promised
    (a keyword under which accepting more could accept less: not, if, oneOf, uniqueItems, ...)."""
    names = frozenset(redact)
    if not names:
        return schema

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _NARROWING_KEYWORDS or (key == "uniqueItems" and value is True):
                raise _NotRedactionTolerant(key)  # masked values can make distinct items equal, ...
            if key in ("enum", "const"):
                values = value if key == "enum" and isinstance(value, list) else [value]
                if any(isinstance(item, (dict, list)) for item in values):
                    raise _NotRedactionTolerant(key)
                out[key] = value
            elif key in _NOT_SCHEMAS:
                out[key] = value
            else:
                out[key] = walk(value)
        properties = out.get("properties")
        extra = [out.get(keyword) for keyword in ("additionalProperties", "unevaluatedProperties")]
        checks_extra = any(isinstance(item, dict) for item in extra)
        if isinstance(properties, dict) or checks_extra:
            widened = dict(properties) if isinstance(properties, dict) else {}
            for name in sorted(names):
                if name in widened or checks_extra:
                    was = widened.get(name)  # keep what it says about the field, drop what it checks
                    widened[name] = {key: was[key] for key in ("title", "description")
                                     if isinstance(was, dict) and key in was}
            out["properties"] = widened
        return out

    try:
        return walk(schema)
    except (_NotRedactionTolerant, RecursionError):
        return None


def mcp_tool(spec: ToolSpec) -> dict[str, Any]:
    """An MCP Tool (wire form, camelCase). MCP allows dotted names, so the name is unchanged.

    outputSchema is advertised only for object schemas, since MCP's structuredContent is an object.
    structuredContent is the redacted view of the output, so for a tool with redacted fields the
    advertised outputSchema accepts any value at those fields (clients check structuredContent
    against it; "[redacted]" in place of a 4-digit PIN broke a pattern), and it is left out when
    the schema cannot be widened that way without narrowing it elsewhere.
    """
    tool: dict[str, Any] = {"name": spec.name}
    if spec.title is not None:
        tool["title"] = spec.title
    tool["description"] = spec.description
    tool["inputSchema"] = _mcp_schema(spec, "input_schema")
    output_schema = _mcp_schema(spec, "output_schema") if spec.output_schema is not None else None
    if spec.redact and output_schema is not None:
        output_schema = redaction_tolerant_schema(output_schema, spec.redact)
    if isinstance(output_schema, Mapping) and output_schema.get("type") == "object":
        tool["outputSchema"] = output_schema
    tool["annotations"] = mcp_annotations(spec)
    task_support = getattr(spec, "task_support", None)
    if task_support is not None and task_support.value != "forbidden":  # absent means forbidden (MCP 2025-11-25)
        tool["execution"] = {"taskSupport": task_support.value}
    return tool


def _specs_of(catalog: Any, actor: Actor | None = None) -> list[ToolSpec]:
    """A list of specs from a list of ToolSpec or from anything with names() and spec(name) (a Registry);
    with an actor, only the tools it holds the permission for (a host should not offer the others)."""
    if hasattr(catalog, "names") and hasattr(catalog, "spec"):
        specs = [catalog.spec(name) for name in catalog.names()]
    else:
        specs = list(catalog)
    if actor is not None:
        specs = [spec for spec in specs if actor.may(spec.required_permission)]
    return specs


def export_catalog(catalog: Any, fmt: str, *, strict: bool = False, actor: Actor | None = None,
                   deferred: Any = None, namespaces: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The catalog (ToolSpecs or a Registry) as one host's list of tools.

    `fmt` is one of EXPORT_FORMATS; `strict` applies to the OpenAI formats only and raises
    StrictSchemaError (with the tool, keyword and path) for a schema that cannot be made strict.
    Schemas in older dialects are converted to 2020-12 (see `host_schema`); one that has no faithful
    2020-12 form raises ExportSchemaError for the OpenAI and Anthropic formats and is kept as it is
    (with its `$schema`) for MCP.
    With `actor`, only the tools that actor may call are exported. `deferred` (True, or tool names) and
    `namespaces` mark tools for the hosts' own tool search; see `with_deferred_loading`.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
    if strict and fmt not in STRICT_FORMATS:
        raise ValueError(f"strict export is OpenAI's strict mode; it does not apply to {fmt!r}")
    specs = _specs_of(catalog, actor)
    names = NameMap.from_specs(specs)
    if fmt == "openai":
        tools = [openai_tool(spec, names=names, strict=strict) for spec in specs]
    elif fmt == "openai-chat":
        tools = [openai_chat_tool(spec, names=names, strict=strict) for spec in specs]
    elif fmt == "anthropic":
        tools = [anthropic_tool(spec, names=names) for spec in specs]
    else:
        tools = [mcp_tool(spec) for spec in specs]
    if deferred is None and namespaces is None:
        return tools
    return with_deferred_loading(specs, tools, fmt, deferred=deferred, namespaces=namespaces)


# -- deferred loading: the hosts' own tool search -----------------------------------------------------

DEFERRED_FORMATS = ("openai", "anthropic")
OPENAI_TOOL_SEARCH: Mapping[str, Any] = {"type": "tool_search"}
ANTHROPIC_TOOL_SEARCH: Mapping[str, Any] = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}


def with_deferred_loading(specs: list[ToolSpec], tools: list[dict[str, Any]], fmt: str, *, deferred: Any = None,
                          namespaces: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """`tools` (one host's export of `specs`, in order) with the deferred ones marked for the host's
    tool search, as the hosts document it:

    - OpenAI Responses API: `"defer_loading": true` on each deferred function, a `{"type": "tool_search"}`
      tool added, and with `namespaces` ({name: description}) the tools named `<namespace>.<tool>` grouped
      in `{"type": "namespace", "name", "description", "tools": [...]}` (defer_loading stays on the
      functions inside, as OpenAI asks).
    - Anthropic Messages API: `"defer_loading": true` on each deferred tool and the BM25 tool search
      tool `{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}` added.

    Chat Completions and MCP document no deferred loading: a ValueError says so (expose the
    `search_tools` meta-tool of `agent_lab.search` there instead). Returns new dicts; `tools` is unchanged.
    """
    if fmt not in DEFERRED_FORMATS:
        raise ValueError(f"deferred loading is documented for OpenAI's Responses API and Anthropic's tool search, not "
                         f"for {fmt!r}; register agent_lab.search.search_tool there instead")
    if namespaces is not None and fmt != "openai":
        raise ValueError("namespaces are an OpenAI Responses API feature")
    catalog_names = [spec.name for spec in specs]
    wanted = set(catalog_names) if deferred is True else set(deferred or ())
    unknown = sorted(wanted - set(catalog_names))
    if unknown:
        raise ValueError(f"deferred names a tool that is not in the catalog: {unknown[0]!r}")
    marked = [{**tool, "defer_loading": True} if name in wanted else dict(tool)
              for name, tool in zip(catalog_names, tools)]
    if namespaces:
        marked = _grouped_in_namespaces(catalog_names, marked, namespaces)
    if wanted:
        marked.append(dict(OPENAI_TOOL_SEARCH if fmt == "openai" else ANTHROPIC_TOOL_SEARCH))
    return marked


def _grouped_in_namespaces(catalog_names: list[str], tools: list[dict[str, Any]],
                           namespaces: Mapping[str, str]) -> list[dict[str, Any]]:
    grouped: dict[str, dict[str, Any]] = {}
    result: list[dict[str, Any]] = []
    for namespace, description in namespaces.items():
        if not HOST_NAME_PATTERN.fullmatch(namespace) or not isinstance(description, str) or not description.strip():
            raise ValueError(f"namespace {namespace!r} needs a host-legal name and a description")
    for name, tool in zip(catalog_names, tools):
        namespace = name.split(".", 1)[0] if "." in name else ""
        if namespace in namespaces:
            if namespace not in grouped:
                grouped[namespace] = {"type": "namespace", "name": namespace, "description": namespaces[namespace],
                                      "tools": []}
                result.append(grouped[namespace])
            grouped[namespace]["tools"].append(tool)
        else:
            result.append(tool)
    return result


# -- parsing the hosts' tool calls --------------------------------------------------------------------


_PROCESS_EXITS = (KeyboardInterrupt, SystemExit)  # they stop the process on purpose: never swallowed


def _field(item: Any, name: str) -> Any:
    """A field of a host payload given as a dict or as an SDK object; None when it cannot be read
    (parsers never raise, whatever a host library hands over)."""
    try:
        if isinstance(item, Mapping):
            return item.get(name)
        return getattr(item, name, None)
    except _PROCESS_EXITS:
        raise
    except BaseException:  # noqa: BLE001 - an unreadable field is an absent one
        return None


def _plain_mapping(arguments: Any) -> Any:
    """A shallow dict copy of arguments a host handed over already parsed (a Mapping), read once:
    a dict from its own storage, another Mapping through `keys()` and `[]` but at most
    `MAX_ARGUMENT_MEMBERS` members (its keys() may never end). Unreadable: InvalidJSONArguments."""
    try:
        if isinstance(arguments, dict):
            return dict(dict.items(arguments))
        copy: dict[Any, Any] = {}
        for key in itertools.islice(arguments.keys(), MAX_ARGUMENT_MEMBERS + 1):
            if len(copy) == MAX_ARGUMENT_MEMBERS:
                return InvalidJSONArguments(f"the arguments have more than {MAX_ARGUMENT_MEMBERS} members")
            copy[key] = arguments[key]
        return copy
    except _PROCESS_EXITS:
        raise
    except BaseException:  # noqa: BLE001 - a Mapping that raises or lies
        return InvalidJSONArguments("the arguments object could not be read")


_PASSED_AS_SENT = frozenset((str, int, float, bool, type(None), list))


def _arguments_object(value: Any) -> Any:
    """Arguments a host handed over already parsed: a Mapping is copied (`_plain_mapping`); a plain
    JSON value is passed on for the registry's schema step to judge; any other object (an SDK model,
    something whose `__class__` raises) is InvalidJSONArguments, never handed to the registry."""
    if type(value) in _PASSED_AS_SENT:
        return value
    if _is_mapping(value):
        return _plain_mapping(value)
    return InvalidJSONArguments("the arguments are not a JSON object")


def _is_mapping(value: Any) -> bool:
    try:
        return isinstance(value, Mapping)
    except _PROCESS_EXITS:
        raise
    except BaseException:  # noqa: BLE001 - a __class__ that raises: not something we can read
        return False


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed in JSON")


def _finite_float(digits: str) -> float:
    number = float(digits)
    if not math.isfinite(number):  # 1e400: JSON text, but it reads as Infinity, which JSON has not
        raise ValueError("a number is too large to read")
    return number


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError("an object repeats a key, so its meaning is ambiguous")
        result[key] = value
    return result


def _decode_arguments(text: Any) -> Any:
    """Parse a host's JSON arguments string; anything unreadable becomes InvalidJSONArguments."""
    if _is_mapping(text):
        return _plain_mapping(text)  # some SDKs hand over parsed arguments already
    if not isinstance(text, str):
        return InvalidJSONArguments("the arguments are not a JSON string")
    text = str.__str__(text)  # its own text: a str subclass could override len, startswith, ...
    if len(text) > MAX_ARGUMENTS_CHARS:
        return InvalidJSONArguments(f"the arguments are longer than {MAX_ARGUMENTS_CHARS} characters")
    if not text.strip():  # how some hosts send a call without arguments: none, so the schema judges {}
        return {}
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                          object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        return InvalidJSONArguments(
            f"the arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", exc.pos
        )
    except RecursionError:
        return InvalidJSONArguments("the arguments are nested too deeply to read")
    except ValueError as exc:  # NaN/Infinity or a repeated key (our messages: no argument text)
        return InvalidJSONArguments(f"the arguments are not valid JSON: {exc}")
    except _PROCESS_EXITS:
        raise
    except BaseException:  # noqa: BLE001 - e.g. MemoryError: still an answer, never a raise
        return InvalidJSONArguments("the arguments could not be read")


def _call_name(raw: Any, names: NameMap | None) -> str:
    if not isinstance(raw, str):
        return ""  # no usable name: the registry answers tool_not_found
    name = str.__str__(raw)  # plain text: a str subclass could hash or compare like another name
    return names.from_host(name) if names is not None else name


def _call_id(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    plain = str.__str__(raw)
    return plain if plain else None


_Parser = TypeVar("_Parser", bound=Callable[..., ToolCall])


def _never_raises(parse: _Parser) -> _Parser:
    """The last line of defence of a parser: anything that still escapes (a hostile object finding a
    path the field readers do not cover) becomes a call with no name and unreadable arguments."""

    @functools.wraps(parse)
    def guarded(payload: Any, **options: Any) -> ToolCall:
        try:
            return parse(payload, **options)
        except _PROCESS_EXITS:
            raise
        except BaseException:  # noqa: BLE001
            return ToolCall(name="", arguments=InvalidJSONArguments("the tool call could not be read"),
                            call_id=_call_id(options.get("call_id")))

    return cast(_Parser, guarded)


@_never_raises
def parse_openai_call(item: Any, *, names: NameMap | None = None) -> ToolCall:
    """A Responses API ``function_call`` item ({"type", "name", "arguments": JSON text, "call_id"})."""
    return ToolCall(
        name=_call_name(_field(item, "name"), names),
        arguments=_decode_arguments(_field(item, "arguments")),
        call_id=_call_id(_field(item, "call_id")),
    )


@_never_raises
def parse_openai_chat_call(tool_call: Any, *, names: NameMap | None = None) -> ToolCall:
    """A Chat Completions ``tool_calls`` entry ({"id", "type": "function", "function": {"name", "arguments"}})."""
    function = _field(tool_call, "function")
    return ToolCall(
        name=_call_name(_field(function, "name") if function is not None else None, names),
        arguments=_decode_arguments(_field(function, "arguments") if function is not None else None),
        call_id=_call_id(_field(tool_call, "id")),
    )


@_never_raises
def parse_anthropic_call(block: Any, *, names: NameMap | None = None) -> ToolCall:
    """An Anthropic ``tool_use`` content block ({"type": "tool_use", "id", "name", "input": object})."""
    arguments = _field(block, "input")
    return ToolCall(
        name=_call_name(_field(block, "name"), names),
        arguments=_arguments_object(arguments),
        call_id=_call_id(_field(block, "id")),
    )


@_never_raises
def parse_mcp_call(params: Any, *, call_id: str | None = None) -> ToolCall:
    """MCP ``tools/call`` params ({"name", "arguments"}); absent arguments mean an empty object."""
    arguments = _field(params, "arguments")
    if arguments is None:
        arguments = {}
    return ToolCall(
        name=_call_name(_field(params, "name"), None),
        arguments=_arguments_object(arguments),
        call_id=call_id,
    )


# -- rendering results for the hosts ---------------------------------------------------------------------


def _not_json(value: Any) -> str:
    return "[not JSON]"  # never str(value): it could hold anything


def _model_text(result: ToolResult) -> str:
    """Compact JSON of what the model may see (already redacted by the result)."""
    return _compact_json(result.to_model())


def _compact_json(value: Any) -> str:
    """Compact JSON text that encodes as UTF-8: readable non-ASCII as is, but \\u escapes when a string
    holds an unpaired surrogate (a model can write one in its arguments and a tool can echo it), which
    would make the host SDK fail while encoding the next request."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_not_json)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True, default=_not_json)
    return text


def _required_call_id(result: ToolResult, call_id: str | None, host: str) -> str:
    resolved = call_id if call_id is not None else result.call_id
    if not resolved:
        raise ValueError(f"a {host} tool result needs the call id of the call it answers")
    return resolved


def render_openai_result(result: ToolResult, *, call_id: str | None = None) -> dict[str, Any]:
    """A Responses API ``function_call_output`` input item."""
    return {
        "type": "function_call_output",
        "call_id": _required_call_id(result, call_id, "OpenAI"),
        "output": _model_text(result),
    }


def render_openai_chat_result(result: ToolResult, *, call_id: str | None = None) -> dict[str, Any]:
    """A Chat Completions ``tool`` message."""
    return {"role": "tool", "tool_call_id": _required_call_id(result, call_id, "OpenAI"), "content": _model_text(result)}


def render_anthropic_result(result: ToolResult, *, call_id: str | None = None) -> dict[str, Any]:
    """An Anthropic ``tool_result`` content block (goes in the next user message)."""
    return {
        "type": "tool_result",
        "tool_use_id": _required_call_id(result, call_id, "Anthropic"),
        "content": _model_text(result),
        "is_error": not result.ok,
    }


def render_mcp_result(result: ToolResult) -> dict[str, Any]:
    """An MCP CallToolResult (wire form): text content, structuredContent and isError.

    A success whose output is an object carries it as structuredContent, and the text block carries
    the same object serialized, as the MCP spec asks of tools that return structured content. Every
    other result (an output that is not an object, or an error) has no structuredContent and its text
    is the compact JSON of `to_model()`: an error view would break the tool's advertised outputSchema,
    and the official TypeScript client checks structuredContent against it even when isError is true,
    so the model would see the client's exception instead of our structured error.
    """
    view = result.to_model()
    output = view.get("output")
    if result.ok and isinstance(output, Mapping):
        return {"content": [{"type": "text", "text": _compact_json(output)}], "structuredContent": output,
                "isError": False}
    return {"content": [{"type": "text", "text": _compact_json(view)}], "isError": not result.ok}


# -- one catalog, one host ---------------------------------------------------------------------------


class HostBridge:
    """One catalog as one host sees it: its tools, and its calls mapped back to our names and schemas.

    Keeps the NameMap and, for OpenAI strict mode, the original input schemas, so a parsed call has
    the catalog's tool name and "null meaning absent" is undone before the registry validates it::

        bridge = HostBridge(registry, "openai", strict=True)
        tools = bridge.tools()
        call = bridge.parse_call(item)          # -> ToolCall for registry.invoke
        reply = bridge.render_result(result)    # -> the host's tool-result message
    """

    def __init__(self, catalog: Any, fmt: str, *, strict: bool = False, actor: Actor | None = None) -> None:
        if fmt not in EXPORT_FORMATS:
            raise ValueError(f"unknown host format {fmt!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
        if strict and fmt not in STRICT_FORMATS:
            raise ValueError(f"strict mode applies to the OpenAI formats, not {fmt!r}")
        self.format = fmt
        self.strict = strict
        self._specs = _specs_of(catalog, actor)
        self.names = NameMap.from_specs(self._specs)
        self._input_schemas = {spec.name: spec.input_schema for spec in self._specs}

    def tools(self) -> list[dict[str, Any]]:
        return export_catalog(self._specs, self.format, strict=self.strict)

    def parse_call(self, payload: Any) -> ToolCall:
        """The host's call payload as a ToolCall (never raises)."""
        if self.format == "openai":
            call = parse_openai_call(payload, names=self.names)
        elif self.format == "openai-chat":
            call = parse_openai_chat_call(payload, names=self.names)
        elif self.format == "anthropic":
            call = parse_anthropic_call(payload, names=self.names)
        else:
            call = parse_mcp_call(payload)
        schema = self._input_schemas.get(call.name)
        if self.strict and schema is not None and isinstance(call.arguments, dict):
            try:
                call = ToolCall(call.name, strip_strict_nulls(call.arguments, schema), call.call_id)
            except _PROCESS_EXITS:
                raise
            except BaseException:  # noqa: BLE001 - values it cannot walk: the registry judges them as sent
                pass
        return call

    def render_result(self, result: ToolResult, *, call_id: str | None = None) -> dict[str, Any]:
        if self.format == "openai":
            return render_openai_result(result, call_id=call_id)
        if self.format == "openai-chat":
            return render_openai_chat_result(result, call_id=call_id)
        if self.format == "anthropic":
            return render_anthropic_result(result, call_id=call_id)
        return render_mcp_result(result)

