"""Foreign tools as ToolSpecs: each tool a server lists becomes a spec whose handler is a client call.

    from agent_lab import Registry
    from agent_lab.mcp_client import connect, import_tools

    with connect("npx -y @modelcontextprotocol/server-memory") as server, Registry() as registry:
        imported = import_tools(server, policy="memory-policy.toml")
        imported.register(registry)

The model-facing half is the server's, as listed: name, title, description, input and output schema,
in whatever JSON Schema dialect it declares (compiled as it is, exported converted as `export` does).
The runtime half comes from the policy (`agent_lab.mcp_client.tool_policy`), strictest defaults for
tools it does not name. The server's annotations are untrusted hints that can only raise a check:
`readOnlyHint: false` raises a tool the policy calls a read to a write; `destructiveHint: true` raises it
to destructive (and an approval of `never` to `always`); `openWorldHint: true` sets open_world. A hint
that says a tool is safer than the policy says is ignored. Each raise is recorded in the spec's
`Provenance.raised`.

A tool that cannot be imported faithfully (a name MCP forbids, a name listed twice, no object input
schema, a schema that cannot be compiled or refers to a network `$ref`, which is never fetched) is left
out and reported in `ServerImport.skipped` with the reason; it cannot be called.

Calls: `invoke` runs the handler under the spec's deadline; the handler calls the server with that
deadline and the call's cancel event. A result with `isError` is `upstream_error` (for a write the model
is told to look up whether it happened); a request that never left this process is `unavailable`; one
that left but got no answer (a timeout, a server that died) raises, so `invoke` answers
`handler_exception` or `tool_timeout`, whose outcome for a write is `unknown`. A tool with an
outputSchema returns its structuredContent (which `invoke` checks against that schema); one without
returns `{"content": [...]}` (and `structuredContent` when the server sent one).

Drift: with `lock=`, each tool's definition is checked against what a person reviewed; a tool that no
longer matches is imported (so lint and inspect show it) but every call is refused with
`tool_contract_changed`. Without a lock the imported definition is the reference: when the server says
its tool list changed, the next call lists again, and a tool whose definition differs from the one
imported is refused the same way (a description edited mid-session cannot reach the model's calls).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Union

from ..errors import NextAction, ToolFailure
from ..fingerprint import NotCanonicalJSON, canonical_json
from ..provenance import Provenance
from ..registry import Registry
from ..spec import TOOL_NAME_PATTERN, ToolSpec
from .session import McpClient
from .tool_policy import PolicyError, ToolPolicy, load_policy
from .wire import McpError, McpRemoteError, quote_server_text

__all__ = [
    "CONTRACT_FIELDS",
    "ContractLock",
    "ImportedTool",
    "ServerImport",
    "ServerRegistry",
    "SkippedTool",
    "contract_hash",
    "import_tools",
    "model_facing_definition",
]

CONTRACT_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""The members of an MCP Tool that make its model-facing contract (what a model reads and relies on)."""
MAX_ERROR_TEXT_CHARS = 500  # of a server's isError text, in the model-visible message
DEADLINE_BACKSTOP_S = 0.5  # the client's deadline for a call, past the registry's (see call_foreign_tool)
ADDED_KEY_DESCRIPTION = ("A unique id for this action (for example a UUID); a retry with the same id returns the "
                         "first answer instead of acting twice.")


class ContractLock(Protocol):
    """What `lock=` needs: a verdict on one tool's definition as the server lists it."""

    def __call__(self, provenance: Provenance, definition: Mapping[str, Any]) -> str | None:
        """None when `definition` matches what was reviewed; else one line saying what changed."""


LockLike = Union[ContractLock, Callable[[Provenance, Mapping[str, Any]], Union[str, None]]]


def model_facing_definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The members of a listed tool that make its contract (CONTRACT_FIELDS that are present)."""
    return {key: tool[key] for key in CONTRACT_FIELDS if key in tool}


def contract_hash(tool: Mapping[str, Any]) -> str:
    """"sha256:<hex>" of the canonical JSON of the tool's model-facing definition (NotCanonicalJSON for
    one nested beyond the canonical form's depth)."""
    return "sha256:" + hashlib.sha256(canonical_json(model_facing_definition(tool)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ImportedTool:
    spec: ToolSpec
    handler: Callable[..., Any]
    definition: Mapping[str, Any]  # the tool as the server listed it
    drift: str | None = None  # what the lock says changed (every call is then refused)


@dataclass(frozen=True)
class SkippedTool:
    name: str
    reason: str


@dataclass(frozen=True)
class ServerImport:
    """What `import_tools` made of one server's listing."""

    client: McpClient
    tools: tuple[ImportedTool, ...]
    skipped: tuple[SkippedTool, ...]

    def register(self, registry: Registry) -> None:
        """Register every imported tool in `registry` (ValueError when a name is taken there)."""
        for tool in self.tools:
            registry.register(tool.spec, tool.handler)


class ServerRegistry(Registry):
    """A Registry that owns the MCP clients its tools call: `close()` closes them as well."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._clients: list[McpClient] = []
        self.world: Any = None  # what the servers write to, when the registry was opened for a command

    @property
    def clients(self) -> tuple[McpClient, ...]:
        return tuple(self._clients)

    def own(self, client: McpClient) -> None:
        self._clients.append(client)

    def close(self, *, wait: bool = False) -> None:
        try:
            super().close(wait=wait)
        finally:
            clients, self._clients = self._clients, []
            for client in clients:
                client.close()


def _policy(policy: ToolPolicy | str | os.PathLike[str] | Mapping[str, Any] | None) -> ToolPolicy:
    if policy is None:
        return ToolPolicy()
    if isinstance(policy, ToolPolicy):
        return policy
    if isinstance(policy, Mapping):
        return ToolPolicy.from_mapping(policy)
    return load_policy(policy)


def import_tools(client: McpClient, *, policy: ToolPolicy | str | os.PathLike[str] | Mapping[str, Any] | None = None,
                 lock: LockLike | None = None, timeout_s: float | None = None, prefix: str = "") -> ServerImport:
    """List `client`'s tools and make each a ToolSpec with a handler (see the module docstring).

    `prefix` is put before each tool's name in the registry (to keep two servers' tools apart); the
    policy still names the tool as the server does, and the server is called by its own name.
    Raises McpError when the listing fails, PolicyError when the policy cannot be applied to a tool it
    names (a bad file, an idempotency key that cannot be added)."""
    rules = _policy(policy)
    listed = client.list_tools(timeout_s=timeout_s)
    counts: dict[str, int] = {}
    for tool in listed:
        name = tool.get("name")
        if isinstance(name, str):
            counts[name] = counts.get(name, 0) + 1
    watch = _DefinitionWatch(client)
    tools: list[ImportedTool] = []
    skipped: list[SkippedTool] = []
    for tool in listed:
        name = tool.get("name")
        shown = quote_server_text(name, 80) if isinstance(name, str) else f"(a tool whose name is {type(name).__name__})"
        reason = _unusable(tool, counts, prefix)
        if reason is None:
            try:
                imported = _import_one(client, tool, rules, lock, watch, prefix)
            except _Skip as skip:
                reason = str(skip)
            else:
                tools.append(imported)
                continue
        if SkippedTool(shown, reason) not in skipped:  # a name listed twice is reported once
            skipped.append(SkippedTool(shown, reason))
    return ServerImport(client, tuple(tools), tuple(skipped))


class _Skip(Exception):
    """A tool that cannot be imported faithfully; the message says why."""


def _unusable(tool: Mapping[str, Any], counts: Mapping[str, int], prefix: str) -> str | None:
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        return "its name is not 1-128 characters of A-Z a-z 0-9 _ - . (the MCP rule)"
    if not TOOL_NAME_PATTERN.fullmatch(prefix + name):
        return f"its name with the prefix {prefix!r} is not 1-128 characters of A-Z a-z 0-9 _ - ."
    if counts.get(name, 0) > 1:
        return "the server lists this name more than once, so which definition was reviewed is ambiguous"
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return 'its inputSchema is not a JSON Schema object with "type": "object"'
    for key in ("description", "title"):
        if key in tool and not isinstance(tool[key], (str, type(None))):
            return f"its {key} is not a string"
    if "outputSchema" in tool and not isinstance(tool["outputSchema"], (Mapping, type(None))):
        return "its outputSchema is not a JSON Schema object"
    return None


def _import_one(client: McpClient, tool: Mapping[str, Any], rules: ToolPolicy, lock: LockLike | None,
                watch: _DefinitionWatch, prefix: str) -> ImportedTool:
    name = tool["name"]
    try:
        digest = contract_hash(tool)
    except (NotCanonicalJSON, RecursionError):
        raise _Skip("its definition is nested too deeply to hash (and to check)") from None
    entry, options = rules.entry_for(name)
    raised = _raise_by_hints(options, tool.get("annotations"))
    input_schema, added_key = _with_idempotency_key(tool["inputSchema"], options.get("idempotency_key"), entry, name)
    provenance = Provenance(server=client.name, server_version=client.server_info.get("version") or None,
                            transport=client.transport.kind, address=client.label,
                            protocol_version=client.protocol_version or "unknown", contract_hash=digest,
                            policy=entry, raised=tuple(raised), hints=Provenance.hints_of(tool.get("annotations")))
    description = tool.get("description") or tool.get("title") or name
    title = tool.get("title") if isinstance(tool.get("title"), str) else None
    output_schema = tool.get("outputSchema")
    try:
        spec = ToolSpec(name=prefix + name, description=description, title=title, input_schema=input_schema,
                        output_schema=output_schema, provenance=provenance, **options)
    except ValueError as error:
        message = " ".join(str(error).split())
        if entry is not None and ("idempotency_key" in message or "single_use" in message or "approval" in message):
            raise PolicyError(f"{entry}: {message}") from None
        raise _Skip(f"it cannot be enforced as listed: {quote_server_text(message, 300)}") from None
    except RecursionError:
        raise _Skip("its schema is nested too deeply to compile") from None
    drift = _lock_verdict(lock, provenance, tool)
    watch.remember(name, digest)
    handler = _handler(client, spec, name, watch, added_key, drift, output_schema is not None)
    return ImportedTool(spec, handler, dict(tool), drift)


def _raise_by_hints(options: dict[str, Any], annotations: Any) -> list[str]:
    """Raise `options` where the server's explicit hints are stricter; one sentence per raise."""
    hints = annotations if isinstance(annotations, Mapping) else {}
    raised: list[str] = []
    if hints.get("readOnlyHint") is False and options["effect"] == "read":
        options["effect"] = "write"
        raised.append("readOnlyHint is false: effect read raised to write")
    if hints.get("destructiveHint") is True and options["effect"] != "destructive":
        raised.append(f"destructiveHint is true: effect {options['effect']} raised to destructive")
        options["effect"] = "destructive"
        if options["approval"] == "never":
            options["approval"] = "always"
            raised.append("destructiveHint is true: approval never raised to always")
    if hints.get("openWorldHint") is True and not options["open_world"]:
        options["open_world"] = True
        raised.append("openWorldHint is true: open_world set")
    return raised


def _with_idempotency_key(schema: Mapping[str, Any], key: str | None, entry: str | None,
                          tool: str) -> tuple[Mapping[str, Any], str | None]:
    """The input schema, with the policy's idempotency key added as a required string property when the
    server's schema has no such property (the key is then taken out of the arguments before the call)."""
    if key is None:
        return schema, None
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return schema, None  # the server's own field: ToolSpec checks it is a required string
    if properties is not None and not isinstance(properties, Mapping):
        raise PolicyError(f"{entry}: idempotency_key {key!r} cannot be added to {tool}'s input schema "
                          "(its properties are not an object)")
    widened = dict(schema)
    widened["properties"] = {**(properties or {}), key: {"type": "string", "minLength": 1, "maxLength": 200,
                                                         "description": ADDED_KEY_DESCRIPTION}}
    required = schema.get("required")
    widened["required"] = [*(required if isinstance(required, list) else []), key]
    return widened, key


def _lock_verdict(lock: LockLike | None, provenance: Provenance, tool: Mapping[str, Any]) -> str | None:
    if lock is None:
        return None
    try:
        verdict = lock(provenance, model_facing_definition(tool))
    except Exception as error:  # noqa: BLE001 - a lock that cannot decide has not approved the tool
        return f"the lock could not check it ({type(error).__name__})"
    if verdict is None:
        return None
    return quote_server_text(str(verdict), 300) or "the definition differs from the locked one"


class _DefinitionWatch:
    """The hash each tool had when imported; after the server says its list changed, the next call
    lists again (once, under that call's deadline) and reports tools whose definition differs."""

    def __init__(self, client: McpClient) -> None:
        self.client = client
        self.imported: dict[str, str] = {}
        self.current: dict[str, str | None] = {}
        self.lock = threading.Lock()

    def remember(self, name: str, digest: str) -> None:
        self.imported[name] = digest
        self.current[name] = digest

    def changed(self, name: str, deadline: float) -> bool:
        with self.lock:
            if self.client.tools_changed:
                try:
                    listed = self.client.list_tools(timeout_s=max(0.001, deadline - time.monotonic()))
                except McpError:
                    self.client.tools_changed = True  # still unknown: the next call lists again
                    raise
                current: dict[str, str | None] = {}
                for tool in listed:
                    if isinstance(tool.get("name"), str):
                        try:
                            current[tool["name"]] = None if tool["name"] in current else contract_hash(tool)
                        except (NotCanonicalJSON, RecursionError):
                            current[tool["name"]] = None
                self.current = current
            return self.current.get(name) != self.imported.get(name)


def _handler(client: McpClient, spec: ToolSpec, name: str, watch: _DefinitionWatch, added_key: str | None,
             drift: str | None, has_output_schema: bool) -> Callable[[Mapping[str, Any], Any], Any]:
    """The handler of `spec`, which calls the server's tool `name`."""
    label, writes = client.label, spec.writes

    def call_foreign_tool(arguments: Mapping[str, Any], ctx: Any) -> Any:
        if drift is not None:
            raise ToolFailure("tool_contract_changed", f"The definition of {name} no longer matches the reviewed "
                              f"lock ({drift}); it is not called until it is reviewed and locked again.")
        # The registry answers tool_timeout at the call's deadline and sets ctx.cancel_event, which stops
        # the request at once; the client's own deadline is a little later, a backstop, so the two never
        # race to decide what the caller is told.
        deadline = (ctx.deadline if ctx.deadline is not None else time.monotonic() + spec.timeout_ms / 1000.0) \
            + DEADLINE_BACKSTOP_S
        try:
            changed = watch.changed(name, deadline)
        except McpError as error:  # listing again failed: the call itself was never sent
            raise ToolFailure("unavailable", f"The tool's server could not list its tools again after it said they "
                              f"changed; the call was not sent ({error.detail}).", details={"server": label}) from None
        if changed:
            raise ToolFailure("tool_contract_changed", f"The server changed or removed the definition of {name} "
                              "after it was imported; it is not called until it is reviewed again.")
        try:
            forwarded = {key: value for key, value in arguments.items() if key != added_key}
            result = client.call_tool(name, forwarded, deadline=deadline, cancel_event=ctx.cancel_event)
        except McpRemoteError as error:
            raise ToolFailure("upstream_error", f"The server refused the call: {error.remote_message or error.code}",
                              next_action=NextAction.LOOKUP_STATUS if writes else None,
                              details={"server": label, "code": error.code}) from None
        except McpError as error:
            if not error.sent:
                raise ToolFailure("unavailable", f"The tool's server could not be reached; the call was not sent "
                                  f"({error.detail}).", details={"server": label}) from None
            raise
        if result.get("isError"):
            raise ToolFailure("upstream_error", "The tool reported an error: " + _error_text(result),
                              next_action=NextAction.LOOKUP_STATUS if writes else None, details={"server": label})
        if has_output_schema and "structuredContent" in result:
            return result["structuredContent"]
        output: dict[str, Any] = {"content": result.get("content", [])}
        if isinstance(result.get("structuredContent"), dict):
            output["structuredContent"] = result["structuredContent"]
        return output

    call_foreign_tool.__qualname__ = call_foreign_tool.__name__ = \
        f"mcp_tool_{spec.name.replace('.', '_').replace('-', '_')}"
    return call_foreign_tool


def _error_text(result: Mapping[str, Any]) -> str:
    texts = [block.get("text") for block in result.get("content", []) if isinstance(block, Mapping)]
    joined = " ".join(text for text in texts if isinstance(text, str))
    return quote_server_text(joined, MAX_ERROR_TEXT_CHARS) or "(no text)"
