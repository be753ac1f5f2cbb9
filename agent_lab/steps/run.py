"""Step 6, execute: run the handler under the call's deadline, inline, on the worker pool or on an
event loop, and decide what a run that overran its deadline means.

* A sync handler runs on the registry's worker pool, so the caller can stop waiting at the deadline;
  a tool declared `execution="inline"` (or a `Registry(run_inline=True)`) runs on the caller's thread.
* An async handler runs on the registry's loop thread under `invoke`, on the caller's loop under
  `ainvoke`; it is cancelled at its deadline, and for a write the receipt then says "unknown". What it
  hands back is checked on a thread of its own (a small plain output on the loop it ran on), so the
  caller is answered at the deadline however long the check takes, the loop serves other calls
  meanwhile, and a write's result, checked late, becomes its receipt.
* A sync write that overruns its deadline keeps running on its worker and keeps its reservation for
  a bounded late-completion window; when it finishes, its real result becomes the receipt (exactly one
  effect either way). Past the window the key answers `outcome_unknown` here, but its lease is renewed
  until the handler returns, so other processes see it in progress and nobody can resolve it meanwhile.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from typing import TYPE_CHECKING, Any, Optional

from ..context import CallContext
from ..errors import Category, NextAction, ToolError
from ..execution import (ContextMode, Handler, PoolClosed, Run, RunKind, run_async, run_sync_for, seconds_left,
                         small_plain, type_name)
from ..interrupts import raise_stop_request
from ..leases import RECEIPT_RETRY_TIMEOUT_S
from ..workers import run_detached
from .conclude import check_output, check_run, internal_error, run_failure
from .idempotency import store_outcome

if TYPE_CHECKING:  # pragma: no cover
    from .state import CallState

__all__ = [
    "aexecute_awaited",
    "aexecute_inline",
    "aexecute_on_pool",
    "execute_inline",
    "execute_on_loop_thread",
    "execute_on_pool",
    "overran",
]

logger = logging.getLogger("agent_lab.registry")

_NO_CONTEXT = ContextMode.NONE  # a module constant: an enum member read through its class costs a descriptor call


def context(state: CallState) -> CallContext:
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
        state.services.cursors.bound(spec.name, state.actor.tenant, state.actor.id),  # never crosses tools or actors
    )


def execute_inline(state: CallState) -> Run:
    """A sync handler on the caller's thread (`ToolSpec(execution="inline")`, or a registry made with
    `run_inline=True`), so nobody can stop waiting at the deadline. The deadline is checked right
    before it starts (too late: nothing runs, `deadline_exceeded`), and again when it returns: an
    overrun is then reported exactly like a timeout on the pool (`tool_timeout`; a read's key is
    released, and a write's outcome is `unknown` while its real result becomes the receipt, so the
    same key replays it and the effect happens once)."""
    state.step = "execute"
    handler = state.handler
    assert handler is not None
    ctx = None if handler.context_mode is _NO_CONTEXT else context(state)
    # `_run_and_check`, written out: the same thread runs and checks, with one call less per inline read.
    run = run_sync_for(handler, state.arguments, state.call_deadline, state.tool, state.call_id, ctx,
                       check_output, state)
    if run.checked is None:  # it did not return: a ToolFailure, an exception, or it never started
        run = check_run(state, run)
    return overran(state, ctx, run) if state.finished_late else run


def execute_on_pool(state: CallState) -> Run:
    """A sync handler on the registry's worker pool: the caller waits at most until the deadline."""
    state.step = "execute"
    handler = state.handler
    assert handler is not None
    arguments = state.arguments  # already the call's own plain copy; nothing reads it after this
    ctx = None if handler.context_mode is _NO_CONTEXT else context(state)
    deadline = state.call_deadline
    try:
        future = state.services.pool.submit(seconds_left(deadline), _run_and_check, state, handler, arguments, ctx)
    except PoolClosed:
        return Run.closed()
    if future is None:
        return Run.not_started()  # no worker was free before the deadline: nothing ran
    try:
        future.result(timeout=seconds_left(deadline))  # the caller waits at most until the deadline
    except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):  # cancelled: see _settle
        pass
    return _settle(state, ctx, future)


def execute_on_loop_thread(state: CallState) -> Run:
    """An async handler under `invoke`: it runs on the registry's loop thread and is cancelled at
    its deadline there (run_async); a handler that blocks the loop is isolated (see LoopThread).
    Nothing it raises there, SystemExit and KeyboardInterrupt included, is the caller's to stop on.
    What it hands back is checked as under `ainvoke` (`_check_off_loop`): a small plain output on the
    loop, anything else on a thread of its own, so the loop serves the registry's other async tools
    meanwhile, and a write's result, checked after its caller was answered, becomes its receipt
    (`_LateAsyncWrite`)."""
    state.step = "execute"
    handler = state.handler
    assert handler is not None
    ctx = context(state)
    late = _LateAsyncWrite(state) if _completes_late(state) else None
    try:
        run = state.services.loop_thread.run(handler, state.arguments, ctx, functools.partial(_check_off_loop, state),
                                             late)
    except PoolClosed:
        return Run.closed()
    return overran(state, ctx, run) if state.finished_late else run


class _LateAsyncWrite:
    """An async write its caller stopped waiting for at the deadline, on the registry's loop (a blocked
    loop, or an output check that ends late): held like a late pooled write, and its real result, once
    it ends, becomes the key's receipt (`_complete_late`), so the same key replays it: one effect."""

    def __init__(self, state: CallState) -> None:
        self.state = state

    def left(self) -> None:
        self.state.late_pending = True
        assert self.state.hold is not None
        self.state.services.holder.run_late(self.state.hold)

    def finished(self, run: Run) -> None:
        _complete_late(self.state, run)


async def aexecute_awaited(state: CallState) -> Run:
    """An async handler under `ainvoke`: awaited on the caller's loop, cancelled at its deadline. What it
    hands back is checked within the deadline too (see `_acheck`): a small plain output on the caller's
    loop, anything else on a thread of its own, while the caller waits at most until the deadline."""
    state.step = "execute"
    handler = state.handler
    assert handler is not None
    ctx = context(state)
    run = await run_async(handler, state.arguments, ctx)
    if not _quick_to_check(run):
        return await _acheck(state, ctx, run)
    run = check_run(state, run)
    return overran(state, ctx, run) if state.finished_late else run


INLINE_CHECK_VALUES = 128
INLINE_CHECK_CHARACTERS = 1024
"""`ainvoke` checks on the caller's loop an async handler's output that is plain JSON of at most this many
values and characters of keys and strings (`small_plain`), and a ToolFailure as small; it hands anything
else to a thread of its own (`_acheck`). Such a check takes tens of microseconds at most, whatever the
tool's budget; the hop would cost about a hundred."""

_RETURNED, _FAILED = RunKind.RETURNED, RunKind.FAILED


def _quick_to_check(run: Run) -> bool:
    """Whether checking what the handler handed back (`check_run`) costs little whatever the tool's budget
    and runs no code of the handler's: a small plain output (`small_plain`), a ToolFailure of plain text,
    enum members and small plain details, or nothing handed back at all (it raised, or never ran)."""
    kind = run.kind
    if kind is _RETURNED:
        return small_plain(run.output, INLINE_CHECK_VALUES, INLINE_CHECK_CHARACTERS)
    if kind is not _FAILED:
        return True
    error = run.error
    return (type(error) is ToolError and type(error.code) is str and type(error.message) is str
            and type(error.category) is Category and type(error.next_action) is NextAction
            and len(error.code) + len(error.message) <= INLINE_CHECK_CHARACTERS
            and type(error.details) is dict
            and small_plain(error.details, INLINE_CHECK_VALUES, INLINE_CHECK_CHARACTERS))


async def _acheck(state: CallState, ctx: CallContext, run: Run) -> Run:
    """Check what an async handler handed back on a thread of the process's reservoir (`run_detached`),
    the caller waiting at most until the deadline: a check that ends late is a timeout (`overran`), and
    one still running then is left to end on its own, a write's real result then becoming its key's
    receipt (`_settle`), as for a sync write that overruns on the pool: one effect, which the same key
    replays.

    Why a thread, and not a walk that reads the clock every so often: the check runs code of the
    handler's that no clock read can interrupt (the JSON form of a dataclass, a pydantic model, a
    datetime's tzinfo), and its parts past the walk (`json_size`, the C encoder, and the output
    validator) would each need a stop of their own; on another thread the caller stops waiting at the
    deadline whatever the check does, the way the sync paths bound it. Why not the registry's worker
    pool: busy sync handlers would then delay, or time out, async calls whose handler ended in time
    (`invoke` hands its checks to the same threads, `_check_off_loop`). The common small
    plain output never pays the hop (about a hundred microseconds): its check is bounded by
    `INLINE_CHECK_VALUES` and `INLINE_CHECK_CHARACTERS`, not by the tool's budget, and runs no handler
    code (`_quick_to_check`)."""
    import asyncio
    future = _check_detached(state, run)
    if isinstance(future, Run):  # checked here after all (see `_check_detached`)
        return overran(state, ctx, future) if state.finished_late else future
    try:
        await asyncio.wait([asyncio.wrap_future(future)], timeout=seconds_left(state.call_deadline))
    except asyncio.CancelledError:
        state.interrupted_run = _settle(state, ctx, future)  # the caller, cancelled: as at the deadline
        raise
    return _settle(state, ctx, future)


def _check_off_loop(state: CallState, run: Run) -> Run | concurrent.futures.Future:
    """Under `invoke`, on the registry's loop thread: the check of what an async handler handed back,
    done there if it is quick (`_quick_to_check`), otherwise started on a thread of its own, whose future
    the loop hands to the waiting caller (`LoopThread.run`). A check on the loop would stop every other
    async tool of the registry while it runs (a large output is checked in seconds, handler code it runs
    may never return), until the loop is judged blocked and replaced: their calls would wait, or time out."""
    return check_run(state, run) if _quick_to_check(run) else _check_detached(state, run)


def _check_detached(state: CallState, run: Run) -> Run | concurrent.futures.Future:
    """The future of the check of `run` on a thread of the process's reservoir (`run_detached`); the checked
    run itself when no thread starts (the interpreter is exiting): then it is checked here."""
    assert state.spec is not None
    try:
        return run_detached(state.services.detached(state.spec.name), _check_job, state, run)
    except RuntimeError:
        return _check_job(state, run)


def _check_job(state: CallState, run: Run) -> Run:
    """The check of what an async handler handed back, on a thread of its own (see `_run_and_check`)."""
    try:
        return check_run(state, run)
    except BaseException as exception:  # noqa: BLE001 - off the caller's thread: never its stop request
        return tuple.__new__(Run, (RunKind.RAISED, None, None, type_name(exception), internal_error(state)))


async def aexecute_inline(state: CallState) -> Run:
    """A tool declared `execution="inline"` under `ainvoke`: on the caller's thread (a hand-off to the
    pool would cost more than such a handler; it blocks the loop only while it runs)."""
    return execute_inline(state)


async def aexecute_on_pool(state: CallState) -> Run:
    """A sync handler under `ainvoke`: on the worker pool, without blocking the caller's loop (also in a
    registry made with `run_inline=True`, which would block it). A cancellation of the caller stops
    the waiting as a deadline would: a queued job is dropped, a running write still completes."""
    import asyncio
    state.step = "execute"
    handler = state.handler
    assert handler is not None
    arguments = state.arguments
    ctx = None if handler.context_mode is _NO_CONTEXT else context(state)
    deadline = state.call_deadline
    try:
        future = await state.services.pool.asubmit(deadline, _run_and_check, state, handler, arguments, ctx)
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
        state.interrupted_run = _settle(state, ctx, future)
        raise
    return _settle(state, ctx, future)


def _run_and_check(state: CallState, handler: Handler, arguments: Any, ctx: Optional[CallContext]) -> Run:
    """A sync handler's job (on a worker, or inline): run it, then check what it handed back on the
    same thread (`Run.checked`). An object it returns or raises can run code when it is read (a
    dict subclass's methods, a `__class__` property, a `__del__`): that code runs here, where the
    caller can stop waiting at the deadline, never on the caller's thread after it."""
    try:
        run = run_sync_for(handler, arguments, state.call_deadline, state.tool, state.call_id, ctx, check_output, state)
        return run if run.checked is not None else check_run(state, run)
    except BaseException as exception:  # noqa: BLE001 - on a worker: never the caller's stop request
        return tuple.__new__(Run, (RunKind.RAISED, None, None, type_name(exception), internal_error(state)))


def overran(state: CallState, ctx: Optional[CallContext], run: Run) -> Run:
    """A run that ended (the handler and the check of what it handed back) after the call's deadline
    is answered as a timeout, however little it overran and wherever it ran: a read is `tool_timeout`,
    outcome failed; a write `tool_timeout`, outcome unknown, `lookup_status`. A write's effect did
    happen, so its real result (success, ToolFailure or broken output, as checked) becomes its key's
    receipt, stored in the record step like any outcome: the same key replays it, never runs again."""
    if ctx is not None:
        ctx.cancel_event.set()
    if _completes_late(state):
        state.receipt_result = run.checked if run.checked is not None else run_failure(state, run)
    return Run.timed_out()


def _settle(state: CallState, ctx: Optional[CallContext], future: concurrent.futures.Future) -> Run:
    """What to report once the caller stops waiting for a pool job."""
    if future.cancelled():  # close() dropped it from the executor's queue before a worker took it
        return Run.closed()
    if future.done():  # it may have ended past the deadline: the caller can wake late (the GIL, a busy host)
        run = _job_run(future)
        return overran(state, ctx, run) if state.finished_late else run
    if future.cancel():
        return Run.not_started()  # never left the queue: nothing ran
    if ctx is not None:
        ctx.cancel_event.set()
    if _completes_late(state):
        state.late_pending = True
        assert state.hold is not None
        state.services.holder.run_late(state.hold)  # held (and renewed) for the late-completion window
        future.add_done_callback(functools.partial(_complete_late_future, state))
    return Run.timed_out()


def _completes_late(state: CallState) -> bool:
    """A timed-out sync write that holds a reservation keeps it until the handler finishes (or,
    in this process, until the late-completion window ends)."""
    return state.hold is not None and state.spec is not None and state.spec.writes


def _complete_late_future(state: CallState, future: concurrent.futures.Future) -> None:
    _complete_late(state, _job_run(future))


def _complete_late(state: CallState, run: Run) -> None:
    """Store the result of a write that finished after its caller stopped waiting.

    Stored under the call's owner token, so it lands only if nobody resolved the key meanwhile
    (past the late-completion window the key may have been resolved; then the store refuses it)."""
    try:
        if run.checked is None:
            run = check_run(state, run)
        result = run.checked if run.checked is not None else run_failure(state, run)
        store_outcome(state, result, timeout_s=RECEIPT_RETRY_TIMEOUT_S)
    except BaseException as exception:  # noqa: BLE001
        raise_stop_request(exception, in_user_code=False)
        logger.warning("could not store the late result of tool %r: %s", state.tool, type_name(exception))
        state.services.holder.let_go(state.hold)
    finally:
        if state.task is not None:  # the run of a task ends with its handler, not at its deadline
            state.services.tasks.ended(state)


def _job_run(future: concurrent.futures.Future) -> Run:
    """What a finished pool job came to. The job (`_run_and_check`) answers a `Run` whatever the handler
    does; should it raise all the same, it raised on a worker thread, so it is never the caller's stop
    request (`agent_lab.interrupts`): a contained failure, as a handler's exception is."""
    try:
        result: Run = future.result()
        return result
    except BaseException as exception:  # noqa: BLE001
        return Run.raised(exception)
