"""Case files: every problem is reported as FILE:LINE with what is wrong, never as a traceback."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

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


class CaseFileTest(unittest.TestCase):
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
        case = a_case(expected={"outcome": "succeeded", "side_effects": 0, "baseline": {"outcome": "failed"}})
        [loaded] = load_cases([self.write(case)])
        self.assertEqual(loaded.expectation("baseline"), {"outcome": "failed", "side_effects": 0})
        self.assertEqual(loaded.expectation("candidate"), {"outcome": "succeeded", "side_effects": 0})


if __name__ == "__main__":
    unittest.main()
