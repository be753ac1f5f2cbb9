"""Each tool's plan holds exactly the steps its contract needs, and a call runs exactly those.

A plan is composed once, at `register` (agent_lab/steps/plan.py). These tests pin down what "needs"
means: policy comes from the spec's declared contract (approval policy, resource guard, idempotency
key, single-use approvals), never from its effect; where a handler runs comes from the handler (sync
or async) and the spec's `execution` (or the registry's `run_inline`). The order tests, containment
and idempotency tests elsewhere are unchanged: these add what the plan must not leave out.
"""

from __future__ import annotations

import asyncio
import threading
import unittest
from typing import Any

from test_registry_fixtures import WRITER, ListAuditSink, followup_call, followup_spec

from agent_lab.calls import ToolCall
from agent_lab.execution import Handler
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec
from agent_lab.steps.admit import check_permission, check_resource_guard, check_schema
from agent_lab.steps.approval import check_approval, check_approval_condition, spend_approval
from agent_lab.steps.deadline import check_deadline
from agent_lab.steps.idempotency import reserve_key
from agent_lab.steps.plan import plan_for
from agent_lab.steps.run import (
    aexecute_awaited,
    aexecute_inline,
    aexecute_on_pool,
    execute_inline,
    execute_on_loop_thread,
    execute_on_pool,
)

ACTOR = Actor(id="u-1", tenant="acme", permissions={"notes:read", "notes:write"})
ID_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}, "action_id": {"type": "string"}},
             "required": ["id", "action_id"], "additionalProperties": False}


def spec(**contract: Any) -> ToolSpec:
    options: dict[str, Any] = {"name": "tool", "description": "A tool.", "input_schema": ID_SCHEMA,
                               "required_permission": "notes:read"}
    options.update(contract)
    return ToolSpec(**options)


def read(arguments: Any) -> dict[str, Any]:
    return {"id": arguments["id"]}


async def read_async(arguments: Any) -> dict[str, Any]:
    return {"id": arguments["id"]}


def guard(arguments: Any, actor: Actor) -> bool:
    return arguments["id"] != "hidden"


def over_100(arguments: Any) -> bool:
    return arguments["id"] == "big"


COMMON_HEAD = (check_schema, check_permission)

# contract -> (handler, run_inline, pre-run steps, execute step, ainvoke's execute step)
CONTRACTS: dict[str, tuple[ToolSpec, Any, bool, tuple, Any, Any]] = {
    "a plain read: no approval, reservation or spending step": (
        spec(), read, False, (*COMMON_HEAD, check_deadline), execute_on_pool, aexecute_on_pool),
    "an inline read: no hand-off": (
        spec(execution="inline"), read, False, (*COMMON_HEAD, check_deadline), execute_inline, aexecute_inline),
    "a read in a run_inline registry: inline under invoke, the pool under ainvoke": (
        spec(), read, True, (*COMMON_HEAD, check_deadline), execute_inline, aexecute_on_pool),
    "an async read: the loop thread under invoke, awaited under ainvoke": (
        spec(), read_async, False, (*COMMON_HEAD, check_deadline), execute_on_loop_thread, aexecute_awaited),
    "a guarded read": (
        spec(resource_guard=guard), read, False, (*COMMON_HEAD, check_resource_guard, check_deadline),
        execute_on_pool, aexecute_on_pool),
    "a read that always needs approval has the approval step (policy is not decided by the effect)": (
        spec(approval="always"), read, False, (*COMMON_HEAD, check_approval, check_deadline),
        execute_on_pool, aexecute_on_pool),
    "a read with a conditional approval": (
        spec(approval="conditional", approval_condition=over_100), read, False,
        (*COMMON_HEAD, check_approval_condition, check_deadline), execute_on_pool, aexecute_on_pool),
    "a read with an idempotency key reserves it": (
        spec(idempotency_key="action_id"), read, False, (*COMMON_HEAD, check_deadline, reserve_key),
        execute_on_pool, aexecute_on_pool),
    "a keyed write": (
        spec(effect="write", idempotency_key="action_id", required_permission="notes:write"), read, False,
        (*COMMON_HEAD, check_deadline, reserve_key), execute_on_pool, aexecute_on_pool),
    "a write without a key has no reservation (lint's AL401 says so)": (
        spec(effect="write"), read, False, (*COMMON_HEAD, check_deadline), execute_on_pool, aexecute_on_pool),
    "a destructive tool with a single-use approval, a guard and a key: every step": (
        spec(effect="destructive", approval="always", single_use_approval=True, idempotency_key="action_id",
             resource_guard=guard, execution="inline"), read, False,
        (*COMMON_HEAD, check_resource_guard, check_approval, check_deadline, reserve_key, spend_approval),
        execute_inline, aexecute_inline),
    "a conditional single-use approval without a key": (
        spec(approval="conditional", approval_condition=over_100, single_use_approval=True), read, False,
        (*COMMON_HEAD, check_approval_condition, check_deadline, spend_approval), execute_on_pool, aexecute_on_pool),
}


class PlanHoldsExactlyTheStepsTheContractNeedsTest(unittest.TestCase):
    def test_each_contract_gets_exactly_its_steps_in_the_fixed_order(self) -> None:
        for name, (tool, handler, run_inline, admit, execute, aexecute) in CONTRACTS.items():
            with self.subTest(contract=name):
                plan = plan_for(tool, Handler.wrap(handler), run_inline=run_inline)
                self.assertEqual(plan.admit, admit)
                self.assertIs(plan.execute, execute)
                self.assertIs(plan.aexecute, aexecute)

    def test_the_registry_routes_each_call_to_the_plan_of_the_spec_it_keeps(self) -> None:
        for name, (tool, handler, run_inline, admit, execute, _) in CONTRACTS.items():
            with self.subTest(contract=name):
                registry = Registry(run_inline=run_inline)
                self.addCleanup(registry.close)
                registry.register(tool, handler)
                plan = registry._catalog.tools[tool.name]  # white box: the plan route hands a call
                self.assertEqual((plan.admit, plan.execute), (admit, execute))
                self.assertIs(plan.spec, registry.spec(tool.name))
                self.assertEqual(plan.spec, tool)


class PlansRefuseWhatTheirSpecSaysTest(unittest.TestCase):
    def registry_with(self, tool: ToolSpec, handler: Any = read, **options: Any) -> tuple[Registry, list]:
        ran: list = []

        def counted(arguments: Any) -> dict[str, Any]:
            ran.append(arguments["id"])
            return handler(arguments)

        registry = Registry(**options)
        self.addCleanup(registry.close)
        registry.register(tool, counted)
        return registry, ran

    def test_a_read_that_needs_approval_is_refused_without_one_and_runs_with_one(self) -> None:
        registry, ran = self.registry_with(spec(approval="always", execution="inline"))
        call = ToolCall("tool", {"id": "n-1", "action_id": "a-1"})
        refused = registry.invoke(call, actor=ACTOR)
        self.assertEqual((refused.error.code, ran), ("approval_required", []))
        approval = registry.approval_for(call, actor=ACTOR, approver="lead")
        self.assertTrue(registry.invoke(call, actor=ACTOR, approval=approval).ok)
        self.assertEqual(ran, ["n-1"])

    def test_a_conditional_read_asks_only_when_its_condition_holds(self) -> None:
        registry, ran = self.registry_with(spec(approval="conditional", approval_condition=over_100))
        self.assertTrue(registry.invoke(ToolCall("tool", {"id": "small", "action_id": "a-1"}), actor=ACTOR).ok)
        refused = registry.invoke(ToolCall("tool", {"id": "big", "action_id": "a-2"}), actor=ACTOR)
        self.assertEqual((refused.error.code, ran), ("approval_required", ["small"]))

    def test_an_approval_for_a_tool_without_an_approval_step_grants_nothing_and_is_not_needed(self) -> None:
        registry, ran = self.registry_with(spec(required_permission="notes:admin"))
        call = ToolCall("tool", {"id": "n-1", "action_id": "a-1"})
        other = Registry()
        self.addCleanup(other.close)
        other.register(spec(approval="always", required_permission="notes:admin"), read)
        approval = other.approval_for(call, actor=ACTOR, approver="lead")
        refused = registry.invoke(call, actor=ACTOR, approval=approval)  # no scope: hidden, approval or not
        self.assertEqual((refused.error.code, ran), ("tool_not_found", []))

    def test_a_guarded_read_hides_what_its_guard_refuses(self) -> None:
        registry, ran = self.registry_with(spec(resource_guard=guard))
        refused = registry.invoke(ToolCall("tool", {"id": "hidden", "action_id": "a-1"}), actor=ACTOR)
        self.assertEqual((refused.error.code, ran), ("not_found", []))

    def test_a_single_use_approval_is_spent_by_the_first_run_only(self) -> None:
        registry, ran = self.registry_with(spec(approval="always", single_use_approval=True, execution="inline"))
        call = ToolCall("tool", {"id": "n-1", "action_id": "a-1"})
        approval = registry.approval_for(call, actor=ACTOR, approver="lead")
        self.assertTrue(registry.invoke(call, actor=ACTOR, approval=approval).ok)
        again = registry.invoke(call, actor=ACTOR, approval=approval)
        self.assertEqual((again.error.code, ran), ("approval_used", ["n-1"]))

    def test_a_spec_changed_after_register_does_not_part_the_registry_from_its_plan(self) -> None:
        tool = spec(execution="inline")
        registry, ran = self.registry_with(tool)
        object.__setattr__(tool, "approval", tool.approval.__class__("always"))  # the caller's copy only
        self.assertEqual(registry.spec("tool").approval.value, "never")
        self.assertTrue(registry.invoke(ToolCall("tool", {"id": "n-1", "action_id": "a-1"}), actor=ACTOR).ok)

    def test_an_inline_plan_runs_on_the_callers_thread_and_a_pooled_one_does_not(self) -> None:
        threads: dict[str, int] = {}

        def where(name: str) -> Any:
            def handler(arguments: Any) -> dict[str, Any]:
                threads[name] = threading.get_ident()
                return {"id": arguments["id"]}
            return handler

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(spec(name="inline_tool", execution="inline"), where("inline"))
        registry.register(spec(name="pooled_tool"), where("pooled"))
        for name in ("inline_tool", "pooled_tool"):
            self.assertTrue(registry.invoke(ToolCall(name, {"id": "n", "action_id": "a"}), actor=ACTOR).ok)
        self.assertEqual(threads["inline"], threading.get_ident())
        self.assertNotEqual(threads["pooled"], threading.get_ident())

    def test_ainvoke_runs_each_plan_to_the_same_answers(self) -> None:
        registry, _ = self.registry_with(spec(approval="always", execution="inline"))
        call = ToolCall("tool", {"id": "n-1", "action_id": "a-1"})
        self.assertEqual(asyncio.run(registry.ainvoke(call, actor=ACTOR)).error.code, "approval_required")
        approval = registry.approval_for(call, actor=ACTOR, approver="lead")
        self.assertTrue(asyncio.run(registry.ainvoke(call, actor=ACTOR, approval=approval)).ok)


class AuditStepsFollowThePlanTest(unittest.TestCase):
    def test_a_keyed_write_records_each_step_it_reached(self) -> None:
        audit = ListAuditSink()
        registry = Registry(audit=audit)
        self.addCleanup(registry.close)
        registry.register(followup_spec(approval="always"), lambda arguments: {"followup_id": "F-1"})
        registry.invoke(followup_call(), actor=WRITER)  # refused at the approval step
        registry.invoke(followup_call(), actor=WRITER, deadline=0.0)  # no time left: still the approval step first
        call = followup_call()
        approval = registry.approval_for(call, actor=WRITER, approver="lead")
        registry.invoke(call, actor=WRITER, approval=approval, deadline=0.0)  # approved, then out of time
        self.assertTrue(registry.invoke(call, actor=WRITER, approval=approval).ok)
        self.assertEqual([record["step"] for record in audit.records], ["approval", "approval", "deadline", "record"])


if __name__ == "__main__":
    unittest.main()
