"""Steps 4 to 6 of reading a tool function: each annotation mapped to JSON Schema 2020-12, exactly.

`input_schema_from_function` builds a tool's input schema from its parameters; anything the schema
cannot say exactly (``Any``, ``bytes``, ``set``, callables...) is refused with a `TypeError` naming the
function and the parameter: a tool whose schema lies is worse than no tool.
`output_schema_for_annotation` builds the schema of what a function returns, when its annotation has
structure. The types beyond JSON's own (datetime, UUID, Decimal, pydantic models...) take the schema
`agent_lab.jsonforms` gives them, so the schema, the output the registry writes and the parameter a
handler receives agree.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import math
import typing
from typing import Any, Callable, Mapping

from ..jsonforms import PydanticSchemaError, is_pydantic_model, pydantic_schema, schema_for_type, to_json
from .annotations import (
    DICT_ORIGINS,
    LIST_ORIGINS,
    Site,
    class_hints,
    is_dataclass_type,
    is_enum,
    is_typeddict,
    is_union,
    strip_annotated,
)
from .constraints import apply_metadata
from .docstrings import join_lines, read_docstring
from .markers import pydantic_markers
from .parameters import exposed_parameters, function_name

__all__ = ["SchemaBuilder", "input_schema_from_function", "output_schema_for_annotation"]

_PRIMITIVES: Mapping[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
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


class SchemaBuilder:
    """Maps Python annotations to JSON Schema, refusing what it cannot express exactly.

    `output` builds the schema of what a tool returns rather than of what it is given: a dataclass
    lists every field (also those `__init__` does not take), a pydantic model its serialization
    schema. Subschemas pydantic names (its `$defs`) are collected in `defs`, for the root to carry.
    """

    def __init__(self, *, output: bool = False) -> None:
        self.output = output
        self.defs: dict[str, Any] = {}
        self._building: list[type] = []  # classes being expanded: a repeat means a recursive type

    def schema_for(self, annotation: Any, site: Site) -> dict[str, Any]:
        annotation, metadata = strip_annotated(annotation)
        schema = self._bare_schema(annotation, site)
        return apply_metadata(schema, metadata, site)

    def rooted(self, schema: dict[str, Any]) -> dict[str, Any]:
        """`schema` as a document's root: with the `$defs` its references need."""
        if self.defs:
            schema["$defs"] = dict(sorted(self.defs.items()))
        return schema

    def _bare_schema(self, annotation: Any, site: Site) -> dict[str, Any]:
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
        if is_union(annotation):
            return self._union(annotation, site)
        origin = typing.get_origin(annotation)
        if origin is typing.Literal:
            return _literal(typing.get_args(annotation), site)
        if origin in LIST_ORIGINS or origin in DICT_ORIGINS or origin is tuple:
            return self._container(annotation, origin, site)
        if is_enum(annotation):
            return _enum_schema(annotation, site)
        if is_typeddict(annotation):
            return self._once(annotation, site, self._typeddict)
        if is_dataclass_type(annotation):
            return self._once(annotation, site, self._dataclass)
        if origin is not None:
            raise site.refuse(f"{annotation!r} has no JSON Schema form here")
        name = getattr(annotation, "__name__", repr(annotation))
        raise site.refuse(f"the type {name} has no JSON Schema form (use str, int, float, bool, list, dict, "
                          "tuple, Literal, an Enum, a TypedDict, a dataclass, a pydantic model, datetime, "
                          "date, time, UUID or Decimal)")

    def _pydantic(self, model: type, site: Site) -> dict[str, Any]:
        """The model's own schema (see `jsonforms.pydantic_schema`); its `$defs` join the root's."""
        from ..schema import SchemaError, Validator

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

    def _union(self, annotation: Any, site: Site) -> dict[str, Any]:
        branches: list[dict[str, Any]] = []
        for member in typing.get_args(annotation):
            branch = self.schema_for(member, site)
            if branch not in branches:
                branches.append(branch)
        if all(set(branch) == {"type"} and isinstance(branch["type"], str) for branch in branches):
            return {"type": [branch["type"] for branch in branches]}  # a simple union of primitives
        return {"anyOf": branches}

    def _container(self, annotation: Any, origin: Any, site: Site) -> dict[str, Any]:
        arguments = typing.get_args(annotation)
        if not arguments:
            raise site.refuse(_UNEXPRESSIBLE[origin if origin in (list, dict, tuple) else list])
        if origin is tuple:
            return self._tuple(arguments, site)
        if origin in DICT_ORIGINS:
            return self._dict(arguments, site)
        return {"type": "array", "items": self.schema_for(arguments[0], site)}

    def _tuple(self, arguments: tuple[Any, ...], site: Site) -> dict[str, Any]:
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

    def _dict(self, arguments: tuple[Any, ...], site: Site) -> dict[str, Any]:
        key, value = arguments
        if strip_annotated(key)[0] is not str:
            raise site.refuse(f"JSON object keys are strings; dict keys of {key!r} cannot be expressed")
        return {"type": "object", "additionalProperties": self.schema_for(value, site)}

    def _once(self, cls: type, site: Site, build: Callable[[type, Site], dict[str, Any]]) -> dict[str, Any]:
        if cls in self._building:
            raise site.refuse(f"{cls.__name__} refers to itself; recursive types are not supported")
        self._building.append(cls)
        try:
            return build(cls, site)
        finally:
            self._building.pop()

    def _typeddict(self, cls: type, site: Site) -> dict[str, Any]:
        hints = class_hints(cls, site)
        properties = {key: self.schema_for(hint, site.field(key)) for key, hint in hints.items()}
        required = [key for key, hint in hints.items() if _typeddict_requires(cls, key, hint)]
        return _object_schema(properties, required, _class_description(cls))

    def _dataclass(self, cls: type, site: Site) -> dict[str, Any]:
        hints = class_hints(cls, site)
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


def _refuse_hidden_init_arguments(cls: type, properties: Mapping[str, Any], site: Site) -> None:
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


def _class_description(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not doc or doc.startswith(cls.__name__ + "("):  # dataclasses invent "Name(a: int, ...)"
        return None
    return join_lines(inspect.cleandoc(doc).split("\n\n")[0].splitlines()) or None


def _object_schema(properties: dict[str, Any], required: list[str], description: str | None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _literal(values: tuple[Any, ...], site: Site) -> dict[str, Any]:
    flattened: list[Any] = []
    for value in values:
        value = value.value if isinstance(value, enum.Enum) else value
        if _json_type_of(value) is None:
            raise site.refuse(f"Literal values must be str, int, float, bool or None, not {type(value).__name__}")
        if not any(type(value) is type(seen) and value == seen for seen in flattened):
            flattened.append(value)  # Literal[1, True] keeps both: True is not the number 1 in JSON
    return _enum_of(flattened)


def _enum_schema(cls: type[enum.Enum], site: Site) -> dict[str, Any]:
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


# -- step 5: apply defaults ---------------------------------------------------------------------


def _with_default(schema: dict[str, Any], default: Any, defs: Mapping[str, Any]) -> dict[str, Any]:
    """Record a Python default as "default" when it has an exact JSON form the schema accepts.

    Otherwise the default still applies in Python; the schema just does not show the model a value it
    would be refused for sending (``x: int = True``, ``n: Annotated[int, Range(ge=1)] = 0``).
    `defs` are the `$defs` the schema's references point into.
    """
    from ..schema import Validator

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


def input_schema_from_function(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema 2020-12 input schema of `fn`, built in six steps:

    1. read the signature and resolve type hints (refuse *args, **kwargs, positional-only, no hint);
    2. read the docstring: reST ``:param x:`` or Google ``Args:`` lines describe the properties;
    3. drop the injected context parameter (named ``ctx`` or annotated ``CallContext``);
    4. map each annotation to a schema (Annotated markers become constraints);
    5. apply defaults: a parameter with a default is not required, its JSON default is shown;
    6. close the object with ``additionalProperties: false``.
    """
    exposed, _ = exposed_parameters(fn)  # steps 1 and 3
    docstring = read_docstring(fn)  # step 2
    builder = SchemaBuilder()
    function = function_name(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in exposed:
        schema = builder.schema_for(param.annotation, Site(function, param.name))  # step 4
        if param.name in docstring.parameters and docstring.parameters[param.name] and "description" not in schema:
            schema = {"description": docstring.parameters[param.name], **schema}
        if pydantic_markers(param.default, Site(function, param.name)) is not None:
            raise Site(function, param.name).refuse(
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
    builder = SchemaBuilder(output=True)
    return builder.rooted(builder.schema_for(annotation, Site(function, "return")))


def _has_structure(annotation: Any, depth: int) -> bool:
    bare = strip_annotated(annotation)[0]
    if is_typeddict(bare) or is_dataclass_type(bare) or is_pydantic_model(bare):
        return True
    if depth > 8 or typing.get_origin(bare) is typing.Literal:
        return False
    return any(_has_structure(member, depth + 1) for member in typing.get_args(bare) if member is not Ellipsis)

