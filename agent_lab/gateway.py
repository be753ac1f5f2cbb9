"""A contract gateway: any MCP server's tools, served over MCP through `Registry.invoke`.

    agent-lab serve-mcp --upstream "mcp-server-time" --policy time-policy.toml --receipts sqlite:receipts.db

The upstream's tools are imported under the policy (`agent_lab.mcp_client.importing`: its schemas as
listed, the runtime half from the policy, the strictest defaults for tools it does not name), so every
call a client makes through the gateway gets what a local tool gets: the input schema (the upstream never
sees arguments that fail it), permission and tenant from the gateway's configured actor (never from the
arguments; a tool the actor may not call is not listed and is answered exactly like an unknown one),
approvals bound to the exact call, idempotency keys with receipts in the configured store (a retried call
is answered from its receipt and never reaches the upstream twice), the deadline, the upstream's answer
checked against its own outputSchema and the output budget (one that breaks them is `invalid_tool_output`,
not passed through), redaction and the audit record.

Several upstreams are served together; when two list a tool of one name, every tool of each server
involved is namespaced `LABEL.name` (LABEL: the server's own name, `#` and other characters a tool name
cannot hold replaced by `_`). The policy and the lock still name tools as their server does.

Approvals over MCP. A call the policy says needs approval is answered, when the registry says
approval_required (after the schema and permission checks passed, so a hidden tool never asks):
- on the 2026-07-28 revision, to a client that declares the elicitation capability, with the revision's
  multi-round-trip result: `resultType: "input_required"`, one form elicitation under `inputRequests`
  (`confirm`, a boolean) quoting the call, and a `requestState` that seals (HMAC, a per-process key)
  the actor, tenant, tool, the registry's keyed fingerprint of the arguments, an expiry and a nonce.
  The client retries the same call with `inputResponses` and `requestState`; a confirmed retry of
  exactly that call by that actor runs with an Approval whose id is the nonce, so where the policy says
  single-use, replaying the confirmation is `approval_used`. Any other arguments, actor or a forged or
  expired state asks again; a declined confirmation is `approval_declined`.
- on the handshake era, to a client that declared elicitation, with an `elicitation/create` request (form
  mode, a boolean `confirm`) sent while the call waits; accepted, the call runs once with an Approval for
  exactly it; declined, it is `approval_declined`. The wait ends, not approved, after CONFIRM_WAIT_S or
  as soon as nobody can answer it: the call is cancelled, its HTTP stream closes, its session ends, or
  stdin ends (the call's slot is freed at once, not held by a client that has gone).
- else, as before, the `approval_required` tool error carrying the approval request a host can show.
An approval never grants a permission: the registry checks permission before approval, whatever it holds.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import itertools
import json
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Mapping, Sequence, TextIO

from . import __version__
from .calls import ToolCall, ToolResult
from .mcp_tasks import is_task_call
from .errors import Outcome, ToolError
from .mcp import (
    DEFAULT_MAX_WORKERS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    _error,
    _LineWriter,
    _protocol_stream,
    _Request,
    _RequestId,
    _result,
    _serve_lines,
    _Server,
)
from .execution import describe_exception
from .policy import Actor, Approval
from .redaction import redact

__all__ = [
    "APPROVAL_TTL_S",
    "CONFIRM_KEY",
    "CONFIRM_WAIT_S",
    "GatewayError",
    "open_gateway",
    "open_receipts",
    "serve_gateway",
]

logger = logging.getLogger("agent_lab.gateway")

APPROVAL_TTL_S = 300.0  # how long a confirmation request (and the approval it yields) stays valid
CONFIRM_WAIT_S = 300.0  # how long a handshake-era call waits for the user's answer to its elicitation
CONFIRM_KEY = "confirm"  # the one field of the confirmation form, and the key of its input request
MAX_QUOTED_ARGUMENTS_CHARS = 2000  # of the call's (redacted) arguments quoted in the confirmation message
APPROVER = "mcp-client-user"  # who an approval given through the client's confirmation names


class GatewayError(ValueError):
    """A gateway that cannot be opened as configured (a bad receipts spec, a missing driver); one line."""


# -- the receipt store -----------------------------------------------------------------------------


def open_receipts(spec: str | None) -> Any:
    """The receipt store `spec` names: None or `memory` (this process only: the registry's own),
    `sqlite:PATH` (a file shared by processes on one host), or a PostgreSQL DSN (`postgresql://...` or
    `postgres://...`, shared by every host; needs the psycopg package)."""
    if spec is None or spec == "memory":
        return None
    if spec.startswith("sqlite:"):
        path = spec[len("sqlite:"):]
        if not path:
            raise GatewayError("--receipts sqlite:PATH needs a path")
        from .stores.sqlite import SqliteReceiptStore

        try:
            return SqliteReceiptStore(path)
        except Exception as error:  # noqa: BLE001 - one line for the command, never a traceback
            raise GatewayError(f"--receipts {spec}: {_one_line(error)}") from None
    if spec.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg  # the optional driver (pip install "psycopg[binary]")
        except ImportError:
            raise GatewayError("--receipts with a PostgreSQL DSN needs the psycopg package (pip install "
                               "'psycopg[binary]')") from None
        from .stores.postgres import PostgresReceiptStore

        try:
            return PostgresReceiptStore(functools.partial(psycopg.connect, spec, connect_timeout=5))
        except Exception as error:  # noqa: BLE001 - one line, never a traceback; the DSN may hold a password
            raise GatewayError(f"--receipts with a PostgreSQL DSN: {_one_line(error)}") from None
    raise GatewayError(f"--receipts {spec!r}: expected memory, sqlite:PATH or a postgresql:// DSN")


def _one_line(error: Exception) -> str:
    """Why a receipt store would not open, for the command's one line: the head of the log description
    (type and message as a literal), without the frames under it (a traceback in all but name)."""
    return describe_exception(error, show_message=True).splitlines()[0]


# -- the upstreams ---------------------------------------------------------------------------------


def _namespace(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", label) + "."


def open_gateway(upstreams: Sequence[str], *, policy: Any = None, lock: Any = None, receipts: Any = None,
                 timeout_s: float | None = None) -> Any:
    """A ServerRegistry holding every upstream's tools under `policy` (checked against `lock`), whose
    receipts go to `receipts` (a store, or a spec for `open_receipts`). Two upstreams listing one tool
    name: each such server's tools are namespaced (see the module). Raises McpError (an upstream that
    cannot be reached or listed), PolicyError, LockfileError, GatewayError."""
    from .mcp_client.address import parse_server
    from .mcp_client.importing import ServerRegistry, import_tools
    from .mcp_client.surface_build import ServerSurfaceBuild, lock_for_server, server_label
    from .mcp_client.wire import DEFAULT_TIMEOUT_S

    if not upstreams:
        raise GatewayError("a gateway needs at least one --upstream SERVER")
    store = open_receipts(receipts) if isinstance(receipts, str) or receipts is None else receipts
    build = ServerSurfaceBuild([parse_server(each) for each in upstreams], policy=policy, lock=lock,
                               timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)
    registry = ServerRegistry(receipts=store) if store is not None else ServerRegistry()
    try:
        clients = []
        labels: list[str] = []
        for address in build.addresses:
            client = build.connect(None, registry, address)
            label = server_label(client.name, labels)
            labels.append(label)
            clients.append((client, label))
        names: dict[str, list[str]] = {}
        if len(clients) > 1:
            for client, label in clients:
                for tool in client.list_tools():
                    if isinstance(tool.get("name"), str):
                        names.setdefault(tool["name"], []).append(label)
        clashing = {label for owners in names.values() if len(owners) > 1 for label in owners}
        for client, label in clients:
            if len(clients) == 1:
                imported = import_tools(client, policy=build.policy, lock=build.lock)
            else:
                imported = import_tools(client, policy=build.policy, surface=label,
                                        lock=lock_for_server(build.lock, label, alone=False),
                                        # (a server's own name may repeat a secret it was given)
                                        prefix=_namespace(client.secret_mask.text(label)) if label in clashing else "")
            imported.register(registry)
            registry.skipped = (*registry.skipped, *imported.skipped)
            for skipped in imported.skipped:
                logger.warning("upstream %s: tool %r is not served: %s", client.label, skipped.name, skipped.reason)
    except BaseException:
        registry.close()
        raise
    return registry


# -- confirmations: the sealed requestState of the 2026-07-28 round trip ---------------------------


@dataclass(frozen=True)
class _Confirmation:
    """What a confirmation request was for: exactly one call by one actor, until `expires_at`."""

    tool: str
    fingerprint: str
    actor_id: str
    tenant: str
    expires_at: float
    nonce: str


class _Seal:
    """Seals and opens requestState tokens with a key of this process (a restart voids pending ones)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def seal(self, confirmation: _Confirmation) -> str:
        body = json.dumps([confirmation.tool, confirmation.fingerprint, confirmation.actor_id,
                           confirmation.tenant, confirmation.expires_at, confirmation.nonce],
                          separators=(",", ":")).encode("utf-8")
        payload = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
        return payload + "." + self._mac(payload)

    def open(self, token: Any) -> _Confirmation | None:
        """The confirmation `token` seals, or None for anything this process did not seal."""
        if not isinstance(token, str) or token.count(".") != 1 or len(token) > 4096:
            return None
        payload, mac = token.split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        try:
            fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            return _Confirmation(*fields)
        except (ValueError, TypeError):
            return None

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, b"agent-lab-confirm\x00" + payload.encode("ascii"), hashlib.sha256).hexdigest()


def _can_elicit_form(capabilities: Any) -> bool:
    """The client declared elicitation with form mode (an empty object means form, as 2025-11-25 says)."""
    if not isinstance(capabilities, Mapping):
        return False
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, Mapping):
        return False
    return not elicitation or "form" in elicitation


# -- the server --------------------------------------------------------------------------------------


@dataclass
class _Round:
    """What a tools/call request carried besides the call: its era, and the client's answers."""

    era: str | None
    params: Mapping[str, Any]


class _Waiter:
    """One confirmation asked of the client, for the call of request `call`."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.event = threading.Event()
        self.message: Any = None


class _GatewayServer(_Server):
    """The MCP server with approvals over MCP (see the module): asks the user, then runs the call once."""

    def __init__(self, registry: Any, *, seal: _Seal, **options: Any) -> None:
        super().__init__(registry, **options)
        self.seal = seal
        self.rounds: dict[Any, _Round] = {}
        self.waiting: dict[str, _Waiter] = {}
        self.waiting_lock = threading.Lock()
        self.input_ended = False  # (under waiting_lock) nobody can answer a confirmation any more
        self.asked = itertools.count(1)

    # the request's extra params reach the worker through `rounds`, keyed by the request id
    def start_call(self, request: _Request, *, in_batch: bool,
                   shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Any:
        with self.in_flight_lock:
            if request.id in self.in_flight:  # refused by the base class: the running call keeps its round
                return super().start_call(request, in_batch=in_batch, shape=shape)
            self.rounds[request.id] = _Round(self.session.era, request.params)
        try:
            return super().start_call(request, in_batch=in_batch, shape=shape)
        except BaseException:
            with self.in_flight_lock:
                if request.id not in self.in_flight:
                    self.rounds.pop(request.id, None)
            raise

    def answer_call(self, request_id: _RequestId, call: ToolCall, tracker: Any,
                    shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any] | None:
        """The base class's answer, and the request's round dropped however it ended: a call cancelled
        before it started, or refused with a full backlog, never reaches `call_response`, and its round
        (the request's params, up to the message limit) stayed for the session's life."""
        try:
            return super().answer_call(request_id, call, tracker, shape)
        finally:
            with self.in_flight_lock:
                self.rounds.pop(request_id, None)

    def handle_client_response(self, message: Mapping[str, Any]) -> None:
        answered = message.get("id")
        with self.waiting_lock:
            waiter = self.waiting.pop(answered, None) if isinstance(answered, str) else None
        if waiter is None:
            logger.info("ignored a response from the client to no request of this server")
            return
        waiter.message = message
        waiter.event.set()

    def abandon(self, request_id: Any) -> None:
        """Nobody can take the call's answer: its confirmation wait, if any, ends (not approved)."""
        super().abandon(request_id)
        with self.waiting_lock:
            for waiter in self.waiting.values():
                if waiter.call == request_id:
                    waiter.event.set()

    def close(self) -> None:
        """Nobody can answer a confirmation any more (stdin ended, the session ended): every wait ends,
        not approved, before the pool is shut down (which waits for the calls)."""
        with self.waiting_lock:
            self.input_ended = True
            for waiter in self.waiting.values():
                waiter.event.set()
        super().close()

    def call_response(self, request_id: _RequestId, call: ToolCall,
                      shape: Callable[[Mapping[str, Any]], dict[str, Any]],
                      deadline: float | None = None) -> dict[str, Any]:
        with self.in_flight_lock:
            round_ = self.rounds.pop(request_id, None) or _Round(self.session.era, {})
        try:
            result, asking = self.run_with_confirmation(request_id, call, round_, deadline)
            if asking is not None:
                return _result(request_id, self.input_required(call, asking))
            if result.error is not None and result.error.code == "tool_not_found":
                return _error(request_id, INVALID_PARAMS, "Unknown tool", result.to_model()["error"])
            return _result(request_id, self.rendered(result, shape))
        except BaseException as exc:  # noqa: BLE001 - on a worker thread: the request is still answered
            logger.error("tools/call failed outside the registry pipeline: %s",
                         describe_exception(exc, show_message=False))
            return _error(request_id, INTERNAL_ERROR, "Internal error")

    def run_with_confirmation(self, request_id: _RequestId, call: ToolCall, round_: _Round,
                              deadline: float | None) -> tuple[ToolResult, _Confirmation | None]:
        """The call's result, or (on 2026-07-28) the confirmation to ask the client for instead."""
        modern = round_.era == "modern"
        if modern:
            answered = self.answered_confirmation(call, round_.params)
            if isinstance(answered, ToolResult):
                return answered, None
            if answered is not None:
                return self.registry.invoke(call, actor=self.actor, approval=answered, deadline=deadline,
                                            as_task=is_task_call(call)), None
        result = self.invoke(call, deadline)
        if result.error is None or result.error.code != "approval_required":
            return result, None
        capabilities = (round_.params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") \
            if modern else self.session.client_capabilities
        if not _can_elicit_form(capabilities):
            return result, None  # the approval_required error, with its approval request, for the host
        confirmation = self.confirmation_for(call)
        if modern:
            return result, confirmation
        answer = self.elicit(request_id, call, confirmation)
        if answer is True:
            fresh = time.monotonic() + self.registry.spec(call.name).timeout_ms / 1000.0  # the user's time is not the tool's
            return self.registry.invoke(call, actor=self.actor, approval=self.approval_of(confirmation),
                                        deadline=fresh, as_task=is_task_call(call)), None
        if answer is False:
            return self.declined(call), None
        return result, None  # no answer in time, or an answer that is no confirmation: not approved

    def confirmation_for(self, call: ToolCall) -> _Confirmation:
        return _Confirmation(call.name, self.registry.fingerprint(call.name, call.arguments), self.actor.id,
                             self.actor.tenant, time.time() + APPROVAL_TTL_S, secrets.token_hex(12))

    def approval_of(self, confirmation: _Confirmation) -> Approval:
        """The approval a confirmed request grants: exactly that call, by that actor; single-use where the
        policy says so because its id is the confirmation's own nonce (the registry spends it)."""
        return Approval(approval_id="apr_" + confirmation.nonce, tool=confirmation.tool,
                        fingerprint=confirmation.fingerprint, tenant=confirmation.tenant,
                        actor_id=confirmation.actor_id, approver=APPROVER, expires_at=confirmation.expires_at)

    def declined(self, call: ToolCall) -> ToolResult:
        error = ToolError.from_code("approval_declined")
        return ToolResult(ok=False, outcome=Outcome.REJECTED, tool=call.name, error=error, call_id=call.call_id)

    def answered_confirmation(self, call: ToolCall, params: Mapping[str, Any]) -> Approval | ToolResult | None:
        """A 2026-07-28 retry's answer: an Approval (confirmed, for exactly this call by this actor), a
        declined result, or None (no answer, or one for another call, actor or a state we did not seal)."""
        confirmation = self.seal.open(params.get("requestState"))
        responses = params.get("inputResponses")
        if confirmation is None or not isinstance(responses, Mapping):
            return None
        if (confirmation.tool, confirmation.actor_id, confirmation.tenant) != (call.name, self.actor.id,
                                                                               self.actor.tenant):
            return None
        try:
            if confirmation.fingerprint != self.registry.fingerprint(call.name, call.arguments):
                return None
        except Exception:  # noqa: BLE001 - arguments that cannot be fingerprinted: the registry refuses them
            return None
        if confirmation.expires_at < time.time():
            return None
        verdict = _confirmed(responses.get(CONFIRM_KEY))
        if verdict is None:
            return None
        return self.approval_of(confirmation) if verdict else self.declined(call)

    # -- what the user is asked ------------------------------------------------------------------

    def confirmation_request(self, call: ToolCall) -> dict[str, Any]:
        """elicitation/create params (form mode) asking the user to confirm exactly `call`; the arguments
        are quoted with the tool's redacted fields masked."""
        spec = self.registry.spec(call.name)
        shown = json.dumps(redact(dict(call.arguments), spec.redact), ensure_ascii=False, sort_keys=True,
                           default=str)
        if len(shown) > MAX_QUOTED_ARGUMENTS_CHARS:
            shown = shown[:MAX_QUOTED_ARGUMENTS_CHARS] + "..."
        params: dict[str, Any] = {
            "message": f"Allow the tool {call.name} to run once as {self.actor.id} with these arguments? {shown}",
            "requestedSchema": {
                "type": "object",
                "properties": {CONFIRM_KEY: {"type": "boolean", "title": f"Run {call.name}",
                                             "description": "Yes runs exactly this call once."}},
                "required": [CONFIRM_KEY],
            },
        }
        if self.session.era == "modern" or self.session.protocol_version == "2025-11-25":
            params["mode"] = "form"
        return params

    def input_required(self, call: ToolCall, confirmation: _Confirmation) -> dict[str, Any]:
        """The 2026-07-28 multi-round-trip result asking the client to confirm exactly `call`: one form
        elicitation, and the sealed state the retry must carry back."""
        shaped = self.modern_shape({})
        shaped["resultType"] = "input_required"
        shaped["inputRequests"] = {CONFIRM_KEY: {"method": "elicitation/create",
                                                 "params": self.confirmation_request(call)}}
        shaped["requestState"] = self.seal.seal(confirmation)
        return shaped

    def elicit(self, request_id: _RequestId, call: ToolCall, confirmation: _Confirmation) -> bool | None:
        """Ask the user (elicitation/create) and wait: True confirmed, False declined, None no answer (in
        CONFIRM_WAIT_S, or before the request was abandoned or the input ended: never an approval)."""
        with self.in_flight_lock:
            tracker = self.in_flight.get(request_id)
        asked = f"agent-lab-confirm-{next(self.asked)}"
        waiter = _Waiter(request_id)
        with self.waiting_lock:  # `abandon` and `close` set their flag, then wake the waiters under this lock
            if self.input_ended or (tracker is not None and tracker.abandoned.is_set()):
                return None
            self.waiting[asked] = waiter
        try:
            self.writer.send({"jsonrpc": "2.0", "id": asked, "method": "elicitation/create",
                              "params": self.confirmation_request(call)})
            waiter.event.wait(CONFIRM_WAIT_S)
        finally:
            with self.waiting_lock:
                self.waiting.pop(asked, None)
        if tracker is not None and tracker.abandoned.is_set():
            return None  # an answer that came as the client went is not taken: nobody would see the call's result
        message = waiter.message
        if not isinstance(message, Mapping) or not isinstance(message.get("result"), Mapping):
            return None
        return _confirmed(message["result"])


def _confirmed(answer: Any) -> bool | None:
    """An ElicitResult as a verdict: True accepted with confirm true, False declined (or confirm false,
    or cancelled), None for anything else."""
    if not isinstance(answer, Mapping):
        return None
    action = answer.get("action")
    if action in ("decline", "cancel"):
        return False
    if action != "accept":
        return None
    content = answer.get("content")
    if not isinstance(content, Mapping) or not isinstance(content.get(CONFIRM_KEY), bool):
        return None
    return content[CONFIRM_KEY]


# -- the front door --------------------------------------------------------------------------------


def serve_gateway(
    registry: Any,
    *,
    actor: Actor,
    stdin: BinaryIO | TextIO | None = None,
    stdout: BinaryIO | TextIO | None = None,
    page_size: int = 50,
    server_name: str = "agent-lab-gateway",
    server_version: str = __version__,
    max_workers: int = DEFAULT_MAX_WORKERS,
    confirm_key: bytes | None = None,
) -> int:
    """Serve `registry` (from `open_gateway`) over MCP stdio as `actor`, asking the client's user to
    confirm calls that need approval (see the module); returns the process exit code like `serve`.
    `confirm_key` seals the 2026-07-28 requestState (default: a random key of this process)."""
    import sys

    if not isinstance(actor, Actor):
        raise TypeError("serve_gateway() needs actor=Actor(...): the identity every tool call runs as")
    source = stdin if stdin is not None else sys.stdin.buffer
    with _protocol_stream(stdout) as sink:
        return _serve_lines(registry, actor=actor, source=source, writer=_LineWriter(sink), approvals=None,
                            page_size=page_size, server_info={"name": server_name, "version": server_version},
                            max_workers=max_workers,
                            server_class=functools.partial(_GatewayServer, seal=_Seal(confirm_key)))
