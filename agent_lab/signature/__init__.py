"""Tools from plain Python functions: `@tool`, `spec_from_function` and the constraint markers.

``@tool`` turns a typed function into a tool: ``fn.spec`` is its `ToolSpec` (the model half read from
the function's signature, type hints and docstring, the runtime half from the decorator's keywords) and
``fn.handler`` the registry handler that calls it from validated JSON. How a function is read, and the
markers (`Len`, `Range`, `Pattern`, `Describe`), live in `agent_lab.function_schema`, below `ToolSpec`
(which `ToolSpec.from_function` also builds from); `arguments` rebuilds a call's validated JSON
arguments into the Python values the function takes (`handler_for`); this package, above both, puts
them together.

Both take the JSON form of the types beyond JSON's own (datetime, date, time, UUID, Decimal, enums,
tuples, dataclasses, TypedDicts, pydantic models) from `agent_lab.jsonforms`, so the schema built, the
output the registry writes and the parameter a handler receives agree. pydantic is read by duck typing
and never imported.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..jsonforms import to_json
from .arguments import MAX_REPORTED_VIOLATIONS, handler_for  # noqa: F401 - the constant, as before the split
from ..function_schema import (  # noqa: F401 - CONTEXT_PARAMETER_NAME: importable here, as before the split
    CONTEXT_PARAMETER_NAME,
    Describe,
    Len,
    Pattern,
    Range,
    input_schema_from_function,
    model_half_from_function,
    output_schema_for_annotation,
    with_secret_fields,
)
from ..spec import ToolSpec

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


def spec_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    output_schema: Mapping[str, Any] | None = None,
    **runtime: Any,
) -> ToolSpec:
    """A ToolSpec for `fn`: the model half from its signature and docstring (`model_half_from_function`),
    the runtime half from the keyword arguments (required_permission=, effect=, idempotency_key=, ...).
    Fields its types declare secret (pydantic's `SecretStr`: `writeOnly`, `format: password`) are added
    to `redact`."""
    model_half = model_half_from_function(fn, name=name, description=description, title=title,
                                          output_schema=output_schema)
    return ToolSpec(**model_half, **with_secret_fields(model_half, runtime))


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
