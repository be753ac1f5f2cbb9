"""Steps 0-2, admission: route (which tool), schema (these arguments) and permission (this actor).

Two decisions worth knowing:

* A tool the actor lacks the permission for is invisible: the route step answers `tool_not_found`
  for it exactly as for a name that is not registered, so the model never learns that it exists.
* A resource guard that answers False makes the resource invisible: `not_found`, outcome rejected,
  the same answer as for a resource that does not exist, so another tenant's data never leaks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from ..calls import InvalidJSONArguments
from ..errors import Outcome
from ..execution import OverBudget, measured_copy, type_name
from ..fingerprint import NotCanonicalJSON
from ..interrupts import raise_stop_request
from ..policy import Actor
from .deadline import call_deadline, passed
from .details import (
    EXACT_SIZE_FACTOR,
    MAX_REPORTED_VIOLATIONS,
    json_size,
    non_json_violation,
    sentence,
    violation_details,
    violation_dicts,
    violation_report,
)
from .state import MAX_ARGUMENT_COPY_DEPTH, hook_arguments

if TYPE_CHECKING:  # pragma: no cover
    from ..calls import ToolResult
    from ..names import NameIndex
    from .state import CallState

__all__ = ["MAX_CLOSE_NAMES", "Catalog", "check_contract", "check_permission", "check_resource_guard", "check_schema", "malformed_call",
           "route"]

logger = logging.getLogger("agent_lab.registry")

MAX_CLOSE_NAMES = 3
"""How many near-miss tool names `tool_not_found` suggests."""


class Catalog:
    """What the route step reads, as one snapshot: each tool's plan by name (`agent_lab.steps.plan`),
    the permissions the tools require (it covers every tool of the snapshot) and the index of every
    name ever registered."""

    __slots__ = ("tools", "permissions", "names")

    def __init__(self, tools: Mapping[str, Any], permissions: frozenset, names: NameIndex) -> None:
        self.tools = tools
        self.permissions = permissions
        self.names = names


def route(state: CallState, catalog: Catalog) -> Optional[ToolResult]:
    """Find the tool. A malformed call is invalid_arguments; an unknown name is tool_not_found.

    A tool the actor lacks the permission for is not in its catalog, and answers exactly like a
    tool that does not exist (same code, message, close names, outcome and audit step), before its
    schema is looked at: neither a `permission_denied` nor an `invalid_arguments` naming the tool's
    fields may tell the model that it exists. (An `actor` that is not an Actor at all is the
    application's mistake, not the model's: the permission step refuses it.)
    """
    if state.services.closed:
        return state.refusal("internal_error", "The tool registry is closed; the tool did not run.")
    if not state.named:
        return malformed_call(state, "The tool name must be a string.")
    plan = catalog.tools.get(state.tool)
    if plan is None:
        return _not_found(state, catalog)
    permission = plan.permission
    if permission is not None:
        actor = state.actor
        # `Actor.may`, read directly for an exact Actor (its permissions are a frozenset); what is not
        # an Actor at all is the permission step's to refuse.
        if permission not in actor.permissions if type(actor) is Actor else (
                isinstance(actor, Actor) and not actor.may(permission)):
            return _not_found(state, catalog)
    state.plan = plan
    state.spec = plan.spec
    state.handler = plan.handler
    if plan.redact:
        state.redact = plan.redact
    # The call's one deadline: the tool's timeout from the start of invoke, or the caller's if earlier.
    state.call_deadline = state.started_monotonic + plan.timeout_s if state.deadline is None else \
        call_deadline(state, plan.spec)
    return None


def _not_found(state: CallState, catalog: Catalog) -> ToolResult:
    """`tool_not_found`, with the close names this actor may see."""
    return state.refusal("tool_not_found", details={"close_names": _close_names(catalog, state)})


def _close_names(catalog: Catalog, state: CallState) -> list[str]:
    """Near-miss names among the tools this actor may call (like `catalog(actor)`: the others stay unseen),
    from this call's snapshot of the tools; found through the name index (agent_lab/names.py).

    The snapshot's permissions cover every tool in it (see `Registry.register`): an actor that holds
    them all may call every tool in it, so the index asks only whether a name is in the snapshot."""
    actor = state.actor
    if not isinstance(actor, Actor):
        return []
    tools = catalog.tools
    if all(actor.may(permission) for permission in catalog.permissions):
        return catalog.names.close_names(state.tool, tools.__contains__, n=MAX_CLOSE_NAMES)

    def may_call(name: str) -> bool:
        plan = tools.get(name)
        return plan is not None and actor.may(plan.spec.required_permission)

    return catalog.names.close_names(state.tool, may_call, n=MAX_CLOSE_NAMES)


def check_contract(state: CallState) -> Optional[ToolResult]:
    """A tool whose definition is not the one a person reviewed (an imported tool that drifted from the
    contract lockfile, or that it does not hold: `Provenance.refusal`) answers `tool_contract_changed`,
    first of all: before its arguments are checked against a schema nobody reviewed, and before a person
    is asked to approve a call of it (an approval would be asked for a tool that will never run). Only
    in the plans of such tools; it stays the route step's answer (the tool found is not one to run)."""
    spec = state.spec
    assert spec is not None and spec.provenance is not None and spec.provenance.refusal is not None
    error = spec.provenance.refusal
    return state.refusal(error.code, error.message, details=error.details, next_action=error.next_action)


def check_schema(state: CallState) -> Optional[ToolResult]:
    """Arguments against the input schema: the first violations (capped), each with its JSON Pointers.

    One walk copies the arguments (see `plain_json_copy`) and bounds their size. The size comes
    first: arguments over the tool's `max_input_bytes` (compact UTF-8 JSON) are refused before any
    fingerprint or validation work. The walk gives up once it has read more than
    `EXACT_SIZE_FACTOR` times the budget (a byte a node and a character at least), so a call's
    cost is bounded by the budget, not by the value: such a refusal says `input_bytes_at_least`.
    Arguments the walk read to the end but could not prove within budget are measured exactly by
    the C encoder (`input_bytes`). Then
    `is_valid`; only a call that fails it pays for `errors`, which stops once it has one violation
    more than it reports (`violations_truncated` then says there may be more), so invalid input
    costs no more than valid input; and the patterns it runs are ones a model cannot make slow
    (`regex_safety`). Arguments the validator accepts must also have a canonical JSON form (the
    one the fingerprint hashes): the walk proves that for ordinary values; others (a 5,000-digit
    integer, say) are checked by building it. The fingerprint itself is made only when a step or
    the audit record needs it (`CallState.fingerprinted`)."""
    state.step = "schema"
    spec = state.spec
    assert spec is not None
    raw = state.call.arguments
    if type(raw) is not dict and issubclass(type(raw), InvalidJSONArguments):  # text a host could not read
        return malformed_call(state, sentence(raw.reason))  # each reason says what it is
    # From here on every step, and the handler, sees this one copy (see plain_json_copy). The walk
    # stops as soon as the copy is certainly over budget, so refusing a huge value costs the budget.
    budget = spec.max_input_bytes
    try:
        arguments, plain, bound, floats = measured_copy(raw, MAX_ARGUMENT_COPY_DEPTH, budget * EXACT_SIZE_FACTOR)
    except OverBudget:
        return state.refusal("input_too_large", details={
            "max_input_bytes": budget, "input_bytes_at_least": budget * EXACT_SIZE_FACTOR + 1})
    state.arguments = arguments
    if not plain or bound is None or bound > budget:
        size = json_size(arguments)
        if size is not None and size > budget:
            return state.refusal("input_too_large", details={"max_input_bytes": budget, "input_bytes": size})
    state.sized = True
    checked = plain and bound is not None
    if checked and not floats:  # written canonically by the JSON encoder as it is: no second walk to fingerprint
        state.exact = True
    if state.services.audit is not None:  # every audit record of a call with readable arguments carries it
        state.fingerprinted()
    if checked and spec.input_validator.is_valid(arguments):
        return None  # valid, and canonical by construction (see measured_json_copy)
    # When is_valid has just said no, errors does not check the whole value again first; nor when the
    # copy is not JSON, which no schema accepts (and whose objects the validator's checks must not ask
    # for their type: the walk reports the first one, read with type()).
    found = spec.input_validator.errors(arguments, limit=MAX_REPORTED_VIOLATIONS + 1,
                                        known_invalid=checked or not plain)
    violations = violation_dicts(found)
    if not violations:  # JSON the validator accepts, e.g. a 5,000-digit integer: is it canonical?
        try:
            state.fingerprint = state.services.fingerprints.fingerprint(spec.name, arguments)
        except NotCanonicalJSON as problem:
            violations = [non_json_violation(problem.pointer, problem.reason)]
    if not violations:
        return None
    message, details = violation_report(violations, state.redact)
    return state.refusal("invalid_arguments", message, details=details)


def check_permission(state: CallState) -> Optional[ToolResult]:
    """The actor holds the tool's scope. The actor comes from the application, never from the
    arguments: an argument named `actor` or `tenant` is just data to the registry. (An Actor without
    the tool's scope never gets here: to it the tool does not exist, see `route`; so this refuses
    what is not an Actor at all, the application's mistake.)"""
    actor = state.actor
    if type(actor) is Actor:  # the route step has read its scopes: without the tool's, it never gets here
        return None
    state.step = "permission"
    if not isinstance(actor, Actor) or not actor.may(state.spec.required_permission):  # type: ignore[union-attr]
        return state.refusal("permission_denied")
    return None


def check_resource_guard(state: CallState) -> Optional[ToolResult]:
    """The tool's resource guard lets this actor touch the resource these arguments name; if not, the
    resource is invisible (`not_found`, as for one that does not exist: never leak existence).

    The guard is application code on the caller's thread, which nothing can interrupt: it does
    not start once the call's deadline has passed (`deadline_exceeded`), so hooks never stack up
    past it; one that returns late is refused by the deadline step. (Handing it to the worker
    pool would bound the wait, at a thread hand-off on every guarded call: see the README.)"""
    state.step = "permission"
    spec = state.spec
    assert spec is not None and spec.resource_guard is not None
    if passed(state.call_deadline):  # no application hook starts once the call's time is up
        return state.refusal("deadline_exceeded")
    guard: Callable[..., Any] = spec.resource_guard
    try:
        visible = guard(hook_arguments(state), state.actor) is True
    except BaseException as exception:  # noqa: BLE001 - sys.exit and GeneratorExit too
        raise_stop_request(exception)  # only the caller's own Ctrl-C passes
        logger.warning("resource guard of tool %r raised %s", spec.name, type_name(exception))
        return state.refusal("internal_error")
    if not visible:
        # Invisible: answered exactly like a resource that does not exist (never leak existence).
        return state.refusal("not_found", outcome=Outcome.REJECTED)
    return None


def malformed_call(state: CallState, message: str) -> ToolResult:
    violation = {"instance_path": "", "keyword_path": "", "keyword": "call", "message": message}
    return state.refusal("invalid_arguments", message, details=violation_details([violation]))
