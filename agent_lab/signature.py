"""Tools from plain Python functions: `@tool`, `spec_from_function` and the constraint markers.

Users arrive with typed functions. This module reads a function's signature, type hints and docstring
and builds the JSON Schema 2020-12 input schema of its `ToolSpec` with the standard library only, in
numbered steps (see `input_schema_from_function`). Anything the schema cannot say exactly (``Any``,
``bytes``, ``set``, callables, ``*args``...) is refused when the function is decorated, with a
`TypeError` naming the function and the parameter: a tool whose schema lies is worse than no tool.

The types people use beyond JSON's own (datetime, date, time, UUID, Decimal, enums, tuples,
dataclasses, TypedDicts, pydantic models) each have one JSON form, decided in `agent_lab.jsonforms`:
the schema built here, the output the registry writes and the parameter a handler receives agree.
pydantic is read by duck typing and never imported.

The registry calls a handler as ``handler(arguments)`` or ``handler(arguments, ctx)``; `handler_for`
turns the function into such a handler that maps the validated arguments dict to keyword arguments
and rebuilds the Python values the annotations ask for (only for the parameters that need it). What a
Python type refuses although the schema let it in (a model validator, a leap second) is a
ToolFailure("invalid_arguments") with JSON Pointers, raised before the function runs.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import math
import re
import types
import typing
from collections import abc
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .context import CallContext
from .errors import ToolFailure
from .jsonforms import (
    NO_FORM,
    NoPythonForm,
    PydanticSchemaError,
    from_json,
    is_pydantic_model,
    json_form,
    pydantic_schema,
    pydantic_violations,
    quoted_field,
    schema_for_type,
)
from .schema.ecma_regex import EcmaRegexError, EcmaRegexUnsupported, compile_ecma

__all__ = [
    "Describe",
    "Len",
    "Pattern",
    "Range",
    "handler_for",
    "input_schema_from_function",
    "output_schema_for_annotation",
    "spec_from_function",
    "to_json",
    "tool",
]

CONTEXT_PARAMETER_NAME = "ctx"  # a parameter with this name is injected by the registry, never exposed


# -- constraint markers (used inside typing.Annotated) ------------------------------------------


def _check_bound(value: Any, what: str, *, integral: bool) -> None:
    wanted = int if integral else (int, float)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, wanted) or not math.isfinite(value):
        kind = "an integer" if integral else "a finite number"
        raise ValueError(f"{what} must be {kind} or None")
    if integral and value < 0:
        raise ValueError(f"{what} must not be negative")


@dataclass(frozen=True)
class Len:
    """Length bounds: minLength/maxLength on strings, minItems/maxItems on lists and tuples."""

    min: int | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        _check_bound(self.min, "Len.min", integral=True)
        _check_bound(self.max, "Len.max", integral=True)
        if self.min is None and self.max is None:
            raise ValueError("Len needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("Len.min must not be greater than Len.max")


@dataclass(frozen=True)
class Range:
    """Numeric bounds: ge/le are inclusive (minimum/maximum), gt/lt exclusive (exclusiveMinimum/...)."""

    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    lt: float | None = None

    def __post_init__(self) -> None:
        for bound in ("ge", "le", "gt", "lt"):
            _check_bound(getattr(self, bound), f"Range.{bound}", integral=False)
        if self.ge is not None and self.gt is not None:
            raise ValueError("Range takes ge or gt, not both")
        if self.le is not None and self.lt is not None:
            raise ValueError("Range takes le or lt, not both")
        if all(bound is None for bound in (self.ge, self.le, self.gt, self.lt)):
            raise ValueError("Range needs at least one bound")


@dataclass(frozen=True)
class Pattern:
    """An ECMA-262 regular expression a string must match (searched, not anchored: add ^...$)."""

    regex: str

    def __post_init__(self) -> None:
        if not isinstance(self.regex, str):
            raise ValueError("Pattern.regex must be a string")


@dataclass(frozen=True)
class Describe:
    """A description for the parameter or field (a plain string in Annotated means the same)."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("Describe.text must be a non-empty string")


# -- where an annotation sits, for error messages ----------------------------------------------


@dataclass(frozen=True)
class _Site:
    """The function and parameter (and nested field) an annotation belongs to."""

    function: str
    parameter: str
    fields: tuple[str, ...] = ()

    def field(self, name: str) -> _Site:
        return dataclasses.replace(self, fields=(*self.fields, name))

    def refuse(self, reason: str) -> TypeError:
        where = f"parameter {self.parameter!r}" if self.parameter != "return" else "the return annotation"
        if self.fields:
            where += " (field " + ".".join(self.fields) + ")"
        return TypeError(f"{self.function}: {where}: {reason}")


# -- step 1: read the signature -----------------------------------------------------------------


@dataclass(frozen=True)
class _Parameter:
    name: str
    annotation: Any
    default: Any  # inspect.Parameter.empty when there is none


def _function_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints with forward references resolved; an unresolvable one names its parameter."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - find which annotation is at fault, then report it
        pass
    hints: dict[str, Any] = {}
    for name, annotation in getattr(fn, "__annotations__", {}).items():
        probe = types.SimpleNamespace(__annotations__={name: annotation}, __globals__=getattr(fn, "__globals__", {}))
        try:
            hints.update(typing.get_type_hints(probe, include_extras=True))
        except Exception as exc:  # noqa: BLE001
            site = _Site(_function_name(fn), name)
            raise site.refuse(
                f"the annotation {annotation!r} cannot be resolved ({type(exc).__name__}); "
                "define the type at module level before the function"
            ) from None
    return hints


def _read_parameters(fn: Callable[..., Any]) -> list[_Parameter]:
    """Step 1: the parameters in order with their resolved annotations; refuse what JSON cannot carry."""
    if not callable(fn):
        raise TypeError(f"expected a function, got {type(fn).__name__}")
    function = _function_name(fn)
    signature = inspect.signature(fn)
    hints = _resolved_hints(fn)
    parameters = []
    for param in signature.parameters.values():
        site = _Site(function, param.name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise site.refuse("*args cannot be described by a JSON object schema; name each parameter")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise site.refuse("**kwargs cannot be described by a closed JSON object schema; name each parameter")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise site.refuse("positional-only parameters cannot be passed by name from a JSON object")
        if param.name not in hints and param.name != CONTEXT_PARAMETER_NAME:
            raise site.refuse("needs a type annotation")
        parameters.append(_Parameter(param.name, hints.get(param.name, CallContext), param.default))
    return parameters


# -- step 2: read the docstring -----------------------------------------------------------------

_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(?P<name>\w+)\s*:\s*(?P<text>.*)$")
_REST_FIELD = re.compile(r"^:(?:param|type|returns?|rtype|raises?|var|ivar|cvar)\b")
_GOOGLE_SECTION = re.compile(r"^(?P<title>[A-Z][A-Za-z ]*):\s*$")
_GOOGLE_PARAM_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"})
_GOOGLE_ENTRY = re.compile(r"^(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


@dataclass(frozen=True)
class _Docstring:
    summary: str  # the prose before the first section, paragraphs joined
    parameters: Mapping[str, str]  # parameter name -> its description


def _join_lines(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def _read_docstring(fn: Callable[..., Any]) -> _Docstring:
    """Step 2: the summary and per-parameter descriptions (reST ``:param x:`` or Google ``Args:``)."""
    text = inspect.getdoc(fn) or ""
    lines = text.splitlines()
    prose: list[str] = []
    parameters: dict[str, list[str]] = {}
    index = 0
    while index < len(lines) and not _starts_section(lines[index]):
        prose.append(lines[index])
        index += 1
    while index < len(lines):
        index = _read_section(lines, index, parameters)
    paragraphs = "\n".join(prose).strip().split("\n\n")
    summary = "\n\n".join(_join_lines(paragraph.splitlines()) for paragraph in paragraphs if paragraph.strip())
    return _Docstring(summary, {name: _join_lines(parts) for name, parts in parameters.items()})


def _starts_section(line: str) -> bool:
    stripped = line.strip()
    return bool(_REST_FIELD.match(stripped)) or bool(_GOOGLE_SECTION.match(stripped) and line == line.lstrip())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _read_section(lines: list[str], index: int, parameters: dict[str, list[str]]) -> int:
    """Read one reST field or one Google section starting at `index`; return the next index."""
    line = lines[index]
    stripped = line.strip()
    rest = _REST_PARAM.match(stripped)
    if rest:
        parts = parameters.setdefault(rest.group("name"), [])
        parts.append(rest.group("text"))
        index += 1
        while index < len(lines) and lines[index].strip() and _indent(lines[index]) > _indent(line):
            parts.append(lines[index])
            index += 1
        return index
    google = _GOOGLE_SECTION.match(stripped)
    if google and not _REST_FIELD.match(stripped):
        return _read_google_section(lines, index + 1, google.group("title") in _GOOGLE_PARAM_SECTIONS, parameters)
    return index + 1  # another reST field (:returns: ...) or its continuation: not a parameter


def _read_google_section(lines: list[str], index: int, is_parameters: bool, parameters: dict[str, list[str]]) -> int:
    entry_indent: int | None = None
    current: list[str] | None = None
    while index < len(lines):
        line = lines[index]
        if line.strip() and _indent(line) == 0:
            break  # the next section
        if line.strip():
            if entry_indent is None:
                entry_indent = _indent(line)
            entry = _GOOGLE_ENTRY.match(line.strip())
            if _indent(line) == entry_indent and entry:
                current = parameters.setdefault(entry.group("name"), []) if is_parameters else None
                if current is not None:
                    current.append(entry.group("text"))
            elif current is not None:
                current.append(line)
        index += 1
    return index


# -- step 3: find the injected context parameter ------------------------------------------------


def _is_context(param: _Parameter) -> bool:
    """Step 3: ``ctx`` or a parameter annotated with CallContext is supplied by the registry."""
    if param.name == CONTEXT_PARAMETER_NAME:
        return True
    annotation = _strip_annotated(param.annotation)[0]
    if annotation is CallContext:
        return True
    return _is_union(annotation) and CallContext in typing.get_args(annotation)


# -- step 4: map each annotation to a schema ----------------------------------------------------

_PRIMITIVES: Mapping[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_LIST_ORIGINS = frozenset({list, abc.Sequence, abc.MutableSequence})
_DICT_ORIGINS = frozenset({dict, abc.Mapping, abc.MutableMapping})
_UNEXPRESSIBLE: Mapping[Any, str] = {
    Any: "Any accepts every value; say which JSON type the tool needs",
    object: "object accepts every value; say which JSON type the tool needs",
    bytes: "bytes are not JSON; take a str (e.g. base64) instead",
    bytearray: "bytearray is not JSON; take a str instead",
    set: "a set has no JSON form; take list[T] (add uniqueness checks in the tool)",
    frozenset: "a frozenset has no JSON form; take list[T]",
    complex: "complex numbers are not JSON",
    list: "a bare list says nothing about its items; write list[T]",
    dict: "a bare dict says nothing about its values; write dict[str, T] or a TypedDict",
    tuple: "a bare tuple says nothing about its items; write tuple[A, B] or tuple[T, ...]",
}


def _strip_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """Unwrap Annotated (and TypedDict's Required/NotRequired, and NewType, which is the type it wraps
    at run time) into the type and its metadata."""
    metadata: tuple[Any, ...] = ()
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            metadata = metadata + tuple(annotation.__metadata__)
            annotation = annotation.__origin__
        elif getattr(typing.get_origin(annotation), "_name", None) in ("Required", "NotRequired"):
            annotation = typing.get_args(annotation)[0]
        elif callable(annotation) and hasattr(annotation, "__supertype__"):  # typing.NewType
            annotation = annotation.__supertype__
        else:
            return annotation, metadata


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _is_typeddict(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, dict) and hasattr(annotation, "__required_keys__")


def _is_enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def _is_dataclass_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _json_type_of(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float) and math.isfinite(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


class _SchemaBuilder:
    """Maps Python annotations to JSON Schema, refusing what it cannot express exactly.

    `output` builds the schema of what a tool returns rather than of what it is given: a dataclass
    lists every field (also those `__init__` does not take), a pydantic model its serialization
    schema. Subschemas pydantic names (its `$defs`) are collected in `defs`, for the root to carry.
    """

    def __init__(self, *, output: bool = False) -> None:
        self.output = output
        self.defs: dict[str, Any] = {}
        self._building: list[type] = []  # classes being expanded: a repeat means a recursive type

    def schema_for(self, annotation: Any, site: _Site) -> dict[str, Any]:
        annotation, metadata = _strip_annotated(annotation)
        schema = self._bare_schema(annotation, site)
        return _apply_metadata(schema, metadata, site)

    def rooted(self, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` as a document's root: with the `$defs` its references need."""
        if self.defs:
            schema["$defs"] = dict(sorted(self.defs.items()))
        return schema

    def _bare_schema(self, annotation: Any, site: _Site) -> dict[str, Any]:
        if annotation is None or annotation is type(None):
            return {"type": "null"}
        if annotation in _PRIMITIVES:
            return {"type": _PRIMITIVES[annotation]}
        if annotation in _UNEXPRESSIBLE:
            raise site.refuse(_UNEXPRESSIBLE[annotation])
        scalar = schema_for_type(annotation)
        if scalar is not None:  # datetime, date, time, UUID, Decimal: see agent_lab.jsonforms
            return scalar
        if is_pydantic_model(annotation):
            return self._pydantic(annotation, site)
        if isinstance(annotation, (str, typing.ForwardRef)):
            raise site.refuse(f"the forward reference {annotation!r} cannot be resolved")
        if _is_union(annotation):
            return self._union(annotation, site)
        origin = typing.get_origin(annotation)
        if origin is typing.Literal:
            return _literal(typing.get_args(annotation), site)
        if origin in _LIST_ORIGINS or origin in _DICT_ORIGINS or origin is tuple:
            return self._container(annotation, origin, site)
        if _is_enum(annotation):
            return _enum_schema(annotation, site)
        if _is_typeddict(annotation):
            return self._once(annotation, site, self._typeddict)
        if _is_dataclass_type(annotation):
            return self._once(annotation, site, self._dataclass)
        if origin is not None:
            raise site.refuse(f"{annotation!r} has no JSON Schema form here")
        name = getattr(annotation, "__name__", repr(annotation))
        raise site.refuse(f"the type {name} has no JSON Schema form (use str, int, float, bool, list, dict, "
                          "tuple, Literal, an Enum, a TypedDict, a dataclass, a pydantic model, datetime, "
                          "date, time, UUID or Decimal)")

    def _pydantic(self, model: type, site: _Site) -> dict[str, Any]:
        """The model's own schema (see `jsonforms.pydantic_schema`); its `$defs` join the root's."""
        from .schema import SchemaError, Validator

        try:
            schema, defs = pydantic_schema(model, output=self.output)
            Validator({**schema, "$defs": defs} if defs else schema, format_assertion=True)
        except PydanticSchemaError as problem:
            raise site.refuse(f"{model.__name__}: {problem}") from None
        except SchemaError as problem:  # e.g. a pattern in Python's regex syntax, not ECMA-262's
            raise site.refuse(f"the JSON Schema pydantic writes for {model.__name__} cannot be enforced: "
                              f"{problem}") from None
        for name, definition in defs.items():
            known = self.defs.setdefault(name, definition)
            if known != definition:
                raise site.refuse(f"two different pydantic types are both called {name!r} in the JSON Schema; "
                                  "rename one (or give it a model_config title)")
        return schema

    def _union(self, annotation: Any, site: _Site) -> dict[str, Any]:
        branches: list[dict[str, Any]] = []
        for member in typing.get_args(annotation):
            branch = self.schema_for(member, site)
            if branch not in branches:
                branches.append(branch)
        if all(set(branch) == {"type"} and isinstance(branch["type"], str) for branch in branches):
            return {"type": [branch["type"] for branch in branches]}  # a simple union of primitives
        return {"anyOf": branches}

    def _container(self, annotation: Any, origin: Any, site: _Site) -> dict[str, Any]:
        arguments = typing.get_args(annotation)
        if not arguments:
            raise site.refuse(_UNEXPRESSIBLE[origin if origin in (list, dict, tuple) else list])
        if origin is tuple:
            return self._tuple(arguments, site)
        if origin in _DICT_ORIGINS:
            return self._dict(arguments, site)
        return {"type": "array", "items": self.schema_for(arguments[0], site)}

    def _tuple(self, arguments: tuple[Any, ...], site: _Site) -> dict[str, Any]:
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return {"type": "array", "items": self.schema_for(arguments[0], site)}
        if arguments == ((),):  # typing.Tuple[()] on older versions
            arguments = ()
        items = [self.schema_for(item, site.field(str(index))) for index, item in enumerate(arguments)]
        schema: dict[str, Any] = {"type": "array"}
        if items:
            schema["prefixItems"] = items
        schema.update({"items": False, "minItems": len(items), "maxItems": len(items)})
        return schema

    def _dict(self, arguments: tuple[Any, ...], site: _Site) -> dict[str, Any]:
        key, value = arguments
        if _strip_annotated(key)[0] is not str:
            raise site.refuse(f"JSON object keys are strings; dict keys of {key!r} cannot be expressed")
        return {"type": "object", "additionalProperties": self.schema_for(value, site)}

    def _once(self, cls: type, site: _Site, build: Callable[[type, _Site], dict[str, Any]]) -> dict[str, Any]:
        if cls in self._building:
            raise site.refuse(f"{cls.__name__} refers to itself; recursive types are not supported")
        self._building.append(cls)
        try:
            return build(cls, site)
        finally:
            self._building.pop()

    def _typeddict(self, cls: type, site: _Site) -> dict[str, Any]:
        hints = _class_hints(cls, site)
        properties = {key: self.schema_for(hint, site.field(key)) for key, hint in hints.items()}
        required = [key for key, hint in hints.items() if _typeddict_requires(cls, key, hint)]
        return _object_schema(properties, required, _class_description(cls))

    def _dataclass(self, cls: type, site: _Site) -> dict[str, Any]:
        hints = _class_hints(cls, site)
        properties: dict[str, Any] = {}
        required = []
        for field in dataclasses.fields(cls):
            if not field.init and not self.output:  # it cannot be passed in, but it is returned
                continue
            field_site = site.field(field.name)
            if field.name not in hints:
                raise field_site.refuse("needs a type annotation")
            schema = self.schema_for(hints[field.name], field_site)
            if self.output or (field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING):
                required.append(field.name)
            elif field.default is not dataclasses.MISSING:
                schema = _with_default(schema, field.default, self.defs)
            properties[field.name] = schema
        if not self.output:
            _refuse_hidden_init_arguments(cls, properties, site)
        return _object_schema(properties, required, _class_description(cls))


def _refuse_hidden_init_arguments(cls: type, properties: Mapping[str, Any], site: _Site) -> None:
    """A dataclass whose __init__ requires an argument that is not a field (an InitVar, a custom
    __init__) could never be rebuilt from the JSON the schema allows: refuse it now, not at call time."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the fields are all we know
        return
    for param in parameters:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if param.default is inspect.Parameter.empty and param.name not in properties:
            raise site.field(param.name).refuse(
                f"{cls.__name__}() needs this argument but it is not a field the schema can describe "
                "(an InitVar or a custom __init__); give it a default or make it a field"
            )


def _typeddict_requires(cls: type, key: str, hint: Any) -> bool:
    """Whether a TypedDict requires `key`. An explicit Required[...] or NotRequired[...] wins over the
    class's __required_keys__, which typing.TypedDict on Python 3.10 computes without knowing
    typing_extensions' Required and NotRequired."""
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            hint = hint.__origin__
            continue
        marker = getattr(origin, "_name", None)
        if marker in ("Required", "NotRequired"):
            return marker == "Required"
        return key in cls.__required_keys__  # type: ignore[attr-defined]


def _class_hints(cls: type, site: _Site) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - an unresolvable forward reference inside the class
        raise site.refuse(f"the annotations of {cls.__name__} cannot be resolved ({type(exc).__name__})") from None


def _class_description(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not doc or doc.startswith(cls.__name__ + "("):  # dataclasses invent "Name(a: int, ...)"
        return None
    return _join_lines(inspect.cleandoc(doc).split("\n\n")[0].splitlines()) or None


def _object_schema(properties: dict[str, Any], required: list[str], description: str | None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _literal(values: tuple[Any, ...], site: _Site) -> dict[str, Any]:
    flattened: list[Any] = []
    for value in values:
        value = value.value if isinstance(value, enum.Enum) else value
        if _json_type_of(value) is None:
            raise site.refuse(f"Literal values must be str, int, float, bool or None, not {type(value).__name__}")
        if not any(type(value) is type(seen) and value == seen for seen in flattened):
            flattened.append(value)  # Literal[1, True] keeps both: True is not the number 1 in JSON
    return _enum_of(flattened)


def _enum_schema(cls: type[enum.Enum], site: _Site) -> dict[str, Any]:
    values = [member.value for member in cls]
    if not values:
        raise site.refuse(f"the enum {cls.__name__} has no members")
    for value in values:
        if _json_type_of(value) is None:
            raise site.refuse(f"the values of enum {cls.__name__} must be str, int, float, bool or None")
    return _enum_of(values)


def _enum_of(values: list[Any]) -> dict[str, Any]:
    kinds: list[str] = []
    for value in values:
        kind = _json_type_of(value)
        assert kind is not None  # checked by the callers
        if kind not in kinds:
            kinds.append(kind)
    if "number" in kinds and "integer" in kinds:
        kinds.remove("integer")  # every integer is a number
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(values)}


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


def _apply_metadata(schema: dict[str, Any], metadata: tuple[Any, ...], site: _Site) -> dict[str, Any]:
    """Annotated markers and plain strings become keywords of the schema (JSON Schema keywords only
    constrain the types they apply to, so a marker on ``str | None`` constrains the string).
    pydantic's ``Field(ge=1, max_length=5, description=...)`` and annotated-types constraints mean
    the same as ours (see `_pydantic_markers`)."""
    expanded: list[Any] = []
    for marker in metadata:
        translated = _pydantic_markers(marker, site)
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
        elif isinstance(marker, _MultipleOf):
            if not _constrain(schema, lambda kinds: bool(kinds & _NUMERIC_TYPES),
                              lambda target: target.update(multipleOf=marker.value)):
                raise site.refuse("multiple_of applies to int and float only")
        # Other libraries' metadata is not ours to interpret: it is ignored.
    return schema


@dataclass(frozen=True)
class _MultipleOf:
    value: float


_PYDANTIC_FIELD_UNSUPPORTED = ("alias", "validation_alias", "json_schema_extra", "default_factory")


def _pydantic_markers(marker: Any, site: _Site) -> list[Any] | None:
    """Our markers for pydantic's ``Field(...)`` or an annotated-types constraint (``Gt(0)``) on a
    parameter or field, read by duck typing (pydantic is never imported); None for metadata that is
    neither. What our schema cannot carry is refused, never skipped: a pydantic validator function
    (it runs only inside a model), an alias, a default written inside Field."""
    module = getattr(type(marker), "__module__", "") or ""
    if not (module.startswith("pydantic") or module.startswith("annotated_types")):
        return None
    name = type(marker).__name__
    if callable(getattr(marker, "func", None)):
        raise site.refuse(f"pydantic's {name} runs only inside a pydantic model, and @tool does not run "
                          "pydantic on plain parameters: put the value in a model, or check it in the function")
    if hasattr(marker, "metadata") and hasattr(marker, "json_schema_extra"):  # a FieldInfo
        unsupported = [key for key in _PYDANTIC_FIELD_UNSUPPORTED if getattr(marker, key, None) is not None]
        if type(getattr(marker, "default", None)).__name__ != "PydanticUndefinedType":
            unsupported.append("default")
        if unsupported:
            raise site.refuse(f"Field({', '.join(unsupported)}=...) is not read by @tool here: give a default "
                              "as `= value` and keep only constraints and the description in Field")
        markers: list[Any] = [Describe(marker.description)] if isinstance(marker.description, str) \
            and marker.description.strip() else []
        for inner in marker.metadata:
            markers.extend(_pydantic_markers(inner, site) or [inner])
        return markers  # title, examples and discriminator change nothing the schema enforces here
    try:
        return _constraint_markers(marker)
    except ValueError as problem:
        raise site.refuse(f"pydantic's {name}: {problem}") from None
    except LookupError:
        raise site.refuse(f"pydantic's {name} has no JSON Schema form here; use Range, Len, Pattern or "
                          "Describe, or put the value in a pydantic model") from None


def _constraint_markers(marker: Any) -> list[Any]:
    """Our marker for one annotated-types or pydantic constraint; LookupError for one we do not know."""
    bounds = {key: getattr(marker, key) for key in ("ge", "gt", "le", "lt") if hasattr(marker, key)}
    if bounds:
        return [Range(**bounds)]
    if hasattr(marker, "min_length") or hasattr(marker, "max_length"):
        return [Len(min=getattr(marker, "min_length", None), max=getattr(marker, "max_length", None))]
    if isinstance(getattr(marker, "pattern", None), str):
        return [Pattern(marker.pattern)]
    if hasattr(marker, "multiple_of"):
        value = marker.multiple_of
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError("multiple_of must be a positive finite number")
        return [_MultipleOf(value)]
    if getattr(marker, "strict", None) is True:
        return []  # the schema never coerces: strict already
    raise LookupError(type(marker).__name__)


def _apply_len(schema: dict[str, Any], marker: Len, site: _Site) -> None:
    def add(target: dict[str, Any]) -> None:
        kind = "string" if "string" in _schema_types(target) else "array"
        low, high = _LENGTH_KEYWORDS[kind]
        if marker.min is not None:
            target[low] = marker.min
        if marker.max is not None:
            target[high] = marker.max

    if not _constrain(schema, lambda kinds: bool(kinds & {"string", "array"}), add):
        raise site.refuse("Len applies to strings, lists and tuples only")


def _apply_range(schema: dict[str, Any], marker: Range, site: _Site) -> None:
    bounds = {"minimum": marker.ge, "maximum": marker.le, "exclusiveMinimum": marker.gt, "exclusiveMaximum": marker.lt}

    def add(target: dict[str, Any]) -> None:
        target.update({keyword: bound for keyword, bound in bounds.items() if bound is not None})

    if not _constrain(schema, lambda kinds: bool(kinds & _NUMERIC_TYPES), add):
        raise site.refuse("Range applies to int and float only")


def _apply_pattern(schema: dict[str, Any], marker: Pattern, site: _Site) -> None:
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


# -- step 5: apply defaults ---------------------------------------------------------------------


def _with_default(schema: dict[str, Any], default: Any, defs: Mapping[str, Any]) -> dict[str, Any]:
    """Record a Python default as "default" when it has an exact JSON form the schema accepts.

    Otherwise the default still applies in Python; the schema just does not show the model a value it
    would be refused for sending (``x: int = True``, ``n: Annotated[int, Range(ge=1)] = 0``).
    `defs` are the `$defs` the schema's references point into.
    """
    from .schema import Validator

    try:
        value = to_json(default)
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return schema
    try:
        accepted = Validator({**schema, "$defs": dict(defs)} if defs else schema, format_assertion=True).is_valid(value)
    except ValueError:  # a schema our validator cannot compile: show no default rather than guess
        return schema
    if not accepted:
        return schema
    schema["default"] = value
    return schema


# -- the public builders ------------------------------------------------------------------------


def _exposed_parameters(fn: Callable[..., Any]) -> tuple[list[_Parameter], _Parameter | None]:
    parameters = _read_parameters(fn)
    context = [param for param in parameters if _is_context(param)]
    if len(context) > 1:
        raise _Site(_function_name(fn), context[1].name).refuse("only one parameter may receive the CallContext")
    exposed = [param for param in parameters if not _is_context(param)]
    return exposed, (context[0] if context else None)


def input_schema_from_function(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema 2020-12 input schema of `fn`, built in six steps:

    1. read the signature and resolve type hints (refuse *args, **kwargs, positional-only, no hint);
    2. read the docstring: reST ``:param x:`` or Google ``Args:`` lines describe the properties;
    3. drop the injected context parameter (named ``ctx`` or annotated ``CallContext``);
    4. map each annotation to a schema (Annotated markers become constraints);
    5. apply defaults: a parameter with a default is not required, its JSON default is shown;
    6. close the object with ``additionalProperties: false``.
    """
    exposed, _ = _exposed_parameters(fn)  # steps 1 and 3
    docstring = _read_docstring(fn)  # step 2
    builder = _SchemaBuilder()
    function = _function_name(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in exposed:
        schema = builder.schema_for(param.annotation, _Site(function, param.name))  # step 4
        if param.name in docstring.parameters and docstring.parameters[param.name] and "description" not in schema:
            schema = {"description": docstring.parameters[param.name], **schema}
        if _pydantic_markers(param.default, _Site(function, param.name)) is not None:
            raise _Site(function, param.name).refuse(
                "a pydantic Field() as the default is not a value the function would get: write "
                "`Annotated[T, Field(...)] = default` (or leave the default out)")
        if param.default is inspect.Parameter.empty:  # step 5
            required.append(param.name)
        else:
            schema = _with_default(schema, param.default, builder.defs)
        properties[param.name] = schema
    return builder.rooted(_object_schema(properties, required, None))  # step 6


def output_schema_for_annotation(annotation: Any, *, function: str = "<output>") -> dict[str, Any] | None:
    """An output schema for a return annotation with structure: a TypedDict, a dataclass or a pydantic
    model, or a list, tuple, dict value, union or Optional of them (``list[Row]``, ``Row | None``).
    None for anything else (``dict``, ``str``: no schema says more than the output check already does).
    The schema describes the output as the registry writes it (`agent_lab.jsonforms`)."""
    if not _has_structure(annotation, 0):
        return None
    builder = _SchemaBuilder(output=True)
    return builder.rooted(builder.schema_for(annotation, _Site(function, "return")))


def _has_structure(annotation: Any, depth: int) -> bool:
    bare = _strip_annotated(annotation)[0]
    if _is_typeddict(bare) or _is_dataclass_type(bare) or is_pydantic_model(bare):
        return True
    if depth > 8 or typing.get_origin(bare) is typing.Literal:
        return False
    return any(_has_structure(member, depth + 1) for member in typing.get_args(bare) if member is not Ellipsis)


def spec_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    output_schema: Mapping[str, Any] | None = None,
    **runtime: Any,
) -> Any:
    """A ToolSpec for `fn`: the model half from its signature and docstring, the runtime half from
    the keyword arguments (required_permission=, effect=, idempotency_key=, timeout_ms=, ...).

    Without `output_schema`, a return annotation with structure supplies it (a TypedDict, a dataclass,
    a pydantic model, or a list or Optional of one; see `output_schema_for_annotation`).
    """
    from .spec import ToolSpec

    input_schema = input_schema_from_function(fn)
    function = _function_name(fn)
    summary = description if description is not None else _read_docstring(fn).summary
    if not summary or not summary.strip():
        raise TypeError(f"{function}: a tool needs a description: write a docstring or pass description=")
    if output_schema is None:
        returns = _resolved_hints(fn).get("return")
        output_schema = output_schema_for_annotation(returns, function=function) if returns is not None else None
    return ToolSpec(
        name=name if name is not None else fn.__name__,
        description=summary,
        title=title,
        input_schema=input_schema,
        output_schema=output_schema,
        **runtime,
    )


# -- calling the function from validated JSON arguments ----------------------------------------

MAX_REPORTED_VIOLATIONS = 20
"""Arguments the Python types refuse are reported with at most this many violations (as the registry's
schema step reports its own)."""


def to_json(value: Any) -> Any:
    """The JSON data the registry's output step makes of `value` (see `agent_lab.jsonforms`):
    dataclasses and pydantic models become objects, enums their values, tuples lists, datetimes, UUIDs
    and Decimals strings. A value with no JSON form is returned as it is (the output step refuses it,
    saying why)."""
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_json(item) for item in value]
    if type(value) in (str, int, float, bool) or value is None:
        return value
    form = json_form(value)
    return value if form is NO_FORM else to_json(form)


class _Refused(Exception):
    """Arguments the schema accepted that a Python type refused; `violations` say where and why."""

    def __init__(self, violations: list[dict[str, str]]) -> None:
        super().__init__()
        self.violations = violations


def _violation(pointer: str, reason: str) -> dict[str, str]:
    return {"instance_path": pointer, "keyword_path": "", "keyword": "python",
            "message": f"{quoted_field(pointer)} {reason}"}


@functools.lru_cache(maxsize=256)
def _cached_hints(cls: type) -> dict[str, Any]:
    """A class's resolved hints, worked out once (they were already checked when the schema was built)."""
    return typing.get_type_hints(cls, include_extras=True)


def _to_python(annotation: Any, value: Any, pointer: str) -> Any:
    """Rebuild the Python value an annotation asks for from (already validated) JSON at `pointer`;
    _Refused when the type cannot take it."""
    from .jsonvalue import pointer_join

    annotation = _strip_annotated(annotation)[0]
    if value is None:
        return None
    if _is_union(annotation):
        return _union_to_python(annotation, value, pointer)
    origin = typing.get_origin(annotation)
    if _is_enum(annotation):
        return annotation(value)
    if origin is typing.Literal:
        return _literal_member(typing.get_args(annotation), value)
    if schema_for_type(annotation) is not None:
        try:
            return from_json(annotation, value)
        except NoPythonForm as problem:
            raise _Refused([_violation(pointer, problem.reason)]) from None
    if is_pydantic_model(annotation):
        return _validated_model(annotation, value, pointer)
    if _is_dataclass_type(annotation) and isinstance(value, Mapping):
        hints = _cached_hints(annotation)
        fields = _rebuilt_members(hints, value, pointer)
        return _constructed(annotation, fields, value, pointer)
    if _is_typeddict(annotation) and isinstance(value, Mapping):
        return _rebuilt_members(_cached_hints(annotation), value, pointer)
    if origin in _LIST_ORIGINS and isinstance(value, list):
        (item_type,) = typing.get_args(annotation)
        return [_to_python(item_type, item, f"{pointer}/{index}") for index, item in enumerate(value)]
    if origin is tuple and isinstance(value, list):
        arguments = typing.get_args(annotation)
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return tuple(_to_python(arguments[0], item, f"{pointer}/{index}") for index, item in enumerate(value))
        return tuple(_to_python(item_type, item, f"{pointer}/{index}")
                     for index, (item_type, item) in enumerate(zip(arguments, value)))
    if origin in _DICT_ORIGINS and isinstance(value, Mapping):
        value_type = typing.get_args(annotation)[1]
        return {key: _to_python(value_type, item, pointer_join(pointer, key)) for key, item in value.items()}
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _rebuilt_members(hints: Mapping[str, Any], value: Mapping[str, Any], pointer: str) -> dict[str, Any]:
    """The members of an object, each rebuilt for its hint; every refused member is reported."""
    from .jsonvalue import pointer_join

    members: dict[str, Any] = {}
    refused: list[dict[str, str]] = []
    for key, item in value.items():
        try:
            members[key] = _to_python(hints[key], item, pointer_join(pointer, key)) if key in hints else item
        except _Refused as refusal:
            refused.extend(refusal.violations)
    if refused:
        raise _Refused(refused)
    return members


def _constructed(cls: type, fields: dict[str, Any], value: Any, pointer: str) -> Any:
    """`cls(**fields)`; a ValueError from the class's own checks (``__post_init__``, a pydantic
    dataclass) refuses the arguments at `pointer`. Its text is not shown (it was not written for the
    model); a pydantic ValidationError's errors are, as for a model."""
    try:
        return cls(**fields)
    except ValueError as error:
        violations = pydantic_violations(error, value, pointer)
        raise _Refused(violations or [_violation(pointer, f"was refused by {cls.__name__}'s own checks "
                                                           f"({type(error).__name__})")]) from None


def _validated_model(model: Any, value: Any, pointer: str) -> Any:
    """The pydantic model validated from `value` as JSON text (as it would be from the wire, so a
    strict model reads dates from strings); its ValidationError refuses the arguments at `pointer`,
    with pydantic's own messages: one source of truth, the schema, is checked first, and the model's
    own validators (which no schema can show) get the last word."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    try:
        return model.model_validate_json(text)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        violations = pydantic_violations(error, value, pointer)
        if violations is None:
            raise
        raise _Refused(violations or [_violation(pointer, f"was refused by {model.__name__}")]) from None


def _literal_member(choices: tuple[Any, ...], value: Any) -> Any:
    """The Literal choice a JSON value stands for: an enum member named in the Literal comes back as the
    member, as the annotation promises, not as its value."""
    for choice in choices:
        if (isinstance(choice, enum.Enum) and choice.value == value
                and isinstance(choice.value, bool) == isinstance(value, bool)):  # True is not the number 1
            return choice
    return value


def _union_to_python(annotation: Any, value: Any, pointer: str) -> Any:
    """The first union member the value fits (checked against that member's schema)."""
    members = [member for member in typing.get_args(annotation) if member is not type(None)]
    if len(members) == 1:
        return _to_python(members[0], value, pointer)
    for member in members:
        if _fits(member, value):
            return _to_python(member, value, pointer)
    return value


@functools.lru_cache(maxsize=256)
def _member_validator(annotation: Any) -> Any:
    """A compiled validator for one union member (built once per member type), formats asserted so
    that a date-time and a date are told apart."""
    from .schema import Validator

    builder = _SchemaBuilder()
    schema = builder.rooted(builder.schema_for(annotation, _Site("<union>", "<member>")))
    return Validator(schema, format_assertion=True)


def _fits(annotation: Any, value: Any) -> bool:
    try:
        return bool(_member_validator(annotation).is_valid(value))
    except Exception:  # noqa: BLE001 - a member we cannot check (or hash) does not fit
        return False


_AS_IS = frozenset({str, int, bool, type(None), None})


def _needs_rebuilding(annotation: Any, depth: int = 0) -> bool:
    """Whether JSON for `annotation` must be rebuilt into Python values (a dataclass, a datetime, a
    float from an int...). Arguments that need none are passed on as they are, at no cost."""
    bare = _strip_annotated(annotation)[0]
    if bare in _AS_IS:
        return False
    origin = typing.get_origin(bare)
    if origin is typing.Literal:
        return any(isinstance(choice, enum.Enum) for choice in typing.get_args(bare))
    if depth < 8 and (origin in _LIST_ORIGINS or origin in _DICT_ORIGINS or _is_union(bare)):
        return any(_needs_rebuilding(argument, depth + 1) for argument in typing.get_args(bare))
    return True


def _keyword_arguments(rebuilt: Mapping[str, Any], arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """The function's keyword arguments: each argument whose annotation asks for Python values rebuilt
    from its JSON. Raises ToolFailure("invalid_arguments") naming every place a Python type refused
    what the schema let in (a leap second, a model validator's refusal): the function never runs."""
    if not rebuilt:
        return arguments
    from .jsonvalue import escape_pointer_token

    keywords = dict(arguments)
    refused: list[dict[str, str]] = []
    for name, annotation in rebuilt.items():
        if name in keywords:
            try:
                keywords[name] = _to_python(annotation, keywords[name], "/" + escape_pointer_token(name))
            except _Refused as refusal:
                refused.extend(refusal.violations)
    if refused:
        raise _arguments_refused(refused)
    return keywords


def _arguments_refused(violations: list[dict[str, str]]) -> ToolFailure:
    count = len(violations)
    message = "The arguments do not fit the tool's Python types: " + violations[0]["message"].rstrip(".")
    if count > 1:
        message += f" (and {count - 1} more {'violation' if count == 2 else 'violations'})"
    return ToolFailure("invalid_arguments", message + ".", details={
        "violations": violations[:MAX_REPORTED_VIOLATIONS], "violation_count": count,
        "violations_truncated": False})


def _named(handler: Callable[..., Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give the handler the function's name for tracebacks and reprs. Not functools.wraps: its
    __wrapped__ would make inspect.signature report fn's parameters instead of the handler's."""
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        if hasattr(fn, attribute):
            setattr(handler, attribute, getattr(fn, attribute))
    return handler


def handler_for(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A registry handler for `fn`: ``handler(arguments)`` or ``handler(arguments, ctx)`` when `fn`
    takes the context; async functions give async handlers.

    The handler rebuilds the Python values the annotations ask for (dataclasses, enums, tuples,
    datetimes, Decimals, pydantic models...) from the validated JSON, and hands back what `fn` returns
    as it is: the registry's output step writes it as JSON (`agent_lab.jsonforms`). Arguments a Python
    type refuses (a model's own validator, a leap second) raise ToolFailure("invalid_arguments") with
    their JSON Pointers, before `fn` runs."""
    exposed, context = _exposed_parameters(fn)
    rebuilt = {param.name: param.annotation for param in exposed if _needs_rebuilding(param.annotation)}

    if inspect.iscoroutinefunction(fn):
        if context is None:
            async def async_handler(arguments: Mapping[str, Any]) -> Any:
                return await fn(**_keyword_arguments(rebuilt, arguments))

            return _named(async_handler, fn)

        async def async_context_handler(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
            keywords = _keyword_arguments(rebuilt, arguments)
            return await fn(**keywords, **{context.name: ctx})

        return _named(async_context_handler, fn)

    if context is None:
        def handler(arguments: Mapping[str, Any]) -> Any:
            return fn(**_keyword_arguments(rebuilt, arguments))

        return _named(handler, fn)

    def context_handler(arguments: Mapping[str, Any], ctx: CallContext) -> Any:
        keywords = _keyword_arguments(rebuilt, arguments)
        return fn(**keywords, **{context.name: ctx})

    return _named(context_handler, fn)


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Decorator: ``@tool`` or ``@tool(effect="write", required_permission="tickets:write", ...)``.

    The function stays callable as before; ``fn.spec`` is its ToolSpec and ``fn.handler`` the
    registry handler (``registry.register(fn.spec, fn.handler)``). Every problem with the
    signature is a TypeError here, when the module is imported, not when a model calls the tool.
    """

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        spec = spec_from_function(function, **options)
        handler = handler_for(function)
        function.spec = spec  # type: ignore[attr-defined]
        function.handler = handler  # type: ignore[attr-defined]
        return function

    if fn is None:
        return decorate
    return decorate(fn)
