"""Registering tools: handler signatures, duplicate names, catalog, lifecycle."""

from __future__ import annotations

import asyncio
import functools
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.context import CallContext
from agent_lab.errors import Outcome, ToolFailure
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import READER, get_ticket, get_ticket_spec


def spec(name: str) -> ToolSpec:
    return ToolSpec(name=name, description="d", input_schema={"type": "object"})


class HandlerSignatureTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)

    def output_of(self, handler: Any) -> Any:
        name = f"tool_{len(self.registry.names())}"
        self.registry.register(spec(name), handler)
        result = self.registry.invoke(ToolCall(name, {"x": 1}, call_id="c-1"), actor=READER)
        self.assertTrue(result.ok, result)
        return result.output

    def test_a_handler_may_take_only_the_arguments(self) -> None:
        self.assertEqual(self.output_of(lambda arguments: arguments["x"]), 1)

    def test_a_second_positional_parameter_receives_the_context(self) -> None:
        self.assertEqual(self.output_of(lambda arguments, context: context.call_id), "c-1")

    def test_a_keyword_only_ctx_or_a_call_context_annotation_receives_the_context(self) -> None:
        def named(arguments, *, ctx):
            return ctx.tool

        def annotated(arguments, *, info: CallContext):
            return info.actor.id

        self.assertEqual(self.output_of(named), "tool_0")
        self.assertEqual(self.output_of(annotated), READER.id)

    def test_bound_methods_callable_objects_and_partials_work(self) -> None:
        class Tool:
            def __call__(self, arguments, ctx):
                return ctx.call_id

            def method(self, arguments):
                return "method"

        def scaled(factor, arguments):
            return arguments["x"] * factor

        self.assertEqual(self.output_of(Tool()), "c-1")
        self.assertEqual(self.output_of(Tool().method), "method")
        self.assertEqual(self.output_of(functools.partial(scaled, 10)), 10)

    def test_async_handlers_and_async_callable_objects_work(self) -> None:
        async def coroutine_handler(arguments, ctx):
            await asyncio.sleep(0)
            return ctx.call_id

        class AsyncTool:
            async def __call__(self, arguments):
                return "async object"

        self.assertEqual(self.output_of(coroutine_handler), "c-1")
        self.assertEqual(self.output_of(AsyncTool()), "async object")

    def test_the_context_carries_the_registry_cursor_codec_bound_to_the_tool_and_actor(self) -> None:
        registry = Registry(cursor_secret=b"k" * 32)
        self.addCleanup(registry.close)
        registry.register(spec("page"), lambda arguments, ctx: ctx.cursors.issue(20, {"q": "a"}))
        token = registry.invoke(ToolCall("page", {}), actor=READER).output
        other = Registry(cursor_secret=b"k" * 32)  # the same secret: another process of the same service
        self.addCleanup(other.close)
        self.assertEqual(other.cursors.bound("page", READER.tenant, READER.id).read(token, {"q": "a"}), 20)
        with self.assertRaises(ToolFailure):
            other.cursors.read(token, {"q": "a"})  # not unbound, nor for another tool or actor

    def test_a_handler_that_takes_no_arguments_is_refused_at_registration(self) -> None:
        with self.assertRaisesRegex(TypeError, "first positional parameter"):
            self.registry.register(spec("nothing"), lambda: None)

    def test_a_handler_that_cannot_be_called_with_arguments_or_with_arguments_and_ctx_is_refused(self) -> None:
        # Issue 8, item 14: refused at register with a clear TypeError, not a handler_exception per call.
        def extra_required(arguments, ctx, limit):
            return {}

        def required_keyword(arguments, *, flag):
            return {}

        async def async_extra(arguments, ctx, limit):
            return {}

        for handler in (lambda a, b, c: {}, extra_required, required_keyword, async_extra,
                        functools.partial(lambda a, b, c, d: {}, 1)):
            with self.subTest(handler=getattr(handler, "__name__", "partial")):
                with self.assertRaisesRegex(TypeError, r"cannot be called as handler\(arguments\) or "
                                                       r"handler\(arguments, ctx\)"):
                    self.registry.register(spec(f"bad_{len(self.registry.names())}"), handler)
        self.assertEqual(self.registry.names(), [])

    def test_handlers_whose_extra_parameters_have_defaults_are_accepted(self) -> None:
        self.assertEqual(self.output_of(lambda arguments, ctx, limit=10: limit), 10)
        self.assertEqual(self.output_of(lambda arguments, *, flag=False, ctx: ctx.call_id), "c-1")
        self.assertEqual(self.output_of(lambda *args: len(args)), 1)
        self.assertEqual(self.output_of(lambda arguments, **options: sorted(options)), [])

    def test_a_handler_whose_signature_cannot_be_read_is_called_with_the_arguments(self) -> None:
        class NoSignature:
            """A callable object inspect cannot read (as for some builtins and C extensions)."""

            @property
            def __signature__(self):
                raise ValueError("no signature")

            def __call__(self, *args):
                return {"received": len(args)}

        class BrokenSignature(NoSignature):
            @property
            def __signature__(self):
                raise RuntimeError("a broken wrapper")

        self.assertEqual(self.output_of(dict), {"x": 1})  # a builtin type: its signature is not readable
        self.assertEqual(self.output_of(NoSignature()), {"received": 1})
        self.assertEqual(self.output_of(BrokenSignature()), {"received": 1})

    def test_something_that_is_not_callable_is_refused(self) -> None:
        with self.assertRaises(TypeError):
            self.registry.register(spec("x"), "not a function")
        with self.assertRaises(TypeError):
            self.registry.register({"name": "x"}, get_ticket)


class SameCodeHandlersTest(unittest.TestCase):
    """Closures made by one `def` (a lab builds one set per case) are read once; what differs
    between them and changes how they can be called is still seen."""

    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)

    def test_closures_of_one_def_each_receive_what_their_signature_asks_for(self) -> None:
        def make(offset: int, *, keyword: bool) -> Any:
            if keyword:
                def by_keyword(arguments, *, ctx):  # type: ignore[no-untyped-def]
                    return [offset, ctx.call_id]
                return by_keyword

            def positional(arguments, context):  # type: ignore[no-untyped-def]
                return [offset, context.call_id]
            return positional

        for number, handler in enumerate([make(1, keyword=False), make(2, keyword=False), make(3, keyword=True),
                                          make(4, keyword=True)]):
            self.registry.register(spec(f"t{number}"), handler)
            result = self.registry.invoke(ToolCall(f"t{number}", {}, call_id=f"c-{number}"), actor=READER)
            self.assertEqual(result.output, [number + 1, f"c-{number}"])

    def test_a_default_taken_away_from_a_function_of_the_same_code_is_seen(self) -> None:
        def make() -> Any:
            def handler(arguments, ctx, extra=None):  # type: ignore[no-untyped-def]
                return "ran"
            return handler

        self.registry.register(spec("with_default"), make())
        without = make()
        without.__defaults__ = None  # now three required parameters: it can never be called
        with self.assertRaises(TypeError):
            self.registry.register(spec("without_default"), without)


class RegistryBookkeepingTest(unittest.TestCase):
    def test_a_duplicate_name_is_refused(self) -> None:
        with Registry() as registry:
            registry.register(get_ticket_spec(), get_ticket)
            with self.assertRaisesRegex(ValueError, "'get_ticket' is already registered"):
                registry.register(get_ticket_spec(description="Another."), get_ticket)

    def test_spec_and_names(self) -> None:
        with Registry() as registry:
            registry.register(spec("b"), get_ticket)
            registry.register(spec("a"), get_ticket)
            self.assertEqual(registry.names(), ["b", "a"])
            self.assertEqual(registry.spec("a").name, "a")
            with self.assertRaises(KeyError):
                registry.spec("c")

    def test_a_closed_registry_refuses_calls_without_raising(self) -> None:
        registry = Registry()
        registry.register(spec("t"), lambda arguments: {})
        registry.close()
        result = registry.invoke(ToolCall("t", {}), actor=READER)
        self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))
        registry.close()  # closing twice is harmless

    def test_max_workers_must_be_a_positive_integer(self) -> None:
        for value in (0, -1, 1.5, True):
            with self.subTest(value=value), self.assertRaises(ValueError):
                Registry(max_workers=value)


if __name__ == "__main__":
    unittest.main()
