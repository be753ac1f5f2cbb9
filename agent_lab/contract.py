"""A tool's model-facing contract, whatever its source, and the one hash that pins it.

A model reads six things about a tool: its name, title and description, its input and output
schemas, and its MCP annotations (`readOnlyHint`, `destructiveHint`, ...). Change any of them and the
model may behave differently, so a lockfile pins all six (`agent_lab.lockfile`), and a description
edited after review (a "rug pull") is caught like any other change.

`ToolDefinition` is that contract as a value: built from a `ToolSpec` (its annotations derived from
the runtime half, as `export --format mcp` sends them) or from a tool a server listed
(`ToolDefinition.from_mcp`, MCP's wire form). A server is untrusted, so `from_mcp` never raises on
what it is given: what is malformed (a name that is not a string, a schema that is not a JSON object,
annotations that are not an object) is kept as far as it can be and listed in `problems`, which the
linter reports (AL100). The linter reads a definition like a ToolSpec's model half; rules about the
runtime half (AL4xx) do not apply to it, since a foreign tool's runtime half comes from the import
policy, not from the server.

`contract()` is the canonical plain form and `contract_hash()` the SHA-256 of its canonical JSON
(`agent_lab.fingerprint.canonical_json`: key order and `1` versus `1.0` do not change it). It is the
one hash of a tool's contract: the lockfile pins it, `lint --lock` compares it, and a tool imported
from a server carries it in `Provenance.contract_hash` (`agent_lab.mcp_client.importing` hashes the
listed definition with `contract_hash(contract_from_mcp(tool))`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from .frozenjson import thaw
from .spec import TOOL_NAME_PATTERN, Effect

__all__ = [
    "ANNOTATION_DEFAULTS",
    "CONTRACT_KEYS",
    "FLOW_LABELS",
    "ToolDefinition",
    "contract_from_mcp",
    "contract_hash",
    "contract_of",
    "definitions_from_mcp",
]

CONTRACT_KEYS = ("name", "title", "description", "input_schema", "output_schema", "annotations")
"""The keys of a canonical contract, in the order lockfiles write them."""

FLOW_LABELS = ("untrusted-content", "private-data", "external-sink", "destructive")
"""The data-flow labels a user can give a tool (`ToolDefinition.labels`, an import policy's `labels`, the
lint configuration's `labels` table), which the toxic-flow rules read (`agent_lab.lint.flows`): it
returns what outsiders wrote, it returns the user's own data, its arguments leave the application, it
destroys. Written with a leading `-`, a label is taken away from what the tool's annotations imply."""

ANNOTATION_DEFAULTS: Mapping[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
"""MCP's meaning of an absent hint: the cautious one (may write, may destroy, not idempotent, reaches
the outside world)."""


def _hint(annotations: Mapping[str, Any], name: str) -> bool:
    value = annotations.get(name)
    return value if isinstance(value, bool) else ANNOTATION_DEFAULTS[name]


@dataclass(frozen=True)
class ToolDefinition:
    """One tool's model-facing contract (see the module docstring).

    `labels` are the data-flow labels the user gave the tool (an import policy, or the lint
    configuration): `untrusted-content`, `private-data`, `external-sink`, `destructive`; the toxic-flow
    rules add what the annotations imply. `source` names where it came from (a server), for reports.
    """

    name: str
    description: str
    input_schema: Any
    output_schema: Any = None
    title: Optional[str] = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    source: Optional[str] = None
    problems: tuple[tuple[str, str], ...] = ()  # (JSON Pointer, what is wrong) for a malformed definition
    raw: Optional[Mapping[str, Any]] = field(default=None, compare=False, repr=False)

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def from_spec(cls, spec: Any) -> ToolDefinition:
        """The model half of a ToolSpec, with the annotations `export --format mcp` derives from its
        runtime half (a spec whose effect changes from read to write shows as weakened annotations)."""
        from .adapters import mcp_annotations  # adapters imports spec; this module is imported by both

        annotations = {key: value for key, value in mcp_annotations(spec).items() if key != "title"}
        return cls(name=spec.name, description=spec.description, input_schema=thaw(spec.input_schema),
                   output_schema=thaw(spec.output_schema) if spec.output_schema is not None else None,
                   title=spec.title, annotations=annotations)

    @classmethod
    def from_mcp(cls, tool: Any, *, position: int = 0, source: Optional[str] = None,
                 labels: tuple[str, ...] = ()) -> ToolDefinition:
        """A tool as an MCP server listed it (`name`, `title`, `description`, `inputSchema`,
        `outputSchema`, `annotations`). Never raises: what is malformed is in `problems`, and a tool
        with no usable name is called `#<position>`."""
        problems: list[tuple[str, str]] = []
        if not isinstance(tool, Mapping):
            problems.append(("", f"the tool is a JSON {_json_type(tool)}, not an object"))
            tool = {}
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            problems.append(("/name", f"the name is {_shown_type(name)}, not a non-empty string"))
            name = f"#{position}"
        elif not TOOL_NAME_PATTERN.fullmatch(name):
            problems.append(("/name", "the name is not 1-128 characters of A-Z a-z 0-9 _ - . (the MCP rule)"))
            name = _printable(name)  # reports show it: no control or invisible character survives
        description = tool.get("description")
        if not isinstance(description, str):
            if description is not None:
                problems.append(("/description", f"the description is {_shown_type(description)}, not a string"))
            description = ""  # MCP allows none; AL201 says it is too short
        title = tool.get("title")
        if title is not None and not isinstance(title, str):
            problems.append(("/title", f"the title is {_shown_type(title)}, not a string"))
            title = None
        input_schema = tool.get("inputSchema")
        if not isinstance(input_schema, Mapping):
            problems.append(("/input_schema", f"inputSchema is {_shown_type(input_schema)}, not a JSON Schema object"))
            input_schema = {"type": "object"}
        elif input_schema.get("type") != "object":
            problems.append(("/input_schema/type", "inputSchema must have \"type\": \"object\" (MCP requires it)"))
        output_schema = tool.get("outputSchema")
        if output_schema is not None and not isinstance(output_schema, Mapping):
            problems.append(("/output_schema", f"outputSchema is {_shown_type(output_schema)}, not a JSON Schema object"))
            output_schema = None
        annotations = tool.get("annotations")
        if annotations is None:
            annotations = {}
        elif not isinstance(annotations, Mapping):
            problems.append(("/annotations", f"annotations is {_shown_type(annotations)}, not an object"))
            annotations = {}
        else:
            for hint in ANNOTATION_DEFAULTS:
                if hint in annotations and not isinstance(annotations[hint], bool):
                    problems.append((f"/annotations/{hint}", f"{hint} is {_shown_type(annotations[hint])}, not a "
                                     f"boolean (read as MCP's cautious default)"))
        for where, schema in (("/input_schema", input_schema), ("/output_schema", output_schema)):
            if schema is not None and _validator(schema) is None:
                problems.append((where, f"not a valid JSON Schema: {_schema_error(schema)}"))
        return cls(name=name, description=description, input_schema=input_schema, output_schema=output_schema,
                   title=title, annotations=dict(annotations), labels=tuple(labels), source=source,
                   problems=tuple(problems), raw=thaw(tool))

    # -- the contract ------------------------------------------------------------------------------

    def contract(self) -> dict[str, Any]:
        """The canonical plain form: the six CONTRACT_KEYS, always all present (None where absent)."""
        if self.raw is not None:  # exactly what the server said, malformed parts and all
            return contract_from_mcp(self.raw)
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": dict(self.annotations),
        }

    def contract_hash(self) -> str:
        return contract_hash(self.contract())

    # -- what the linter reads, as it reads a ToolSpec ---------------------------------------------

    @functools.cached_property
    def input_validator(self) -> Any:
        return _validator(self.input_schema)

    @functools.cached_property
    def output_validator(self) -> Any:
        return _validator(self.output_schema) if self.output_schema is not None else None

    @property
    def format_assertion(self) -> bool:
        return True  # an imported tool's arguments are checked by the registry before they are sent

    @property
    def read_only(self) -> bool:
        return _hint(self.annotations, "readOnlyHint")

    @property
    def effect(self) -> Effect:
        """What the annotations claim (untrusted): read-only, else destructive unless it says it is not."""
        if self.read_only:
            return Effect.READ
        return Effect.DESTRUCTIVE if _hint(self.annotations, "destructiveHint") else Effect.WRITE

    @property
    def open_world(self) -> bool:
        return _hint(self.annotations, "openWorldHint")

    @property
    def idempotency_key(self) -> None:
        return None

    @property
    def redact(self) -> tuple[str, ...]:
        return ()


def _validator(schema: Any) -> Any:
    """The shared compiled Validator for `schema`, or None when it is not a valid JSON Schema."""
    from .schema import SchemaError, shared_validator

    try:
        return shared_validator(schema, format_assertion=True)
    except (SchemaError, ValueError, TypeError, RecursionError):
        return None


def _schema_error(schema: Any) -> str:
    from .schema import SchemaError, Validator

    try:
        Validator(schema)
    except SchemaError as error:
        return str(error)
    except (ValueError, TypeError, RecursionError) as error:
        return type(error).__name__
    return "it could not be compiled"


def _printable(text: str) -> str:
    """`text` with control, format and invisible characters written as \\uXXXX, at most 200 characters."""
    from .text import escaped

    shown = escaped(text)
    return shown if len(shown) <= 200 else shown[:199] + "…"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _shown_type(value: Any) -> str:
    return "missing" if value is None else f"a JSON {_json_type(value)}"


def definitions_from_mcp(tools: Any, *, source: Optional[str] = None,
                         labels: Optional[Mapping[str, tuple[str, ...]]] = None) -> list[ToolDefinition]:
    """Each tool of a tools/list result (`result["tools"]`) as a ToolDefinition; `labels` maps tool
    names to their policy labels. Anything that is not a list gives no tools."""
    if not isinstance(tools, list):
        return []
    labels = labels or {}
    definitions = []
    for position, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, Mapping) else None
        given = labels.get(name, ()) if isinstance(name, str) else ()
        definitions.append(ToolDefinition.from_mcp(tool, position=position, source=source, labels=given))
    return definitions


def contract_from_mcp(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical contract of a tool exactly as a server listed it (MCP's wire form), malformed parts
    and all: the six CONTRACT_KEYS, None where a member is absent, annotations `{}` when absent."""
    return {
        "name": tool.get("name"),
        "title": tool.get("title"),
        "description": tool.get("description"),
        "input_schema": tool.get("inputSchema"),
        "output_schema": tool.get("outputSchema"),
        "annotations": tool.get("annotations") if tool.get("annotations") is not None else {},
    }


def contract_of(subject: Any) -> dict[str, Any]:
    """The canonical contract of a ToolSpec, a ToolDefinition, or an MCP tool (a mapping in wire form).

    A ToolSpec imported from a server (`agent_lab.mcp_client.import_tools`) has the contract the server
    listed, kept in its `Provenance.definition`: that is what a person reviews and a lock pins, not
    the spec built from it (whose runtime half, and an idempotency key the policy added, are ours)."""
    if isinstance(subject, ToolDefinition):
        return subject.contract()
    if isinstance(subject, Mapping):
        return contract_from_mcp(subject)
    provenance = getattr(subject, "provenance", None)
    if provenance is not None and provenance.definition is not None:
        return contract_from_mcp(provenance.definition)
    return ToolDefinition.from_spec(subject).contract()


def contract_hash(contract: Mapping[str, Any]) -> str:
    """`sha256:` and 64 hex digits of the contract's canonical JSON. A contract with no canonical form
    (NaN, nesting deeper than canonical JSON allows) is hashed from its sorted JSON text instead, so
    every contract a server can send has a hash."""
    from .fingerprint import NotCanonicalJSON, canonical_json

    try:
        text = canonical_json(dict(contract))
    except NotCanonicalJSON:
        try:
            text = json.dumps(contract, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
        except (ValueError, TypeError, RecursionError):
            text = repr(contract)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
