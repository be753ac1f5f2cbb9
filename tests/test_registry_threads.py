"""Issue 8, item 13: registering tools while other threads list and call them is safe.

`catalog()`, `names()` and invoke's route step used to iterate the tool table while `register` added
to it, and raised `RuntimeError: dictionary changed size during iteration`. Readers race a writer
here; the interpreter switches threads as often as it can, so the race is met on most runs (without
the fix, 1 run in 5 failed here), and nothing here depends on timing. `RegisterInTheMiddleOfAListingTest`
meets it at one chosen instant instead, so without the fix it fails every time.
"""

from __future__ import annotations

import dis
import sys
import threading
import unittest

from agent_lab.calls import ToolCall
from agent_lab.policy import Actor
from agent_lab import registry as registry_module
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

TOOLS = 1_500
ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())


def spec(index: int) -> ToolSpec:
    return ToolSpec(name=f"tool_{index:05d}", description="d", input_schema={"type": "object"})


class RegisterWhileReadingTest(unittest.TestCase):
    def setUp(self) -> None:
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as possible: meet the race every run
        self.addCleanup(sys.setswitchinterval, interval)
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.specs = [spec(index) for index in range(TOOLS)]  # built first: registering is then quick

    def test_catalog_names_and_invoke_while_another_thread_registers(self) -> None:
        registered = threading.Event()
        failures: list[BaseException] = []
        seen_sizes: list[int] = []

        def register_all() -> None:
            try:
                for item in self.specs:
                    self.registry.register(item, lambda arguments: {})
            finally:
                registered.set()

        def read_until_registered(read) -> None:
            try:
                while not registered.is_set():
                    read()
                read()
            except BaseException as problem:  # noqa: BLE001 - reported by the test thread
                failures.append(problem)

        def catalog() -> None:
            seen_sizes.append(len(self.registry.catalog(ACTOR)))

        def names() -> None:
            self.registry.names()

        def unknown_call() -> None:
            result = self.registry.invoke(ToolCall("tool_0000x", {}), actor=ACTOR)  # close names walk the table
            if result.error is None or result.error.code != "tool_not_found":
                raise AssertionError(f"expected tool_not_found, got {result!r}")

        readers = [threading.Thread(target=read_until_registered, args=(read,)) for read in (catalog, names, unknown_call)]
        writer = threading.Thread(target=register_all)
        for thread in readers:
            thread.start()
        writer.start()
        for thread in [writer, *readers]:
            thread.join()
        self.assertEqual(failures, [])
        self.assertEqual(len(self.registry.names()), TOOLS)
        self.assertEqual(seen_sizes[-1], TOOLS)
        self.assertEqual(seen_sizes, sorted(seen_sizes))  # each listing is one whole table, never shrinking

    def test_concurrent_registrations_of_one_name_admit_exactly_one(self) -> None:
        outcomes: list[str] = []
        lock = threading.Lock()

        def register() -> None:
            try:
                self.registry.register(spec(1), lambda arguments: {})
                outcome = "registered"
            except ValueError:
                outcome = "refused"
            with lock:
                outcomes.append(outcome)

        threads = [threading.Thread(target=register) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(sorted(outcomes), ["refused"] * 7 + ["registered"])


class RegisterInTheMiddleOfAListingTest(unittest.TestCase):
    """The race above, met at one chosen instant instead of by the scheduler: a trace function stops
    `catalog()` after it has read the first tool of the table and registers another tool right there,
    as a thread switching at that instant would. The listing is still one whole table."""

    def test_a_tool_registered_while_catalog_reads_the_table_neither_breaks_nor_joins_that_listing(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        for index in range(3):
            registry.register(spec(index), lambda arguments: {})
        registered: list[str] = []

        def in_catalog(frame) -> bool:
            return frame.f_code.co_filename == registry_module.__file__ and frame.f_code.co_name in ("catalog", "<listcomp>")

        def trace_opcodes(frame, event, arg):
            if event == "opcode" and not registered:
                instruction = frame.f_code.co_code[frame.f_lasti]
                if dis.opname[instruction] == "FOR_ITER" and frame.f_locals.get("spec") is not None:
                    registered.append("tool_00003")  # the loop has taken one tool: the table is being read
                    registry.register(spec(3), lambda arguments: {})
            return trace_opcodes

        def trace_calls(frame, event, arg):
            if event == "call" and in_catalog(frame):
                frame.f_trace_opcodes = True
                return trace_opcodes
            return None

        sys.settrace(trace_calls)
        try:
            listing = registry.catalog()
        finally:
            sys.settrace(None)
        self.assertEqual(registered, ["tool_00003"], "the trace never met the loop over the table")
        self.assertEqual([entry["name"] for entry in listing], ["tool_00000", "tool_00001", "tool_00002"])
        self.assertEqual(len(registry.catalog()), 4)


if __name__ == "__main__":
    unittest.main()
