"""Declared versus observed effects: a tool whose calls change the world against its declaration fails the gate.

A ledger lab with an honest surface and two lying ones: `lying-read` has a `get_balance` declared read
(its MCP export says readOnlyHint true) that writes an audit row; `lying-idempotent` has a `top_up`
whose import says idempotentHint true but that adds credit again on every delivery. tool-eval pins each
change on the tool whose calls ran, fails the gate with a check of its own (AL801, AL802), lists the
finding in the reports and writes it as SARIF at the tool's definition; the project's lint table sets its
severity. A change made while several tools' calls ran is never pinned on the read. (The same against a
real MCP server built with the official SDK: test_interop_mcp_effects.py.)
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import threading
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from agent_lab import Effect, Registry, ToolSpec, Validator
from agent_lab.adapters import mcp_annotations
from agent_lab.lab import Lab, Surface, evaluate, lab_test_case, run_tool_eval
from agent_lab.lab.observed import READ_BUT_WROTE, REPEATED_UNDER_KEY
from agent_lab.lint import LintConfig
from agent_lab.provenance import Provenance

HERE = Path(__file__).resolve()
ACTOR = {"id": "teller-1", "tenant": "bank", "permissions": []}
CHECK = "tools change the world only as they declare"


class Ledger:
    """The world: balances, and every row written (the effects). Writes can be held until the lab settles."""

    def __init__(self, *, hold_writes: bool = False, reads_release_writes: bool = False) -> None:
        self.rows: list[dict[str, Any]] = []
        self.hold_writes = hold_writes
        self.reads_release_writes = reads_release_writes
        self.released = threading.Event()
        self.landed = threading.Event()
        self.lock = threading.Lock()
        self.late = threading.Semaphore(0)  # one release per write a thread of a handler's own will make

    def settle(self) -> None:
        """Release held writes, and wait for the late ones (see `lying_late`)."""
        self.released.set()
        while self.late.acquire(timeout=0):
            self.landed.clear()
            self.landed.wait(5)

    def write(self, row: dict[str, Any]) -> None:
        if self.hold_writes:
            self.released.wait(5)
        with self.lock:
            self.rows.append(row)
        self.landed.set()

    def balance(self) -> dict[str, Any]:
        """An honest read; with `reads_release_writes`, the held write lands while it runs."""
        if self.reads_release_writes:
            self.released.set()
            self.landed.wait(5)
        return {"balance": 100}


def closed(properties: dict, required: list) -> dict:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


ACCOUNT = {"type": "string", "pattern": "^acct-[0-9]+$"}
BALANCE_OUT = closed({"balance": {"type": "integer"}}, ["balance"])
TOP_UP_OUT = closed({"added": {"type": "integer"}}, ["added"])


def get_balance_spec() -> ToolSpec:
    return ToolSpec(name="get_balance", description="Read one account's balance. Changes nothing; use it freely.",
                    input_schema=closed({"account": ACCOUNT}, ["account"]), output_schema=BALANCE_OUT)


def top_up_spec(**runtime: Any) -> ToolSpec:
    return ToolSpec(name="top_up",
                    description="Add credit to an account. Retrying with the same top_up_id adds it once.",
                    input_schema=closed({"account": ACCOUNT, "cents": {"type": "integer", "minimum": 1},
                                         "top_up_id": {"type": "string", "minLength": 8}},
                                        ["account", "cents", "top_up_id"]),
                    output_schema=TOP_UP_OUT, effect=Effect.WRITE, timeout_ms=300, **runtime)


def honest(ledger: Ledger, **options: Any) -> Registry:
    registry = Registry(**options)
    registry.register(get_balance_spec(), lambda arguments: ledger.balance())
    registry.register(top_up_spec(idempotency_key="top_up_id"), lambda arguments: _top_up(ledger, arguments))
    return registry


def lying_read(ledger: Ledger, **options: Any) -> Registry:
    """get_balance says it only reads (effect read: its MCP export says readOnlyHint true), and writes."""
    registry = Registry(**options)
    registry.register(get_balance_spec(), lambda arguments: _peek(ledger, arguments))
    registry.register(top_up_spec(idempotency_key="top_up_id"), lambda arguments: _top_up(ledger, arguments))
    return registry


def lying_late(ledger: Ledger, **options: Any) -> Registry:
    """get_balance declared read, writing later from a thread of its own, once nothing else runs."""
    registry = Registry(**options)

    def peek_later(arguments: dict) -> dict:
        ledger.late.release()
        threading.Thread(target=lambda: (ledger.released.wait(5), _peek(ledger, arguments)), daemon=True).start()
        return {"balance": 100}

    registry.register(get_balance_spec(), peek_later)
    return registry


# An imported tool whose server declared idempotentHint true; it is not (no key protects it here).
HINTED = Provenance(server="ledger-server", server_version=None, transport="stdio", address="ledger-server",
                    protocol_version="2025-06-18", contract_hash="sha256:" + "0" * 64,
                    hints=(("readOnlyHint", False), ("idempotentHint", True)))


def lying_idempotent(ledger: Ledger, **options: Any) -> Registry:
    registry = Registry(**options)
    registry.register(get_balance_spec(), lambda arguments: {"balance": 100})
    registry.register(top_up_spec(idempotency_key="top_up_id", provenance=HINTED),
                      lambda arguments: _top_up(ledger, arguments))
    hinted_spec = ToolSpec(name="add_bonus", description="Add a bonus to an account; the server says a repeat "
                           "changes nothing.", input_schema=closed({"account": ACCOUNT}, ["account"]),
                           output_schema=TOP_UP_OUT, effect=Effect.WRITE, provenance=HINTED)
    registry.register(hinted_spec, lambda arguments: _top_up(ledger, {**arguments, "cents": 5}))
    return registry


def _peek(ledger: Ledger, arguments: dict) -> dict:
    ledger.write({"audit": "balance viewed", "account": arguments["account"]})
    return {"balance": 100}


def _top_up(ledger: Ledger, arguments: dict) -> dict:
    ledger.write({"account": arguments["account"], "cents": arguments["cents"], "id": arguments.get("top_up_id")})
    return {"added": arguments["cents"]}


def make_lab(build: Any, name: str) -> Lab:
    return Lab(name="ledger", world=Ledger, surfaces=[Surface(name, build)], effects=lambda ledger: ledger.rows,
               settle=Ledger.settle, writes_started=lambda ledger: 0,
               world_options={"type": "object", "properties": {"hold_writes": {"type": "boolean"},
                                                               "reads_release_writes": {"type": "boolean"}},
                              "additionalProperties": False})


HONEST = make_lab(honest, "honest")
LYING_READ = make_lab(lying_read, "lying-read")
LYING_IDEMPOTENT = make_lab(lying_idempotent, "lying-idempotent")
LYING_LATE = make_lab(lying_late, "lying-late")

READ_CASE = {"case_id": "read-balance", "intent": "Reading a balance.", "actor": ACTOR,
             "calls": [{"tool": "get_balance", "arguments": {"account": "acct-1"}}],
             "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 1}}  # what the world recorded
TOP_UP = {"tool": "top_up", "arguments": {"account": "acct-1", "cents": 500, "top_up_id": "tu-00000001"}}
RETRY_CASE = {"case_id": "top-up-retried", "intent": "A top-up retried once.", "actor": ACTOR,
              "calls": [TOP_UP, {"do": "redeliver"}],
              "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 1}}
BONUS_CASE = {"case_id": "bonus-retried", "intent": "A bonus retried once.", "actor": ACTOR,
              "calls": [{"tool": "add_bonus", "arguments": {"account": "acct-2"}}, {"do": "redeliver"}],
              "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 2}}
# A write held in the background lands while the read runs: the row appears while both calls ran.
OVERLAP_CASE = {"case_id": "read-while-writing", "intent": "A read while a top-up is in flight.", "actor": ACTOR,
                "world": {"hold_writes": True, "reads_release_writes": True},
                "calls": [{**TOP_UP, "background": True}, {"tool": "get_balance", "arguments": {"account": "acct-1"}},
                          {"do": "settle"}],
                "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 1}}


class EffectsTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def cases(self, *lines: dict) -> str:
        path = self.dir / "cases.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        return str(path)

    def gate(self, evaluation: Any) -> dict[str, Any]:
        return {check.name.split(" ", 1)[1]: check for check in evaluation.gate}

    def test_the_lying_read_declares_read_only_to_hosts(self) -> None:
        self.assertTrue(mcp_annotations(get_balance_spec())["readOnlyHint"])

    def test_an_honest_surface_passes_the_new_check(self) -> None:
        evaluation = evaluate([self.cases({**READ_CASE, "expected": {**READ_CASE["expected"], "side_effects": 0}},
                                          RETRY_CASE, OVERLAP_CASE)], lab=HONEST)
        self.assertTrue(evaluation.gate_passed, [check.to_dict() for check in evaluation.gate if not check.passed])
        self.assertEqual(evaluation.metrics["honest"]["effect_findings"], 0)

    def test_a_read_that_writes_fails_the_gate_with_a_failure_of_its_own_kind(self) -> None:
        evaluation = evaluate([self.cases(READ_CASE, RETRY_CASE)], lab=LYING_READ)
        failed = [name for name, check in self.gate(evaluation).items() if not check.passed]
        self.assertEqual(failed, [CHECK])
        detail = self.gate(evaluation)[CHECK].detail
        self.assertIn(f"{READ_BUT_WROTE} get_balance is declared read-only (effect read), but the world changed while "
                      "only read-only calls ran (1 record(s) added or removed) (case read-balance, call(s) 0)", detail)
        self.assertEqual(evaluation.metrics["lying-read"]["cases_passed"], 2)  # every case passed: only the lie fails
        self.assertEqual(evaluation.metrics["lying-read"]["effect_findings"], 1)

    def test_the_reports_list_the_finding_and_sarif_points_at_the_tool(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            run_tool_eval([self.cases(READ_CASE)], out_dir=self.dir / "out", lab=LYING_READ)
        out = self.dir / "out"
        self.assertIn("### Declared versus observed effects: 1 finding(s)", (out / "tool-failures.md").read_text())
        self.assertIn("`lying-read` AL801 (error): get_balance is declared read-only",
                      (out / "tool-comparison.md").read_text())
        sarif = json.loads((out / "tool-effects.sarif").read_text())
        schema = json.loads((HERE.parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text("utf-8"))
        self.assertEqual([(error.instance_path, error.message) for error in Validator(schema).errors(sarif)], [])
        [result] = sarif["runs"][0]["results"]
        self.assertEqual((result["ruleId"], result["level"], result["properties"]["surface"]),
                         (READ_BUT_WROTE, "error", "lying-read"))
        location = result["locations"][0]
        self.assertEqual(location["logicalLocations"][0]["fullyQualifiedName"], "tool/get_balance")
        self.assertTrue(location["physicalLocation"]["artifactLocation"]["uri"].endswith("test_lab_effects.py"))
        rules = [rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]]
        self.assertIn("AL801", rules)
        self.assertEqual(rules[result["ruleIndex"]], "AL801")
        junit = ElementTree.fromstring((out / "junit.xml").read_text())
        failing = [case.get("name") for case in junit.iter("testcase") if case.find("failure") is not None]
        self.assertEqual(failing, [f"lying-read's {CHECK}"])
        runs = [json.loads(line) for line in (out / "tool-runs.jsonl").read_text().splitlines()]
        [case] = [run for run in runs if run["kind"] == "case"]
        self.assertEqual(case["effect_findings"][0]["rule"], READ_BUT_WROTE)

    def test_an_idempotent_hint_that_repeats_fails_as_al802_and_a_key_keeps_one_effect(self) -> None:
        evaluation = evaluate([self.cases(RETRY_CASE, BONUS_CASE)], lab=LYING_IDEMPOTENT)
        detail = self.gate(evaluation)[CHECK].detail
        self.assertIn(f"{REPEATED_UNDER_KEY} add_bonus is declared idempotent (idempotentHint true), but its "
                      "deliveries under one key changed the world in 2 separate runs, 1 record(s) repeated "
                      "(case bonus-retried, call(s) 0, 1)", detail)
        self.assertNotIn("top_up", detail)  # declared by hint too, but its key kept it to one effect

    def test_a_change_while_a_write_also_ran_is_never_pinned_on_the_read(self) -> None:
        evaluation = evaluate([self.cases(OVERLAP_CASE)], lab=HONEST)
        [result] = evaluation.results["honest"]
        self.assertEqual(result.run.side_effects, 1)  # the top-up's row, which landed while the read ran
        self.assertTrue(self.gate(evaluation)[CHECK].passed, self.gate(evaluation)[CHECK].detail)

    def test_a_read_that_writes_later_from_a_thread_of_its_own_is_caught_when_only_reads_ran(self) -> None:
        evaluation = evaluate([self.cases(READ_CASE)], lab=LYING_LATE)
        [result] = evaluation.results["lying-late"]
        self.assertEqual(result.run.side_effects, 1)  # the write landed after the call had returned
        self.assertEqual([(finding.rule, finding.tool) for finding in result.run.effect_findings],
                         [(READ_BUT_WROTE, "get_balance")])

    def test_the_lint_table_sets_the_severity_or_turns_the_rule_off(self) -> None:
        cases = self.cases(READ_CASE)
        warned = evaluate([cases], lab=LYING_READ, lint_config=LintConfig(severity={"AL801": "warning"}))
        self.assertTrue(warned.gate_passed)
        self.assertEqual(warned.metrics["lying-read"]["effect_findings"], 1)
        off = evaluate([cases], lab=LYING_READ, lint_config=LintConfig(ignore=("AL801",)))
        self.assertTrue(off.gate_passed)
        self.assertEqual(off.metrics["lying-read"]["effect_findings"], 0)

    def test_a_teams_unittest_fails_the_case_on_the_finding(self) -> None:
        test_class = lab_test_case(LYING_READ, self.cases(READ_CASE))
        result = unittest.TestResult()
        test_class("test_read_balance__lying_read").run(result)
        [(_, message)] = result.failures
        self.assertIn("1 tool(s) changed the world against their declaration", message)
        self.assertIn("AL801: get_balance is declared read-only", message)


if __name__ == "__main__":
    unittest.main()
