"""An async handler that will not stop on time: `invoke` must still answer by the call's deadline.

Found by the adversarial review of main (6dd0a37), closed on branch hred:

- ASYNC-GRACE-OVERRUN: a sync handler in the pool is answered `tool_timeout` at its deadline, but an
  async one was waited for past it: 0.25 s for a handler that swallows its cancellation, 0.5 s for one
  that blocks its event loop (`time.sleep`, or an `@tool` returning a pydantic model whose serializer
  blocks: the dump runs on the loop). A 200 ms call answered after 0.45 s and 0.70 s. Now each is
  answered at its deadline and the handler is left behind, as a pooled one is, and reported: a warning
  for a handler still running after its cancellation, and for a loop that does not take a turn asked of
  it (retired); an async write left running completes its receipt when it ends.
"""

from __future__ import annotations

import asyncio
import time
import unittest
from typing import Any

from agent_lab import Actor, Registry, ToolCall, ToolSpec

TIMEOUT_MS = 200
SLACK_S = 0.15  # scheduling; a pooled sync handler is answered within a few milliseconds of its deadline


async def swallows_cancellation(arguments: Any) -> Any:
    for _ in range(20):
        try:
            await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            pass  # keeps going: a handler that does not stop when told
    return {}


async def blocks_its_loop(arguments: Any) -> Any:
    time.sleep(1.0)
    return {}


def slow_sync(arguments: Any) -> Any:
    time.sleep(1.0)
    return {}


class AsyncHandlersAreAnsweredByTheDeadlineTest(unittest.TestCase):
    def elapsed(self, handler: Any) -> float:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="slow_tool", description="A tool that is slow to stop; use it in tests.",
                                   input_schema={"type": "object"}, required_permission=None,
                                   timeout_ms=TIMEOUT_MS), handler)
        started = time.monotonic()
        result = registry.invoke(ToolCall("slow_tool", {}), actor=Actor(id="agent-1", tenant="acme"))
        elapsed = time.monotonic() - started
        self.assertEqual(result.error.code if result.error else None, "tool_timeout")
        return elapsed

    def test_a_sync_handler_in_the_pool_is_answered_at_its_deadline(self) -> None:  # holds: the yardstick
        self.assertLess(self.elapsed(slow_sync), TIMEOUT_MS / 1000 + SLACK_S)

    def test_an_async_handler_that_swallows_its_cancellation_is_answered_by_its_deadline(self) -> None:
        self.assertLess(self.elapsed(swallows_cancellation), TIMEOUT_MS / 1000 + SLACK_S)

    def test_an_async_handler_that_blocks_its_loop_is_answered_by_its_deadline(self) -> None:
        self.assertLess(self.elapsed(blocks_its_loop), TIMEOUT_MS / 1000 + SLACK_S)

    def test_a_handler_left_running_past_its_deadline_is_reported(self) -> None:
        for handler, said in ((swallows_cancellation, "left behind"), (blocks_its_loop, "blocking it")):
            with self.subTest(handler=handler.__name__), self.assertLogs("agent_lab.execution", "WARNING") as logs:
                self.elapsed(handler)
                until = time.monotonic() + 5
                while not any(said in line for line in logs.output) and time.monotonic() < until:
                    time.sleep(0.01)  # reported after the answer: once it is plain the handler runs on
                self.assertTrue(any(said in line for line in logs.output), logs.output)


if __name__ == "__main__":
    unittest.main()
