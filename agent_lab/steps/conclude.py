"""Steps 7-8, output and record: what the handler did becomes the call's result, its receipt and its
audit record; and a bug in any step becomes a contained `internal_error`.

The output is checked on the thread that ran the handler (`check_run`), where the caller can stop
waiting at the deadline: an object a handler returns can run code when it is read. A run that ends
past the deadline (handler and check) is a timeout however the caller learns of it (see
`agent_lab.steps.run.overran`).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..audit import audit_record as build_audit_record
from ..calls import ToolResult
from ..errors import Category, NextAction, Outcome, ToolError
from ..execution import OverBudget, Run, RunKind, describe_exception, measured_copy, type_name
from ..interrupts import raise_stop_request, stop_request
from ..policy import Actor
from ..spec import RetryPolicy
from .details import (
    EXACT_SIZE_FACTOR,
    MAX_OUTPUT_DEPTH,
    MAX_REPORTED_VIOLATIONS,
    json_size,
    non_json_output_violation,
    violation_dict,
    violation_report,
)
from .idempotency import settle_receipt
from .state import duration_clock

if TYPE_CHECKING:  # pragma: no cover
    from .state import CallState

__all__ = [
    "audit_record",
    "check_output",
    "check_run",
    "conclude",
    "internal_error",
    "output_result",
    "record",
    "run_failure",
    "stop_if_requested",
]

logger = logging.getLogger("agent_lab.registry")

# Enum members the common path compares with, as module constants (one read through the class costs a
# descriptor call, about 900 instructions on CPython 3.11).
_RETURNED, _FAILED, _RAISED = RunKind.RETURNED, RunKind.FAILED, RunKind.RAISED
_monotonic = time.monotonic
_new_run = tuple.__new__  # a Run without the named tuple's own __new__, which is Python code
_succeeded = ToolResult._succeeded


def conclude(state: CallState, run: Run) -> ToolResult:
    """Turn what the handler did into the call's result, checking a returned output (here, on the
    caller's thread, only for an async handler `ainvoke` awaited on it)."""
    if run.kind is not _RETURNED:
        if run.checked is None and run.kind is _FAILED:
            run = check_run(state, run)
        return run.checked if run.checked is not None else run_failure(state, run)
    state.step = "output"
    if run.checked is None:
        run = check_run(state, run)
        if run.kind is not _RETURNED:  # reading the output raised: the run's result is internal_error
            return run.checked if run.checked is not None else run_failure(state, run)
    result: ToolResult = run.checked
    if result.ok:
        state.step = "record"
    return result


def check_run(state: CallState, run: Run) -> Run:
    """`Run.checked` for a handler that returned or raised ToolFailure, made on the calling thread,
    and whether the handler and this check ended past the call's deadline (`finished_late`, read
    by the waiting thread once it has the run: see `overran`). The output check counts against
    the deadline like the handler: a check that ends late never makes the call look on time.

    Reading what the handler handed back runs its code (a dict subclass, a `__class__` property, a
    ToolFailure's details): whatever that raises, BaseException included, is the call's
    `internal_error` (a write's outcome unknown), never an exception for the thread that checks;
    only the caller's own stop request passes (see `agent_lab.interrupts`)."""
    kind = run.kind
    if kind is _RETURNED:
        return check_output(state, run.output)
    # Built with tuple.__new__: 145 ns against 339 ns for the named tuple's own __new__ with a keyword.
    try:
        if kind is _FAILED:
            run = _new_run(Run, (_FAILED, None, None, None, run_failure(state, run)))
        elif kind is not _RAISED:
            return run  # it never ran, or the caller already stopped waiting for it
    except BaseException as exception:  # noqa: BLE001
        raise_stop_request(exception)
        run = _new_run(Run, (_RAISED, None, None, type_name(exception), internal_error(state)))
    deadline = state.call_deadline
    if deadline is not None and _monotonic() > deadline:
        state.finished_late = True
    return run


def check_output(state: CallState, output: Any) -> Run:
    """`check_run` of a handler that returned `output`: the run whose `checked` is the call's result
    (`output_result`, or `internal_error` if reading the output raised), and whether it ended late.
    `run_sync_for` hands a returned output straight here (`check=`), on the thread that ran it."""
    try:
        run = _new_run(Run, (_RETURNED, None, None, None, output_result(state, output)))
    except BaseException as exception:  # noqa: BLE001
        raise_stop_request(exception)
        run = _new_run(Run, (_RAISED, None, None, type_name(exception), internal_error(state)))
    deadline = state.call_deadline
    if deadline is not None and _monotonic() > deadline:
        state.finished_late = True
    return run


def output_result(state: CallState, output: Any) -> ToolResult:
    """The output must be JSON, within the byte budget, and match the output schema.

    One walk takes the plain copy that is checked and kept (the handler may still hold, and
    change, the object it returned, and a container subclass could show the checks other contents
    than the copy), writes the types people return as their JSON form (`agent_lab.jsonforms`: a
    datetime, a Decimal, a dataclass, a pydantic model) and bounds its size. It stops once the
    output is certainly over `EXACT_SIZE_FACTOR` times the budget, so a huge output costs no more
    than a few budgets to refuse (the refusal then says `output_bytes_at_least`); a size the walk's
    bound cannot settle is measured exactly by the C JSON encoder (`output_bytes`). Then `is_valid`,
    and `errors` only for an output that fails it. A broken output of a *write* is reported with
    outcome unknown (the handler returned, so its effect may well have happened, but we cannot
    tell what it was); of a read, outcome failed.
    """
    spec = state.spec
    assert spec is not None
    budget = spec.max_output_bytes
    try:
        # forms=True, passed by position: a keyword argument costs every read ~300 instructions.
        copy, plain, bound, _ = measured_copy(output, MAX_OUTPUT_DEPTH, budget * EXACT_SIZE_FACTOR, True)
    except OverBudget:  # what the walk read (the contents we would keep) is certainly too large
        return _output_failure(state, "output_too_large", details={
            "max_output_bytes": budget, "output_bytes_at_least": budget * EXACT_SIZE_FACTOR + 1})
    if not plain or bound is None or bound > budget:
        # Measure the copy, never what the handler returned: the encoder calls a dict subclass's own
        # `items()`, which is handler code that would run here, on the caller's thread, past the deadline.
        size = json_size(copy)
        if size is not None and size > budget:
            return _output_failure(state, "output_too_large",
                                   details={"max_output_bytes": budget, "output_bytes": size})
        if not plain or size is None:  # not JSON, or not writable (e.g. a 5,000-digit integer)
            return _output_failure(state, "invalid_tool_output", [non_json_output_violation(copy)])
    validator = spec.output_validator
    if validator is not None and not validator.is_valid(copy):
        found = validator.errors(copy, limit=MAX_REPORTED_VIOLATIONS + 1, known_invalid=True)
        violations = [violation_dict(v) for v in found]
        if violations:
            return _output_failure(state, "invalid_tool_output", violations)
    return _succeeded(state.tool, copy, state.call_id, state.fingerprint, state.redact)


def _output_failure(
    state: CallState,
    code: str,
    violations: Optional[list] = None,
    *,
    details: Optional[dict[str, Any]] = None,
) -> ToolResult:
    assert state.spec is not None
    message = None
    if violations:
        message, details = violation_report(violations, state.redact, prefix="The tool's output breaks its contract: ")
    if state.spec.writes:
        return state.refusal(code, message, details=details, outcome=Outcome.UNKNOWN,
                             retryable=False, next_action=NextAction.LOOKUP_STATUS)
    return state.refusal(code, message, details=details, outcome=Outcome.FAILED)


def run_failure(state: CallState, run: Run) -> ToolResult:
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


def _safe_failure(error: ToolError, state: CallState) -> ToolError:
    """A ToolFailure's error as the model may see it, every field a plain value: the code plain text, the
    category and next action members of their enums, `retryable` a bool, the message plain text and the
    details a plain JSON copy (as for outputs: the handler may still hold the objects it raised with).

    Made here, on the thread that ran the handler and within its deadline: what the record step reads
    later on the caller's thread (the code, to decide whether the key is freed; the fields, to write the
    receipt and the audit record) then runs no code of the handler's, and is bounded, since details over
    the tool's output budget are dropped (logged) and a message is cut to that many characters. A code
    that is not text, or is longer than the budget, makes the failure a bug of the handler: contained
    as `internal_error` (a code of 20 MB reached the model, the receipt and the audit record as it was).

    For a tool with redacted fields, members of the details named in `spec.redact` are masked here
    already (so the error is safe even in a repr), and the call's own redacted argument values are
    masked wherever the code, the message or a detail string repeats them (a detail number that shows
    one is masked whole): a second line of defence, since a handler's message is shown as given and
    must be written safe in the first place."""
    spec = state.spec
    assert spec is not None
    budget = spec.max_output_bytes
    code = error.code
    if not issubclass(type(code), str) or not str.__len__(code):
        raise TypeError("a ToolFailure's code must be text")
    if str.__len__(code) > budget:  # a code is a name: cut, it would name another; over the budget, a bug
        raise TypeError("a ToolFailure's code must be no longer than the tool's output budget")
    code = str.__str__(code)
    category, next_action = Category(error.category), NextAction(error.next_action)
    retryable = error.retryable is True
    message = error.message
    message = str.__str__(message) if issubclass(type(message), str) and str.__len__(message) else (
        "The tool reported a failure.")
    if len(message) > budget:
        message = message[: max(budget - 1, 0)] + "\u2026"
    details = _plain_details(error.details, budget, code)
    if state.redact:
        from ..redaction import collect_secrets, redact, redact_text, secret_spellings

        # Every spelling text built from a value may show it in: as it is, on one line, JSON-escaped, as
        # a repr (`f"refused {arguments}"`), as XML; in the code too (it reaches the audit record).
        secrets_in_call = secret_spellings(collect_secrets(state.arguments, state.redact, include_keys=True))
        code = redact_text(code, secrets_in_call)
        message = redact_text(message, secrets_in_call)
        details = _mask_strings(redact(details, state.redact), secrets_in_call)
    return ToolError(code=code, category=category, message=message, retryable=retryable, next_action=next_action,
                     details=details)


def _plain_details(details: Any, budget: int, code: str) -> dict[str, Any]:
    """A ToolFailure's details as a plain JSON copy within `budget` bytes, or empty (logged): the walk
    that copies them stops once they are certainly too large, so a huge object costs a few budgets."""
    if not isinstance(details, Mapping):
        return {}
    try:
        copy, plain, bound, _ = measured_copy(details if type(details) is dict else dict(details),
                                              MAX_OUTPUT_DEPTH + 1, budget * EXACT_SIZE_FACTOR)
    except OverBudget:
        plain, copy, bound = True, None, None
    else:
        if plain and (bound is None or bound > budget):
            size = json_size(copy)
            if size is None:
                plain = False
            elif size > budget:
                copy = None
    if not plain:
        logger.warning("dropping non-JSON details of a ToolFailure %r", code)
        return {}
    if copy is None:
        logger.warning("dropping the details of a ToolFailure %r: over the tool's output budget", code)
        return {}
    return copy


def _mask_strings(value: Any, secrets_in_call: Collection[str]) -> Any:
    """`value` (plain JSON) with each secret masked inside every string, keys included, and every number
    whose JSON text shows a secret replaced whole (a PIN the handler copied into a detail as a number)."""
    if not secrets_in_call:
        return value
    from ..redaction import REDACTED, redact_text

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


# -- step 8: record ------------------------------------------------------------------------------


def record(state: CallState, result: ToolResult) -> ToolResult:
    """Settle the receipt, stamp the duration and write the audit record. Never raises."""
    try:
        if state.hold is not None:
            settle_receipt(state, result)
    except BaseException as exception:  # noqa: BLE001
        raise_stop_request(exception, in_user_code=False)
        logger.warning("could not record the receipt of a call of %r: %s", state.tool, type_name(exception))
        state.services.holder.give_up(state.hold, "could not build its receipt")
    # The result was built for this call and nobody else holds it yet: stamp it in place
    # (dataclasses.replace would copy every field on the hot path).
    result.__dict__["duration_ms"] = (duration_clock() - state.started) * 1000.0
    if state.services.audit is not None:
        _write_audit(state, result)
    return result


def _write_audit(state: CallState, result: ToolResult) -> None:
    audit = state.services.audit
    if audit is None:
        return
    try:
        audit.write(audit_record(state, result))
    except BaseException as exception:  # noqa: BLE001 - an audit failure must not break the call
        raise_stop_request(exception, in_user_code=False)
        logger.warning("audit sink failed to write a record for %r: %s", state.tool, type_name(exception))


def audit_record(state: CallState, result: ToolResult) -> dict[str, Any]:
    """The call's audit record. It holds no argument or output values, so there is nothing in it for
    `spec.redact` to mask (masking by field name would only blank its own `tenant` or `tool`)."""
    actor = state.actor if isinstance(state.actor, Actor) else None
    return build_audit_record(
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


# -- containment ---------------------------------------------------------------------------------


def internal_error(state: CallState) -> ToolResult:
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


def stop_if_requested(state: CallState, exception: BaseException) -> None:
    """Let the caller's stop request through invoke (a real Ctrl-C: see `agent_lab.interrupts`),
    after letting go of the key; return for anything else, which the caller contains. Raised in the
    registry's own steps, a KeyboardInterrupt or SystemExit on the main thread is the caller's
    (code declared on the tool contains its own where it calls it)."""
    stop = stop_request(exception, in_user_code=False)
    if stop is not None:
        state.services.holder.let_go(state.hold)  # the process is stopping; the store's lease still guards the key
        raise stop
