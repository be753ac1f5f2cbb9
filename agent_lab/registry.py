"""Registry: the one place a proposed tool call is checked, run and recorded.

`invoke` runs DESIGN.md's steps in one fixed order, for every tool, with no bypass:

    route -> schema -> permission -> approval -> deadline -> idempotency -> execute -> output -> record

Each pre-run step is a small method that returns None (go on) or a `ToolResult` that stops the call
(a refusal, or a replayed receipt); `invoke` stops at the first one and goes straight to record.
Nothing a handler or a model does escapes as an exception: whatever `invoke` is given, it returns a
`ToolResult`. The one thing that passes through is the caller's own request to stop (a real Ctrl-C on
the main thread; `agent_lab.interrupts` says exactly how it is told from a handler's `sys.exit`).

Decisions worth knowing (each is also noted where it is made):

* A tool the actor lacks the permission for is invisible: the route step answers `tool_not_found`
  for it exactly as for a name that is not registered, so the model never learns that it exists.
* A resource guard that answers False makes the resource invisible: `not_found`, outcome rejected,
  the same answer as for a resource that does not exist, so another tenant's data never leaks.
* Nothing below a redacted field leaves the process, keys included: schema violations below one are
  reported as one violation of the field (`redaction.redact_violations`).
* A write whose outcome is unknown (it raised, timed out, or returned broken output) keeps a receipt,
  so the same key replays "unknown, look it up" instead of repeating the effect.
* A refusal before any effect, and a failure known to have had no effect that a retry could fix,
  release the reservation, so a corrected or later retry with the same key can run.
* The call's deadline is fixed once, when the tool is known: min(caller's deadline, start + timeout_ms).
  Every pre-run step counts against it, every store call waits at most until it, and it is checked
  again after the key is reserved and right before the handler starts: no handler starts late. The
  check of what the handler hands back counts too: a run that ends past the deadline (handler and
  check) is a timeout however the caller learns of it (`_overran`).
* A sync write that overruns its deadline keeps running on its worker and keeps its reservation for
  a bounded late-completion window; when it finishes, its real result becomes the receipt (exactly one
  effect either way). Past the window the key answers `outcome_unknown` here, but its lease is renewed
  until the handler returns, so other processes see it in progress and nobody can resolve it meanwhile.
  An async handler is cancelled at its deadline instead; for a write the receipt then
  says "unknown".
* A call holds its key in this registry from reservation until its outcome is stored, and one
  lease-keeper thread renews the store's lease of every held key meanwhile (see `agent_lab.leases`).
  A write whose reservation lapses without a receipt (its process died, or its receipt could not be
  stored) is `outcome_unknown` for good: never a second run, until `resolve_unknown` settles it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import logging
import math
import secrets
import sys
import threading
import time
from typing import Any, Callable, Mapping, Optional

from .audit import AuditSink, audit_record
from .calls import CallIds, InvalidJSONArguments, ToolCall, ToolResult
from .context import CallContext
from .errors import CATALOGUE, NextAction, Outcome, ToolError
from .execution import (
    PROCESS_EXITS,
    ContextMode,
    Handler,
    LoopThread,
    OverBudget,
    PoolClosed,
    Run,
    RunKind,
    WorkerPool,
    describe_exception,
    is_deadline,
    measured_json_copy,
    plain_deadline,
    plain_json_copy,
    run_async,
    run_sync_for,
    seconds_left,
    type_name,
)
from .fingerprint import Fingerprinter, NotCanonicalJSON, has_lone_surrogate, new_fingerprint_key
from .interrupts import raise_stop_request, stop_request
from .leases import LATE_COMPLETION_WINDOW_S, RECEIPT_RETRY_TIMEOUT_S, Hold, KeyHolder, ReceiptNote
from .stores import InMemoryReceiptStore, Lapse, ReceiptKey, ReceiptStore, ReceiptStoreUnavailable, ReservationStatus
from .jsonvalue import check_json_value, compact_json_writer, find_non_json
from .names import NameIndex
from .policy import Actor, Approval, is_wall_clock_time
from .redaction import REDACTED
from .schema import MAX_INSTANCE_DEPTH
from .spec import ApprovalPolicy, Execution, RetryPolicy, ToolSpec

__all__ = [
    "MAX_CLOSE_NAMES",
    "MAX_REPORTED_VIOLATIONS",
    "MAX_OUTPUT_DEPTH",
    "STEPS",
    "Registry",
]

logger = logging.getLogger("agent_lab.registry")

STEPS = ("route", "schema", "permission", "approval", "deadline", "idempotency", "execute", "output", "record")
"""The step names, in order, as they appear in audit records (`step`: the last step reached)."""

MAX_REPORTED_VIOLATIONS = 20
"""At most this many schema violations are listed in an error's details. Validation stops at one more,
so `violation_count` is exact up to this many; past it `violations_truncated` is true (at least)."""

EXACT_SIZE_FACTOR = 4
"""Arguments or an output up to this many times the tool's byte budget (by the copying walk's lower
bound) are measured exactly when refused (`input_bytes`, `output_bytes`: a model can narrow its request
by the ratio); past it the walk stops reading and the refusal says `..._bytes_at_least`, so what a
refusal costs stays proportional to the budget, never to the value."""

MAX_CLOSE_NAMES = 3
"""How many near-miss tool names `tool_not_found` suggests."""

MAX_OUTPUT_DEPTH = 64
"""Handler output nested deeper than this is refused as invalid_tool_output (same limit as inputs)."""

MAX_ARGUMENT_COPY_DEPTH = MAX_INSTANCE_DEPTH + 1
"""The arguments are copied this deep: one level more than the schema step accepts, so every value
that passes it is a plain copy, and deeper (or cyclic) values are left for it to refuse."""

SUMMARY_VALUE_CHARS = 40
"""In an approval summary, a longer argument value is cut to this many characters and an ellipsis."""

SUMMARY_MAX_CHARS = 300
"""An approval summary longer than this is cut (it is one readable line, not the full call)."""

class _CallState:
    """Everything one invoke has learned so far. Internal and mutable; one per call.

    After the execute step, only the caller's thread writes it; a late-completion callback only reads
    the fields fixed before execution (spec, tool, call_id, fingerprint, receipt_key, hold, redact)
    and sets receipt_note. A plain class with class-level defaults: one is made per call, and a
    dataclass that sets every field costs several times as much to build.
    """

    # Class-level defaults: a call sets only what it learns (most reads never touch half of these).
    arguments: Any = None  # a plain copy of the call's arguments, taken once by the schema step
    sized = False  # the arguments are within the tool's input budget (they may be fingerprinted)
    spec: Optional[ToolSpec] = None
    handler: Optional[Handler] = None
    fingerprint: Optional[str] = None  # made when a step or the audit record needs it (`_fingerprint`)
    step = "route"
    call_deadline: Optional[float] = None  # min(caller's deadline, start + timeout_ms), fixed by route
    receipt_key: Optional[ReceiptKey] = None
    hold: Optional[Hold] = None  # this call holds an idempotency reservation (its owner token is in it)
    late_pending = False  # a late handler will complete the reservation itself
    finished_late = False  # the handler and the check of what it handed back ended past the deadline
    receipt_result: Optional[ToolResult] = None  # the key's receipt, when it is not the call's result (overran)
    receipt_note: Optional[ReceiptNote] = None  # what became of the receipt, for the audit record
    approval_used: Optional[Approval] = None
    interrupted_run: Optional[Run] = None  # what the pool job had done when an ainvoke caller was cancelled
    attempt: Optional[int] = None  # the attempt number a retry runner gave (agent_lab.retry), for the audit
    redact: frozenset = frozenset()

    def __init__(self, call: Any, actor: Any, approval: Any, deadline: Any, call_id: str, started: float,
                 started_monotonic: float, tool: str = "", spec: Optional[ToolSpec] = None,
                 redact: Optional[frozenset] = None) -> None:
        self.call = call
        self.actor = actor
        self.approval = approval
        self.deadline = deadline
        self.call_id = call_id
        self.started = started
        self.started_monotonic = started_monotonic
        self.tool = tool
        if spec is not None:
            self.spec = spec
        if redact is not None:
            self.redact = redact

    def result(self, *, ok: bool, outcome: Outcome, output: Any = None, error: Optional[ToolError] = None) -> ToolResult:
        return ToolResult._fast(ok, outcome, self.tool, output, error, self.call_id, self.fingerprint, self.redact)

    def refusal(
        self,
        code: str,
        message: Optional[str] = None,
        *,
        details: Optional[Mapping[str, Any]] = None,
        outcome: Optional[Outcome] = None,
        retryable: Optional[bool] = None,
        next_action: Optional[NextAction] = None,
    ) -> ToolResult:
        """An error result for a catalogue code; the catalogue gives whatever is not said here."""
        error = ToolError.from_code(code, message, details=details, retryable=retryable, next_action=next_action)
        return self.result(ok=False, outcome=CATALOGUE[code].outcome if outcome is None else outcome, error=error)


class Registry:
    """Holds tools (a `ToolSpec` and its handler each) and runs proposed calls through the fixed steps.

    `receipts`: where idempotency receipts live (default: a fresh `InMemoryReceiptStore`). The store
    also holds the key argument fingerprints are made with (`fingerprint_key`), so every registry on
    one durable store fingerprints a call alike, across processes and restarts; a store that has none
    gives this registry a random key.
    `audit`: an optional sink that receives one redacted record per invoke.
    `max_workers`: size of the worker pool sync handlers run on (created on first use).
    `cursor_secret`: key for page cursors handed to handlers as `ctx.cursors` (default: random per process).
    `cursor_lifetime_s`: how long such a cursor reads back after it was issued (default one hour).
    `clock`: wall clock for approval expiry and cursor lifetimes (receipt stores keep their own clock).
    `run_inline`: run every sync handler on the caller's thread under `invoke`, as a tool declared
    `ToolSpec(execution="inline")` is run (see `_execute_inline` for the deadline's meaning there);
    for measuring overhead. Per tool, prefer the spec's option: only trusted, fast handlers belong
    on the caller's thread, since the caller cannot stop waiting at the deadline.
    `late_completion_s`: how long past its deadline a sync write that still runs keeps its key held
    (default `LATE_COMPLETION_WINDOW_S`); after it the key is `outcome_unknown` until resolved.
    `renew_every_s`: how often the lease keeper renews held leases (default: a third of the store's lease).
    """

    def __init__(
        self,
        *,
        receipts: Optional[ReceiptStore] = None,
        audit: Optional[AuditSink] = None,
        max_workers: int = 8,
        cursor_secret: Optional[bytes] = None,
        cursor_lifetime_s: Optional[float] = None,
        clock: Callable[[], float] = time.time,
        run_inline: bool = False,
        late_completion_s: float = LATE_COMPLETION_WINDOW_S,
        renew_every_s: Optional[float] = None,
    ) -> None:
        if cursor_secret is not None and not isinstance(cursor_secret, (bytes, bytearray)):
            raise TypeError("cursor_secret must be bytes or None")
        if cursor_secret is not None:  # checked now, not by the codec on first use: every ctx call would fail
            from .cursor import MIN_SECRET_BYTES

            if len(cursor_secret) < MIN_SECRET_BYTES:
                raise ValueError(f"cursor_secret must be at least {MIN_SECRET_BYTES} bytes long")
        if cursor_lifetime_s is not None and (isinstance(cursor_lifetime_s, bool) or not isinstance(
                cursor_lifetime_s, (int, float)) or not (math.isfinite(cursor_lifetime_s) and cursor_lifetime_s >= 1)):
            raise ValueError("cursor_lifetime_s must be a finite number of seconds, at least 1")
        for name, value in (("late_completion_s", late_completion_s), ("renew_every_s", renew_every_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 <= value < math.inf or (name == "renew_every_s" and value == 0)):
                raise ValueError(f"{name} must be a finite number of seconds ({'>= 0' if name[0] == 'l' else '> 0'})")
        self._owns_receipts = receipts is None
        self._receipts: ReceiptStore = InMemoryReceiptStore() if receipts is None else receipts
        stored_key = getattr(self._receipts, "fingerprint_key", None)
        self._fingerprints = Fingerprinter(stored_key if stored_key is not None else new_fingerprint_key())
        self._late_completion_s = float(late_completion_s)
        self._holder = KeyHolder(self._receipts, late_completion_s=self._late_completion_s, renew_every_s=renew_every_s)
        self._audit = audit
        self._pool = WorkerPool(max_workers)
        self._loop_thread = LoopThread()
        self._cursor_secret = bytes(cursor_secret) if cursor_secret is not None else None
        self._cursor_lifetime_s = cursor_lifetime_s
        self._cursors: Any = None
        self._clock = clock
        self._run_inline = bool(run_inline)
        self._call_ids = CallIds()
        # Copy-on-write: `register` swaps in a new dict under the lock; readers (invoke's route,
        # catalog, names) take the current one without locking and never see it change under them.
        self._tools: Mapping[str, tuple[ToolSpec, Handler]] = {}
        # The permissions the tools require; replaced before `_tools` is, so it covers every snapshot.
        self._tool_permissions: frozenset[Optional[str]] = frozenset()
        self._name_index = NameIndex()  # every name in any `_tools` snapshot is in it (added first)
        self._lock = threading.Lock()
        self._closed = False

    # -- tools -----------------------------------------------------------------------------------

    def register(self, spec: ToolSpec, handler: Callable[..., Any]) -> None:
        """Add a tool. Its handler takes `(arguments)` or `(arguments, ctx)` and may be `async def`.

        The handler's signature is checked here: one that cannot be called either way (say
        `lambda a, b, c: ...`) is a TypeError now, not a `handler_exception` on every call.
        Safe to call while other threads invoke, list or register tools.
        """
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"register() needs a ToolSpec, not {type(spec).__name__}")
        self._check_lease_covers(spec)
        if spec.single_use_approval and not callable(getattr(self._receipts, "consume_approval", None)):
            raise ValueError(f"tool {spec.name!r} has single_use_approval, but the receipt store "
                             f"({type(self._receipts).__name__}) keeps no approval ledger (consume_approval)")
        wrapped = Handler.wrap(handler, redacts=bool(spec.redact))
        if spec.execution is Execution.INLINE and wrapped.is_async:
            raise ValueError(f"tool {spec.name!r} has execution='inline', which runs a sync handler on the caller's "
                             f"thread; an async handler already runs without a thread hand-off (drop the option)")
        with self._lock:
            if spec.name in self._tools:
                raise ValueError(f"a tool named {spec.name!r} is already registered")
            tools = dict(self._tools)
            tools[spec.name] = (spec, wrapped)
            self._name_index.add(spec.name)
            if spec.required_permission not in self._tool_permissions:  # None too: `Actor.may` decides it
                self._tool_permissions = self._tool_permissions | {spec.required_permission}
            self._tools = tools

    def _check_lease_covers(self, spec: ToolSpec) -> None:
        """A key's lease must outlast its longest run even if no renewal got through: the tool's
        timeout, plus (for a write) the late-completion window. Otherwise a live but slow handler's
        key could lapse to `unknown` (a write) or be taken over (a read) in other processes.

        A store the registry made itself is seen by this registry alone, which holds its keys in
        process anyway, so only a store passed in is checked."""
        lease_s = getattr(self._receipts, "lease_s", None)
        if spec.idempotency_key is None or self._owns_receipts or not isinstance(lease_s, (int, float)):
            return
        needed_s = spec.timeout_ms / 1000.0 + (self._late_completion_s if spec.writes else 0.0)
        if lease_s < needed_s:
            window = f" plus the late-completion window ({self._late_completion_s:g} s)" if spec.writes else ""
            raise ValueError(
                f"tool {spec.name!r}: the receipt store's lease_s ({lease_s:g} s) is shorter than the tool's "
                f"timeout_ms ({spec.timeout_ms:g} ms){window}, {needed_s:g} s in all; give the store a longer "
                f"lease_s, or the tool a shorter timeout_ms"
            )

    def catalog(self, actor: Optional[Actor] = None) -> list[dict[str, Any]]:
        """Model-facing halves of the tools, in registration order; with an actor, only those it may call
        (the others answer a call exactly like a tool that does not exist). Each entry is a new dict;
        its schemas are the specs' own read-only ones (see `ToolSpec.catalog_entry`)."""
        specs = [spec for spec, _ in self._tools.values()]
        if actor is not None:
            specs = [spec for spec in specs if actor.may(spec.required_permission)]
        return [spec.catalog_entry() for spec in specs]  # read-only schemas, shared, not copied

    def spec(self, name: str) -> ToolSpec:
        """The spec registered under `name` (KeyError if there is none)."""
        try:
            return self._tools[name][0]
        except KeyError:
            raise KeyError(f"no tool named {name!r} is registered") from None

    def names(self) -> list[str]:
        return list(self._tools)

    def handler(self, name: str) -> Callable[..., Any]:
        """The function registered as `name`'s handler, exactly as given to `register` (KeyError if
        there is none). For tools that read where a tool is defined: `agent_lab.lint` points a finding
        at the file and line of its handler's source."""
        try:
            return self._tools[name][1].function
        except KeyError:
            raise KeyError(f"no tool named {name!r} is registered") from None

    def search(self, query: str, *, actor: Optional[Actor] = None, limit: int = 5) -> list[dict[str, Any]]:
        """The model-facing halves of the `limit` tools that best match `query` (BM25 over names,
        descriptions and input properties), best first; with an actor, only tools it may call, exactly
        as in `catalog(actor)`. See `agent_lab.search`."""
        from .search import search_registry

        return search_registry(self, query, actor=actor, limit=limit)

    @property
    def receipts(self) -> ReceiptStore:
        return self._receipts

    # -- fingerprints, approvals and unknown keys -------------------------------------------------

    def fingerprint(self, tool: str, arguments: Any) -> str:
        """The keyed fingerprint this registry gives a call (`agent_lab.fingerprint.fingerprint` with
        its key): what approvals bind to and receipts are matched by. Raises NotCanonicalJSON."""
        return self._fingerprints.fingerprint(tool, arguments)

    def approval_for(
        self,
        call: ToolCall,
        *,
        actor: Actor,
        approver: str,
        ttl_s: float = 300.0,
        now: Optional[float] = None,
    ) -> Approval:
        """A person's approval of exactly `call` by `actor` (its id and tenant), valid for `ttl_s` seconds from
        `now` (default: this registry's clock). It binds to this registry's keyed fingerprint, so it
        is only valid on registries sharing its receipt store (or its fingerprint key)."""
        return Approval.for_call(call, actor=actor, approver=approver, registry=self, ttl_s=ttl_s,
                                 now=self._clock() if now is None else now)

    def resolve_unknown(
        self,
        tool: str,
        key: str,
        *,
        tenant: str,
        happened: bool,
        output: Any = None,
        timeout_s: Optional[float] = None,
    ) -> bool:
        """Settle an idempotency key that answers `outcome_unknown` (its holder died, or its receipt
        could not be stored), once the application has found out what happened.

        `happened=True`: the effect took place and `output` is its result (checked against the tool's
        output schema; its `redact` fields are masked): later calls with the same arguments replay it.
        `happened=False`: it did not take place: the key is free, and the next call runs the tool.
        Returns False when the key is not unknown (still running here or on another host, already
        settled, free), and when the store did not answer within `timeout_s` (unreachable, locked, or
        its commit unconfirmed: a resolution whose answer was lost may still have landed, so look the
        key up before resolving it again). Never raises for a store failure. Say "did not happen" only
        when you know: a handler still running somewhere would then take effect a second time.
        """
        spec = self.spec(tool)
        receipt_key = ReceiptKey(tenant, spec.name, key)
        result: Optional[ToolResult] = None
        if happened:
            result = self._resolved_result(spec, output)
        held = self._holder.owner_of_unknown(receipt_key)
        if held is not None and held.still_running:  # its handler runs here still: nobody knows yet
            return False
        if held is not None:  # this process gave up on the key: its owner token still holds the row
            record = _resolved_record(result, held.fingerprint)
            note = self._holder.settle(held, record, timeout_s=RECEIPT_RETRY_TIMEOUT_S if timeout_s is None else timeout_s)
            return note in (ReceiptNote.STORED, ReceiptNote.RELEASED)
        try:
            found = self._receipts.lookup(receipt_key, timeout_s=timeout_s)
            if found is None or found.status is not ReservationStatus.UNKNOWN or found.fingerprint is None:
                return False
            record = _resolved_record(result, found.fingerprint)
            return self._receipts.resolve(receipt_key, found.fingerprint, record=record, timeout_s=timeout_s) is True
        except (ReceiptStoreUnavailable, OSError) as exception:
            logger.warning("receipt store could not resolve a key of tool %r: %s", spec.name, type(exception).__name__)
            return False

    def _resolved_result(self, spec: ToolSpec, output: Any) -> ToolResult:
        """The result a resolved key replays: `output`, checked like a handler's."""
        state = _CallState(call=None, actor=None, approval=None, deadline=None, call_id="resolved",
                           started=time.perf_counter(), started_monotonic=time.monotonic(), tool=spec.name,
                           spec=spec, redact=frozenset(spec.redact))
        result = self._output_result(state, output)
        if not result.ok:
            raise ValueError(f"output does not fit the output contract of tool {spec.name!r} "
                             f"({result.error.code if result.error else 'invalid'})")
        return result

    def wait_settled(self, timeout_s: Optional[float] = None) -> bool:
        """Wait until every key this registry holds is settled: its receipt stored, its key released,
        or given up as unknown (a late handler past its window, a store that kept failing). True when
        settled, False when `timeout_s` ran out first. For tests and graceful shutdowns."""
        return self._holder.wait_settled(timeout_s)

    @property
    def cursors(self) -> Any:
        """The `CursorCodec` handlers use (via `ctx.cursors`) to issue and read page cursors."""
        if self._cursors is None:
            from .cursor import DEFAULT_CURSOR_LIFETIME_S, CursorCodec

            lifetime_s = DEFAULT_CURSOR_LIFETIME_S if self._cursor_lifetime_s is None else self._cursor_lifetime_s
            codec = CursorCodec(self._cursor_secret if self._cursor_secret is not None else secrets.token_bytes(32),
                                lifetime_s=lifetime_s, clock=self._clock)
            with self._lock:
                if self._cursors is None:
                    self._cursors = codec
        return self._cursors

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self, *, wait: bool = False) -> None:
        """Stop the worker pool and the event-loop thread. Queued jobs are dropped; handlers already
        running finish on their own (with wait=True, close waits for them), and the lease of a write
        still running stays renewed until it returns, so keep a store you passed in open that long. A
        receipt store the registry made itself is closed too; one passed in belongs to the caller."""
        self._closed = True
        self._pool.close(wait=wait)
        self._loop_thread.close()
        if wait:
            self._holder.wait_settled(RECEIPT_RETRY_TIMEOUT_S * 2)
        self._holder.close(store_closed=self._owns_receipts)
        if self._owns_receipts:
            self._receipts.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- invoke ----------------------------------------------------------------------------------

    def invoke(
        self,
        call: ToolCall,
        *,
        actor: Actor,
        approval: Optional[Approval] = None,
        deadline: Optional[float] = None,
        attempt: Optional[int] = None,
    ) -> ToolResult:
        """Check, run and record one proposed call. Never raises for anything a model, a handler or a
        store does (see the module docstring); `call` not being a ToolCall is the developer's TypeError.

        `deadline` is an absolute `time.monotonic()` time for the whole call (None: the tool's timeout only);
        the call's own deadline is the earlier of it and the start of invoke plus the tool's timeout_ms.
        `attempt`: which attempt of a retried call this is (1, 2, ...), written to the audit record; a
        retry runner (`agent_lab.retry.Retrier`) sets it. Anything but a positive int is recorded as None.
        """
        state = self._start(call, actor, approval, deadline)
        if attempt is not None:
            state.attempt = _attempt_number(attempt)
        try:
            result = self._admit(state)
            if result is None:
                result = self._conclude(state, self._execute(state))
        except BaseException as exception:  # noqa: BLE001 - a bug in a step must not escape either
            self._stop_if_requested(state, exception)
            result = self._internal_error(state)
        return self._record(state, result)

    async def ainvoke(
        self,
        call: ToolCall,
        *,
        actor: Actor,
        approval: Optional[Approval] = None,
        deadline: Optional[float] = None,
        attempt: Optional[int] = None,
    ) -> ToolResult:
        """`invoke` for asyncio callers: async handlers are awaited (and cancelled at the deadline) on
        the caller's loop; sync handlers run on the worker pool without blocking the loop (also with
        run_inline=True, which would block it). The receipt store is called directly (it is fast and
        local); a cancellation of the caller is recorded and then propagates."""
        import asyncio  # here, not at the top: a process that never awaits a tool never pays for it
        state = self._start(call, actor, approval, deadline)
        if attempt is not None:
            state.attempt = _attempt_number(attempt)
        cancelled = False
        try:
            result = self._admit(state)
            if result is None:
                try:
                    run = await self._aexecute(state)
                except asyncio.CancelledError:
                    # The caller itself was cancelled: record what we know, then let the cancellation through.
                    cancelled = True
                    run = state.interrupted_run or Run.timed_out()
                result = self._conclude(state, run)
        except BaseException as exception:  # noqa: BLE001
            self._stop_if_requested(state, exception)
            result = self._internal_error(state)
        result = self._record(state, result)
        if cancelled:
            raise asyncio.CancelledError()
        return result

    # -- step 0: start and route -----------------------------------------------------------------

    def _start(self, call: Any, actor: Any, approval: Any, deadline: Any) -> _CallState:
        """Collect the inputs; nothing here can fail, whatever a model proposed. A `call` that is not a
        ToolCall (a dict, say) is a TypeError: the developer's mistake, not arguments a model could fix."""
        if not isinstance(call, ToolCall):
            raise TypeError(f"invoke takes a ToolCall, not {type(call).__name__}: build one with "
                            "ToolCall(name, arguments) or a parser from agent_lab.adapters")
        call_id = call.call_id
        call_id = str.__str__(call_id) if isinstance(call_id, str) and call_id else self._call_ids.next()
        # Plain text only: a str subclass could hash or compare like another tool's name.
        name = call.name
        tool = name if type(name) is str else str.__str__(name) if isinstance(name, str) else ""
        return _CallState(call, actor, approval, deadline, call_id, time.perf_counter(), time.monotonic(), tool)

    def _admit(self, state: _CallState) -> Optional[ToolResult]:
        """Run the pre-run steps in order; the first that answers stops the call. (Written out, not a
        loop over a table of steps: building that table of bound methods cost a tenth of a read call.)"""
        state.step = "route"
        answer = self._route(state)
        if answer is None:
            state.step = "schema"
            answer = self._check_schema(state)
        if answer is None:
            state.step = "permission"
            answer = self._check_permission(state)
        if answer is None:
            state.step = "approval"
            answer = self._check_approval(state)
        if answer is None:
            state.step = "deadline"
            answer = self._check_deadline(state)
        if answer is None:
            state.step = "idempotency"
            answer = self._reserve_key(state)
            if answer is None:
                answer = self._spend_approval(state)
        return answer

    def _route(self, state: _CallState) -> Optional[ToolResult]:
        """Find the tool. A malformed call is invalid_arguments; an unknown name is tool_not_found.

        A tool the actor lacks the permission for is not in its catalog, and answers exactly like a
        tool that does not exist (same code, message, close names, outcome and audit step), before its
        schema is looked at: neither a `permission_denied` nor an `invalid_arguments` naming the tool's
        fields may tell the model that it exists. (An `actor` that is not an Actor at all is the
        application's mistake, not the model's: the permission step refuses it.)
        """
        if self._closed:
            return state.refusal("internal_error", "The tool registry is closed; the tool did not run.")
        if not isinstance(state.call.name, str):
            return _malformed_call(state, "The tool name must be a string.")
        tools = self._tools
        entry = tools.get(state.tool)
        if entry is None or (isinstance(state.actor, Actor) and not state.actor.may(entry[0].required_permission)):
            close_names = _close_names(self._name_index, tools, self._tool_permissions, state)
            return state.refusal("tool_not_found", details={"close_names": close_names})
        spec, state.handler = entry
        state.spec = spec
        if spec.redact:
            state.redact = frozenset(spec.redact)
        state.call_deadline = _call_deadline(state, spec)
        return None

    # -- step 1: schema --------------------------------------------------------------------------

    def _check_schema(self, state: _CallState) -> Optional[ToolResult]:
        """Arguments against the input schema: the first violations (capped), each with its JSON Pointers.

        One walk copies the arguments (see `plain_json_copy`) and bounds their size. The size comes
        first: arguments over the tool's `max_input_bytes` (compact UTF-8 JSON) are refused before any
        fingerprint or validation work. The walk gives up once it has read more than
        `EXACT_SIZE_FACTOR` times the budget (a byte a node and a character at least), so a call's
        cost is bounded by the budget, not by the value: such a refusal says `input_bytes_at_least`.
        Arguments the walk read to the end but could not prove within budget are measured exactly by
        the C encoder (`input_bytes`). Then
        `is_valid`; only a call that fails it pays for `errors`, which stops once it has one violation
        more than it reports (`violations_truncated` then says there may be more), so invalid input
        costs no more than valid input; and the patterns it runs are ones a model cannot make slow
        (`regex_safety`). Arguments the validator accepts must also have a canonical JSON form (the
        one the fingerprint hashes): the walk proves that for ordinary values; others (a 5,000-digit
        integer, say) are checked by building it. The fingerprint itself is made only when a step or
        the audit record needs it (`_fingerprint`)."""
        spec = state.spec
        assert spec is not None
        if isinstance(state.call.arguments, InvalidJSONArguments):  # a host sent text we could not read
            return _malformed_call(state, _sentence(state.call.arguments.reason))  # each reason says what it is
        # From here on every step, and the handler, sees this one copy (see plain_json_copy). The walk
        # stops as soon as the copy is certainly over budget, so refusing a huge value costs the budget.
        try:
            arguments, plain, bound = measured_json_copy(state.call.arguments, MAX_ARGUMENT_COPY_DEPTH,
                                                         spec.max_input_bytes * EXACT_SIZE_FACTOR)
        except OverBudget:
            return state.refusal("input_too_large", details={
                "max_input_bytes": spec.max_input_bytes,
                "input_bytes_at_least": spec.max_input_bytes * EXACT_SIZE_FACTOR + 1})
        state.arguments = arguments
        if not plain or bound is None or bound > spec.max_input_bytes:
            size = _json_size(arguments)
            if size is not None and size > spec.max_input_bytes:
                return state.refusal("input_too_large",
                                     details={"max_input_bytes": spec.max_input_bytes, "input_bytes": size})
        state.sized = True
        if self._audit is not None:  # every audit record of a call with readable arguments carries it
            self._fingerprint(state)
        checked = plain and bound is not None
        if checked and spec.input_validator.is_valid(arguments):
            return None  # valid, and canonical by construction (see measured_json_copy)
        # When is_valid has just said no, errors does not check the whole value again first.
        found = spec.input_validator.errors(arguments, limit=MAX_REPORTED_VIOLATIONS + 1, known_invalid=checked)
        violations = [_violation_dict(v) for v in found]
        if not violations:  # JSON the validator accepts, e.g. a 5,000-digit integer: is it canonical?
            try:
                state.fingerprint = self.fingerprint(spec.name, arguments)
            except NotCanonicalJSON as problem:
                violations = [_non_json_violation(problem.pointer, problem.reason)]
        if not violations:
            return None
        message, details = _violation_report(state, violations)
        return state.refusal("invalid_arguments", message, details=details)

    def _fingerprint(self, state: _CallState) -> Optional[str]:
        """The call's fingerprint, made on first need: by the approval step (an approval binds to it),
        the idempotency step (receipts are matched by it) or the audit record (it correlates a call
        with its approval and receipt). A read with none of those never pays for it. None while the
        arguments have not passed the size check, or have no canonical JSON form."""
        if state.fingerprint is None and state.sized and state.spec is not None:
            try:
                state.fingerprint = self._fingerprints.fingerprint(state.spec.name, state.arguments)
            except NotCanonicalJSON:
                return None
        return state.fingerprint

    # -- step 2: permission ----------------------------------------------------------------------

    def _check_permission(self, state: _CallState) -> Optional[ToolResult]:
        """Scopes first, then the resource guard. The actor comes from the application, never from
        the arguments: an argument named `actor` or `tenant` is just data to the registry. (An Actor
        without the tool's scope never gets here: to it the tool does not exist, see `_route`.)

        The guard is application code on the caller's thread, which nothing can interrupt: it does
        not start once the call's deadline has passed (`deadline_exceeded`), so hooks never stack up
        past it; one that returns late is refused by the deadline step. (Handing it to the worker
        pool would bound the wait, at a thread hand-off on every guarded call: see the README.)"""
        spec = state.spec
        assert spec is not None
        actor = state.actor
        if not isinstance(actor, Actor) or not actor.may(spec.required_permission):
            return state.refusal("permission_denied")
        if spec.resource_guard is None:
            return None
        if _passed(state.call_deadline):  # no application hook starts once the call's time is up
            return state.refusal("deadline_exceeded")
        try:
            visible = spec.resource_guard(_hook_arguments(state), actor) is True
        except BaseException as exception:  # noqa: BLE001 - sys.exit and GeneratorExit too
            raise_stop_request(exception)  # only the caller's own Ctrl-C passes
            logger.warning("resource guard of tool %r raised %s", spec.name, type_name(exception))
            return state.refusal("internal_error")
        if not visible:
            # Invisible: answered exactly like a resource that does not exist (never leak existence).
            return state.refusal("not_found", outcome=Outcome.REJECTED)
        return None

    # -- step 3: approval ------------------------------------------------------------------------

    def _check_approval(self, state: _CallState) -> Optional[ToolResult]:
        """An approval must be for this tool, these exact arguments (fingerprint) and this actor (its id
        and tenant). It is checked after the permission step and grants none: an actor the tool is
        hidden from never gets here, whatever approval it carries."""
        spec = state.spec
        assert spec is not None
        if spec.approval is ApprovalPolicy.NEVER:
            return None
        if spec.approval is ApprovalPolicy.CONDITIONAL and _passed(state.call_deadline):  # as for the guard
            return state.refusal("deadline_exceeded")
        try:
            needed = spec.approval is ApprovalPolicy.ALWAYS or spec.needs_approval(_hook_arguments(state))
        except BaseException as exception:  # noqa: BLE001 - sys.exit and GeneratorExit too
            raise_stop_request(exception)  # only the caller's own Ctrl-C passes
            logger.warning("approval condition of tool %r raised %s", spec.name, type_name(exception))
            return state.refusal("internal_error")
        if not needed:
            return None
        approval = state.approval
        self._fingerprint(state)  # the approval binds to it, and a refusal shows it
        if approval is None:
            return state.refusal("approval_required", details=self._approval_request(state))
        approval = _checked_approval(approval)
        if approval is None or not _approval_matches(approval, state):
            return state.refusal("approval_mismatch", details=self._approval_request(state))
        now = self._clock()
        if not is_wall_clock_time(now):  # NaN would compare as "not yet expired" for ever: fail closed
            logger.warning("the registry's clock returned %s, not a finite number; refusing approved calls",
                           type(now).__name__)
            return state.refusal("internal_error", "The registry's clock is not usable, so the approval cannot "
                                 "be checked; the tool did not run.")
        if Approval.expired(approval, now):  # the class's own check, on the checked fields
            return state.refusal("approval_expired", details=self._approval_request(state))
        state.approval_used = approval
        return None

    def _approval_request(self, state: _CallState) -> dict[str, Any]:
        """What a person needs to approve exactly this call: the tool, its fingerprint and a summary."""
        assert state.spec is not None
        return {
            "tool": state.spec.name,
            "fingerprint": state.fingerprint,
            "summary": call_summary(state.spec, state.arguments),
        }

    # -- step 4: deadline ------------------------------------------------------------------------

    def _check_deadline(self, state: _CallState) -> Optional[ToolResult]:
        """The call's deadline (the caller's, or the tool's timeout counted from the start of invoke)
        has already passed: nothing runs."""
        if state.deadline is not None and not is_deadline(state.deadline):
            logger.warning("invoke() got a deadline that is not a finite number; refusing the call")
            return state.refusal("internal_error", "The caller's deadline is not a number; the tool did not run.")
        if state.call_deadline is not None and time.monotonic() >= state.call_deadline:
            return state.refusal("deadline_exceeded")
        return None

    # -- step 5: idempotency ---------------------------------------------------------------------

    def _reserve_key(self, state: _CallState) -> Optional[ToolResult]:
        """Claim (tenant, tool, key) for this fingerprint, or answer from what already holds it.

        This process answers first for keys its own calls hold. The store is then asked, waiting no
        longer than the call's deadline; and a reservation that arrives after it is given back
        (`deadline_exceeded`), so no handler ever starts late or without a reservation.
        """
        spec = state.spec
        assert spec is not None
        if spec.idempotency_key is None:
            return None
        fingerprint = self._fingerprint(state)
        if fingerprint is None:
            raise AssertionError("a call that passed the schema step has a fingerprint")
        key_value = state.arguments[spec.idempotency_key]
        if has_lone_surrogate(key_value) or "\x00" in key_value:  # no database stores it as text: refused alike
            return _unstorable_key(state, spec.idempotency_key, key_value)
        state.receipt_key = _receipt_key(state.actor.tenant, spec.name, key_value)
        held = self._holder.answer(state.receipt_key, fingerprint)
        if held is not None:  # a call of this process holds the key, whatever the store's lease says
            return state.refusal(held)
        timeout_s = seconds_left(state.call_deadline)
        if timeout_s == 0:
            return state.refusal("deadline_exceeded")
        lapse = Lapse.UNKNOWN if spec.writes else Lapse.TAKEOVER
        try:
            reservation = self._receipts.reserve(state.receipt_key, fingerprint, lapse=lapse, timeout_s=timeout_s)
        except PROCESS_EXITS:
            raise
        except (ReceiptStoreUnavailable, OSError) as exception:
            logger.warning("receipt store could not reserve a key for %r: %s", spec.name, type(exception).__name__)
            return state.refusal("receipt_store_unavailable")
        status = reservation.status
        if status is ReservationStatus.RESERVED:
            if not isinstance(reservation.owner, str):
                raise TypeError("the receipt store reserved a key without an owner token")
            state.hold = self._holder.hold(state.receipt_key, fingerprint, reservation.owner,
                                           writes=spec.writes, tool=spec.name)
            if _passed(state.call_deadline):  # the reserve returned too late for the handler to start
                return state.refusal("deadline_exceeded")
            return None
        if status is ReservationStatus.REPLAY and reservation.record is not None:
            return _replayed(reservation.record, state)
        if status is ReservationStatus.CONFLICT:
            return state.refusal("idempotency_conflict")
        if status is ReservationStatus.UNKNOWN:
            return state.refusal("outcome_unknown")
        return state.refusal("idempotency_in_progress")

    def _spend_approval(self, state: _CallState) -> Optional[ToolResult]:
        """Spend a single-use approval (`ToolSpec.single_use_approval`) in the receipt store, which
        every registry sharing it consults: its first use goes on, any later one is `approval_used`.

        Spent last, after the key is reserved: a call refused before, or answered from its key (a
        replay, `idempotency_in_progress`), leaves the approval unspent. A refusal from here on
        releases the key; the approval stays spent (a person approves again: fail closed).
        """
        spec = state.spec
        approval = state.approval_used
        if approval is None or spec is None or not spec.single_use_approval:
            return None
        timeout_s = seconds_left(state.call_deadline)
        if timeout_s == 0:
            return state.refusal("deadline_exceeded")
        try:
            first_use = self._receipts.consume_approval(  # present: register checked it
                approval.tenant, approval.approval_id, expires_at=approval.expires_at,
                now=self._clock(),  # the clock that checks expiry: the ledger keeps the use that long by its own
                timeout_s=timeout_s)
        except PROCESS_EXITS:
            raise
        except (ReceiptStoreUnavailable, OSError) as exception:
            logger.warning("receipt store could not spend an approval for %r: %s", spec.name, type(exception).__name__)
            return state.refusal("receipt_store_unavailable",
                                 "The approval ledger did not answer in time; the tool did not run.")
        if first_use is not True:
            return state.refusal("approval_used", details=self._approval_request(state))
        if _passed(state.call_deadline):  # the ledger answered too late for the handler to start
            return state.refusal("deadline_exceeded")
        return None

    def _let_go(self, state: _CallState) -> None:
        """The process is stopping: stop holding the key; the store's lease guards it from now on."""
        self._holder.let_go(state.hold)

    def _stop_if_requested(self, state: _CallState, exception: BaseException) -> None:
        """Let the caller's stop request through invoke (a real Ctrl-C: see `agent_lab.interrupts`),
        after letting go of the key; return for anything else, which the caller contains. Raised in the
        registry's own steps, a KeyboardInterrupt or SystemExit on the main thread is the caller's
        (code declared on the tool contains its own where it calls it)."""
        stop = stop_request(exception, in_user_code=False)
        if stop is not None:
            self._let_go(state)  # the process is stopping; the store's lease still guards the key
            raise stop

    # -- step 6: execute -------------------------------------------------------------------------

    def _context(self, state: _CallState) -> CallContext:
        """The handler's `CallContext`. A sync handler that takes none gets none: nobody else reads it
        (its cancel event would be set for no one), so it is built only for a handler that asks."""
        spec = state.spec
        assert spec is not None
        return CallContext._fast(
            state.call_id,
            spec.name,
            state.actor,
            state.call_deadline,  # fixed when the call started: the pre-run steps counted against it
            state.approval_used,
            self.cursors.bound(spec.name, state.actor.tenant, state.actor.id),  # never crosses tools or actors
        )

    def _execute(self, state: _CallState) -> Run:
        """Run the handler for `invoke`: on the pool (or inline), or on the loop thread if async."""
        state.step = "execute"
        handler = state.handler
        spec = state.spec
        assert handler is not None and spec is not None
        arguments = state.arguments  # already the call's own plain copy; nothing reads it after this
        if handler.is_async:
            return self._execute_on_loop_thread(state, self._context(state), handler, arguments)
        ctx = None if handler.context_mode is ContextMode.NONE else self._context(state)
        if self._run_inline or spec.execution is Execution.INLINE:
            return self._execute_inline(state, ctx, handler, arguments)
        deadline = state.call_deadline
        try:
            future = self._pool.submit(seconds_left(deadline), self._run_and_check, state, handler, arguments, ctx)
        except PoolClosed:
            return Run.closed()
        if future is None:
            return Run.not_started()  # no worker was free before the deadline: nothing ran
        try:
            future.result(timeout=seconds_left(deadline))  # the caller waits at most until the deadline
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):  # cancelled: see _settle
            pass
        return self._settle(state, ctx, future)

    async def _aexecute(self, state: _CallState) -> Run:
        """Run the handler for `ainvoke`: async handlers on the caller's loop, sync ones on the pool, or
        on the caller's thread for a tool declared `execution="inline"` (a hand-off to the pool would
        cost more than such a handler; it blocks the loop only while it runs)."""
        import asyncio
        state.step = "execute"
        handler = state.handler
        spec = state.spec
        assert handler is not None and spec is not None
        arguments = state.arguments
        if handler.is_async:  # checked here, not in _conclude: the check counts against the deadline
            async_ctx = self._context(state)
            run = self._check_run(state, await run_async(handler, arguments, async_ctx))
            return self._overran(state, async_ctx, run) if state.finished_late else run
        ctx = None if handler.context_mode is ContextMode.NONE else self._context(state)
        if spec.execution is Execution.INLINE:
            return self._execute_inline(state, ctx, handler, arguments)
        deadline = state.call_deadline
        try:
            future = await self._pool.asubmit(deadline, self._run_and_check, state, handler, arguments, ctx)
        except PoolClosed:
            return Run.closed()
        except asyncio.CancelledError:
            state.interrupted_run = Run.not_started()  # cancelled while waiting for a worker: nothing ran
            raise
        if future is None:
            return Run.not_started()
        try:
            await asyncio.wait([asyncio.wrap_future(future)], timeout=seconds_left(deadline))
        except asyncio.CancelledError:
            # Stop waiting as at a deadline: a queued job is dropped, a running write still completes.
            state.interrupted_run = self._settle(state, ctx, future)
            raise
        return self._settle(state, ctx, future)

    def _execute_inline(self, state: _CallState, ctx: Optional[CallContext], handler: Handler, arguments: Any) -> Run:
        """An inline handler (`ToolSpec(execution="inline")`, or `Registry(run_inline=True)`): the
        caller's thread runs it, so nobody can stop waiting at the deadline. The deadline is checked
        right before it starts (too late: nothing runs, `deadline_exceeded`), and again when it
        returns: an overrun is then reported exactly like a timeout on the pool (`tool_timeout`; a
        read's key is released, and a write's outcome is `unknown` while its real result becomes the
        receipt, so the same key replays it and the effect happens once)."""
        deadline = state.call_deadline
        spec = state.spec
        assert spec is not None
        # `_run_and_check`, written out: the same thread runs and checks, with one call less per inline read.
        run = self._check_run(state, run_sync_for(handler, arguments, deadline, spec.name, state.call_id, ctx))
        return self._overran(state, ctx, run) if state.finished_late else run

    def _run_and_check(self, state: _CallState, handler: Handler, arguments: Any, ctx: Optional[CallContext]) -> Run:
        """A sync handler's job (on a worker, or inline): run it, then check what it handed back on the
        same thread (`Run.checked`). An object it returns or raises can run code when it is read (a
        dict subclass's methods, a `__class__` property, a `__del__`): that code runs here, where the
        caller can stop waiting at the deadline, never on the caller's thread after it."""
        assert state.spec is not None
        try:
            return self._check_run(state, run_sync_for(handler, arguments, state.call_deadline, state.spec.name,
                                                       state.call_id, ctx))
        except BaseException as exception:  # noqa: BLE001 - on a worker: never the caller's stop request
            return tuple.__new__(Run, (RunKind.RAISED, None, None, type_name(exception), self._internal_error(state)))

    def _check_run(self, state: _CallState, run: Run) -> Run:
        """`Run.checked` for a handler that returned or raised ToolFailure, made on the calling thread,
        and whether the handler and this check ended past the call's deadline (`finished_late`, read
        by the waiting thread once it has the run: see `_overran`). The output check counts against
        the deadline like the handler: a check that ends late never makes the call look on time.

        Reading what the handler handed back runs its code (a dict subclass, a `__class__` property, a
        ToolFailure's details): whatever that raises, BaseException included, is the call's
        `internal_error` (a write's outcome unknown), never an exception for the thread that checks;
        only the caller's own stop request passes (see `agent_lab.interrupts`)."""
        kind = run.kind
        # Built with tuple.__new__: 145 ns against 339 ns for the named tuple's own __new__ with a keyword.
        try:
            if kind is RunKind.RETURNED:
                run = tuple.__new__(Run, (RunKind.RETURNED, None, None, None, self._output_result(state, run.output)))
            elif kind is RunKind.FAILED:
                run = tuple.__new__(Run, (RunKind.FAILED, None, None, None, self._run_failure(state, run)))
            elif kind is not RunKind.RAISED:
                return run  # it never ran, or the caller already stopped waiting for it
        except BaseException as exception:  # noqa: BLE001
            raise_stop_request(exception)
            run = tuple.__new__(Run, (RunKind.RAISED, None, None, type_name(exception), self._internal_error(state)))
        deadline = state.call_deadline
        if deadline is not None and time.monotonic() > deadline:
            state.finished_late = True
        return run

    def _overran(self, state: _CallState, ctx: Optional[CallContext], run: Run) -> Run:
        """A run that ended (the handler and the check of what it handed back) after the call's deadline
        is answered as a timeout, however little it overran and wherever it ran: a read is `tool_timeout`,
        outcome failed; a write `tool_timeout`, outcome unknown, `lookup_status`. A write's effect did
        happen, so its real result (success, ToolFailure or broken output, as checked) becomes its key's
        receipt, stored in the record step like any outcome: the same key replays it, never runs again."""
        if ctx is not None:
            ctx.cancel_event.set()
        if self._completes_late(state):
            state.receipt_result = run.checked if run.checked is not None else self._run_failure(state, run)
        return Run.timed_out()

    def _execute_on_loop_thread(self, state: _CallState, ctx: CallContext, handler: Handler, arguments: Any) -> Run:
        """An async handler under `invoke`: it runs on the registry's loop thread and is cancelled at
        its deadline there (run_async); a handler that blocks the loop is isolated (see LoopThread).
        Nothing it raises there, SystemExit and KeyboardInterrupt included, is the caller's to stop on."""
        try:
            run = self._loop_thread.run(handler, arguments, ctx, functools.partial(self._check_run, state))
        except PoolClosed:
            return Run.closed()
        return self._overran(state, ctx, run) if state.finished_late else run

    def _settle(self, state: _CallState, ctx: Optional[CallContext], future: concurrent.futures.Future) -> Run:
        """What to report once the caller stops waiting for a pool job."""
        if future.cancelled():  # close() dropped it from the executor's queue before a worker took it
            return Run.closed()
        if future.done():  # it may have ended past the deadline: the caller can wake late (the GIL, a busy host)
            run = _job_run(future)
            return self._overran(state, ctx, run) if state.finished_late else run
        if future.cancel():
            return Run.not_started()  # never left the queue: nothing ran
        if ctx is not None:
            ctx.cancel_event.set()
        if self._completes_late(state):
            state.late_pending = True
            assert state.hold is not None
            self._holder.run_late(state.hold)  # held (and renewed) for the late-completion window
            future.add_done_callback(functools.partial(self._complete_late_future, state))
        return Run.timed_out()

    def _completes_late(self, state: _CallState) -> bool:
        """A timed-out sync write that holds a reservation keeps it until the handler finishes (or,
        in this process, until the late-completion window ends)."""
        return state.hold is not None and state.spec is not None and state.spec.writes

    def _complete_late_future(self, state: _CallState, future: concurrent.futures.Future) -> None:
        self._complete_late(state, _job_run(future))

    def _complete_late(self, state: _CallState, run: Run) -> None:
        """Store the result of a write that finished after its caller stopped waiting.

        Stored under the call's owner token, so it lands only if nobody resolved the key meanwhile
        (past the late-completion window the key may have been resolved; then the store refuses it)."""
        try:
            if run.checked is None:
                run = self._check_run(state, run)
            result = run.checked if run.checked is not None else self._run_failure(state, run)
            self._store_outcome(state, result, timeout_s=RECEIPT_RETRY_TIMEOUT_S)
        except BaseException as exception:  # noqa: BLE001
            raise_stop_request(exception, in_user_code=False)
            logger.warning("could not store the late result of tool %r: %s", state.tool, type_name(exception))
            self._let_go(state)

    # -- step 7: output --------------------------------------------------------------------------

    def _conclude(self, state: _CallState, run: Run) -> ToolResult:
        """Turn what the handler did into the call's result, checking a returned output (here, on the
        caller's thread, only for an async handler `ainvoke` awaited on it)."""
        if run.kind is RunKind.RETURNED:
            state.step = "output"
        if run.checked is None and (run.kind is RunKind.RETURNED or run.kind is RunKind.FAILED):
            run = self._check_run(state, run)
        if run.kind is not RunKind.RETURNED:
            return run.checked if run.checked is not None else self._run_failure(state, run)
        result = run.checked
        if result.ok:
            state.step = "record"
        return result

    def _output_result(self, state: _CallState, output: Any) -> ToolResult:
        """The output must be JSON, within the byte budget, and match the output schema.

        One walk takes the plain copy that is checked and kept (the handler may still hold, and
        change, the object it returned, and a container subclass could show the checks other contents
        than the copy), writes the types people return as their JSON form (`agent_lab.jsonforms`: a
        datetime, a Decimal, a dataclass, a pydantic model) and bounds its size. It stops once the
        output is certainly over `EXACT_SIZE_FACTOR` times the budget, so a huge output costs no more than a few budgets to
        refuse (the refusal then says `output_bytes_at_least`); a size the walk's bound cannot settle
        is measured exactly by the C JSON encoder (`output_bytes`). Then `is_valid`, and `errors`
        only for an output that fails it. A broken output of a *write* is reported with
        outcome unknown (the handler returned, so its effect may well have happened, but we cannot
        tell what it was); of a read, outcome failed.
        """
        spec = state.spec
        assert spec is not None
        budget = spec.max_output_bytes
        try:
            # forms=True, passed by position: a keyword argument costs every read ~300 instructions.
            copy, plain, bound = measured_json_copy(output, MAX_OUTPUT_DEPTH, budget * EXACT_SIZE_FACTOR, True)
        except OverBudget:  # what the walk read (the contents we would keep) is certainly too large
            return self._output_failure(state, "output_too_large", details={
                "max_output_bytes": budget, "output_bytes_at_least": budget * EXACT_SIZE_FACTOR + 1})
        if not plain or bound is None or bound > budget:
            # Measure the copy, never what the handler returned: the encoder calls a dict subclass's own
            # `items()`, which is handler code that would run here, on the caller's thread, past the deadline.
            size = _json_size(copy)
            if size is not None and size > budget:
                return self._output_failure(state, "output_too_large",
                                            details={"max_output_bytes": budget, "output_bytes": size})
            if not plain or size is None:  # not JSON, or not writable (e.g. a 5,000-digit integer)
                return self._output_failure(state, "invalid_tool_output", [_non_json_output_violation(copy)])
        validator = spec.output_validator
        if validator is not None and not validator.is_valid(copy):
            found = validator.errors(copy, limit=MAX_REPORTED_VIOLATIONS + 1, known_invalid=True)
            violations = [_violation_dict(v) for v in found]
            if violations:
                return self._output_failure(state, "invalid_tool_output", violations)
        return ToolResult._fast(True, Outcome.SUCCEEDED, state.tool, copy, None, state.call_id, state.fingerprint,
                                state.redact)

    def _output_failure(
        self,
        state: _CallState,
        code: str,
        violations: Optional[list] = None,
        *,
        details: Optional[dict[str, Any]] = None,
    ) -> ToolResult:
        assert state.spec is not None
        message = None
        if violations:
            message, details = _violation_report(state, violations, prefix="The tool's output breaks its contract: ")
        if state.spec.writes:
            return state.refusal(code, message, details=details, outcome=Outcome.UNKNOWN,
                                 retryable=False, next_action=NextAction.LOOKUP_STATUS)
        return state.refusal(code, message, details=details, outcome=Outcome.FAILED)

    def _run_failure(self, state: _CallState, run: Run) -> ToolResult:
        """The result for a handler that did not return: ToolFailure, exception, timeout, never started."""
        spec = state.spec
        assert spec is not None
        if run.kind is RunKind.FAILED and run.error is not None:
            return state.result(ok=False, outcome=Outcome.FAILED, error=_safe_failure(run.error, state))
        if run.kind is RunKind.NOT_STARTED:
            return state.refusal("deadline_exceeded", "The time budget ran out before a worker could start the tool.")
        if run.kind is RunKind.CLOSED:
            return state.refusal("internal_error", "The tool registry is closed; the tool did not run.")
        code = "tool_timeout" if run.kind is RunKind.TIMED_OUT else "handler_exception"
        if spec.writes:  # it may have taken effect: look it up, never blindly repeat a write
            return state.refusal(code, outcome=Outcome.UNKNOWN, retryable=False, next_action=NextAction.LOOKUP_STATUS)
        if code == "tool_timeout":
            transient = spec.retry_policy is RetryPolicy.TRANSIENT
            return state.refusal(code, outcome=Outcome.FAILED, retryable=transient,
                                 next_action=NextAction.RETRY if transient else NextAction.STOP)
        return state.refusal(code, outcome=Outcome.FAILED)

    # -- step 8: record --------------------------------------------------------------------------

    def _record(self, state: _CallState, result: ToolResult) -> ToolResult:
        """Settle the receipt, stamp the duration and write the audit record. Never raises."""
        try:
            if state.hold is not None:
                self._settle_receipt(state, result)
        except BaseException as exception:  # noqa: BLE001
            raise_stop_request(exception, in_user_code=False)
            logger.warning("could not record the receipt of a call of %r: %s", state.tool, type_name(exception))
            self._holder.give_up(state.hold, "could not build its receipt")
        # The result was built for this call and nobody else holds it yet: stamp it in place
        # (dataclasses.replace would copy every field on the hot path).
        result.__dict__["duration_ms"] = (time.perf_counter() - state.started) * 1000.0
        if self._audit is not None:
            self._write_audit(state, result)
        return result

    def _settle_receipt(self, state: _CallState, result: ToolResult) -> None:
        """Complete or release this call's reservation (if it holds one and no late handler will).

        Released (the key is free again): refusals before any effect, and failures known to have had
        no effect that a retry could fix (retryable errors, timeouts of reads, arguments the handler
        refused), since storing those
        would make every retry replay the failure. Stored: everything else, including writes whose
        outcome is unknown, so that the same key replays "unknown" instead of repeating the effect.
        The store is given what is left of the call's deadline; if that is not enough, the lease
        keeper keeps trying in the background (the caller has its answer already).
        """
        if state.hold is None:
            return
        if state.late_pending:
            state.receipt_note = ReceiptNote.LATE
            return
        if state.receipt_result is not None:  # a write that overran: its real result is the receipt
            result = state.receipt_result
        self._store_outcome(state, result, timeout_s=seconds_left(state.call_deadline) or 0.0)

    def _store_outcome(self, state: _CallState, result: ToolResult, *, timeout_s: float) -> None:
        """Store `result` as the key's receipt, or release the key, under this call's owner token."""
        assert state.hold is not None
        record = None if _frees_key(result) else result.to_record()
        state.receipt_note = self._holder.settle(state.hold, record, timeout_s=timeout_s)

    def _write_audit(self, state: _CallState, result: ToolResult) -> None:
        if self._audit is None:
            return
        try:
            self._audit.write(_audit_record(state, result))
        except BaseException as exception:  # noqa: BLE001 - an audit failure must not break the call
            raise_stop_request(exception, in_user_code=False)
            logger.warning("audit sink failed to write a record for %r: %s", state.tool, type_name(exception))

    def _internal_error(self, state: _CallState) -> ToolResult:
        """A bug in a step (not in a handler): contained, logged, and reported without details.

        Logged like a handler's exception (`describe_exception`), never with `exc_info`: the exception
        may have been raised by an object the handler returned, with a secret in its message."""
        logger.error("internal error in step %r of a call to %r", state.step, state.tool)
        if logger.isEnabledFor(logging.DEBUG):
            exception = sys.exc_info()[1]
            if exception is not None:
                shows = state.spec is not None and not state.spec.redact
                logger.debug("internal error in step %r: %s", state.step, describe_exception(exception, show_message=shows))
        if state.step in ("execute", "output", "record") and state.spec is not None and state.spec.writes:
            return state.refusal("internal_error", "The tool runtime failed; the tool may have run.",
                                 outcome=Outcome.UNKNOWN, next_action=NextAction.LOOKUP_STATUS)
        if state.step in ("execute", "output", "record"):
            return state.refusal("internal_error", "The tool runtime failed.", outcome=Outcome.FAILED)
        return state.refusal("internal_error")


# ---------------------------------------------------------------------------------------------
# Small pure helpers
# ---------------------------------------------------------------------------------------------


def _job_run(future: concurrent.futures.Future) -> Run:
    """What a finished pool job came to. The job (`_run_and_check`) answers a `Run` whatever the handler
    does; should it raise all the same, it raised on a worker thread, so it is never the caller's stop
    request (`agent_lab.interrupts`): a contained failure, as a handler's exception is."""
    try:
        return future.result()
    except BaseException as exception:  # noqa: BLE001
        return Run.raised(exception)


def _call_deadline(state: _CallState, spec: ToolSpec) -> float:
    """The call's one deadline: the caller's (when it is a valid one) or the tool's timeout counted
    from the start of invoke, whichever comes first. A caller deadline that is not a number is left
    for the deadline step to refuse."""
    tool_deadline = state.started_monotonic + spec.timeout_ms / 1000.0
    if state.deadline is None:
        return tool_deadline
    if not is_deadline(state.deadline):
        return tool_deadline
    state.deadline = plain_deadline(state.deadline)  # its plain value: a number subclass could compare as it likes
    return min(state.deadline, tool_deadline)


def _resolved_record(result: Optional[ToolResult], stored_fingerprint: str) -> Optional[dict[str, Any]]:
    """The receipt record of a resolved key: the given result under the key's own fingerprint
    (None: "it did not happen", the key is to be freed)."""
    if result is None:
        return None
    return dataclasses.replace(result, fingerprint=stored_fingerprint).to_record()


def _receipt_key(tenant: str, tool: str, key_value: str) -> ReceiptKey:
    """``ReceiptKey(tenant, tool, key_value)``. Its checks (plain text without lone surrogates or NUL)
    are settled here already for the common case: a tool name matches TOOL_NAME_PATTERN (ASCII, no
    NUL), the key value was checked by `_reserve_key`, and an ASCII tenant without NUL passes; so the
    key is built without the frozen dataclass's checks and setattrs. Anything else takes the class's
    own constructor (which refuses what it must)."""
    if type(tenant) is str and tenant.isascii() and "\x00" not in tenant and type(tool) is str and type(key_value) is str:
        receipt_key = object.__new__(ReceiptKey)
        receipt_key.__dict__.update(tenant=tenant, tool=tool, key=key_value)
        return receipt_key
    return ReceiptKey(tenant, tool, key_value)


_OUTCOMES = {outcome.value: outcome for outcome in Outcome}


def _replayed(record: Mapping[str, Any], state: _CallState) -> ToolResult:
    """The replay of a stored receipt: `ToolResult.from_record`, with the common record (a success,
    as the stores give it back: a fresh dict of plain values) built without its enum call and keyword
    handling. The output is the store's fresh copy, so nothing done to it reaches the receipt."""
    text = record.get("outcome") if type(record) is dict else None
    outcome = _OUTCOMES.get(text) if type(text) is str else None
    if outcome is None or record.get("error") or type(record.get("tool")) is not str or type(record.get("ok")) is not bool:
        return ToolResult.from_record(record, replayed=True, call_id=state.call_id, redact=state.redact)
    result = ToolResult._fast(record["ok"], outcome, record["tool"], record.get("output"), None, state.call_id,
                              record.get("fingerprint"), state.redact)
    result.__dict__["replayed"] = True
    return result


def _passed(deadline: Optional[float]) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _unstorable_key(state: _CallState, key_name: str, key_value: str) -> ToolResult:
    """An idempotency key with a lone surrogate or NUL: valid for the schema, but not text every store
    can hold (PostgreSQL's text type refuses NUL)."""
    pointer = "/" + key_name.replace("~", "~0").replace("/", "~1")
    if "\x00" in key_value:
        message = "The idempotency key must be text without NUL characters (U+0000)."
    else:
        message = "The idempotency key must be valid Unicode text; it holds a lone surrogate code point."
    violation = {"instance_path": pointer, "keyword_path": "", "keyword": "idempotency_key", "message": message}
    return state.refusal("invalid_arguments", message, details=_violation_details([violation]))


def _close_names(index: NameIndex, tools: Mapping[str, tuple[ToolSpec, Handler]],
                 permissions: frozenset[Optional[str]], state: _CallState) -> list[str]:
    """Near-miss names among the tools this actor may call (like `catalog(actor)`: the others stay unseen),
    from this call's snapshot of the tools; found through the name index (agent_lab/names.py).

    `permissions` covers every tool of the snapshot (read after it; see `register`): an actor that
    holds them all may call every tool in it, so the index asks only whether a name is in the snapshot."""
    actor = state.actor
    if not isinstance(actor, Actor):
        return []
    if all(actor.may(permission) for permission in permissions):
        return index.close_names(state.tool, tools.__contains__, n=MAX_CLOSE_NAMES)

    def may_call(name: str) -> bool:
        entry = tools.get(name)
        return entry is not None and actor.may(entry[0].required_permission)

    return index.close_names(state.tool, may_call, n=MAX_CLOSE_NAMES)


def _frees_key(result: ToolResult) -> bool:
    if result.outcome is Outcome.REJECTED:
        return True
    if result.outcome is Outcome.FAILED and result.error is not None:  # no effect; may the retry differ?
        # invalid_arguments: the handler refused the arguments (a `@tool` model validator), so the next
        # call under this key is a corrected one, not a replay of the refusal.
        return result.error.retryable or result.error.code in ("tool_timeout", "invalid_arguments")
    return False


_write_compact = compact_json_writer(sort_keys=False)


def _json_size(value: Any) -> Optional[int]:
    """Bytes of the compact UTF-8 JSON text of a (checked) JSON value; None if it cannot be written
    (e.g. an integer too long for Python to print, or a cycle)."""
    try:
        text = _write_compact(value)
    except (ValueError, TypeError, RecursionError):
        return None
    return len(text.encode("utf-8", "surrogatepass"))


def _hook_arguments(state: _CallState) -> Any:
    """The arguments for a policy hook (resource guard, approval condition): a copy of their own. A hook
    that changed the ones the handler gets would run a call other than the one that was checked and
    approved (the fingerprint an approval binds to may be made before the hooks, for the audit record)."""
    return plain_json_copy(state.arguments, MAX_ARGUMENT_COPY_DEPTH)


_APPROVAL_TEXT_FIELDS = ("approval_id", "tool", "fingerprint", "tenant", "actor_id", "approver")


def _checked_approval(approval: Any) -> Optional[Approval]:
    """`approval` as a plain Approval whose fields are checked now, or None (answered approval_mismatch).

    `Approval` checks its fields when it is built, but a frozen dataclass can be changed afterwards
    (`object.__setattr__`, an unpickled and edited state) and a subclass can answer for a field with a
    property: a fingerprint or tenant that equals everything, or an expiry of NaN or infinity (never
    expired), must not get through at the moment it counts. An unchanged Approval is used as it is;
    anything else is rebuilt from its fields, read once, through the constructor's checks."""
    if not isinstance(approval, Approval):
        return None
    if type(approval) is Approval:
        fields = approval.__dict__
        if all(type(fields.get(name)) is str and fields[name] for name in _APPROVAL_TEXT_FIELDS):
            expires_at = fields.get("expires_at")
            if type(expires_at) is float and math.isfinite(expires_at):
                return approval
    try:
        return Approval(**{name: getattr(approval, name) for name in (*_APPROVAL_TEXT_FIELDS, "expires_at")})
    except PROCESS_EXITS:
        raise
    except BaseException:  # noqa: BLE001 - a field that is not text, an expiry that is not a finite time
        return None


def _approval_matches(approval: Approval, state: _CallState) -> bool:
    """The approval is for this tool, these arguments and this actor: its id and its tenant (an
    approval a person gave one agent is no approval for another agent of the same organisation)."""
    return (
        approval.tool == state.tool
        and approval.fingerprint == state.fingerprint
        and approval.tenant == state.actor.tenant
        and approval.actor_id == state.actor.id
    )


def _malformed_call(state: _CallState, message: str) -> ToolResult:
    violation = {"instance_path": "", "keyword_path": "", "keyword": "call", "message": message}
    return state.refusal("invalid_arguments", message, details=_violation_details([violation]))


def _violation_dict(violation: Any) -> dict[str, str]:
    return {
        "instance_path": violation.instance_path,
        "keyword_path": violation.keyword_path,
        "keyword": violation.keyword,
        "message": violation.message,
    }


def _sentence(text: str) -> str:
    """`text` as one sentence: capital first letter, full stop at the end."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _non_json_violation(pointer: str, reason: str) -> dict[str, str]:
    return {"instance_path": pointer, "keyword_path": "", "keyword": "json", "message": _sentence(reason)}


def _non_json_output_violation(output: Any) -> dict[str, str]:
    """Where and why an output is not JSON (walked again only now, to say where)."""
    problem = find_non_json(output, max_depth=MAX_OUTPUT_DEPTH)
    if problem is None:  # e.g. an integer too long to print
        return _non_json_violation("", "the output cannot be written as JSON text")
    return _non_json_violation(*problem)


def _violation_report(state: _CallState, violations: list, *, prefix: str = "") -> tuple[Optional[str], dict[str, Any]]:
    """The message and details of a refusal for schema violations, as they may leave the process: a
    violation below a redacted field names only that field (see `redact_violations`), in the details
    and in the message, which is built from them."""
    if state.redact:
        from .redaction import redact_violations

        violations = redact_violations(violations, state.redact)
    return _first_violation_message(violations, prefix=prefix), _violation_details(violations)


def _violation_details(violations: list) -> dict[str, Any]:
    """Validation stops one violation past what is reported: `violation_count` is exact unless
    `violations_truncated` is true, and then it is a lower bound ("at least")."""
    return {"violations": violations[:MAX_REPORTED_VIOLATIONS], "violation_count": len(violations),
            "violations_truncated": len(violations) > MAX_REPORTED_VIOLATIONS}


def _first_violation_message(violations: Optional[list], *, prefix: str = "") -> Optional[str]:
    if not violations:
        return None
    first = prefix + violations[0]["message"]
    more = len(violations) - 1
    if len(violations) > MAX_REPORTED_VIOLATIONS:
        first = f"{first.rstrip('.')} (and at least {more} more violations)."
    elif more:
        first = f"{first.rstrip('.')} (and {more} more {'violation' if more == 1 else 'violations'})."
    return first


def _safe_failure(error: ToolError, state: _CallState) -> ToolError:
    """A ToolFailure's error as the model may see it: a plain string message and plain JSON details
    (a copy, as for outputs: the handler may still hold the objects it raised with).

    For a tool with redacted fields, members of the details named in `spec.redact` are masked here
    already (so the error is safe even in a repr), and the call's own redacted argument values are
    masked wherever the message or a detail string repeats them (a detail number that shows one is
    masked whole): a second line of defence, since a handler's message is shown as given and must be
    written safe in the first place."""
    message = str.__str__(error.message) if isinstance(error.message, str) and error.message else (
        "The tool reported a failure.")
    details = dict(error.details) if isinstance(error.details, Mapping) else {}
    if check_json_value(details) is not None:
        logger.warning("dropping non-JSON details of a ToolFailure %r", error.code)
        details = {}
    details = plain_json_copy(details, MAX_OUTPUT_DEPTH + 1)
    if state.redact:
        from .redaction import collect_secrets, redact, redact_text

        secrets_in_call = collect_secrets(state.arguments, state.redact, include_keys=True)
        message = redact_text(message, secrets_in_call)
        details = _mask_strings(redact(details, state.redact), secrets_in_call)
    return dataclasses.replace(error, message=message, details=details)


def _mask_strings(value: Any, secrets_in_call: list[str]) -> Any:
    """`value` (plain JSON) with each secret masked inside every string, keys included, and every number
    whose JSON text shows a secret replaced whole (a PIN the handler copied into a detail as a number)."""
    if not secrets_in_call:
        return value
    from .redaction import REDACTED, redact_text

    if isinstance(value, str):
        return redact_text(value, secrets_in_call)
    if isinstance(value, dict):
        return {redact_text(key, secrets_in_call): _mask_strings(item, secrets_in_call) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask_strings(item, secrets_in_call) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = json.dumps(value)  # plain JSON: a finite number that prints
        return REDACTED if redact_text(text, secrets_in_call) != text else value
    return value


def _audit_record(state: _CallState, result: ToolResult) -> dict[str, Any]:
    """The call's audit record. It holds no argument or output values, so there is nothing in it for
    `spec.redact` to mask (masking by field name would only blank its own `tenant` or `tool`)."""
    actor = state.actor if isinstance(state.actor, Actor) else None
    return audit_record(
        call_id=state.call_id,
        tool=state.tool,
        actor_id=actor.id if actor is not None else None,
        tenant=actor.tenant if actor is not None else None,
        fingerprint=state.fingerprint,
        step=state.step,
        outcome=result.outcome.value,
        error_code=result.error.code if result.error is not None else None,
        duration_ms=round(result.duration_ms, 3),
        replayed=result.replayed,
        approval_id=state.approval_used.approval_id if state.approval_used is not None else None,
        receipt=state.receipt_note,
        attempt=state.attempt,
    )


def _attempt_number(value: Any) -> Optional[int]:
    """A retry runner's attempt number as a plain int, or None for anything else (invoke never raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return int.__int__(value)
    return None


def call_summary(spec: ToolSpec, arguments: Mapping[str, Any]) -> str:
    """One readable line of what a call would do, for a person approving it.

    `record_ticket_followup(ticket_id='T-1001', note='Customer asked for a ca…')`: strings quoted,
    long values cut, redacted fields shown as [redacted], nested values as compact JSON.
    """
    shown = arguments
    if spec.redact:
        from .redaction import redact

        shown = redact(arguments, spec.redact)
    parts = []
    for name, value in shown.items():
        if type(value) is str and len(value) <= SUMMARY_VALUE_CHARS and value != REDACTED:
            parts.append(name + "=" + repr(value))  # the common value, without a call per argument
        else:
            parts.append(name + "=" + _summary_value(value))
    line = spec.name + "(" + ", ".join(parts) + ")"
    if len(line) > SUMMARY_MAX_CHARS:
        line = line[: SUMMARY_MAX_CHARS - 2] + "…)"
    return line


def _summary_value(value: Any) -> str:
    if isinstance(value, str) and value == REDACTED:
        return REDACTED
    if isinstance(value, str):
        text = value if len(value) <= SUMMARY_VALUE_CHARS else value[:SUMMARY_VALUE_CHARS] + "…"
        return repr(text)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return text if len(text) <= SUMMARY_VALUE_CHARS else text[:SUMMARY_VALUE_CHARS] + "…"

