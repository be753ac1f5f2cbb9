"""Nothing a handler or a model does escapes Registry.invoke as an exception."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import unittest
from unittest import mock
from typing import Any

from agent_lab.audit import MemoryAuditSink
from agent_lab.calls import ToolCall, ToolResult
from agent_lab.errors import Outcome, ToolFailure
from agent_lab.jsonvalue import find_non_json
from agent_lab.policy import Approval
from agent_lab.registry import EXACT_SIZE_FACTOR, Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import READER, WRITER, EffectLog, followup_call, followup_spec, ticket_registry

OPEN_SCHEMA = {"type": "object"}
SECRET = "sk-live-THIS-MUST-NOT-LEAK"


class CustomBaseException(BaseException):
    pass


def raising(exception: BaseException):
    def handler(arguments: Any) -> Any:
        raise exception

    return handler


def returning(value: Any):
    return lambda arguments: value


def deeply_nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


class HandlerContainmentTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.tools = 0
        logging.disable(logging.CRITICAL)  # contained exceptions are logged on purpose
        self.addCleanup(logging.disable, logging.NOTSET)

    def invoke_with(self, handler, *, effect: str = "read", **spec_options: Any) -> ToolResult:
        self.tools += 1
        name = f"tool_{self.tools}"
        self.registry.register(ToolSpec(name=name, description="d", input_schema=OPEN_SCHEMA, effect=effect,
                                        **spec_options), handler)
        result = self.registry.invoke(ToolCall(name, {}), actor=READER)
        self.assertIsInstance(result, ToolResult)
        return result

    def test_exceptions_of_every_kind_become_handler_exception(self) -> None:
        for exception in (ValueError(SECRET), RuntimeError(), RecursionError(), MemoryError(), GeneratorExit(),
                          asyncio.CancelledError(), CustomBaseException(SECRET), StopIteration(), KeyError(SECRET)):
            with self.subTest(exception=type(exception).__name__):
                result = self.invoke_with(raising(exception))
                self.assertEqual(result.error.code, "handler_exception")
                self.assertEqual(result.outcome, Outcome.FAILED)
                self.assertNotIn(SECRET, repr(result.to_model()))

    def test_an_exception_in_a_write_leaves_the_outcome_unknown(self) -> None:
        result = self.invoke_with(raising(ValueError(SECRET)), effect="write")
        self.assertEqual(result.outcome, Outcome.UNKNOWN)
        self.assertEqual(result.error.next_action.value, "lookup_status")
        self.assertFalse(result.error.retryable)

    def test_exceptions_from_async_handlers_are_contained_too(self) -> None:
        async def failing(arguments):
            raise ValueError(SECRET)

        result = self.invoke_with(failing)
        self.assertEqual(result.error.code, "handler_exception")
        self.assertNotIn(SECRET, repr(result.to_model()))

    def test_non_json_outputs_are_invalid_tool_output(self) -> None:
        datetime = __import__("datetime")
        for output in (float("nan"), float("inf"), {1: "a"}, {"a": {1, 2}}, b"bytes", object(),
                       {"when": datetime.datetime(2020, 1, 1)}, {"at": datetime.time(9, 30)}, deeply_nested(200)):
            with self.subTest(output=type(output).__name__):
                result = self.invoke_with(returning(output))
                self.assertEqual(result.error.code, "invalid_tool_output")
                self.assertEqual(result.outcome, Outcome.FAILED)

    def test_huge_output_is_output_too_large(self) -> None:
        result = self.invoke_with(returning({"rows": ["x" * 100] * 100}), max_output_bytes=1000)
        self.assertEqual(result.error.code, "output_too_large")
        self.assertEqual(result.error.next_action.value, "narrow_request")
        self.assertEqual(result.error.details["max_output_bytes"], 1000)

    def test_an_output_over_budget_is_refused_by_its_size_before_it_is_walked_value_by_value(self) -> None:
        # Measuring with the C encoder first refuses a huge output in a fraction of the time a walk takes.
        with mock.patch("agent_lab.steps.details.find_non_json", wraps=find_non_json) as walk:
            # Not JSON (integer keys), yet the encoder can size it: over budget is said before why not JSON.
            result = self.invoke_with(returning({"rows": [{1: "x" * 100}] * 100}), max_output_bytes=1000)
            self.assertEqual(result.error.code, "output_too_large")
            walk.assert_not_called()
            self.assertEqual(self.invoke_with(returning({"rows": [{1: "x"}]})).error.code, "invalid_tool_output")
            walk.assert_called_once()

    def test_refusing_a_huge_output_takes_memory_in_proportion_to_the_budget_not_the_output(self) -> None:
        import tracemalloc

        huge = {"rows": [{"n": index, "tag": "x"} for index in range(100_000)]}  # about 2 MB of JSON
        self.invoke_with(returning({"warm": True}), max_output_bytes=1000)
        tracemalloc.start()
        try:
            result = self.invoke_with(returning(huge), max_output_bytes=1000)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual(result.error.code, "output_too_large")
        self.assertEqual(dict(result.error.details), {"max_output_bytes": 1000, "output_bytes_at_least": 1000 * EXACT_SIZE_FACTOR + 1})
        # Encoding or copying the whole output would take megabytes; reading the budget's worth, kilobytes.
        self.assertLess(peak, 512 * 1024)

    def test_no_code_of_a_returned_dict_subclass_runs_on_the_callers_thread_after_the_handler(self) -> None:
        # Whatever the handler returned is read through the dict's own storage: a subclass's `items()`
        # is handler code, and one that blocks would hold the caller past the deadline, where nothing
        # can stop it. The checked, kept output is the plain copy, and it is measured as such.
        calls: list[str] = []

        class Lazy(dict):
            def items(self):
                calls.append("items")
                return super().items()

        for output in (Lazy(answer=1), {"rows": [Lazy(answer=1)]}, Lazy(big=2**70)):
            with self.subTest(output=output):
                result = self.invoke_with(returning(output))
                self.assertTrue(result.ok, result)
                self.assertEqual(result.to_model()["output"], output)
        over = self.invoke_with(returning({"rows": [Lazy(text="x" * 500)]}), max_output_bytes=100)
        self.assertEqual(over.error.code, "output_too_large")
        self.assertEqual(calls, [])

    def test_output_size_counts_utf8_bytes_of_compact_json(self) -> None:
        self.assertTrue(self.invoke_with(returning("é" * 4), max_output_bytes=10).ok)  # "éééé" is 10 bytes
        self.assertEqual(self.invoke_with(returning("é" * 5), max_output_bytes=11).error.code, "output_too_large")

    def test_a_handler_that_mutates_its_arguments_cannot_change_the_receipt(self) -> None:
        def vandal(arguments):
            arguments["ticket_id"] = "T-9999"
            arguments.clear()
            return {"ok": True}

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(followup_spec(), vandal)
        call = followup_call()
        first = registry.invoke(call, actor=WRITER)
        self.assertEqual(call.arguments["ticket_id"], "T-1001")
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertTrue(first.ok)

    def test_the_handler_receives_exactly_the_arguments_that_were_checked_and_approved(self) -> None:
        class TwoFaced(dict):
            """A mapping whose methods describe other contents than the dict really holds."""

            def items(self):
                return [("ticket_id", "T-1001"), ("note", "Refund 10000 EUR."), ("action_id", "act-1")]

            def values(self):
                return [value for _, value in self.items()]

            def get(self, key, default=None):
                return dict(self.items()).get(key, default)

        seen: list[Any] = []
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(followup_spec(approval="always"), lambda arguments: seen.append(arguments) or {"ok": True})
        approved = followup_call(note="Refund 10 EUR.")
        approval = registry.approval_for(approved, actor=WRITER, approver="manager")
        result = registry.invoke(ToolCall(approved.name, TwoFaced(approved.arguments)), actor=WRITER,
                                 approval=approval)
        self.assertTrue(result.ok, result)
        self.assertEqual(seen, [approved.arguments])
        self.assertIs(type(seen[0]), dict)
        self.assertEqual(result.fingerprint, approval.fingerprint)

    def test_string_and_number_subclasses_reach_the_handler_as_plain_json_values(self) -> None:
        class Shouting(str):
            def __eq__(self, other: object) -> bool:
                return True

            __hash__ = str.__hash__

        class Count(int):
            pass

        seen: list[Any] = []
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="echo", description="d", input_schema=OPEN_SCHEMA),
                          lambda arguments: seen.append(arguments) or {})
        self.assertTrue(registry.invoke(ToolCall("echo", {Shouting("k"): [Shouting("v"), Count(3)]}), actor=READER).ok)
        ((key, value),) = seen[0].items()
        self.assertEqual([type(key), type(value[0]), type(value[1])], [str, str, int])
        self.assertEqual(seen, [{"k": ["v", 3]}])

    def test_the_result_keeps_the_output_that_was_checked_even_if_the_handler_changes_it_later(self) -> None:
        owned = {"items": [1, 2, 3]}  # e.g. a backend's cached object, still referenced by the backend
        result = self.invoke_with(returning(owned), max_output_bytes=100,
                                  output_schema={"type": "object", "properties": {"items": {"maxItems": 3}}})
        self.assertTrue(result.ok)
        owned["items"].extend(range(1000))
        owned["secret"] = SECRET
        self.assertEqual(result.to_model()["output"], {"items": [1, 2, 3]})
        self.assertIsNot(result.output, owned)

    def test_a_result_holding_a_string_subclass_from_the_handler_can_still_be_shown(self) -> None:
        class Unprintable(str):
            def __repr__(self) -> str:
                raise RuntimeError("no repr")

        result = self.invoke_with(returning({"name": Unprintable("Ada")}))
        self.assertIn("Ada", repr(result))
        self.assertIs(type(result.output["name"]), str)
        failure = ToolFailure("conflict", Unprintable("The ticket is closed."), details={"state": Unprintable("closed")})
        failed = self.invoke_with(raising(failure))
        self.assertIn("closed", repr(failed))
        self.assertEqual([type(failed.error.message), type(failed.error.details["state"])], [str, str])
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="echo", description="d", input_schema=OPEN_SCHEMA), returning({}))
        echoed = registry.invoke(ToolCall(Unprintable("echo"), {}, call_id=Unprintable("c-1")), actor=READER)
        self.assertIn("c-1", repr(echoed))
        self.assertEqual([type(echoed.tool), type(echoed.call_id)], [str, str])

    def test_a_failing_audit_sink_does_not_break_the_call(self) -> None:
        class BrokenSink:
            def write(self, record):
                raise OSError("disk full")

        registry = ticket_registry(audit=BrokenSink())
        self.addCleanup(registry.close)
        self.assertTrue(registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER).ok)

    def test_a_failing_receipt_store_refuses_without_running_the_write(self) -> None:
        class BrokenStore:
            def reserve(self, key, fingerprint, **options):
                raise OSError("database is locked")

            def close(self):
                pass

        effects = EffectLog()
        registry = ticket_registry(effects, receipts=BrokenStore())
        self.addCleanup(registry.close)
        result = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("receipt_store_unavailable", Outcome.REJECTED))
        self.assertEqual(effects.effects, [])

    def test_a_bug_in_a_step_becomes_an_internal_error_result(self) -> None:
        class ExplodingValidator:
            def errors(self, instance):
                raise RuntimeError("validator bug")

        spec = ToolSpec(name="fragile", description="d", input_schema=OPEN_SCHEMA)
        object.__setattr__(spec, "input_validator", ExplodingValidator())
        ran = []
        self.registry.register(spec, lambda arguments: ran.append(1))
        result = self.registry.invoke(ToolCall("fragile", {}), actor=READER)
        self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))
        self.assertEqual(ran, [])

    def test_tool_failure_with_non_json_details_is_shown_without_them(self) -> None:
        from agent_lab.errors import ToolFailure

        result = self.invoke_with(raising(ToolFailure("conflict", "Already closed.", details={"at": object()})))
        self.assertEqual(result.error.code, "conflict")
        self.assertEqual(dict(result.error.details), {})

    def test_no_code_of_a_tool_failures_fields_runs_on_the_callers_thread_after_the_handler(self) -> None:
        # The record step reads a failure's code (does it free the key?) and writes its fields to the
        # receipt and the audit record on the caller's thread, past the handler: a str subclass whose
        # __eq__ blocks held the caller six seconds past a 200 ms deadline. The fields are made plain on
        # the thread that ran the handler.
        callers_thread = threading.get_ident()
        ran: list[str] = []

        class Watched(str):
            def __eq__(self, other: object) -> bool:
                if threading.get_ident() == callers_thread:
                    ran.append("__eq__")
                return str.__eq__(self, other)

            __hash__ = str.__hash__

        def fail(arguments: Any) -> Any:
            raise ToolFailure(Watched("ticket_gone"), Watched("Gone."), category=Watched("not_found"),
                              details={Watched("id"): Watched("T-1")})

        registry = Registry(audit=MemoryAuditSink())
        self.addCleanup(registry.close)
        registry.register(ToolSpec(name="close_ticket", description="d", effect="write", idempotency_key="action_id",
                                   input_schema={"type": "object", "properties": {"action_id": {"type": "string"}},
                                                 "required": ["action_id"]}), fail)
        result = registry.invoke(ToolCall("close_ticket", {"action_id": "a-1"}), actor=READER)
        self.assertEqual(result.error.code, "ticket_gone")
        self.assertEqual(dict(result.error.details), {"id": "T-1"})
        self.assertIs(type(result.error.code), str)
        self.assertIs(type(result.error.message), str)
        json.dumps(result.to_model())
        self.assertEqual(ran, [])

    def test_a_tool_failure_whose_code_is_not_text_is_an_internal_error(self) -> None:
        result = self.invoke_with(raising(ToolFailure(object(), "Gone.", category="not_found")))  # type: ignore[arg-type]
        self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.FAILED))

    def test_tool_failure_details_over_the_output_budget_are_dropped_not_kept(self) -> None:
        # Two million keys were copied whole, then turned into the receipt on the caller's thread, 2.6 s
        # past the deadline; they reached the model too. Details obey the tool's output budget.
        huge = {f"k{number}": number for number in range(200_000)}
        result = self.invoke_with(raising(ToolFailure("conflict", "Already closed.", details=huge)),
                                  max_output_bytes=1000)
        self.assertEqual((result.error.code, dict(result.error.details)), ("conflict", {}))
        kept = self.invoke_with(raising(ToolFailure("conflict", "Already closed.", details={"ticket": "T-1"})),
                                max_output_bytes=1000)
        self.assertEqual(dict(kept.error.details), {"ticket": "T-1"})

    def test_a_tool_failure_code_longer_than_the_output_budget_is_an_internal_error(self) -> None:
        # A message is cut to the budget and details over it are dropped, but a code of 20 MB reached the
        # model, the receipt and the audit record whole. A code is a name (cut, it would name another):
        # one longer than the budget is the handler's bug.
        audit = MemoryAuditSink()
        self.registry = Registry(audit=audit)
        self.addCleanup(self.registry.close)
        result = self.invoke_with(raising(ToolFailure("x" * 1001, "Gone.", category="not_found")),
                                  max_output_bytes=1000)
        self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.FAILED))
        self.assertLess(len(json.dumps(result.to_model())), 1000)
        self.assertNotIn("x" * 1001, json.dumps(audit.records, default=str))
        kept = self.invoke_with(raising(ToolFailure("x" * 1000, "Gone.", category="not_found")), max_output_bytes=1000)
        self.assertEqual(kept.error.code, "x" * 1000)

    def test_a_tool_failure_message_is_cut_to_the_output_budget(self) -> None:
        result = self.invoke_with(raising(ToolFailure("conflict", "x" * 5000)), max_output_bytes=1000)
        self.assertEqual(len(result.error.message), 1000)
        self.assertTrue(result.error.message.endswith("\u2026"))


class HostileCallFieldsTest(unittest.TestCase):
    """A ToolCall subclass, a call id or a name of a str subclass, an attempt of an int subclass: their own
    code (a property, __bool__, __ge__, __class__) raised out of invoke before its first step."""

    def setUp(self) -> None:
        self.registry = ticket_registry()
        self.addCleanup(self.registry.close)
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)

    def both(self, call: Any, **options: Any) -> list[ToolResult]:
        results = [self.registry.invoke(call, actor=READER, **options),
                   asyncio.run(self.registry.ainvoke(call, actor=READER, **options))]
        for result in results:
            self.assertIsInstance(result, ToolResult)
        return results

    def test_a_call_id_whose_truth_raises_is_taken_as_its_text(self) -> None:
        class BadId(str):
            def __bool__(self) -> bool:
                raise ValueError("call_id truthiness")

        for result in self.both(ToolCall("get_ticket", {"ticket_id": "T-1001"}, call_id=BadId("c-1"))):
            self.assertTrue(result.ok, result)
            self.assertEqual((result.call_id, type(result.call_id)), ("c-1", str))

    def test_a_name_whose_class_raises_is_a_call_without_a_name(self) -> None:
        class Sly:
            @property
            def __class__(self):  # type: ignore[override]
                raise ValueError("who asks?")

        for result in self.both(ToolCall(Sly(), {"ticket_id": "T-1001"})):  # type: ignore[arg-type]
            self.assertFalse(result.ok)

    def test_a_tool_call_subclass_whose_fields_raise_is_refused(self) -> None:
        class Haunted(ToolCall):
            @property
            def name(self):  # type: ignore[override]
                raise RuntimeError("no name today")

        for result in self.both(Haunted.__new__(Haunted)):
            self.assertFalse(result.ok)

    def test_arguments_holding_an_object_with_a_class_of_its_own_are_refused_without_asking_it(self) -> None:
        # isinstance() asks an object for its `__class__`: one that raised SystemExit escaped invoke on
        # the main thread, one that slept held the caller past the deadline. Types are read with type().
        asked: list[str] = []

        class Sly:
            @property
            def __class__(self):  # type: ignore[override]
                asked.append("__class__")
                raise SystemExit(7)

        for arguments in (Sly(), {"ticket_id": Sly()}, {"ticket_id": [Sly()]}, [Sly()]):
            for result in self.both(ToolCall("get_ticket", arguments)):
                self.assertEqual(result.error.code, "invalid_arguments")
        self.assertEqual(asked, [])

    def test_an_attempt_whose_comparison_raises_is_recorded_as_its_number(self) -> None:
        class OddAttempt(int):
            def __ge__(self, other: object) -> bool:
                raise ValueError("no comparing")

        for result in self.both(ToolCall("get_ticket", {"ticket_id": "T-1001"}), attempt=OddAttempt(2)):
            self.assertTrue(result.ok, result)


class GarbageCallTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = ticket_registry()
        self.addCleanup(self.registry.close)
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)

    def assert_invalid_arguments(self, call: Any) -> ToolResult:
        result = self.registry.invoke(call, actor=READER)
        self.assertIsInstance(result, ToolResult)
        self.assertEqual(result.error.code, "invalid_arguments", result)
        self.assertEqual(result.outcome, Outcome.REJECTED)
        self.assertTrue(result.error.details["violations"])
        return result

    def test_a_dict_or_anything_else_instead_of_a_tool_call_is_the_developers_type_error(self) -> None:
        # Not arguments a model could fix: the application passed the wrong thing. Nothing is recorded.
        for garbage in (None, "get_ticket", {"name": "get_ticket", "arguments": {}}, 42, object()):
            with self.subTest(garbage=type(garbage).__name__):
                with self.assertRaisesRegex(TypeError, f"invoke takes a ToolCall, not {type(garbage).__name__}"):
                    self.registry.invoke(garbage, actor=READER)
                with self.assertRaisesRegex(TypeError, "invoke takes a ToolCall"):
                    asyncio.run(self.registry.ainvoke(garbage, actor=READER))

    def test_tool_names_that_are_not_strings(self) -> None:
        for name in (None, 1, b"get_ticket", ["get_ticket"]):
            with self.subTest(name=name):
                self.assert_invalid_arguments(ToolCall(name, {"ticket_id": "T-1001"}))

    def test_arguments_that_are_not_objects(self) -> None:
        for arguments in (None, [], "T-1001", 3, True, ("T-1001",)):
            with self.subTest(arguments=arguments):
                self.assert_invalid_arguments(ToolCall("get_ticket", arguments))

    def test_arguments_with_non_json_values(self) -> None:
        for value in (float("nan"), float("-inf"), ("T", "1"), {"T"}, b"T-1001", object()):
            with self.subTest(value=type(value).__name__):
                self.assert_invalid_arguments(ToolCall("get_ticket", {"ticket_id": value}))

    def test_absurd_nesting_is_refused_without_recursion_error(self) -> None:
        self.assert_invalid_arguments(ToolCall("get_ticket", {"ticket_id": deeply_nested(100_000)}))

    def test_violation_messages_never_contain_the_value(self) -> None:
        result = self.assert_invalid_arguments(ToolCall("get_ticket", {"ticket_id": SECRET, "extra": SECRET}))
        self.assertNotIn(SECRET, repr(result.to_model()))

    def test_a_wrong_actor_or_deadline_is_refused_not_raised(self) -> None:
        for actor in (None, "u-reader", {"id": "x", "tenant": "acme"}):
            with self.subTest(actor=actor):
                result = self.registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=actor)
                self.assertEqual(result.error.code, "permission_denied")
        for deadline in ("soon", float("nan"), True, 10**400):
            with self.subTest(deadline=deadline):
                result = self.registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER,
                                              deadline=deadline)
                self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))
                self.assertIn("deadline is not a number", result.error.message)


if __name__ == "__main__":
    unittest.main()
