"""What a model can make one call cost (issue 8, items 5 and the input budget).

A tool's arguments are bounded in bytes before any validation work (`max_input_bytes`,
`input_too_large`), and validation stops once it has one violation more than the registry reports
(`Validator.errors(limit=...)`), so an invalid argument costs no more than a valid one of the same
size. The work is counted (calls of a format checker), never timed.
"""

from __future__ import annotations

import json
import unittest
from unittest import mock

from agent_lab import Actor, Registry, ToolCall, ToolSpec, Validator
from agent_lab.errors import CATALOGUE, Category, NextAction, Outcome
from agent_lab.registry import EXACT_SIZE_FACTOR, MAX_REPORTED_VIOLATIONS
from agent_lab.schema import formats
from agent_lab.spec import DEFAULT_MAX_INPUT_BYTES

ACTOR = Actor(id="agent", tenant="t")
NOTE_SCHEMA = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 5}}, "required": ["note"]}


def compact_bytes(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class InputBudgetSpecTest(unittest.TestCase):
    def test_max_input_bytes_is_checked_like_the_other_numbers(self) -> None:
        for bad, why in ((True, "must be an integer, not bool"), (1.5, "must be an integer, not float"),
                         ("10", "must be an integer, not str"), (0, "must be finite and greater than 0"),
                         (-1, "must be finite and greater than 0")):
            with self.subTest(value=bad):
                with self.assertRaisesRegex(ValueError, f"ToolSpec.max_input_bytes {why}"):
                    ToolSpec(name="t", description="d", input_schema={"type": "object"}, max_input_bytes=bad)

    def test_the_default_budget_is_part_of_the_runtime_half_only(self) -> None:
        spec = ToolSpec(name="t", description="d", input_schema={"type": "object"})
        self.assertEqual(spec.max_input_bytes, DEFAULT_MAX_INPUT_BYTES)
        self.assertEqual(DEFAULT_MAX_INPUT_BYTES, 16 * 1024)
        self.assertEqual(spec.runtime_contract()["max_input_bytes"], DEFAULT_MAX_INPUT_BYTES)
        self.assertNotIn("max_input_bytes", json.dumps(spec.model_schema()))

    def test_input_too_large_is_a_catalogued_refusal(self) -> None:
        entry = CATALOGUE["input_too_large"]
        self.assertEqual((entry.category, entry.retryable, entry.next_action, entry.outcome),
                         (Category.VALIDATION, False, NextAction.NARROW_REQUEST, Outcome.REJECTED))


class InputBudgetInvokeTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.calls: list = []
        spec = ToolSpec(name="note", description="Keep a note.", input_schema=NOTE_SCHEMA, max_input_bytes=100)
        self.registry.register(spec, lambda arguments: self.calls.append(arguments) or {})

    def test_arguments_over_the_budget_are_refused_before_validation(self) -> None:
        arguments = {"note": "x" * 200}  # also breaks maxLength: the size is what is reported
        result = self.registry.invoke(ToolCall("note", arguments), actor=ACTOR)
        self.assertEqual(result.error.code, "input_too_large")
        self.assertEqual(result.outcome, Outcome.REJECTED)
        self.assertFalse(result.error.retryable)
        self.assertEqual(result.error.next_action, NextAction.NARROW_REQUEST)
        self.assertEqual(dict(result.error.details), {"max_input_bytes": 100, "input_bytes": compact_bytes(arguments)})
        self.assertEqual(self.calls, [])

    def test_arguments_far_over_the_budget_are_refused_without_being_read_to_the_end(self) -> None:
        result = self.registry.invoke(ToolCall("note", {"note": "x" * 1000}), actor=ACTOR)
        # The walk stopped past EXACT_SIZE_FACTOR budgets' worth: the size is a lower bound.
        self.assertEqual(dict(result.error.details),
                         {"max_input_bytes": 100, "input_bytes_at_least": 100 * EXACT_SIZE_FACTOR + 1})
        self.assertEqual(self.calls, [])

    def test_arguments_the_walk_cannot_settle_are_measured_exactly(self) -> None:
        arguments = {"note": "\u0001" * 80}  # 84 characters read (within 4 budgets), 491 bytes once each is escaped
        result = self.registry.invoke(ToolCall("note", arguments), actor=ACTOR)
        self.assertEqual(result.error.code, "input_too_large")
        self.assertEqual(dict(result.error.details), {"max_input_bytes": 100, "input_bytes": compact_bytes(arguments)})

    def test_refusing_a_huge_argument_takes_memory_in_proportion_to_the_budget_not_the_argument(self) -> None:
        import tracemalloc

        huge = {"items": [{"n": index, "tag": "x"} for index in range(100_000)]}  # about 2 MB of JSON
        self.registry.invoke(ToolCall("note", {"note": "warm"}), actor=ACTOR)
        tracemalloc.start()
        try:
            result = self.registry.invoke(ToolCall("note", huge), actor=ACTOR)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        self.assertEqual(result.error.code, "input_too_large")
        # A copy of the whole argument (100,000 dicts) would take megabytes; one of the budget, kilobytes.
        self.assertLess(peak, 256 * 1024)

    def test_the_budget_counts_the_compact_utf8_json_of_the_arguments(self) -> None:
        at_budget = {"note": "é" * 2 + "x" * (100 - compact_bytes({"note": "éé"}))}
        self.assertEqual(compact_bytes(at_budget), 100)
        result = self.registry.invoke(ToolCall("note", at_budget), actor=ACTOR)
        self.assertNotEqual(result.error.code if result.error else None, "input_too_large")
        over = {"note": "é" * 2 + "x" * (101 - compact_bytes({"note": "éé"}))}
        self.assertEqual(self.registry.invoke(ToolCall("note", over), actor=ACTOR).error.details["input_bytes"], 101)


class CountingFormat:
    """A `format` checker that counts how often validation asks it (the work, without a clock)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, value: str) -> bool:
        self.calls += 1
        return False


class ViolationLimitTest(unittest.TestCase):
    SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string", "format": "counted"}}}}

    def counted_validator(self, checker: CountingFormat) -> Validator:
        with mock.patch.object(formats, "FORMAT_CHECKERS", {"counted": checker}):
            return Validator(self.SCHEMA, format_assertion=True)

    def test_errors_with_a_limit_are_the_first_violations_in_order(self) -> None:
        validator = Validator({"type": "array", "items": {"type": "integer"}, "maxItems": 3})
        instance = ["a", 1, "b", "c", "d"]
        every = validator.errors(instance)
        self.assertEqual(len(every), 5)
        for limit in (1, 2, 4, 5, 9):
            with self.subTest(limit=limit):
                self.assertEqual(validator.errors(instance, limit=limit), every[:limit])

    def test_the_limit_must_be_a_positive_integer(self) -> None:
        validator = Validator({"type": "integer"})
        for bad in (0, -1, True, 1.5, "2"):
            with self.subTest(limit=bad):
                with self.assertRaisesRegex(ValueError, "limit must be a positive integer"):
                    validator.errors("x", limit=bad)  # type: ignore[arg-type]

    def test_collecting_stops_once_the_limit_is_reached(self) -> None:
        checker = CountingFormat()
        validator = self.counted_validator(checker)
        instance = {"items": ["x"] * 100_000}
        self.assertEqual(len(validator.errors(instance, limit=21)), 21)
        self.assertGreater(checker.calls, 0)
        self.assertLess(checker.calls, 100)  # not one call per failing item

    def test_the_registry_asks_for_one_more_violation_than_it_reports(self) -> None:
        checker = CountingFormat()
        with mock.patch.object(formats, "FORMAT_CHECKERS", {"counted": checker}):
            spec = ToolSpec(name="bulk", description="Takes many items.", input_schema=self.SCHEMA,
                            max_input_bytes=10_000_000)
        with Registry() as registry:
            registry.register(spec, lambda arguments: {})
            result = registry.invoke(ToolCall("bulk", {"items": ["x"] * 100_000}), actor=ACTOR)
        details = result.error.details
        self.assertEqual(len(details["violations"]), MAX_REPORTED_VIOLATIONS)
        self.assertEqual(details["violation_count"], MAX_REPORTED_VIOLATIONS + 1)
        self.assertIs(details["violations_truncated"], True)
        self.assertIn(f"(and at least {MAX_REPORTED_VIOLATIONS} more violations)", result.error.message)
        self.assertLess(checker.calls, 100)

    def test_a_few_violations_are_counted_exactly(self) -> None:
        spec = ToolSpec(name="few", description="Takes a list.",
                        input_schema={"type": "object", "properties": {"n": {"type": "array", "items": {"type": "integer"}}}})
        with Registry() as registry:
            registry.register(spec, lambda arguments: {})
            result = registry.invoke(ToolCall("few", {"n": ["a", "b", "c"]}), actor=ACTOR)
        self.assertEqual(result.error.details["violation_count"], 3)
        self.assertIs(result.error.details["violations_truncated"], False)
        self.assertIn("(and 2 more violations)", result.error.message)


class FormatAssertionTest(unittest.TestCase):
    INPUT = {"type": "object", "properties": {"due": {"type": "string", "format": "date-time"}}, "required": ["due"]}
    OUTPUT = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}

    def invoke(self, arguments: dict, output: dict, **options) -> object:
        spec = ToolSpec(name="schedule", description="Schedule a thing.", input_schema=self.INPUT,
                        output_schema=self.OUTPUT, **options)
        with Registry() as registry:
            registry.register(spec, lambda _arguments: output)
            return registry.invoke(ToolCall("schedule", arguments), actor=ACTOR)

    def test_input_formats_are_asserted_at_the_tool_boundary_by_default(self) -> None:
        result = self.invoke({"due": "next tuesday"}, {})
        self.assertEqual(result.error.code, "invalid_arguments")
        [violation] = result.error.details["violations"]
        self.assertEqual((violation["instance_path"], violation["keyword"]), ("/due", "format"))
        self.assertTrue(self.invoke({"due": "2026-08-04T09:00:00Z"}, {}).ok)

    def test_opting_out_is_explicit(self) -> None:
        self.assertTrue(self.invoke({"due": "next tuesday"}, {"at": "later"}, format_assertion=False).ok)

    def test_the_output_schema_follows_the_same_setting(self) -> None:
        broken = self.invoke({"due": "2026-08-04T09:00:00Z"}, {"at": "later"})
        self.assertEqual(broken.error.code, "invalid_tool_output")
        self.assertEqual(broken.error.details["violations"][0]["keyword"], "format")

    def test_format_assertion_must_be_a_bool(self) -> None:
        with self.assertRaisesRegex(ValueError, "ToolSpec.format_assertion must be a bool"):
            ToolSpec(name="t", description="d", input_schema={"type": "object"}, format_assertion=1)


class FormatChecksAreLinearTest(unittest.TestCase):
    """Formats are asserted on model input, so each regex a format check runs must be proven linear
    for Python's re by the same analysis as patterns (as a full match)."""

    def test_every_format_regex_is_proven_linear(self) -> None:
        import re

        from agent_lab.schema.regex_safety import PatternEngine, analyze_pattern

        found = {name: value for name, value in vars(formats).items()
                 if isinstance(value, (re.Pattern, formats._LazyPattern))}  # the table's compile on first use
        for international in (False, True):
            for kind, compiled in formats._uri_grammar(international).items():
                found[f"uri grammar {kind} international={international}"] = compiled
        self.assertGreater(len(found), 15)
        for name, compiled in found.items():
            with self.subTest(regex=name):
                safety = analyze_pattern("^(?:" + compiled.pattern + ")$")
                self.assertIs(safety.engine, PatternEngine.RE, safety.reason)


if __name__ == "__main__":
    unittest.main()
