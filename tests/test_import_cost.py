"""What a process loads is what its work needs, never more (asserted on module names, never on time).

A process that only makes sync calls loads asyncio (about 26 ms of start-up) only once a tool is
awaited or an async handler runs, so the gate and sync applications never pay for it. The command
line loads a command's modules when that command runs: `import agent_lab.cli` (every entry point
does it) and a light command such as `--help` load no registry, schema, lint or lab module, and
`tool-eval` loads none of the modules that serve other commands (MCP, model-eval, unittest glue,
retries, `@tool`, shards when it does not shard). `agent_lab` and `agent_lab.lab` import each public
name on first use.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from agent_lab.lab.tickets import CASES as SHIPPED_CASES

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


LOADED_MODULES = """
import sys
{work}
print(" ".join(sorted(sys.modules)))
"""

LIGHT = {"agent_lab", "agent_lab._lazy", "agent_lab.cli", "agent_lab.fingerprint", "agent_lab.jsonvalue"}
"""The agent_lab modules `import agent_lab.cli` loads: the package with its lazy-exports helper (whose
`fingerprint` name is both a submodule and a function, so that one is imported with it) and the command
line itself."""

NOT_FOR_TOOL_EVAL = ("agent_lab.signature", "agent_lab.retry", "agent_lab.mcp", "agent_lab.modeleval",
                     "agent_lab.integrations", "agent_lab.search", "agent_lab.bench", "agent_lab.lab.testing",
                     "agent_lab.lab.inspection", "agent_lab.lab.shards", "unittest", "asyncio")


def loaded_modules(work: str) -> set[str]:
    return set(run(LOADED_MODULES.format(work=work)).split())


def agent_lab_modules(modules: set[str]) -> set[str]:
    return {name for name in modules if name == "agent_lab" or name.startswith("agent_lab.")}


class CommandLineLoadsWhatACommandNeedsTest(unittest.TestCase):
    def test_importing_the_command_line_loads_no_command(self) -> None:
        self.assertEqual(agent_lab_modules(loaded_modules("import agent_lab.cli")), LIGHT)

    def test_help_loads_no_command(self) -> None:
        work = ("import contextlib, io, runpy\nsys.argv = ['run_lab.py', '--help']\n"
                "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
                "    runpy.run_path('run_lab.py', run_name='__main__')")
        # (the entry point takes SIGTERM as a stop request before any command is parsed, with agent_lab.interrupts)
        self.assertEqual(agent_lab_modules(loaded_modules(work)), LIGHT | {"agent_lab.interrupts"})

    def test_tool_eval_loads_none_of_the_other_commands_modules(self) -> None:
        with tempfile.TemporaryDirectory() as out:
            work = ("import contextlib, io\nfrom agent_lab.cli import main\n"
                    "with contextlib.redirect_stdout(io.StringIO()):\n"
                    f"    assert main(['tool-eval', '--cases', {str(SHIPPED_CASES)!r}, '--out', {out!r}]) == 0")
            modules = loaded_modules(work)
        self.assertIn("agent_lab.registry", modules)  # it did run the cases
        self.assertIn("agent_lab.lint", modules)  # and the gate's lint check
        for name in NOT_FOR_TOOL_EVAL:
            with self.subTest(name):
                self.assertNotIn(name, modules)

    def test_the_front_doors_import_each_public_name_on_first_use(self) -> None:
        self.assertEqual(agent_lab_modules(loaded_modules("import agent_lab")), {"agent_lab", "agent_lab._lazy",
                                                                                 "agent_lab.fingerprint",
                                                                                 "agent_lab.jsonvalue"})
        self.assertNotIn("agent_lab.lab.testing", loaded_modules("import agent_lab.lab"))
        modules = loaded_modules("from agent_lab import Registry\nfrom agent_lab.lab import Lab")
        self.assertIn("agent_lab.registry", modules)
        self.assertNotIn("agent_lab.signature", modules)

    def test_every_public_name_resolves_and_is_listed(self) -> None:
        import agent_lab
        import agent_lab.lab

        for package in (agent_lab, agent_lab.lab):
            for name in package.__all__:
                with self.subTest(f"{package.__name__}.{name}"):
                    self.assertIsNotNone(getattr(package, name))
                    self.assertIn(name, dir(package))
            with self.assertRaises(AttributeError):
                getattr(package, "no_such_name")
        self.assertTrue(callable(agent_lab.fingerprint))  # the function, not the submodule of that name


class SyncProcessesDoNotLoadAsyncioTest(unittest.TestCase):
    def test_registering_and_invoking_sync_tools_leaves_asyncio_unloaded(self) -> None:
        self.assertEqual(run(SYNC_CALLS), "False")

    def test_an_async_handler_still_runs_once_asyncio_is_loaded_on_demand(self) -> None:
        self.assertEqual(run(ASYNC_HANDLER), "True {'a': 1}")


if __name__ == "__main__":
    unittest.main()
