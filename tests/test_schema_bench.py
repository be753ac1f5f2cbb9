"""The schema benchmark runs end to end and measures what it says (timings are printed, never asserted)."""

from __future__ import annotations

import contextlib
import io
import unittest

from agent_lab.bench import schema_bench
from agent_lab.schema import Validator


class SchemaBenchTests(unittest.TestCase):
    def test_sample_instances_are_one_valid_and_one_with_a_single_violation(self):
        for name, schema in schema_bench._lab_schemas() + [("typical", schema_bench.TYPICAL_TOOL_SCHEMA)]:
            with self.subTest(name):
                pair = schema_bench.sample_instances(schema)
                self.assertIsNotNone(pair)
                valid, invalid = pair
                validator = Validator(schema)
                self.assertTrue(validator.is_valid(valid))
                self.assertEqual(len(validator.errors(invalid)), 1)

    def test_fixed_general_instances_are_valid_and_invalid(self):
        for schema in (schema_bench.GENERAL_TOOL_SCHEMA, schema_bench.DRAFT_07_GENERAL_TOOL_SCHEMA):
            validator = Validator(schema)
            self.assertTrue(validator.is_valid(schema_bench.GENERAL_VALID))
            self.assertFalse(validator.is_valid(schema_bench.GENERAL_INVALID))

    def test_the_draft_07_schemas_are_read_as_draft_07_and_judge_as_their_2020_12_twins(self):
        pairs = ((schema_bench.DRAFT_07_TOOL_SCHEMA, schema_bench.TYPICAL_TOOL_SCHEMA),
                 (schema_bench.DRAFT_07_GENERAL_TOOL_SCHEMA, schema_bench.GENERAL_TOOL_SCHEMA))
        for draft_07, twin in pairs:
            validator = Validator(draft_07)
            self.assertEqual(validator.dialect, "http://json-schema.org/draft-07/schema#")
            for instance in (schema_bench.GENERAL_VALID, schema_bench.GENERAL_INVALID, schema_bench.TYPICAL_VALID, {}):
                self.assertEqual(validator.errors(instance), Validator(twin).errors(instance))

    def test_main_prints_one_row_per_schema_and_instance(self):
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            status = schema_bench.main(["--rounds", "1", "--min-time", "0.0001"])
        self.assertEqual(status, 0)
        text = output.getvalue()
        for name in ["typical_tool", "typical_tool_draft7", "general_tool", "general_tool_draft7"] + [name for name, _schema in schema_bench._lab_schemas()]:
            self.assertIn(f"{name} ", text)
        self.assertEqual(text.count(" valid "), text.count(" invalid "))


if __name__ == "__main__":
    unittest.main()
