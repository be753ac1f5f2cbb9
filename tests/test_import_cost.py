"""What a process that only makes sync calls loads: asyncio (about 26 ms of start-up) only once a
tool is awaited or an async handler runs, so the gate and sync applications never pay for it."""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]

SYNC_CALLS = """
import sys
from agent_lab import Actor, Registry, ToolCall, ToolSpec
registry = Registry()
registry.register(ToolSpec(name="echo", description="Echo.", input_schema={"type": "object"}), lambda arguments: arguments)
result = registry.invoke(ToolCall("echo", {"a": 1}), actor=Actor(id="u", tenant="t", permissions=set()))
assert result.ok, result
registry.close()
print("asyncio" in sys.modules)
"""

ASYNC_HANDLER = """
import sys
from agent_lab import Actor, Registry, ToolCall, ToolSpec
async def echo(arguments):
    return arguments
registry = Registry()
registry.register(ToolSpec(name="echo", description="Echo.", input_schema={"type": "object"}), echo)
result = registry.invoke(ToolCall("echo", {"a": 1}), actor=Actor(id="u", tenant="t", permissions=set()))
registry.close()
print(result.ok, result.output)
"""


def run(source: str) -> str:
    done = subprocess.run([sys.executable, "-c", source], cwd=CHECKOUT, capture_output=True, text=True, timeout=60,
                          check=False)
    if done.returncode != 0:
        raise AssertionError(done.stderr)
    return done.stdout.strip()


class SyncProcessesDoNotLoadAsyncioTest(unittest.TestCase):
    def test_registering_and_invoking_sync_tools_leaves_asyncio_unloaded(self) -> None:
        self.assertEqual(run(SYNC_CALLS), "False")

    def test_an_async_handler_still_runs_once_asyncio_is_loaded_on_demand(self) -> None:
        self.assertEqual(run(ASYNC_HANDLER), "True {'a': 1}")


if __name__ == "__main__":
    unittest.main()
