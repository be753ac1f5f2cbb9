"""The corpora: no error-level rule fires on 63 well-written tools; every hostile sample is caught."""

from __future__ import annotations

import re
import unittest
from pathlib import Path

from agent_lab.lint import Severity, lint_catalog
from agent_lab.lint.engine import FLOW_RULES, SPEC_WARNING_RULES, spec_warnings
from fixtures.lint.benign_tools import benign_corpus, benign_tools
from fixtures.lint.hostile_tools import SAMPLES


class BenignCorpusTest(unittest.TestCase):
    def test_the_benign_corpus_has_at_least_60_tools_across_domains(self) -> None:
        tools = benign_tools()
        self.assertGreaterEqual(len(tools), 60)
        self.assertEqual(len({tool.name for tool in tools}), len(tools))

    def test_the_lint_topic_and_the_fixture_state_the_corpus_as_it_is(self) -> None:
        tools, domains = len(benign_tools()), len(benign_corpus())
        self.assertTrue(all(benign_corpus().values()))  # no empty domain
        readme = (Path(__file__).resolve().parent.parent / "agent_lab" / "docs" / "lint.md").read_text(encoding="utf-8")
        self.assertEqual(re.findall(r"benign corpus of (\d+)\s+tools across (\d+) domains", readme),
                         [(str(tools), str(domains))])
        fixture = (Path(__file__).resolve().parent / "fixtures" / "lint" / "benign_tools.py").read_text(encoding="utf-8")
        self.assertIn(f"{tools} well-written tool definitions across {domains} domains", fixture)

    def test_no_error_level_rule_fires_on_the_benign_corpus(self) -> None:
        errors = [f"{f.rule} {f.tool}: {f.message}" for f in lint_catalog(benign_tools()) if f.severity is Severity.ERROR]
        self.assertEqual(errors, [])

    def test_no_tool_level_warning_fires_either(self) -> None:
        # Catalog budgets (AL501, AL504) do fire: 63 tools in one surface is more than a host should get at once.
        # The toxic-flow rules judge one agent's tools together; these are tools of unrelated domains.
        warnings = [f"{f.rule} {f.tool}" for f in lint_catalog(benign_tools())
                    if f.severity is Severity.WARNING and f.tool is not None and f.rule not in FLOW_RULES]
        self.assertEqual(warnings, [])


class HostileCorpusTest(unittest.TestCase):
    def test_every_hostile_sample_is_caught_by_its_rule_even_when_linted_together(self) -> None:
        for rule_id, (hostile, _, config, lock) in SAMPLES.items():
            with self.subTest(rule=rule_id):
                found = lint_catalog(hostile() + benign_tools()[:5], config=config, lock=lock() if lock else None)
                self.assertIn(rule_id, {finding.rule for finding in found})


class SpecWarningsComeFromTheEngineTest(unittest.TestCase):
    def test_spec_warnings_are_the_messages_of_the_engines_spec_rules(self) -> None:
        self.assertEqual(SPEC_WARNING_RULES, ("AL401", "AL402", "AL310"))
        for rule_id in SPEC_WARNING_RULES:
            hostile = SAMPLES[rule_id][0]()[0]
            with self.subTest(rule=rule_id):
                engine = [f.message for f in lint_catalog([hostile]) if f.rule == rule_id]
                self.assertTrue(engine)
                self.assertEqual(hostile.warnings, spec_warnings(hostile))
                self.assertTrue(set(engine) <= set(hostile.warnings))


if __name__ == "__main__":
    unittest.main()
