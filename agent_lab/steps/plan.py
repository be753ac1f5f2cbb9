"""Each tool's plan: the steps its contract needs, composed once, when the tool is registered.

What a tool's contract needs is known at `register`, and so is where its handler runs; `invoke` decides
none of it again on every call (as a schema is compiled once into a validator, STYLE.md 16). A plan
keeps DESIGN.md's fixed order and leaves out only steps that could not do anything for the tool:

    step          in every plan               only when the contract says so
    route                                     check_contract         (a drifted or unlocked imported tool)
    schema        check_schema
    permission    check_permission            check_resource_guard   (a resource_guard)
    approval                                  check_approval         (approval="always")
                                              check_approval_condition (approval="conditional")
    deadline      check_deadline
    idempotency                               reserve_key            (an idempotency_key)
                                              spend_approval         (single_use_approval)
    execute       one of: execute_inline (execution="inline", or Registry(run_inline=True)),
                  execute_on_pool (a sync handler), execute_on_loop_thread (an async handler);
                  under `ainvoke`: aexecute_inline, aexecute_on_pool, aexecute_awaited;
                  or, for a tool with task_support (asked for as a task, or always when "required"),
                  accept_task (`agent_lab.steps.task`): the call answers `accepted` and runs the
                  above in the background
    output, record: every call (`agent_lab.steps.conclude`)

Route comes before any plan (it finds the plan) and output and record after every one. A plain read has
no approval, reservation or spending step; an inline tool has no hand-off. Policy is never decided by
the effect: a read whose spec says `approval="always"` has the approval step like any write, and a
write with no idempotency key has no reservation (lint's AL401 says so; the runtime runs what the
contract declares). The plan is built from the registry's own snapshot of the spec (`Registry.register`
keeps a copy), so the steps a call runs and the spec they read always agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from ..spec import ApprovalPolicy, Execution, TaskSupport
from .admit import check_contract, check_permission, check_resource_guard, check_schema
from .approval import check_approval, check_approval_condition, spend_approval
from .deadline import check_deadline
from .idempotency import reserve_key
from .run import (
    aexecute_awaited,
    aexecute_inline,
    aexecute_on_pool,
    execute_inline,
    execute_on_loop_thread,
    execute_on_pool,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..calls import ToolResult
    from ..execution import Handler, Run
    from ..spec import ToolSpec
    from .state import CallState

__all__ = ["Plan", "plan_for"]

Step = Callable[["CallState"], Optional["ToolResult"]]
"""A pre-run step: None to go on, or the `ToolResult` that ends the call."""


class Plan:
    """One tool's compiled plan. `admit` holds its pre-run steps in order (the first that answers ends
    the call); `execute` runs its handler under `invoke`, `aexecute` under `ainvoke`."""

    __slots__ = ("spec", "handler", "admit", "execute", "aexecute", "redact", "timeout_s", "permission", "writes",
                 "tasks")

    def __init__(self, spec: ToolSpec, handler: Handler, admit: tuple[Step, ...], execute: Callable[[CallState], Run],
                 aexecute: Callable[[CallState], Awaitable[Run]]) -> None:
        self.spec = spec
        self.handler = handler
        self.admit = admit
        self.execute = execute
        self.aexecute = aexecute
        self.redact = frozenset(spec.redact)  # what every result of this tool masks
        self.timeout_s = spec.timeout_ms / 1000.0
        self.permission = spec.required_permission  # what the route step asks of the actor
        self.writes = spec.writes  # the key lapses to unknown, a late run completes its receipt
        # None: never a task; False: a task when the caller asks (as_task=True); True: always a task
        self.tasks = None if spec.task_support is TaskSupport.FORBIDDEN else spec.task_support is TaskSupport.REQUIRED

    def __repr__(self) -> str:
        steps = ", ".join(step.__name__ for step in (*self.admit, self.execute))
        return f"Plan({self.spec.name!r}: {steps})"


def plan_for(spec: ToolSpec, handler: Handler, *, run_inline: bool) -> Plan:
    """The plan of a tool with this spec and (wrapped) handler, in a registry that runs every sync
    handler inline when `run_inline` is set."""
    return Plan(spec, handler, admit_steps(spec), _execute_step(spec, handler, run_inline),
                _aexecute_step(spec, handler))


def admit_steps(spec: ToolSpec) -> tuple[Step, ...]:
    """The pre-run steps `spec`'s contract needs, in the fixed order."""
    if spec.provenance is not None and spec.provenance.refusal is not None:
        return (check_contract,)  # it never runs: no other step could do anything for it
    steps: list[Any] = [check_schema, check_permission]
    if spec.resource_guard is not None:
        steps.append(check_resource_guard)
    if spec.approval is ApprovalPolicy.ALWAYS:
        steps.append(check_approval)
    elif spec.approval is ApprovalPolicy.CONDITIONAL:
        steps.append(check_approval_condition)
    steps.append(check_deadline)
    if spec.idempotency_key is not None:
        steps.append(reserve_key)
    if spec.single_use_approval:  # a spec refuses it without an approval policy
        steps.append(spend_approval)
    return tuple(steps)


def _execute_step(spec: ToolSpec, handler: Handler, run_inline: bool) -> Callable[[CallState], Run]:
    if handler.is_async:
        return execute_on_loop_thread
    if run_inline or spec.execution is Execution.INLINE:
        return execute_inline
    return execute_on_pool


def _aexecute_step(spec: ToolSpec, handler: Handler) -> Callable[[CallState], Awaitable[Run]]:
    if handler.is_async:
        return aexecute_awaited
    if spec.execution is Execution.INLINE:
        return aexecute_inline
    return aexecute_on_pool
