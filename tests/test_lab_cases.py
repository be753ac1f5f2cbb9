"""Case files: every problem is reported as FILE:LINE with what is wrong, never as a traceback."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from agent_lab.lab import cases
from agent_lab.lab.cases import CaseFileError, case_schema, load_cases
from agent_lab.schema import Validator

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO / "datasets" / "tool-cases.jsonl"


def a_case(case_id: str = "read-one", **changes: object) -> dict:
    case = {
        "case_id": case_id,
        "intent": "Read one ticket.",
        "actor": {"id": "agent-1", "tenant": "acme", "permissions": ["tickets:read"]},
        "calls": {
            "baseline": [{"tool": "ticket_operation", "arguments": {"operation": "get", "payload": {"ticket_id": "T-1001"}}}],
            "candidate": [{"tool": "get_ticket", "arguments": {"ticket_id": "T-1001"}}],
        },
        "expected": {"outcome": "succeeded", "side_effects": 0},
    }
    case.update(changes)
    return case


class CaseFileTestCase(unittest.TestCase):
    """Helpers: write case lines to a temporary file, and collect the problems loading reports."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, *lines: object, name: str = "cases.jsonl") -> str:
        path = Path(self.tmp.name) / name
        path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                        encoding="utf-8")
        return str(path)

    def problems(self, *paths: str) -> list[str]:
        with self.assertRaises(CaseFileError) as caught:
            load_cases(list(paths))
        return [str(problem) for problem in caught.exception.problems]


class CaseFileTest(CaseFileTestCase):
    def test_the_dataset_loads_with_unique_ids_in_file_order(self) -> None:
        cases = load_cases([str(DATASET)])
        ids = [case.case_id for case in cases]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertEqual(ids[0], "read-ticket")
        self.assertEqual(cases[0].source_line, 1)

    def test_the_case_schema_is_a_valid_json_schema_that_accepts_a_plain_case(self) -> None:
        validator = Validator(case_schema())
        self.assertTrue(validator.is_valid(a_case()))
        self.assertFalse(validator.is_valid(a_case(expected={"outcome": "succeeded"})))

    def test_broken_json_is_reported_with_file_line_and_column(self) -> None:
        path = self.write(a_case(), '{"case_id": "x", oops}')
        self.assertEqual(self.problems(path), [f"{path}:2: broken JSON at column 18: Expecting property name enclosed in double quotes"])

    def test_a_schema_violation_names_the_field_and_the_line(self) -> None:
        path = self.write(a_case(), a_case("second", expected={"outcome": "done", "side_effects": 0}))
        [problem] = self.problems(path)
        self.assertTrue(problem.startswith(f"{path}:2: "), problem)
        self.assertIn("expected/outcome", problem)

    def test_a_missing_file_is_a_problem_not_an_oserror(self) -> None:
        missing = str(Path(self.tmp.name) / "nope.jsonl")
        self.assertEqual(self.problems(missing), [f"{missing}:1: no such case file"])

    def test_a_duplicate_case_id_names_the_first_definition(self) -> None:
        first = self.write(a_case("same"), name="a.jsonl")
        second = self.write("", a_case("same"), name="b.jsonl")
        self.assertEqual(self.problems(first, second), [f"{second}:2: duplicate case_id 'same' (first at {first}:1)"])

    def test_every_bad_line_is_reported_not_only_the_first(self) -> None:
        path = self.write("[1]", a_case(), "{", a_case("x", actor={"id": "a", "tenant": "t"}))
        lines = [problem.split(": ", 1)[0] for problem in self.problems(path)]
        self.assertEqual(lines, [f"{path}:1", f"{path}:3", f"{path}:4"])

    def test_nan_and_duplicate_keys_are_not_plain_json(self) -> None:
        path = self.write('{"case_id": NaN}', '{"case_id": "a", "case_id": "b"}')
        self.assertEqual(self.problems(path), [f"{path}:1: NaN is not JSON",
                                               f"{path}:2: duplicate key 'case_id' in one object"])

    def test_expectations_that_name_missing_calls_are_reported(self) -> None:
        path = self.write(a_case(expected={"side_effects": 0, "steps": [{}, {}], "candidate": {"same_output": [0, 3]}}))
        problems = self.problems(path)
        self.assertIn(f"{path}:1: 'expected/steps' describes 2 calls but candidate proposes 1", problems)
        self.assertIn(f"{path}:1: 'expected/same_output' names call 3 but candidate proposes 1 call(s)", problems)

    def test_a_typo_in_a_strategy_override_is_refused(self) -> None:
        path = self.write(a_case(expected={"side_effects": 0, "candidate": {"outcom": "succeeded"}}))
        [problem] = self.problems(path)
        self.assertIn("expected/candidate/outcom", problem)

    def test_an_empty_file_has_no_cases(self) -> None:
        path = self.write("")
        self.assertEqual(self.problems(path), [f"{path}:1: no cases found"])

    def test_a_strategy_block_overrides_shared_expectations_key_by_key(self) -> None:
        case = a_case(expected={"outcome": "succeeded", "side_effects": 0,
                                "baseline": {"outcome": "failed", "error_code": "tool_failed"}})
        [loaded] = load_cases([self.write(case)])
        self.assertEqual(loaded.expectation("baseline"), {"outcome": "failed", "error_code": "tool_failed", "side_effects": 0})
        self.assertEqual(loaded.expectation("candidate"), {"outcome": "succeeded", "side_effects": 0})


class TextOfCaseFilesTest(CaseFileTestCase):
    """How a case file's bytes become lines: JSON Lines is UTF-8 text split at \\n, nothing else."""

    def write_bytes(self, data: bytes, name: str = "cases.jsonl") -> str:
        path = Path(self.tmp.name) / name
        path.write_bytes(data)
        return str(path)

    def test_a_unicode_line_separator_inside_a_string_does_not_split_the_case(self) -> None:
        for separator in ("\u2028", "\u2029", "\x85"):  # raw in JSON strings; str.splitlines() breaks at them
            with self.subTest(separator=repr(separator)):
                text = json.dumps(a_case(intent=f"Read{separator}one ticket."), ensure_ascii=False)
                path = self.write_bytes((text + "\n" + json.dumps(a_case("second")) + "\n").encode("utf-8"))
                self.assertEqual([case.source_line for case in load_cases([path])], [1, 2])

    def test_crlf_line_endings_and_a_leading_byte_order_mark_are_accepted(self) -> None:
        lines = [json.dumps(a_case("first")), json.dumps(a_case("second"))]
        path = self.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
        self.assertEqual([case.case_id for case in load_cases([path])], ["first", "second"])

    def test_text_that_is_not_utf_8_names_the_line(self) -> None:
        path = self.write_bytes(json.dumps(a_case()).encode() + b"\n" + "{\"intent\": \"caf\xe9\"}".encode("latin-1"))
        self.assertEqual(self.problems(path), [f"{path}:2: the case file is not UTF-8 text"])

    def test_json_nested_deeper_than_the_parser_can_go_is_a_problem_not_a_recursion_error(self) -> None:
        path = self.write(a_case(), "[" * 100_000 + "]" * 100_000)
        [problem] = self.problems(path)
        self.assertTrue(problem.startswith(f"{path}:2: "), problem)
        self.assertIn("nested too deeply", problem)

    def test_a_number_with_too_many_digits_is_a_problem_not_a_value_error(self) -> None:
        path = self.write('{"case_id": ' + "9" * 5000 + "}")
        self.assertEqual(self.problems(path), [f"{path}:1: a number with too many digits to read"])

    def test_a_lone_surrogate_escape_is_not_unicode_text(self) -> None:
        path = self.write(json.dumps(a_case(intent="Read \ud800 one.")))
        self.assertEqual(self.problems(path), [f"{path}:1: 'intent' holds a lone surrogate escape (\\ud800-\\udfff), "
                                               "which is not Unicode text"])

    def test_a_json_array_of_cases_is_refused_with_its_line(self) -> None:
        path = self.write("[" + json.dumps(a_case()) + "]")
        [problem] = self.problems(path)
        self.assertTrue(problem.startswith(f"{path}:1: "), problem)
        self.assertIn("object", problem)


class CaseFileArgumentsTest(CaseFileTestCase):
    def test_the_same_case_file_given_twice_is_one_problem(self) -> None:
        path = self.write(a_case("one"), a_case("two"))
        self.assertEqual(self.problems(path, path), [f"{path}:1: this case file is given twice"])

    def test_a_file_larger_than_the_limit_is_refused_before_it_is_read_whole(self) -> None:
        path = self.write(a_case())
        with mock.patch.object(cases, "MAX_CASE_FILE_BYTES", 100):
            self.assertEqual(self.problems(path), [f"{path}:1: the case file is larger than 100 bytes"])

    def test_reading_stops_after_a_bounded_number_of_problems(self) -> None:
        path = self.write(*["{"] * 10)
        with mock.patch.object(cases, "MAX_PROBLEMS", 3):
            problems = self.problems(path)
        self.assertEqual([problem.split(": ", 1)[0] for problem in problems], [f"{path}:{n}" for n in (1, 2, 3, 4)])
        self.assertEqual(problems[-1], f"{path}:4: stopped reading after 3 problems")

    def test_a_directory_is_not_a_case_file(self) -> None:
        self.assertEqual(self.problems(self.tmp.name), [f"{self.tmp.name}:1: a directory, not a case file"])


class CallReferencesTest(CaseFileTestCase):
    """`{"$from_call": N, "pointer": P}` must name a call whose result exists when the reference is read."""

    def with_candidate_steps(self, *steps: dict) -> dict:
        case = a_case()
        case["calls"]["candidate"] = list(steps)
        return case

    @staticmethod
    def read(ticket_id: object, *, background: bool = False) -> dict:
        step = {"tool": "get_ticket", "arguments": {"ticket_id": ticket_id}}
        return {**step, "background": True} if background else step

    def test_a_reference_to_an_earlier_call_loads(self) -> None:
        case = self.with_candidate_steps(self.read("T-1001"), self.read({"$from_call": 0, "pointer": "/output/ticket/id"}))
        self.assertEqual(len(load_cases([self.write(case)])), 1)

    def test_a_reference_to_itself_a_later_call_or_no_call_is_refused(self) -> None:
        for target in (1, 2, -1, 7):
            with self.subTest(target=target):
                case = self.with_candidate_steps(self.read("T-1001"), self.read({"$from_call": target, "pointer": ""}))
                path = self.write(case)
                self.assertEqual(self.problems(path), [
                    f"{path}:1: 'calls/candidate/1/arguments/ticket_id' refers to call {target}, which has no result "
                    "by then (name an earlier call that has returned)"])

    def test_a_reference_to_a_background_call_needs_a_settle_first(self) -> None:
        reference = self.read({"$from_call": 0, "pointer": "/output/ticket/id"})
        unsettled = self.with_candidate_steps(self.read("T-1001", background=True), reference)
        path = self.write(unsettled)
        [problem] = self.problems(path)
        self.assertIn("refers to call 0, which has no result by then", problem)
        settled = self.with_candidate_steps(self.read("T-1001", background=True), {"do": "settle"}, reference)
        self.assertEqual(len(load_cases([self.write(settled, name="settled.jsonl")])), 1)

    def test_a_misshapen_reference_is_refused_not_sent_as_data(self) -> None:
        for reference in ({"$from_call": 0}, {"$from_call": 0, "pointr": "/output"}, {"$from_call": "0", "pointer": ""},
                          {"$from_call": True, "pointer": ""}, {"$from_call": 0, "pointer": "output"},
                          {"$from_call": 0, "pointer": 5}):
            with self.subTest(reference=reference):
                path = self.write(self.with_candidate_steps(self.read("T-1001"), self.read(reference)))
                self.assertEqual(self.problems(path), [
                    f"{path}:1: 'calls/candidate/1/arguments/ticket_id' must be a reference "
                    '{"$from_call": N, "pointer": "/json/pointer"} with N the index of an earlier call'])

    def test_waiting_for_a_write_needs_a_background_call_in_flight(self) -> None:
        path = self.write(self.with_candidate_steps({"do": "await_write_started"}, self.read("T-1001")))
        self.assertEqual(self.problems(path), [
            f"{path}:1: 'calls/candidate/0' waits for a write, but no background call is in flight by then"])


class VacuousExpectationsTest(CaseFileTestCase):
    """An expectation that any result would satisfy proves nothing: the loader refuses it."""

    def test_the_final_outcome_must_be_expected_for_each_strategy(self) -> None:
        path = self.write(a_case(expected={"side_effects": 0, "candidate": {"outcome": "succeeded"}}))
        self.assertEqual(self.problems(path), [
            f"{path}:1: 'expected' gives no final outcome for baseline (set 'outcome', shared or per strategy)"])

    def test_a_refusal_or_failure_must_name_its_error_code(self) -> None:
        path = self.write(a_case(expected={"side_effects": 0, "outcome": "rejected"}))
        problems = self.problems(path)
        self.assertEqual(problems, [
            f"{path}:1: 'expected' says outcome rejected for {strategy} but names no 'error_code' "
            "(any error would pass)" for strategy in ("baseline", "candidate")])

    def test_a_success_with_an_error_code_can_never_pass(self) -> None:
        path = self.write(a_case(expected={"side_effects": 0, "outcome": "succeeded", "candidate": {"error_code": "not_found"}}))
        self.assertEqual(self.problems(path), [
            f"{path}:1: 'expected' says outcome succeeded for candidate with error_code 'not_found' (no result has both)"])


if __name__ == "__main__":
    unittest.main()
