"""Patterns run on an engine a model cannot make slow (issue 8, item 2).

Every pattern a schema runs is either proven linear for Python's backtracking `re` by
`agent_lab.schema.regex_safety`, or matched by the package's linear-time matcher; a pattern that is
neither is refused in a tool's input schema, with its JSON Pointer and the reason. These tests
assert the structure (which engine, which verdict), never a timing: figures are in
`python run_lab.py bench --only redos`.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import unittest

from agent_lab import Actor, Registry, ToolCall, ToolSpec, Validator
from agent_lab.schema.ecma_regex import EcmaRegexError, compile_ecma, parse_ecma
from agent_lab.schema.linear_regex import LinearRegexUnsupported, build_linear_matcher
from agent_lab.schema.regex_safety import PatternEngine, analyze_pattern, compile_pattern

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE_ROOT = pathlib.Path(os.environ.get(
    "JSON_SCHEMA_TEST_SUITE", REPO_ROOT.parent / "shared" / "json-schema-test-suite"))
DRAFT_DIR = SUITE_ROOT / "tests" / "draft2020-12"

# Patterns with catastrophic backtracking in Python's re (exponential or polynomial).
CATASTROPHIC = ("^(a+)+$", "^(a|aa)+$", "(a|a)*b", "(.*a){12}", "^(\\w|\\d)+$", "^\\d+\\d+$", "[a-z]+@",
                "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$", "^\\S+@\\S+$", "(a*)*b", "^(a|a?)+$")
# Patterns the analysis proves linear on re: anchored and unambiguous, or short with few paths.
PROVEN = ("^T-[0-9]{4}$", "^[A-Za-z0-9_-]{8,64}$", "^[a-z0-9][a-z0-9-]{0,63}$", "^(/.*)?$", "^(a+)$",
          "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", "foo.{0,30}bar", "\\bcat\\b",
          "^(['\"])[a-z]*\\1$", "^[a-z]+(?:-[a-z]+)*$", "^(?=[a-z])[a-z0-9]{1,20}$")


def string_tool(pattern: str, **options) -> ToolSpec:
    return ToolSpec(name="t", description="Takes one string.", input_schema={
        "type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}}, **options)


class EngineChoiceTest(unittest.TestCase):
    def test_catastrophic_patterns_never_run_on_backtracking_re(self) -> None:
        for pattern in CATASTROPHIC:
            with self.subTest(pattern=pattern):
                [finding] = Validator({"type": "string", "pattern": pattern}).patterns
                self.assertIs(finding.safety.engine, PatternEngine.LINEAR)
                matcher, _safety = compile_pattern(pattern)
                self.assertNotIsInstance(matcher, re.Pattern)
                self.assertTrue(matcher.bounded)  # its whole DFA was built up front

    def test_patterns_proven_linear_stay_on_re(self) -> None:
        for pattern in PROVEN:
            with self.subTest(pattern=pattern):
                safety = analyze_pattern(pattern)
                self.assertIs(safety.engine, PatternEngine.RE, safety.reason)
                self.assertIn("proven linear", safety.reason)
                self.assertIsInstance(compile_pattern(pattern)[0], re.Pattern)

    def test_the_reason_names_what_makes_re_unsafe(self) -> None:
        cases = {
            "^(a+)+$": "nested or overlapping quantifiers",
            "^(a|aa)+$": "alternatives inside a repetition",
            "(a*)*": "can match the empty string",
            "[a-z]+@": "not anchored",
            "(?=a+)b": "lookaround",
            "^(\\w+)\\s\\1$": "backreference",
            "[ab]*a[ab]{16}c": "more than 2000 states",
        }
        for pattern, phrase in cases.items():
            with self.subTest(pattern=pattern):
                self.assertIn(phrase, analyze_pattern(pattern).reason)

    def test_backtracking_in_other_engines_is_classified(self) -> None:
        cases = {"^(a+)+$": "exponential", "(a|aa)+": "exponential", "(a*)*": "exponential",
                 "^\\d+\\d+$": "polynomial", "^\\S+@\\S+$": "polynomial", "(a+){2,5}": "polynomial",
                 "^.*x$": "", "[a-z]+@": "", "([a-z]+\\.)+$": "", "^T-[0-9]{4}$": ""}
        for pattern, kind in cases.items():
            with self.subTest(pattern=pattern):
                self.assertEqual(analyze_pattern(pattern).backtracking, kind)

    def test_the_validator_lists_each_pattern_it_runs_with_its_pointer(self) -> None:
        validator = Validator({
            "type": "object",
            "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}},
            "patternProperties": {"^x-": {"type": "string"}},
            "propertyNames": {"pattern": "^[a-z-]+$"},
            "$defs": {"unused": {"pattern": "(?=a+)b"}},
        })
        found = {finding.pointer: (finding.pattern, finding.safety.engine) for finding in validator.patterns}
        self.assertEqual(found, {
            "/properties/a/pattern": ("^(a+)+$", PatternEngine.LINEAR),
            "/patternProperties/^x-": ("^x-", PatternEngine.RE),
            "/propertyNames/pattern": ("^[a-z-]+$", PatternEngine.RE),
            "/$defs/unused/pattern": ("(?=a+)b", PatternEngine.UNSAFE),
        })
        self.assertIn("/properties/a/pattern", validator.patterns[0].describe())

    def test_an_unsafe_pattern_still_validates_outside_the_tool_boundary(self) -> None:
        validator = Validator({"type": "string", "pattern": "(?=\\w+@)\\w"})
        [finding] = validator.patterns
        self.assertIs(finding.safety.engine, PatternEngine.UNSAFE)
        self.assertTrue(validator.is_valid("ab@"))
        self.assertFalse(validator.is_valid("ab"))


class ToolBoundaryTest(unittest.TestCase):
    def test_a_pattern_neither_proven_nor_linear_is_refused_with_its_pointer_and_reason(self) -> None:
        cases = [
            ({"properties": {"p": {"type": "string", "pattern": "(?=a+)b"}}}, "/properties/p/pattern", "lookaround"),
            ({"patternProperties": {"^(\\w+)\\1$": {}}}, "/patternProperties/^(\\w+)\\1$", "backreference"),
            ({"propertyNames": {"pattern": "(?<=a)b+c"}}, "/propertyNames/pattern", "not anchored"),
            ({"$defs": {"word": {"pattern": "[ab]*a[ab]{16}c"}}}, "/$defs/word/pattern", "2000 states"),
            ({"properties": {"l": {"items": {"pattern": "(.*){1,32000}x"}}}}, "/properties/l/items/pattern",
             "matcher states"),
        ]
        for schema, pointer, phrase in cases:
            with self.subTest(pointer=pointer):
                with self.assertRaises(ValueError) as refused:
                    ToolSpec(name="t", description="d", input_schema={"type": "object", **schema})
                message = str(refused.exception)
                self.assertIn(f"at {pointer}:", message)
                self.assertIn(phrase, message)
                self.assertIn("a model could make slow", message)

    def test_a_slow_pattern_in_a_resource_that_shares_the_roots_location_is_refused_too(self) -> None:
        # An embedded "$id": "" (or "#", "./") resolves to the root's own base: its pattern's location was
        # the root's "/pattern", the root's pattern took that place in the list, and the slow one was never
        # checked (a 26-character argument then held invoke for 7 s). Every pattern is listed and checked.
        slow = "^(?:a{0,40}){0,40}$"
        for identifier in ("", "#", "./"):
            schema = {"type": "object", "pattern": "^x", "properties": {"q": {"$ref": "#/$defs/r"}},
                      "$defs": {"r": {"$id": identifier, "type": "string", "pattern": slow}}}
            with self.subTest(identifier=identifier):
                self.assertIn(slow, [finding.pattern for finding in Validator(schema).patterns])
                with self.assertRaisesRegex(ValueError, "a model could make slow"):
                    ToolSpec(name="t", description="d", input_schema=schema)

    def test_the_output_schema_gets_the_same_guarantee_as_the_input_schema(self) -> None:
        # Issue 20, item 7: a handler's output echoes model text, and re holds the interpreter lock while
        # it backtracks, so an unsafe output pattern held a 100 ms call for seconds. Refused when built,
        # wherever the regex sits, exactly as in an input schema.
        cases = [
            ({"properties": {"n": {"type": "string", "pattern": "^(a+)+\\1b$"}}}, "/properties/n/pattern",
             "backreference"),
            ({"properties": {"n": {"pattern": "(?=a+)b"}}}, "/properties/n/pattern", "lookaround"),
            ({"patternProperties": {"^(\\w+)\\1$": {}}}, "/patternProperties/^(\\w+)\\1$", "backreference"),
            ({"propertyNames": {"pattern": "(?<=a)b+c"}}, "/propertyNames/pattern", "not anchored"),
            ({"$defs": {"w": {"pattern": "[ab]*a[ab]{16}c"}}, "properties": {"w": {"$ref": "#/$defs/w"}}},
             "/$defs/w/pattern", "2000 states"),
            ({"properties": {"l": {"type": "array", "items": {"properties": {"e": {"pattern": "(.+)\\1"}}}}}},
             "/properties/l/items/properties/e/pattern", "backreference"),
        ]
        for schema, pointer, phrase in cases:
            with self.subTest(pointer=pointer):
                with self.assertRaises(ValueError) as refused:
                    ToolSpec(name="t", description="d", input_schema={"type": "object"},
                             output_schema={"type": "object", **schema})
                message = str(refused.exception)
                self.assertIn("ToolSpec.output_schema of 't'", message)
                self.assertIn(f"at {pointer}:", message)
                self.assertIn(phrase, message)

    def test_an_output_pattern_with_nested_quantifiers_runs_on_the_linear_matcher(self) -> None:
        spec = ToolSpec(name="t", description="d", input_schema={"type": "object"},
                        output_schema={"type": "object", "properties": {"echo": {"type": "string",
                                                                                "pattern": "^(a+)+b$"}}})
        [finding] = spec.output_validator.patterns
        self.assertIs(finding.safety.engine, PatternEngine.LINEAR)
        with Registry() as registry:
            registry.register(spec, lambda arguments: {"echo": "a" * 4096})
            result = registry.invoke(ToolCall("t", {}), actor=Actor(id="a", tenant="t"))
        self.assertEqual((result.error.code, result.outcome.value), ("invalid_tool_output", "failed"))

    def test_the_issue_reproducer_answers_without_backtracking(self) -> None:
        # Issue 8: "^(a+)+$" took 28 s at 29 characters on the caller's thread.
        spec = string_tool("^(a+)+$", timeout_ms=100)
        [finding] = spec.input_validator.patterns
        self.assertIs(finding.safety.engine, PatternEngine.LINEAR)
        with Registry() as registry:
            registry.register(spec, lambda arguments: {})
            actor = Actor(id="a", tenant="t")
            refused = registry.invoke(ToolCall("t", {"p": "a" * 29 + "!"}), actor=actor)
            accepted = registry.invoke(ToolCall("t", {"p": "a" * 29}), actor=actor)
        self.assertEqual(refused.error.code, "invalid_arguments")
        self.assertEqual(refused.error.details["violations"][0]["keyword"], "pattern")
        self.assertTrue(accepted.ok)


def _suite_string_cases():
    """(pattern, string, file) for every pattern and string instance of the suite's regex files."""
    files = ("optional/ecmascript-regex.json", "optional/non-bmp-regex.json", "pattern.json",
             "patternProperties.json")
    for relative in files:
        for group in json.loads((DRAFT_DIR / relative).read_text(encoding="utf-8")):
            schema = group["schema"]
            patterns = []
            if isinstance(schema, dict):
                if isinstance(schema.get("pattern"), str):
                    patterns.append(schema["pattern"])
                patterns.extend(schema.get("patternProperties", {}))
            for case in group["tests"]:
                texts = [case["data"]] if isinstance(case["data"], str) else (
                    list(case["data"]) if isinstance(case["data"], dict) else [])
                for pattern in patterns:
                    for text in texts:
                        yield pattern, text, relative


class LinearMatcherAgreesWithReTest(unittest.TestCase):
    """The linear matcher answers exactly what the translated Python pattern answers."""

    def assert_same(self, pattern: str, texts, *, explore: bool = True) -> None:
        matcher = build_linear_matcher(parse_ecma(pattern))
        if explore:
            matcher.explore()
        backtracking = compile_ecma(pattern)
        for text in texts:
            with self.subTest(pattern=pattern, text=text):
                self.assertEqual(matcher.search(text) is not None, backtracking.search(text) is not None)

    @unittest.skipUnless(DRAFT_DIR.is_dir(), f"JSON Schema test suite not found at {SUITE_ROOT}")
    def test_every_suite_pattern_it_can_run_gives_re_verdicts(self) -> None:
        checked = 0
        for pattern, text, _file in _suite_string_cases():
            try:
                matcher = build_linear_matcher(parse_ecma(pattern))
            except (LinearRegexUnsupported, EcmaRegexError):
                continue
            with self.subTest(pattern=pattern, text=text):
                self.assertEqual(matcher.search(text) is not None, compile_ecma(pattern).search(text) is not None)
            checked += 1
        self.assertGreater(checked, 100)

    def test_anchors_boundaries_modifiers_and_case_folding(self) -> None:
        texts = ["", "a", "A", "ab", "a b", "a\nb", "b\n", "\u017f", "\u212a", "k", "K", "s\u017f", "\u0130",
                 "x1_", "-", "\r\n", "\u2028a", "abc\n", "\U0001F600", "\u00e9", "\u0131"]
        for pattern in ("^a", "a$", "^$", "\\bb", "\\Bb", "(?m:^b)", "(?m:a$)", "(?s:a.b)", "a.b", "(?i:k)",
                        "(?i:\\bs)", "(?i:[a-z])", "(?i:S\\B)", "(?i:[^a-z])", "(?i:\\p{Lu})", "\\p{L}+$",
                        "(?-i:a)", "(?i:a(?-i:b))", "[^\\n]$", "\\W\\w", ".", "^\\s*$", "\\u{1F600}", "(?m:^$)"):
            self.assert_same(pattern, texts)

    def test_random_patterns_and_strings(self) -> None:
        generator = random.Random(20260801)
        atoms = ["a", "b", ".", "[ab]", "[^a]", "\\d", "\\w", "\\s", "\\n", "(?i:A)", "\\u017f", "K"]

        def pattern(depth: int = 0) -> str:
            roll = generator.random()
            if depth > 3 or roll < 0.35:
                return generator.choice(atoms)
            if roll < 0.5:
                return "(" + "|".join(pattern(depth + 1) for _ in range(generator.randint(2, 3))) + ")"
            if roll < 0.7:
                return pattern(depth + 1) + generator.choice(["*", "+", "?", "{2}", "{1,3}", "{2,}", "+?"])
            if roll < 0.8:
                return generator.choice(["^", "$", "\\b", "\\B", "(?m:^)", "(?m:$)", "(?i:\\b)"])
            return "".join(pattern(depth + 1) for _ in range(generator.randint(2, 4)))

        checked = 0
        while checked < 250:
            source = pattern()
            try:
                parse_ecma(source)
            except EcmaRegexError:  # e.g. a quantified assertion
                continue
            checked += 1
            texts = ["".join(generator.choice("abAK\u017f\n 1_") for _ in range(generator.randint(0, 8)))
                     for _ in range(12)]
            self.assert_same(source, texts, explore=generator.random() < 0.5)

    def test_leading_lookaheads_run_as_a_conjunction(self) -> None:
        pattern = "^(?=.*\\d)(?=.*[a-z])(?!.*password).{8,}$"
        self.assertIs(analyze_pattern(pattern).engine, PatternEngine.LINEAR)
        self.assert_same(pattern, ["abcdefg1", "abcdefgh", "12345678", "a1", "password1", "ab\ncd1efgh",
                                   "x" * 20 + "9"])

    def test_lookarounds_elsewhere_and_backreferences_are_not_run(self) -> None:
        for pattern in ("a(?=b)", "(?<=a)b", "(a)\\1", "^a(?=b)"):
            with self.subTest(pattern=pattern):
                with self.assertRaises(LinearRegexUnsupported):
                    build_linear_matcher(parse_ecma(pattern))

    def test_a_dfa_too_large_to_build_up_front_is_reported(self) -> None:
        self.assertFalse(build_linear_matcher(parse_ecma("[ab]*a[ab]{16}c")).explore())
        self.assertTrue(build_linear_matcher(parse_ecma("(.*a){12}")).explore())


if __name__ == "__main__":
    unittest.main()
