"""MCP tasks for `serve-mcp` (its own tools and gateways): a long call answered with a task handle.

Two revisions are served, each in its own shape:

* 2025-11-25 (experimental tasks, the handshake era). The server declares `capabilities.tasks` (list,
  cancel, task-augmented `tools/call`) when it serves a tool the actor may call as a task; such a tool
  lists `execution.taskSupport` ("optional" or "required"). A `tools/call` carrying `params.task`
  answers `CreateTaskResult` (`{"task": Task}`); `tasks/get` answers the Task, `tasks/result` waits
  until the task is terminal and answers its `CallToolResult` (with the `related-task` `_meta`),
  `tasks/list` the actor's tasks this process accepted, `tasks/cancel` the Task after the cancel. A
  `task` param on a tool that forbids tasks, and a call without one to a tool that requires one, are
  -32601 errors, as the revision says; an unknown task id (another actor's, another tenant's, an
  expired one alike) is -32602, and so is cancelling a task that has ended.
* 2026-07-28 with the tasks extension (`io.modelcontextprotocol/tasks`). The server lists the extension
  in `capabilities.extensions`; a client that lists it in a request's capabilities gets, for a tool
  with task support, a result with `resultType: "task"` and the Task's fields instead of the tool's
  result; `tasks/get` answers the Task and, once it is terminal, its `result` inline; `tasks/cancel`
  is acknowledged with an empty result whatever the id (its effect shows in `tasks/get`).

A cancel that comes after the call started does not pretend: the task stays `working` (and ends
`completed` or `failed`) with a status message saying that the call had started and its effect
stands. The state lives in the registry's receipt store (`agent_lab.tasks`), so a task accepted by a
gateway before a restart is read by the restarted one from a shared store (`--receipts sqlite:PATH`).

Over Streamable HTTP the server has one actor for every session, so tasks are also confined to the
session (or the stateless side) they were handed to (`TaskOwners`): another session's task answers as
an unknown id does, and tasks/list lists the session's own. A task no live session of this process holds
(accepted before a restart, or by a session that has ended) is read by its id, as the id is all a client
keeps across a restart. Over stdio there is one session: nothing more is confined.

This module depends on neither the server nor the gateway: it answers plain results or raises
`TaskRequestError`, which the server turns into the JSON-RPC error.
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any, Callable, Mapping, Optional

from .adapters import render_mcp_result
from .calls import ToolCall, ToolResult
from .errors import Outcome
from .policy import Actor
from .tasks import TaskState, TaskStatus

__all__ = ["POLL_INTERVAL_MS", "TASKS_EXTENSION", "TaskAnswers", "TaskCall", "TaskOwners", "TaskRequestError", "TaskScope"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
POLL_INTERVAL_MS = 500
"""The polling interval the server suggests to clients (milliseconds)."""

RESULT_WAIT_SLACK_S = 30.0
"""`tasks/result` waits for a task to end at most its tool's timeout plus this; then it answers an error
telling the client to poll `tasks/get` (a task whose host died is reported failed once its lease lapses)."""

MAX_TASKS_HELD = 1000
"""Tasks one HTTP session (or the stateless side) is known to hold; past it its oldest are forgotten (the
registry lists an actor's latest 1000 too)."""

METHOD_NOT_FOUND, INVALID_PARAMS = -32601, -32602
_TOO_LATE = ("The call had started when the cancel came: it runs to its end and its effect stands; "
             "poll the task for its result.")


class TaskRequestError(Exception):
    """A tasks request the server refuses with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class TaskCall(ToolCall):
    """A tools/call the client asked to run as a task (the server passes `as_task=True` for it)."""

    __slots__ = ()


def is_task_call(call: Any) -> bool:
    return isinstance(call, TaskCall)


def _iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


class TaskScope:
    """One holder of tasks (an HTTP session, or the stateless side), compared by identity. Once released
    it is `ended` and is handed nothing more: a call accepted after its session ended held its task in a
    scope nobody would release again (memory for ever, and a task no live session could read)."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = False


class TaskOwners:
    """Which scope (an HTTP session, or the stateless side) was handed which task, for one HTTP server:
    a scope sees the tasks it holds and those no scope holds; tasks/list shows only those it holds. A
    scope's tasks are forgotten when it ends (at most MAX_TASKS_HELD each, the oldest forgotten first),
    and a task handed to it after then is held by no scope."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[TaskScope, dict[str, None]] = {}  # scope -> its task ids, oldest first
        self._holders: dict[str, set[TaskScope]] = {}  # task id -> the scopes holding it

    def hand(self, scope: TaskScope, task_id: str) -> None:
        with self._lock:
            if scope.ended:
                return
            held = self._held.setdefault(scope, {})
            held.pop(task_id, None)
            held[task_id] = None
            self._holders.setdefault(task_id, set()).add(scope)
            while len(held) > MAX_TASKS_HELD:
                self._drop(scope, next(iter(held)))

    def holds(self, scope: TaskScope, task_id: str) -> bool:
        with self._lock:
            return task_id in self._held.get(scope, ())

    def sees(self, scope: TaskScope, task_id: str) -> bool:
        with self._lock:
            holders = self._holders.get(task_id)
            return holders is None or scope in holders

    def release(self, scope: TaskScope) -> None:
        """The scope has ended: it holds nothing any more, nor will."""
        with self._lock:
            scope.ended = True
            for task_id in list(self._held.get(scope, ())):
                self._drop(scope, task_id)
            self._held.pop(scope, None)

    def _drop(self, scope: TaskScope, task_id: str) -> None:
        self._held[scope].pop(task_id, None)
        holders = self._holders.get(task_id)
        if holders is not None:
            holders.discard(scope)
            if not holders:
                del self._holders[task_id]


class TaskAnswers:
    """The task half of one MCP server: which calls run as tasks, and the answers of the tasks/ methods.
    With `owners`, confined to the tasks handed to `scope` (see `TaskOwners`)."""

    def __init__(self, registry: Any, actor: Actor, *, owners: Optional[TaskOwners] = None,
                 scope: Optional[TaskScope] = None) -> None:
        self.registry = registry
        self.actor = actor
        self.owners = owners
        self.scope = scope if scope is not None else TaskScope()

    # -- capabilities and tools/call -----------------------------------------------------------------

    def drain(self) -> None:
        """Wait (at most the longest task tool's timeout, plus a little) until no task runs in the registry."""
        wait = getattr(self.registry, "wait_tasks", None)
        if not callable(wait):
            return
        timeouts = [self.registry.spec(name).timeout_ms / 1000.0 for name in self.registry.names()
                    if self.registry.spec(name).task_support.value != "forbidden"]
        if timeouts:
            wait(max(timeouts) + 5.0)

    def offered(self) -> bool:
        """Whether the actor may call any tool as a task (only then are tasks declared)."""
        for name in self.registry.names():
            spec = self.registry.spec(name)
            if spec.task_support.value != "forbidden" and self.actor.may(spec.required_permission):
                return True
        return False

    def capabilities(self, capabilities: dict[str, Any]) -> dict[str, Any]:
        """`capabilities` with the tasks declared, for both revisions (each reads its own key)."""
        if not self.offered():
            return capabilities
        declared = dict(capabilities)
        declared["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        declared["extensions"] = {**dict(declared.get("extensions") or {}), TASKS_EXTENSION: {}}
        return declared

    def call(self, call: ToolCall, params: Mapping[str, Any], era: str,
             client_capabilities: Mapping[str, Any]) -> ToolCall:
        """`call`, as a TaskCall when it is to run as a task; TaskRequestError for a call the revision
        refuses. A tool the actor cannot call (unknown or hidden) is left to the registry, which answers
        both alike: its task support never shows."""
        support = self._support(call.name)
        if era == "modern":
            extensions = client_capabilities.get("extensions") if isinstance(client_capabilities, Mapping) else None
            declared = isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions
            if support == "required" and not declared:
                raise TaskRequestError(INVALID_PARAMS, "Invalid params: this tool runs only as a task; declare the "
                                       f"{TASKS_EXTENSION} extension in the request's client capabilities")
            asked = declared and support in ("optional", "required")
        else:
            asked = "task" in params
            if asked and not isinstance(params["task"], Mapping):
                raise TaskRequestError(INVALID_PARAMS, "Invalid params: task must be an object")
            if asked and support == "forbidden":
                raise TaskRequestError(METHOD_NOT_FOUND, "This tool does not run as a task (its execution.taskSupport "
                                       "is forbidden); call it without params.task")
            if not asked and support == "required":
                raise TaskRequestError(METHOD_NOT_FOUND, "This tool runs only as a task (its execution.taskSupport "
                                       "is required); call it with params.task")
        return TaskCall(call.name, call.arguments, call.call_id) if asked else call

    def _support(self, name: Any) -> Optional[str]:
        try:
            spec = self.registry.spec(name)
        except (KeyError, TypeError):
            return None
        if not self.actor.may(spec.required_permission):
            return None
        return str(spec.task_support.value)

    def created(self, result: ToolResult, era: str, server_meta: Mapping[str, Any]) -> dict[str, Any]:
        """The CreateTaskResult for an `accepted` result."""
        task_id = result.output["task_id"] if isinstance(result.output, Mapping) else ""
        if task_id and self.owners is not None:
            self.owners.hand(self.scope, task_id)  # before it reaches the client: only this scope sees it
        status = self._read(task_id) if task_id else None
        if status is None:  # just accepted: it is working (the store may be slow to answer a second time)
            now = time.time()
            status = TaskStatus(task_id, TaskState.WORKING, result.tool, now, now, "The call is running.")
        if era == "modern":
            return {**self._modern_view(status, inline=False), "resultType": "task", "_meta": dict(server_meta)}
        return {"task": self._view(status)}

    # -- the tasks/ methods -------------------------------------------------------------------------------

    def answer(self, method: str, params: Mapping[str, Any], era: str,
               shape: Callable[[Mapping[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """The result of a tasks/ request that does not wait (get, cancel, list, update)."""
        if era == "modern":
            if method == "tasks/get":
                return shape(self._modern_view(self._known(params), inline=True))
            if method == "tasks/cancel":
                try:
                    self._cancel(params)
                except TaskRequestError:
                    pass  # acknowledged whatever the id: the extension says so
                return shape({})
            if method == "tasks/update":
                raise TaskRequestError(INVALID_PARAMS, "Invalid params: no task of this server waits for input")
            raise TaskRequestError(METHOD_NOT_FOUND, "Method not found")
        if method == "tasks/get":
            return self._view(self._known(params))
        if method == "tasks/cancel":
            status = self._cancel(params)
            if status.cancel == "ended":
                raise TaskRequestError(INVALID_PARAMS, f"Invalid params: the task has ended ({status.status.value}); "
                                       "there is nothing to cancel", {"status": status.status.value})
            return self._view(status, message=_TOO_LATE if status.cancel == "too_late" else None)
        if method == "tasks/list":
            statuses = self.registry.tasks(actor=self.actor)
            if self.owners is not None:
                statuses = [status for status in statuses if self.owners.holds(self.scope, status.task_id)]
            return {"tasks": [self._view(status) for status in reversed(statuses[-100:])]}
        raise TaskRequestError(METHOD_NOT_FOUND, "Method not found")

    def waits(self, method: str, era: str) -> bool:
        return method == "tasks/result" and era != "modern"

    def ended(self, params: Mapping[str, Any]) -> bool:
        """Whether `result` answers at once: the task has ended, or it is no task of this scope's (an
        error), or the store did not answer (an error too)."""
        try:
            return self._known(params).status.terminal
        except TaskRequestError:
            return True

    def result(self, params: Mapping[str, Any], stop: Optional[threading.Event] = None) -> Optional[dict[str, Any]]:
        """`tasks/result`: wait until the task is terminal, then its CallToolResult (blocks: call it off the
        reader); None once `stop` is set first (nobody takes the answer any more)."""
        status = self._known(params)
        try:
            timeout_s = self.registry.spec(status.tool).timeout_ms / 1000.0
        except KeyError:
            timeout_s = 0.0
        give_up = time.monotonic() + timeout_s + RESULT_WAIT_SLACK_S
        while not status.status.terminal:
            if time.monotonic() >= give_up:
                raise TaskRequestError(INVALID_PARAMS, "Invalid params: the task is still working; poll tasks/get")
            pause = POLL_INTERVAL_MS / 1000.0 / 5
            if stop is None:
                time.sleep(pause)
            elif stop.wait(pause):
                return None
            status = self._known(params)
        assert status.result is not None
        rendered = render_mcp_result(status.result)
        rendered["_meta"] = {RELATED_TASK: {"taskId": status.task_id}}
        return rendered

    # -- helpers ------------------------------------------------------------------------------------------

    def _task_id(self, params: Mapping[str, Any]) -> str:
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise TaskRequestError(INVALID_PARAMS, "Invalid params: taskId must be a string")
        return task_id

    def _read(self, task_id: str) -> Optional[TaskStatus]:
        try:
            status = self.registry.task(task_id, actor=self.actor)
        except Exception as error:  # noqa: BLE001 - the store did not answer: the client may retry
            raise TaskRequestError(-32603, "Internal error: the task store did not answer; retry later") from error
        return status if self._visible(task_id) else None  # read anyway: another's task costs what no task does

    def _visible(self, task_id: str) -> bool:
        return self.owners is None or self.owners.sees(self.scope, task_id)

    def _known(self, params: Mapping[str, Any]) -> TaskStatus:
        status = self._read(self._task_id(params))
        if status is None:  # unknown, expired, another actor's or tenant's: all alike
            raise TaskRequestError(INVALID_PARAMS, "Invalid params: no task with that id")
        return status

    def _cancel(self, params: Mapping[str, Any]) -> TaskStatus:
        task_id = self._task_id(params)
        if not self._visible(task_id):  # another scope's task: never cancelled, answered as unknown
            self._read(task_id)
            raise TaskRequestError(INVALID_PARAMS, "Invalid params: no task with that id")
        try:
            status = self.registry.cancel_task(task_id, actor=self.actor)
        except Exception as error:  # noqa: BLE001
            raise TaskRequestError(-32603, "Internal error: the task store did not answer; retry later") from error
        if status is None:
            raise TaskRequestError(INVALID_PARAMS, "Invalid params: no task with that id")
        return status

    @staticmethod
    def _view(status: TaskStatus, message: Optional[str] = None) -> dict[str, Any]:
        """The 2025-11-25 Task."""
        view: dict[str, Any] = {"taskId": status.task_id, "status": status.status.value,
                                "statusMessage": message or status.message, "createdAt": _iso(status.created_at),
                                "lastUpdatedAt": _iso(status.updated_at),
                                "ttl": int(status.ttl_s * 1000) if status.ttl_s is not None else None,
                                "pollInterval": POLL_INTERVAL_MS}
        return view

    @staticmethod
    def _modern_view(status: TaskStatus, *, inline: bool) -> dict[str, Any]:
        """The extension's Task: its fields, and once terminal its result inline."""
        view: dict[str, Any] = {"taskId": status.task_id, "status": status.status.value,
                                "statusMessage": status.message, "createdAt": _iso(status.created_at),
                                "lastUpdatedAt": _iso(status.updated_at), "pollIntervalMs": POLL_INTERVAL_MS}
        if status.ttl_s is not None:
            view["ttlMs"] = int(status.ttl_s * 1000)
        if inline and status.result is not None:
            view["result"] = render_mcp_result(status.result)
        return view


def accepted(result: ToolResult) -> bool:
    return result.outcome is Outcome.ACCEPTED
