"""The execute step's other form: accept the call as a task and run it in the background.

A call of a tool with `task_support` (asked for as a task, or always for "required") that passed every
check up to and including idempotency is not run while the caller waits: `accept_task` opens the
task's entry in the receipt store (`agent_lab.tasks`), starts the run on a thread of its own and answers
`accepted` with the task id. The record step then stores that answer as the key's receipt, so a retry
under the same key replays the same task id and never runs the tool again.

A write task's run first waits until that receipt is stored (the caller's hold settles, or the lease
keeper's retries do: `KeyHolder.wait_stored`; at once when the store answers at once). One never
stored ends the task unstarted (`task_interrupted`, the tool did not run): the key lapses to `unknown`
naming no task, so `resolve_unknown` cannot ask the task whether it runs, and "did not happen" must be
true of it. (It started all the same, and a key resolved so ran the effect twice.) A read task does
not wait: a second run of a read has no effect to repeat.

The run takes the task's gate first (a cancel that came before it wins: the handler never starts),
then executes the handler under the tool's own deadline (counted from the run's start: the caller
no longer waits), checks its output and writes its audit record as any call does, and completes the
task's entry with the final status and result. The run holds the entry as a call holds its key
(`agent_lab.leases`): the lease keeper renews its lease meanwhile, so other hosts see the task working,
and see it interrupted if this process dies; and a write whose handler overruns its deadline keeps
the entry as a late write keeps its key, renewed until the handler returns, whose real result then
ends the task. Each renewal also keeps the key's `accepted` receipt for the store's ttl: its ttl ran
from acceptance, so a handler still running past it left the key free, and the same key started a
second run beside the first. A write task's `accepted` is kept until resolved from the start
(`store_outcome`): a host that died mid-call renews nothing, and its receipt expired a ttl after the
last renewal, when the same key started the effect again. The run's end lets it expire with the ttl
(`_let_key_expire`), unless the outcome is unknown.
"""

from __future__ import annotations

import collections
import copy
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, Optional, Tuple

from ..calls import ToolResult
from ..errors import Outcome
from ..execution import seconds_left
from ..leases import RECEIPT_RETRY_TIMEOUT_S, ReceiptNote
from ..stores import ReceiptKey, ReceiptStoreUnavailable, ReservationStatus
from ..tasks import (MAX_RUNNING_TASKS, TASK_ENTRY, TaskBook, TaskState, TaskStatus, cancelled_result,
                     interrupted_result)
from .conclude import conclude, internal_error, record

if TYPE_CHECKING:  # pragma: no cover
    from ..leases import Hold
    from .services import Services
    from .state import CallState

__all__ = ["TaskRunner", "accept_task"]

logger = logging.getLogger("agent_lab.registry")

_ACCEPTED = Outcome.ACCEPTED
ACCEPTED_WAIT_S = 300.0
"""How long a write task's run waits at most for its key's `accepted` receipt to be stored before it
ends without starting. A guard only: the caller's hold settles, or is given up after the lease keeper's
few retries, long before (seconds); past it, ending unstarted is safe (the tool never ran)."""
LISTED_PER_ACTOR = 1000
"""How many of its latest tasks per actor a registry remembers for `Registry.tasks`."""
LISTED_ACTORS = 10_000
"""... for how many actors at most (the least recently active is forgotten first)."""


def accept_task(state: CallState) -> ToolResult:
    """Accept the call as a task (see the module); the refusal when it cannot be."""
    state.step = "execute"
    return state.services.tasks.accept(state)


class TaskRunner:
    """The tasks one registry runs, and what it remembers of the ones it accepted. One per registry."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.book = TaskBook(services.receipts)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0
        self._accepted: Dict[Tuple[str, str], Deque[str]] = {}

    def accept(self, state: CallState) -> ToolResult:
        spec, actor = state.spec, state.actor
        assert spec is not None and state.plan is not None
        with self._lock:
            if self._running >= MAX_RUNNING_TASKS or self.services.closed:
                return state.refusal("too_many_tasks")
            self._running += 1
        try:
            timeout_s = seconds_left(state.call_deadline) or 0.0
            task_id, description, owner = self.book.open(actor.tenant, actor.id, spec.name, spec.writes,
                                                         timeout_s=timeout_s)
        except (ReceiptStoreUnavailable, OSError) as exception:
            self._done()
            logger.warning("receipt store could not open a task of %r: %s", spec.name, type(exception).__name__)
            return state.refusal("receipt_store_unavailable")
        except BaseException:
            self._done()
            raise
        # The entry's hold keeps the key's `accepted` receipt (the caller's record step completes it) alive
        # with each renewal, for as long as the run may go on, past its deadline too: see the module.
        keeps = (state.receipt_key, state.hold.owner) if state.hold is not None and state.receipt_key is not None \
            else None
        entry = ReceiptKey(actor.tenant, TASK_ENTRY, task_id)
        hold = self.services.holder.hold(entry, description, owner, writes=True, tool=spec.name, keeps=keeps,
                                         task=True)
        with self._lock:
            listed = self._accepted.pop((actor.tenant, actor.id), None) or collections.deque(maxlen=LISTED_PER_ACTOR)
            listed.append(task_id)
            self._accepted[(actor.tenant, actor.id)] = listed  # most recently active last
            if len(self._accepted) > LISTED_ACTORS:  # bounded whatever the number of actors
                del self._accepted[next(iter(self._accepted))]
        run_state = copy.copy(state)  # the run's own state: the caller's settles the key with `accepted`
        run_state.hold = hold  # the run settles the task's entry as a call settles its key (late, too)
        run_state.receipt_key = entry
        run_state.receipt_note = None
        run_state.task = task_id
        # A write's run starts only once the key's `accepted` is stored (`_run`): the caller's hold says when.
        key_hold = state.hold if spec.writes and keeps is not None else None
        thread = threading.Thread(target=self._run, args=(run_state, hold, task_id, key_hold), daemon=True,
                                  name=f"agent-lab-task-{spec.name}")
        try:
            thread.start()
        except BaseException:  # no thread: the task ends here, failed before it started
            self._finish(hold, TaskState.FAILED, state.refusal("too_many_tasks"))
            self._done()
            raise
        return state.result(ok=True, outcome=_ACCEPTED, output={"task_id": task_id})

    def _run(self, state: CallState, hold: Hold, task_id: str, key_hold: Optional[Hold]) -> None:
        started, key_stored = False, True
        try:
            spec = state.spec
            assert spec is not None and state.plan is not None
            if key_hold is not None and not self.services.holder.wait_stored(key_hold, ACCEPTED_WAIT_S):
                # Its key holds no receipt naming the task (or none anyone can confirm): a key that lapsed
                # to `unknown` without one is resolved "did not happen" with nothing asking the task, so the
                # call must never start, here or anywhere.
                logger.warning("a task of %r did not start: its key's accepted receipt could not be stored",
                               state.tool)
                key_stored = False
                self._finish(hold, *self._never_accepted(state, task_id))
                return
            try:
                gate = self.book.take_gate(state.actor.tenant, task_id, "start", timeout_s=RECEIPT_RETRY_TIMEOUT_S)
            except (ReceiptStoreUnavailable, OSError):
                gate = "unknown"
            if gate == "lost":  # a cancel, or a reader that found the entry lapsed: the handler never starts
                self._finish(hold, *self._lost(state, task_id))
                return
            if gate != "won":
                self._finish(hold, TaskState.FAILED, state.refusal("receipt_store_unavailable"))
                return
            started = True
            now = time.monotonic()
            state.started_monotonic = state.started = now
            state.call_deadline = now + state.plan.timeout_s  # the tool's own deadline, from the run's start
            try:
                result = conclude(state, state.plan.execute(state))
            except BaseException:  # noqa: BLE001 - a bug in a step is contained, as under invoke
                result = internal_error(state)
            record(state, result)  # completes the entry with the task's record, or leaves it to the late handler
        except BaseException as exception:  # noqa: BLE001 - a background thread: log, never raise
            logger.error("a task of %r failed outside the call: %s", state.tool, type(exception).__name__)
            self.services.holder.give_up(hold, "the task's run failed")
            state.late_pending = False
        finally:
            if not state.late_pending:  # else the task still runs: it ends when its late handler does (`ended`)
                self._end(state, started, key_stored)

    def _never_accepted(self, state: CallState, task_id: str) -> Tuple[TaskState, ToolResult]:
        """How a write task whose key's `accepted` was not stored ends: interrupted before its call
        started. Its gate is taken first (`interrupt`), so a cancel that came meanwhile, and answered
        "cancelled", stays true (it ends cancelled then), and a reader finds the gate taken whatever
        becomes of the entry."""
        try:
            gate = self.book.take_gate(state.actor.tenant, task_id, "interrupt", timeout_s=RECEIPT_RETRY_TIMEOUT_S)
        except (ReceiptStoreUnavailable, OSError):
            gate = "unknown"
        if gate == "lost":
            return self._lost(state, task_id)
        assert state.spec is not None
        return TaskState.FAILED, interrupted_result(state.tool, task_id, started=False, writes=state.spec.writes)

    def _lost(self, state: CallState, task_id: str) -> Tuple[TaskState, ToolResult]:
        """How a run that lost its gate ends: interrupted when a reader that found the entry lapsed took
        it, else cancelled. Either way the tool did not run. A gate not readable yet (its taker is
        half-way: reserved, not yet completed) or not at all is nearly always a cancel's, which answered
        its caller "cancelled" already: so it ends as cancelled."""
        try:
            taken_by = self.book.gate(state.actor.tenant, task_id, timeout_s=RECEIPT_RETRY_TIMEOUT_S)
        except (ReceiptStoreUnavailable, OSError):
            taken_by = None
        if taken_by != "interrupt":
            return TaskState.CANCELLED, cancelled_result(state.tool, task_id)
        assert state.spec is not None
        return TaskState.FAILED, interrupted_result(state.tool, task_id, started=False, writes=state.spec.writes)

    def _finish(self, hold: Hold, status: TaskState, result: ToolResult) -> None:
        self.services.holder.settle(hold, self.book.final_record(status, result), timeout_s=RECEIPT_RETRY_TIMEOUT_S)

    def ended(self, state: CallState) -> None:
        """A task whose handler overran its deadline has ended (its late result was stored, or could not
        be): until then it counts as running, for `wait` and for `MAX_RUNNING_TASKS`."""
        self._end(state, started=True)

    def _end(self, state: CallState, started: bool, key_stored: bool = True) -> None:
        """The run is over: its `start` at the gate expires with the entry once the entry holds the task's
        final record (else it stays, as the entry stays unknown: see `TaskBook.take_gate`). So does a write
        task's key, kept until resolved from its acceptance (`store_outcome`), unless the task ended with
        its outcome unknown: then it stays until the application resolves it. A key whose `accepted` was
        never confirmed stored (`key_stored` False) is left as it is: unknown once its lease lapses, or
        kept until resolved if an answer was lost; `resolve_unknown` settles either (the task never ran)."""
        try:
            if state.spec is not None and state.spec.writes and key_stored:
                if started and state.task_unknown:
                    self._keep_key_until_resolved(state)
                elif not started or state.receipt_note is ReceiptNote.STORED:
                    self._let_key_expire(state)
        finally:
            try:
                if started and state.task is not None and state.receipt_note is ReceiptNote.STORED:
                    self.book.end_start(state.actor.tenant, state.task, timeout_s=RECEIPT_RETRY_TIMEOUT_S)
            except Exception as exception:  # noqa: BLE001 - a background thread: log, never raise
                logger.warning("receipt store failed to let the gate of a task of %r expire: %s", state.tool,
                               type(exception).__name__)
            finally:
                self._done()

    def _keep_key_until_resolved(self, state: CallState) -> None:
        """A write task that ended with its outcome unknown keeps its key's `accepted` receipt until the
        application resolves it, as a plain write's receipt of unknown outcome is kept: one that expired
        with the ttl would let the same key start the effect again. The caller may still be completing
        that receipt (a handler that failed at once), so it is asked again for a while."""
        keeps = state.hold.keeps if state.hold is not None else None
        keep = getattr(self.services.receipts, "keep", None)
        if keeps is None or not callable(keep):
            return
        # Given up: the receipt was never completed (its caller's store call failed), and it lapses unknown.
        self._retry(state, lambda: keep(keeps[0], keeps[1], timeout_s=RECEIPT_RETRY_TIMEOUT_S, until_resolved=True),
                    failed="the receipt store's keep failed for a task of %r: %s",
                    gave_up="the key of a task of %r that ended with its outcome unknown could not be kept "
                            "until resolved; it expires with the store's ttl")

    def _let_key_expire(self, state: CallState) -> None:
        """A write task that ended with a known outcome (or never started) lets its key's `accepted`,
        kept until resolved while the run could take effect, expire with the ttl from now, as every
        receipt does. The caller may still be completing that receipt (a run that ended at once), so it is
        asked again for a while; one never let expire stays until resolved (listed by `unresolved()`):
        safe, and `Registry.resolve_unknown` settles it.

        Under its completer's owner token (`store.let_expire`), never by resolving what a lookup found: a
        task that ended cancelled, resolved "did not happen" by a hand meanwhile and accepted again under
        the same key, had that new task's `accepted` (same fingerprint, kept until resolved) settled with the
        old record and the ttl, and the key ran the effect a third time once it expired."""
        keeps = state.hold.keeps if state.hold is not None else None
        let_expire = getattr(self.services.receipts, "let_expire", None)
        if keeps is None or not callable(let_expire):  # (refused for write task tools: check_store_covers)
            return
        store, (key, owner) = self.services.receipts, keeps

        def attempt() -> bool:
            if let_expire(key, owner, timeout_s=RECEIPT_RETRY_TIMEOUT_S):
                return True
            found = store.lookup(key, timeout_s=RECEIPT_RETRY_TIMEOUT_S)
            # let expire already (an answer lost), resolved, or not this task's receipt (any more): done
            return found is None or found.status is not ReservationStatus.IN_PROGRESS

        self._retry(state, attempt, failed="the receipt store failed to let the key of a task of %r expire: %s",
                    gave_up="the key of a task of %r that ended could not be let expire; it is kept until resolved")

    @staticmethod
    def _retry(state: CallState, attempt: Callable[[], Any], *, failed: str, gave_up: str) -> None:
        """Call `attempt` until it answers true (done), for `RECEIPT_RETRY_TIMEOUT_S`: its caller may still be
        completing the key's receipt, and a store that failed once may answer the next time. Any other
        exception ends it, logged (`failed`, with the tool and the exception's type): a background thread
        never raises; so does running out of time (`gave_up`, with the tool)."""
        give_up = time.monotonic() + RECEIPT_RETRY_TIMEOUT_S
        while True:
            try:
                if attempt():
                    return
            except (ReceiptStoreUnavailable, OSError):
                pass
            except Exception as exception:  # noqa: BLE001 - a background thread: log, never raise
                logger.warning(failed, state.tool, type(exception).__name__)
                return
            if time.monotonic() >= give_up:
                logger.warning(gave_up, state.tool)
                return
            time.sleep(0.05)

    def _done(self) -> None:
        with self._lock:
            self._running -= 1
            self._idle.notify_all()

    def wait(self, timeout_s: Optional[float]) -> bool:
        """Wait until no task runs here; False when `timeout_s` ran out first."""
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while self._running:
                left = None if give_up is None else give_up - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
            return True

    def accepted(self, tenant: str, actor_id: str) -> list[str]:
        """The ids of the tasks this registry accepted for the actor, oldest first."""
        with self._lock:
            return list(self._accepted.get((tenant, actor_id), ()))

    # -- reading and cancelling ------------------------------------------------------------------

    def status(self, tenant: str, actor_id: str, task_id: Any, redact: Any, visible: Any,
               timeout_s: Optional[float]) -> Optional[TaskStatus]:
        return self.book.status(tenant, actor_id, task_id, redact=redact, visible=visible, timeout_s=timeout_s)

    def may_run(self, tenant: str, task_id: str, timeout_s: Optional[float]) -> bool:
        """Whether the call of a task may be running still, or start yet, so that its key must not be
        resolved: this registry holds its entry (running, late, or storing its end), or the entry's lease
        is live (a host runs it). A lapsed entry whose gate nobody took has its gate taken first, as a
        reader does (`interrupt`): a host that only lost the store never starts it when it is back. A
        gate lost to the run meanwhile (the host came back just then) means it may be running: until it
        was ignored, the key was resolved while the call started, and the same key ran it again.
        Raises ReceiptStoreUnavailable."""
        entry = ReceiptKey(tenant, TASK_ENTRY, task_id)
        if any(hold.key == entry for hold in self.services.holder.holds()):
            return True
        found = self.book.store.lookup(entry, timeout_s=timeout_s)
        if found is not None and found.status is ReservationStatus.IN_PROGRESS:
            return True
        if found is not None and found.status is ReservationStatus.UNKNOWN \
                and self.book.gate(tenant, task_id, timeout_s=timeout_s) is None:
            return self.book.take_gate(tenant, task_id, "interrupt",
                                       timeout_s=RECEIPT_RETRY_TIMEOUT_S if timeout_s is None else timeout_s) != "won"
        return False

    def cancel(self, tenant: str, actor_id: str, task_id: Any, redact: Any, visible: Any,
               timeout_s: Optional[float]) -> Optional[TaskStatus]:
        """Cancel a task that has not started; say what happened instead when it had (see TaskStatus.cancel)."""
        import dataclasses

        current = self.book.status(tenant, actor_id, task_id, redact=redact, visible=visible, timeout_s=timeout_s)
        if current is None:
            return None
        if current.status.terminal:
            return dataclasses.replace(current, cancel="ended")
        side = self.book.take_gate(tenant, task_id, "cancel",
                                   timeout_s=RECEIPT_RETRY_TIMEOUT_S if timeout_s is None else timeout_s)
        after = self.book.status(tenant, actor_id, task_id, redact=redact, visible=visible, timeout_s=timeout_s) \
            or current
        return dataclasses.replace(after, cancel="cancelled" if side == "won" else "too_late")
