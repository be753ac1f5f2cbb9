"""The runtime half of foreign tools: a policy file the user writes, and the strictest defaults.

A server declares only the model-facing half of its tools (name, description, schemas) and some hints.
What `Registry.invoke` enforces comes from here. A policy file (TOML, on Python 3.11+, or JSON) has one
table of entries, keyed by a tool name or a glob (`fnmatch`: `*`, `?`, `[...]`). Entries match tool
names only, never the name a server gives itself: that name is the server's to choose, so a policy
keyed on it could be claimed by any server. A policy applies to the servers it is given with.

    [tools.read_graph]
    permission = "memory:read"
    effect = "read"
    approval = "never"

    [tools."create_*"]
    permission = "memory:write"
    effect = "write"
    idempotency_key = "request_id"   # added to the tool's input schema when the server has no such field
    approval = "always"
    redact = ["observations"]

    [tools.fetch]
    labels = ["untrusted-content", "external-sink"]   # for the toxic-flow lint rules (AL701, AL702)

An exact name wins over a glob; among globs the first in the file wins. Keys: `permission`, `effect`
(read, write, destructive), `approval` (never, always), `single_use_approval`, `idempotency_key`,
`retry_policy` (never, transient), `timeout_ms`, `max_input_bytes`, `max_output_bytes`, `redact`,
`execution` (pool, inline), `task_support` (forbidden, optional, required: whether a call may run as a
task, see `agent_lab.tasks`; a gateway then holds the upstream call itself), `open_world`,
`format_assertion`, `output_schema`, `labels`.

`labels` are the data-flow labels the reviewer gives the tool (`FLOW_LABELS`: untrusted-content,
private-data, external-sink, destructive; a leading `-` takes away one its annotations imply). They
are no runtime check: the imported spec carries them in `Provenance.labels`, and lint's toxic-flow
rules read them there, before the `labels` table of `[tool.agent-lab.lint]` (see `agent_lab.lint.flows`).

`output_schema` is what the reviewer accepts back from a tool whose server declares no outputSchema
(many do not: the git and fetch reference servers, for one). Such a tool returns `{"content": [...]}`
(and `structuredContent` when the server sends one), so the schema describes that object; `"text"`
stands for TEXT_CONTENT_SCHEMA, text blocks only. `Registry.invoke` checks every answer against it (an
image or a resource where text was reviewed is `invalid_tool_output`), the model is told it, and the
gate's "every tool declares an output schema" and lint's AL403 count it. A tool whose server declares
its own outputSchema keeps that one: the entry's is for what the server leaves undeclared.

What an entry leaves out, and every field of a tool no entry matches, is the strictest default
(`STRICTEST_DEFAULTS`): permission `mcp.unreviewed` (a scope an application grants on purpose, or no
one holds), effect destructive, approval always and single-use, no retries, open world, the ToolSpec
defaults for the timeout (10 s) and budgets (16 KiB in, 64 KiB out). A reviewer lowers a check by
writing it down; nothing a server says can (see `agent_lab.mcp_client.importing`).
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..contract import FLOW_LABELS
from ..frozenjson import freeze
from ..spec import DEFAULT_MAX_INPUT_BYTES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS

__all__ = ["STRICTEST_DEFAULTS", "TEXT_CONTENT_SCHEMA", "UNREVIEWED_PERMISSION", "PolicyError", "ToolPolicy",
           "load_policy"]

UNREVIEWED_PERMISSION = "mcp.unreviewed"
STRICTEST_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "required_permission": UNREVIEWED_PERMISSION,
    "effect": "destructive",
    "approval": "always",
    "single_use_approval": True,
    "idempotency_key": None,
    "retry_policy": "never",
    "timeout_ms": DEFAULT_TIMEOUT_MS,
    "max_input_bytes": DEFAULT_MAX_INPUT_BYTES,
    "max_output_bytes": DEFAULT_MAX_OUTPUT_BYTES,
    "redact": (),
    "execution": "pool",
    "open_world": True,
    "format_assertion": True,
})
"""ToolSpec keyword arguments for a foreign tool no policy entry matches (and for what an entry omits)."""

TEXT_CONTENT_SCHEMA: Mapping[str, Any] = freeze({
    "type": "object",
    "properties": {"content": {"type": "array", "items": {
        "type": "object", "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
        "required": ["type", "text"]}}},
    "required": ["content"],
})
"""`output_schema = "text"`: the answer of a tool whose server declares no outputSchema, as text blocks only."""

# Policy key -> (ToolSpec field, what it must be)
_KEYS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "permission": ("required_permission", "string"),
    "effect": ("effect", "read|write|destructive"),
    "approval": ("approval", "never|always"),
    "single_use_approval": ("single_use_approval", "bool"),
    "idempotency_key": ("idempotency_key", "string"),
    "retry_policy": ("retry_policy", "never|transient"),
    "timeout_ms": ("timeout_ms", "number"),
    "max_input_bytes": ("max_input_bytes", "integer"),
    "max_output_bytes": ("max_output_bytes", "integer"),
    "redact": ("redact", "strings"),
    "execution": ("execution", "pool|inline"),
    "task_support": ("task_support", "forbidden|optional|required"),
    "open_world": ("open_world", "bool"),
    "format_assertion": ("format_assertion", "bool"),
    "output_schema": ("output_schema", "schema"),
    "labels": ("labels", "labels"),
})
MAX_POLICY_BYTES = 1024 * 1024


class PolicyError(ValueError):
    """A policy file that cannot be used: one line, starting with the file (and the entry)."""


@dataclass(frozen=True)
class ToolPolicy:
    """The entries of one policy file, in file order (empty: every tool gets the strictest defaults)."""

    entries: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    source: str = "(no policy)"
    _exact: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_exact", {key: index for index, (key, _) in enumerate(self.entries)
                                            if not _is_glob(key)})

    @classmethod
    def from_mapping(cls, document: Any, *, source: str = "policy") -> ToolPolicy:
        """A policy from parsed data: {"tools": {KEY: {...}, ...}} (PolicyError naming what is wrong)."""
        if not isinstance(document, Mapping):
            raise PolicyError(f"{source}: a policy must be a table with a 'tools' table in it")
        unknown = sorted(set(document) - {"tools"})
        if unknown:
            raise PolicyError(f"{source}: unknown key {unknown[0]!r} (a policy has one table, 'tools')")
        tools = document.get("tools", {})
        if not isinstance(tools, Mapping):
            raise PolicyError(f"{source}: 'tools' must be a table of entries, one per tool name or glob")
        entries = []
        for key, entry in tools.items():
            where = f"{source}: tools.{key}"
            if not isinstance(key, str) or not key:
                raise PolicyError(f"{source}: an entry needs a tool name or glob as its key")
            if not isinstance(entry, Mapping):
                raise PolicyError(f"{where} must be a table of settings")
            entries.append((key, MappingProxyType(_checked_entry(entry, where))))
        return cls(tuple(entries), source)

    def entry_for(self, tool: str) -> tuple[str | None, dict[str, Any]]:
        """(where the entry is, ToolSpec keyword arguments) for the tool named `tool`; (None, the
        strictest defaults) when no entry matches."""
        index = self._exact.get(tool)
        if index is None:
            index = next((position for position, (key, _) in enumerate(self.entries)
                          if _is_glob(key) and fnmatch.fnmatchcase(tool, key)), None)
        options = dict(STRICTEST_DEFAULTS)
        if index is None:
            return None, options
        key, entry = self.entries[index]
        options.update(entry)
        if "single_use_approval" not in entry and options["approval"] == "never":
            options["single_use_approval"] = False  # single-use is a property of approvals; there are none
        return f"{self.source}: tools.{key}", options


def _is_glob(key: str) -> bool:
    return any(character in key for character in "*?[")


def _checked_entry(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key, value in entry.items():
        if key not in _KEYS:
            raise PolicyError(f"{where}: unknown setting {key!r} (known: {', '.join(_KEYS)})")
        target, kind = _KEYS[key]
        options[target] = _checked_value(value, kind, f"{where}.{key}")
    return options


def _checked_value(value: Any, kind: str, where: str) -> Any:
    if kind == "bool":
        if not isinstance(value, bool):
            raise PolicyError(f"{where} must be true or false")
    elif kind == "string":
        if not isinstance(value, str) or not value:
            raise PolicyError(f"{where} must be a non-empty string")
    elif kind in ("number", "integer"):
        wanted = int if kind == "integer" else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted) or not 0 < value < float("inf"):
            raise PolicyError(f"{where} must be a positive {'whole ' if kind == 'integer' else ''}number")
    elif kind == "schema":
        return _checked_schema(value, where)
    elif kind == "labels":
        return _checked_labels(value, where)
    elif kind == "strings":
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise PolicyError(f"{where} must be a list of field names")
        return tuple(value)
    else:
        choices = kind.split("|")
        if value not in choices:
            extra = " ('conditional' needs a Python function: build that ToolSpec in code)" \
                if value == "conditional" else ""
            raise PolicyError(f"{where} must be one of {', '.join(choices)}{extra}")
    return value


def _checked_labels(value: Any, where: str) -> tuple[str, ...]:
    """Data-flow labels: each one of FLOW_LABELS, or one with a leading `-` (taken away) or `+`."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PolicyError(f"{where} must be a list of labels ({', '.join(FLOW_LABELS)}; a leading - takes one away)")
    for label in value:
        if (label[1:] if label[:1] in ("-", "+") else label) not in FLOW_LABELS:
            raise PolicyError(f"{where}: unknown label {label!r} (labels: {', '.join(FLOW_LABELS)}; "
                              "a leading - takes one away)")
    return tuple(value)


def _checked_schema(value: Any, where: str) -> Mapping[str, Any]:
    """An output schema the reviewer wrote: "text", or a JSON Schema object that compiles (2020-12)."""
    if value == "text":
        return TEXT_CONTENT_SCHEMA
    if not isinstance(value, Mapping):
        raise PolicyError(f'{where} must be a JSON Schema object, or "text" (text content blocks only)')
    from ..schema import SchemaError, Validator

    try:
        Validator(value)
    except SchemaError as error:
        raise PolicyError(f"{where} is not a valid JSON Schema: {' '.join(str(error).split())}") from None
    except (ValueError, TypeError, RecursionError) as error:
        raise PolicyError(f"{where} is not a valid JSON Schema ({type(error).__name__})") from None
    return freeze(value)


def load_policy(path: str | os.PathLike[str]) -> ToolPolicy:
    """The policy in the file at `path`: `.toml` (Python 3.11+) or `.json` (PolicyError otherwise)."""
    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise PolicyError(f"{where}: cannot read it ({error.strerror or type(error).__name__})") from None
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"{where}: larger than {MAX_POLICY_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{where}: not UTF-8 text") from None
    if where.lower().endswith(".json"):
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise PolicyError(f"{where}: not valid JSON ({' '.join(str(error).split())})") from None
    elif where.lower().endswith(".toml"):
        try:
            tomllib: Any = importlib.import_module("tomllib")  # Python 3.11+
        except ModuleNotFoundError:
            raise PolicyError(f"{where}: reading TOML needs Python 3.11 or later; write the policy as JSON "
                              "(the same tables) on Python 3.10") from None
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise PolicyError(f"{where}: not valid TOML ({' '.join(str(error).split())})") from None
        except RecursionError:  # tomllib reads nested arrays and tables by recursion
            raise PolicyError(f"{where}: not valid TOML (nested too deeply to read)") from None
    else:
        raise PolicyError(f"{where}: a policy file is .toml or .json")
    return ToolPolicy.from_mapping(document, source=where)


def as_policy(policy: ToolPolicy | str | os.PathLike[str] | Mapping[str, Any] | None) -> ToolPolicy:
    """A policy however it is given: None (every tool gets the strictest defaults), a ToolPolicy, parsed
    data ({"tools": {...}}) or the path of a TOML or JSON file. Raises PolicyError naming what is wrong."""
    if policy is None:
        return ToolPolicy()
    if isinstance(policy, ToolPolicy):
        return policy
    if isinstance(policy, Mapping):
        return ToolPolicy.from_mapping(policy)
    return load_policy(policy)
