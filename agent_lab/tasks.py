"""Long-running calls as tasks: what a task is, and how its state lives in the receipt store.

A tool whose spec says `task_support="optional"` (asked for with `Registry.invoke(..., as_task=True)`)
or `"required"` (always) answers a call that passed every check up to and including idempotency with
the outcome `accepted` and a task id, and runs its handler in the background under the tool's own
deadline. Its state is kept in the registry's receipt store, with the store's own operations (reserve,
complete, lookup, and their leases), so every store (memory, SQLite, PostgreSQL) keeps tasks without a
table of their own, a task outlives the process that accepted it (with a durable store), and every
host sharing the store reads it alike:

* the task's entry, `ReceiptKey(tenant, TASK_ENTRY, task_id)`: reserved when the call is accepted, its
  lease renewed by the registry's lease keeper while the call runs, completed with the final record
  (status and result) when it ends. Its "fingerprint" is the task's description (`task-v1:` and the
  canonical JSON of the actor, the tool, the creation time and whether it writes). A task whose host
  died lapses like a write's reservation: its entry reads `unknown`, and the task is reported
  `failed` with `task_interrupted` (its effect unknown), never `working` forever;
* the task's gate, `ReceiptKey(tenant, TASK_GATE, task_id)`: taken once, by whoever comes first: the
  run, just before it starts the handler (`start`), or a cancel (`cancel`). So a cancel either wins
  (the handler never starts: `cancelled`) or finds the call started, and says so (`too_late`): a
  started call runs to its end, and its effect is reported, never hidden behind "cancelled". A reader
  that finds the entry lapsed before anyone took the gate takes it too (`interrupt`) before it says
  "did not run": a lapse is all a reader sees of a host that died, but also of one that only lost the
  store for longer than the lease, whose run would otherwise start when the store came back.

A retried call under the same idempotency key replays the key's receipt, which is the `accepted`
result: the same task id, never a second run. Tenant isolation is the receipt store's: a task's keys
carry its tenant, so another tenant's task id reads like an unknown one; within a tenant, the task's
description names its actor, and another actor's task reads like an unknown one too.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import secrets
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from .calls import ToolResult
from .errors import NextAction, Outcome, ToolError
from .fingerprint import canonical_json
from .stores import Lapse, ReceiptKey, ReceiptStoreUnavailable, ReservationStatus
from .stores._rules import TASK_GATE_TOOL

if TYPE_CHECKING:  # pragma: no cover
    from .stores import ReceiptStore

__all__ = [
    "MAX_RUNNING_TASKS",
    "TASK_ENTRY",
    "TASK_GATE",
    "TaskState",
    "TaskStatus",
    "TaskBook",
]

TASK_ENTRY = "agent_lab/task"
TASK_GATE = TASK_GATE_TOOL
"""The `ReceiptKey.tool` of a task's entry and of its gate. A `/` is never in a tool's name, so no
tool's receipts can meet them."""

MAX_RUNNING_TASKS = 64
"""How many tasks one registry runs at once; one more is refused (`too_many_tasks`, retry later), so
a client cannot start threads without bound by asking for tasks."""

GATE_WAIT_S = 2.0
"""How long the run or a cancel waits for the other to finish taking the gate (two store calls)."""

_SCHEME = "task-v1:"
_START, _CANCEL, _INTERRUPT = "start", "cancel", "interrupt"


class TaskState(str, enum.Enum):
    """Where a task stands (MCP's task statuses)."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def terminal(self) -> bool:
        return self in (TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELLED)


@dataclasses.dataclass(frozen=True)
class TaskStatus:
    """What `Registry.task` (and `cancel_task`) answer about one task.

    `result` is the call's final `ToolResult` once the task is terminal (completed: the handler's
    success; failed: its failure, or `task_interrupted` when its host stopped; cancelled:
    `task_cancelled`), else None. `cancel` is set by `cancel_task` only: `cancelled` (the call never
    started), `too_late` (it had started: it runs to its end, poll for its result) or `ended` (it had
    ended already; `status` says how). Times are wall-clock seconds (`time.time()` of the host that
    wrote them)."""

    task_id: str
    status: TaskState
    tool: str
    created_at: float
    updated_at: float
    message: str = ""
    result: Optional[ToolResult] = None
    cancel: Optional[str] = None
    ttl_s: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (the result as the model sees it)."""
        view: dict[str, Any] = {"task_id": self.task_id, "status": self.status.value, "tool": self.tool,
                                "created_at": self.created_at, "updated_at": self.updated_at}
        if self.message:
            view["message"] = self.message
        if self.result is not None:
            view["result"] = self.result.to_model()
        if self.cancel is not None:
            view["cancel"] = self.cancel
        return view


_MESSAGES = {
    TaskState.WORKING: "The call is running.",
    TaskState.COMPLETED: "The call finished.",
    TaskState.FAILED: "The call failed.",
    TaskState.CANCELLED: "The task was cancelled before its call started; the tool did not run.",
}


def new_task_id() -> str:
    """An unguessable task id (128 random bits): knowing one task's id tells nothing of another's."""
    return "task-" + secrets.token_hex(16)


class TaskBook:
    """The tasks of one receipt store, read and written with the store's own operations (see the module)."""

    def __init__(self, store: ReceiptStore) -> None:
        self.store = store
        ttl_s = getattr(store, "ttl_s", None)
        self.ttl_s: Optional[float] = float(ttl_s) if isinstance(ttl_s, (int, float)) else None
        self.keeps_start = callable(getattr(store, "complete_unknown", None))  # see `take_gate`

    # -- what the run writes -----------------------------------------------------------------------

    def open(self, tenant: str, actor_id: str, tool: str, writes: bool, *, timeout_s: float) -> tuple[str, str, str]:
        """Reserve a new task's entry: (task id, its description, the owner token). Raises
        ReceiptStoreUnavailable when the store does not answer."""
        created = time.time()
        description = _SCHEME + canonical_json({"actor": actor_id, "tool": tool, "created": created, "writes": writes})
        for _ in range(3):  # a clash of 128 random bits does not happen; a bug would loop, so bounded
            task_id = new_task_id()
            reservation = self.store.reserve(ReceiptKey(tenant, TASK_ENTRY, task_id), description,
                                             lapse=Lapse.UNKNOWN, timeout_s=timeout_s)
            if reservation.status is ReservationStatus.RESERVED and isinstance(reservation.owner, str):
                return task_id, description, reservation.owner
        raise ReceiptStoreUnavailable("the receipt store did not reserve a new task's entry")

    def take_gate(self, tenant: str, task_id: str, side: str, *, timeout_s: float) -> str:
        """Take the task's gate for `side` (`start`, `cancel` or `interrupt`): "won" when it is ours now
        (or was ours already), "lost" when another side has it. Raises ReceiptStoreUnavailable.

        A `start` is kept until the run ends (`complete_unknown`, then `end_start`), however long that
        is: a gate that expired while its task's entry stays unknown (its host died) would read as
        never taken, and a reader would tell the caller "did not run" of a call that may have."""
        key = ReceiptKey(tenant, TASK_GATE, task_id)
        complete = self.store.complete
        if side == _START and self.keeps_start:
            complete = self.store.complete_unknown  # type: ignore[attr-defined] # (keeps_start: it has one)
        give_up = time.monotonic() + min(timeout_s, GATE_WAIT_S)
        while True:
            reservation = self.store.reserve(key, side, lapse=Lapse.TAKEOVER, timeout_s=timeout_s)
            status = reservation.status
            if status is ReservationStatus.RESERVED and isinstance(reservation.owner, str):
                if complete(key, reservation.owner, {"gate": side}, timeout_s=timeout_s):
                    return "won"
            elif status is ReservationStatus.REPLAY:
                return "won"
            elif status is ReservationStatus.CONFLICT:
                return "lost"
            if time.monotonic() >= give_up:  # the other side holds it mid-way (two store calls) or the store fails
                raise ReceiptStoreUnavailable("the task's gate was not settled in time")
            time.sleep(0.02)

    def end_start(self, tenant: str, task_id: str, *, timeout_s: float) -> None:
        """The run whose task's entry holds its final record lets its `start` expire with it (the
        receipt's ttl from now). Raises ReceiptStoreUnavailable; then the gate stays (listed by
        `unresolved()`): harmless."""
        if self.keeps_start:
            self.store.resolve(ReceiptKey(tenant, TASK_GATE, task_id), _START, record={"gate": _START},
                               timeout_s=timeout_s)

    def gate(self, tenant: str, task_id: str, *, timeout_s: Optional[float] = None) -> Optional[str]:
        """Who took the task's gate: `start`, `cancel`, `interrupt` (a reader found the entry lapsed
        first), or None (nobody yet, or someone is half-way through taking it)."""
        found = self.store.lookup(ReceiptKey(tenant, TASK_GATE, task_id), timeout_s=timeout_s)
        if found is None or found.status is not ReservationStatus.REPLAY:
            return None
        return found.fingerprint if found.fingerprint in (_START, _CANCEL, _INTERRUPT) else None

    @staticmethod
    def final_record(state: TaskState, result: ToolResult, message: str = "") -> dict[str, Any]:
        """The record a task's entry is completed with."""
        return {"status": state.value, "result": result.to_record(), "updated": time.time(),
                "message": message or _MESSAGES.get(state, "")}

    # -- what a reader sees --------------------------------------------------------------------------

    def status(self, tenant: str, actor_id: str, task_id: str, *,
               redact: Callable[[str], frozenset] = lambda tool: frozenset(),
               visible: Callable[[str], bool] = lambda tool: True,
               timeout_s: Optional[float] = None) -> Optional[TaskStatus]:
        """The task's status as `actor_id` of `tenant` may see it; None for a task that does not exist,
        expired, is another actor's, or is of a tool `visible(tool)` says the actor may not call now
        (all alike). `redact(tool)`: the fields its results mask. Raises ReceiptStoreUnavailable."""
        if not isinstance(task_id, str) or not task_id.startswith("task-") or len(task_id) > 64 \
                or not task_id.isascii() or "\x00" in task_id:
            return None
        found = self.store.lookup(ReceiptKey(tenant, TASK_ENTRY, task_id), timeout_s=timeout_s)
        if found is None:
            return None
        description = _description(found.fingerprint)
        if description is None or description.get("actor") != actor_id:
            return None
        tool, created, writes = str(description["tool"]), float(description["created"]), bool(description["writes"])
        if not visible(tool):  # its tool is hidden from the actor now: its task too (and no gate is taken)
            return None
        base = TaskStatus(task_id, TaskState.WORKING, tool, created, created, _MESSAGES[TaskState.WORKING],
                          ttl_s=self.ttl_s)
        if found.status is ReservationStatus.REPLAY and isinstance(found.record, Mapping):
            record = found.record
            state = TaskState(record["status"])
            result = ToolResult.from_record(record["result"], replayed=False, call_id=task_id, redact=redact(tool))
            return dataclasses.replace(base, status=state, updated_at=float(record.get("updated") or created),
                                       message=str(record.get("message") or ""), result=result)
        gate = self.gate(tenant, task_id, timeout_s=timeout_s)
        if gate == _CANCEL:  # the handler never started, whatever became of the host
            return dataclasses.replace(base, status=TaskState.CANCELLED, message=_MESSAGES[TaskState.CANCELLED],
                                       result=cancelled_result(tool, task_id))
        if found.status is ReservationStatus.UNKNOWN:  # the entry's lease lapsed: its host stopped, or lost the store
            if gate is None and not self.keeps_start and self.ttl_s is not None \
                    and time.time() >= created + self.ttl_s / 2:
                # A store without complete_unknown keeps a `start` for its ttl only (the entry, unknown, for
                # ever): past half the ttl (a margin for the hosts' clocks) nobody can say it was not taken.
                gate = _START
            if gate is None:  # "did not run" only once the run can never start: take the gate from it first
                won = self.take_gate(tenant, task_id, _INTERRUPT,
                                     timeout_s=GATE_WAIT_S if timeout_s is None else timeout_s) == "won"
                gate = _INTERRUPT if won else self.gate(tenant, task_id, timeout_s=timeout_s)
                if gate == _CANCEL:
                    return dataclasses.replace(base, status=TaskState.CANCELLED, message=_MESSAGES[TaskState.CANCELLED],
                                               result=cancelled_result(tool, task_id))
            # Started, or being started (the gate half-taken): whatever is not ours may have run.
            result = interrupted_result(tool, task_id, started=gate != _INTERRUPT, writes=writes)
            return dataclasses.replace(base, status=TaskState.FAILED, result=result,
                                       message=result.error.message if result.error is not None else "")
        return base


def _description(fingerprint: Any) -> Optional[dict[str, Any]]:
    if not isinstance(fingerprint, str) or not fingerprint.startswith(_SCHEME):
        return None
    try:
        value = json.loads(fingerprint[len(_SCHEME):])
    except ValueError:
        return None
    if not isinstance(value, dict) or not {"actor", "tool", "created", "writes"} <= value.keys():
        return None
    return value


def cancelled_result(tool: str, task_id: str) -> ToolResult:
    error = ToolError.from_code("task_cancelled")
    return ToolResult._fast(False, Outcome.REJECTED, tool, None, error, task_id, None, frozenset())


def interrupted_result(tool: str, task_id: str, *, started: bool, writes: bool) -> ToolResult:
    """A task whose host stopped before it ended. Never started (a reader holds its gate: it never
    will): certainly no effect (retry). Started: a write's effect is unknown (look it up); a read had
    none (retry)."""
    if not started:
        error = ToolError.from_code("task_interrupted", "The host running this task stopped (or lost the receipt "
                                    "store) before its call started; the tool did not run and never will. "
                                    "Call it again.", retryable=True,
                                    next_action=NextAction.RETRY)
        return ToolResult._fast(False, Outcome.REJECTED, tool, None, error, task_id, None, frozenset())
    if not writes:
        error = ToolError.from_code("task_interrupted", "The host running this task stopped before its call "
                                    "ended; the tool only reads, so call it again.", retryable=True,
                                    next_action=NextAction.RETRY)
        return ToolResult._fast(False, Outcome.FAILED, tool, None, error, task_id, None, frozenset())
    error = ToolError.from_code("task_interrupted")
    return ToolResult._fast(False, Outcome.UNKNOWN, tool, None, error, task_id, None, frozenset())
