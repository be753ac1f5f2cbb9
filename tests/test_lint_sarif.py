"""`lint --format sarif` validates against the official SARIF 2.1.0 schema (tests/fixtures/sarif, a
draft-04 schema read by our own Validator), declares every rule, and places each finding at a file and
line with a stable fingerprint."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import unittest
from pathlib import Path

from agent_lab import Registry, Validator, tool
from agent_lab.cli import main
from agent_lab.lint import RULES
from agent_lab.lint.locate import locate_tools
from fixtures.lint.hostile_tools import spec

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SARIF_SCHEMA = json.loads((FIXTURES / "sarif" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
HOSTILE = f"{FIXTURES / 'lint' / 'hostile_registry.py'}:registry"
FILES_LAB = f"{Path(__file__).resolve().parent / 'labs' / 'files_lab.py'}:lab"


def run_lint(*arguments: str) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(["lint", "--format", "sarif", *arguments])
    return status, json.loads(out.getvalue())


class SarifValidatesTest(unittest.TestCase):
    validator = Validator(SARIF_SCHEMA)

    def assert_valid(self, log: dict) -> None:
        self.assertEqual([(error.instance_path, error.message) for error in self.validator.errors(log)], [])

    def test_the_built_in_lab_report_validates_against_the_sarif_schema(self) -> None:
        status, log = run_lint()
        self.assertEqual(status, 0)
        self.assert_valid(log)
        self.assertTrue(log["runs"][0]["results"])

    def test_the_files_lab_report_validates_with_every_candidate_surface(self) -> None:
        status, log = run_lint("--lab", FILES_LAB)
        self.assertEqual(status, 0)
        self.assert_valid(log)
        self.assertEqual(log["runs"][0]["properties"]["surfaces"], ["files-typed-v2", "files-typed-v3"])
        self.assertNotIn("error", {result["level"] for result in log["runs"][0]["results"]})

    def test_a_report_with_errors_validates_and_exits_1(self) -> None:
        status, log = run_lint("--registry", HOSTILE)
        self.assertEqual(status, 1)
        self.assert_valid(log)
        self.assertIn("error", {result["level"] for result in log["runs"][0]["results"]})

    def test_the_schema_check_is_real_a_broken_log_is_refused(self) -> None:
        _, log = run_lint()
        log["runs"][0]["results"][0]["level"] = "fatal"
        del log["version"]
        self.assertEqual(len(self.validator.errors(log)), 2)

    def test_python_jsonschema_agrees_when_it_is_installed(self) -> None:
        try:
            import jsonschema
        except ImportError:
            self.skipTest("python-jsonschema is not installed (pip install jsonschema)")
        for arguments in ((), ("--registry", HOSTILE), ("--lab", FILES_LAB)):
            _, log = run_lint(*arguments)
            jsonschema.Draft4Validator(SARIF_SCHEMA).validate(log)


class SarifContentTest(unittest.TestCase):
    def test_a_clean_run_declares_every_rule_and_has_no_results(self) -> None:
        status, log = run_lint("--select", "AL303")
        run = log["runs"][0]
        self.assertEqual(status, 0)
        self.assertEqual(run["results"], [])
        self.assertEqual([rule["id"] for rule in run["tool"]["driver"]["rules"]], [rule.id for rule in RULES])
        self.assertEqual(run["invocations"], [{"executionSuccessful": True}])
        disabled = [rule["id"] for rule in run["tool"]["driver"]["rules"]
                    if rule["defaultConfiguration"].get("enabled") is False]
        self.assertEqual(disabled, [rule.id for rule in RULES if rule.id != "AL303"])

    def test_each_finding_of_the_built_in_lab_is_at_a_relative_file_and_the_line_naming_its_tool(self) -> None:
        _, log = run_lint()
        for result in log["runs"][0]["results"]:
            [location] = result["locations"]
            physical = location["physicalLocation"]
            uri, line = physical["artifactLocation"]["uri"], physical["region"]["startLine"]
            tool = location["logicalLocations"][0]["fullyQualifiedName"].split("/")[1]
            with self.subTest(rule=result["ruleId"], tool=tool):
                self.assertFalse(uri.startswith("/") or ".." in uri or ":" in uri)
                self.assertEqual(uri, "agent_lab/lab/tickets/candidate.py")
                self.assertIn(f'"{tool}"', Path(uri).read_text(encoding="utf-8").splitlines()[line - 1])
                self.assertEqual(result["ruleIndex"], [rule.id for rule in RULES].index(result["ruleId"]))

    def test_a_finding_at_a_name_holding_a_lone_surrogate_has_a_fingerprint_and_a_dict(self) -> None:
        # A server may list a property named "\ud800" (valid JSON text); the finding about it made lint's
        # JSON and SARIF output end in a UnicodeEncodeError traceback.
        from agent_lab.lint.model import Finding, Severity

        finding = Finding("AL001", Severity.ERROR, "It holds a lone surrogate.", tool="read_note",
                          pointer="/inputSchema/properties/\ud800")
        self.assertRegex(finding.fingerprint(), "^[0-9a-f]{32}$")
        self.assertEqual(finding.to_dict()["pointer"], "/inputSchema/properties/\ud800")

    def test_logical_locations_name_the_tool_and_the_json_pointer(self) -> None:
        _, log = run_lint("--registry", HOSTILE)
        names = {location["fullyQualifiedName"] for result in log["runs"][0]["results"]
                 for location in result["locations"][0]["logicalLocations"]}
        self.assertIn("tool/get_order_status_al206/description", names)

    def test_fingerprints_are_stable_across_runs_and_unique_per_finding(self) -> None:
        first = [r["partialFingerprints"] for r in run_lint("--registry", HOSTILE)[1]["runs"][0]["results"]]
        second = [r["partialFingerprints"] for r in run_lint("--registry", HOSTILE)[1]["runs"][0]["results"]]
        self.assertEqual(first, second)
        values = [next(iter(fingerprint.values())) for fingerprint in first]
        self.assertEqual(len(set(values)), len(values))

    def test_the_log_names_no_absolute_path(self) -> None:
        for arguments in ((), ("--registry", HOSTILE)):
            text = json.dumps(run_lint(*arguments)[1])
            self.assertNotIn(str(Path.cwd()), text)


def _traced(function):
    @functools.wraps(function)
    def wrapper(arguments):
        return function(arguments)

    return wrapper


@_traced
def _answer_order(arguments):  # the line below names the tool, as a registration would
    return {"status": "placed"}  # name="get_order_status"


@tool
def count_open_orders(customer_id: str) -> int:
    """Count the customer's open orders. Use it before listing them."""
    return 0


class HandlerLocationTest(unittest.TestCase):
    def test_a_tool_decorated_function_is_located_at_the_users_line_not_inside_agent_lab(self) -> None:
        with Registry() as registry:
            registry.register(count_open_orders.spec, count_open_orders.handler)
            [(name, location)] = locate_tools(registry, base=str(Path(__file__).resolve().parents[1])).items()
        source = Path(__file__).read_text(encoding="utf-8").splitlines()
        self.assertEqual((name, location.path), ("count_open_orders", "tests/test_lint_sarif.py"))
        self.assertEqual(source[location.line - 1:location.line + 1],
                         ["@tool", "def count_open_orders(customer_id: str) -> int:"])

    def test_the_registry_gives_the_registered_handler_and_keyerror_for_an_unknown_tool(self) -> None:
        with Registry() as registry:
            registry.register(spec(), _answer_order)
            self.assertIs(registry.handler("get_order_status"), _answer_order)
            with self.assertRaises(KeyError):
                registry.handler("nope")

    def test_a_decorated_handler_is_found_through_functools_wraps_at_the_line_naming_its_tool(self) -> None:
        with Registry() as registry:
            registry.register(spec(), _answer_order)
            [(name, location)] = locate_tools(registry, base=str(Path(__file__).resolve().parents[1])).items()
        source = Path(__file__).read_text(encoding="utf-8").splitlines()
        self.assertEqual((name, location.path), ("get_order_status", "tests/test_lint_sarif.py"))
        self.assertIn('name="get_order_status"', source[location.line - 1])


if __name__ == "__main__":
    unittest.main()
