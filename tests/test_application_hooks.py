"""Application hooks and the call's time: what the registry bounds, and what it documents.

A resource guard and an approval condition run on the caller's thread, in the fixed order, before the
key is reserved and before the handler. Nothing can interrupt them there, so the registry bounds what
it can: none starts once the call's deadline has passed, and one that returns late never lets the
handler start. An audit sink runs after the result is final: its time is in neither the outcome nor
`duration_ms`. (agent_lab/docs/runtime.md: "Application hooks and the deadline".)
"""

from __future__ import annotations

import time
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.errors import Outcome
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import WRITER, EffectLog, ListAuditSink, followup_call, followup_spec

PAST_S = 0.08  # a hook that sleeps this long uses up a 20 ms call


def read_spec(**options: Any) -> ToolSpec:
    options.setdefault("timeout_ms", 5_000)
    return ToolSpec(name="lookup", description="A read.", input_schema={"type": "object"}, **options)


class HooksAndTheDeadlineTest(unittest.TestCase):
    def setUp(self) -> None:
        self.audit = ListAuditSink()
        self.registry = Registry(audit=self.audit)
        self.addCleanup(self.registry.close)
        self.hooks: list[str] = []
        self.ran: list[str] = []

    def guard(self, arguments: Any, actor: Any) -> bool:
        self.hooks.append("guard")
        return True

    def condition(self, arguments: Any) -> bool:
        self.hooks.append("condition")
        return False

    def test_no_hook_starts_when_the_deadline_has_passed_before_it(self) -> None:
        self.registry.register(read_spec(resource_guard=self.guard, approval="conditional",
                                         approval_condition=self.condition), lambda arguments: self.ran.append(1))
        result = self.registry.invoke(ToolCall("lookup", {}), actor=WRITER, deadline=time.monotonic() - 0.001)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual((self.hooks, self.ran), ([], []))
        self.assertEqual([record["step"] for record in self.audit.records], ["permission"])

    def test_a_guard_that_uses_up_the_time_keeps_the_approval_condition_from_starting(self) -> None:
        def slow_guard(arguments: Any, actor: Any) -> bool:
            self.hooks.append("guard")
            time.sleep(PAST_S)
            return True

        self.registry.register(read_spec(timeout_ms=20, resource_guard=slow_guard, approval="conditional",
                                         approval_condition=self.condition), lambda arguments: self.ran.append(1))
        result = self.registry.invoke(ToolCall("lookup", {}), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual((self.hooks, self.ran), (["guard"], []))

    def test_a_condition_that_answers_late_never_lets_the_handler_start_or_reserves_the_key(self) -> None:
        effects = EffectLog()

        def slow_condition(arguments: Any) -> bool:
            time.sleep(PAST_S)
            return False

        self.registry.register(followup_spec(timeout_ms=20, approval="conditional", approval_condition=slow_condition),
                               effects.record_followup)
        result = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(effects.effects, [])
        self.assertIsNone(self.registry.receipts.lookup(_key(followup_call())))

    def test_an_audit_sink_runs_after_the_result_is_final(self) -> None:
        seen: list[dict] = []

        class SlowSink:
            def write(self, record: dict) -> None:
                time.sleep(PAST_S)
                seen.append(record)

            def close(self) -> None:
                pass

        registry = Registry(audit=SlowSink())
        self.addCleanup(registry.close)
        registry.register(read_spec(timeout_ms=20), lambda arguments: {"ok": True})
        result = registry.invoke(ToolCall("lookup", {}), actor=WRITER)
        self.assertEqual((result.ok, result.output), (True, {"ok": True}))  # the sink's time is past the deadline
        [record] = seen
        self.assertEqual(record["duration_ms"], round(result.duration_ms, 3))  # stamped before the sink ran


def _key(call: ToolCall) -> Any:
    from agent_lab.stores import ReceiptKey

    return ReceiptKey(WRITER.tenant, call.name, call.arguments["action_id"])


if __name__ == "__main__":
    unittest.main()
