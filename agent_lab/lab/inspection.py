"""Opening one tool surface for `export`, `serve-mcp` and `inspect`, and describing its tools.

A surface comes from a lab (`--lab MODULE:ATTR [--surface NAME]`, built over a fresh world) or is a
team's own registry (`--registry MODULE:ATTR`: a Registry or a zero-argument function returning one).
`inspect` shows the runtime half of every tool's contract, the half no export ever contains, so a
reviewer can see what the registry will enforce: every runtime field of the `ToolSpec` (effect,
permission, approval with its condition and whether it is single-use, idempotency key, retry policy,
timeout, execution, input and output budgets, format assertion, resource guard, redacted fields, open
world), whether there is an output schema, and the spec's own warnings (`ToolSpec.warnings`, the lint
rules on the runtime half; `agent-lab lint` runs every rule).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence

from ..policy import Actor
from ..registry import Registry
from .definition import Lab, LabError, Surface
from .loader import load_registry, reference_file

__all__ = [
    "OpenSurface",
    "default_actor",
    "describe_tools",
    "open_lab_surfaces",
    "open_registry",
    "render_tool_table",
    "source_line",
]


@dataclass(frozen=True)
class OpenSurface:
    """A built registry and where it came from (`role` None for a plain registry)."""

    name: str
    role: str | None
    registry: Registry
    source_file: str | None  # the file that defines its tools, for FILE:LINE messages
    lab: Lab | None = None


def open_lab_surfaces(lab: Lab, surface: str | None, *, every: bool = False,
                      candidates: bool = False) -> list[OpenSurface]:
    """Registries for `lab`'s surfaces, each over its own fresh world: the named one; else, with
    `every`, all of them; with `candidates`, every candidate (the surfaces the gate checks); else the
    lab's one candidate (LabError when it has several)."""
    if surface is not None:
        try:
            chosen = [lab.surface(surface)]
        except KeyError as error:
            raise LabError(str(error.args[0])) from None
    elif every:
        chosen = list(lab.surfaces)
    elif candidates:
        chosen = list(lab.candidates)
    elif len(lab.candidates) == 1:
        chosen = [lab.candidates[0]]
    else:
        names = ", ".join(candidate.name for candidate in lab.candidates)
        raise LabError(f"lab {lab.name!r} has {len(lab.candidates)} candidate surfaces ({names}): choose one with --surface")
    opened: list[OpenSurface] = []
    try:
        for target in chosen:
            registry = lab.build(target, lab.new_world())
            opened.append(OpenSurface(target.name, target.role, registry, _source_file(target), lab))
    except BaseException:
        for done in opened:
            done.registry.close()
        raise
    return opened


def open_registry(reference: str) -> OpenSurface:
    """The registry `reference` names (see `loader.load_registry`)."""
    registry = load_registry(reference)
    return OpenSurface(reference, None, registry, reference_file(reference))


def _source_file(surface: Surface) -> str | None:
    try:
        return inspect.getsourcefile(surface.build)
    except TypeError:
        return None


def source_line(path: str | None, tool: str | None) -> str | None:
    """"FILE:LINE" of the first line of `path` naming the tool in quotes (line 1 when none does)."""
    if path is None:
        return None
    number = 1
    try:
        with open(path, encoding="utf-8") as source:
            for count, line in enumerate(source, start=1):
                if tool is not None and (f'"{tool}"' in line or f"'{tool}'" in line):
                    number = count
                    break
    except (OSError, UnicodeDecodeError):
        pass
    return f"{path}:{number}"


def default_actor(registry: Registry, lab: Lab | None) -> Actor:
    """Who `serve-mcp` runs calls as when no flag says: the lab's `actor`, else one actor of tenant
    "default" holding every permission the registry's tools require (approvals are still needed)."""
    if lab is not None and lab.actor is not None:
        return lab.actor
    permissions = {registry.spec(name).required_permission for name in registry.names()}
    return Actor(id="mcp-client", tenant="default", permissions={p for p in permissions if p is not None})


def describe_tools(registry: Registry) -> list[dict[str, Any]]:
    """The runtime half of each tool's contract, as JSON, in registration order: every runtime field of
    its ToolSpec (functions by their qualified name), whether it has an output schema, its warnings."""
    rows: list[dict[str, Any]] = []
    for name in registry.names():
        spec = registry.spec(name)
        rows.append({
            "name": spec.name,
            "effect": str(spec.effect),
            "permission": spec.required_permission,
            "approval": str(spec.approval),
            "approval_condition": _function_name(spec.approval_condition),
            "single_use_approval": spec.single_use_approval,
            "idempotency_key": spec.idempotency_key,
            "retry_policy": str(spec.retry_policy.value),
            "timeout_ms": _number(spec.timeout_ms),
            "execution": str(spec.execution.value),
            "task_support": str(spec.task_support.value),  # MCP's execution.taskSupport
            "max_input_bytes": spec.max_input_bytes,
            "max_output_bytes": spec.max_output_bytes,
            "format_assertion": spec.format_assertion,
            "resource_guard": _function_name(spec.resource_guard),
            "redact": list(spec.redact),
            "open_world": spec.open_world,
            "output_schema": spec.output_schema is not None,
            "warnings": list(spec.warnings),
            # imported from an MCP server: where from, and under which policy (None: a local tool)
            "provenance": spec.provenance.to_dict() if spec.provenance is not None else None,
        })
    return rows


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _function_name(function: Any) -> str | None:
    """How a reviewer finds a hook in the code: its qualified name (a lambda shows as `<lambda>`)."""
    if function is None:
        return None
    return str(getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
               or type(function).__qualname__)


_COLUMNS = (("tool", "name"), ("effect", "effect"), ("permission", "permission"), ("approval", "approval"),
            ("condition", "approval_condition"), ("single-use", "single_use_approval"),
            ("idempotency key", "idempotency_key"), ("retry", "retry_policy"), ("timeout ms", "timeout_ms"),
            ("execution", "execution"), ("tasks", "task_support"), ("input budget", "max_input_bytes"), ("output budget", "max_output_bytes"),
            ("formats", "format_assertion"), ("guard", "resource_guard"), ("redact", "redact"),
            ("open world", "open_world"), ("output schema", "output_schema"), ("warnings", "warnings"))


_SERVER_COLUMNS = (("policy", "policy"), ("raised by hints", "raised"), ("contract", "contract_hash"),
                   ("lock", "lock"))


def render_tool_table(title: str, rows: Sequence[dict[str, Any]]) -> str:
    """A plain-text table of `describe_tools` rows under a title line. Tools imported from an MCP server
    add their server (in the title), the policy entry that applies, the checks their hints raised, the
    start of their contract hash and, checked against a lockfile, its verdict (match, drifted: refused,
    unlocked: refused)."""
    columns = list(_COLUMNS)
    servers = sorted({_server_line(row["provenance"]) for row in rows if row.get("provenance")})
    if servers:
        columns += _SERVER_COLUMNS
        title += "".join(f"\n  from {server}" for server in servers)
    cells = [[label for label, _ in columns]]
    for row in rows:
        origin = row.get("provenance") or {}
        values = {**row, "policy": origin.get("policy") or ("strictest defaults" if origin else None),
                  "raised": origin.get("raised"), "contract_hash": (origin.get("contract_hash") or "")[:19] or None,
                  "lock": _LOCK_SHOWN.get(origin.get("lock") or "")}
        cells.append([_cell(values[key]) for _, key in columns])
    widths = [max(len(line[column]) for line in cells) for column in range(len(columns))]
    lines = [title]
    for line in cells:
        lines.append("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())
    return "\n".join(lines)


_LOCK_SHOWN = {"match": "match", "drifted": "drifted: refused", "unlocked": "unlocked: refused"}


def _server_line(provenance: dict[str, Any]) -> str:
    version = f" {provenance['server_version']}" if provenance.get("server_version") else ""
    return (f"mcp server {provenance['server']}{version} ({provenance['transport']} {provenance['address']}, "
            f"protocol {provenance['protocol_version']})")


def _cell(value: Any) -> str:
    if value is None or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return "; ".join(str(item) for item in value)
    return str(value)
