"""Running handlers: how a handler is called, where it runs, and what came of it.

The registry's execute step needs three things that have nothing to do with policy, so they live here:

* `Handler`: a registered function plus what its signature says (does it take a `CallContext`, is it
  `async def`), worked out once at registration, not on every call.
* `WorkerPool` and `LoopThread`: the bounded thread pool that runs sync handlers and the event-loop
  thread that runs async handlers for the synchronous `invoke`. Both belong to one registry, start on
  first use and stop with `Registry.close()`.
* `Run`: what came of one handler call (returned, failed on purpose, raised, timed out, never started)
  as a plain value. `run_sync` and `run_async` never raise for anything a handler does, except
  KeyboardInterrupt and SystemExit, which belong to the process, not to the tool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Optional

from .context import CallContext
from .errors import ToolError, ToolFailure

__all__ = [
    "Handler",
    "LoopThread",
    "PoolClosed",
    "ProcessExit",
    "Run",
    "RunKind",
    "WorkerPool",
    "plain_deadline",
    "plain_json_copy",
    "plain_json_snapshot",
    "run_async",
    "run_async_on_loop_thread",
    "run_sync",
    "seconds_left",
]

logger = logging.getLogger("agent_lab.execution")

# Exceptions that stop the process on purpose; a tool must never swallow them.
PROCESS_EXITS = (KeyboardInterrupt, SystemExit)


class ContextMode(str, enum.Enum):
    """How a handler receives its `CallContext`."""

    NONE = "none"  # handler(arguments)
    POSITIONAL = "positional"  # handler(arguments, ctx)
    KEYWORD = "keyword"  # handler(arguments, *, ctx=...) or a keyword parameter annotated CallContext


@dataclass(frozen=True)
class Handler:
    """A registered handler and the facts about its signature, worked out once."""

    function: Callable[..., Any]
    is_async: bool
    context_mode: ContextMode
    context_name: Optional[str] = None  # the keyword to pass the context under (KEYWORD mode)

    @classmethod
    def wrap(cls, function: Callable[..., Any]) -> Handler:
        if not callable(function):
            raise TypeError(f"a handler must be callable, not {type(function).__name__}")
        mode, name = _context_parameter(function)
        return cls(function=function, is_async=_is_async(function), context_mode=mode, context_name=name)

    def call(self, arguments: Any, ctx: CallContext) -> Any:
        """Call the function the way its signature asks for (for async handlers: make the coroutine)."""
        if self.context_mode is ContextMode.POSITIONAL:
            return self.function(arguments, ctx)
        if self.context_mode is ContextMode.KEYWORD:
            return self.function(arguments, **{str(self.context_name): ctx})
        return self.function(arguments)


def _is_async(function: Callable[..., Any]) -> bool:
    """`async def` functions, partials of them, and objects whose `__call__` is `async def`."""
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)


def _context_parameter(function: Callable[..., Any]) -> tuple[ContextMode, Optional[str]]:
    """Whether the handler takes a context: a second positional parameter (whatever its name, so
    `handler(arguments, limit=10)` would receive the context as `limit`), or a keyword-only parameter
    named `ctx` or annotated `CallContext`. A signature that cannot be read (some builtins) gets none."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return ContextMode.NONE, None
    positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in parameters if p.kind in positional_kinds]
    takes_varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    if not positional and not takes_varargs:
        raise TypeError("a handler must take the arguments object as its first positional parameter")
    if len(positional) >= 2:
        return ContextMode.POSITIONAL, None
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and _names_context(parameter):
            return ContextMode.KEYWORD, parameter.name
    return ContextMode.NONE, None


def _names_context(parameter: inspect.Parameter) -> bool:
    if parameter.name == "ctx" or parameter.annotation is CallContext:
        return True
    annotation = parameter.annotation
    return isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "CallContext"


# ---------------------------------------------------------------------------------------------
# What came of a call
# ---------------------------------------------------------------------------------------------


class RunKind(str, enum.Enum):
    RETURNED = "returned"  # the handler returned an output (not yet checked)
    FAILED = "failed"  # the handler raised ToolFailure: a business failure with no effect
    RAISED = "raised"  # the handler raised anything else
    TIMED_OUT = "timed_out"  # the caller stopped waiting at the deadline
    NOT_STARTED = "not_started"  # the deadline passed while the job waited for a worker: nothing ran
    CLOSED = "closed"  # the registry closed before the job could be handed to a worker: nothing ran


@dataclass(frozen=True)
class Run:
    """The result of one handler call, as a value."""

    kind: RunKind
    output: Any = None
    error: Optional[ToolError] = None  # the ToolFailure's error (FAILED)
    exception_type: Optional[str] = None  # the class name of what was raised (RAISED), for logs only

    @classmethod
    def returned(cls, output: Any) -> Run:
        return cls(RunKind.RETURNED, output=output)

    @classmethod
    def failed(cls, error: ToolError) -> Run:
        return cls(RunKind.FAILED, error=error)

    @classmethod
    def raised(cls, exception: BaseException) -> Run:
        return cls(RunKind.RAISED, exception_type=type(exception).__name__)

    @classmethod
    def timed_out(cls) -> Run:
        return cls(RunKind.TIMED_OUT)

    @classmethod
    def not_started(cls) -> Run:
        return cls(RunKind.NOT_STARTED)

    @classmethod
    def closed(cls) -> Run:
        return cls(RunKind.CLOSED)


def run_sync(handler: Handler, arguments: Any, ctx: CallContext) -> Run:
    """Call a sync handler and turn whatever it does into a `Run`.

    The deadline is checked right before the handler starts: a job that got its worker too late
    does not run at all (NOT_STARTED), so its caller can free the key knowing nothing happened."""
    if _too_late(ctx):
        return Run.not_started()
    try:
        output = handler.call(arguments, ctx)
    except ToolFailure as failure:
        return Run.failed(failure.error)
    except PROCESS_EXITS:
        raise
    except BaseException as exception:  # noqa: BLE001 - containing it is the point
        return _contained(ctx, exception)
    if inspect.iscoroutine(output):  # a sync wrapper returned a coroutine: never leave it unawaited
        output.close()
        return _contained(ctx, TypeError("handler returned a coroutine; register the async function itself"))
    return Run.returned(output)


CANCEL_GRACE_S = 0.25
"""After cancelling an async handler at its deadline, how long to wait for it to wind down before
leaving it behind (a handler that swallows CancelledError would otherwise hold its caller forever)."""


async def run_async(handler: Handler, arguments: Any, ctx: CallContext) -> Run:
    """Await an async handler (as a task) until its deadline, then cancel it.

    The caller is back within `CANCEL_GRACE_S` of the deadline even if the handler ignores the
    cancellation (`asyncio.wait_for` would wait for it to finish). A cancellation of the *caller*
    cancels the handler and propagates: swallowing it would break the caller's own cancellation.
    """
    if _too_late(ctx):
        return Run.not_started()
    try:
        task = asyncio.ensure_future(_carrying_exits(handler.call(arguments, ctx)))
    except ToolFailure as failure:
        return Run.failed(failure.error)
    except PROCESS_EXITS:
        raise
    except BaseException as exception:  # noqa: BLE001
        return _contained(ctx, exception)
    task.add_done_callback(_retrieve_outcome)
    try:
        done, _ = await asyncio.wait((task,), timeout=seconds_left(ctx.deadline))
        if not done:
            ctx.cancel_event.set()
            task.cancel()
            await asyncio.wait((task,), timeout=CANCEL_GRACE_S)
            return Run.timed_out()
    except asyncio.CancelledError:
        ctx.cancel_event.set()
        task.cancel()
        raise
    return _task_run(task, ctx)


def _too_late(ctx: CallContext) -> bool:
    """The call's deadline has passed before its handler could start."""
    return ctx.deadline is not None and time.monotonic() >= ctx.deadline


def _task_run(task: asyncio.Future, ctx: CallContext) -> Run:
    """What a finished handler task came to."""
    if task.cancelled():  # the handler cancelled itself: it did not finish its work
        return _contained(ctx, asyncio.CancelledError())
    exception = task.exception()
    if isinstance(exception, ToolFailure):
        return Run.failed(exception.error)
    if exception is not None:
        return _contained(ctx, exception)
    output = task.result()
    if isinstance(output, ProcessExit):
        raise output.exception
    return Run.returned(output)


def _retrieve_outcome(task: asyncio.Future) -> None:
    """Mark a task's exception as seen, so a handler left behind does not log "never retrieved"."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class ProcessExit:
    """A KeyboardInterrupt or SystemExit raised by an async handler on the registry's loop thread.

    Raised there it would stop the loop (and every later async call); instead it is carried back to
    the caller's thread and re-raised there, as it would be for a sync handler.
    """

    exception: BaseException


async def _carrying_exits(awaitable: Any) -> Any:
    """Await the handler, turning KeyboardInterrupt/SystemExit into a value: raised inside the task
    `wait_for` may create, they would escape the event loop itself instead of reaching our caller."""
    try:
        return await awaitable
    except PROCESS_EXITS as exit_request:
        return ProcessExit(exit_request)


async def run_async_on_loop_thread(handler: Handler, arguments: Any, ctx: CallContext) -> Any:
    """`run_async` for the registry's own loop thread: returns a `Run` or a `ProcessExit`."""
    try:
        return await run_async(handler, arguments, ctx)
    except PROCESS_EXITS as exit_request:
        return ProcessExit(exit_request)


def _contained(ctx: CallContext, exception: BaseException) -> Run:
    """Log an unexpected handler exception where operators can see it; the model never does."""
    logger.warning("handler of tool %r raised %s (call %s)", ctx.tool, type(exception).__name__, ctx.call_id)
    logger.debug("traceback of the %s raised by tool %r", type(exception).__name__, ctx.tool, exc_info=exception)
    return Run.raised(exception)


# ---------------------------------------------------------------------------------------------
# Deadlines and copies
# ---------------------------------------------------------------------------------------------


MAX_WAIT_S = 365 * 86400.0
"""The longest single wait for a handler. Far-off deadlines (a timeout_ms of 1e300) are cut to it,
because the platform cannot wait longer than `threading.TIMEOUT_MAX` and raises OverflowError."""


def seconds_left(deadline: Optional[float]) -> Optional[float]:
    """Seconds until an absolute `time.monotonic()` deadline (between 0 and MAX_WAIT_S); None means no limit."""
    if deadline is None:
        return None
    return min(max(0.0, deadline - time.monotonic()), MAX_WAIT_S)


def earliest(*deadlines: Optional[float]) -> Optional[float]:
    """The earliest of some absolute deadlines, ignoring None."""
    present = [deadline for deadline in deadlines if deadline is not None]
    return min(present) if present else None


def is_deadline(value: object) -> bool:
    """A caller deadline is None or a finite number (a bool is not a time)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large to be a float is no point in time either
        return False


def plain_json_copy(value: Any, max_depth: int) -> Any:
    """A copy of `value` made of exact JSON types, read from the containers' own storage.

    Taken once, before the arguments are checked, so that the schema step, the fingerprint (and with it
    the approval), the policy hooks and the handler all see the same data: a dict subclass cannot show
    the validator one thing through `__getitem__` and the handler another through `items()`, a str
    subclass cannot compare equal to everything, and the handler cannot mutate the caller's object.

    Containers (dict and list, subclasses included) become plain dicts and lists; str, int and float
    subclasses become their base type. Anything else is kept as it is for the schema step to refuse,
    as is whatever lies deeper than `max_depth` containers (so a cyclic value cannot loop).
    """
    return plain_json_snapshot(value, max_depth)[0]


def plain_json_snapshot(value: Any, max_depth: int) -> tuple[Any, bool]:
    """`plain_json_copy(value, max_depth)` and whether the copy is entirely plain JSON: no value
    that is not JSON (a tuple, NaN, a non-string key, an object), and no container nested `max_depth`
    deep (the same rule as `jsonvalue.find_non_json`). One walk answers both, so a clean output need
    not be walked a second time just to be told it is clean."""
    flaws: list[bool] = []
    return _plain_copy(value, max_depth, flaws), not flaws


def _plain_copy(value: Any, depth_left: int, flaws: list[bool]) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            flaws.append(True)
        return value
    if isinstance(value, dict):
        if depth_left <= 0:
            flaws.append(True)
            return value
        copy = {}
        for key, item in dict.items(value):
            if type(key) is not str:
                if isinstance(key, str):
                    key = str.__str__(key)
                else:
                    flaws.append(True)
            copy[key] = _plain_copy(item, depth_left - 1, flaws)
        return copy
    if isinstance(value, list):
        if depth_left <= 0:
            flaws.append(True)
            return value
        return [_plain_copy(item, depth_left - 1, flaws) for item in list.__iter__(value)]
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool cannot be subclassed, so this is an int subclass (an IntEnum)
        return int.__int__(value)
    if isinstance(value, float):
        return _plain_copy(float.__float__(value), depth_left, flaws)
    flaws.append(True)
    return value


def plain_deadline(value: float) -> float:
    """A deadline accepted by `is_deadline` as a plain float (an int or float subclass could override
    its comparisons and arithmetic). Raises OverflowError for an int too large to be a float."""
    return float.__float__(value) if isinstance(value, float) else float(int.__int__(value))


# ---------------------------------------------------------------------------------------------
# Where handlers run
# ---------------------------------------------------------------------------------------------


SLOT_POLL_S = 0.005
"""How often an asyncio caller looks for a free worker while every worker is busy (only then)."""


class PoolClosed(RuntimeError):
    """The worker pool or the event-loop thread is closed: the job was not accepted (nothing ran)."""


class WorkerPool:
    """A bounded thread pool, created on first use. Sync handlers run here so the caller can stop
    waiting at the deadline; a handler that overruns keeps its worker until it returns.

    A job is handed to the executor only once a worker is free for it (one slot per worker, taken
    before submitting and given back when the job ends). So when stuck handlers hold every worker,
    callers wait for a slot until their deadline and leave nothing behind: no queue of abandoned jobs
    (each holding its arguments) grows while the pool is jammed, and the thread count stays fixed.
    """

    def __init__(self, max_workers: int) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError("max_workers must be an integer of at least 1")
        self._max_workers = max_workers
        self._slots = threading.BoundedSemaphore(max_workers)
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, wait_s: Optional[float], function: Callable[..., Any], *arguments: Any) -> Optional[concurrent.futures.Future]:
        """Run `function(*arguments)` on a free worker; None if none was free within `wait_s` seconds
        (None: wait as long as it takes)."""
        if not self._slots.acquire(timeout=wait_s):
            return None
        return self._submit_holding_slot(function, arguments)

    async def asubmit(self, deadline: Optional[float], function: Callable[..., Any], *arguments: Any) -> Optional[concurrent.futures.Future]:
        """`submit` for asyncio callers: looks for a free worker without blocking the event loop."""
        while not self._slots.acquire(blocking=False):
            if deadline is not None and time.monotonic() >= deadline:
                return None
            await asyncio.sleep(SLOT_POLL_S)
        return self._submit_holding_slot(function, arguments)

    def _submit_holding_slot(self, function: Callable[..., Any], arguments: tuple) -> concurrent.futures.Future:
        try:
            future = self._started().submit(function, *arguments)
        except RuntimeError as refused:  # shut down meanwhile ("cannot schedule new futures after shutdown")
            self._slots.release()
            raise PoolClosed("the registry is closed") from refused
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(self._release_slot)
        return future

    def _release_slot(self, future: concurrent.futures.Future) -> None:
        self._slots.release()

    def _started(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._closed:
                raise PoolClosed("the registry is closed")
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._max_workers, thread_name_prefix="agent-lab-tool"
                )
            return self._executor

    def close(self, *, wait: bool) -> None:
        """Refuse new jobs, drop queued ones; with wait=True also wait for running handlers."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=True)


class LoopThread:
    """An event loop on a daemon thread, created on first use, for async handlers called from `invoke`."""

    def __init__(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        try:
            return asyncio.run_coroutine_threadsafe(coroutine, self._started())
        except RuntimeError as refused:  # closed, or the loop closed meanwhile ("Event loop is closed")
            coroutine.close()
            raise PoolClosed("the registry is closed") from refused
        except BaseException:
            coroutine.close()
            raise

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise PoolClosed("the registry is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="agent-lab-async-tools", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(_cancel_all_and_stop, loop)
        thread.join(timeout=1.0)
        if not thread.is_alive():
            loop.close()


def _cancel_all_and_stop(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)
