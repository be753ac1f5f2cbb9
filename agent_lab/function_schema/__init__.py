"""A Python function as a tool's model half: its input schema, its output schema, its description.

Users arrive with typed functions. These modules read a function's signature, type hints and docstring
and build the JSON Schema 2020-12 schemas of its `ToolSpec` with the standard library only:
`parameters` (the signature, and the injected context parameter), `docstrings` (the description and
the parameters'), `schemas` (each annotation mapped to JSON Schema, refusing what it cannot say
exactly), `markers` and `constraints` (``Annotated`` constraints, ours and pydantic's, and the keywords
they become), all reading annotations through `annotations`.

No ToolSpec is built here, so this package sits below `agent_lab.spec`: `ToolSpec.from_function`
and `@tool` / `spec_from_function` (above both, in `agent_lab.signature`, which also turns the function
into a handler) build one from `model_half_from_function`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .docstrings import read_docstring
from .markers import Describe, Len, Pattern, Range
from .parameters import CONTEXT_PARAMETER_NAME, function_name, resolved_hints
from .schemas import input_schema_from_function, output_schema_for_annotation

__all__ = [
    "CONTEXT_PARAMETER_NAME",
    "Describe",
    "Len",
    "Pattern",
    "Range",
    "input_schema_from_function",
    "model_half_from_function",
    "output_schema_for_annotation",
    "secret_fields",
    "with_secret_fields",
]

MAX_SECRET_SEARCH_NODES = 100_000  # schema nodes looked at for secret fields (a built schema has far fewer)


def model_half_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    output_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The model-facing half of a ToolSpec for `fn`, as its keyword arguments (name, description, title,
    input_schema, output_schema): the schema from its signature, the description from its docstring
    unless given. Without `output_schema`, a return annotation with structure supplies it (a TypedDict,
    a dataclass, a pydantic model, or a list or Optional of one; see `output_schema_for_annotation`)."""
    input_schema = input_schema_from_function(fn)
    function = function_name(fn)
    summary = description if description is not None else read_docstring(fn).summary
    if not summary or not summary.strip():
        raise TypeError(f"{function}: a tool needs a description: write a docstring or pass description=")
    if output_schema is None:
        returns = resolved_hints(fn).get("return")
        output_schema = output_schema_for_annotation(returns, function=function) if returns is not None else None
    return {"name": name if name is not None else fn.__name__, "description": summary, "title": title,
            "input_schema": input_schema, "output_schema": output_schema}


def secret_fields(*schemas: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The names of the properties the schemas declare secret, the way pydantic's `SecretStr` and
    `SecretBytes` (and any JSON Schema author) do: `writeOnly: true` or `format: "password"`, at any depth
    (in `$defs`, items, `anyOf`, ...). A function's parameters say what is secret in their own types, so a
    tool built from one masks those values (`ToolSpec.redact`) without being told twice."""
    found: dict[str, None] = {}
    stack: list[Any] = [schema for schema in schemas if schema is not None]
    seen = 0
    while stack and seen < MAX_SECRET_SEARCH_NODES:
        node = stack.pop()
        seen += 1
        if isinstance(node, Mapping):
            properties = node.get("properties")
            if isinstance(properties, Mapping):
                for name, member in properties.items():
                    if isinstance(name, str) and _holds_a_secret(member):
                        found[name] = None
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return tuple(found)


_SAME_VALUE = ("anyOf", "oneOf", "allOf")  # a branch describes the member itself (Optional[SecretStr])
_INSIDE_VALUE = ("items", "prefixItems", "additionalProperties")  # list[SecretStr], dict[str, SecretStr]


def _holds_a_secret(member: Any) -> bool:
    """Whether a member's value is, or holds without a name of its own, a value declared secret."""
    stack, seen = [member], 0
    while stack and seen < MAX_SECRET_SEARCH_NODES:
        schema = stack.pop()
        seen += 1
        if isinstance(schema, (list, tuple)):
            stack.extend(schema)
            continue
        if not isinstance(schema, Mapping):
            continue
        if schema.get("writeOnly") is True or schema.get("format") == "password":
            return True
        stack.extend(schema.get(key) for key in (*_SAME_VALUE, *_INSIDE_VALUE) if key in schema)
    return False


def with_secret_fields(model_half: Mapping[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """`runtime` with `redact` widened by the model half's `secret_fields` (the author's own first)."""
    declared = secret_fields(model_half.get("input_schema"), model_half.get("output_schema"))
    if not declared:
        return runtime
    given = runtime.get("redact") or ()
    if isinstance(given, str):
        return runtime  # ToolSpec refuses one string with its own message
    if isinstance(given, (set, frozenset)):
        return {**runtime, "redact": frozenset(given) | frozenset(declared)}
    return {**runtime, "redact": (*given, *declared)}  # ToolSpec drops a name given twice
