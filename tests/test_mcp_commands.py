"""`--mcp SERVER` on the commands, and MCP servers as lab surfaces (the hostile stand-in server).

What a user does: `inspect --mcp "CMD"` to see what a foreign server's tools will be held to, `lint --mcp`
for a SARIF log whose artifact is the server, `export` and `catalog-cost` of its tools, and `tool-eval`
of a lab whose surface is the server (`mcp = ...` in `[tool.agent-lab]`, or `Surface.from_mcp`), its
effects read from the directory the server writes to. Bad input is one line on stderr and exit 2.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import sqlite3
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from typing import Any, Iterator

from agent_lab import Validator
from agent_lab.cli import main
from agent_lab.mcp_client.surfaces import McpWorld, world_effects

HERE = Path(__file__).resolve().parent
SARIF = Validator(json.loads((HERE / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")))
SERVER = f"{sys.executable} {HERE / 'mcp_hostile_server.py'}"
NOTEBOOK = f"{SERVER} notebook {{world}}"
POLICY = {"tools": {
    "echo": {"permission": "notes:read", "effect": "read", "approval": "never", "open_world": False,
             "timeout_ms": 5000},
    "append_note": {"permission": "notes:write", "effect": "write", "approval": "never", "open_world": False,
                    "idempotency_key": "request_id", "timeout_ms": 5000},
}}
ACTOR = {"id": "agent", "tenant": "t", "permissions": ["notes:read", "notes:write"]}
CASES = [
    {"case_id": "note-retried-once", "intent": "A keyed note retried after a lost answer is written once.",
     "actor": ACTOR, "calls": [{"tool": "append_note", "arguments": {"note": "hello", "request_id": "r-1"}},
                               {"tool": "append_note", "arguments": {"note": "hello", "request_id": "r-1"}}],
     "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 1, "replayed": True}},
    {"case_id": "bad-note-refused", "intent": "A note that breaks the schema never reaches the server.",
     "actor": ACTOR, "calls": [{"tool": "append_note", "arguments": {"note": 7, "request_id": "r-2"}}],
     "expected": {"outcome": "rejected", "error_code": "invalid_arguments", "side_effects": 0}},
    {"case_id": "echo", "intent": "A read answers with its structured content.",
     "actor": ACTOR, "calls": [{"tool": "echo", "arguments": {"text": "hi"}}],
     "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 0,
                  "checks": [{"path": "/output/text", "equals": "hi"}]}},
]


def run(*argv: str) -> tuple[int, str, str]:
    # What earlier tests left for the garbage collector (an event loop a test never closed warns as it
    # goes) is collected now, so its ResourceWarning is not read as this command's stderr.
    gc.collect()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


class ProjectTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        (self.dir / "policy.json").write_text(json.dumps(POLICY))
        (self.dir / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in CASES))

    def pyproject(self, text: str) -> None:
        (self.dir / "pyproject.toml").write_text(textwrap.dedent(text))


class CommandsTest(ProjectTest):
    def test_inspect_shows_the_policy_and_the_provenance_of_each_tool(self) -> None:
        with working_directory(self.dir):
            code, out, err = run("inspect", "--mcp", f"{SERVER} well-behaved", "--policy", "policy.json")
            self.assertEqual((code, err), (0, ""))
            self.assertIn("hostile-well-behaved: 8 tool(s)", out)
            self.assertIn("from mcp server hostile-well-behaved 6.6.6 (stdio ", out)
            echo = next(line for line in out.splitlines() if line.startswith("echo "))
            self.assertIn("policy.json: tools.echo", echo)
            self.assertIn("strictest defaults", next(line for line in out.splitlines() if line.startswith("slow ")))
            code, out, _ = run("inspect", "--mcp", f"{SERVER} well-behaved", "--json")
        [surface] = json.loads(out)["surfaces"]
        self.assertEqual(surface["role"], "server")
        provenance = surface["tools"][0]["provenance"]
        self.assertEqual((provenance["server"], provenance["transport"], provenance["protocol_version"]),
                         ("hostile-well-behaved", "stdio", "2026-07-28"))
        self.assertTrue(provenance["contract_hash"].startswith("sha256:"))

    def test_lint_sarif_names_the_server_as_the_artifact_with_its_provenance(self) -> None:
        with working_directory(self.dir):
            code, out, _ = run("lint", "--mcp", f"{SERVER} well-behaved", "--policy", "policy.json", "--format",
                               "sarif")
        self.assertEqual(code, 1)  # append_note declares no output schema: AL403
        log = json.loads(out)
        self.assertEqual([(error.instance_path, error.message) for error in SARIF.errors(log)], [])
        [artifact] = log["runs"][0]["artifacts"]
        self.assertTrue(artifact["location"]["uri"].startswith("mcp+stdio:"))
        self.assertEqual(artifact["description"]["text"], "MCP server hostile-well-behaved 6.6.6 (stdio, protocol "
                                                          "2026-07-28)")
        self.assertEqual(artifact["properties"], {"server": "hostile-well-behaved", "server_version": "6.6.6",
                                                  "transport": "stdio", "protocol_version": "2026-07-28"})
        results = log["runs"][0]["results"]
        located = [result["locations"][0] for result in results]
        self.assertEqual({json.dumps(location["physicalLocation"]["artifactLocation"]) for location in located},
                         {json.dumps({"uri": artifact["location"]["uri"], "index": 0})})
        self.assertTrue(all("region" not in location["physicalLocation"] for location in located))
        names = {location["logicalLocations"][0]["fullyQualifiedName"] for location in located}
        self.assertIn("tool/echo", {name.rsplit("/", 1)[0] if name.count("/") > 1 else name for name in names})
        [no_output] = [result for result in results if result["ruleId"] == "AL403"]
        with working_directory(self.dir):
            inspected = json.loads(run("inspect", "--mcp", f"{SERVER} well-behaved", "--json")[1])
        [append_note] = [tool for tool in inspected["surfaces"][0]["tools"] if tool["name"] == "append_note"]
        self.assertEqual(no_output["properties"]["provenance"]["contract_hash"],
                         append_note["provenance"]["contract_hash"])
        self.assertEqual(no_output["properties"]["provenance"]["policy"], "policy.json: tools.append_note")

    def test_lint_of_unreviewed_tools_judges_their_definitions_not_the_strictest_defaults(self) -> None:
        code, out, _ = run("lint", "--mcp", f"{SERVER} notebook", "--format", "json")
        self.assertEqual(code, 0)
        rules = {finding["rule"] for finding in json.loads(out)["findings"]}
        self.assertFalse({rule for rule in rules if rule.startswith("AL4")}, rules)
        with working_directory(self.dir):  # a policy entry is what a person wrote: it is judged
            (self.dir / "loose.json").write_text(json.dumps({"tools": {"append_note": {"effect": "write"}}}))
            code, out, _ = run("lint", "--mcp", f"{SERVER} notebook", "--policy", "loose.json", "--format", "json")
        self.assertEqual(code, 1)
        self.assertEqual([(f["rule"], f["tool"]) for f in json.loads(out)["findings"] if f["severity"] == "error"],
                         [("AL401", "append_note")])

    def test_lint_of_a_server_shows_the_tools_its_import_left_out(self) -> None:
        code, out, _ = run("lint", "--mcp", f"{SERVER} poisoned", "--format", "json")
        self.assertEqual(code, 1)
        findings = json.loads(out)["findings"]
        self.assertIn(("AL001", "has spaces"), {(f["rule"], f["tool"]) for f in findings})  # never imported
        self.assertIn(("AL001", "deep"), {(f["rule"], f["tool"]) for f in findings})
        self.assertIn("AL206", {f["rule"] for f in findings if f["tool"] == "fine"})  # imported

    def test_servers_on_one_command_line_are_linted_as_one_agents_tools(self) -> None:
        flows = {"tools": {  # echo returns what outsiders wrote; fail destroys without asking anyone
            "echo": {"permission": "p", "effect": "read", "approval": "never", "open_world": True, "timeout_ms": 900},
            "fail": {"permission": "p", "effect": "destructive", "approval": "never", "idempotency_key": "request_id"},
        }}
        (self.dir / "flows.json").write_text(json.dumps(flows))
        notebook, well_behaved = f"{SERVER} notebook", f"{SERVER} well-behaved"
        with working_directory(self.dir):
            code, out, _ = run("lint", "--mcp", notebook, "--mcp", well_behaved, "--policy", "flows.json",
                               "--select", "AL7", "--format", "json")
            _, alone, _ = run("lint", "--mcp", notebook, "--policy", "flows.json", "--select", "AL7", "--format", "json")
        self.assertEqual(code, 0)  # toxic flows are warnings
        self.assertEqual(json.loads(alone)["findings"], [])  # notebook alone: nothing destructive without approval
        [flow] = [finding for finding in json.loads(out)["findings"] if finding["tool"] == "fail"]
        self.assertEqual((flow["rule"], flow["surface"]), ("AL702", "hostile-well-behaved"))
        self.assertIn("'hostile-notebook/echo'", flow["message"])
        self.assertIn("hostile-notebook/echo", flow["related"])

    def test_a_policy_label_makes_a_leak_across_two_servers_an_al701_finding(self) -> None:
        # The notebook's echo returns what outsiders wrote and its append_note sends a note out, which only
        # the reviewer knows: both are closed-world by the policy, so nothing implies either. The ticket
        # server's reads return the user's own data (implied by their names).
        closed = {"permission": "p", "effect": "read", "approval": "never", "open_world": False}
        reviewed = {"tools": {"*": closed, "append_note": {**closed, "effect": "write"}}}
        labelled = {"tools": {**reviewed["tools"], "echo": {**closed, "labels": ["untrusted-content"]},
                              "append_note": {**closed, "effect": "write", "labels": ["external-sink"]}}}
        (self.dir / "reviewed.json").write_text(json.dumps(reviewed))
        (self.dir / "labelled.json").write_text(json.dumps(labelled))
        notebook, tickets = f"{SERVER} notebook", f"{sys.executable} {HERE.parent / 'run_lab.py'} serve-mcp"

        def flows(*argv: str) -> list[dict[str, Any]]:
            code, out, err = run("lint", *argv, "--select", "AL7", "--format", "json")
            self.assertEqual(code, 0, err)  # toxic flows are warnings
            return json.loads(out)["findings"]

        with working_directory(self.dir):
            together = flows("--mcp", notebook, "--mcp", tickets, "--policy", "labelled.json")
            notebook_alone = flows("--mcp", notebook, "--policy", "labelled.json")
            unlabelled = flows("--mcp", notebook, "--mcp", tickets, "--policy", "reviewed.json")
            code, out, _ = run("inspect", "--mcp", notebook, "--policy", "labelled.json", "--json")
        [leak] = [finding for finding in together if finding["surface"] == "hostile-notebook"]
        self.assertEqual((leak["rule"], leak["tool"]), ("AL701", "append_note"))  # the sink, by its label
        self.assertIn("hostile-notebook/echo", leak["related"])  # the untrusted content, by the policy's label
        self.assertIn("agent-lab/get_ticket", leak["related"])  # the private data, on the other server
        self.assertEqual(notebook_alone, [])  # no private data on the notebook: no leak
        # Without the labels the notebook takes no part (the ticket server's open-world slow_ticket_lookup,
        # by its own hint, still makes a flow of the ticket server's tools).
        self.assertEqual([finding for finding in unlabelled if finding["surface"] == "hostile-notebook"], [])
        self.assertFalse(any("hostile-notebook/echo" in finding["related"] for finding in unlabelled))
        self.assertEqual(code, 0)
        tools = {tool["name"]: tool for tool in json.loads(out)["surfaces"][0]["tools"]}
        self.assertEqual(tools["echo"]["provenance"]["labels"], ["untrusted-content"])

    def test_export_and_catalog_cost_of_a_server(self) -> None:
        code, out, _ = run("export", "--mcp", f"{SERVER} well-behaved", "--format", "anthropic")
        self.assertEqual(code, 0)
        self.assertIn("echo", [tool["name"] for tool in json.loads(out)])
        code, out, _ = run("catalog-cost", "--mcp", f"{SERVER} well-behaved", "--mcp", f"{SERVER} notebook",
                           "--format", "json")
        self.assertEqual(code, 0)
        self.assertEqual([surface["surface"] for surface in json.loads(out)],
                         ["hostile-well-behaved", "hostile-notebook"])

    def test_bad_input_is_one_line_and_exit_2(self) -> None:
        for argv, expected in (
            (["inspect", "--mcp", "https://user:pw@example.com/mcp"], "must not carry credentials"),
            (["inspect", "--mcp", "no-such-program-for-agent-lab"], "no program 'no-such-program-for-agent-lab'"),
            (["inspect", "--mcp", f"{SERVER} lie-version"], "which it was not offered"),
            (["inspect", "--mcp", f"{SERVER} well-behaved", "--policy", str(self.dir / "none.toml")], "cannot read"),
            (["inspect", "--mcp", f"{SERVER} well-behaved", "--surface", "x"], "does not apply to MCP servers"),
            (["inspect", "--mcp", f"{SERVER} well-behaved", "--lock", str(self.dir / "none.json")], "cannot read it"),
            (["tool-eval", "--mcp", f"{SERVER} notebook", "--lock", str(self.dir / "policy.json")],
             "not an agent-lab lockfile"),
            (["lint", "--mcp", f"{SERVER} notebook", "--lock", str(self.dir / "cases.jsonl")], "not JSON"),
        ):
            with self.subTest(argv=argv):
                code, out, err = run(*argv)
                self.assertEqual((code, out), (2, ""))
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(expected, err)
                self.assertNotIn("Traceback", err)


class ServerLabTest(ProjectTest):
    def test_tool_eval_gates_a_server_configured_in_pyproject(self) -> None:
        self.pyproject(f"""\
            [tool.agent-lab]
            mcp = {json.dumps(NOTEBOOK)}
            policy = "policy.json"
            cases = ["cases.jsonl"]
            """)
        with working_directory(self.dir):
            code, out, err = run("tool-eval")
        self.assertEqual(code, 0, out + err)
        self.assertIn("candidate server             3/3 cases passed", out)
        report = json.loads((self.dir / "reports" / "tool-comparison.json").read_text())
        server = report["surfaces"]["server"]
        self.assertEqual((server["side_effects"], server["duplicate_side_effects"]), (1, 0))
        self.assertEqual(server["servers"][0]["server"], "hostile-notebook")
        self.assertIn("hostile-notebook", (self.dir / "reports" / "tool-comparison.md").read_text())

    def test_tool_eval_with_a_lock_refuses_a_drifted_tool_until_it_is_locked_again(self) -> None:
        self.pyproject(f"""\
            [tool.agent-lab]
            mcp = {json.dumps(NOTEBOOK)}
            policy = "policy.json"
            lock = "notebook.lock.json"
            cases = ["cases.jsonl"]
            """)
        reviewed = self.dir / "reviewed"  # the server as it was reviewed: another echo description
        reviewed.mkdir()
        (reviewed / "echo-description.txt").write_text("Echo the text back; use it to check the connection.")
        with working_directory(self.dir):
            code, _, err = run("lock", "--mcp", f"{SERVER} notebook {reviewed}", "--output", "notebook.lock.json")
            self.assertEqual(code, 0, err)
            code, out, err = run("tool-eval")
            self.assertEqual(code, 1, out + err)
            self.assertIn("candidate server             2/3 cases passed", out)  # echo refused; append_note runs
            failures = (self.dir / "reports" / "tool-failures.md").read_text()
            self.assertIn("tool_contract_changed", failures)
            code, out, _ = run("lint", "--select", "AL6")  # the table's lock is lint's too
            self.assertEqual(code, 1)
            self.assertIn("AL601 error [hostile-notebook] echo at /description", out)
            code, _, err = run("lock")  # the table's servers, into the table's lock
            self.assertEqual((code, err.strip()), (0, "locked 2 tool(s) of 1 surface(s) in notebook.lock.json"))
            code, out, err = run("tool-eval")
        self.assertEqual(code, 0, out + err)
        report = json.loads((self.dir / "reports" / "tool-comparison.json").read_text())
        locked = json.loads((self.dir / "notebook.lock.json").read_text())["surfaces"]["hostile-notebook"]["tools"]
        self.assertEqual(report["surfaces"]["server"]["servers"][0]["tools"],
                         {name: {"contract_hash": entry["hash"], "lock": "match"} for name, entry in locked.items()})
        markdown = (self.dir / "reports" / "tool-comparison.md").read_text()
        self.assertIn(f"- echo {locked['echo']['hash']} (lock: match)", markdown)

    def test_the_gate_counts_an_output_schema_the_policy_declares_or_follows_al403_turned_off(self) -> None:
        reads = {"permission": "notes:read", "effect": "read", "approval": "never", "open_world": False}
        notes = {**reads, "effect": "write", "idempotency_key": "request_id"}  # its readOnlyHint is false
        (self.dir / "reads.json").write_text(json.dumps({"tools": {"append_note": notes, "*": reads}}))
        (self.dir / "typed.json").write_text(json.dumps({"tools": {"append_note": {**notes, "output_schema": "text"},
                                                                   "*": {**reads, "output_schema": "text"}}}))
        (self.dir / "echo.jsonl").write_text(json.dumps(CASES[2]) + "\n")
        check = "every server tool declares an output schema"
        with working_directory(self.dir):
            untyped = run("tool-eval", "--mcp", f"{SERVER} well-behaved", "--policy", "reads.json", "--cases",
                          "echo.jsonl")
            typed = run("tool-eval", "--mcp", f"{SERVER} well-behaved", "--policy", "typed.json", "--cases",
                        "echo.jsonl")
            self.pyproject("""\
                [tool.agent-lab.lint]
                severity = { AL403 = "off" }
                """)
            waived = run("tool-eval", "--mcp", f"{SERVER} well-behaved", "--policy", "reads.json", "--cases",
                         "echo.jsonl")
        self.assertEqual(untyped[0], 1)
        self.assertIn(f"[ ] {check}: append_note, slow, fail, big_output, rug_pull, environment", untyped[1])
        self.assertEqual(typed[0], 0, typed[1] + typed[2])
        self.assertIn(f"[x] {check}: all declared", typed[1])
        self.assertEqual(waived[0], 0, waived[1] + waived[2])
        self.assertIn(f"[x] {check}: not required (AL403 is off in the lint configuration): append_note, slow",
                      waived[1])

    def test_servers_on_one_tool_eval_command_line_are_one_agents_tools_as_for_lint(self) -> None:
        tickets = f"{sys.executable} {HERE.parent / 'run_lab.py'} serve-mcp"
        reads = {"permission": "tickets:read", "effect": "read", "approval": "never", "open_world": False}
        (self.dir / "both.json").write_text(json.dumps({"tools": {**POLICY["tools"], "get_ticket": reads}}))
        actor = {**ACTOR, "permissions": ["notes:read", "notes:write", "tickets:read"]}
        case = {"case_id": "note-about-a-ticket", "intent": "Read a ticket, then note it in the notebook.",
                "actor": actor, "calls": [{"tool": "get_ticket", "arguments": {"ticket_id": "T-1001"}},
                                          {"tool": "append_note", "arguments": {"note": "T-1001 read",
                                                                                "request_id": "r-1"}}],
                "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 1,
                             "steps": [{"outcome": "succeeded"}, {"outcome": "succeeded"}]}}
        (self.dir / "both.jsonl").write_text(json.dumps(case) + "\n")
        with working_directory(self.dir):
            code, out, err = run("tool-eval", "--mcp", NOTEBOOK, "--mcp", tickets, "--policy", "both.json",
                                 "--cases", "both.jsonl")
            clash = run("tool-eval", "--mcp", NOTEBOOK, "--mcp", f"{SERVER} well-behaved", "--policy", "both.json",
                        "--cases", "both.jsonl")
        self.assertEqual(code, 0, out + err)
        self.assertIn("candidate server             1/1 cases passed", out)  # one surface: both servers' tools
        report = json.loads((self.dir / "reports" / "tool-comparison.json").read_text())
        self.assertEqual(list(report["surfaces"]), ["server"])
        self.assertEqual([server["server"] for server in report["surfaces"]["server"]["servers"]],
                         ["hostile-notebook", "agent-lab"])
        self.assertEqual(clash[0], 2)  # both list echo: one agent cannot be given two tools of one name
        self.assertEqual(len(clash[2].strip().splitlines()), 1, clash[2])
        self.assertIn("servers 'hostile-notebook' and 'hostile-well-behaved' both list a tool 'echo'", clash[2])

    def test_tool_eval_of_a_lab_with_a_server_surface(self) -> None:
        (self.dir / "serverlab.py").write_text(textwrap.dedent(f"""\
            from agent_lab.lab import Lab, Surface
            from agent_lab.mcp_client.surfaces import McpWorld, world_effects

            lab = Lab(name="notebook", world=McpWorld, effects=world_effects,
                      surfaces=[Surface.from_mcp("notebook", {NOTEBOOK!r}, policy="policy.json")])
            """))
        with working_directory(self.dir):
            code, out, err = run("tool-eval", "--lab", "serverlab.py:lab", "--cases", "cases.jsonl")
        self.assertEqual(code, 0, out + err)
        self.assertIn("candidate notebook           3/3 cases passed", out)

    def test_model_eval_runs_an_agent_against_the_server(self) -> None:
        (self.dir / "echo_agent.py").write_text(textwrap.dedent("""\
            def agent(request):
                answers = [message for message in request["messages"] if message["role"] == "tool"]
                if not answers:
                    return {"content": "", "tool_calls": [{"name": "echo", "arguments": {"text": "hi from the server"}}]}
                answer = answers[-1]["content"]
                if "output" not in answer:
                    return {"content": "The server refused: " + answer["error"]["code"]}
                return {"content": "The server said: " + answer["output"]["text"]}
            agent.scripted = True
            """))
        task = {"task_id": "echo-it", "split": "dev", "intent": "Echo a greeting through the server.",
                "messages": ["Echo a greeting."], "actor": ACTOR, "answer": {"contains": ["hi from the server"]},
                "surfaces": {"server": {"must_call": [{"tool": "echo",
                                                       "arguments": {"/text": {"exact": "hi from the server"}}}]}}}
        (self.dir / "tasks.jsonl").write_text(json.dumps(task) + "\n")
        sys.path.insert(0, str(self.dir))
        self.addCleanup(sys.path.remove, str(self.dir))
        with working_directory(self.dir):
            code, out, err = run("model-eval", "--mcp", NOTEBOOK, "--policy", "policy.json", "--tasks", "tasks.jsonl",
                                 "--model", "python:echo_agent:agent", "--repeats", "2", "--out", "out")
        self.assertEqual(code, 0, out + err)
        self.assertIn("server: 2/2 trials succeeded", out)
        reviewed = self.dir / "reviewed"  # a lock of the server as reviewed, with another echo description
        reviewed.mkdir()
        (reviewed / "echo-description.txt").write_text("Echo the text back; use it to check the connection.")
        with working_directory(self.dir):
            self.assertEqual(run("lock", "--mcp", f"{SERVER} notebook {reviewed}", "--output", "r.lock.json")[0], 0)
            code, out, err = run("model-eval", "--mcp", NOTEBOOK, "--policy", "policy.json", "--lock", "r.lock.json",
                                 "--tasks", "tasks.jsonl", "--model", "python:echo_agent:agent", "--repeats", "2",
                                 "--out", "out")
        self.assertEqual(code, 0, out + err)
        self.assertIn("server: 0/2 trials succeeded", out)  # echo drifted from the lock: refused, never run

    def test_lab_and_mcp_in_one_table_are_refused(self) -> None:
        self.pyproject("""\
            [tool.agent-lab]
            lab = "x:lab"
            mcp = "server"
            """)
        with working_directory(self.dir):
            code, _, err = run("tool-eval")
        self.assertEqual(code, 2)
        self.assertIn("names both lab and mcp", err)


class WorldEffectsTest(unittest.TestCase):
    def test_records_from_jsonl_json_sqlite_and_other_files(self) -> None:
        world = McpWorld()
        root = Path(world.path)
        (root / "a.jsonl").write_text('{"n": 1}\n\n{"n": 2}\nnot json\n')
        (root / "b.json").write_text('{"k": "v"}')
        (root / "c.bin").write_bytes(b"\x00\x01")
        with contextlib.closing(sqlite3.connect(root / "d.db")) as db:
            db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB)")
            db.execute("INSERT INTO t (name, data) VALUES ('x', X'ff')")
            db.commit()
        records = world_effects(world)
        self.assertEqual(records[:3], [{"file": "a.jsonl", "record": {"n": 1}}, {"file": "a.jsonl", "record": {"n": 2}},
                                       {"file": "a.jsonl", "text": "not json"}])
        self.assertEqual(records[3], {"file": "b.json", "record": {"k": "v"}})
        self.assertEqual((records[4]["file"], records[4]["bytes"]), ("c.bin", 2))
        self.assertEqual(records[5], {"file": "d.db", "table": "t", "row": {"id": 1, "name": "x", "data": "ff"}})
        path = world.path
        del world
        self.assertFalse(Path(path).exists())  # a dropped world takes its directory with it

    def test_a_symlink_the_server_left_is_never_followed(self) -> None:
        with tempfile.TemporaryDirectory() as outside:
            secret = Path(outside, "id_rsa.jsonl")
            secret.write_text('{"private": "key material"}\n')
            world = McpWorld()
            Path(world.path, "leak.jsonl").symlink_to(secret)
            Path(world.path, "folder").symlink_to(outside, target_is_directory=True)
            records = world_effects(world)
        self.assertEqual(records, [{"file": "folder", "symlink": True}, {"file": "leak.jsonl", "symlink": True}])


if __name__ == "__main__":
    unittest.main()
