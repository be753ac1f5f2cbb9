"""Registry: the one place a proposed tool call is checked, run and recorded.

`Registry` keeps the catalog (register, route, names, search, catalog, spec and handler look-ups) and
the lifecycle (close, wait_settled, resolve_unknown, approvals, cursors). `invoke` runs DESIGN.md's steps
in one fixed order, for every tool, with no bypass:

    route -> schema -> permission -> approval -> deadline -> idempotency -> execute -> output -> record

The steps live in `agent_lab.steps`, one module per step family. Each pre-run step is a small function
that returns None (go on) or a `ToolResult` that stops the call (a refusal, or a replayed receipt);
`invoke` stops at the first one and goes straight to record. Nothing a handler or a model does escapes
as an exception: whatever `invoke` is given, it returns a `ToolResult`. The one thing that passes
through is the caller's own request to stop (a real Ctrl-C on the main thread; `agent_lab.interrupts`
says exactly how it is told from a handler's `sys.exit`).

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
  check) is a timeout however the caller learns of it (`steps.run.overran`).
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

import logging
import math
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from .audit import AuditSink
from .calls import ToolCall, ToolResult
from .execution import Handler, Run
from .leases import LATE_COMPLETION_WINDOW_S, RECEIPT_RETRY_TIMEOUT_S
from .names import NameIndex
from .policy import Actor, Approval
from .spec import Execution, ToolSpec
from .steps import STEPS
from .steps.admit import MAX_CLOSE_NAMES, Catalog, route
from .steps.conclude import conclude, internal_error, output_result, record, stop_if_requested
from .steps.details import EXACT_SIZE_FACTOR, MAX_OUTPUT_DEPTH, MAX_REPORTED_VIOLATIONS
from .steps.idempotency import check_store_covers, resolve_key
from .steps.plan import plan_for
from .steps.services import Services
from .steps.state import attempt_number, resolving, start
from .stores import ReceiptKey, ReceiptStore

if TYPE_CHECKING:  # at run time agent_lab.tasks loads with the first call run as a task
    from .tasks import TaskStatus

__all__ = [
    "EXACT_SIZE_FACTOR",
    "MAX_CLOSE_NAMES",
    "MAX_REPORTED_VIOLATIONS",
    "MAX_OUTPUT_DEPTH",
    "STEPS",
    "Registry",
]

logger = logging.getLogger("agent_lab.registry")


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
    `ToolSpec(execution="inline")` is run (see `steps.run` for the deadline's meaning there);
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
        self._services = Services(receipts=receipts, audit=audit, max_workers=max_workers, cursor_secret=cursor_secret,
                                  cursor_lifetime_s=cursor_lifetime_s, clock=clock, run_inline=run_inline,
                                  late_completion_s=late_completion_s, renew_every_s=renew_every_s)
        self._receipts = self._services.receipts
        self._holder = self._services.holder  # the keys this registry holds (tests and diagnostics read it)
        self._pool = self._services.pool
        # Copy-on-write: `register` swaps in a new snapshot under the lock; readers (invoke's route,
        # catalog, names) take the current one without locking and never see it change under them.
        self._catalog = Catalog({}, frozenset(), NameIndex())
        self._lock = threading.Lock()

    # -- tools -----------------------------------------------------------------------------------

    def register(self, spec: ToolSpec, handler: Callable[..., Any]) -> None:
        """Add a tool. Its handler takes `(arguments)` or `(arguments, ctx)` and may be `async def`.

        The handler's signature is checked here: one that cannot be called either way (say
        `lambda a, b, c: ...`) is a TypeError now, not a `handler_exception` on every call. The tool's
        plan, the steps its contract needs (`agent_lab.steps.plan`), is composed here too, from the
        registry's own copy of the spec (what `spec(name)` returns), so they always agree.
        Safe to call while other threads invoke, list or register tools.
        """
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"register() needs a ToolSpec, not {type(spec).__name__}")
        spec = _own_copy(spec)  # frozen, but a changed field (object.__setattr__) must not part it from its plan
        check_store_covers(spec, self._services)  # its key's lease and receipt outlast its run
        if spec.single_use_approval and not callable(getattr(self._receipts, "consume_approval", None)):
            raise ValueError(f"tool {spec.name!r} has single_use_approval, but the receipt store "
                             f"({type(self._receipts).__name__}) keeps no approval ledger (consume_approval)")
        wrapped = Handler.wrap(handler, redacts=bool(spec.redact))
        if spec.execution is Execution.INLINE and wrapped.is_async:
            raise ValueError(f"tool {spec.name!r} has execution='inline', which runs a sync handler on the caller's "
                             f"thread; an async handler already runs without a thread hand-off (drop the option)")
        with self._lock:
            current = self._catalog
            if spec.name in current.tools:
                raise ValueError(f"a tool named {spec.name!r} is already registered")
            tools = dict(current.tools)
            tools[spec.name] = plan_for(spec, wrapped, run_inline=self._services.run_inline)
            current.names.add(spec.name)  # every name in any snapshot is in the index (added first)
            # The permissions cover every tool of the snapshot (None too: `Actor.may` decides it).
            self._catalog = Catalog(tools, current.permissions | {spec.required_permission}, current.names)

    def catalog(self, actor: Optional[Actor] = None) -> list[dict[str, Any]]:
        """Model-facing halves of the tools, in registration order; with an actor, only those it may call
        (the others answer a call exactly like a tool that does not exist). Each entry is a new dict;
        its schemas are the specs' own read-only ones (see `ToolSpec.catalog_entry`)."""
        specs = [plan.spec for plan in self._catalog.tools.values()]
        if actor is not None:
            specs = [spec for spec in specs if actor.may(spec.required_permission)]
        return [spec.catalog_entry() for spec in specs]  # read-only schemas, shared, not copied

    def spec(self, name: str) -> ToolSpec:
        """The spec registered under `name` (KeyError if there is none)."""
        try:
            spec: ToolSpec = self._catalog.tools[name].spec
            return spec
        except KeyError:
            raise KeyError(f"no tool named {name!r} is registered") from None

    def names(self) -> list[str]:
        return list(self._catalog.tools)

    def handler(self, name: str) -> Callable[..., Any]:
        """The function registered as `name`'s handler, exactly as given to `register` (KeyError if
        there is none). For tools that read where a tool is defined: `agent_lab.lint` points a finding
        at the file and line of its handler's source."""
        try:
            function: Callable[..., Any] = self._catalog.tools[name].handler.function
            return function
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
        """The keyed fingerprint this registry gives a call: what approvals bind to and receipts are
        matched by. Keyed BLAKE2b (`blake2b-mac:`, `agent_lab.fingerprint.Blake2bFingerprinter` with its
        store's key) over the call's canonical JSON; a receipt or an approval carrying the older
        `hmac-sha256:` form (`agent_lab.fingerprint.fingerprint`) still matches. Raises NotCanonicalJSON."""
        return self._services.fingerprints.fingerprint(tool, arguments)

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
                                 now=self._services.clock() if now is None else now)

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
        could not be stored), or replays a write's unknown outcome (its handler raised or timed out),
        once the application has found out what happened.

        `happened=True`: the effect took place and `output` is its result (checked against the tool's
        output schema; its `redact` fields are masked): later calls with the same arguments replay it.
        `happened=False`: it did not take place: the key is free, and the next call runs the tool.
        Returns False when the key is not unknown (still running here or on another host, already
        settled, free), and when the store did not answer within `timeout_s` (unreachable, locked, or
        its commit unconfirmed: a resolution whose answer was lost may still have landed, so look the
        key up before resolving it again). Never raises for a store failure. Say "did not happen" only
        when you know: a handler still running somewhere would then take effect a second time. A write
        task's key (kept from its acceptance): False while the task may run (`TaskRunner.may_run`).
        """
        spec = self.spec(tool)
        receipt_key = ReceiptKey(tenant, spec.name, key)
        result: Optional[ToolResult] = None
        if happened:
            result = self._resolved_result(spec, output)
        return resolve_key(self._services, receipt_key, result, timeout_s)

    def _resolved_result(self, spec: ToolSpec, output: Any) -> ToolResult:
        """The result a resolved key replays: `output`, checked like a handler's."""
        state = resolving(self._services, spec)
        result = output_result(state, output)
        if not result.ok:
            raise ValueError(f"output does not fit the output contract of tool {spec.name!r} "
                             f"({result.error.code if result.error else 'invalid'})")
        return result

    def wait_settled(self, timeout_s: Optional[float] = None) -> bool:
        """Wait until every key this registry holds is settled: its receipt stored, its key released,
        or given up as unknown (a late handler past its window, a store that kept failing). True when
        settled, False when `timeout_s` ran out first. For tests and graceful shutdowns."""
        return self._holder.wait_settled(timeout_s)

    # -- tasks -----------------------------------------------------------------------------------

    def task(self, task_id: str, *, actor: Actor, timeout_s: Optional[float] = None) -> Optional[TaskStatus]:
        """The status of a task `actor` started (`invoke(..., as_task=True)`), read from the receipt store,
        so from any registry sharing it, also after a restart: working, completed or failed with its
        final `result`, cancelled, or failed with `task_interrupted` when its host stopped first. None
        for an id that names no task of this actor: unknown, expired, another actor's or another
        tenant's task, and one of a tool the actor may not call now (its permission was taken away, or
        no such tool is registered here), all answer alike: a task's result is its tool's output, and
        the tool is hidden from the actor as a retry of its call is. Raises ReceiptStoreUnavailable
        when the store does not answer within `timeout_s`."""
        return self._services.tasks.status(actor.tenant, actor.id, task_id, self._redact_of_task,
                                           self._task_visible_to(actor), timeout_s)

    def cancel_task(self, task_id: str, *, actor: Actor, timeout_s: Optional[float] = None) -> Optional[TaskStatus]:
        """Cancel a task of `actor`'s. Its `cancel` says what happened: `cancelled` (its call had not
        started and never will), `too_late` (it had started: it runs to its end and its effect stands;
        poll `task` for the result) or `ended` (it was over already; `status` says how). None for an
        id that names no task of this actor, as in `task`. Raises ReceiptStoreUnavailable."""
        return self._services.tasks.cancel(actor.tenant, actor.id, task_id, self._redact_of_task,
                                           self._task_visible_to(actor), timeout_s)

    def tasks(self, *, actor: Actor, timeout_s: Optional[float] = None) -> list[TaskStatus]:
        """The statuses of the tasks this registry accepted for `actor` (its latest 1000), oldest first.
        Tasks accepted by other processes, or before a restart, are read with `task` by id."""
        found = (self.task(task_id, actor=actor, timeout_s=timeout_s)
                 for task_id in self._services.tasks.accepted(actor.tenant, actor.id))
        return [status for status in found if status is not None]

    def wait_tasks(self, timeout_s: Optional[float] = None) -> bool:
        """Wait until no task runs in this registry (a graceful stop lets them record their results);
        False when `timeout_s` ran out first."""
        return bool(self._services.tasks.wait(timeout_s))

    def _task_visible_to(self, actor: Actor) -> Callable[[str], bool]:
        """Whether `actor` may see a task of `tool`: the tool is registered and the actor may call it now,
        as the route step decides for a call (a tool it may not call answers like an unknown one)."""
        def visible(tool: str) -> bool:
            plan = self._catalog.tools.get(tool)
            return plan is not None and isinstance(actor, Actor) and actor.may(plan.permission)

        return visible

    def _redact_of_task(self, tool: str) -> frozenset:
        try:
            return frozenset(self.spec(tool).redact)
        except KeyError:
            return frozenset()

    @property
    def cursors(self) -> Any:
        """The `CursorCodec` handlers use (via `ctx.cursors`) to issue and read page cursors."""
        return self._services.cursors

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self, *, wait: bool = False) -> None:
        """Stop the worker pool and the event-loop thread. Queued jobs are dropped; handlers already
        running finish on their own (with wait=True, close waits for them, and for running tasks first), and the lease of a write
        still running stays renewed until it returns, so keep a store you passed in open that long. A
        receipt store the registry made itself is closed too; one passed in belongs to the caller."""
        services = self._services
        services.closed = True  # no task is accepted from now on
        if wait and services.has_tasks:
            services.tasks.wait(None)  # running tasks end (each under its tool's deadline) and record
        services.pool.close(wait=wait)
        services.loop_thread.close()
        if wait:
            self._holder.wait_settled(RECEIPT_RETRY_TIMEOUT_S * 2)
        self._holder.close(store_closed=services.owns_receipts)
        if services.owns_receipts:
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
        as_task: bool = False,
    ) -> ToolResult:
        """Check, run and record one proposed call, in the fixed order of its steps:

            route -> schema -> permission -> approval -> deadline -> idempotency -> execute -> output -> record

        Never raises for anything a model, a handler or a store does (see the module docstring); `call`
        not being a ToolCall is the developer's TypeError.

        `deadline` is an absolute `time.monotonic()` time for the whole call (None: the tool's timeout only);
        the call's own deadline is the earlier of it and the start of invoke plus the tool's timeout_ms.
        `attempt`: which attempt of a retried call this is (1, 2, ...), written to the audit record; a
        retry runner (`agent_lab.retry.Retrier`) sets it. Anything but a positive int is recorded as None.
        `as_task`: for a tool with `task_support="optional"`, run the call as a task (a tool whose support
        is "required" always does; one with "forbidden" ignores it): once every check up to and including
        idempotency passed, the answer is the outcome `accepted` with `output={"task_id": ...}`, and the
        handler runs in the background under the tool's own deadline. Read it with `task`, stop it with
        `cancel_task` (see `agent_lab.tasks`).
        """
        state = start(self._services, call, actor, approval, deadline)
        if attempt is not None:
            state.attempt = attempt_number(attempt)
        try:
            result = route(state, self._catalog)  # the tool's plan: the steps its contract needs
            if result is None:
                plan = state.plan
                assert plan is not None  # route found it
                for step in plan.admit:  # schema, permission, approval, deadline, idempotency
                    result = step(state)
                    if result is not None:  # a refusal, or a replayed receipt
                        break
                else:
                    tasks = plan.tasks  # None: the tool never runs as a task (every plain tool)
                    if tasks is None or not (tasks or as_task):
                        result = conclude(state, plan.execute(state))  # execute, then output
                    else:
                        from .steps.task import accept_task  # (and agent_lab.tasks) once a call runs as a task

                        result = accept_task(state)  # `accepted`: it runs in the background
        except BaseException as exception:  # noqa: BLE001 - a bug in a step must not escape either
            stop_if_requested(state, exception)
            result = internal_error(state)
        return record(state, result)

    async def ainvoke(
        self,
        call: ToolCall,
        *,
        actor: Actor,
        approval: Optional[Approval] = None,
        deadline: Optional[float] = None,
        attempt: Optional[int] = None,
        as_task: bool = False,
    ) -> ToolResult:
        """`invoke` for asyncio callers: async handlers are awaited (and cancelled at the deadline) on
        the caller's loop; sync handlers run on the worker pool without blocking the loop (also with
        run_inline=True, which would block it). The receipt store is called directly (it is fast and
        local); a cancellation of the caller is recorded and then propagates."""
        import asyncio  # here, not at the top: a process that never awaits a tool never pays for it
        state = start(self._services, call, actor, approval, deadline)
        if attempt is not None:
            state.attempt = attempt_number(attempt)
        cancelled = False
        try:
            result = route(state, self._catalog)
            if result is None:
                plan = state.plan
                assert plan is not None
                for step in plan.admit:
                    result = step(state)
                    if result is not None:
                        break
                else:
                    if plan.tasks is not None and (plan.tasks or as_task):
                        from .steps.task import accept_task

                        result = accept_task(state)  # `accepted`: it runs in the background (see invoke)
                    else:
                        try:
                            run = await plan.aexecute(state)
                        except asyncio.CancelledError:
                            # The caller itself was cancelled: record what we know, then let the cancellation through.
                            cancelled = True
                            run = state.interrupted_run or Run.timed_out()
                        result = conclude(state, run)
        except BaseException as exception:  # noqa: BLE001
            stop_if_requested(state, exception)
            result = internal_error(state)
        result = record(state, result)
        if cancelled:
            raise asyncio.CancelledError()
        return result


def _own_copy(spec: ToolSpec) -> ToolSpec:
    """A shallow copy of a spec, as `copy.copy` makes one (its fields are immutable: frozen schemas,
    validators shared by content), without copy's protocol lookups: register runs this for every tool."""
    copied: ToolSpec = object.__new__(type(spec))
    copied.__dict__.update(spec.__dict__)
    return copied
