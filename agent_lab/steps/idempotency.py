"""Step 5, idempotency: claim the call's key, or answer from what holds it; and settle it at the end.

A tool with an `idempotency_key` argument is matched by (tenant, tool, key) and the call's keyed
fingerprint: the same key and fingerprint replay the stored receipt, the same key with other
arguments is `idempotency_conflict`, a key still running is `idempotency_in_progress`. A call holds its
key in this registry (`agent_lab.leases`) from reservation until its outcome is stored:

* A write whose outcome is unknown (it raised, timed out, or returned broken output) keeps a receipt,
  so the same key replays "unknown, look it up" instead of repeating the effect. The store keeps that
  receipt until `resolve_unknown` settles it (`complete_unknown`), never only for its ttl.
* A refusal before any effect, and a failure known to have had no effect that a retry could fix,
  release the reservation, so a corrected or later retry with the same key can run.
* A write whose reservation lapses without a receipt (its process died, or its receipt could not be
  stored) is `outcome_unknown` for good: never a second run, until `resolve_unknown` settles it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..calls import ToolResult
from ..errors import Outcome
from ..execution import MAX_WAIT_S, PROCESS_EXITS, seconds_left
from ..fingerprint import has_lone_surrogate
from ..leases import RECEIPT_RETRY_TIMEOUT_S, ReceiptNote
from ..policy import Actor
from ..spec import TaskSupport
from ..stores import Lapse, ReceiptKey, ReceiptStoreUnavailable, Reservation, ReservationStatus
from .deadline import passed
from .details import violation_details

if TYPE_CHECKING:  # pragma: no cover
    from ..spec import ToolSpec
    from .services import Services
    from .state import CallState

__all__ = ["check_store_covers", "frees_key", "reserve_key", "resolvable", "resolved_record", "settle_receipt",
           "store_outcome"]

logger = logging.getLogger("agent_lab.registry")

# Enum members as module constants: one read through its class costs a descriptor call (about 900
# instructions on CPython 3.11), and every keyed call compares a few.
_LAPSE_UNKNOWN, _LAPSE_TAKEOVER = Lapse.UNKNOWN, Lapse.TAKEOVER
_RESERVED, _REPLAY, _CONFLICT, _UNKNOWN = (ReservationStatus.RESERVED, ReservationStatus.REPLAY,
                                           ReservationStatus.CONFLICT, ReservationStatus.UNKNOWN)
_REJECTED, _FAILED, _OUTCOME_UNKNOWN = Outcome.REJECTED, Outcome.FAILED, Outcome.UNKNOWN
_ACCEPTED = Outcome.ACCEPTED


def reserve_key(state: CallState) -> Optional[ToolResult]:
    """Claim (tenant, tool, key) for this fingerprint, or answer from what already holds it.

    This process answers first for keys its own calls hold. The store is then asked, waiting no
    longer than the call's deadline; and a reservation that arrives after it is given back
    (`deadline_exceeded`), so no handler ever starts late or without a reservation.
    """
    state.step = "idempotency"
    spec = state.spec
    assert spec is not None and spec.idempotency_key is not None
    fingerprint = state.fingerprinted()
    if fingerprint is None:
        raise AssertionError("a call that passed the schema step has a fingerprint")
    key_value = state.arguments[spec.idempotency_key]
    # No database stores a NUL or a lone surrogate as text: such a key is refused alike, for every store.
    if "\x00" in key_value or not key_value.isascii() and has_lone_surrogate(key_value):
        return _unstorable_key(state, spec.idempotency_key, key_value)
    actor = state.actor
    tenant = actor.tenant
    if type(actor) is Actor or (type(tenant) is str and tenant.isascii() and "\x00" not in tenant):
        # ReceiptKey(tenant, tool, key), its checks settled already: an Actor's tenant is plain text
        # without NUL or lone surrogates (it refuses others when built), and so is an ASCII one
        # without NUL; a registered tool's name is ASCII without NUL; the key was checked above. So
        # without the frozen dataclass's checks and setattrs (built on every keyed call). Anything
        # else takes the class's own constructor, which refuses what it must.
        receipt_key = state.receipt_key = _new_object(ReceiptKey)
        fields = receipt_key.__dict__
        fields["tenant"] = tenant
        fields["tool"] = spec.name
        fields["key"] = key_value
    else:
        receipt_key = state.receipt_key = ReceiptKey(tenant, spec.name, key_value)
    holder = state.services.holder
    if holder.held:  # (nothing held, nothing to answer: the common case asks no lock)
        held = holder.answer(receipt_key, fingerprint)
        if held is not None:  # a call of this process holds the key, whatever the store's lease says
            return state.refusal(held)
    timeout_s = state.call_deadline - _monotonic()  # type: ignore[operator] # fixed by route
    if timeout_s <= 0.0:
        return state.refusal("deadline_exceeded")
    if timeout_s > MAX_WAIT_S:
        timeout_s = MAX_WAIT_S
    writes = state.plan.writes  # type: ignore[union-attr] # route found the plan
    lapse = _LAPSE_UNKNOWN if writes else _LAPSE_TAKEOVER
    try:
        reservation = state.services.receipts.reserve(receipt_key, fingerprint, lapse=lapse, timeout_s=timeout_s)
        status = reservation.status
        if status is _CONFLICT:
            # Stored in another scheme (a receipt made before the registry's changed): compare in that one.
            stored = reservation.fingerprint
            if type(stored) is str and not stored.startswith(state.services.fingerprints.scheme) \
                    and state.fingerprint_as(stored) == stored:
                state.fingerprint = fingerprint = stored  # the key's receipt and audit record name this one
                reservation = state.services.receipts.reserve(receipt_key, fingerprint, lapse=lapse,
                                                              timeout_s=seconds_left(state.call_deadline))
                status = reservation.status
    except PROCESS_EXITS:
        raise
    except (ReceiptStoreUnavailable, OSError) as exception:
        logger.warning("receipt store could not reserve a key for %r: %s", spec.name, type(exception).__name__)
        return state.refusal("receipt_store_unavailable")
    if status is _RESERVED:
        if not isinstance(reservation.owner, str):
            raise TypeError("the receipt store reserved a key without an owner token")
        state.hold = holder.hold(receipt_key, fingerprint, reservation.owner, writes=writes, tool=spec.name)
        if passed(state.call_deadline):  # the reserve returned too late for the handler to start
            return state.refusal("deadline_exceeded")
        return None
    if status is _REPLAY and reservation.record is not None:
        record = reservation.record
        return _replay_of(record, state.call_id, state.redact) or _replayed(record, state)
    if status is _CONFLICT:
        return state.refusal("idempotency_conflict")
    if status is _UNKNOWN:
        return state.refusal("outcome_unknown")
    return state.refusal("idempotency_in_progress")


_replay_of = ToolResult._replay_of
_new_object = object.__new__
_monotonic = time.monotonic


def _replayed(record: Mapping[str, Any], state: CallState) -> ToolResult:
    """The replay of a stored receipt: `ToolResult.from_record` (`ToolResult._replay_of` answers the
    common one, a success as the stores give it back, without its enum call and keyword handling)."""
    return ToolResult.from_record(record, replayed=True, call_id=state.call_id, redact=state.redact)


def _unstorable_key(state: CallState, key_name: str, key_value: str) -> ToolResult:
    """An idempotency key with a lone surrogate or NUL: valid for the schema, but not text every store
    can hold (PostgreSQL's text type refuses NUL)."""
    pointer = "/" + key_name.replace("~", "~0").replace("/", "~1")
    if "\x00" in key_value:
        message = "The idempotency key must be text without NUL characters (U+0000)."
    else:
        message = "The idempotency key must be valid Unicode text; it holds a lone surrogate code point."
    violation = {"instance_path": pointer, "keyword_path": "", "keyword": "idempotency_key", "message": message}
    return state.refusal("invalid_arguments", message, details=violation_details([violation]))


def settle_receipt(state: CallState, result: ToolResult) -> None:
    """Complete or release this call's reservation (if it holds one and no late handler will).

    Released (the key is free again): refusals before any effect, and failures known to have had
    no effect that a retry could fix (retryable errors, timeouts of reads, arguments the handler
    refused), since storing those would make every retry replay the failure. Stored: everything
    else, including writes whose outcome is unknown, so that the same key replays "unknown" instead
    of repeating the effect. The store is given what is left of the call's deadline; if that is not
    enough, the lease keeper keeps trying in the background (the caller has its answer already).
    """
    if state.hold is None:
        return
    if state.late_pending:
        state.receipt_note = ReceiptNote.LATE
        return
    if state.receipt_result is not None:  # a write that overran: its real result is the receipt
        result = state.receipt_result
    store_outcome(state, result, timeout_s=seconds_left(state.call_deadline) or 0.0)


def store_outcome(state: CallState, result: ToolResult, *, timeout_s: float) -> None:
    """Store `result` as the key's receipt, or release the key, under this call's owner token. The run
    of an accepted task holds the task's entry instead: it is completed with the task's final record
    (never released: the task would vanish), given the background's patience (nobody waits for it)."""
    hold = state.hold
    assert hold is not None
    unknown_outcome = False
    if state.task is not None:
        from ..tasks import TaskBook, TaskState  # loaded with the first task (see Registry), never before

        record: Optional[Mapping[str, Any]] = TaskBook.final_record(
            TaskState.COMPLETED if result.ok else TaskState.FAILED, result)
        timeout_s = RECEIPT_RETRY_TIMEOUT_S
        state.task_unknown = result.outcome is _OUTCOME_UNKNOWN  # its key is kept until resolved (steps/task.py)
    else:
        record = None if frees_key(result) else result.to_record()
        # A write whose effect may have happened: its receipt is kept, and listed by unresolved(), until
        # the application resolves it; one that expired with the ttl would let the key run again. So is a
        # write task's `accepted`: its run may take effect from now on, and a host that dies mid-call never
        # ends it; the run's normal end lets it expire with the ttl (steps/task.py).
        outcome = result.outcome
        unknown_outcome = (outcome is _OUTCOME_UNKNOWN or outcome is _ACCEPTED) and hold.writes
    state.receipt_note = state.services.holder.settle(hold, record, timeout_s=timeout_s,
                                                      unknown_outcome=unknown_outcome)


def frees_key(result: ToolResult) -> bool:
    """Whether a call's result leaves its key free (no effect, and a retry may differ) rather than stored."""
    if result.outcome is _REJECTED:
        return True
    if result.outcome is _FAILED and result.error is not None:  # no effect; may the retry differ?
        # invalid_arguments: the handler refused the arguments (a `@tool` model validator), so the next
        # call under this key is a corrected one, not a replay of the refusal.
        return result.error.retryable or result.error.code in ("tool_timeout", "invalid_arguments")
    return False


_RESOLVABLE_OUTCOMES = (Outcome.UNKNOWN.value, Outcome.ACCEPTED.value)


def resolvable(found: Reservation) -> bool:
    """Whether what `lookup` found under a key waits for `resolve_unknown`: a write's lapsed reservation
    (UNKNOWN), or the receipt of a write's unknown outcome, which replays (REPLAY of a record whose
    outcome is unknown, or the `accepted` of a write task that ended so; the store says whether it keeps
    it for resolving: one stored by a store without `complete_unknown`, or a task's that ended otherwise,
    is refused there)."""
    if found.status is _UNKNOWN:
        return True
    record = found.record
    return found.status is _REPLAY and isinstance(record, Mapping) and record.get("outcome") in _RESOLVABLE_OUTCOMES


def task_of(record: Any) -> Optional[str]:
    """The task id a key's receipt names, when it is a task's `accepted` (else None)."""
    if not isinstance(record, Mapping) or record.get("outcome") != _ACCEPTED.value:
        return None
    output = record.get("output")
    task_id = output.get("task_id") if isinstance(output, Mapping) else None
    return task_id if isinstance(task_id, str) and task_id.startswith("task-") else None


def resolve_key(services: Services, receipt_key: ReceiptKey, result: Optional[ToolResult],
                timeout_s: Optional[float]) -> bool:
    """`Registry.resolve_unknown` once the result to replay is made (None: "it did not happen"): through
    this process's hold when it gave up on the key (its owner token still holds the row), else in the
    store, never while the key's handler still runs here, nor while the task whose `accepted` the key
    keeps may run (`TaskRunner.may_run`). False for a key that is not unknown, and for a store failure."""
    holder = services.holder
    held = holder.owner_of_unknown(receipt_key)
    if held is not None and held.still_running:  # its handler runs here still: nobody knows yet
        return False
    if held is not None:
        record = resolved_record(result, held.fingerprint)
        note = holder.settle(held, record, timeout_s=RECEIPT_RETRY_TIMEOUT_S if timeout_s is None else timeout_s)
        return note in (ReceiptNote.STORED, ReceiptNote.RELEASED)
    receipts = services.receipts
    try:
        found = receipts.lookup(receipt_key, timeout_s=timeout_s)
        if found is None or found.fingerprint is None or not resolvable(found):
            return False
        task_id = task_of(found.record)
        if task_id is not None and services.tasks.may_run(receipt_key.tenant, task_id, timeout_s):
            return False  # resolved while its task runs, the key would start a second run
        record = resolved_record(result, found.fingerprint)
        return receipts.resolve(receipt_key, found.fingerprint, record=record, timeout_s=timeout_s) is True
    except (ReceiptStoreUnavailable, OSError) as exception:
        logger.warning("receipt store could not resolve a key of tool %r: %s", receipt_key.tool,
                       type(exception).__name__)
        return False


def resolved_record(result: Optional[ToolResult], stored_fingerprint: str) -> Optional[dict[str, Any]]:
    """The receipt record of a resolved key: the given result under the key's own fingerprint
    (None: "it did not happen", the key is to be freed)."""
    if result is None:
        return None
    return dataclasses.replace(result, fingerprint=stored_fingerprint).to_record()


def check_store_covers(spec: ToolSpec, services: Services) -> None:
    """At `register`: a key's lease must outlast its longest run even if no renewal got through: the
    tool's timeout, plus (for a write) the late-completion window. Otherwise a live but slow handler's
    key could lapse to `unknown` (a write) or be taken over (a read) in other processes. For a tool that
    may run as a task, the receipts' ttl must outlast that run too. A ValueError says which.

    A store the registry made itself is seen by this registry alone, which holds its keys in process
    anyway, so only the lease of a store passed in is checked."""
    if spec.idempotency_key is None:
        return
    receipts, late_s = services.receipts, services.late_completion_s
    needed_s = spec.timeout_ms / 1000.0 + (late_s if spec.writes else 0.0)
    ttl_s = getattr(receipts, "ttl_s", None)
    if spec.task_support is not TaskSupport.FORBIDDEN:
        # A task's key keeps its `accepted` receipt from acceptance on, kept alive (`keep`) with each
        # renewal of the task's lease while its call runs: one that expired while the task still ran
        # would let the same key start a second run beside it.
        keep = getattr(receipts, "keep", None)
        if not callable(keep):
            raise ValueError(f"tool {spec.name!r}: the receipt store has no keep() to hold a task's accepted "
                             f"receipt while its call runs; run the tool without tasks, or give the store keep()")
        if spec.writes and not callable(getattr(receipts, "complete_unknown", None)):
            # A write task's `accepted` is kept until its run ends (steps/task.py): completed with the ttl,
            # it expired a ttl after a dead host's last renewal, and the key ran the effect again.
            raise ValueError(f"tool {spec.name!r}: the receipt store has no complete_unknown() to keep a write "
                             f"task's key while its call may run, also after its host died; run the tool without "
                             f"tasks, or give the store complete_unknown()")
        if spec.writes and not callable(getattr(receipts, "let_expire", None)):
            # A write task's `accepted` is let expire, when its run ends, under its owner token: resolving
            # what a lookup found could settle another task's `accepted` under the same key (steps/task.py).
            raise ValueError(f"tool {spec.name!r}: the receipt store has no let_expire() to let a write task's "
                             f"key expire when its run ends; run the tool without tasks, or give the store "
                             f"let_expire()")
        if spec.writes and not _takes_keyword(keep, "until_resolved"):
            # A write task that ends with its outcome unknown keeps its key until resolved (steps/task.py):
            # a keep() without it would let the key expire with the ttl, and the effect run again.
            raise ValueError(f"tool {spec.name!r}: the receipt store's keep() takes no until_resolved, which a "
                             f"write task needs to keep its key once its outcome is unknown; run the tool without "
                             f"tasks, or give keep() that keyword")
        if isinstance(ttl_s, (int, float)) and ttl_s < needed_s:
            raise ValueError(f"tool {spec.name!r}: the receipt store's ttl_s ({ttl_s:g} s) is shorter than the "
                             f"run of a task of the tool ({needed_s:g} s); give the store a longer ttl_s")
        renew_every_s = services.holder.renew_every_s
        if isinstance(ttl_s, (int, float)) and renew_every_s > ttl_s / 2:
            raise ValueError(f"tool {spec.name!r}: renew_every_s ({renew_every_s:g} s) must be at most half the "
                             f"receipt store's ttl_s ({ttl_s:g} s) for a task's receipt to be kept in time")
    lease_s = getattr(receipts, "lease_s", None)
    if services.owns_receipts or not isinstance(lease_s, (int, float)):
        return
    if lease_s < needed_s:
        window = f" plus the late-completion window ({late_s:g} s)" if spec.writes else ""
        raise ValueError(
            f"tool {spec.name!r}: the receipt store's lease_s ({lease_s:g} s) is shorter than the tool's "
            f"timeout_ms ({spec.timeout_ms:g} ms){window}, {needed_s:g} s in all; give the store a longer "
            f"lease_s, or the tool a shorter timeout_ms"
        )


def _takes_keyword(function: Any, name: str) -> bool:
    """Whether `function` accepts the keyword argument `name` (False when its signature cannot be read)."""
    import inspect  # only at register, for a task tool

    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    found = parameters.get(name)
    if found is not None:
        return found.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())
