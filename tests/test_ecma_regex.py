"""ECMA-262 regular expressions run with ECMA semantics, not Python's.

Two kinds of tests: the official suite's regex files driven case by case
(pattern, patternProperties and format "regex"), and contract tests for each
translation rule of agent_lab.schema.ecma_regex.
"""

import json
import os
import pathlib
import re
import unittest

from agent_lab.schema.ecma_regex import (
    EcmaRegexError,
    EcmaRegexUnsupported,
    compile_ecma,
    is_ecma_regex,
    translate_ecma,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE_ROOT = pathlib.Path(os.environ.get(
    "JSON_SCHEMA_TEST_SUITE", REPO_ROOT.parent / "shared" / "json-schema-test-suite"))
DRAFT_DIR = SUITE_ROOT / "tests" / "draft2020-12"

REGEX_SUITE_FILES = (
    "optional/ecmascript-regex.json",
    "optional/non-bmp-regex.json",
    "optional/format/ecmascript-regex.json",
    "optional/format/regex.json",
    "pattern.json",
    "patternProperties.json",
)

_JSON_TYPES = {
    "null": lambda value: value is None,
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: (isinstance(value, int) and not isinstance(value, bool))
    or (isinstance(value, float) and value.is_integer()),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "string": lambda value: isinstance(value, str),
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}
_ORACLE_KEYWORDS = frozenset({"$schema", "type", "pattern", "maximum", "format",
                              "patternProperties", "additionalProperties"})


def oracle_is_valid(schema, instance):
    """A tiny evaluator for the few keywords the regex suite files combine with
    patterns, so each case's verdict depends on compile_ecma alone."""
    if isinstance(schema, bool):
        return schema
    if "type" in schema and not _JSON_TYPES[schema["type"]](instance):
        return False
    if isinstance(instance, str):
        if "pattern" in schema and compile_ecma(schema["pattern"]).search(instance) is None:
            return False
        if schema.get("format") == "regex" and not is_ecma_regex(instance):
            return False
    if "maximum" in schema and _JSON_TYPES["number"](instance) and instance > schema["maximum"]:
        return False
    if isinstance(instance, dict):
        patterns = schema.get("patternProperties", {})
        for name, value in instance.items():
            matched = [sub for pattern, sub in patterns.items()
                       if compile_ecma(pattern).search(name) is not None]
            if not matched and schema.get("additionalProperties", True) is False:
                return False
            if not all(oracle_is_valid(sub, value) for sub in matched):
                return False
    return True


def _schemas_use_only_oracle_keywords(schema):
    if isinstance(schema, bool):
        return True
    if not set(schema) <= _ORACLE_KEYWORDS:
        return False
    return all(_schemas_use_only_oracle_keywords(sub)
               for sub in schema.get("patternProperties", {}).values())


@unittest.skipUnless(DRAFT_DIR.is_dir(), f"JSON Schema test suite not found at {SUITE_ROOT} "
                     "(set JSON_SCHEMA_TEST_SUITE)")
class OfficialSuiteRegexCasesTest(unittest.TestCase):
    """Every case of the suite's regex files gets the suite's verdict."""

    def run_suite_file(self, relative_path):
        groups = json.loads((DRAFT_DIR / relative_path).read_text(encoding="utf-8"))
        checked = 0
        for group in groups:
            if not _schemas_use_only_oracle_keywords(group["schema"]):
                continue
            for case in group["tests"]:
                with self.subTest(file=relative_path, group=group["description"],
                                  case=case["description"]):
                    self.assertEqual(oracle_is_valid(group["schema"], case["data"]),
                                     case["valid"])
                checked += 1
        self.assertGreater(checked, 0, f"no case of {relative_path} was checked")

    def test_optional_ecmascript_regex_cases_pass(self):
        self.run_suite_file("optional/ecmascript-regex.json")

    def test_optional_non_bmp_regex_cases_pass(self):
        self.run_suite_file("optional/non-bmp-regex.json")

    def test_format_ecmascript_regex_cases_pass(self):
        self.run_suite_file("optional/format/ecmascript-regex.json")

    def test_format_regex_cases_pass(self):
        self.run_suite_file("optional/format/regex.json")

    def test_required_pattern_cases_pass(self):
        self.run_suite_file("pattern.json")

    def test_required_pattern_properties_cases_pass(self):
        self.run_suite_file("patternProperties.json")


def matches(pattern, text):
    return compile_ecma(pattern).search(text) is not None


class CharacterClassEscapesTest(unittest.TestCase):
    def test_digit_escape_does_not_match_arabic_indic_digits(self):
        self.assertTrue(matches(r"^\d$", "7"))
        self.assertFalse(matches(r"^\d$", "\u0663"))
        self.assertTrue(matches(r"^\D$", "\u0663"))

    def test_word_escape_is_ascii_only(self):
        self.assertTrue(matches(r"^\w+$", "Az_09"))
        self.assertFalse(matches(r"^\w$", "\u00e9"))
        self.assertTrue(matches(r"^\W$", "\u00e9"))

    def test_word_boundary_uses_ascii_word_characters(self):
        self.assertTrue(matches(r"\bx", "\u00e9x"))
        self.assertFalse(matches(r"\Bx", "\u00e9x"))
        self.assertTrue(matches(r"a\Bb", "ab"))

    def test_not_word_boundary_matches_in_an_empty_string(self):
        # Python's own \B never matches an empty string; ECMA's does.
        self.assertTrue(matches(r"^\B$", ""))
        self.assertFalse(matches(r"\b", ""))

    def test_space_escape_is_the_ecma_white_space_and_line_terminator_set(self):
        for char in "\t\n\v\f\r \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff":
            with self.subTest(code_point=hex(ord(char))):
                self.assertTrue(matches(r"^\s$", char))
                self.assertFalse(matches(r"^\S$", char))
        for char in "\u0085\u180e\u200b\x1c":
            with self.subTest(code_point=hex(ord(char))):
                self.assertFalse(matches(r"^\s$", char))

    def test_space_set_covers_every_unicode_space_separator(self):
        import unicodedata
        for code_point in range(0x110000):
            if unicodedata.category(chr(code_point)) == "Zs":
                self.assertTrue(matches(r"^\s$", chr(code_point)), hex(code_point))

    def test_negated_escapes_inside_a_class_are_complements(self):
        self.assertTrue(matches(r"^[\D]$", "x"))
        self.assertFalse(matches(r"^[\D]$", "5"))
        self.assertTrue(matches(r"^[^\W\d]+$", "abc_"))
        self.assertFalse(matches(r"^[^\W\d]$", "5"))


class AnchorsAndDotTest(unittest.TestCase):
    def test_dollar_does_not_match_before_a_trailing_newline(self):
        self.assertFalse(matches("^abc$", "abc\n"))
        self.assertTrue(matches("^abc$", "abc"))

    def test_caret_matches_only_at_the_start_of_the_input(self):
        self.assertFalse(matches("^b", "a\nb"))

    def test_dot_matches_anything_but_line_terminators(self):
        for char in "\n\r\u2028\u2029":
            self.assertFalse(matches("^.$", char), hex(ord(char)))
        for char in "a\u0085\U0001f432\t":
            self.assertTrue(matches("^.$", char), hex(ord(char)))

    def test_multiline_modifier_makes_anchors_match_at_line_terminators(self):
        self.assertTrue(matches("(?m:^b$)", "a\u2028b\rc"))
        self.assertFalse(matches("(?m:^b$)", "ab"))

    def test_dot_all_modifier_makes_dot_match_line_terminators(self):
        self.assertTrue(matches("^(?s:.)$", "\n"))


class EscapesTest(unittest.TestCase):
    def test_unicode_escapes_denote_code_points(self):
        self.assertTrue(matches(r"^\u0041$", "A"))
        self.assertTrue(matches(r"^\u{1F432}$", "\U0001f432"))
        self.assertTrue(matches(r"^\x41$", "A"))

    def test_surrogate_pair_escapes_combine_into_one_code_point(self):
        self.assertTrue(matches(r"^\ud83d\udc32$", "\U0001f432"))
        self.assertTrue(matches(r"^[\ud83d\udc32]$", "\U0001f432"))
        self.assertFalse(matches(r"^[\ud83d\udc32]$", "\ud83d"))

    def test_non_bmp_literal_is_one_character_for_quantifiers(self):
        self.assertTrue(matches("^\U0001f432{2}$", "\U0001f432\U0001f432"))

    def test_control_escapes(self):
        self.assertTrue(matches(r"^\cJ$", "\n"))
        self.assertTrue(matches(r"^\cj$", "\n"))
        self.assertTrue(matches(r"^\0$", "\x00"))
        self.assertTrue(matches(r"^\t\n\v\f\r$", "\t\n\v\f\r"))

    def test_syntax_characters_escape_to_themselves(self):
        self.assertTrue(matches(r"^\^\$\\\.\*\+\?\(\)\[\]\{\}\|\/$", "^$\\.*+?()[]{}|/"))

    def test_python_special_characters_are_literals_when_ecma_says_so(self):
        self.assertTrue(matches("^#x$", "#x"))
        self.assertTrue(matches("^ $", " "))
        self.assertTrue(matches("^[-a]$", "-"))


class UnicodePropertiesTest(unittest.TestCase):
    def test_general_category_by_short_and_long_name(self):
        self.assertTrue(matches(r"^\p{Lu}$", "\u00c9"))
        self.assertTrue(matches(r"^\p{Uppercase_Letter}$", "\u00c9"))
        self.assertTrue(matches(r"^\p{gc=Lu}$", "A"))
        self.assertTrue(matches(r"^\p{General_Category=Decimal_Number}$", "\u0663"))
        self.assertFalse(matches(r"^\p{Lu}$", "e"))
        self.assertTrue(matches(r"^\P{Lu}$", "e"))

    def test_letter_property_covers_non_bmp_letters(self):
        self.assertTrue(matches(r"^\p{L}$", "\U00010400"))
        self.assertFalse(matches(r"^\p{L}$", "\U0001f432"))

    def test_property_escapes_inside_classes(self):
        self.assertTrue(matches(r"^[\p{Nd}x]+$", "\u0663x7"))
        self.assertTrue(matches(r"^[^\P{Nd}]$", "\u0663"))

    def test_script_property_for_common_scripts(self):
        self.assertTrue(matches(r"^\p{Script=Greek}+$", "\u03b1\u03b2"))
        self.assertFalse(matches(r"^\p{Script=Greek}$", "a"))
        self.assertTrue(matches(r"^\p{sc=Cyrl}$", "\u0416"))
        self.assertTrue(matches(r"^\p{scx=Latin}$", "\u00e9"))

    def test_first_script_lookup_in_a_fresh_process_does_not_deadlock(self):
        # Regression: the script table is built under the lock that the
        # category table it needs also takes.
        import subprocess
        import sys
        completed = subprocess.run(
            [sys.executable, "-c", "from agent_lab.schema.ecma_regex import compile_ecma;"
             "assert compile_ecma(r'^\\p{sc=Grek}$').search('\\u03b1')"],
            cwd=REPO_ROOT, timeout=60, capture_output=True, text=True)
        self.assertEqual(completed.returncode, 0, completed.stderr[-500:])

    def test_binary_properties_that_can_be_derived(self):
        self.assertTrue(matches(r"^\p{ASCII}+$", "abc"))
        self.assertTrue(matches(r"^\p{Any}$", "\U0010ffff"))
        self.assertFalse(matches(r"^\p{Assigned}$", "\u0378"))
        self.assertTrue(matches(r"^\p{Uppercase}$", "\u2160"))
        self.assertTrue(matches(r"^\p{Cased}$", "\u01c5"))
        self.assertTrue(matches(r"^\p{CWL}$", "\u00c9"))
        self.assertFalse(matches(r"^\p{Changes_When_Lowercased}$", "\u00e9"))
        self.assertTrue(matches(r"^\p{CWT}$", "\u01c6"))
        self.assertFalse(matches(r"^\p{CWT}$", "\u01c5"))

    def test_unknown_property_is_invalid(self):
        self.assertFalse(is_ecma_regex(r"\p{NotAProperty}"))
        self.assertFalse(is_ecma_regex(r"\p{lu}"))
        self.assertFalse(is_ecma_regex(r"\p{Script=NotAScript!}"))

    def test_valid_property_this_module_cannot_compute_is_unsupported_not_invalid(self):
        self.assertTrue(is_ecma_regex(r"\p{Emoji}"))
        with self.assertRaises(EcmaRegexUnsupported):
            compile_ecma(r"\p{Emoji}")


class GroupsAndReferencesTest(unittest.TestCase):
    def test_named_groups_and_named_backreferences(self):
        self.assertTrue(matches("^(?<q>['\"])x\\k<q>$", "'x'"))
        self.assertFalse(matches("^(?<q>['\"])x\\k<q>$", "'x\""))

    def test_group_names_python_cannot_spell_still_work(self):
        self.assertTrue(matches(r"^(?<$a>x)\k<$a>$", "xx"))
        self.assertTrue(matches(r"^(?<\u0061b>x)\k<ab>$", "xx"))

    def test_a_group_name_may_repeat_only_in_exclusive_alternatives(self):
        self.assertTrue(is_ecma_regex("(?<y>a)|(?<y>b)"))
        self.assertTrue(is_ecma_regex("(?:(?<y>a)|(?<y>b))\\k<y>"))
        self.assertFalse(is_ecma_regex("(?<y>a)(?<y>b)"))
        self.assertFalse(is_ecma_regex("(?<y>(?<y>a)|b)"))
        with self.assertRaises(EcmaRegexUnsupported):
            compile_ecma("(?<y>a)|(?<y>b)")

    def test_reference_to_a_group_that_did_not_participate_matches_empty(self):
        self.assertTrue(matches(r"^(?:(a)|b)\1$", "b"))

    def test_forward_and_self_references_match_empty(self):
        self.assertTrue(matches(r"^\1(a)$", "a"))
        self.assertTrue(matches(r"^(a\1)$", "a"))

    def test_a_reference_to_a_group_a_repetition_resets_is_unsupported_not_run_otherwise(self):
        # ECMA resets the captures inside a repeated group at each iteration (and refuses an empty
        # iteration past the minimum); Python's re keeps the last capture. In JavaScript
        # /^(?:(a)|b){2}\1$/u accepts "ab" (the second iteration reset \1 to empty) and refuses "aba";
        # re did the reverse. Such a pattern is valid, so it is unsupported, not invalid.
        for pattern in (r"^(?:(a)|b){2}\1$", r"^(?:(?<q>a)|b){2}\k<q>$", r"^(?:(a)|b)+\1$",
                        r"^(?:(a)|b\1)+$", r"^(?:(a)?b)*\1$", r"^(a?)+\1$",
                        r"^(?:(?:(a)|b)c)+\1$", r"^(?:x(?:(a)|b)+y\1)+$",
                        r"^(?:(?=(b)))?\1$",  # ECMA drops the empty iteration and its capture: "b" fails
                        r"^(?=((?:|b)*))\1$"):  # ECMA captures "b" in the lookahead, re the empty string
            with self.subTest(pattern=pattern):
                self.assertTrue(is_ecma_regex(pattern))
                with self.assertRaises(EcmaRegexUnsupported) as raised:
                    compile_ecma(pattern)
                self.assertIn("ECMA-262 and Python's re keep differently", raised.exception.reason)

    def test_references_both_engines_read_alike_still_run(self):
        # (pattern, a string it accepts, one it refuses): the group is outside every repetition, or
        # captured in the same iteration before the reference, or in every non-empty iteration; a
        # reference before its group is empty in every iteration in both.
        for pattern, accepted, refused in (
                (r"^(a)\1$", "aa", "a"),
                ("^([\"']).*\\1$", "'x'", "'x\""),
                (r"^(\d+)(?:,\1)*$", "12,12,12", "12,12,13"),
                ("^(?:([\"'])[a-z]*\\1,?)+$", "'ab',\"c\"", "'ab\""),
                (r"^((\w)\2)+$", "aabbcc", "aabc"),
                (r"^(?:(a)|b)\1$", "aa", "ab"),
                (r"^(?:(a)b)?\1$", "aba", "abb"),
                (r"^(?:(a)(b)?)+\1$", "aa", "ab"),
                (r"^([ab])+\1$", "abb", "aba"),
                (r"^(?:b\1|(a))+$", "ba", "bc")):
            with self.subTest(pattern=pattern):
                self.assertTrue(matches(pattern, accepted))
                self.assertFalse(matches(pattern, refused))

    def test_lookarounds(self):
        self.assertTrue(matches(r"^(?=a)\w(?!b)", "ac"))
        self.assertTrue(matches(r"(?<=a)b", "ab"))
        self.assertFalse(matches(r"(?<!a)b", "ab"))

    def test_ignore_case_modifier(self):
        self.assertTrue(matches("^(?i:abc)d$", "ABCd"))
        self.assertFalse(matches("^(?i:abc)d$", "ABCD"))

    def test_negated_classes_under_ignore_case_exclude_every_case_of_their_members(self):
        # ECMA: an inverted class under i matches c when no member canonicalizes to c's case, so
        # (?i:[^a]) rejects "a" and "A"; the complement ranges with case folding on top matched both.
        from agent_lab.schema.ecma_regex import parse_ecma
        from agent_lab.schema.linear_regex import build_linear_matcher
        cases = [("^(?i:[^a])$", "a", False), ("^(?i:[^a])$", "A", False), ("^(?i:[^a])$", "b", True),
                 ("^(?i:[^k-m])+$", "xKy", False), ("^(?i:[^k-m])+$", "xy", True),
                 ("^(?i:[^x\\d])$", "X", False), ("^(?i:[^x\\d])$", "7", False),
                 ("^(?i:[^\\W])$", "\u017f", True), ("^(?i:[^\\w])$", "K", False),
                 ("^(?i:\\W)$", "s", False), ("^(?i:\\W)$", "K", False), ("^(?i:\\W)$", "i", False),
                 ("^(?i:[\\W])$", "k", False), ("^(?i:\\W)$", "-", True), ("^(?i:[^])$", "a", True),
                 ("^(?i:\\P{Lu})$", "A", True)]  # \P is complemented before case closure, as in ECMA
        for pattern, text, expected in cases:
            with self.subTest(pattern=pattern, text=text):
                self.assertEqual(matches(pattern, text), expected)
                linear = build_linear_matcher(parse_ecma(pattern))
                self.assertEqual(linear.search(text) is not None, expected)

    def test_quantifiers_and_lazy_quantifiers(self):
        self.assertEqual(compile_ecma("a{2,3}?").search("aaaa").group(), "aa")
        self.assertTrue(matches("^a{2,}$", "aaaa"))
        self.assertFalse(matches("^a{2}$", "aaa"))

    def test_empty_class_matches_nothing_and_negated_empty_class_matches_anything(self):
        self.assertFalse(matches("[]", "abc"))
        self.assertTrue(matches("^[^]$", "\n"))


class RejectedSyntaxTest(unittest.TestCase):
    def assert_invalid(self, pattern):
        with self.subTest(pattern=pattern):
            self.assertFalse(is_ecma_regex(pattern))
            with self.assertRaises(EcmaRegexError):
                compile_ecma(pattern)

    def test_python_only_syntax_is_rejected(self):
        for pattern in ("(?P<n>x)", "(?P<n>a)(?P=n)", "(?#comment)a", r"\Aabc", r"abc\Z",
                        r"abc\z", "(?i)abc", "(?ims)abc", "a*+", "a++", "(?>a)", r"\G"):
            self.assert_invalid(pattern)

    def test_identity_escapes_of_letters_are_rejected_in_unicode_mode(self):
        for pattern in (r"\a", r"\e", r"\q", r"\_", r"\-", r"[\B]", r"[\k]"):
            self.assert_invalid(pattern)

    def test_incomplete_escapes_are_rejected(self):
        for pattern in ("\\", r"\c", r"^\c1", r"\x4", r"\u12", r"\u{110000}", r"\01", r"\p",
                        r"\p{L", r"\k<missing>(a)", r"\2(a)"):
            self.assert_invalid(pattern)

    def test_unbalanced_brackets_and_lone_quantifiers_are_rejected(self):
        for pattern in ("^(abc]", "(", ")", "[a", "a]", "a}", "{1}", "a{1", "a{2,1}", "*a", "a**",
                        "^*", "(?=a)*", "(?<=a)+", r"\b+", "[z-a]", r"[\d-z]"):
            self.assert_invalid(pattern)

    def test_error_messages_give_position_not_pattern_text(self):
        with self.assertRaises(EcmaRegexError) as raised:
            compile_ecma("secret-value(")
        self.assertIn("position", str(raised.exception))
        self.assertNotIn("secret-value", str(raised.exception))

    def test_errors_carry_reason_and_position_apart_from_the_message(self):
        with self.assertRaises(EcmaRegexError) as raised:
            compile_ecma("ab(?<x")
        self.assertEqual(raised.exception.position, 5)
        self.assertEqual(raised.exception.reason, "unterminated group name")
        self.assertEqual(str(raised.exception),
                         "invalid ECMA-262 regular expression at position 5: unterminated group name")
        with self.assertRaises(EcmaRegexUnsupported) as raised:
            compile_ecma("(?<=a+)b")
        self.assertIsNone(raised.exception.position)
        self.assertNotIn("ECMA", raised.exception.reason)
        self.assertTrue(str(raised.exception).startswith("valid ECMA-262"))

    def test_valid_ecma_that_python_cannot_run_is_unsupported(self):
        # Variable-width lookbehind; a lookbehind reference to a group on its
        # right (ECMA matches lookbehinds right to left).
        for pattern in ("(?<=a+)b", "(?<=\\1(a))b"):
            with self.subTest(pattern=pattern):
                self.assertTrue(is_ecma_regex(pattern))
                with self.assertRaises(EcmaRegexUnsupported):
                    compile_ecma(pattern)

    def test_repetition_counts_of_any_length_are_valid_but_large_ones_unsupported(self):
        self.assertTrue(is_ecma_regex("a{" + "9" * 5000 + "}"))
        with self.assertRaises(EcmaRegexUnsupported):
            compile_ecma("a{99999999999}")
        self.assertFalse(is_ecma_regex("a{" + "2" * 5000 + ",1}"))
        self.assertFalse(is_ecma_regex("(a)\\" + "9" * 5000))

    def test_syntax_errors_after_an_unsupported_part_still_count(self):
        self.assertFalse(is_ecma_regex(r"\p{Emoji}("))
        self.assertFalse(is_ecma_regex("a{99999999999}["))
        self.assertFalse(is_ecma_regex("(?<y>a)|(?<y>b)]"))

    def test_deeply_nested_groups_do_not_exhaust_the_stack(self):
        pattern = "(" * 5000 + ")" * 5000
        with self.assertRaises(EcmaRegexUnsupported):
            compile_ecma(pattern)

    def test_deeply_nested_but_unbalanced_groups_are_invalid(self):
        self.assertFalse(is_ecma_regex("(" * 5000))
        self.assertFalse(is_ecma_regex("(" * 5000 + "[" + ")" * 5000))

    def test_translation_escapes_every_literal_python_could_misread(self):
        translated = translate_ecma("a#b c(?:d)")
        # Escaped spaces and hashes survive even verbose mode, where bare ones would vanish.
        self.assertIsNotNone(re.compile(translated, re.VERBOSE).fullmatch("a#b cd"))

    def test_compile_is_cached(self):
        self.assertIs(compile_ecma("^cached$"), compile_ecma("^cached$"))


# Patterns whose ECMA meaning differs from what Python's re would make of them,
# checked against a real ECMAScript engine when one is installed.
DIFFERENTIAL_PATTERNS = (
    "^abc$", "^\\d+$", "^\\w+$", "\\bfoo\\b", "\\B", "^\\s+$", "^\\S+$", "^.$", "^[^]$", "[]",
    "^(?:(a)|b)\\1$", "^\\1(a)$", "^(a\\1)+$", "(?<=\\d)x", "(?<!\\d)x", "^(?<n>.)\\k<n>$",
    "^[\\D]$", "^[^\\W\\d]+$", "^[\\s\\S]$", "^\\p{L}+$", "^\\P{L}+$", "^\\p{Lu}$", "^\\p{Nd}$",
    "^[\\p{N}_-]+$", "^\\u{1F432}$", "^\\ud83d\\udc32$", "^\\u00e9$", "^\\x41$", "^\\cJ$",
    "^\\0$", "^[\\b]$", "^[\\-a]$", "^a{2,3}$", "^(?:ab)*?c", "^(?=.*\\d)(?=.*[a-z]).{3,}$",
    "^\\p{Script=Greek}+$", "^\\p{ASCII}+$", "^[a-z\\u00e0-\\u00ff]+$", "^.{2}$", "^\\W$",
    "^(a|ab)(c|bcd)(d*)$", "^\\/\\.\\*$", "x$", "^$",
    "^(?:(a)b)?\\1$", "^((\\w)\\2)+$", "^([ab])+\\1$", "^(?:(a)(b)?)+\\1$", "^(?:(a)|b)\\1$",
    "^(?:b\\1|(a))+$",
)
DIFFERENTIAL_INSTANCES = (
    "", "abc", "abc\n", "a", "b", "bb", "aa", "1a", "x", "1x", "\u00e9", "\u00c9", "\u0663", "\u07c0",
    "\U0001f432", "\n", "\r", "\u2028", "\u00a0", "\ufeff", "\u2003", "\u0085", "\u180e",
    " \t", "foo bar", "\u00e9foo", "_-9", "abcd", "/.*", "\u03b1\u03b2", "A", "\x08", "-", "\x00",
    "ab1", "Abc9", "aaa", "\u0416",
)
ECMA_VALIDITY_PATTERNS = (
    "(?P<n>x)", "(?#c)", "(?i)a", "a*+", "\\a", "\\c", "\\c1", "\\01", "\\x4", "\\u12", "\\u{110000}",
    "\\p{lu}", "\\p{Letter}", "\\p{digit}", "\\p{Script=Greek}", "\\k<n>", "(?<n>a)\\k<m>", "\\2(a)",
    "a]", "a}", "a{", "{1}", "a{2,1}", "[z-a]", "[\\d-z]", "[a-\\d]", "(?<=a)*", "(?=a)*", "\\b*",
    "^*", "$+", "(", ")", "[", "\\", "\\-", "[\\-]", "\\/", "[\\B]", "(?<a$>x)", "(?<1a>x)",
    "(?:)", "()", "a||b", "[^]", "[]", "\\u{0}", "(?<=a+)b", "\\p{sc=Foo}", "\\p{Script=Zyyy}",
    "\\p{scx=Hira}", "\\p{Script=Old_Italic}", "\\p{sc=old_italic}", "\\p{Emoji}", "\\p{Foo=L}",
    "\\p{gc=Script}", "\\p{General_Category=Letter}", "\\P{Any}",
)


def _run_node(program, payload):
    import shutil
    import subprocess
    node = shutil.which("node")
    if node is None:
        return None
    # V8's interpreter: node 20's compiled tier answers /^(?:(?=a)a)*b(a)$/u.test("aba") false from
    # the second call on (the first, interpreted, is true).
    completed = subprocess.run([node, "--regexp-interpret-all", "-e", program], input=json.dumps(payload),
                               capture_output=True, text=True, timeout=60, check=True)
    return json.loads(completed.stdout)


_NODE_PROGRAM = """
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const result = input.patterns.map((source) => {
  let regex;
  try { regex = new RegExp(source, 'u'); } catch (error) { return null; }
  return input.instances.map((text) => regex.test(text));
});
process.stdout.write(JSON.stringify(result));
"""


class NodeDifferentialTest(unittest.TestCase):
    """Verdicts agree with node's RegExp (the u flag) on curated tricky patterns."""

    def test_match_verdicts_agree_with_an_ecmascript_engine(self):
        answers = _run_node(_NODE_PROGRAM, {"patterns": list(DIFFERENTIAL_PATTERNS),
                                            "instances": list(DIFFERENTIAL_INSTANCES)})
        if answers is None:
            self.skipTest("node is not installed: no ECMAScript engine to compare with")
        for pattern, node_verdicts in zip(DIFFERENTIAL_PATTERNS, answers):
            self.assertIsNotNone(node_verdicts, f"node rejects {pattern!r}")
            compiled = compile_ecma(pattern)
            for instance, node_verdict in zip(DIFFERENTIAL_INSTANCES, node_verdicts):
                with self.subTest(pattern=pattern, instance=instance):
                    self.assertEqual(compiled.search(instance) is not None, node_verdict)

    def test_every_script_name_in_the_table_is_accepted_by_an_ecmascript_engine(self):
        from agent_lab.schema.ecma.unicode import SCRIPT_ALIASES
        patterns = [f"\\p{{Script={name}}}" for name in sorted(SCRIPT_ALIASES)]
        answers = _run_node(_NODE_PROGRAM, {"patterns": patterns, "instances": []})
        if answers is None:
            self.skipTest("node is not installed: no ECMAScript engine to compare with")
        rejected = [pattern for pattern, answer in zip(patterns, answers) if answer is None]
        self.assertEqual(rejected, [])

    def test_syntax_verdicts_agree_with_an_ecmascript_engine(self):
        answers = _run_node(_NODE_PROGRAM, {"patterns": list(ECMA_VALIDITY_PATTERNS),
                                            "instances": []})
        if answers is None:
            self.skipTest("node is not installed: no ECMAScript engine to compare with")
        for pattern, node_verdict in zip(ECMA_VALIDITY_PATTERNS, answers):
            with self.subTest(pattern=pattern):
                self.assertEqual(is_ecma_regex(pattern), node_verdict is not None)


if __name__ == "__main__":
    unittest.main()
