"""Step 3, approval: a person's approval bound to this exact call, and spending a single-use one.

An approval must be for this tool, these exact arguments (their fingerprint) and this actor (its id
and tenant). It is checked after the permission step and grants none: an actor the tool is hidden
from never gets here, whatever approval it carries. A single-use approval is spent last, after the
key is reserved (`spend_approval`), so a call refused before, or answered from its key, leaves it unspent.
"""

from __future__ import annotations

import json
import logging
import math
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..execution import PROCESS_EXITS, seconds_left, type_name
from ..interrupts import raise_stop_request
from ..policy import Approval, is_wall_clock_time
from ..redaction import REDACTED
from ..stores import ReceiptStoreUnavailable
from .deadline import passed
from .state import hook_arguments

if TYPE_CHECKING:  # pragma: no cover
    from ..calls import ToolResult
    from ..spec import ToolSpec
    from .state import CallState

__all__ = ["SUMMARY_MAX_CHARS", "SUMMARY_VALUE_CHARS", "call_summary", "check_approval", "check_approval_condition",
           "spend_approval"]

logger = logging.getLogger("agent_lab.registry")

SUMMARY_VALUE_CHARS = 40
"""In an approval summary, a longer argument value is cut to this many characters and an ellipsis."""

SUMMARY_MAX_CHARS = 300
"""An approval summary longer than this is cut (it is one readable line, not the full call)."""


def check_approval(state: CallState) -> Optional[ToolResult]:
    """The call carries a valid approval of exactly itself (`approval="always"`)."""
    state.step = "approval"
    return _approved(state)


def check_approval_condition(state: CallState) -> Optional[ToolResult]:
    """The call carries a valid approval of exactly itself if the tool's condition says this call
    needs one (`approval="conditional"`). The condition is application code on the caller's thread:
    like the resource guard, it does not start once the call's deadline has passed."""
    state.step = "approval"
    spec = state.spec
    assert spec is not None
    if passed(state.call_deadline):  # as for the guard
        return state.refusal("deadline_exceeded")
    try:
        needed = spec.needs_approval(hook_arguments(state))
    except BaseException as exception:  # noqa: BLE001 - sys.exit and GeneratorExit too
        raise_stop_request(exception)  # only the caller's own Ctrl-C passes
        logger.warning("approval condition of tool %r raised %s", spec.name, type_name(exception))
        return state.refusal("internal_error")
    return _approved(state) if needed else None


def _approved(state: CallState) -> Optional[ToolResult]:
    """None when the call's approval is for this tool, these arguments and this actor, and unexpired."""
    approval = state.approval
    state.fingerprinted()  # the approval binds to it, and a refusal shows it
    if approval is None:
        return state.refusal("approval_required", details=approval_request(state))
    approval = _checked_approval(approval)
    if approval is None or not _approval_matches(approval, state):
        return state.refusal("approval_mismatch", None, approval_request(state))  # (by position: cheaper)
    now = state.services.clock()
    if not is_wall_clock_time(now):  # NaN would compare as "not yet expired" for ever: fail closed
        logger.warning("the registry's clock returned %s, not a finite number; refusing approved calls",
                       type(now).__name__)
        return state.refusal("internal_error", "The registry's clock is not usable, so the approval cannot "
                             "be checked; the tool did not run.")
    if Approval.expired(approval, now):  # the class's own check, on the checked fields
        return state.refusal("approval_expired", details=approval_request(state))
    state.approval_used = approval
    return None


def spend_approval(state: CallState) -> Optional[ToolResult]:
    """Spend a single-use approval (`ToolSpec.single_use_approval`) in the receipt store, which
    every registry sharing it consults: its first use goes on, any later one is `approval_used`.

    Spent last, after the key is reserved: a call refused before, or answered from its key (a
    replay, `idempotency_in_progress`), leaves the approval unspent. A refusal from here on
    releases the key; the approval stays spent (a person approves again: fail closed).
    """
    state.step = "idempotency"
    spec = state.spec
    approval = state.approval_used
    if approval is None or spec is None or not spec.single_use_approval:
        return None  # the condition found no approval needed for this call
    timeout_s = seconds_left(state.call_deadline)
    if timeout_s == 0:
        return state.refusal("deadline_exceeded")
    services = state.services
    try:
        first_use = services.receipts.consume_approval(  # present: register checked it
            approval.tenant, approval.approval_id, expires_at=approval.expires_at,
            now=services.clock(),  # the clock that checks expiry: the ledger keeps the use that long by its own
            timeout_s=timeout_s)
    except PROCESS_EXITS:
        raise
    except (ReceiptStoreUnavailable, OSError) as exception:
        logger.warning("receipt store could not spend an approval for %r: %s", spec.name, type(exception).__name__)
        return state.refusal("receipt_store_unavailable",
                             "The approval ledger did not answer in time; the tool did not run.")
    if first_use is None:  # the store could not remember the use for as long as this clock takes it for valid
        logger.warning("the registry's clock lags the receipt store's by more than its ttl_s; refusing a "
                       "single-use approval of %r", spec.name)
        return state.refusal("internal_error", "The registry's clock lags the receipt store's too far for a "
                             "single-use approval to be spent safely; the tool did not run.")
    if first_use is not True:
        return state.refusal("approval_used", details=approval_request(state))
    if passed(state.call_deadline):  # the ledger answered too late for the handler to start
        return state.refusal("deadline_exceeded")
    return None


def approval_request(state: CallState) -> dict[str, Any]:
    """What a person needs to approve exactly this call: the tool, its fingerprint and a summary."""
    spec = state.spec
    assert spec is not None
    return {"tool": spec.name, "fingerprint": state.fingerprint, "summary": call_summary(spec, state.arguments)}


_APPROVAL_TEXT_FIELDS = ("approval_id", "tool", "fingerprint", "tenant", "actor_id", "approver")
_isfinite = math.isfinite


def _checked_approval(approval: Any) -> Optional[Approval]:
    """`approval` as a plain Approval whose fields are checked now, or None (answered approval_mismatch).

    `Approval` checks its fields when it is built, but a frozen dataclass can be changed afterwards
    (`object.__setattr__`, an unpickled and edited state) and a subclass can answer for a field with a
    property: a fingerprint or tenant that equals everything, or an expiry of NaN or infinity (never
    expired), must not get through at the moment it counts. An unchanged Approval is used as it is;
    anything else is rebuilt from its fields, read once, through the constructor's checks."""
    if not isinstance(approval, Approval):
        return None
    if type(approval) is Approval:
        fields = approval.__dict__
        try:  # the fields as the instance holds them (written out: no loop, no call per field)
            approval_id, tool, fingerprint, tenant = fields["approval_id"], fields["tool"], fields["fingerprint"], \
                fields["tenant"]
            actor_id, approver, expires_at = fields["actor_id"], fields["approver"], fields["expires_at"]
        except KeyError:  # one taken off the instance: rebuilt below, from what the class answers
            pass
        else:  # every text an exact, non-empty str (`_APPROVAL_TEXT_FIELDS`), the expiry a finite float
            if (type(approval_id) is type(tool) is type(fingerprint) is type(tenant) is type(actor_id)
                    is type(approver) is str and approval_id and tool and fingerprint and tenant and actor_id
                    and approver and type(expires_at) is float and _isfinite(expires_at)):
                return approval
    try:
        return Approval(**{name: getattr(approval, name) for name in (*_APPROVAL_TEXT_FIELDS, "expires_at")})
    except PROCESS_EXITS:
        raise
    except BaseException:  # noqa: BLE001 - a field that is not text, an expiry that is not a finite time
        return None


def _approval_matches(approval: Approval, state: CallState) -> bool:
    """The approval is for this tool, these arguments and this actor: its id and its tenant (an
    approval a person gave one agent is no approval for another agent of the same organisation).
    The arguments are compared in the scheme the approval's fingerprint names (one made before the
    registry's scheme changed still matches its call; see `agent_lab.fingerprint`)."""
    fingerprint = approval.fingerprint
    return (
        approval.tool == state.tool
        and (fingerprint == state.fingerprint  # (another scheme's is compared in that scheme)
             or not fingerprint.startswith(state.services.fingerprints.scheme)
             and fingerprint == state.fingerprint_as(fingerprint))
        and approval.tenant == state.actor.tenant
        and approval.actor_id == state.actor.id
    )


def call_summary(spec: ToolSpec, arguments: Mapping[str, Any]) -> str:
    """One readable line of what a call would do, for a person approving it.

    `record_ticket_followup(ticket_id='T-1001', note='Customer asked for a ca…')`: strings quoted,
    long values cut, redacted fields shown as [redacted], nested values as compact JSON.
    """
    shown = arguments
    if spec.redact:
        from ..redaction import redact

        shown = redact(arguments, spec.redact)
    parts: list[str] = []
    append = parts.append
    for name, value in shown.items():
        if type(value) is str and len(value) <= SUMMARY_VALUE_CHARS and value != REDACTED:
            append(f"{name}={value!r}")  # the common value, without a call per argument
        else:
            append(f"{name}={_summary_value(value)}")
    line = f"{spec.name}({', '.join(parts)})"
    if len(line) > SUMMARY_MAX_CHARS:
        line = line[: SUMMARY_MAX_CHARS - 2] + "…)"
    return line


def _summary_value(value: Any) -> str:
    if isinstance(value, str) and value == REDACTED:
        return REDACTED
    if isinstance(value, str):
        text = value if len(value) <= SUMMARY_VALUE_CHARS else value[:SUMMARY_VALUE_CHARS] + "…"
        return repr(text)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return text if len(text) <= SUMMARY_VALUE_CHARS else text[:SUMMARY_VALUE_CHARS] + "…"
