"""Format checkers answer the official suite's verdicts and never raise.

The suite's optional/format files are driven case by case through
FORMAT_CHECKERS (formats ignore non-string instances), followed by contract
tests for rules that are easy to get wrong.
"""

import json
import os
import pathlib
import unittest

from agent_lab.schema.formats import FORMAT_CHECKERS

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE_ROOT = pathlib.Path(os.environ.get(
    "JSON_SCHEMA_TEST_SUITE", REPO_ROOT.parent / "shared" / "json-schema-test-suite"))
FORMAT_DIR = SUITE_ROOT / "tests" / "draft2020-12" / "optional" / "format"

REQUIRED_FORMATS = ("date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6",
                    "uri", "uri-reference", "uuid", "json-pointer", "relative-json-pointer",
                    "regex")
OPTIONAL_FORMATS = ("idn-email", "idn-hostname", "iri", "iri-reference", "uri-template")


def format_verdict(format_name, instance):
    """What format assertion says about one instance: non-strings always pass."""
    if not isinstance(instance, str):
        return True
    return FORMAT_CHECKERS[format_name](instance)


@unittest.skipUnless(FORMAT_DIR.is_dir(), f"JSON Schema test suite not found at {SUITE_ROOT} "
                     "(set JSON_SCHEMA_TEST_SUITE)")
class OfficialSuiteFormatCasesTest(unittest.TestCase):
    """Each suite file named after a format passes completely."""

    def run_format_file(self, format_name):
        path = FORMAT_DIR / f"{format_name}.json"
        groups = json.loads(path.read_text(encoding="utf-8"))
        checked = 0
        for group in groups:
            schema = group["schema"]
            self.assertEqual(set(schema) - {"$schema"}, {"format"}, "unexpected schema shape")
            for case in group["tests"]:
                with self.subTest(format=schema["format"], case=case["description"]):
                    self.assertEqual(format_verdict(schema["format"], case["data"]),
                                     case["valid"])
                checked += 1
        self.assertGreater(checked, 0)

    def test_every_required_format_file_passes(self):
        for format_name in REQUIRED_FORMATS:
            with self.subTest(file=format_name):
                self.run_format_file(format_name)

    def test_every_optional_format_file_passes(self):
        for format_name in OPTIONAL_FORMATS:
            with self.subTest(file=format_name):
                self.run_format_file(format_name)


class CheckerTableTest(unittest.TestCase):
    def test_table_is_read_only(self):
        with self.assertRaises(TypeError):
            FORMAT_CHECKERS["date"] = lambda value: True  # type: ignore[index]

    def test_every_required_format_has_a_checker(self):
        for format_name in REQUIRED_FORMATS + OPTIONAL_FORMATS:
            self.assertIn(format_name, FORMAT_CHECKERS)

    def test_checkers_never_raise_on_hostile_strings(self):
        hostile = ["", "\x00", "\ud800", "\udfff@\ud800", "xn--", "xn--\U0010ffff", "[", "%",
                   "P" + "9" * 5000 + "D", "::" * 1000, "a" * 100_000, "(" * 10_000, "\\",
                   "xn--ls8h" * 40, "1998-12-31T23:59:60\ud800"]
        for format_name, checker in FORMAT_CHECKERS.items():
            for value in hostile:
                with self.subTest(format=format_name, length=len(value)):
                    self.assertIsInstance(checker(value), bool)


class DateTimeRulesTest(unittest.TestCase):
    def test_leap_second_is_valid_only_at_the_last_utc_minute(self):
        is_time = FORMAT_CHECKERS["time"]
        self.assertTrue(is_time("23:59:60Z"))
        self.assertTrue(is_time("18:59:60-05:00"))
        self.assertFalse(is_time("23:59:60+01:00"))
        self.assertTrue(FORMAT_CHECKERS["date-time"]("2016-12-31t18:59:60.5-05:00"))

    def test_february_29_follows_the_gregorian_leap_year_rule(self):
        is_date = FORMAT_CHECKERS["date"]
        self.assertTrue(is_date("2000-02-29"))
        self.assertFalse(is_date("1900-02-29"))

    def test_non_ascii_digits_and_trailing_newlines_are_rejected(self):
        self.assertFalse(FORMAT_CHECKERS["date"]("2020-01-0\u0661"))
        self.assertFalse(FORMAT_CHECKERS["date"]("2020-01-01\n"))
        self.assertFalse(FORMAT_CHECKERS["duration"]("P1D\n"))

    def test_duration_follows_rfc3339_appendix_a(self):
        is_duration = FORMAT_CHECKERS["duration"]
        self.assertTrue(is_duration("P1Y2M3DT4H5M6S"))
        self.assertFalse(is_duration("P1Y2D"))
        self.assertFalse(is_duration("PT1H2S"))
        self.assertFalse(is_duration("P1W1D"))


class NetworkFormatRulesTest(unittest.TestCase):
    def test_ipv4_rejects_leading_zeros_and_shorthand(self):
        is_ipv4 = FORMAT_CHECKERS["ipv4"]
        self.assertFalse(is_ipv4("01.2.3.4"))
        self.assertFalse(is_ipv4("127.1"))
        self.assertTrue(is_ipv4("1.2.3.4"))

    def test_ipv6_accepts_every_compressed_form_and_an_ipv4_tail(self):
        is_ipv6 = FORMAT_CHECKERS["ipv6"]
        for value in ("::", "::1", "1::", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4",
                      "::ffff:1.2.3.4", "1::1.2.3.4"):
            self.assertTrue(is_ipv6(value), value)
        for value in ("1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::8", "1::2::3", "fe80::1%eth0",
                      "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3", "::01.2.3.4"):
            self.assertFalse(is_ipv6(value), value)

    def test_hostname_checks_a_labels_with_idna2008(self):
        is_hostname = FORMAT_CHECKERS["hostname"]
        self.assertTrue(is_hostname("xn--bcher-kva.example"))
        self.assertFalse(is_hostname("xn--bcher-kva-.example"))
        self.assertFalse(is_hostname("b\u00fccher.example"))

    def test_idn_hostname_applies_the_bidi_rule(self):
        is_idn_hostname = FORMAT_CHECKERS["idn-hostname"]
        self.assertTrue(is_idn_hostname("\u05d0\u05d1.example"))
        self.assertFalse(is_idn_hostname("a\u05d0.example"))

    def test_email_accepts_quoted_local_parts_and_address_literals(self):
        is_email = FORMAT_CHECKERS["email"]
        self.assertTrue(is_email('"a b"@example.com'))
        self.assertTrue(is_email("a@[IPv6:2001:db8::1]"))
        self.assertFalse(is_email("a@[IPv6:2001:db8::1:1.2.3.04]"))
        self.assertFalse(is_email("a@b@example.com"))

    def test_uri_requires_a_scheme_and_uri_reference_does_not(self):
        self.assertTrue(FORMAT_CHECKERS["uri"]("urn:isbn:0451450523"))
        self.assertFalse(FORMAT_CHECKERS["uri"]("/relative/path"))
        self.assertTrue(FORMAT_CHECKERS["uri-reference"]("/relative/path"))
        self.assertTrue(FORMAT_CHECKERS["uri"]("http://[v7.fe80::a]/"))

    def test_iri_accepts_non_ascii_characters_uri_refuses(self):
        self.assertTrue(FORMAT_CHECKERS["iri"]("http://\u00e9xample.org/\u00e9"))
        self.assertFalse(FORMAT_CHECKERS["uri"]("http://\u00e9xample.org/\u00e9"))


class PointerAndRegexRulesTest(unittest.TestCase):
    def test_json_pointer_tilde_escapes(self):
        self.assertTrue(FORMAT_CHECKERS["json-pointer"]("/a~0b~1c"))
        self.assertFalse(FORMAT_CHECKERS["json-pointer"]("/a~2"))

    def test_relative_json_pointer_prefix_is_a_non_negative_integer(self):
        self.assertTrue(FORMAT_CHECKERS["relative-json-pointer"]("0#"))
        self.assertFalse(FORMAT_CHECKERS["relative-json-pointer"]("00/a"))

    def test_regex_format_is_ecma_syntax_not_python_syntax(self):
        is_regex = FORMAT_CHECKERS["regex"]
        self.assertTrue(is_regex("(?<name>x)\\k<name>"))
        self.assertFalse(is_regex("(?P<name>x)"))

    def test_uuid_accepts_any_version_and_case(self):
        self.assertTrue(FORMAT_CHECKERS["uuid"]("ABCDEF01-2345-6789-abcd-ef0123456789"))
        self.assertFalse(FORMAT_CHECKERS["uuid"]("abcdef01-2345-6789-abcd-ef012345678"))


if __name__ == "__main__":
    unittest.main()
