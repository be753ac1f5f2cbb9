"""The ReDoS corpus (issue 8): every pattern known for catastrophic backtracking is either refused when
the ToolSpec is built or served by an engine with a linear-time guarantee, and answers attacks grown
to the whole input budget correctly. How long each attack takes is measured by
`python run_lab.py bench --only redos`, never asserted here.
"""

from __future__ import annotations

import re
import unittest

from agent_lab import Actor, Registry, ToolCall, Validator
from agent_lab.bench.redos_bench import ATTACKED_PROPERTY, REDOS_CORPUS, attack_arguments, spec_for
from agent_lab.schema.ecma_regex import compile_ecma
from agent_lab.schema.regex_safety import PatternEngine, compile_pattern
from agent_lab.spec import DEFAULT_MAX_INPUT_BYTES

ACTOR = Actor(id="agent", tenant="t")


class ReDoSCorpusTest(unittest.TestCase):
    def test_the_corpus_holds_at_least_30_patterns_that_re_is_never_trusted_with(self) -> None:
        self.assertGreaterEqual(len(REDOS_CORPUS), 30)
        self.assertEqual(len({case.pattern for case in REDOS_CORPUS}), len(REDOS_CORPUS))
        for case in REDOS_CORPUS:
            with self.subTest(case=case.name):
                matcher, safety = compile_pattern(case.pattern)
                self.assertIsNot(safety.engine, PatternEngine.RE, safety.reason)
                if safety.engine is PatternEngine.LINEAR:
                    self.assertNotIsInstance(matcher, re.Pattern)

    def test_every_pattern_is_refused_at_build_or_served_in_linear_time(self) -> None:
        refused = served = 0
        for case in REDOS_CORPUS:
            with self.subTest(case=case.name):
                try:
                    spec = spec_for(case)
                except ValueError as refusal:
                    self.assertIn(f"/properties/{ATTACKED_PROPERTY}/pattern", str(refusal))
                    refused += 1
                    continue
                [finding] = spec.input_validator.patterns
                self.assertIs(finding.safety.engine, PatternEngine.LINEAR)
                self.assertTrue(compile_pattern(case.pattern)[0].bounded)  # DFA built up front, bounded
                served += 1
        self.assertGreater(refused, 0)
        self.assertGreater(served, refused)

    def test_attacks_as_large_as_the_input_budget_get_the_right_answer(self) -> None:
        for case in REDOS_CORPUS:
            with self.subTest(case=case.name):
                try:
                    spec = spec_for(case)
                except ValueError:
                    continue
                self.assertEqual(spec.max_input_bytes, DEFAULT_MAX_INPUT_BYTES)
                arguments = attack_arguments(case, spec.max_input_bytes)
                self.assertEqual(spec.input_validator.is_valid(arguments), case.attack_matches)
                with Registry() as registry:
                    registry.register(spec, lambda _arguments: {})
                    result = registry.invoke(ToolCall(spec.name, arguments), actor=ACTOR)
                if case.attack_matches:
                    self.assertTrue(result.ok)
                else:
                    self.assertEqual(result.error.code, "invalid_arguments")
                    self.assertEqual(result.error.details["violations"][0]["keyword"], "pattern")

    def test_ordinary_strings_get_the_same_answer_as_python_re(self) -> None:
        for case in REDOS_CORPUS:
            validator = Validator({"type": "string", "pattern": case.pattern})  # refused ones too
            backtracking = compile_ecma(case.pattern)
            for text in case.benign:
                with self.subTest(case=case.name, text=text):
                    self.assertEqual(validator.is_valid(text), backtracking.search(text) is not None)


if __name__ == "__main__":
    unittest.main()
