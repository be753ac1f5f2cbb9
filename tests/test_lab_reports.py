"""Report cells are masked before they are cut, so a secret crossing the cut leaves no part behind."""

from __future__ import annotations

import json
import re
import tempfile
import unittest
from pathlib import Path
from typing import Any

from agent_lab import Registry, ToolSpec
from agent_lab.lab import Lab, LabError, Surface, lab_test_case, run_tool_eval
from agent_lab.lab.reports import MAX_CELL, NOT_XML_CHARACTER
from agent_lab.lab.testing import MAX_SHOWN

SECRET = "sk-cut-0123456789abcdef-XYZ"


class Vault:
    """A world with one secret, which the tool below shows inside a long text."""

    def secrets(self) -> list[str]:
        return [SECRET]


def build(world: Vault, **options: Any) -> Registry:
    registry = Registry(**options)
    registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                               output_schema={"type": "object"}),
                      lambda arguments: {"text": "a" * arguments["before"] + SECRET + "b" * 40})
    return registry


lab = Lab(name="vault", world=Vault, surfaces=[Surface("leaky", build)], effects=lambda world: [],
          secrets=Vault.secrets)


def case(cut_at: int) -> dict[str, Any]:
    """A case whose failing check shows the note, the secret starting 20 characters before `cut_at`."""
    return {"case_id": "long-note", "intent": "Read the note.", "actor": {"id": "a", "tenant": "t", "permissions": []},
            "calls": [{"tool": "read_note", "arguments": {"before": cut_at - 20}}],
            "expected": {"outcome": "succeeded", "side_effects": 0, "checks": [{"path": "/output/text", "equals": "x"}]}}


def parts_of_the_secret(text: str) -> list[str]:
    """Every prefix or suffix of SECRET of four characters or more that `text` holds."""
    pieces = {SECRET[:size] for size in range(4, len(SECRET) + 1)} | {SECRET[-size:] for size in range(4, len(SECRET) + 1)}
    return sorted(piece for piece in pieces if piece in text)


class SecretAcrossTheCutTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def cases(self, cut_at: int) -> Path:
        path = self.dir / "cases.jsonl"
        path.write_text(json.dumps(case(cut_at)) + "\n", encoding="utf-8")
        return path

    def test_a_secret_crossing_the_cut_leaves_no_part_in_junit_or_the_failures(self) -> None:
        out = self.dir / "out"
        evaluation = run_tool_eval([str(self.cases(MAX_CELL))], out_dir=out, lab=lab)
        self.assertFalse(evaluation.gate_passed)
        failures = (out / "tool-failures.md").read_text(encoding="utf-8")
        junit = (out / "junit.xml").read_text(encoding="utf-8")
        self.assertIn("[redacted]", failures)  # the cell is there, masked
        self.assertIn("a" * 20, junit)
        for name in ("tool-failures.md", "junit.xml", "tool-comparison.md", "tool-runs.jsonl", "tool-comparison.json"):
            with self.subTest(report=name):
                self.assertEqual(parts_of_the_secret((out / name).read_text(encoding="utf-8")), [])

    def test_the_unittest_helper_masks_before_it_cuts_too(self) -> None:
        test_class = lab_test_case(lab, self.cases(MAX_SHOWN))
        result = unittest.TestResult()
        unittest.TestLoader().loadTestsFromTestCase(test_class).run(result)
        [(_, message)] = result.failures
        self.assertIn("[redacted]", message)
        self.assertEqual(parts_of_the_secret(message), [])


class XmlCharactersTest(unittest.TestCase):
    def test_the_characters_escaped_in_junit_xml_are_exactly_those_outside_xml_1_0_char(self) -> None:
        def is_xml_char(point: int) -> bool:  # XML 1.0 (Fifth Edition) production [2] Char
            return point in (0x9, 0xA, 0xD) or 0x20 <= point <= 0xD7FF or 0xE000 <= point <= 0xFFFD \
                or 0x10000 <= point <= 0x10FFFF

        wrong = [hex(point) for point in range(0x110000)
                 if (NOT_XML_CHARACTER.match(chr(point)) is None) != is_xml_char(point)]
        self.assertEqual(wrong, [])



SPELLED_SECRETS = {
    "a line break (a PEM key)": "-----BEGIN KEY-----\nMIIEsecretbody0123\n-----END KEY-----",
    "a tab": "tab\tsecretbody0123",
    "two spaces": "pass  secretbody0123",
    "a quote": 'tok"secretbody0123',
    "a backslash": "back\\secretbody0123",
    "XML's special characters": "a<b&c>d'secretbody0123",
    "non-ASCII and a next-line character": "zé\x85secretbody0123",  # JSON Lines escapes the one, not the other
}
"""Secrets a report would spell otherwise than they are: on one line (a Markdown cell or a JUnit
message), inside JSON text (tool-runs.jsonl, tool-comparison.json) or XML (junit.xml), or in a repr."""


def spelling_lab(secret: str) -> Lab:
    class World:
        def secrets(self) -> list[str]:
            return [secret]

    def build_leaky(world: World, **options: Any) -> Registry:
        registry = Registry(**options)
        registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                                   output_schema={"type": "object"}),
                          lambda arguments: {"text": "a note: " + secret, "nested": {"copy": secret}})
        return registry

    return Lab(name="spelling", world=World, surfaces=[Surface("leaky", build_leaky)], effects=lambda world: [],
               secrets=World.secrets)


class SecretsSpelledOtherwiseTest(unittest.TestCase):
    """A secret with white space, quotes or markup characters is masked however a report spells it."""

    CASE = {"case_id": "spelled", "intent": "Read the note.", "actor": {"id": "a", "tenant": "t", "permissions": []},
            "calls": [{"tool": "read_note", "arguments": {}}],
            "expected": {"outcome": "succeeded", "side_effects": 0,
                         "checks": [{"path": "/output/text", "equals": "x"}, {"path": "/output/nested", "equals": "x"}]}}

    def test_no_report_file_shows_the_body_of_a_secret_spelled_otherwise(self) -> None:
        for label, secret in SPELLED_SECRETS.items():
            with self.subTest(secret=label), tempfile.TemporaryDirectory() as tmp:
                cases = Path(tmp) / "cases.jsonl"
                cases.write_text(json.dumps(self.CASE) + "\n", encoding="utf-8")
                evaluation = run_tool_eval([str(cases)], out_dir=Path(tmp) / "out", lab=spelling_lab(secret))
                self.assertFalse(evaluation.gate_passed)  # the checks failed, so the failures show the note
                failures = (Path(tmp) / "out" / "tool-failures.md").read_text(encoding="utf-8")
                self.assertIn("[redacted]", failures)
                for path in sorted((Path(tmp) / "out").iterdir()):
                    with self.subTest(report=path.name):
                        self.assertNotIn("secretbody0123", path.read_text(encoding="utf-8"))

    def test_the_unittest_helper_masks_a_secret_spelled_otherwise(self) -> None:
        for label, secret in SPELLED_SECRETS.items():
            with self.subTest(secret=label), tempfile.TemporaryDirectory() as tmp:
                cases = Path(tmp) / "cases.jsonl"
                cases.write_text(json.dumps(self.CASE) + "\n", encoding="utf-8")
                result = unittest.TestResult()
                unittest.TestLoader().loadTestsFromTestCase(lab_test_case(spelling_lab(secret), cases)).run(result)
                [(_, message)] = result.failures
                self.assertIn("[redacted]", message)
                self.assertNotIn("secretbody0123", message)


def value_lab(secret: str, shown: Any) -> Lab:
    """A lab whose one secret the tool shows as a JSON number or literal, not as a string."""
    class World:
        def secrets(self) -> list[str]:
            return [secret]

    def build_leaky(world: World, **options: Any) -> Registry:
        registry = Registry(**options)
        registry.register(ToolSpec(name="read_pin", description="Read the PIN.", input_schema={"type": "object"},
                                   output_schema={"type": "object"}),
                          lambda arguments: {"value": shown, "values": [shown, {"inner": shown}]})
        return registry

    return Lab(name="values", world=World, surfaces=[Surface("leaky", build_leaky)], effects=lambda world: [],
               secrets=World.secrets)


class SecretsInJsonValuesTest(unittest.TestCase):
    """A secret that is (or is inside) a JSON number or literal is masked, and the JSON reports stay JSON."""

    SHOWN = {"a PIN shown as a number": ("4821", 4821), "a PIN inside a larger number": ("4821", 1482100),
             "a secret equal to a literal": ("true", True), "a PIN inside a fraction": ("4821", 0.4821)}
    CASE = {"case_id": "pin", "intent": "Read the PIN.", "actor": {"id": "a", "tenant": "t", "permissions": []},
            "calls": [{"tool": "read_pin", "arguments": {}}], "expected": {"outcome": "succeeded", "side_effects": 0}}

    def test_json_reports_stay_json_and_show_no_secret(self) -> None:
        for label, (secret, shown) in self.SHOWN.items():
            with self.subTest(secret=label), tempfile.TemporaryDirectory() as tmp:
                cases = Path(tmp) / "cases.jsonl"
                cases.write_text(json.dumps(self.CASE) + "\n", encoding="utf-8")
                out = Path(tmp) / "out"
                run_tool_eval([str(cases)], out_dir=out, lab=value_lab(secret, shown))
                json.loads((out / "tool-comparison.json").read_text(encoding="utf-8"))
                lines = (out / "tool-runs.jsonl").read_text(encoding="utf-8").splitlines()
                records = [json.loads(line) for line in lines]
                [call] = [record for record in records if record["kind"] == "call"]
                self.assertEqual(call["result"]["output"]["value"], "[redacted]")
                for path in sorted(out.iterdir()):
                    with self.subTest(report=path.name):
                        self.assertNotIn(secret, path.read_text(encoding="utf-8"))


def html_lab() -> Lab:
    def build(world: object, **options: Any) -> Registry:
        registry = Registry(**options)
        registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                                   output_schema={"type": "object"}),
                          lambda arguments: {"text": "<script>alert(1)</script><details><summary>x"})
        return registry

    return Lab(name="html", world=object, surfaces=[Surface("typed", build)], effects=lambda world: [])


class MarkdownShowsHtmlAsTextTest(unittest.TestCase):
    """HTML in an intent or a tool's output is shown in the Markdown reports, never started: an intent
    `<!--` at the start of a line would hide every failure after it."""

    CASE = {"case_id": "html", "intent": "<!-- hides the rest", "actor": {"id": "a", "tenant": "t", "permissions": []},
            "calls": [{"tool": "read_note", "arguments": {}}],
            "expected": {"outcome": "succeeded", "side_effects": 0, "checks": [{"path": "/output/text", "equals": "x"}]}}

    def test_no_markdown_report_holds_raw_html_from_a_case_or_a_tool(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            cases = Path(tmp) / "cases.jsonl"
            cases.write_text(json.dumps(self.CASE) + "\n", encoding="utf-8")
            out = Path(tmp) / "out"
            run_tool_eval([str(cases)], out_dir=out, lab=html_lab())
            failures = (out / "tool-failures.md").read_text(encoding="utf-8")
            self.assertIn("&lt;!-- hides the rest", failures)
            self.assertIn("&lt;script&gt;", failures)
            for name in ("tool-failures.md", "tool-comparison.md"):
                with self.subTest(report=name):
                    text = (out / name).read_text(encoding="utf-8")
                    for markup in ("<!--", "<script", "<details", "<summary"):
                        self.assertNotIn(markup, text)


class RunsAreOneLineEachTest(unittest.TestCase):
    """tool-runs.jsonl is one record per line for any reader, even when a tool's output holds the
    characters str.splitlines() breaks at and JSON leaves raw (U+0085, U+2028, U+2029)."""

    TEXT = "one\x85two\u2028three\u2029four"

    def test_every_line_is_one_record_and_the_output_survives(self) -> None:
        def build(world: object, **options: Any) -> Registry:
            registry = Registry(**options)
            registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                                       output_schema={"type": "object"}), lambda arguments: {"text": self.TEXT})
            return registry

        lab = Lab(name="breaks", world=object, surfaces=[Surface("typed", build)], effects=lambda world: [])
        case = {"case_id": "breaks", "intent": "Read the note.", "actor": {"id": "a", "tenant": "t", "permissions": []},
                "calls": [{"tool": "read_note", "arguments": {}}], "expected": {"outcome": "succeeded", "side_effects": 0}}
        with tempfile.TemporaryDirectory() as tmp:
            cases = Path(tmp) / "cases.jsonl"
            cases.write_text(json.dumps(case) + "\n", encoding="utf-8")
            run_tool_eval([str(cases)], out_dir=Path(tmp) / "out", lab=lab)
            lines = (Path(tmp) / "out" / "tool-runs.jsonl").read_text(encoding="utf-8").splitlines()
            records = [json.loads(line) for line in lines]
            self.assertEqual([record["kind"] for record in records], ["call", "case"])
            self.assertEqual(records[0]["result"]["output"]["text"], self.TEXT)


TOKEN = "tok-live-0123456789"


class LabErrorsMaskTheWorldsSecretsTest(unittest.TestCase):
    """A hook of the lab that raises with a secret in its message (a KeyError on a token) is bad input,
    one line on stderr, a CI log: the world's secrets are masked in it."""

    CASE = {"case_id": "one", "intent": "Read.", "actor": {"id": "a", "tenant": "t", "permissions": []},
            "calls": [{"tool": "read_note", "arguments": {}}], "expected": {"outcome": "succeeded", "side_effects": 0}}

    def lab(self, broken: str) -> Lab:
        def fail(world: object, **options: Any) -> Any:
            raise KeyError(f"no record for {TOKEN}")

        def build(world: object, **options: Any) -> Registry:
            if broken == "build":
                fail(world)
            registry = Registry(**options)
            registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                                       output_schema={"type": "object"}), lambda arguments: {"text": "x"})
            return registry

        hooks: dict[str, Any] = {"effects": fail if broken == "effects" else (lambda world: [])}
        if broken == "settle":
            hooks["settle"] = fail
        return Lab(name="broken", world=object, surfaces=[Surface("typed", build)], secrets=lambda world: [TOKEN],
                   **hooks)

    def test_the_error_line_masks_the_secret(self) -> None:
        for broken in ("effects", "settle", "build"):
            case = dict(self.CASE, calls=self.CASE["calls"] + [{"do": "settle"}]) if broken == "settle" else self.CASE
            with self.subTest(hook=broken), tempfile.TemporaryDirectory() as tmp:
                cases = Path(tmp) / "cases.jsonl"
                cases.write_text(json.dumps(case) + "\n", encoding="utf-8")
                with self.assertRaises(LabError) as caught:
                    run_tool_eval([str(cases)], out_dir=Path(tmp) / "out", lab=self.lab(broken))
                self.assertIn("[redacted]", str(caught.exception))
                self.assertNotIn(TOKEN, str(caught.exception))
                self.assertFalse((Path(tmp) / "out").exists())


class IntentCannotForgeMarkdownTest(unittest.TestCase):
    """An intent starts a line of tool-failures.md and stays a paragraph there: it cannot add a heading
    (a forged "0 failing case(s)"), a list item or a quote to the report."""

    def test_only_the_engine_writes_headings_and_lists(self) -> None:
        def build(world: object, **options: Any) -> Registry:
            registry = Registry(**options)
            registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                                       output_schema={"type": "object"}), lambda arguments: {"text": "x"})
            return registry

        lab = Lab(name="forge", world=object, surfaces=[Surface("typed", build)], effects=lambda world: [])
        intents = ["## candidate (typed): 0 failing case(s)", "- a list item", "1. a numbered item", "```python a fence"]
        with tempfile.TemporaryDirectory() as tmp:
            cases = Path(tmp) / "cases.jsonl"
            cases.write_text("".join(json.dumps({
                "case_id": f"forged-{number}", "intent": intent, "actor": {"id": "a", "tenant": "t", "permissions": []},
                "calls": [{"tool": "read_note", "arguments": {}}],
                "expected": {"outcome": "rejected", "error_code": "tool_not_found", "side_effects": 0}}) + "\n"
                for number, intent in enumerate(intents)), encoding="utf-8")
            run_tool_eval([str(cases)], out_dir=Path(tmp) / "out", lab=lab)
            lines = (Path(tmp) / "out" / "tool-failures.md").read_text(encoding="utf-8").splitlines()
        headings = [line for line in lines if re.match(r"#{1,6}(\s|$)", line)]  # an ATX heading, as CommonMark reads one
        self.assertEqual(headings, ["# Tool failures", f"## candidate (typed): {len(intents)} failing case(s)"]
                         + [f"### forged-{number}" for number in range(len(intents))])
        self.assertEqual([line for line in lines if line.startswith(("- ", "1. ", ">", "```"))], [])


class MarkdownHoldsNoControlCharactersTest(unittest.TestCase):
    """Terminal control sequences in an intent or a tool's output reach the Markdown reports as
    `\\uXXXX` text, never as the characters (a CI log that prints the report would obey them)."""

    CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

    def test_no_control_character_in_a_markdown_report(self) -> None:
        def build(world: object, **options: Any) -> Registry:
            registry = Registry(**options)
            registry.register(ToolSpec(name="read_note", description="Read the note.", input_schema={"type": "object"},
                                       output_schema={"type": "object"}),
                              lambda arguments: {"text": "\x1b[2J\x1b]0;pwned\x07\x9b31m\x00"})
            return registry

        lab = Lab(name="controls", world=object, surfaces=[Surface("typed", build)], effects=lambda world: [])
        case = {"case_id": "controls", "intent": "Read \x1b[31mthe\x7f note.",
                "actor": {"id": "a", "tenant": "t", "permissions": []}, "calls": [{"tool": "read_note", "arguments": {}}],
                "expected": {"outcome": "succeeded", "side_effects": 0, "checks": [{"path": "/output/text", "equals": "x"}]}}
        with tempfile.TemporaryDirectory() as tmp:
            cases = Path(tmp) / "cases.jsonl"
            cases.write_text(json.dumps(case) + "\n", encoding="utf-8")
            run_tool_eval([str(cases)], out_dir=Path(tmp) / "out", lab=lab)
            failures = (Path(tmp) / "out" / "tool-failures.md").read_text(encoding="utf-8")
            self.assertIn("\\u001b[2J", failures)
            for name in ("tool-failures.md", "tool-comparison.md"):
                with self.subTest(report=name):
                    self.assertEqual(self.CONTROLS.findall((Path(tmp) / "out" / name).read_text(encoding="utf-8")), [])


if __name__ == "__main__":
    unittest.main()
