"""Code under test never decides the gate's exit code.

A handler that writes its effect and calls `sys.exit(0)`, a world factory that raises `SystemExit(0)`,
a secrets hook whose exception cannot even be printed: before, `tool-eval` exited 0 with no reports
(the gate passed having checked nothing) or printed a traceback. Now a handler's exit is a failed call
(its case fails, the gate fails: exit 1, reports written), and a lab hook's is a broken lab (exit 2,
one line naming the hook, nothing written), on every replay path (one job or many; pooled, inline and
async handlers). Only a real Ctrl-C stops the command (see tests/test_stop_requests.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from agent_lab.cli import main

LAB_SOURCE = textwrap.dedent('''
    import asyncio, sys
    from agent_lab import Effect, Registry, ToolSpec
    from agent_lab.lab import Lab, Surface

    class World:
        def __init__(self):
            self.effects = []
            self.started = 0

    def stop():  # replaced below by each test
        raise SystemExit(0)

    def handler_for(world, execution):
        def put(arguments):
            world.started += 1
            world.effects.append({"key": arguments["key"]})
            if HANDLER_STOPS:
                stop()
            return {"ok": True}

        async def put_async(arguments):
            return put(arguments)

        return put_async if execution == "async" else put

    def build(world, **options):
        registry = Registry(**options)
        registry.register(ToolSpec(name="put", description="Put a value.", effect=Effect.WRITE,
                                   idempotency_key="key", execution="inline" if EXECUTION == "inline" else "pool",
                                   input_schema={"type": "object", "properties": {"key": {"type": "string"}},
                                                 "required": ["key"], "additionalProperties": False},
                                   output_schema={"type": "object"}), handler_for(world, EXECUTION))
        return registry

    def hook(name, answer):
        def run(*arguments, **options):
            if name == STOPPING:
                stop()
            return answer(*arguments) if callable(answer) else answer
        return run

    HANDLER_STOPS = False
    EXECUTION = "pool"
    STOPPING = None
''')

LAB_PARTS = textwrap.dedent('''
    lab = Lab(name="stops", world=hook("world", World),
              surfaces=[Surface("only", hook("build", lambda world: None) if STOPPING == "build" else build)],
              effects=hook("effects", lambda world: world.effects), secrets=hook("secrets", []),
              settle=hook("settle", None), writes_started=hook("writes_started", lambda world: world.started))
''')

CASE = {"case_id": "put-once", "intent": "Put one value.", "actor": {"id": "a", "tenant": "t", "permissions": []},
        "calls": [{"tool": "put", "arguments": {"key": "k-1"}}, {"do": "settle"}],
        "expected": {"outcome": "succeeded", "side_effects": 1}}
BACKGROUND_CASE = {"case_id": "put-behind", "intent": "Put one value in the background.",
                   "actor": {"id": "a", "tenant": "t", "permissions": []},
                   "calls": [{"tool": "put", "arguments": {"key": "k-2"}, "background": True},
                             {"do": "await_write_started"}, {"do": "settle"}],
                   "expected": {"outcome": "succeeded", "side_effects": 1}}

STOPS = {  # what code under test raises, as written in the lab's source
    "sys.exit(0)": "sys.exit(0)",
    "SystemExit(3)": "raise SystemExit(3)",
    "KeyboardInterrupt": "raise KeyboardInterrupt",
    "GeneratorExit": "raise GeneratorExit",
    "a BaseException subclass": "raise type('Odd', (BaseException,), {})('odd')",
}


class CodeUnderTestTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.cases = self.dir / "cases.jsonl"
        self.cases.write_text("".join(json.dumps(case) + "\n" for case in (CASE, BACKGROUND_CASE)), encoding="utf-8")
        # Python's own Ctrl-C handler, so the command tracks Ctrl-C as it does in a terminal.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        self.labs = 0

    def lab(self, statement: str, **settings: object) -> str:
        self.labs += 1
        path = self.dir / f"stops_lab_{self.labs}.py"
        assignments = "".join(f"{name} = {value!r}\n" for name, value in settings.items())
        stop = f"def stop():\n    {statement}\n"
        path.write_text(LAB_SOURCE + assignments + stop + LAB_PARTS, encoding="utf-8")
        return f"{path}:lab"

    def tool_eval(self, lab: str, *options: str) -> tuple[int, str, str, Path]:
        out = self.dir / f"out-{self.labs}"
        stdout, stderr = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = main(["tool-eval", "--lab", lab, "--cases", str(self.cases), "--out", str(out), *options])
        except BaseException as escaped:  # noqa: BLE001 - that is the defect under test
            self.fail(f"tool-eval raised {type(escaped).__name__} (stderr: {stderr.getvalue()!r})")
        return code, stdout.getvalue(), stderr.getvalue(), out

    def test_a_handler_that_stops_fails_its_case_and_the_gate_on_every_replay_path(self) -> None:
        for name, statement in STOPS.items():
            for execution in ("pool", "inline", "async"):
                for jobs in ("1", "4"):
                    with self.subTest(stop=name, execution=execution, jobs=jobs):
                        lab = self.lab(statement, HANDLER_STOPS=True, EXECUTION=execution)
                        code, stdout, stderr, out = self.tool_eval(lab, "-j", jobs)
                        self.assertEqual(code, 1, stderr)
                        self.assertIn("gate FAILED", stdout)
                        lines = [json.loads(line) for line in (out / "tool-runs.jsonl").read_text().splitlines()]
                        results = [line["result"] for line in lines if line["kind"] == "call"]
                        self.assertEqual(len(results), 2)
                        self.assertEqual({(result["error"]["code"], result["outcome"]) for result in results},
                                         {("handler_exception", "unknown")})

    def test_a_lab_hook_that_stops_is_a_broken_lab_named_in_one_line_and_nothing_is_written(self) -> None:
        hooks = {"world": "world()", "build": "surface 'only': build(world)", "effects": "effects(world)",
                 "secrets": "secrets(world)", "settle": "settle(world)", "writes_started": "writes_started(world)"}
        for hook, shown in hooks.items():
            for name, statement in STOPS.items():
                for jobs in ("1", "4"):
                    with self.subTest(hook=hook, stop=name, jobs=jobs):
                        lab = self.lab(statement, STOPPING=hook)
                        code, stdout, stderr, out = self.tool_eval(lab, "-j", jobs)
                        self.assertEqual((code, stdout), (2, ""), stderr)
                        self.assertEqual(len(stderr.splitlines()), 1, stderr)
                        self.assertIn(f"{lab}: {shown} raised ", stderr)
                        self.assertNotIn("Traceback", stderr)
                        self.assertFalse(out.exists())

    def test_a_hook_whose_exception_cannot_be_shown_is_a_broken_lab_in_one_line(self) -> None:
        unreadable = {
            "__str__ raises": "def __str__(self):\n            raise RuntimeError('no')",
            "__str__ calls sys.exit": "def __str__(self):\n            sys.exit(0)",
            "__str__ returns no text": "def __str__(self):\n            return 42",
        }
        for name, method in unreadable.items():
            for hook in ("secrets", "world", "build"):
                with self.subTest(str=name, hook=hook):
                    statement = f"class Unprintable(Exception):\n        {method}\n    raise Unprintable()"
                    lab = self.lab(statement, STOPPING=hook)
                    code, stdout, stderr, out = self.tool_eval(lab)
                    self.assertEqual((code, stdout), (2, ""), stderr)
                    self.assertEqual(stderr.splitlines(), [f"{lab}: {self.shown(hook)} raised Unprintable: "
                                                           "[message unreadable]"])

    def test_a_registry_whose_own_methods_stop_is_a_broken_lab(self) -> None:
        lab = self.lab("sys.exit(0)")
        source = Path(lab.rpartition(":")[0])
        source.write_text(source.read_text(encoding="utf-8") + textwrap.dedent('''
            class Stopping(Registry):
                def invoke(self, *arguments, **options):
                    sys.exit(0)

            def stopping_build(world, **options):
                registry = Stopping(**options)
                registry.register(ToolSpec(name="put", description="Put.", input_schema={"type": "object"},
                                           output_schema={"type": "object"}), lambda arguments: {})
                return registry

            lab = Lab(name="stops", world=World, surfaces=[Surface("only", stopping_build)],
                      effects=lambda world: world.effects)
        '''), encoding="utf-8")
        self.cases.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
        for jobs in ("1", "4"):
            with self.subTest(jobs=jobs):
                code, stdout, stderr, out = self.tool_eval(lab, "-j", jobs)
                self.assertEqual((code, stdout), (2, ""), stderr)
                self.assertEqual(stderr.splitlines(), [f"{lab}: case 'put-once' on surface 'only': the lab's code "
                                                       "raised SystemExit: 0"])
                self.assertFalse(out.exists())

    def test_an_in_process_agent_that_stops_is_an_infrastructure_failure_never_a_clean_exit(self) -> None:
        module = self.dir / "stopping_agents.py"
        module.write_text("import sys\n\ndef exits(request):\n    sys.exit(0)\n\n"
                          "def interrupts(request):\n    raise KeyboardInterrupt\n", encoding="utf-8")
        sys.path.insert(0, str(self.dir))
        self.addCleanup(sys.path.remove, str(self.dir))
        self.addCleanup(sys.modules.pop, "stopping_agents", None)
        for agent in ("exits", "interrupts"):
            with self.subTest(agent=agent):
                out = self.dir / f"model-eval-{agent}"
                stdout, stderr = io.StringIO(), io.StringIO()
                try:
                    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                        code = main(["model-eval", "--model", f"python:stopping_agents:{agent}", "--repeats", "1",
                                     "--split", "heldout", "--out", str(out)])
                except BaseException as escaped:  # noqa: BLE001 - that is the defect under test
                    self.fail(f"model-eval raised {type(escaped).__name__}")
                self.assertEqual(code, 1, stderr.getvalue())
                self.assertIn("infrastructure failure(s)", stdout.getvalue())
                runs = (out / "model-eval-runs.jsonl").read_text(encoding="utf-8")
                self.assertIn("the in-process agent raised", runs)

    @staticmethod
    def shown(hook: str) -> str:
        return {"world": "world()", "build": "surface 'only': build(world)"}.get(hook, f"{hook}(world)")


if __name__ == "__main__":
    unittest.main()
