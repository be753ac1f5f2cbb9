"""`agent-lab lint` and `catalog-cost`: targets, config, exit codes; the tool-eval gate uses the engine."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from agent_lab.adapters import export_catalog
from agent_lab.catalog_cost import ESTIMATOR, catalog_costs, rendered_json
from agent_lab.cli import main
from agent_lab.lab.candidate import candidate_specs
from agent_lab.lint import RULES, LintConfig, LintConfigError

REPOSITORY = Path(__file__).resolve().parents[1]
HOSTILE = f"{REPOSITORY / 'tests' / 'fixtures' / 'lint' / 'hostile_registry.py'}:registry"


def run(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(arguments))
    return status, out.getvalue(), err.getvalue()


class LintCommandTest(unittest.TestCase):
    def test_the_built_in_candidate_passes_with_exit_0(self) -> None:
        status, out, _ = run("lint")
        self.assertEqual(status, 0)
        self.assertIn("0 error(s)", out)
        self.assertIn("agent_lab/lab/tickets/candidate.py:", out)

    def test_a_surface_with_an_error_level_finding_exits_1(self) -> None:
        self.assertEqual(run("lint", "--surface", "wide-tool-v1")[0], 1)
        self.assertEqual(run("lint", "--registry", HOSTILE)[0], 1)

    def test_ignoring_the_failing_rules_passes(self) -> None:
        self.assertEqual(run("lint", "--registry", HOSTILE, "--ignore", "AL2,AL401")[0], 0)

    def test_json_lists_findings_with_locations_and_every_rule(self) -> None:
        status, out, _ = run("lint", "--registry", HOSTILE, "--format", "json", "--select", "AL206")
        document = json.loads(out)
        self.assertEqual(status, 1)
        self.assertEqual({finding["rule"] for finding in document["findings"]}, {"AL206"})
        self.assertEqual([rule["id"] for rule in document["rules"]], [rule.id for rule in RULES])
        self.assertTrue(all(finding["location"]["path"].endswith("hostile_registry.py")
                            for finding in document["findings"]))

    def test_a_bad_rule_selector_is_one_line_and_exit_2(self) -> None:
        for arguments, message in ((("--select", "AL9"), "--select: 'AL9' matches no rule"),
                                   (("--ignore", "AL406"), "--ignore: AL406 is retired")):
            with self.subTest(arguments=arguments):
                status, out, err = run("lint", *arguments)
                self.assertEqual((status, out), (2, ""))
                self.assertIn(message, err)
                self.assertEqual(len(err.strip().splitlines()), 1)

    def test_lab_registry_and_surface_errors_are_exactly_those_of_export_and_inspect(self) -> None:
        for arguments, message in ((("--lab", "no_such_module:lab"), "no module named 'no_such_module'"),
                                   (("--lab", "agent_lab.cli:main"), "not an agent_lab.lab.Lab"),
                                   (("--registry", "agent_lab:Registry2"), "has no attribute"),
                                   (("--registry", "agent_lab.lab.backend:TicketBackend"), "not a Registry"),
                                   (("--surface", "nope"), "has no surface 'nope'"),
                                   (("--registry", HOSTILE, "--surface", "x"), "does not apply to --registry"),
                                   (("--registry", "x.py:y"), "no such file")):
            for command in ("lint", "catalog-cost"):
                with self.subTest(command=command, arguments=arguments):
                    status, out, err = run(command, *arguments)
                    self.assertEqual((status, out), (2, ""))
                    self.assertIn(message, err)
                    self.assertEqual(len(err.strip().splitlines()), 1)
                    self.assertEqual((status, err), run("inspect", *arguments)[::2])

    def test_lab_and_registry_together_are_refused_as_by_export(self) -> None:
        status, _, err = run("lint", "--lab", "agent_lab.lab.tickets:lab", "--registry", HOSTILE)
        self.assertEqual(status, 2)
        self.assertIn("not allowed with argument", err)

    def test_the_lab_comes_from_the_project_table_as_for_export(self) -> None:
        files_lab = REPOSITORY / "tests" / "labs" / "files_lab.py"
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text(f'[tool.agent-lab]\nlab = "{files_lab.as_posix()}:lab"\n',
                                                         encoding="utf-8")
            command = [sys.executable, "-m", "agent_lab", "lint", "--format", "json"]
            environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
            done = subprocess.run(command, cwd=directory, env=environment, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout)["summary"]["surfaces"], ["files-typed-v2", "files-typed-v3"])


class LintConfigTest(unittest.TestCase):
    def test_the_pyproject_table_sets_severity_select_and_ignore_and_flags_beat_it(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text(textwrap.dedent("""
                [tool.agent-lab.lint]
                ignore = ["AL3"]
                severity = { AL102 = "error" }
            """), encoding="utf-8")
            command = [sys.executable, "-m", "agent_lab", "lint", "--format", "json"]
            environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
            done = subprocess.run(command, cwd=directory, env=environment, capture_output=True, text=True, timeout=120)
            document = json.loads(done.stdout)
            self.assertEqual(done.returncode, 1)  # slow_ticket_lookup is not verb-first: now an error
            self.assertIn("AL102", {f["rule"] for f in document["findings"] if f["severity"] == "error"})
            self.assertNotIn("AL302", {f["rule"] for f in document["findings"]})
            again = subprocess.run(command + ["--ignore", "AL1,AL3"], cwd=directory, env=environment,
                                   capture_output=True, text=True, timeout=120)
            self.assertEqual(again.returncode, 0)
            Path(directory, "pyproject.toml").write_text("[tool.agent-lab.lint]\nselekt = ['AL1']\n", encoding="utf-8")
            broken = subprocess.run(command, cwd=directory, env=environment, capture_output=True, text=True, timeout=120)
            self.assertEqual(broken.returncode, 2)
            self.assertIn("unknown key 'selekt'", broken.stderr)

    def test_config_values_are_checked(self) -> None:
        for table in ({"severity": {"AL999": "error"}}, {"severity": {"AL101": "fatal"}}, {"hosts": ["gemini"]},
                      {"select": "AL1"}, {"max-tools": {"openai": 0}}, {"max-catalog-tokens": True}):
            with self.subTest(table=table), self.assertRaises(LintConfigError):
                LintConfig.from_mapping(table)
        config = LintConfig.from_mapping({"severity": {"AL204": "off"}, "max-tools": 5})
        self.assertEqual(config.options["max_tools"]["mcp"], 5)


class CatalogCostTest(unittest.TestCase):
    def test_bytes_are_each_hosts_rendered_definition_and_the_estimator_is_named(self) -> None:
        specs = candidate_specs()
        for cost in catalog_costs(specs, exact=False):
            with self.subTest(host=cost.host):
                rendered = export_catalog(specs, cost.host)
                self.assertEqual([tool.bytes for tool in cost.tools],
                                 [len(rendered_json(tool).encode("utf-8")) for tool in rendered])
                self.assertEqual(cost.total_bytes, len(rendered_json(rendered).encode("utf-8")))
                self.assertEqual(cost.estimator, ESTIMATOR)
                self.assertTrue(all(tool.tokens > 0 for tool in cost.tools))

    def test_the_command_prints_a_table_for_all_four_hosts(self) -> None:
        status, out, _ = run("catalog-cost")
        self.assertEqual(status, 0)
        for host in ("openai bytes", "openai-chat bytes", "anthropic bytes", "mcp bytes", "total (whole list)",
                     ESTIMATOR):
            self.assertIn(host, out)
        status, out, _ = run("catalog-cost", "--format", "json", "--host", "mcp")
        self.assertEqual([host["host"] for host in json.loads(out)[0]["hosts"]], ["mcp"])


class GateUsesTheEngineTest(unittest.TestCase):
    def test_an_error_level_finding_on_the_candidate_fails_the_gate(self) -> None:
        from agent_lab.lab.tool_eval import evaluate

        cases = str(REPOSITORY / "datasets" / "tool-cases.jsonl")
        strict = evaluate([cases], lint_config=LintConfig(severity={"AL102": "error"}))
        [check] = [check for check in strict.gate if "lint" in check.name]
        self.assertFalse(check.passed)
        self.assertIn("slow_ticket_lookup: AL102", check.detail)
        self.assertFalse(strict.gate_passed)


if __name__ == "__main__":
    unittest.main()
