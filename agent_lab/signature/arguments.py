"""Calling a tool function: the validated JSON arguments rebuilt into the Python values it takes.

The registry calls a handler as ``handler(arguments)`` or ``handler(arguments, ctx)``; `handler_for`
turns a function into such a handler. It maps the validated arguments dict to keyword arguments and
rebuilds the Python values the annotations ask for (dataclasses, enums, tuples, datetimes, Decimals,
UUIDs, pydantic models, TypedDicts: `agent_lab.jsonforms` reads each scalar back), only for the
parameters that need it; the others are passed on as they are, at no cost. What a Python type refuses
although the schema let it in (a model validator, a leap second) is a ToolFailure("invalid_arguments")
with JSON Pointers, raised before the function runs.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import typing
from typing import Any, Callable, Mapping

from ..context import CallContext
from ..errors import ToolFailure
from ..jsonforms import NoPythonForm, from_json, is_pydantic_model, pydantic_violations, quoted_field, schema_for_type
from ..jsonvalue import escape_pointer_token, pointer_join
from ..function_schema.annotations import (
    DICT_ORIGINS,
    LIST_ORIGINS,
    Site,
    is_dataclass_type,
    is_enum,
    is_typeddict,
    is_union,
    strip_annotated,
)
from ..function_schema.parameters import exposed_parameters
from ..function_schema.schemas import SchemaBuilder

__all__ = ["MAX_REPORTED_VIOLATIONS", "handler_for"]

MAX_REPORTED_VIOLATIONS = 20
"""Arguments the Python types refuse are reported with at most this many violations (as the registry's
schema step reports its own)."""


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
    annotation = strip_annotated(annotation)[0]
    if value is None:
        return None
    if is_union(annotation):
        return _union_to_python(annotation, value, pointer)
    origin = typing.get_origin(annotation)
    if is_enum(annotation):
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
    if is_dataclass_type(annotation) and isinstance(value, Mapping):
        hints = _cached_hints(annotation)
        fields = _rebuilt_members(hints, value, pointer)
        return _constructed(annotation, fields, value, pointer)
    if is_typeddict(annotation) and isinstance(value, Mapping):
        return _rebuilt_members(_cached_hints(annotation), value, pointer)
    if origin in LIST_ORIGINS and isinstance(value, list):
        (item_type,) = typing.get_args(annotation)
        return [_to_python(item_type, item, f"{pointer}/{index}") for index, item in enumerate(value)]
    if origin is tuple and isinstance(value, list):
        arguments = typing.get_args(annotation)
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            return tuple(_to_python(arguments[0], item, f"{pointer}/{index}") for index, item in enumerate(value))
        return tuple(_to_python(item_type, item, f"{pointer}/{index}")
                     for index, (item_type, item) in enumerate(zip(arguments, value)))
    if origin in DICT_ORIGINS and isinstance(value, Mapping):
        value_type = typing.get_args(annotation)[1]
        return {key: _to_python(value_type, item, pointer_join(pointer, key)) for key, item in value.items()}
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _rebuilt_members(hints: Mapping[str, Any], value: Mapping[str, Any], pointer: str) -> dict[str, Any]:
    """The members of an object, each rebuilt for its hint; every refused member is reported."""
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
    from ..schema import Validator

    builder = SchemaBuilder()
    schema = builder.rooted(builder.schema_for(annotation, Site("<union>", "<member>")))
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
    bare = strip_annotated(annotation)[0]
    if bare in _AS_IS:
        return False
    origin = typing.get_origin(bare)
    if origin is typing.Literal:
        return any(isinstance(choice, enum.Enum) for choice in typing.get_args(bare))
    if depth < 8 and (origin in LIST_ORIGINS or origin in DICT_ORIGINS or is_union(bare)):
        return any(_needs_rebuilding(argument, depth + 1) for argument in typing.get_args(bare))
    return True


def _keyword_arguments(rebuilt: Mapping[str, Any], arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """The function's keyword arguments: each argument whose annotation asks for Python values rebuilt
    from its JSON. Raises ToolFailure("invalid_arguments") naming every place a Python type refused
    what the schema let in (a leap second, a model validator's refusal): the function never runs."""
    if not rebuilt:
        return arguments
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
    exposed, context = exposed_parameters(fn)
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
