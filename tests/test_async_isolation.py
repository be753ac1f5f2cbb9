"""Issue 8, item 14: one async handler that blocks the registry's event loop cannot starve the others.

An `async def` handler that calls time.sleep holds the whole loop `invoke` runs async handlers on. The
registry notices (a call the loop does not start, or does not answer, in time), retires that loop and
runs new calls on a fresh one. Tests synchronise on events; the upper bounds on elapsed time are far
larger than the mechanism needs and far below how long the blocking handlers would block.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import unittest
import weakref
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.execution import MAX_ABANDONED_LOOPS
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())
BLOCK_S = 10.0  # how long a blocking handler would hold its loop if nobody released it
GENEROUS_S = 5.0  # far more than the isolation needs; the blocked loop would hold callers BLOCK_S


def spec(name: str, timeout_ms: float) -> ToolSpec:
    return ToolSpec(name=name, description="d", input_schema={"type": "object"}, timeout_ms=timeout_ms)


def loop_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "agent-lab-async-tools"]


class BlockingAsyncHandlerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.release = threading.Event()
        self.addCleanup(self.release.set)  # let blocked handlers (and their loops) end with the test
        self.blocking = threading.Event()
        self.registry = Registry()
        self.addCleanup(self.registry.close)

        async def blocker(arguments):
            self.blocking.set()
            self.release.wait(BLOCK_S)  # blocks the event loop: no await
            return {"blocked": True}

        async def well_behaved(arguments):
            await asyncio.sleep(0)
            await asyncio.sleep(0.001)
            return {"ok": True}

        self.registry.register(spec("blocker", timeout_ms=100), blocker)
        self.registry.register(spec("well_behaved", timeout_ms=GENEROUS_S * 1000), well_behaved)

    def call_in_background(self, name: str) -> tuple[threading.Thread, list[Any]]:
        results: list[Any] = []
        thread = threading.Thread(target=lambda: results.append(self.registry.invoke(ToolCall(name, {}), actor=ACTOR)))
        thread.start()
        self.addCleanup(thread.join)
        return thread, results

    def test_a_well_behaved_async_tool_succeeds_while_another_blocks_the_loop(self) -> None:
        with self.assertLogs("agent_lab.execution", logging.WARNING) as logs:
            thread, blocked = self.call_in_background("blocker")
            self.assertTrue(self.blocking.wait(GENEROUS_S))  # the blocker now holds the loop
            started = time.monotonic()
            result = self.registry.invoke(ToolCall("well_behaved", {}), actor=ACTOR)
            elapsed = time.monotonic() - started
        self.assertTrue(result.ok, result)
        self.assertEqual(result.output, {"ok": True})
        self.assertLess(elapsed, GENEROUS_S)
        self.assertTrue(any("blocking it" in line for line in logs.output))
        self.release.set()
        thread.join(GENEROUS_S)
        self.assertEqual(len(blocked), 1)  # the blocked call got its answer too

    def test_the_blocking_call_itself_times_out_and_later_calls_run_on_a_fresh_loop(self) -> None:
        logging.disable(logging.WARNING)
        self.addCleanup(logging.disable, logging.NOTSET)
        started = time.monotonic()
        blocked = self.registry.invoke(ToolCall("blocker", {}), actor=ACTOR)
        self.assertLess(time.monotonic() - started, GENEROUS_S)
        self.assertEqual(blocked.error.code, "tool_timeout")
        for _ in range(3):
            self.assertTrue(self.registry.invoke(ToolCall("well_behaved", {}), actor=ACTOR).ok)

    def test_at_most_a_bounded_number_of_blocked_loops_are_left_behind(self) -> None:
        logging.disable(logging.WARNING)
        self.addCleanup(logging.disable, logging.NOTSET)
        before = len(loop_threads())
        results = [self.registry.invoke(ToolCall("blocker", {}), actor=ACTOR) for _ in range(MAX_ABANDONED_LOOPS + 2)]
        self.assertTrue(all(result.error is not None for result in results))
        self.assertLessEqual(len(loop_threads()) - before, MAX_ABANDONED_LOOPS + 1)  # the left-behind + the current
        self.release.set()  # the blocked handlers finish; their loops finish what they hold and stop
        deadline = time.monotonic() + GENEROUS_S
        while len(loop_threads()) - before > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertLessEqual(len(loop_threads()) - before, 1)
        self.assertTrue(self.registry.invoke(ToolCall("well_behaved", {}), actor=ACTOR).ok)



class DroppedRegistryTest(unittest.TestCase):
    """A registry's event loop runs on a thread of its own: a registry dropped without `close()` must not
    leave it running for the life of the process."""

    def test_a_dropped_registrys_loop_finishes_its_call_and_its_thread_ends(self) -> None:
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        async def slow(arguments):
            started.set()
            while not release.is_set():
                await asyncio.sleep(0.001)
            return {"done": True}

        async def quick(arguments):
            return {"ok": True}

        before = set(loop_threads())
        registry = Registry()
        registry.register(spec("quick", timeout_ms=GENEROUS_S * 1000), quick)
        registry.register(spec("slow", timeout_ms=GENEROUS_S * 1000), slow)
        self.assertTrue(registry.invoke(ToolCall("quick", {}), actor=ACTOR).ok)
        threads = [thread for thread in loop_threads() if thread not in before]
        results: list[Any] = []
        caller = threading.Thread(target=lambda: results.append(
            registry.invoke(ToolCall("slow", {}), actor=ACTOR)))
        caller.start()
        self.assertTrue(started.wait(GENEROUS_S))
        dropped = weakref.ref(registry)
        del registry
        gc.collect()
        self.assertIsNotNone(dropped(), "a call still running keeps its registry")
        release.set()
        caller.join(GENEROUS_S)
        self.assertTrue(results[0].ok)  # the call that ran as the registry was dropped still finished
        del caller, results
        gc.collect()
        self.assertIsNone(dropped())
        self.assertEqual(len(threads), 1)
        threads[0].join(GENEROUS_S)
        self.assertFalse(threads[0].is_alive(), "the loop thread of a dropped registry still runs")


if __name__ == "__main__":
    unittest.main()
