"""One catalogue of error codes: complete, consistent, and the only source of classifications."""

from __future__ import annotations

import ast
import pathlib
import re
import unittest

from agent_lab.errors import CATALOGUE, Category, NextAction, Outcome, ToolError, ToolFailure, catalogue_entry

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "agent_lab"

# Calls whose first argument is an error code, and calls whose second argument is one.
CODE_FIRST = {"ToolFailure", "from_code", "refusal", "catalogue_entry"}
CODE_SECOND = {"_output_failure"}


def _called_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _strings(node: ast.AST | None) -> list[str]:
    """String constants of an expression (through conditional expressions)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    return []


def codes_used_in(source: str) -> set[str]:
    """Error codes the source passes to the error constructors, assigns to `code`, or compares with `.code`.

    A ToolFailure that names its own category is a handler's domain code and need not be catalogued.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name == "ToolFailure" and any(keyword.arg == "category" for keyword in node.keywords):
                continue
            position = 0 if name in CODE_FIRST else 1 if name in CODE_SECOND else None
            if position is not None and len(node.args) > position:
                found.update(_strings(node.args[position]))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
            found.update(_strings(node.value))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Attribute) and side.attr == "code" for side in sides):
                for side in sides:
                    found.update(_strings(side))
    return found


class CatalogueCompletenessTest(unittest.TestCase):
    def test_every_code_used_anywhere_in_agent_lab_is_in_the_catalogue(self) -> None:
        missing: dict[str, set[str]] = {}
        for path in sorted(PACKAGE.rglob("*.py")):
            unknown = codes_used_in(path.read_text(encoding="utf-8")) - set(CATALOGUE)
            if unknown:
                missing[str(path.relative_to(PACKAGE))] = unknown
        self.assertEqual(missing, {})

    def test_the_scan_finds_the_registrys_codes(self) -> None:
        runtime = [PACKAGE / "registry.py", *sorted((PACKAGE / "steps").glob("*.py"))]  # the registry and its steps
        used = set().union(*(codes_used_in(path.read_text(encoding="utf-8")) for path in runtime))
        for code in ("tool_not_found", "invalid_arguments", "permission_denied", "approval_required",
                     "approval_mismatch", "approval_expired", "deadline_exceeded", "idempotency_conflict",
                     "idempotency_in_progress", "tool_timeout", "handler_exception", "invalid_tool_output",
                     "output_too_large", "not_found", "internal_error"):
            self.assertIn(code, used)

    def test_the_scan_catches_an_uncatalogued_code(self) -> None:
        self.assertEqual(codes_used_in('state.refusal("made_up_code")'), {"made_up_code"})
        self.assertEqual(codes_used_in('raise ToolFailure("ticket_gone", category="not_found")'), set())


class CatalogueConsistencyTest(unittest.TestCase):
    def test_codes_are_snake_case_and_summaries_are_sentences(self) -> None:
        for code, entry in CATALOGUE.items():
            with self.subTest(code=code):
                self.assertRegex(code, r"^[a-z]+(_[a-z]+)*$")
                self.assertRegex(entry.summary, r"^[A-Z].*\.$")
                self.assertIsInstance(entry.category, Category)
                self.assertIsInstance(entry.next_action, NextAction)
                self.assertIsInstance(entry.outcome, Outcome)

    def test_retryable_codes_say_to_retry(self) -> None:
        for code, entry in CATALOGUE.items():
            if entry.retryable:
                self.assertIn(entry.next_action, (NextAction.RETRY, NextAction.RETRY_LATER), code)

    def test_refusals_before_running_are_rejected(self) -> None:
        for code in ("tool_not_found", "invalid_arguments", "permission_denied", "approval_required",
                     "approval_mismatch", "approval_expired", "deadline_exceeded", "idempotency_conflict",
                     "idempotency_in_progress", "internal_error"):
            self.assertEqual(CATALOGUE[code].outcome, Outcome.REJECTED, code)

    def test_the_catalogue_cannot_be_changed_at_run_time(self) -> None:
        with self.assertRaises(TypeError):
            CATALOGUE["new_code"] = CATALOGUE["conflict"]  # type: ignore[index]


class ToolErrorTest(unittest.TestCase):
    def test_from_code_takes_the_catalogue_defaults(self) -> None:
        error = ToolError.from_code("tool_timeout")
        entry = catalogue_entry("tool_timeout")
        self.assertEqual((error.category, error.retryable, error.next_action, error.message),
                         (entry.category, entry.retryable, entry.next_action, entry.summary))

    def test_overrides_win(self) -> None:
        error = ToolError.from_code("tool_timeout", "Slow.", retryable=False, next_action=NextAction.LOOKUP_STATUS,
                                    details={"after_ms": 50})
        self.assertEqual((error.message, error.retryable, error.next_action), ("Slow.", False, NextAction.LOOKUP_STATUS))
        self.assertEqual(error.details, {"after_ms": 50})

    def test_to_dict_round_trips_through_from_dict(self) -> None:
        error = ToolError.from_code("invalid_arguments", details={"violations": []})
        self.assertEqual(ToolError.from_dict(error.to_dict()), error)
        self.assertEqual(error.to_dict()["category"], "validation")

    def test_an_unknown_code_is_not_in_the_catalogue(self) -> None:
        self.assertIsNone(catalogue_entry("nope"))
        with self.assertRaises(KeyError):
            ToolError.from_code("nope")


class ToolFailureTest(unittest.TestCase):
    def test_a_catalogue_code_needs_only_a_message(self) -> None:
        failure = ToolFailure("not_found", "No ticket T-1.")
        self.assertEqual((failure.code, failure.error.category, failure.error.message),
                         ("not_found", Category.NOT_FOUND, "No ticket T-1."))
        self.assertEqual(ToolFailure("unavailable").error.message, CATALOGUE["unavailable"].summary)

    def test_a_domain_code_must_name_its_category(self) -> None:
        with self.assertRaisesRegex(ValueError, "'ticket_not_found' is not in the catalogue; pass category="):
            ToolFailure("ticket_not_found", "No such ticket.")
        failure = ToolFailure("ticket_not_found", "No such ticket.", category="not_found")
        self.assertEqual(failure.error.category, Category.NOT_FOUND)
        self.assertEqual((failure.error.retryable, failure.error.next_action), (False, NextAction.STOP))

    def test_a_domain_code_may_say_how_to_recover(self) -> None:
        failure = ToolFailure("rate_limited", category="dependency", retryable=True, next_action="retry_later")
        self.assertEqual((failure.error.retryable, failure.error.next_action), (True, NextAction.RETRY_LATER))
        self.assertEqual(failure.error.message, "The tool reported rate_limited.")

    def test_an_unknown_category_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            ToolFailure("x_failed", category="cosmic")

    def test_it_is_an_exception_whose_text_is_the_safe_message(self) -> None:
        failure = ToolFailure("conflict", "Ticket is closed.")
        self.assertIsInstance(failure, Exception)
        self.assertEqual(str(failure), "Ticket is closed.")

    def test_codes_are_classified_by_code_never_by_message(self) -> None:
        self.assertNotRegex(
            (PACKAGE / "registry.py").read_text(encoding="utf-8"), re.compile(r"\.message\s*(==|\.startswith|in )")
        )


if __name__ == "__main__":
    unittest.main()
