"""Running handlers: how a handler is called, where it runs, and what came of it.

The registry's execute step needs three things that have nothing to do with policy, so they live here:

* `Handler`: a registered function plus what its signature says (does it take a `CallContext`, is it
  `async def`), worked out once at registration, not on every call.
* `WorkerPool` and `LoopThread`: the bounded thread pool that runs sync handlers and the event-loop
  thread that runs async handlers for the synchronous `invoke` (replaced when a handler blocks it).
  Both belong to one registry, start on first use and stop with `Registry.close()`.
* `Run`: what came of one handler call (returned, failed on purpose, raised, timed out, never started)
  as a plain value. `run_sync` and `run_async` never raise for anything a handler does, BaseException
  included (SystemExit, KeyboardInterrupt, GeneratorExit): only the caller's own stop request passes,
  as `agent_lab.interrupts.stop_request` tells it apart (a real Ctrl-C on the main thread).
* What a handler's exception leaves in the logs (`describe_exception`): its type and where it was
  raised, never its text for a tool with redacted fields, and never the exception object itself.
"""

from __future__ import annotations

import concurrent.futures
import enum
import inspect
import logging
import math
import queue
import threading
import time
import traceback
import weakref
from types import CoroutineType, FunctionType
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Protocol

if TYPE_CHECKING:
    import asyncio  # imported where it is used: 26 ms that a sync-only process never needs

from .context import CallContext
from .errors import ToolError, ToolFailure
from .jsonforms import NO_FORM, json_form
from .interrupts import raise_stop_request
from .workers import BoundedExecutor

__all__ = [
    "LOOP_STALL_S",
    "MAX_ABANDONED_LOOPS",
    "WITHHELD_MESSAGE",
    "Handler",
    "LoopThread",
    "OverBudget",
    "PoolClosed",
    "ProcessExit",
    "Run",
    "RunKind",
    "WorkerPool",
    "describe_exception",
    "measured_copy",
    "measured_json_copy",
    "plain_deadline",
    "plain_json_copy",
    "plain_json_snapshot",
    "run_async",
    "run_async_on_loop_thread",
    "run_sync",
    "run_sync_for",
    "seconds_left",
    "small_plain",
]

logger = logging.getLogger("agent_lab.execution")

# The exceptions that may be a request to stop the process (see `agent_lab.interrupts`).
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
    redacts: bool = False  # its tool has redacted fields: its exceptions' messages are never logged

    @classmethod
    def wrap(cls, function: Callable[..., Any], *, redacts: bool = False) -> Handler:
        """Work out how to call `function`, refusing (TypeError) a signature that can be called neither
        as `function(arguments)` nor as `function(arguments, ctx)`.

        A signature `inspect` cannot read (some builtins and C extensions) cannot be checked: such a
        handler is called as `function(arguments)`, and if that fails, each call is a contained
        `handler_exception`, as for any handler that raises.
        """
        if not callable(function):
            raise TypeError(f"a handler must be callable, not {type(function).__name__}")
        mode, name = _context_parameter(function)
        return cls(function=function, is_async=_is_async(function), context_mode=mode, context_name=name,
                   redacts=bool(redacts))

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


MAX_READ_SIGNATURES = 1024
_read_signatures: dict[Any, tuple[ContextMode, Optional[str]]] = {}


def _context_parameter(function: Callable[..., Any]) -> tuple[ContextMode, Optional[str]]:
    """`_read_context_parameter`, remembered for plain functions by what their signature is made of:
    a handler that is a closure is a new function object for every registry built (a lab builds one
    per case), with the same code, and reading its signature was a third of registering it."""
    key = _signature_parts(function)
    if key is None:
        return _read_context_parameter(function)
    found = _read_signatures.get(key)
    if found is None:
        found = _read_context_parameter(function)  # a refusal raises and is not remembered
        if len(_read_signatures) < MAX_READ_SIGNATURES:
            _read_signatures[key] = found
    return found


def _signature_parts(function: Callable[..., Any]) -> Any:
    """What `inspect.signature` reads of a plain Python function (its code, which parameters have
    defaults, its annotations), or None for anything else (partials, methods, callables, functions
    with `__wrapped__` or `__signature__`), whose signature is read every time."""
    if type(function) is not FunctionType:
        return None
    attributes = function.__dict__
    if "__wrapped__" in attributes or "__signature__" in attributes:
        return None
    defaults, keyword_defaults = function.__defaults__, function.__kwdefaults__
    key = (function.__code__, len(defaults) if defaults else 0, tuple(keyword_defaults) if keyword_defaults else (),
           tuple(function.__annotations__.items()))
    try:
        hash(key)
    except TypeError:  # an annotation that is not hashable
        return None
    return key


def _read_context_parameter(function: Callable[..., Any]) -> tuple[ContextMode, Optional[str]]:
    """Whether the handler takes a context: a second positional parameter (whatever its name, so
    `handler(arguments, limit=10)` would receive the context as `limit`), or a keyword-only parameter
    named `ctx` or annotated `CallContext`. A signature that cannot be read (some builtins) gets none.

    The chosen way of calling must bind: `lambda a, b, c: ...` (a third required parameter) or a
    required keyword-only parameter other than the context is refused with a TypeError naming it."""
    try:
        signature = inspect.signature(function)
    except Exception:  # noqa: BLE001 - unreadable (a builtin, a broken __signature__): called as f(arguments)
        return ContextMode.NONE, None
    parameters = list(signature.parameters.values())
    positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in parameters if p.kind in positional_kinds]
    takes_varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    if not positional and not takes_varargs:
        raise TypeError("a handler must take the arguments object as its first positional parameter")
    mode, name = ContextMode.NONE, None
    if len(positional) >= 2:
        mode = ContextMode.POSITIONAL
    else:
        for parameter in parameters:
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY and _names_context(parameter):
                mode, name = ContextMode.KEYWORD, parameter.name
                break
    _check_binds(function, signature, mode, name)
    return mode, name


def _check_binds(function: Callable[..., Any], signature: inspect.Signature, mode: ContextMode,
                 name: Optional[str]) -> None:
    """Refuse, at registration, a handler the registry could never call the way `mode` says."""
    arguments, ctx = object(), object()
    try:
        if mode is ContextMode.POSITIONAL:
            signature.bind(arguments, ctx)
        elif mode is ContextMode.KEYWORD:
            signature.bind(arguments, **{str(name): ctx})
        else:
            signature.bind(arguments)
    except TypeError as problem:
        shown = getattr(function, "__qualname__", None) or type(function).__name__
        raise TypeError(
            f"handler {shown}{signature} cannot be called as handler(arguments) or handler(arguments, ctx) "
            f"({problem}); give any further parameter a default value"
        ) from None


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


_RETURNED = RunKind.RETURNED
"""Module constants for the members the hot path compares with: an enum member read through its class
costs a descriptor call (about 900 instructions on CPython 3.11), a module constant almost nothing."""


class Run(NamedTuple):
    """The result of one handler call, as a value. (A named tuple: built on every call, and a frozen
    dataclass costs several times as much to make.)"""

    kind: RunKind
    output: Any = None
    error: Optional[ToolError] = None  # the ToolFailure's error (FAILED)
    exception_type: Optional[str] = None  # the class name of what was raised (RAISED), for logs only
    checked: Any = None  # RETURNED or FAILED: the call's result, made on the thread that ran the handler

    @classmethod
    def returned(cls, output: Any) -> Run:
        return cls(RunKind.RETURNED, output)

    @classmethod
    def failed(cls, error: ToolError) -> Run:
        return cls(RunKind.FAILED, None, error)

    @classmethod
    def raised(cls, exception: BaseException) -> Run:
        return cls(RunKind.RAISED, None, None, type_name(exception))

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
    return run_sync_for(handler, arguments, ctx.deadline, ctx.tool, ctx.call_id, ctx)


def run_sync_for(handler: Handler, arguments: Any, deadline: Optional[float], tool: str, call_id: str,
                 ctx: Optional[CallContext], check: Optional[Callable[[Any, Any], Run]] = None,
                 checking: Any = None) -> Run:
    """`run_sync` for a call whose context may not have been built: a handler that takes none is given
    `ctx=None` (its context would only be made to be thrown away); `deadline`, `tool` and `call_id`
    are the context's own values. With `check`, what the handler returned is handed on, on this same
    thread, as `check(checking, output)`, whose run is the answer (the registry's output check, which
    contains whatever reading the output raises): a returned output is never wrapped twice."""
    if deadline is not None and _monotonic() >= deadline:
        return _NOT_STARTED
    try:
        output = handler.function(arguments) if ctx is None else handler.call(arguments, ctx)
    except ToolFailure as failure:
        return Run.failed(failure.error)
    except BaseException as exception:  # noqa: BLE001 - containing it is the point, sys.exit and Ctrl-C too
        raise_stop_request(exception)  # only the caller's own Ctrl-C passes (see agent_lab.interrupts)
        return _contained_for(tool, call_id, exception, handler)
    # A sync wrapper returned a coroutine: never leave it unawaited. (`type`, not isinstance, which would
    # ask the output's own `__class__`: handler code, here outside the try.) CoroutineType has no subclasses.
    if type(output) is CoroutineType:
        output.close()
        return _contained_for(tool, call_id, TypeError("handler returned a coroutine; register the async function "
                                                       "itself"), handler)
    if check is not None:
        return check(checking, output)
    return _new_run(Run, (_RETURNED, output, None, None, None))  # the named tuple's __new__ is Python code


_NOT_STARTED = Run.not_started()
_new_run = tuple.__new__
_monotonic = time.monotonic


CANCEL_GRACE_S = 0.25
"""An async handler cancelled at its deadline that is still running this long after is reported (a
warning): it swallowed its CancelledError, and runs on, left behind. Its caller was answered at the
deadline and never waits for it; a registry closing waits this long for its tasks to end."""


async def run_async(handler: Handler, arguments: Any, ctx: CallContext) -> Run:
    """Await an async handler (as a task) until its deadline, then cancel it and answer at once.

    The caller is back at the deadline even if the handler ignores the cancellation
    (`asyncio.wait_for` would wait for it to finish): the task is left behind, and reported if it is
    still running `CANCEL_GRACE_S` later. A cancellation of the *caller* cancels the handler and
    propagates: swallowing it would break the caller's own cancellation.
    """
    import asyncio
    if _too_late(ctx):
        return Run.not_started()
    try:
        task = asyncio.ensure_future(_carrying_exits(handler.call(arguments, ctx)))
    except ToolFailure as failure:
        return Run.failed(failure.error)
    except BaseException as exception:  # noqa: BLE001
        raise_stop_request(exception)
        return _contained(ctx, exception, handler)
    task.add_done_callback(_retrieve_outcome)
    try:
        done, _ = await asyncio.wait((task,), timeout=seconds_left(ctx.deadline))
        if not done:
            _cancel_handler(task, ctx)
            return Run.timed_out()
    except asyncio.CancelledError:
        _cancel_handler(task, ctx)
        raise
    return _task_run(task, ctx, handler)


def _cancel_handler(task: asyncio.Future, ctx: CallContext) -> None:
    """Cancel a handler's task, never waiting for it: reported if it is still running `CANCEL_GRACE_S` on."""
    ctx.cancel_event.set()
    task.cancel()
    task.get_loop().call_later(CANCEL_GRACE_S, _report_left_behind, task, ctx.tool, ctx.call_id)


def _report_left_behind(task: asyncio.Future, tool: str, call_id: str) -> None:
    """A handler cancelled at its deadline that has not stopped: it runs on, with nobody waiting."""
    if not task.done():
        logger.warning("async handler of tool %r did not stop within %.2f s of its cancellation at the deadline "
                       "(call %s): it swallows CancelledError and runs on, left behind", tool, CANCEL_GRACE_S, call_id)


def _too_late(ctx: CallContext) -> bool:
    """The call's deadline has passed before its handler could start."""
    return ctx.deadline is not None and time.monotonic() >= ctx.deadline


def _task_run(task: asyncio.Future, ctx: CallContext, handler: Handler) -> Run:
    """What a finished handler task came to."""
    import asyncio
    if task.cancelled():  # the handler cancelled itself: it did not finish its work
        return _contained(ctx, asyncio.CancelledError(), handler)
    exception = task.exception()
    if isinstance(exception, ToolFailure):
        return Run.failed(exception.error)
    if exception is not None:
        return _contained(ctx, exception, handler)
    output = task.result()
    if type(output) is ProcessExit:  # the handler raised KeyboardInterrupt or SystemExit in its task
        raise_stop_request(output.exception)
        return _contained(ctx, output.exception, handler)
    return Run.returned(output)


def _retrieve_outcome(task: asyncio.Future) -> None:
    """Mark a task's exception as seen, so a handler left behind does not log "never retrieved"."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class ProcessExit:
    """A KeyboardInterrupt or SystemExit an async handler raised, carried out of its task as a value.

    Raised inside a task, asyncio lets these two escape the event loop itself (stopping it, and every
    later async call with it); carried out, `run_async` decides whose they are (`stop_request`): on the
    registry's loop thread, or anywhere but the main thread, they are the handler's, a contained failure.
    """

    exception: BaseException


async def _carrying_exits(awaitable: Any) -> Any:
    """Await the handler, turning KeyboardInterrupt/SystemExit into a `ProcessExit` value."""
    try:
        return await awaitable
    except PROCESS_EXITS as exit_request:
        return ProcessExit(exit_request)


LoopCheck = Callable[[Run], "Run | concurrent.futures.Future"]
"""The registry's output check as `LoopThread.run` takes it: the checked run, or the future of a check it
started on another thread (one that would hold the loop: a large output, handler code)."""


async def run_async_on_loop_thread(handler: Handler, arguments: Any, ctx: CallContext,
                                   check: Optional[LoopCheck] = None) -> Run | concurrent.futures.Future:
    """`run_async` for the registry's own loop thread. `check` (the registry's output check, which
    contains what reading the output raises) is called here, never on the waiting caller's thread: an
    object the handler hands back can run code when it is read, and the caller stops waiting for this
    loop; what it cannot do quickly it starts on another thread, and its future is the job's answer
    (`_LoopJob`), so the loop is free meanwhile. Nothing raised here is the caller's stop request: this is
    never the main thread."""
    run = await run_async(handler, arguments, ctx)
    return run if check is None else check(run)


def _contained(ctx: CallContext, exception: BaseException, handler: Handler) -> Run:
    """Log an unexpected handler exception where operators can see it; the model never does."""
    return _contained_for(ctx.tool, ctx.call_id, exception, handler)


def _contained_for(tool: str, call_id: str, exception: BaseException, handler: Handler) -> Run:
    """`_contained` by the call's tool and id.

    What the logs get, at every level, is what `describe_exception` writes: never the exception
    object itself (`exc_info`), whose message and traceback text the handler wrote, possibly with a
    secret argument or output value in it."""
    kind = type_name(exception)
    logger.warning("handler of tool %r raised %s (call %s)", tool, kind, call_id)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("handler of tool %r (call %s) raised %s", tool, call_id,
                     describe_exception(exception, show_message=not handler.redacts))
    return Run(RunKind.RAISED, None, None, kind)


_TYPE_NAME = type.__dict__["__name__"]  # the class's own name, read through the C slot
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]


def type_name(value: object) -> str:
    """The name of `value`'s class, read without running any of its code (a metaclass may define a
    `__name__` property that raises)."""
    return str.__str__(_TYPE_NAME.__get__(type(value)))


MAX_LOGGED_MESSAGE_CHARS = 200
"""A logged exception message longer than this is cut (it is a hint for a developer, not a record)."""

MAX_LOGGED_CHAIN = 4
"""At most this many chained exceptions (`raise ... from`, or raised while handling) are described."""

WITHHELD_MESSAGE = "[message withheld: it may hold a redacted value]"


def describe_exception(exception: BaseException, *, show_message: bool) -> str:
    """One safe text for a log: the exception's type, its message or a placeholder, and where it was
    raised; the same for each exception it was chained to.

    Where: the traceback's frames as file, line, function and source line (code, never values: no
    locals are captured). The message is shown only with `show_message` (a tool without redacted
    fields), cut to `MAX_LOGGED_MESSAGE_CHARS` and written as a Python literal, so it stays on one line
    and cannot forge log lines; otherwise it is `WITHHELD_MESSAGE`. For a tool with redacted fields no
    masking could be trusted: a handler may put an output value (which the call never carried) or a
    transformed secret (sliced, encoded) in its message. Notes (`add_note`) are never shown.
    """
    parts: list[str] = []
    seen: set[int] = set()
    current: Optional[BaseException] = exception
    while current is not None and id(current) not in seen and len(seen) < MAX_LOGGED_CHAIN:
        if seen:
            parts.append("which was raised from or while handling:")
        seen.add(id(current))
        parts.append(f"{_qualified_type(current)}: {_logged_message(current, show_message)}")
        parts.extend(_frames(current))
        cause = _CAUSE.__get__(current)  # the C slots: an exception class's properties are not asked
        current = cause if cause is not None else \
            (None if _SUPPRESS_CONTEXT.__get__(current) else _CONTEXT.__get__(current))
    return "\n".join(parts)


_CAUSE = BaseException.__dict__["__cause__"]
_CONTEXT = BaseException.__dict__["__context__"]
_SUPPRESS_CONTEXT = BaseException.__dict__["__suppress_context__"]
_TRACEBACK = BaseException.__dict__["__traceback__"]


def _qualified_type(exception: BaseException) -> str:
    kind = type(exception)
    try:  # through the C slots: a metaclass's properties are not asked
        module = _TYPE_MODULE.__get__(kind)
        name = str.__str__(_TYPE_QUALNAME.__get__(kind))
    except Exception:  # noqa: BLE001 - __module__ is whatever the class dict holds (a property, say)
        return type_name(exception)
    return name if not isinstance(module, str) or module == "builtins" else f"{str.__str__(module)}.{name}"


def _logged_message(exception: BaseException, show_message: bool) -> str:
    if not show_message:
        return WITHHELD_MESSAGE
    try:
        text = str(exception)
        if not isinstance(text, str):
            return "[message unreadable]"
        text = str.__str__(text)
    except BaseException as problem:  # noqa: BLE001 - a __str__ that raises (sys.exit too) is no reason to raise
        raise_stop_request(problem)
        return "[message unreadable]"
    if len(text) > MAX_LOGGED_MESSAGE_CHARS:
        text = text[:MAX_LOGGED_MESSAGE_CHARS] + "..."
    return repr(text)


def _frames(exception: BaseException) -> list[str]:
    try:
        frames = traceback.extract_tb(_TRACEBACK.__get__(exception))
    except BaseException as problem:  # noqa: BLE001
        raise_stop_request(problem, in_user_code=False)
        return ["  (traceback unreadable)"]
    lines = []
    for frame in frames:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return lines


# ---------------------------------------------------------------------------------------------
# Deadlines and copies
# ---------------------------------------------------------------------------------------------


MAX_WAIT_S = 365 * 86400.0
"""The longest single wait for a handler. Far-off deadlines (a timeout_ms of 1e300) are cut to it,
because the platform cannot wait longer than `threading.TIMEOUT_MAX` and raises OverflowError."""


def seconds_left(deadline: Optional[float]) -> Optional[float]:
    """Seconds until an absolute `time.monotonic()` deadline (between 0 and MAX_WAIT_S); None means no limit.
    (Comparisons, not min() and max(): those two builtins cost more than the rest of it, on every wait.)"""
    if deadline is None:
        return None
    left = deadline - _monotonic()
    if left > 0.0:
        return left if left < MAX_WAIT_S else MAX_WAIT_S
    return 0.0


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
    # By `kind` (type()), never isinstance: that would ask an object for its own `__class__`, any code.
    if issubclass(kind, dict):
        if depth_left <= 0:
            flaws.append(True)
            return value
        copy = {}
        for key, item in dict.items(value):
            if type(key) is not str:
                if issubclass(type(key), str):
                    key = str.__str__(key)
                else:
                    flaws.append(True)
            copy[key] = _plain_copy(item, depth_left - 1, flaws)
        return copy
    if issubclass(kind, list):
        if depth_left <= 0:
            flaws.append(True)
            return value
        return [_plain_copy(item, depth_left - 1, flaws) for item in list.__iter__(value)]
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):  # bool cannot be subclassed, so this is an int subclass (an IntEnum)
        return int.__int__(value)
    if issubclass(kind, float):
        return _plain_copy(float.__float__(value), depth_left, flaws)
    flaws.append(True)
    return value


class OverBudget(Exception):
    """Raised by `measured_json_copy` once the value is certainly larger than its budget."""


MEASURED_INT_LIMIT = 2**63
"""An integer beyond this (either sign) makes `measured_json_copy` give no bound: it is measured exactly."""

MEASURED_NESTING = 32
"""A container nested this deep makes `measured_json_copy` give no bound (and no canonical promise)."""


def measured_json_copy(value: Any, max_depth: int, budget: Optional[int] = None,
                       forms: bool = False) -> tuple[Any, bool, Optional[int]]:
    """`plain_json_snapshot(value, max_depth)` plus an upper bound of the copy's compact UTF-8 JSON size,
    from the same walk: `(copy, plain, bound)`.

    The bound lets the size check skip the JSON encoder for the common small value: each string is at
    most 6 bytes a character plus its quotes (an escaped control character is 6), and every other node
    (a key's quotes, colon and comma, a number of at most 64 bits, a float's shortest repr, a literal,
    a pair of brackets) at most 25. `bound` is None when the walk cannot bound the copy (an integer
    beyond `MEASURED_INT_LIMIT`, nesting `MEASURED_NESTING` deep, or a dict subclass, whose own `items`
    the JSON encoder would call): measure it exactly then. When the
    copy is plain and `bound` is not None, the copy also has a canonical JSON form (`canonical_json`
    accepts it: exact JSON types, finite numbers, narrow integers, shallow nesting).

    With `budget`, the walk raises `OverBudget` as soon as the copy is certainly larger (one byte a node
    and a character at least), so the walk's work stays proportional to the budget, not to the value.

    With `forms` (outputs), a value of a type `agent_lab.jsonforms` gives a JSON form (a datetime, a
    Decimal, a dataclass, a pydantic model, a tuple...) is copied as that form, in the same walk; plain
    JSON never reaches that check, so it costs a plain output nothing. Arguments are not converted.
    """
    copy, plain, bound, _ = measured_copy(value, max_depth, budget, forms)
    return copy, plain, bound


def measured_copy(value: Any, max_depth: int, budget: Optional[int] = None,
                  forms: bool = False) -> tuple[Any, bool, Optional[int], bool]:
    """`measured_json_copy` and whether the copy may hold a float: `(copy, plain, bound, floats)`.

    A plain, bounded copy without a float is written canonically by the JSON encoder as it is (only
    floats are rewritten: `1.0` is `1`), so the fingerprint of such arguments needs no second walk
    (`Fingerprinter.fingerprint_exact`). The registry's schema and output steps call this form."""
    if type(value) is dict and len(value) <= _FLAT_FAST_ITEMS and max_depth > 0:
        # Most tool arguments and outputs: one small object of strings and numbers, copied here in one
        # loop (no call per member); anything else leaves the loop for the general walk below.
        copy: Any = {}
        characters = 0
        floats = False
        for key, item in value.items():
            if type(key) is not str:
                break
            kind = type(item)
            if kind is str:
                characters += len(key) + len(item)
            elif kind is int:
                if not -MEASURED_INT_LIMIT <= item <= MEASURED_INT_LIMIT:
                    break
                characters += len(key)
            elif kind is float:
                if not math.isfinite(item):
                    break
                characters += len(key)
                floats = True
            elif kind is bool or item is None:
                characters += len(key)
            else:
                break
            copy[key] = item
        else:
            nodes = 2 * len(copy) + 2
            if budget is not None and characters + nodes > budget:
                raise OverBudget()
            return copy, True, 6 * characters + 25 * nodes, floats
    limit = math.inf if budget is None else budget
    # characters, nodes, a flaw (not plain), unbounded, forms, a float
    state: list[Any] = [0, 0, False, False, forms, False]
    if type(value) is str:
        state[0] = len(value)
        copy = value
    else:
        copy = _measured(value, max_depth, state, limit, max_depth - MEASURED_NESTING)
    characters, nodes, flawed, unbounded, _, floats = state
    nodes += 1
    if characters + nodes > limit:
        raise OverBudget()
    return copy, not flawed, None if unbounded else 6 * characters + 25 * nodes, floats


_FLAT_FAST_ITEMS = 64
"""`measured_copy` copies a dict of at most this many scalar members in one loop."""


def small_plain(value: Any, max_values: int, max_characters: int) -> bool:
    """Whether `value` is plain JSON of the exact types, within `max_values` values (a container counts
    one, and one more for each member, as in `_measured`) and `max_characters` characters of keys and
    strings: dicts and lists exactly (no subclass), str keys, and strs, ints within `MEASURED_INT_LIMIT`,
    finite floats, bools and None. Reading it runs no code of the handler's, and copying, measuring and
    validating it costs little whatever the tool's budget: `ainvoke` checks such an output on the
    caller's loop (see `agent_lab.steps.run`). Gives up at the first value over either bound, so it
    costs little too."""
    left = [max_values, max_characters]
    kind = type(value)
    if kind is dict or kind is list:
        return _small_plain(value, left)
    if kind is str:
        return len(value) <= max_characters
    if kind is int:
        return -MEASURED_INT_LIMIT <= value <= MEASURED_INT_LIMIT
    if kind is float:
        return math.isfinite(value)
    return kind is bool or value is None


def _small_plain(value: Any, left: list[int]) -> bool:
    """`small_plain` of a dict or a list (exactly); `left`: the values and characters still allowed.
    Scalar members are looked at inline, as in `_measured`; a nested container is one call deeper
    (no deeper than `max_values` calls)."""
    characters = 0
    if type(value) is dict:
        left[0] -= dict.__len__(value) + 1
        if left[0] < 0:
            return False
        for key in dict.__iter__(value):
            if type(key) is not str:
                return False
            characters += len(key)
        items: Any = dict.values(value)
    else:
        left[0] -= list.__len__(value) + 1
        if left[0] < 0:
            return False
        items = list.__iter__(value)
    for item in items:
        kind = type(item)
        if kind is str:
            characters += len(item)
        elif kind is int:
            if not -MEASURED_INT_LIMIT <= item <= MEASURED_INT_LIMIT:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif not (kind is bool or item is None or ((kind is dict or kind is list) and _small_plain(item, left))):
            return False
    left[1] -= characters
    return left[1] >= 0


def _measured(value: Any, depth_left: int, state: list[Any], limit: float, deep_at: int) -> Any:
    """The copy of one value for `measured_json_copy`; scalars inside containers are handled inline
    (no call each), which is most of a JSON value."""
    kind = type(value)
    # By `kind` (type()), never isinstance: that would ask an object for its own `__class__`, any code.
    if kind is dict or (kind is not list and issubclass(kind, dict)):
        if depth_left <= 0:
            state[2] = True
            return value
        if depth_left <= deep_at or kind is not dict:  # a subclass: let the encoder see what it shows
            state[3] = True
        nodes = state[1] = state[1] + 2 * dict.__len__(value) + 1
        if state[0] + nodes > limit:
            raise OverBudget()
        copy = {}
        characters = 0
        for key, item in dict.items(value):
            if type(key) is str:
                characters += len(key)
            elif issubclass(type(key), str):
                key = str.__str__(key)
                characters += len(key)
            else:
                state[2] = True
            item_kind = type(item)
            if item_kind is str:
                characters += len(item)
            elif item_kind is int:
                if not -MEASURED_INT_LIMIT <= item <= MEASURED_INT_LIMIT:
                    state[3] = True
            elif item_kind is bool or item is None:
                pass
            elif item_kind is float:
                state[5] = True
                if not math.isfinite(item):
                    state[2] = True
            else:
                item = _measured(item, depth_left - 1, state, limit, deep_at)
            copy[key] = item
        characters = state[0] = state[0] + characters
        if characters + state[1] > limit:
            raise OverBudget()
        return copy
    if kind is list or issubclass(kind, list):
        if depth_left <= 0:
            state[2] = True
            return value
        if depth_left <= deep_at:
            state[3] = True
        nodes = state[1] = state[1] + list.__len__(value) + 1
        if state[0] + nodes > limit:
            raise OverBudget()
        items = []
        characters = 0
        for item in list.__iter__(value):
            item_kind = type(item)
            if item_kind is str:
                characters += len(item)
            elif item_kind is int:
                if not -MEASURED_INT_LIMIT <= item <= MEASURED_INT_LIMIT:
                    state[3] = True
            elif item_kind is bool or item is None:
                pass
            elif item_kind is float:
                state[5] = True
                if not math.isfinite(item):
                    state[2] = True
            else:
                item = _measured(item, depth_left - 1, state, limit, deep_at)
            items.append(item)
        characters = state[0] = state[0] + characters
        if characters + state[1] > limit:
            raise OverBudget()
        return items
    if kind is int:
        if not -MEASURED_INT_LIMIT <= value <= MEASURED_INT_LIMIT:
            state[3] = True
        return value
    if kind is bool or value is None:
        return value
    if kind is float:
        state[5] = True
        if not math.isfinite(value):
            state[2] = True
        return value
    if issubclass(kind, str):
        plain = str.__str__(value)
        state[0] += len(plain)
        return plain
    if issubclass(kind, int):  # an int subclass (bool cannot be subclassed)
        return _measured(int.__int__(value), depth_left, state, limit, deep_at)
    if issubclass(kind, float):
        return _measured(float.__float__(value), depth_left, state, limit, deep_at)
    if state[4]:
        form = json_form(value)
        if form is not NO_FORM:  # one level less: a form whose form is itself cannot loop
            return _measured(form, depth_left - 1, state, limit, deep_at)
    state[2] = True
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
    waiting at the deadline; a handler that overruns keeps its worker until it returns. The workers
    are borrowed from threads the process's registries share (`agent_lab.workers`), so a registry
    made for a call or two starts no thread of its own.

    A job is handed to the executor only once a worker is free for it (one slot per worker, taken
    before submitting and given back when the job ends). So when stuck handlers hold every worker,
    callers wait for a slot until their deadline and leave nothing behind: no queue of abandoned jobs
    (each holding its arguments) grows while the pool is jammed, and the thread count stays fixed.
    """

    def __init__(self, max_workers: int) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError("max_workers must be an integer of at least 1")
        self._max_workers = max_workers
        # One token per worker. A SimpleQueue (C) rather than a BoundedSemaphore (Python, a Condition
        # inside): taking and giving back a slot is on every pooled call's path. A token is only ever
        # put back after it was taken, so there are never more than max_workers.
        self._slots: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(max_workers):
            self._slots.put(None)
        self._executor: Optional[BoundedExecutor] = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, wait_s: Optional[float], function: Callable[..., Any], *arguments: Any) -> Optional[concurrent.futures.Future]:
        """Run `function(*arguments)` on a free worker; None if none was free within `wait_s` seconds
        (None: wait as long as it takes)."""
        try:
            self._slots.get(timeout=wait_s)
        except queue.Empty:
            return None
        return self._submit_holding_slot(function, arguments)

    async def asubmit(self, deadline: Optional[float], function: Callable[..., Any], *arguments: Any) -> Optional[concurrent.futures.Future]:
        """`submit` for asyncio callers: looks for a free worker without blocking the event loop."""
        import asyncio
        while True:
            try:
                self._slots.get(block=False)
                break
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                await asyncio.sleep(SLOT_POLL_S)
        return self._submit_holding_slot(function, arguments)

    def _submit_holding_slot(self, function: Callable[..., Any], arguments: tuple) -> concurrent.futures.Future:
        try:  # (the job runs in a copy of this, the caller's, context: see BoundedExecutor.submit)
            future = self._started().submit(function, *arguments)
        except RuntimeError as refused:  # shut down meanwhile ("cannot schedule new futures after shutdown")
            self._slots.put(None)
            raise PoolClosed("the registry is closed") from refused
        except BaseException:
            self._slots.put(None)
            raise
        future.add_done_callback(self._release_slot)
        return future

    def _release_slot(self, future: concurrent.futures.Future) -> None:
        self._slots.put(None)

    def _started(self) -> BoundedExecutor:
        executor = self._executor  # running already (close() sets _closed first, then drops it)
        if executor is not None and not self._closed:
            return executor
        with self._lock:
            if self._closed:
                raise PoolClosed("the registry is closed")
            if self._executor is None:
                self._executor = BoundedExecutor(self._max_workers)
            return self._executor

    def close(self, *, wait: bool) -> None:
        """Refuse new jobs, drop queued ones; with wait=True also wait for running handlers."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=True)


LOOP_STALL_S = 0.25
"""An event loop that has not run a callback for this long is taken to be blocked (an async handler
that calls time.sleep or does heavy work without awaiting holds the whole loop)."""

MAX_ABANDONED_LOOPS = 4
"""At most this many blocked event loops (one thread each) are left behind at a time; while that many
are still blocked, calls wait for the current loop (and time out if it is blocked too)."""


class LateRun(Protocol):
    """Who takes over an async call its caller stopped waiting for (`LoopThread.run`)."""

    def left(self) -> None:
        """On the caller's thread, before it is answered: the call runs on without it."""

    def finished(self, run: Run) -> None:
        """On a thread of its own: what the call came to, once it ended."""


class LoopThread:
    """The event loops on which `invoke` runs async handlers: one current loop on a daemon thread,
    created on first use, replaced when a handler blocks it.

    An `async def` handler that blocks (time.sleep, a CPU-bound loop, a blocking client) stops every
    other coroutine on its loop, so one such tool would time out every async tool. A caller is answered
    at its deadline whatever the loop does (`Run.timed_out`; `Run.not_started` if the loop never began
    the call); its handler is cancelled when the loop gets a turn, and left behind until then. The
    current loop is watched through the calls themselves: a call the loop has not started within
    `LOOP_STALL_S`, or a turn asked of it when a caller gave up at its deadline (a probe) that the loop
    has not taken `LOOP_STALL_S` later, means the loop is blocked. It is then retired: new calls go to a fresh loop, calls still waiting to start there move to it,
    and the old loop finishes what it was running and stops once the blocking handler lets go (its
    thread cannot be killed). Calls that had already started on the blocked loop cannot be moved: they
    wait with it and time out at their deadline. A warning is logged for every retirement, and at most
    `MAX_ABANDONED_LOOPS` blocked loops are left behind at once.
    """

    def __init__(self) -> None:
        self._current: Optional[_ToolLoop] = None
        self._abandoned: list[_ToolLoop] = []
        self._lock = threading.Lock()
        self._closed = False
        self._when_dropped: dict[_ToolLoop, weakref.finalize] = {}  # per loop still running (see `_new_loop`)

    def run(self, handler: Handler, arguments: Any, ctx: CallContext,
            check: Optional[LoopCheck] = None, late: Optional[LateRun] = None) -> Run:
        """Run an async handler on the current loop and wait for what came of it, until its deadline:
        then stop waiting (`Run.timed_out`, or `Run.not_started` if the loop never started it) and ask
        the loop for a turn, which a blocked loop does not take (see the class). A call left running
        then is handed to `late`, if given: `late.left()` before this returns, `late.finished(run)` on
        a thread of its own once the call ends (a write's real result becomes its receipt). `check` is
        called on the loop with what the handler came to; the call ends when it returns a run, or when
        the future it may return instead (a check on another thread) is done. Raises
        PoolClosed when closed, and re-raises a KeyboardInterrupt or SystemExit the handler raised."""
        give_up_at = ctx.deadline
        loop = self._loop()
        job = loop.start(_LoopJob(handler, arguments, ctx, check))
        while True:
            now = time.monotonic()
            wait = seconds_left(give_up_at)  # at most MAX_WAIT_S: a deadline may lie past what a wait takes
            stalled_from = job.submitted if loop.unanswered_since is None else min(job.submitted,
                                                                                   loop.unanswered_since)
            if job.pending():
                until_stall = max(0.0, stalled_from + LOOP_STALL_S - now)
                wait = min(until_stall, wait) if wait is not None else until_stall
            if job.finished.wait(wait):
                return job.outcome()
            now = time.monotonic()
            if job.pending() and now - stalled_from >= LOOP_STALL_S:
                fresh = self._retire(loop, now - stalled_from)
                if fresh is not None and job.take_back():  # not started: it may run elsewhere
                    loop = fresh
                    job = loop.start(_LoopJob(handler, arguments, ctx, check))
                    continue
            if give_up_at is not None and now >= give_up_at:
                if job.take_back():
                    return Run.not_started()  # the loop never got to it: nothing ran
                if not job.leave(late):
                    return job.outcome()  # it ended meanwhile
                ctx.cancel_event.set()
                loop.cancel(job)  # the task is cancelled when the loop gets a turn
                if loop.probe():  # a loop that does not take this turn within LOOP_STALL_S is retired
                    watch = threading.Timer(LOOP_STALL_S, self._check_probe, (loop,))
                    watch.name, watch.daemon = "agent-lab-loop-watch", True
                    watch.start()
                return Run.timed_out()

    def _check_probe(self, loop: _ToolLoop) -> None:
        since = loop.unanswered_since
        if since is not None:
            self._retire(loop, time.monotonic() - since)

    def _loop(self) -> _ToolLoop:
        """The current loop; one that has not taken a turn asked of it `LOOP_STALL_S` ago is retired
        first (a caller gave up on it at a deadline, and it has been blocked since)."""
        with self._lock:
            if self._closed:
                raise PoolClosed("the registry is closed")
            if self._current is None:
                self._current = self._new_loop()
            current = self._current
        since = current.unanswered_since
        if since is not None and time.monotonic() - since >= LOOP_STALL_S:
            fresh = self._retire(current, time.monotonic() - since)
            if fresh is not None:
                return fresh
        return current

    def _retire(self, stalled: _ToolLoop, silent_s: float) -> Optional[_ToolLoop]:
        """Replace `stalled` with a fresh loop (if it is still the current one and the bound allows);
        the loop new calls should use, or None when `stalled` has to stay."""
        with self._lock:
            if self._closed:
                return None
            if self._current is not stalled:
                return self._current  # another caller has replaced it already
            self._abandoned = self._running_locked(self._abandoned)
            full = len(self._abandoned) >= MAX_ABANDONED_LOOPS
            if not full:
                self._abandoned.append(stalled)
                self._current = self._new_loop()
            current, abandoned = self._current, len(self._abandoned)
            first_report = not stalled.reported
            stalled.reported = True
        if full:
            if first_report:
                logger.warning("the event loop for async tools has not answered for %.2f s, and %d blocked loops "
                               "are left behind already; calls keep waiting for it", silent_s, abandoned)
            return None
        logger.warning("the event loop for async tools has not answered for %.2f s: an async handler is "
                       "blocking it (time.sleep or heavy work without await?); new calls run on a fresh "
                       "loop (%d blocked loop(s) left behind)", silent_s, abandoned)
        stalled.retire()
        return current

    def _new_loop(self) -> _ToolLoop:
        """A fresh loop (under the lock), retired when this object is dropped without `close` (its
        registry was): the loop's thread then ends once its tasks have, instead of living on, idle, for
        as long as the process (the thread holds the loop, never this object)."""
        loop = _ToolLoop()
        when_dropped = weakref.finalize(self, loop.retire)
        when_dropped.atexit = False  # at exit the daemon thread just ends (and `close` may still be coming)
        self._when_dropped[loop] = when_dropped
        return loop

    def _running_locked(self, loops: list[_ToolLoop]) -> list[_ToolLoop]:
        """`loops` whose threads still run; those that ended are forgotten (their finalizers too)."""
        running = []
        for loop in loops:
            if loop.alive():
                running.append(loop)
            else:
                when_dropped = self._when_dropped.pop(loop, None)
                if when_dropped is not None:
                    when_dropped.detach()
        return running

    def close(self) -> None:
        with self._lock:
            self._closed = True
            loops = ([self._current] if self._current is not None else []) + self._abandoned
            self._current, self._abandoned = None, []
            when_dropped, self._when_dropped = self._when_dropped, {}
        for hook in when_dropped.values():
            hook.detach()
        for loop in loops:
            loop.stop()
        if loops:
            loops[0].join(1.0)  # the current loop; blocked ones are daemon threads, left to finish


class _LoopJob:
    """One async handler call handed to a loop. It starts on the loop thread unless the caller has
    taken it back first (so a call that a blocked loop never started can be moved to another)."""

    _PENDING, _STARTED, _TAKEN_BACK = "pending", "started", "taken back"

    def __init__(self, handler: Handler, arguments: Any, ctx: CallContext,
                 check: Optional[LoopCheck] = None) -> None:
        self.handler, self.arguments, self.ctx, self.check = handler, arguments, ctx, check
        self.submitted = time.monotonic()
        self.finished = threading.Event()
        self.task: Optional[asyncio.Future] = None
        self._state = self._PENDING
        self._lock = threading.Lock()
        self._answer: Any = None
        self._error: Optional[BaseException] = None
        self._late: Optional[LateRun] = None  # its caller stopped waiting, and handed it here

    def pending(self) -> bool:
        return self._state is self._PENDING

    def take_back(self) -> bool:
        """True if the job had not started and now never will."""
        with self._lock:
            if self._state is not self._PENDING:
                return False
            self._state = self._TAKEN_BACK
            return True

    def begin(self, owner: _ToolLoop) -> None:
        """On the loop thread: start the handler as a task, unless the caller took the job back or the
        loop has been retired meanwhile (then the job stays pending, and its caller moves it)."""
        with self._lock:
            if self._state is not self._PENDING or owner.retired:
                return
            self._state = self._STARTED
        self.task = owner.loop.create_task(run_async_on_loop_thread(self.handler, self.arguments, self.ctx,
                                                                     self.check))
        self.task.add_done_callback(self._done)

    def leave(self, late: Optional[LateRun]) -> bool:
        """The caller stops waiting: hand the job to `late` (`late.left()` now). False when it has ended."""
        with self._lock:
            if self.finished.is_set():
                return False
            if late is not None:
                late.left()
                self._late = late
            return True

    def _done(self, task: asyncio.Future) -> None:
        if task.cancelled():
            self._answer = Run.timed_out()  # cancelled after its caller stopped waiting
        elif task.exception() is not None:
            self._failed(task.exception())
        else:
            answer = task.result()
            if isinstance(answer, concurrent.futures.Future):  # its output is checked on a thread of its own
                answer.add_done_callback(self._checked)
                return
            self._answer = answer
        self._finish()

    def _checked(self, checking: concurrent.futures.Future) -> None:
        """The check of the job's output, on a thread of its own, has ended: the job has."""
        if checking.exception() is not None:
            self._failed(checking.exception())
        else:
            self._answer = checking.result()
        self._finish()

    def _failed(self, error: Optional[BaseException]) -> None:
        """A bug outside the handler: the caller raises it, as the step's bug (never a stop request: this
        is never the caller's thread)."""
        self._error = error if isinstance(error, Exception) else \
            RuntimeError(f"{type_name(error)} on the tools' event loop")

    def _finish(self) -> None:
        with self._lock:
            self.finished.set()
            late = self._late
        if late is not None:  # on a thread of its own: storing a receipt may block, and this is the loop
            run = self._answer if self._error is None else Run.raised(self._error)
            threading.Thread(target=late.finished, args=(run,), name="agent-lab-late-async").start()

    def outcome(self) -> Run:
        if self._error is not None:
            raise self._error
        return self._answer


class _ToolLoop:
    """One event loop and the daemon thread that runs it until it is stopped."""

    def __init__(self) -> None:
        import asyncio
        self.retired = False  # set once, by the caller thread that retires it; read on the loop thread
        self.reported = False  # a blocked loop is reported once (under the LoopThread's lock)
        self._probed: Optional[float] = None  # when a turn was asked of it that it has not taken yet
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(_log_loop_exception)
        self._thread = threading.Thread(target=self._run, name="agent-lab-async-tools", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                try:
                    self.loop.run_forever()
                    return  # stopped on purpose
                except BaseException as escaped:  # noqa: BLE001 - a task a handler left behind raised SystemExit
                    # or KeyboardInterrupt, which asyncio lets out of the loop: the loop itself is intact
                    # (the task is done, the other callbacks are still queued), so it goes on serving.
                    logger.warning("a task on the tools' event loop raised %s; the loop goes on", type_name(escaped))
        finally:
            self.loop.close()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def start(self, job: _LoopJob) -> _LoopJob:
        try:  # (the callback runs in a copy of this, the caller's, context: so does the task it creates)
            self.loop.call_soon_threadsafe(job.begin, self)
        except RuntimeError:  # the loop closed meanwhile ("Event loop is closed"): the job stays pending
            pass  # and its caller finds a current loop for it once LOOP_STALL_S has passed
        return job

    def probe(self) -> bool:
        """Ask the loop for a turn, unless one asked is still untaken (then False): `unanswered_since`
        says when, until the loop takes it."""
        if self._probed is not None:
            return False
        self._probed = time.monotonic()
        try:
            self.loop.call_soon_threadsafe(self._answer_probe)
        except RuntimeError:  # closed: it will never answer, and is never current again
            self._probed = None
            return False
        return True

    def _answer_probe(self) -> None:
        self._probed = None

    @property
    def unanswered_since(self) -> Optional[float]:
        """When a turn asked of this loop was asked, while the loop has not taken it (None: none is)."""
        return self._probed

    def cancel(self, job: _LoopJob) -> None:
        try:
            self.loop.call_soon_threadsafe(_cancel_task, job)
        except RuntimeError:
            pass

    def retire(self) -> None:
        """Start no more jobs; let the loop finish the tasks it has (once it runs again), then stop."""
        self.retired = True
        try:
            self.loop.call_soon_threadsafe(_stop_when_idle, self.loop)
        except RuntimeError:
            pass

    def stop(self) -> None:
        """Cancel every task and stop (as soon as the loop runs)."""
        try:
            self.loop.call_soon_threadsafe(_cancel_all_and_stop, self.loop)
        except RuntimeError:
            pass


def _cancel_task(job: _LoopJob) -> None:
    if job.task is not None:
        job.task.cancel()


def _stop_when_idle(loop: asyncio.AbstractEventLoop) -> None:
    """Stop `loop` once no task is left on it (each handler task ends by its deadline, or soon after
    it if it ignores its cancellation); checked again when the first of those left ends."""
    import asyncio
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    if not tasks:
        loop.stop()
        return
    waiting = asyncio.ensure_future(asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED), loop=loop)
    waiting.add_done_callback(lambda _: _stop_when_idle(loop))


def _log_loop_exception(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """The tools' loops report what asyncio would log (a task a handler started and never awaited
    failed, a callback raised) without the exception's message or asyncio's description of the
    task, either of which may hold a handler's text."""
    exception = context.get("exception")
    if isinstance(exception, BaseException):
        logger.warning("an async task or callback on the tools' event loop failed: %s", type(exception).__name__)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("on the tools' event loop: %s", describe_exception(exception, show_message=False))
    else:  # e.g. a task destroyed while pending; asyncio's own text would name the coroutine and its callbacks
        logger.warning("the tools' event loop reported a problem with a task or callback")


def _cancel_all_and_stop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task, and stop once they have ended (at most `CANCEL_GRACE_S` later, for a handler
    that ignores its cancellation): stopping right away would drop the callbacks that answer the
    callers still waiting, which would then wait until their deadlines for nothing."""
    import asyncio
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if not tasks:
        loop.stop()
        return
    waiting = asyncio.ensure_future(asyncio.wait(tasks, timeout=CANCEL_GRACE_S), loop=loop)
    waiting.add_done_callback(lambda _: loop.stop())
