"""A handler runs in a copy of its caller's context (`contextvars`), wherever it runs: it sees the
caller's context variables (a request id, a tracing span), as a handler called inline does, and what it
sets stays in its own call. The worker threads are shared by every registry of a process
(agent_lab.workers): without the copy, a value one tenant's handler set would be seen by the next
handler, of any registry, that runs on the same thread."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import unittest
from typing import Any

from agent_lab import Actor, Registry, ToolCall, ToolSpec

REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("agent_lab_test_request_id", default=None)
CURRENT_TENANT: contextvars.ContextVar[Any] = contextvars.ContextVar("agent_lab_test_current_tenant", default=None)
CALLS = 60  # sequential calls: far more than the threads the reservoir can hold idle, so threads are reused


def spec(name: str, *, execution: str = "pool") -> ToolSpec:
    return ToolSpec(name=name, description="Report the context.", input_schema={"type": "object"},
                    execution=execution)


def actor(tenant: str) -> Actor:
    return Actor(id="u-" + tenant, tenant=tenant, permissions=set())


def report(tenant: str) -> dict[str, Any]:
    """What a handler saw, then its own value set, as a handler that keeps per-request state would."""
    seen = {"request": REQUEST_ID.get(), "tenant": CURRENT_TENANT.get(), "thread": threading.get_ident()}
    CURRENT_TENANT.set(tenant + "-secret")
    return seen


class HandlerContextTest(unittest.TestCase):
    def test_a_pooled_handler_sees_the_callers_context_variables(self) -> None:
        with Registry() as registry:
            registry.register(spec("report"), lambda arguments: report("t"))
            output = contextvars.Context().run(self._invoke_with_request, registry, "req-42")
        self.assertEqual(output["request"], "req-42")
        self.assertNotEqual(output["thread"], threading.get_ident())  # it did run on a worker

    @staticmethod
    def _invoke_with_request(registry: Registry, request: str) -> dict[str, Any]:
        REQUEST_ID.set(request)
        result = registry.invoke(ToolCall("report", {}), actor=actor("t"))
        assert result.ok, result
        return result.output

    def test_what_a_pooled_handler_sets_reaches_neither_its_caller_nor_another_tenants_handler(self) -> None:
        with Registry(max_workers=1) as tenant_a, Registry(max_workers=1) as tenant_b:
            tenant_a.register(spec("report"), lambda arguments: report("a"))
            tenant_b.register(spec("report"), lambda arguments: report("b"))
            threads_a: set[int] = set()
            reused = 0
            for _ in range(CALLS):
                seen_a = tenant_a.invoke(ToolCall("report", {}), actor=actor("a")).output
                threads_a.add(seen_a["thread"])
                seen_b = tenant_b.invoke(ToolCall("report", {}), actor=actor("b")).output
                reused += seen_b["thread"] in threads_a
                self.assertEqual((seen_a["tenant"], seen_b["tenant"]), (None, None))
                self.assertIsNone(CURRENT_TENANT.get())
        # The case the promise is about happened: tenant b's handler ran on a thread tenant a's had used.
        self.assertGreater(reused, 0)

    def test_an_async_handler_under_invoke_sees_the_callers_context_and_keeps_its_own(self) -> None:
        async def report_async(arguments: Any) -> dict[str, Any]:
            return report("t")

        with Registry() as registry:
            registry.register(spec("report"), report_async)
            for number in range(5):
                output = contextvars.Context().run(self._invoke_with_request, registry, f"req-{number}")
                self.assertEqual((output["request"], output["tenant"]), (f"req-{number}", None))

    def test_ainvoke_runs_a_sync_handler_on_the_pool_in_the_awaiting_tasks_context(self) -> None:
        with Registry() as registry:
            registry.register(spec("report"), lambda arguments: report("t"))

            async def call(request: str) -> dict[str, Any]:
                REQUEST_ID.set(request)
                result = await registry.ainvoke(ToolCall("report", {}), actor=actor("t"))
                assert result.ok, result
                return result.output

            async def both() -> list[dict[str, Any]]:
                return list(await asyncio.gather(call("req-1"), call("req-2")))

            outputs = asyncio.run(both())
        self.assertEqual([(output["request"], output["tenant"]) for output in outputs],
                         [("req-1", None), ("req-2", None)])

    def test_an_inline_handler_runs_in_the_callers_own_context_as_any_function_call_does(self) -> None:
        with Registry() as registry:
            registry.register(spec("report", execution="inline"), lambda arguments: report("t"))

            def call() -> tuple[Any, Any]:
                REQUEST_ID.set("req-inline")
                output = registry.invoke(ToolCall("report", {}), actor=actor("t")).output
                return output["request"], CURRENT_TENANT.get()

            self.assertEqual(contextvars.Context().run(call), ("req-inline", "t-secret"))


if __name__ == "__main__":
    unittest.main()
