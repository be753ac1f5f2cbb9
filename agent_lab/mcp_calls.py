"""The tools/call path of the MCP server: accept a call, run it on the pool, write its answer.

`_ToolCallPath` is the part of the dispatcher (`agent_lab.mcp._Server`) that answers tools/call and the
tasks/ requests, apart from the part that reads messages and negotiates the protocol era, because it
changes for other reasons: how a call holds its place in the backlog, waits for a run slot within its
deadline, is cancelled, runs through `Registry.invoke` with the application's approval, and is answered
(once, by the thread that ends it). It is a mixin, not a collaborator, because the gateway
(`agent_lab.gateway`) and the Streamable HTTP transport (`agent_lab.mcp_http`) override its methods
(start_call, run_call, call_response) on their subclasses of `_Server`, next to the reader's (cancel,
handle_client_response); it holds no state of its own: `_Server.__init__` makes what it uses.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .adapters import parse_mcp_call, render_mcp_result
from .calls import ToolCall, ToolResult
from .execution import describe_exception
from .mcp_messages import (
    _META_CLIENT_CAPABILITIES,
    _META_SERVER_INFO,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    SERVER_BUSY,
    _encoded,
    _error,
    _ProtocolError,
    _Request,
    _RequestId,
    _result,
)
from .mcp_tasks import TaskAnswers, TaskRequestError, accepted, is_task_call
from .policy import Actor, Approval

if TYPE_CHECKING:
    from .mcp import ApprovalSource, _Backlog, _LineWriter, _Session

logger = logging.getLogger("agent_lab.mcp")  # the server's one logger, whichever module logs


@dataclass
class _Held:
    """One request line's share of the backlog: how many of its calls were accepted, and whether its
    bytes are counted (once, for all of them)."""

    size: int
    calls: int = 0
    charged: bool = False
    answers: int = 0  # bytes of a waiting batch's answers made already


@dataclass
class _InFlight:
    """A tools/call (or a waiting tasks/result) on the pool; `cancelled` suppresses its response.

    `abandoned`: nobody can take its answer any more (the client cancelled it, its HTTP stream closed,
    its session ended). A wait for the client or for a task then ends at once (a tasks/result with no
    answer, a confirmation as not approved), where a running call runs on to its end."""

    cancelled: threading.Event = field(default_factory=threading.Event)
    deadline: float | None = None  # time.monotonic() at arrival plus the tool's timeout (None: unknown tool)
    abandoned: threading.Event = field(default_factory=threading.Event)


class _ToolCallPath:
    """tools/call and tasks/ requests, from acceptance to the written answer (mixed into `_Server`).

    Thread use: start_call and answer_tasks run where the request was read (the stdio reader, or an HTTP
    request's thread); run_call, answer_call, call_response and wait_task_result on a pool worker;
    send_finished wherever the job's future completes.
    """

    # Made by `_Server.__init__` (see there); declared here for the type checker only.
    registry: Any
    actor: Actor
    writer: _LineWriter
    approvals: ApprovalSource | None
    server_info: dict[str, str]
    session: _Session
    pool: concurrent.futures.Executor
    backlog: _Backlog
    reading: _Held
    run_slots: threading.BoundedSemaphore
    in_flight: dict[_RequestId, _InFlight]
    in_flight_lock: threading.Lock
    closing: bool  # set (under in_flight_lock) once the session ends: nothing new is accepted
    tasks: TaskAnswers

    # -- tools/call ------------------------------------------------------------------------------

    def start_call(
        self, request: _Request, *, in_batch: bool, shape: Callable[[Mapping[str, Any]], dict[str, Any]]
    ) -> Any:
        """Checks the request schema, then runs the call on the pool; the worker sends the response."""
        call = self.as_task_if_asked(_tool_call(request), request)
        request_id: _RequestId = request.id  # type: ignore[assignment]
        tracker = _InFlight(deadline=self.arrival_deadline(call.name))
        held = self.reading
        with self.in_flight_lock:
            if request_id in self.in_flight:
                raise _ProtocolError(
                    INVALID_REQUEST, "Invalid Request: this id is already in use by a running request"
                )
            if self.closing:
                raise _ProtocolError(SERVER_BUSY, _ENDING)
            busy = self.backlog.take(held)  # bounded memory, whatever a client sends (or fails to read)
            if busy is not None:
                raise _ProtocolError(SERVER_BUSY, busy)
            self.in_flight[request_id] = tracker
        try:
            future = self.pool.submit(self.run_call, request_id, call, tracker, shape, held)
        except BaseException:
            with self.in_flight_lock:
                self.in_flight.pop(request_id, None)
            self.backlog.give_back(held)
            raise
        if in_batch:
            return future  # the batch collects every response and sends them together
        future.add_done_callback(functools.partial(self.send_finished, held))
        return None

    def arrival_deadline(self, name: str) -> float | None:
        """When a call that arrives now must be answered: now plus its tool's timeout. None for a tool
        this server's actor cannot call, unknown or hidden alike: the registry answers both from its
        route step, which runs nothing and needs no run slot, so both are answered at once (a hidden
        tool's timeout must not shape when, or whether, its refusal comes)."""
        try:
            spec = self.registry.spec(name)
            if not self.actor.may(spec.required_permission):
                return None
            timeout_ms = spec.timeout_ms
        except Exception:  # an unknown tool
            return None
        return time.monotonic() + timeout_ms / 1000.0

    def run_call(
        self,
        request_id: _RequestId,
        call: ToolCall,
        tracker: _InFlight,
        shape: Callable[[Mapping[str, Any]], dict[str, Any]],
        held: _Held,
    ) -> str | None:
        """The call's answer, encoded (a few bytes a character, where the dicts would cost hundreds) and
        counted in the backlog with `held`'s line until it is written; None for a cancelled call."""
        try:
            response = self.answer_call(request_id, call, tracker, shape)
        finally:
            with self.in_flight_lock:
                self.in_flight.pop(request_id, None)
        if response is None or tracker.cancelled.is_set():
            return None  # the client gave up on this request: it gets no response, as the spec says
        answer = _encoded(response)
        self.backlog.hold_answers(held, len(answer) + 1)
        return answer

    def answer_call(
        self,
        request_id: _RequestId,
        call: ToolCall,
        tracker: _InFlight,
        shape: Callable[[Mapping[str, Any]], dict[str, Any]],
    ) -> dict[str, Any] | None:
        if tracker.deadline is None:  # a tool the actor cannot call: refused at once, no slot needed
            return self.call_response(request_id, call, shape, None)
        if not self.run_slots.acquire(timeout=max(0.0, tracker.deadline - time.monotonic())):
            # The deadline passed while waiting: the registry answers deadline_exceeded without running it.
            return self.call_response(request_id, call, shape, tracker.deadline)
        try:
            if tracker.cancelled.is_set():
                return None  # cancelled before it started: it never runs
            if self.backlog.full():  # answers nobody has read yet fill the backlog: make no more
                return _error(request_id, SERVER_BUSY, "Server busy: answers the client has not read fill the "
                              "server's backlog; the call did not run; retry later")
            return self.call_response(request_id, call, shape, tracker.deadline)
        finally:
            self.run_slots.release()

    def send_finished(self, held: _Held, future: concurrent.futures.Future) -> None:
        """Write a finished call's answer (none for a cancelled call), then free its place in the backlog."""
        try:
            answer = _settle(future)
            if answer is not None:
                self.writer.send_line(answer + "\n")
        finally:
            self.backlog.give_back(held)

    def call_response(
        self,
        request_id: _RequestId,
        call: ToolCall,
        shape: Callable[[Mapping[str, Any]], dict[str, Any]],
        deadline: float | None = None,
    ) -> dict[str, Any]:
        try:
            result = self.invoke(call, deadline)
            if result.error is not None and result.error.code == "tool_not_found":
                return _error(request_id, INVALID_PARAMS, "Unknown tool", result.to_model()["error"])
            return _result(request_id, self.rendered(result, shape))
        except BaseException as exc:  # noqa: BLE001 - on a worker thread, sys.exit too: the request is still answered
            # (never the message: it may quote the call's arguments)
            logger.error("tools/call failed outside the registry pipeline: %s",
                         describe_exception(exc, show_message=False))
            return _error(request_id, INTERNAL_ERROR, "Internal error")

    def invoke(self, call: ToolCall, deadline: float | None = None) -> ToolResult:
        return self.registry.invoke(call, actor=self.actor, approval=self.approval(call), deadline=deadline,
                                    as_task=is_task_call(call))

    # -- tasks (`agent_lab.mcp_tasks`) -------------------------------------------------------------

    def as_task_if_asked(self, call: ToolCall, request: _Request) -> ToolCall:
        """On 2026-07-28 what the request itself declares decides: over HTTP every stateless client shares
        one dispatcher, whose session held the last request's capabilities, so a call could run under
        another client's (reproduced by review: a client declaring the tasks extension got a plain result)."""
        capabilities = self.session.client_capabilities
        meta = request.params.get("_meta")
        if self.session.era == "modern" and isinstance(meta, dict) \
                and isinstance(meta.get(_META_CLIENT_CAPABILITIES), dict):
            capabilities = meta[_META_CLIENT_CAPABILITIES]
        try:
            return self.tasks.call(call, request.params, self.session.era or "handshake", capabilities)
        except TaskRequestError as refused:
            raise _ProtocolError(refused.code, refused.message, refused.data) from None

    def rendered(self, result: ToolResult, shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """A call's result as the client sees it: its CallToolResult, or the CreateTaskResult of a task."""
        if accepted(result):
            return self.tasks.created(result, self.session.era or "handshake", {_META_SERVER_INFO: self.server_info})
        return shape(render_mcp_result(result))

    def answer_tasks(self, request: _Request, *, in_batch: bool,
                     shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Any:
        """A tasks/ request: answered at once, or (`tasks/result`, which waits for the task to end) on the
        pool, held in the backlog and in flight like a call, so a cancel (or a vanished client) ends it."""
        era = self.session.era or "handshake"
        try:
            if not self.tasks.waits(request.method, era):
                return _result(request.id, self.tasks.answer(request.method, request.params, era, shape))
            if in_batch:
                raise TaskRequestError(INVALID_REQUEST, "Invalid Request: tasks/result must not be part of a batch")
        except TaskRequestError as refused:
            raise _ProtocolError(refused.code, refused.message, refused.data) from None
        request_id: _RequestId = request.id  # type: ignore[assignment]
        tracker = _InFlight()
        held = self.reading
        with self.in_flight_lock:
            if request_id in self.in_flight:
                raise _ProtocolError(INVALID_REQUEST, "Invalid Request: this id is already in use by a running request")
            if self.closing:
                raise _ProtocolError(SERVER_BUSY, _ENDING)
            busy = self.backlog.take(held)
            if busy is not None:
                raise _ProtocolError(SERVER_BUSY, busy)
            self.in_flight[request_id] = tracker
        try:
            future = self.submit_wait(self.wait_task_result, request, tracker, held)
        except BaseException:
            with self.in_flight_lock:
                self.in_flight.pop(request_id, None)
            self.backlog.give_back(held)
            raise
        future.add_done_callback(functools.partial(self.send_finished, held))
        return None

    def submit_wait(self, wait: Callable[..., str | None], *args: Any) -> concurrent.futures.Future:
        """Where a tasks/result waits: this server's pool (the HTTP transport waits on one pool shared by
        every session, with a cap of its own)."""
        return self.pool.submit(wait, *args)

    def wait_task_result(self, request: _Request, tracker: _InFlight, held: _Held) -> str | None:
        """The encoded answer of a tasks/result once its task has ended; None (no answer) once the request
        is abandoned first."""
        try:
            try:
                answered = self.tasks.result(request.params, stop=tracker.abandoned)
                if answered is None:
                    return None
                response = _result(request.id, answered)
            except TaskRequestError as refused:
                response = _error(request.id, refused.code, refused.message, refused.data)
            except BaseException as exc:  # noqa: BLE001 - on a worker thread: the request is still answered
                logger.error("tasks/result failed: %s", describe_exception(exc, show_message=False))
                response = _error(request.id, INTERNAL_ERROR, "Internal error")
        finally:
            with self.in_flight_lock:
                self.in_flight.pop(request.id, None)  # type: ignore[arg-type]
        if tracker.cancelled.is_set():
            return None
        answer = _encoded(response)
        self.backlog.hold_answers(held, len(answer) + 1)
        return answer

    def abandon(self, request_id: Any) -> None:
        """Nobody can take this request's answer any more (see `_InFlight.abandoned`): its waits end; a
        running call runs on. The gateway also ends the call's confirmation wait (it overrides this)."""
        with self.in_flight_lock:
            tracker = self.in_flight.get(request_id)
        if tracker is not None:
            tracker.abandoned.set()

    def abandon_all(self) -> None:
        """The session ends: nothing new is accepted and every request in flight is abandoned."""
        with self.in_flight_lock:
            self.closing = True
            ending = list(self.in_flight)
        for request_id in ending:
            self.abandon(request_id)

    def approval(self, call: ToolCall) -> Approval | None:
        """The application's approval for exactly this call; an approval source that fails grants none
        (the registry then answers approval_required where one is needed). Its exception is logged as
        the registry logs a handler's: the message only for a tool without redacted fields."""
        if self.approvals is None:
            return None
        try:  # never asked about a tool this actor cannot call: it is answered like an unknown one
            if not self.actor.may(self.registry.spec(call.name).required_permission):
                return None
        except Exception:  # an unknown tool (or a name that is no tool name): nothing to approve
            return None
        try:
            return self.approvals(call, self.actor)
        except BaseException as exc:  # noqa: BLE001 - on a worker thread: sys.exit too grants nothing
            try:
                show_message = not self.registry.spec(call.name).redact
            except Exception:
                show_message = False
            logger.error("the approval source failed; the call has no approval: %s",
                         describe_exception(exc, show_message=show_message))
            return None


_ENDING = "Server busy: the session is ending; open a new one"


def _settle(item: Any) -> Any:
    """A call's encoded answer (or None), once its job on the pool has ended."""
    if isinstance(item, concurrent.futures.Future):
        try:
            return item.result()
        except BaseException as exc:  # noqa: BLE001 - run_call catches everything; this is belt and braces
            logger.error("a tools/call worker failed: %s", describe_exception(exc, show_message=False))
            return None
    return item


def _tool_call(request: _Request) -> ToolCall:
    """The CallToolRequest schema, checked at the protocol level: a name, and arguments that are an object."""
    name = request.params.get("name")
    if not isinstance(name, str):
        raise _ProtocolError(INVALID_PARAMS, "Invalid params: tools/call needs name, a string")
    arguments = request.params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise _ProtocolError(INVALID_PARAMS, "Invalid params: tools/call arguments must be a JSON object")
    return parse_mcp_call(request.params, call_id=f"mcp-{request.id}")

