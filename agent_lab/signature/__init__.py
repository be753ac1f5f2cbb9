"""Tools from plain Python functions: `@tool`, `spec_from_function` and the constraint markers.

Users arrive with typed functions. `@tool` reads a function's signature, type hints and docstring and
gives it a `ToolSpec` (``fn.spec``) and a registry handler (``fn.handler``), with the standard library
only. The work has two jobs, each in its own modules, and this front door puts them together:

- the tool's schemas, built once when the function is decorated: `parameters` (the signature, and the
  injected context parameter), `docstrings` (the description and the parameters'), `schemas` (each
  annotation mapped to JSON Schema 2020-12, refusing what it cannot say exactly), `markers` and
  `constraints` (``Annotated`` constraints, ours and pydantic's, and the keywords they become);
- the call: `arguments` rebuilds the validated JSON arguments into the Python values the function
  takes (`handler_for`).

Both read annotations through `annotations`, and both take the JSON form of the types beyond JSON's
own (datetime, date, time, UUID, Decimal, enums, tuples, dataclasses, TypedDicts, pydantic models)
from `agent_lab.jsonforms`, so the schema built, the output the registry writes and the parameter a
handler receives agree. pydantic is read by duck typing and never imported.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..jsonforms import to_json
from .arguments import MAX_REPORTED_VIOLATIONS, handler_for  # noqa: F401 - the constant, as before the split
from .docstrings import read_docstring
from .markers import Describe, Len, Pattern, Range
from .parameters import CONTEXT_PARAMETER_NAME, function_name, resolved_hints  # noqa: F401 - likewise
from .schemas import input_schema_from_function, output_schema_for_annotation

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
) -> Any:
    """A ToolSpec for `fn`: the model half from its signature and docstring, the runtime half from
    the keyword arguments (required_permission=, effect=, idempotency_key=, timeout_ms=, ...).

    Without `output_schema`, a return annotation with structure supplies it (a TypedDict, a dataclass,
    a pydantic model, or a list or Optional of one; see `output_schema_for_annotation`).
    """
    from ..spec import ToolSpec  # spec imports this package on use: import on use

    input_schema = input_schema_from_function(fn)
    function = function_name(fn)
    summary = description if description is not None else read_docstring(fn).summary
    if not summary or not summary.strip():
        raise TypeError(f"{function}: a tool needs a description: write a docstring or pass description=")
    if output_schema is None:
        returns = resolved_hints(fn).get("return")
        output_schema = output_schema_for_annotation(returns, function=function) if returns is not None else None
    return ToolSpec(
        name=name if name is not None else fn.__name__,
        description=summary,
        title=title,
        input_schema=input_schema,
        output_schema=output_schema,
        **runtime,
    )



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
