"""Issue 8, item 10: no log record, at any level, carries a handler's raw text.

A handler exception whose message holds a redacted argument's value (or an output value the call never
carried) must not reach any log record, DEBUG included: not its message, its arguments, its exc_info
or its stack text. Every record of every logger is captured by a handler at level 1 on the root logger
and formatted in full. What a developer still gets is asserted too: the exception's type, the tool,
the call id and the traceback's frames.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import secrets
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.execution import WITHHELD_MESSAGE
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

ACTOR = Actor(id="agent-1", tenant="acme", permissions=set())


class Everything(logging.Handler):
    """Keeps every record of every logger, formatted with its exc_info and stack info."""

    def __init__(self) -> None:
        super().__init__(level=1)
        self.records: list[logging.LogRecord] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        parts = []
        for record in self.records:
            parts.append(self.format(record))  # message, exc_info and stack_info, as a log file would hold
            parts.append(repr(record.args))
            parts.append(repr(record.__dict__))
        return "\n".join(parts)


def spec(name: str, *, redact: tuple[str, ...] = ("api_token",), effect: str = "read") -> ToolSpec:
    return ToolSpec(
        name=name,
        description="Calls an upstream service with a token.",
        input_schema={"type": "object", "properties": {"api_token": {"type": "string"}}, "required": ["api_token"]},
        redact=redact,
        effect=effect,
    )


class LogsNeverLeakTest(unittest.TestCase):
    def setUp(self) -> None:
        self.secret = "sk-" + secrets.token_hex(16)
        self.output_secret = "cust-" + secrets.token_hex(8) + "@example.test"
        self.capture = Everything()
        root = logging.getLogger()
        previous_level = root.level
        root.addHandler(self.capture)
        root.setLevel(1)
        self.addCleanup(root.setLevel, previous_level)
        self.addCleanup(root.removeHandler, self.capture)
        logging.disable(logging.NOTSET)
        self.registry = Registry()
        self.addCleanup(self.registry.close)

    def invoke(self, name: str, call_id: str = "call-7") -> Any:
        return self.registry.invoke(ToolCall(name, {"api_token": self.secret}, call_id=call_id), actor=ACTOR)

    def assertNothingLeaked(self) -> None:
        text = self.capture.text()
        self.assertTrue(self.capture.records, "the scenario should have logged something")
        for secret in (self.secret, self.output_secret):
            self.assertFalse(secret in text, "a secret reached a log record")  # never print the haystack

    def test_a_sync_handler_exception_with_a_secret_is_logged_without_it_at_debug(self) -> None:
        def leaky(arguments):
            try:
                raise KeyError(f"no customer {self.output_secret}")
            except KeyError as inner:
                raise RuntimeError(f"upstream refused {arguments['api_token']}") from inner

        self.registry.register(spec("leaky"), leaky)
        result = self.invoke("leaky")
        self.assertEqual(result.error.code, "handler_exception")
        self.assertNothingLeaked()
        debug = "\n".join(r.getMessage() for r in self.capture.records if r.levelno == logging.DEBUG)
        for expected in ("RuntimeError", "KeyError", "'leaky'", "call-7", "in leaky", WITHHELD_MESSAGE):
            self.assertIn(expected, debug)  # what a developer still gets

    def test_an_async_handler_exception_with_a_secret_is_logged_without_it(self) -> None:
        async def leaky(arguments):
            await asyncio.sleep(0)
            raise ValueError(f"bad token {arguments['api_token']}")

        self.registry.register(spec("async_leaky"), leaky)
        self.assertEqual(self.invoke("async_leaky").error.code, "handler_exception")
        self.assertEqual(asyncio.run(self.registry.ainvoke(ToolCall("async_leaky", {"api_token": self.secret}),
                                                           actor=ACTOR)).error.code, "handler_exception")
        self.assertNothingLeaked()

    def test_an_object_the_handler_returned_that_raises_a_secret_is_an_internal_error_logged_without_it(self) -> None:
        secret = self.output_secret

        class Unreadable(dict):
            def items(self):
                raise RuntimeError(f"cannot read {secret}")

        buried: Any = Unreadable(a=1)  # below the output's depth limit: the copy keeps it, the encoder reads it
        for _ in range(70):
            buried = [buried]
        self.registry.register(spec("unreadable", effect="write"), lambda arguments: {"rows": buried})
        self.assertEqual(self.invoke("unreadable").error.code, "internal_error")
        self.assertNothingLeaked()

    def test_a_task_the_handler_left_failing_on_the_registry_loop_is_logged_without_its_text(self) -> None:
        secret = self.output_secret

        async def boom():
            raise RuntimeError(f"background job failed for {secret}")

        async def fire_and_forget(arguments):
            task = asyncio.get_running_loop().create_task(boom())
            await asyncio.sleep(0.01)
            del task
            return {"started": True}

        self.registry.register(spec("fire_and_forget"), fire_and_forget)
        self.assertTrue(self.invoke("fire_and_forget").ok)
        gc.collect()  # the failed task is collected: asyncio reports its never-retrieved exception
        self.assertNothingLeaked()

    def test_a_tool_without_redacted_fields_still_shows_its_message_on_one_line(self) -> None:
        def plain(arguments):
            raise RuntimeError("upstream said no\nFORGED LOG LINE")

        self.registry.register(spec("plain", redact=()), plain)
        self.invoke("plain")
        debug = [r.getMessage() for r in self.capture.records if r.levelno == logging.DEBUG]
        self.assertTrue(any("upstream said no\\nFORGED LOG LINE" in message for message in debug))
        self.assertFalse(any("\nFORGED" in message for message in debug))


if __name__ == "__main__":
    unittest.main()
