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
returns `{"content": [...]}` (and `structuredContent` when the server sent one), checked against the
policy entry's `output_schema` when it declares one.

Drift: with `lock=` (a contract lockfile, `agent_lab.lockfile.Lockfile`, or its path), each tool's
definition as listed is checked against the contract a person reviewed and locked (`agent-lab lock`). A
tool that drifted from it, or that the lock does not hold at all, is imported (so inspect shows it, with
`Provenance.lock` saying "drifted" or "unlocked", and lint reads what the server listed in
`Provenance.definition`) but every call is refused with `tool_contract_changed`, naming the kinds of
change (text, loosened, ...) and never the server's text, until it is reviewed and locked again. It is
refused first of all (`Provenance.refusal`, the plan's first step): before its arguments are checked and
before any approval is asked. The model never reads the listed text of such a tool: its spec is a stub
(`WITHHELD_DESCRIPTION`, an object input schema with no properties but an idempotency key the policy
adds), so a rug pull's new description cannot steer the model towards another tool. The lock's surface the tools are checked against is the first
the lock holds of: `surface=` (a lab surface's name), the server's own name (as `agent-lab lock --mcp`
labels it); else the lock's only surface; else none, and every tool is unlocked. The server's name
only picks which reviewed contracts to compare with: a tool still runs only when it is, exactly, one.
With or without a lock, the imported definition is then the reference for the session: when the server
says its tool list changed, the next call lists again, and a tool whose definition differs from the one
imported (or that is gone) is refused the same way (a description edited mid-session cannot reach the
model's calls).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from ..contract import contract_from_mcp, contract_hash
from ..drift import Change, compare_contracts
from ..errors import NextAction, ToolFailure
from ..lockfile import Lockfile, Verdict, VerdictStatus, model_safe_changes
from ..provenance import Provenance, server_uri
from ..redaction import SecretMask, collect_secrets, redact_text, secret_spellings
from ..registry import Registry
from ..spec import TOOL_NAME_PATTERN, ToolSpec
from .session import McpClient
from .tool_policy import PolicyError, ToolPolicy, as_policy
from .wire import McpError, McpRemoteError, McpTimeout, quote_server_text

__all__ = [
    "ImportedTool",
    "LockSource",
    "ServerImport",
    "ServerRegistry",
    "SkippedTool",
    "import_tools",
    "load_lock",
]

MAX_ERROR_TEXT_CHARS = 500  # of a server's isError text, in the model-visible message
WITHHELD_DESCRIPTION = ("Not available: this tool's definition is not the one that was reviewed, so it will not "
                        "run. Do not call it; use another tool or tell the user.")
ADDED_KEY_DESCRIPTION = ("A unique id for this action (for example a UUID); a retry with the same id returns the "
                         "first answer instead of acting twice.")


LockSource = Union[Lockfile, str, os.PathLike[str]]
"""What `lock=` takes: a loaded Lockfile, or the path of one."""


def load_lock(lock: LockSource | None) -> Lockfile | None:
    """The Lockfile `lock` names (LockfileError, one line, when it cannot be read or is not one)."""
    if lock is None or isinstance(lock, Lockfile):
        return lock
    return Lockfile.load(lock)


@dataclass(frozen=True)
class ImportedTool:
    spec: ToolSpec
    handler: Callable[..., Any]
    definition: Mapping[str, Any]  # the tool as the server listed it
    verdict: Verdict | None = None  # what the lock said of it (None: no lock); not a match: every call refused

    @property
    def drift(self) -> str | None:
        """For people: what differs from the lock, one line per change (None when it matches or there is
        no lock). It quotes the server's text (escaped); the model is never shown it."""
        if self.verdict is None or self.verdict.matches:
            return None
        return self.verdict.diff()


@dataclass(frozen=True)
class SkippedTool:
    name: str
    reason: str
    definition: Any = None  # the tool as the server listed it (for lint: what exactly was wrong)


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
        self.skipped: tuple[SkippedTool, ...] = ()  # what the import left out (lint reads their definitions)

    @property
    def clients(self) -> tuple[McpClient, ...]:
        return tuple(self._clients)

    @property
    def artifact_uri(self) -> str | None:
        """Its first server as a URI (where lint places the tools its import left out), else None."""
        return server_uri(self._clients[0].transport.kind, self._clients[0].label) if self._clients else None

    def own(self, client: McpClient) -> None:
        self._clients.append(client)

    def close(self, *, wait: bool = False) -> None:
        try:
            super().close(wait=wait)
        finally:
            clients, self._clients = self._clients, []
            for client in clients:
                client.close()


def import_tools(client: McpClient, *, policy: ToolPolicy | str | os.PathLike[str] | Mapping[str, Any] | None = None,
                 lock: LockSource | None = None, surface: str | None = None, timeout_s: float | None = None,
                 prefix: str = "") -> ServerImport:
    """List `client`'s tools and make each a ToolSpec with a handler (see the module docstring).

    `prefix` is put before each tool's name in the registry (to keep two servers' tools apart); the
    policy and the lock still name the tool as the server does, and the server is called by its own
    name. `lock` is a Lockfile or its path; `surface` the name of the lock's surface to check against
    first (see the module docstring). Raises McpError when the listing fails, PolicyError when the
    policy cannot be applied to a tool it names (a bad file, an idempotency key that cannot be added),
    LockfileError when the lock cannot be read."""
    rules = as_policy(policy)
    locked = _Locked(load_lock(lock), surface, client.name) if lock is not None else None
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
                imported = _import_one(client, tool, rules, locked, watch, prefix)
            except _Skip as skip:
                reason = str(skip)
            else:
                tools.append(imported)
                continue
        if all((known.name, known.reason) != (shown, reason) for known in skipped):  # a name listed twice: once
            skipped.append(SkippedTool(shown, reason, tool))
    return ServerImport(client, tuple(tools), tuple(skipped))


class _Locked:
    """A lockfile and the surface of it this server's tools are checked against (see the module)."""

    def __init__(self, lock: Lockfile | None, surface: str | None, server: str) -> None:
        self.lock = lock
        self.surface = lock.surface_for(surface, server) if lock is not None else None
        self.label = self.surface or surface or server

    def verdict(self, tool: Mapping[str, Any]) -> Verdict:
        if self.lock is None or self.surface is None:
            return Verdict(str(tool.get("name")), self.label, VerdictStatus.UNLOCKED,
                           current_hash=contract_hash(contract_from_mcp(tool)))
        return self.lock.verdict(tool, surface=self.surface)


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


def _import_one(client: McpClient, tool: Mapping[str, Any], rules: ToolPolicy, locked: _Locked | None,
                watch: _DefinitionWatch, prefix: str) -> ImportedTool:
    name = tool["name"]
    try:
        contract = contract_from_mcp(tool)
        digest = contract_hash(contract)
        verdict = locked.verdict(tool) if locked is not None else None
    except RecursionError:
        raise _Skip("its definition is nested too deeply to hash (and to check)") from None
    entry, options = rules.entry_for(name)
    declared = options.pop("output_schema", None)  # the reviewer's, for a tool whose server declares none
    labels = options.pop("labels", ())  # for lint's toxic-flow rules, not a runtime check
    raised = _raise_by_hints(options, tool.get("annotations"))
    refusal = verdict.refusal() if verdict is not None else None
    # A tool that will not run is shown to the model as a stub: its listed text (a rug pull's new
    # description, an unreviewed tool's) never reaches the model, nor steers it to misuse another tool.
    # What the server listed stays in `definition` (and `ImportedTool.definition`) for lint and inspect.
    listed = tool if refusal is None else {"name": name, "inputSchema": {"type": "object"}}
    input_schema, added_key = _with_idempotency_key(listed["inputSchema"], options.get("idempotency_key"), entry,
                                                    name)
    provenance = Provenance(server=client.name, server_version=client.server_info.get("version") or None,
                            transport=client.transport.kind, address=client.label,
                            protocol_version=client.protocol_version or "unknown", contract_hash=digest,
                            policy=entry, raised=tuple(raised), labels=labels,
                            lock=verdict.status.value if verdict is not None else None, definition=tool,
                            hints=Provenance.hints_of(tool.get("annotations")), refusal=refusal)
    # What the model reads, with the client's own secrets masked (a server that repeats the token it was
    # given in a description or title hands it to every client of the catalog); the contract keeps the text.
    description = WITHHELD_DESCRIPTION if refusal is not None else \
        client.secret_mask.text(tool.get("description") or tool.get("title") or name)
    title = client.secret_mask.text(listed["title"]) if isinstance(listed.get("title"), str) else None
    listed_output = listed.get("outputSchema")
    output_schema = listed_output if listed_output is not None else declared
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
    watch.remember(name, digest, contract)
    handler = _handler(client, spec, name, watch, added_key, refusal, listed_output is not None)
    return ImportedTool(spec, handler, dict(tool), verdict)


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


_GONE = "removed"  # a tool the server no longer lists (once), in a watch's current listing


class _DefinitionWatch:
    """The contract each tool had when imported; after the server says its list changed, the next call
    lists again (once, under that call's deadline) and says how a tool's definition differs, if it does."""

    def __init__(self, client: McpClient) -> None:
        self.client = client
        self.imported: dict[str, tuple[str, Mapping[str, Any]]] = {}  # name: (hash, contract)
        self.current: dict[str, str] = {}  # name: hash, or _GONE for a name listed twice or not at all
        self.listed: dict[str, Mapping[str, Any]] = {}  # name: contract, as last listed
        self.lock = threading.Lock()

    def remember(self, name: str, digest: str, contract: Mapping[str, Any]) -> None:
        self.imported[name] = (digest, contract)
        self.current[name] = digest

    def changes(self, name: str, deadline: float) -> tuple[Change, ...] | None:
        """None while the tool is as imported; else its changes (empty: it is gone, or listed twice).
        The watch is waited for within `deadline` too: another call's listing (under a longer deadline, of
        a server that stalls it) must not hold this one past its own (McpTimeout, the call not sent)."""
        if not self.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise McpTimeout(self.client.label, "did not list its tools again in time (another call was listing "
                             "them)", sent=False)
        try:
            return self._changes(name, deadline)
        finally:
            self.lock.release()

    def _changes(self, name: str, deadline: float) -> tuple[Change, ...] | None:
        if self.client.tools_changed:
            try:
                listed = self.client.list_tools(timeout_s=max(0.001, deadline - time.monotonic()))
            except McpError:
                self.client.tools_changed = True  # still unknown: the next call lists again
                raise
            current: dict[str, str] = {}
            contracts: dict[str, Mapping[str, Any]] = {}
            for tool in listed:
                listed_name = tool.get("name")
                if not isinstance(listed_name, str):
                    continue
                if listed_name in current:  # listed twice: which one a call reaches is unknown
                    current[listed_name] = _GONE
                    continue
                try:
                    contracts[listed_name] = contract_from_mcp(tool)
                    current[listed_name] = contract_hash(contracts[listed_name])
                except RecursionError:
                    current[listed_name] = _GONE
            self.current, self.listed = current, contracts
        digest, contract = self.imported[name]
        now = self.current.get(name, _GONE)
        if now == digest:
            return None
        if now == _GONE:
            return ()
        try:
            return compare_contracts(contract, self.listed[name]) or ()
        except RecursionError:
            return ()


def _changed_refusal(name: str, changes: tuple[Change, ...]) -> ToolFailure:
    """What the model is told of a tool whose definition changed during the session: the kinds and
    places of the changes (never the server's new text), or that the tool is gone."""
    if not changes:
        return ToolFailure("tool_contract_changed", f"The server no longer lists {name} as it did when it was "
                           "imported, so it will not run. Do not retry; use another tool or tell the user.",
                           details={"status": "removed"})
    places = model_safe_changes(changes)
    kinds = sorted({place["kind"] for place in places})
    return ToolFailure("tool_contract_changed", f"The server changed the definition of {name} after it was imported "
                       f"({', '.join(kinds)}), so it will not run until someone reviews the change. Do not retry; "
                       "use another tool or tell the user.", details={"status": "changed", "changes": places})


def _handler(client: McpClient, spec: ToolSpec, name: str, watch: _DefinitionWatch, added_key: str | None,
             refusal: Any, has_output_schema: bool) -> Callable[[Mapping[str, Any], Any], Any]:
    """The handler of `spec`, which calls the server's tool `name` (`refusal`: the lock's ToolError for a
    tool that drifted or is unlocked, answered instead of every call)."""
    label, writes, redacted = client.label, spec.writes, spec.redact

    def call_foreign_tool(arguments: Mapping[str, Any], ctx: Any) -> Any:
        if refusal is not None:
            raise ToolFailure(refusal.code, refusal.message, details=refusal.details)
        # The client's deadline is the call's own. On the pool the registry answers tool_timeout at it and
        # sets ctx.cancel_event, which stops the request; run inline (execution="inline", or a registry
        # with run_inline=True) nobody else can stop waiting, so the client must. Whichever is first, the
        # answer is the same: a handler that raises past the deadline is answered tool_timeout (a write's
        # outcome unknown), like one the registry stopped waiting for.
        deadline = ctx.deadline if ctx.deadline is not None else time.monotonic() + spec.timeout_ms / 1000.0
        try:
            changes = watch.changes(name, deadline)
        except McpError as error:  # listing again failed: the call itself was never sent
            raise ToolFailure("unavailable", f"The tool's server could not list its tools again after it said they "
                              f"changed; the call was not sent ({error.detail}).", details={"server": label}) from None
        if changes is not None:
            raise _changed_refusal(name, changes)
        try:
            forwarded = {key: value for key, value in arguments.items() if key != added_key}
            result = client.call_tool(name, forwarded, deadline=deadline, cancel_event=ctx.cancel_event)
        except McpRemoteError as error:
            refused = quote_server_text(redact_text(error.remote_text, _call_secrets(arguments, redacted))) \
                if redacted else error.remote_message
            raise ToolFailure("upstream_error", f"The server refused the call: {refused or error.code}",
                              next_action=NextAction.LOOKUP_STATUS if writes else None,
                              details={"server": label, "code": error.code}) from None
        except McpError as error:
            if not error.sent:
                raise ToolFailure("unavailable", f"The tool's server could not be reached; the call was not sent "
                                  f"({error.detail}).", details={"server": label}) from None
            raise
        if result.get("isError"):
            secrets_in_call = _call_secrets(arguments, redacted) if redacted else frozenset()
            raise ToolFailure("upstream_error", "The tool reported an error: " + _error_text(result, client.secret_mask,
                                                                                             secrets_in_call),
                              next_action=NextAction.LOOKUP_STATUS if writes else None, details={"server": label})
        # A server that repeats a redacted argument in its answer ("your password X was accepted") hands
        # it back in a member the policy does not name: its values are masked wherever they show, as in
        # an error's text, beside the client's own secrets.
        mask = client.secret_mask if not redacted else \
            SecretMask(client.secret_mask.secrets | set(collect_secrets(arguments, redacted, include_keys=True)))
        if has_output_schema and "structuredContent" in result:
            return _without_client_secrets(result["structuredContent"], mask)
        output: dict[str, Any] = {"content": result.get("content", [])}
        if isinstance(result.get("structuredContent"), dict):
            output["structuredContent"] = result["structuredContent"]
        return _without_client_secrets(output, mask)

    call_foreign_tool.__qualname__ = call_foreign_tool.__name__ = \
        f"mcp_tool_{spec.name.replace('.', '_').replace('-', '_')}"
    return call_foreign_tool


def _without_client_secrets(output: Any, mask: SecretMask) -> Any:
    """What the server answered, with the client's own secrets (the credentials it gave the server: see
    `McpClient.secret_mask`) masked in every string, key and number, as a report masks them: a server
    that hands one back as its output does not hand it to the model. (Decoded JSON: it encodes again.)"""
    if not mask.secrets:
        return output
    text = json.dumps(output, ensure_ascii=False)
    masked = mask.json_text(text)
    return output if masked == text else json.loads(masked)


def _error_text(result: Mapping[str, Any], mask: SecretMask, secrets_in_call: frozenset[str]) -> str:
    """The text of an isError result, for the model: the client's own secrets (a token the server was
    given, which a hostile server repeats) and the call's redacted values masked before the text is cut
    and folded to one line, so no part of one survives (the registry masks a failure's message again,
    but a secret cut in two, or its white space folded, no longer matches)."""
    texts = [block.get("text") for block in result.get("content", []) if isinstance(block, Mapping)]
    joined = " ".join(text for text in texts if isinstance(text, str))
    return quote_server_text(redact_text(mask.text(joined), secrets_in_call), MAX_ERROR_TEXT_CHARS) or "(no text)"


def _call_secrets(arguments: Mapping[str, Any], redacted: Any) -> frozenset[str]:
    """Every spelling of the call's redacted argument values (`secret_spellings`), for masking text a
    server built from them: as the registry masks a handler's failure message, before anything cuts it."""
    return secret_spellings(collect_secrets(arguments, redacted, include_keys=True))
