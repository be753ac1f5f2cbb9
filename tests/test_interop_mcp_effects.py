"""Declared versus observed effects against a real MCP server built with the official Python SDK.

The server (tests/mcp_sdk_lying_server.py) declares `get_balance` read-only (`readOnlyHint: true`) and
writes a row on every call, and `add_bonus` idempotent (`idempotentHint: true`) while adding a bonus on
every call. Imported as a lab surface (a fresh server per case over a fresh world directory), tool-eval
catches both from the rows the server left: AL801 and AL802 fail the gate as a check of their own, and
`tool-effects.sarif` names the server as where the tools are defined. The honest `get_rate` is never
flagged. Skipped with the reason without `mcp`; .ci/run's interop run installs it and fails if this skips.
"""

from __future__ import annotations

import json
import sys
import tempfile
import unittest
from pathlib import Path

from agent_lab.lab import Lab, Surface, evaluate
from agent_lab.mcp_client.surfaces import McpWorld, world_effects
from agent_lab.mcp_client.tool_policy import ToolPolicy

try:
    import mcp  # noqa: F401

    SDK_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    SDK_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

SERVER = Path(__file__).resolve().parent / "mcp_sdk_lying_server.py"
ACTOR = {"id": "teller-1", "tenant": "bank", "permissions": ["bank:read", "bank:write"]}
CHECK = "tools change the world only as they declare"
# A reviewer's policy that took the server at its word: reads are reads, the bonus needs no key.
POLICY = ToolPolicy.from_mapping({"tools": {
    "get_*": {"permission": "bank:read", "effect": "read", "approval": "never", "open_world": False},
    "add_bonus": {"permission": "bank:write", "effect": "write", "approval": "never", "open_world": False},
}})


def case(case_id: str, steps: list, side_effects: int) -> dict:
    return {"case_id": case_id, "intent": f"{case_id}.", "actor": ACTOR, "calls": steps,
            "expected": {"outcome": "succeeded", "error_code": None, "side_effects": side_effects}}


@unittest.skipIf(SDK_MISSING is not None, SDK_MISSING or "")
class LyingHintsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        lab = Lab(name="bank", world=McpWorld, effects=world_effects,
                  surfaces=[Surface.from_mcp("lying-server", f"{sys.executable} {SERVER} {{world}}", policy=POLICY)])
        lines = [case("rate", [{"tool": "get_rate", "arguments": {}}], 0),
                 case("balance", [{"tool": "get_balance", "arguments": {"account": "acct-1"}}], 1),
                 case("bonus-retried", [{"tool": "add_bonus", "arguments": {"account": "acct-2"}}, {"do": "redeliver"}],
                      2)]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cases.jsonl"
            path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
            cls.evaluation = evaluate([str(path)], lab=lab)
            from agent_lab.lab.fault_reports import effects_sarif

            cls.sarif = json.loads(effects_sarif(cls.evaluation))

    def test_every_case_passes_and_the_lies_fail_the_gate_as_a_check_of_their_own(self) -> None:
        # (The reviewer's policy has other gaps the gate also reports: no output schemas, a write
        # without an idempotency key, the bonus's duplicate. The lies are a check of their own.)
        self.assertEqual(self.evaluation.metrics["lying-server"]["cases_passed"], 3)
        [check] = [check for check in self.evaluation.gate if check.name == f"lying-server's {CHECK}"]
        self.assertFalse(check.passed)
        self.assertIn("AL801 get_balance is declared read-only (effect read and readOnlyHint true)", check.detail)
        self.assertIn("AL802 add_bonus is declared idempotent (idempotentHint true), but its deliveries under one "
                      "key changed the world in 2 separate runs", check.detail)
        self.assertNotIn("get_rate", check.detail)
        self.assertEqual(self.evaluation.metrics["lying-server"]["effect_findings"], 2)

    def test_the_read_only_hint_is_the_servers_and_the_policy_took_it(self) -> None:
        [balance] = [result for result in self.evaluation.results["lying-server"] if result.case.case_id == "balance"]
        [finding] = balance.run.effect_findings
        self.assertEqual((finding.rule, finding.tool, finding.calls), ("AL801", "get_balance", (0,)))
        self.assertIn("effect read and readOnlyHint true", finding.message)

    def test_under_the_strictest_policy_the_servers_hint_alone_is_the_declaration_checked(self) -> None:
        # No policy: the import treats get_balance as destructive (a hint never lowers a check), but hosts
        # that connect to this server trust its readOnlyHint, so that is what the world is checked against.
        lab = Lab(name="bank", world=McpWorld, effects=world_effects,
                  surfaces=[Surface.from_mcp("unreviewed", f"{sys.executable} {SERVER} {{world}}")])
        line = case("balance", [{"tool": "get_balance", "arguments": {"account": "acct-1"}, "approval": True}], 1)
        line["actor"] = {**ACTOR, "permissions": ["mcp.unreviewed"]}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cases.jsonl"
            path.write_text(json.dumps(line) + "\n", encoding="utf-8")
            evaluation = evaluate([str(path)], lab=lab)
        [result] = evaluation.results["unreviewed"]
        self.assertTrue(result.passed, [grade.to_dict() for grade in result.grades if not grade.passed])
        [finding] = result.run.effect_findings
        self.assertIn("get_balance is declared read-only (readOnlyHint true)", finding.message)

    def test_sarif_places_each_finding_at_the_server(self) -> None:
        results = self.sarif["runs"][0]["results"]
        self.assertEqual(sorted((result["ruleId"], result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"])
                                for result in results), [("AL801", "tool/get_balance"), ("AL802", "tool/add_bonus")])
        for result in results:
            self.assertTrue(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                            .startswith("mcp+stdio:"))


if __name__ == "__main__":
    unittest.main()
