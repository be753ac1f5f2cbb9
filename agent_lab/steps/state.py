"""One call's state as it goes through the steps, and how a call starts.

`start` collects what `invoke` was given into a `CallState`; every step reads it and writes what it
learns (the tool, the arguments' plain copy, the fingerprint, the held key...), and the record step
turns it into the audit record. A step that stops the call returns a `ToolResult` made here
(`CallState.refusal`), with the code's defaults from the one catalogue.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..calls import ToolCall, ToolResult
from ..errors import CATALOGUE, NextAction, Outcome, ToolError
from ..execution import plain_json_copy
from ..fingerprint import Fingerprinter, NotCanonicalJSON
from ..interrupts import raise_stop_request
from ..schema import MAX_INSTANCE_DEPTH

if TYPE_CHECKING:  # pragma: no cover
    from ..execution import Handler, Run
    from ..leases import Hold, ReceiptNote
    from ..policy import Approval
    from ..spec import ToolSpec
    from ..stores import ReceiptKey
    from .plan import Plan
    from .services import Services

__all__ = ["MAX_ARGUMENT_COPY_DEPTH", "CallState", "attempt_number", "duration_clock", "hook_arguments", "resolving",
           "start"]

MAX_ARGUMENT_COPY_DEPTH = MAX_INSTANCE_DEPTH + 1
"""The arguments are copied this deep: one level more than the schema step accepts, so every value
that passes it is a plain copy, and deeper (or cyclic) values are left for it to refuse."""


class CallState:
    """Everything one invoke has learned so far. Internal and mutable; one per call.

    After the execute step, only the caller's thread writes it; a late-completion callback only reads
    the fields fixed before execution (spec, tool, call_id, fingerprint, receipt_key, hold, redact)
    and sets receipt_note. A class with `__slots__`, every field set by `start`: each field has a fixed
    place, so reading one is a slot read, whatever path the call takes. (With class-level defaults and
    an instance dict, CPython 3.11 keeps at most 30 attribute names in a class's shared key table, and
    a call state has more: which calls came first in the process decided which later calls fell back to
    a dict of their own, and a refusal then ran 7% slower after a process had served reads on the pool.)
    """

    __slots__ = (
        "services", "call", "actor", "call_id", "tool", "started", "started_monotonic", "approval", "deadline",
        "named", "arguments", "sized", "exact", "plan", "spec", "handler", "fingerprint", "step", "call_deadline",
        "receipt_key", "hold", "late_pending", "task", "task_unknown", "finished_late", "receipt_result",
        "receipt_note", "approval_used", "interrupted_run", "attempt", "redact",
    )

    # Set by `start` from the call: services, call, actor, call_id, tool, started, started_monotonic.
    services: Services
    call: Any
    actor: Any
    call_id: str
    tool: str
    started: float  # on the duration clock (`duration_clock`)
    started_monotonic: float
    approval: Any  # as the caller passed it (None: none)
    deadline: Any  # as the caller passed it (None: the tool's timeout only)
    named: bool  # the call's name is text (see `start`)
    # Set by `start` to their "not yet" values; a call sets only what it learns.
    arguments: Any  # a plain copy of the call's arguments, taken once by the schema step
    sized: bool  # the arguments are within the tool's input budget (they may be fingerprinted)
    exact: bool  # ... and exact JSON types without a float: the encoder writes them canonically as they are
    plan: Optional[Plan]  # the tool's steps (`agent_lab.steps.plan`), found by the route step
    spec: Optional[ToolSpec]
    handler: Optional[Handler]
    fingerprint: Optional[str]  # made when a step or the audit record needs it (`fingerprinted`)
    step: str  # the step the call is at (for the audit record)
    call_deadline: Optional[float]  # min(caller's deadline, start + timeout_ms), fixed by route
    receipt_key: Optional[ReceiptKey]
    hold: Optional[Hold]  # this call holds an idempotency reservation (its owner token is in it)
    late_pending: bool  # a late handler will complete the reservation itself
    task: Optional[str]  # the run of an accepted task (its id): `hold` is its entry, completed with its record
    task_unknown: bool  # that task ended with its outcome unknown
    finished_late: bool  # the handler and the check of what it handed back ended past the deadline
    receipt_result: Optional[ToolResult]  # the key's receipt, when it is not the call's result (overran)
    receipt_note: Optional[ReceiptNote]  # what became of the receipt, for the audit record
    approval_used: Optional[Approval]
    interrupted_run: Optional[Run]  # what the pool job had done when an ainvoke caller was cancelled
    attempt: Optional[int]  # the attempt number a retry runner gave (agent_lab.retry), for the audit
    redact: frozenset

    def result(self, *, ok: bool, outcome: Outcome, output: Any = None,
               error: Optional[ToolError] = None) -> ToolResult:
        return _new_result(ok, outcome, self.tool, output, error, self.call_id, self.fingerprint, self.redact)

    def refusal(
        self,
        code: str,
        message: Optional[str] = None,
        details: Optional[Mapping[str, Any]] = None,
        *,
        outcome: Optional[Outcome] = None,
        retryable: Optional[bool] = None,
        next_action: Optional[NextAction] = None,
    ) -> ToolResult:
        """An error result for a catalogue code; the catalogue gives whatever is not said here."""
        error = _error_from_code(code, message, retryable, next_action, details)  # by position: cheaper
        return _new_result(False, CATALOGUE[code].outcome if outcome is None else outcome, self.tool, None, error,
                           self.call_id, self.fingerprint, self.redact)

    def fingerprinted(self) -> Optional[str]:
        """The call's fingerprint, made on first need: by the approval step (an approval binds to it),
        the idempotency step (receipts are matched by it) or the audit record (it correlates a call
        with its approval and receipt). A read with none of those never pays for it. None while the
        arguments have not passed the size check, or have no canonical JSON form."""
        if self.fingerprint is None and self.sized and self.spec is not None:
            fingerprints = self.services.fingerprints
            try:
                if self.exact:
                    self.fingerprint = fingerprints.fingerprint_exact(self.spec.name, self.arguments)
                else:
                    self.fingerprint = fingerprints.fingerprint(self.spec.name, self.arguments)
            except NotCanonicalJSON:
                return None
        return self.fingerprint

    def fingerprint_as(self, stored: str) -> Optional[str]:
        """The call's fingerprint in the scheme `stored` (a receipt's or an approval's) names: its own
        when the schemes agree, else made with that scheme's fingerprinter under the same key, so a
        receipt or an approval made before a scheme changed still matches its call. None when the
        call has none, or `stored` names no keyed scheme."""
        own = self.fingerprinted()
        if own is None or stored.startswith(self.services.fingerprints.scheme):
            return own
        other = Fingerprinter.for_scheme(stored, self.services.fingerprint_key)
        if other is None or self.spec is None:
            return None
        try:
            return other.fingerprint(self.spec.name, self.arguments)
        except NotCanonicalJSON:
            return None


_monotonic = time.monotonic
_perf_counter = time.perf_counter
_new_result = ToolResult._fast
_error_from_code = ToolError.from_code
_new_state = object.__new__
_NOTHING_REDACTED: frozenset = frozenset()

duration_clock = time.monotonic if (time.get_clock_info("monotonic").implementation
                                    == time.get_clock_info("perf_counter").implementation) else time.perf_counter
"""The clock a call's `duration_ms` is read on: `time.perf_counter`, which on Linux and macOS is the very
clock `time.monotonic` reads, so one reading at the start serves both the deadline and the duration."""
_ONE_CLOCK = duration_clock is _monotonic


def start(services: Services, call: Any, actor: Any, approval: Any, deadline: Any) -> CallState:
    """Collect the inputs; nothing here can fail, whatever a model proposed. A `call` that is not a
    ToolCall (a dict, say) is a TypeError: the developer's mistake, not arguments a model could fix.
    (The state is made with `object.__new__` and its fields set one by one: a third of what an
    `__init__` with keyword arguments costs, on every call.)"""
    call_id: Any
    name: Any
    if type(call) is ToolCall:
        call_id, name = call.call_id, call.name
    else:
        call_id, name = _subclass_fields(call)
    state: CallState = _new_state(CallState)
    state.services = services
    state.call = call
    state.actor = actor
    state.approval = approval
    state.deadline = deadline
    state.named = True
    state.arguments = None
    state.sized = state.exact = False
    state.plan = state.spec = state.handler = state.fingerprint = state.call_deadline = None
    state.step = "route"
    state.receipt_key = state.hold = state.task = state.receipt_result = state.receipt_note = None
    state.late_pending = state.task_unknown = state.finished_late = False
    state.approval_used = state.interrupted_run = state.attempt = None
    state.redact = _NOTHING_REDACTED
    # Plain text only, read without running code of a subclass (its __class__, __bool__, __eq__): a str
    # subclass could hash or compare like another tool's name.
    if type(call_id) is not str or not call_id:
        if issubclass(type(call_id), str) and str.__len__(call_id):
            call_id = str.__str__(call_id)
        else:
            ids = services.call_ids
            call_id = ids.prefix + str(next(ids.numbers))
    state.call_id = call_id
    if type(name) is str:
        state.tool = name
    elif issubclass(type(name), str):
        state.tool = str.__str__(name)
    else:
        state.tool = ""
        state.named = False  # the route step refuses the call
    now = _monotonic()
    state.started_monotonic = now
    state.started = now if _ONE_CLOCK else _perf_counter()
    return state


def resolving(services: Services, spec: ToolSpec) -> CallState:
    """The state under which `Registry.resolve_unknown` checks an output it is given, as a handler's."""
    state = start(services, ToolCall(spec.name, None, "resolved"), None, None, None)
    state.spec = spec
    state.redact = frozenset(spec.redact)
    return state


def _subclass_fields(call: Any) -> tuple[Any, Any]:
    """(call_id, name) of a call that is not exactly a ToolCall: a TypeError for one that is no ToolCall
    at all (the developer's mistake), and (None, None) when a subclass's field raises (its fields may be
    properties): a call without an id or a name, which the route step refuses."""
    if not issubclass(type(call), ToolCall):  # (type(): not a __class__ of its own)
        raise TypeError(f"invoke takes a ToolCall, not {type(call).__name__}: build one with "
                        "ToolCall(name, arguments) or a parser from agent_lab.adapters")
    try:
        return call.call_id, call.name
    except BaseException as exception:  # noqa: BLE001
        raise_stop_request(exception)  # only the caller's own Ctrl-C passes
        return None, None


def attempt_number(value: Any) -> Optional[int]:
    """A retry runner's attempt number as a plain int, or None for anything else (invoke never raises)."""
    kind = type(value)  # (not isinstance, nor a comparison: an int subclass's own code never runs here)
    if kind is int or issubclass(kind, int) and not issubclass(kind, bool):
        number = int.__index__(value)
        return number if number >= 1 else None
    return None


def hook_arguments(state: CallState) -> Any:
    """The arguments for a policy hook (resource guard, approval condition): a copy of their own. A hook
    that changed the ones the handler gets would run a call other than the one that was checked and
    approved (the fingerprint an approval binds to may be made before the hooks, for the audit record)."""
    return plain_json_copy(state.arguments, MAX_ARGUMENT_COPY_DEPTH)
