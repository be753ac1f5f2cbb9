"""Steps 1 and 3 of reading a tool function: its parameters, and which one receives the CallContext.

A parameter becomes a property of the tool's input schema only when JSON can carry it by name: *args,
**kwargs and positional-only parameters are refused, and every parameter needs a type annotation
(resolved here, forward references included). The parameter named ``ctx``, or annotated with
`CallContext`, is supplied by the registry and never exposed to the model.
"""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from ..context import CallContext
from .annotations import Site, is_union, strip_annotated

__all__ = ["CONTEXT_PARAMETER_NAME", "Parameter", "exposed_parameters", "function_name", "resolved_hints"]

CONTEXT_PARAMETER_NAME = "ctx"  # a parameter with this name is injected by the registry, never exposed


@dataclass(frozen=True)
class Parameter:
    name: str
    annotation: Any
    default: Any  # inspect.Parameter.empty when there is none


def function_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
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
            site = Site(function_name(fn), name)
            raise site.refuse(
                f"the annotation {annotation!r} cannot be resolved ({type(exc).__name__}); "
                "define the type at module level before the function"
            ) from None
    return hints


def _read_parameters(fn: Callable[..., Any]) -> list[Parameter]:
    """Step 1: the parameters in order with their resolved annotations; refuse what JSON cannot carry."""
    if not callable(fn):
        raise TypeError(f"expected a function, got {type(fn).__name__}")
    function = function_name(fn)
    signature = inspect.signature(fn)
    hints = resolved_hints(fn)
    parameters = []
    for param in signature.parameters.values():
        site = Site(function, param.name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise site.refuse("*args cannot be described by a JSON object schema; name each parameter")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise site.refuse("**kwargs cannot be described by a closed JSON object schema; name each parameter")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise site.refuse("positional-only parameters cannot be passed by name from a JSON object")
        if param.name not in hints and param.name != CONTEXT_PARAMETER_NAME:
            raise site.refuse("needs a type annotation")
        parameters.append(Parameter(param.name, hints.get(param.name, CallContext), param.default))
    return parameters


def _is_context(param: Parameter) -> bool:
    """Step 3: ``ctx`` or a parameter annotated with CallContext is supplied by the registry."""
    if param.name == CONTEXT_PARAMETER_NAME:
        return True
    annotation = strip_annotated(param.annotation)[0]
    if annotation is CallContext:
        return True
    return is_union(annotation) and CallContext in typing.get_args(annotation)


def exposed_parameters(fn: Callable[..., Any]) -> tuple[list[Parameter], Parameter | None]:
    """Steps 1 and 3: the parameters the model fills in, and the one that receives the CallContext
    (None when `fn` takes none; more than one is refused)."""
    parameters = _read_parameters(fn)
    context = [param for param in parameters if _is_context(param)]
    if len(context) > 1:
        raise Site(function_name(fn), context[1].name).refuse("only one parameter may receive the CallContext")
    exposed = [param for param in parameters if not _is_context(param)]
    return exposed, (context[0] if context else None)
