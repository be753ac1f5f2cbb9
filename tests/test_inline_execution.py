"""ToolSpec(execution="inline"): a trusted, fast sync handler runs on the caller's thread.

The caller cannot be interrupted, so the deadline is checked right before the handler starts (too late:
nothing runs) and again when it returns; an overrun is then answered exactly as a timeout on the pool
is. The default, the deadline-enforcing worker pool, is unchanged.
"""

from __future__ import annotations

import asyncio
import threading
import time
import unittest
from typing import Any

from agent_lab import CallContext, Execution, Registry, ToolCall, ToolSpec
from agent_lab.errors import NextAction, Outcome

from test_registry_fixtures import WRITER, EffectLog, ListAuditSink, followup_call, followup_spec

OVERRUN_S = 0.08  # a handler that sleeps this long overruns a 20 ms timeout


def read_spec(name: str = "lookup", **options: Any) -> ToolSpec:
    options.setdefault("timeout_ms", 20)
    return ToolSpec(name=name, description="A read.", input_schema={"type": "object"}, **options)


class ExecutionOptionTest(unittest.TestCase):
    def test_the_default_is_the_pool_and_inline_is_named_in_the_runtime_contract(self) -> None:
        self.assertIs(read_spec().execution, Execution.POOL)
        inline = read_spec(execution="inline")
        self.assertIs(inline.execution, Execution.INLINE)
        self.assertEqual(inline.runtime_contract()["execution"], "inline")
        self.assertNotIn("execution", inline.model_schema())

    def test_an_unknown_execution_is_refused_when_the_spec_is_built(self) -> None:
        with self.assertRaises(ValueError):
            read_spec(execution="thread")

    def test_an_async_handler_cannot_be_registered_inline(self) -> None:
        async def handler(arguments):
            return {}

        registry = Registry()
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "inline"):
            registry.register(read_spec(execution="inline"), handler)
        self.assertEqual(registry.names(), [])


class InlineRunsOnTheCallersThreadTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.threads: dict[str, int] = {}

    def handler(self, name: str):
        def run(arguments):
            self.threads[name] = threading.get_ident()
            return {"ran": name}
        return run

    def test_inline_tools_run_on_the_caller_and_pool_tools_do_not(self) -> None:
        self.registry.register(read_spec("inline_tool", execution="inline"), self.handler("inline_tool"))
        self.registry.register(read_spec("pool_tool", timeout_ms=5_000), self.handler("pool_tool"))
        for name in ("inline_tool", "pool_tool"):
            self.assertTrue(self.registry.invoke(ToolCall(name, {}), actor=WRITER).ok)
        self.assertEqual(self.threads["inline_tool"], threading.get_ident())
        self.assertNotEqual(self.threads["pool_tool"], threading.get_ident())

    def test_the_pool_still_stops_waiting_at_the_deadline(self) -> None:
        release = threading.Event()
        self.addCleanup(release.set)
        self.registry.register(read_spec("stuck"), lambda arguments: release.wait(5.0))
        started = time.monotonic()
        result = self.registry.invoke(ToolCall("stuck", {}), actor=WRITER)
        self.assertLess(time.monotonic() - started, 1.0)
        self.assertEqual(result.error.code, "tool_timeout")

    def test_a_handler_that_takes_a_context_gets_one_with_the_calls_deadline(self) -> None:
        seen: list[CallContext] = []

        def handler(arguments, ctx):
            seen.append(ctx)
            return {"left": ctx.remaining() > 0}

        self.registry.register(read_spec(execution="inline", timeout_ms=5_000), handler)
        result = self.registry.invoke(ToolCall("lookup", {}, call_id="c-7"), actor=WRITER)
        self.assertEqual(result.output, {"left": True})
        [ctx] = seen
        self.assertEqual((ctx.call_id, ctx.tool, ctx.actor), ("c-7", "lookup", WRITER))
        self.assertIsNotNone(ctx.deadline)


class InlineDeadlineTest(unittest.TestCase):
    def setUp(self) -> None:
        self.audit = ListAuditSink()
        self.registry = Registry(audit=self.audit)
        self.addCleanup(self.registry.close)

    def test_a_read_that_overruns_is_answered_exactly_like_a_timeout_on_the_pool(self) -> None:
        def slow(arguments):
            time.sleep(OVERRUN_S)
            return {"late": True}

        release = threading.Event()
        self.addCleanup(release.set)
        self.registry.register(read_spec("inline_read", execution="inline", retry_policy="transient"), slow)
        self.registry.register(read_spec("pool_read", retry_policy="transient"), lambda arguments: release.wait(5.0))
        inline = self.registry.invoke(ToolCall("inline_read", {}), actor=WRITER)
        pooled = self.registry.invoke(ToolCall("pool_read", {}), actor=WRITER)
        self.assertEqual((inline.error.code, inline.outcome), ("tool_timeout", Outcome.FAILED))
        self.assertTrue(inline.error.retryable)
        self.assertEqual(inline.error.next_action, NextAction.RETRY)
        self.assertEqual(inline.to_model(), pooled.to_model())
        self.assertIsNone(inline.output)
        self.assertEqual([record["step"] for record in self.audit.records], ["execute", "execute"])

    def test_a_read_under_the_default_retry_policy_is_a_timeout_not_to_retry(self) -> None:
        self.registry.register(read_spec(execution="inline"), lambda arguments: time.sleep(OVERRUN_S) or {})
        result = self.registry.invoke(ToolCall("lookup", {}), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome, result.error.retryable),
                         ("tool_timeout", Outcome.FAILED, False))

    def test_a_write_that_overruns_is_unknown_and_its_real_result_becomes_the_receipt(self) -> None:
        effects = EffectLog()

        def slow_write(arguments):
            time.sleep(OVERRUN_S)
            return effects.record_followup(arguments)

        self.registry.register(followup_spec(execution="inline", timeout_ms=20), slow_write)
        first = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        self.assertFalse(first.error.retryable)
        self.assertEqual(first.error.next_action, NextAction.LOOKUP_STATUS)
        self.assertEqual(len(effects.effects), 1)  # it ran to the end: the caller could not stop it
        self.assertTrue(self.registry.wait_settled(5.0))
        again = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(again.replayed)
        self.assertEqual((again.ok, again.output), (True, {"followup_id": "F-1", "ticket_id": "T-1001"}))
        self.assertEqual(len(effects.effects), 1)  # one key, one effect

    def test_a_deadline_passed_before_the_start_runs_nothing(self) -> None:
        ran: list[str] = []
        self.registry.register(read_spec(execution="inline", timeout_ms=5_000), lambda arguments: ran.append("ran"))
        result = self.registry.invoke(ToolCall("lookup", {}), actor=WRITER, deadline=time.monotonic() - 0.001)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(ran, [])

    def test_a_deadline_that_passes_during_the_checks_runs_nothing(self) -> None:
        ran: list[str] = []

        def slow_guard(arguments, actor):
            time.sleep(OVERRUN_S)  # the tool's 20 ms are gone before the handler could start
            return True

        self.registry.register(read_spec(execution="inline", resource_guard=slow_guard), lambda arguments: ran.append(1))
        result = self.registry.invoke(ToolCall("lookup", {}), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(ran, [])
        self.assertEqual(self.audit.records[-1]["step"], "deadline")


class InlineUnderAinvokeTest(unittest.TestCase):
    """Under ainvoke an inline tool runs on the loop's own thread (a hand-off would cost more than the
    handler); its deadline behaves as under invoke."""

    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)

    def test_an_inline_tool_runs_on_the_event_loops_thread(self) -> None:
        seen: list[int] = []
        self.registry.register(read_spec(execution="inline"), lambda arguments: seen.append(threading.get_ident()) or {})

        async def scenario():
            return threading.get_ident(), await self.registry.ainvoke(ToolCall("lookup", {}), actor=WRITER)

        loop_thread, result = asyncio.run(scenario())
        self.assertTrue(result.ok, result)
        self.assertEqual(seen, [loop_thread])

    def test_an_overrun_under_ainvoke_is_a_timeout(self) -> None:
        self.registry.register(read_spec(execution="inline"), lambda arguments: time.sleep(OVERRUN_S) or {})
        result = asyncio.run(self.registry.ainvoke(ToolCall("lookup", {}), actor=WRITER))
        self.assertEqual((result.error.code, result.outcome), ("tool_timeout", Outcome.FAILED))


if __name__ == "__main__":
    unittest.main()
