"""The schemas shipped with the package name where their compilation memoises
(`Validator._with_memo_hint`), so each compiles once in a process; the hints must stay current, and a
wrong one only costs a second compilation.

What a compilation finds to memoise depends on what the process compiled before (a self-contained
subschema seen before is shared, and a shared one is never memoised), so the counts are taken in a
fresh interpreter, as a `tool-eval` run builds these validators."""

from __future__ import annotations

import subprocess
import sys
import unittest
from pathlib import Path

from agent_lab.lab.cases import case_schema
from agent_lab.schema.validator import Validator

CHECKOUT = Path(__file__).resolve().parents[1]

COUNT_COMPILATIONS = """
from agent_lab.schema import _compiler
real = _compiler.Compiler.compile_root
count = []
def counted(self, schema, base):
    count.append(str(schema.get("$id")))
    return real(self, schema, base)
_compiler.Compiler.compile_root = counted
from agent_lab.lab.cases import _case_validator
_case_validator()
print(" ".join(count))
"""


class MemoHintTest(unittest.TestCase):
    def test_the_meta_schema_and_the_case_schema_compile_once_each_in_a_fresh_process(self) -> None:
        done = subprocess.run([sys.executable, "-c", COUNT_COMPILATIONS], cwd=CHECKOUT, capture_output=True,
                              text=True, timeout=60, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split(), ["https://json-schema.org/draft/2020-12/schema",
                                               "https://agent-lab.example/schemas/tool-case.json"])

    def test_a_wrong_hint_validates_alike(self) -> None:
        wrong = frozenset({"https://agent-lab.example/schemas/tool-case.json#/$defs/call"})
        hinted = Validator._with_memo_hint(case_schema(), wrong)
        plain = Validator(case_schema())
        for instance in ({}, {"case_id": 1}, {"case_id": "x", "calls": [{"tool": "t"}]}, [],
                         {"case_id": "x", "calls": {"a": [{"do": 1}]}, "expected": {"a": [{"outcome": 3}]}}):
            self.assertEqual(hinted.is_valid(instance), plain.is_valid(instance))
            self.assertEqual([(error.instance_path, error.keyword_path, error.message) for error in hinted.errors(instance)],
                             [(error.instance_path, error.keyword_path, error.message) for error in plain.errors(instance)])

    def test_a_hinted_validator_still_checks_its_schema_against_the_meta_schema(self) -> None:
        from agent_lab.schema import SchemaError

        with self.assertRaises(SchemaError):
            Validator._with_memo_hint({"type": 5}, frozenset())


if __name__ == "__main__":
    unittest.main()
