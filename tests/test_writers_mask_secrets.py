"""Every writer masks a run's secrets through one path, `agent_lab.redaction.SecretMask` (issue 20, item 4).

model-eval's reports once masked on their own and drifted from tool-eval's: a secret holding `"`, `\\`
or a line break survived as its JSON escape in `model-eval-runs.jsonl`, and a numeric secret turned
`{"pin":4821}` into `{"pin":[redacted]}`, which is not JSON. So:

- `EveryWriterIsKnownTest` reads the library's source and finds every place that writes text out of
  the process (print, file writes and renames, streams, `write_files`, log calls); each must be listed
  below with how it keeps secrets out. A writer listed as masking must use the mask; every
  `write_files` call must say its mask. A new writer that is not listed fails here.
- `ReportsOfBothCommandsTest` runs tool-eval and model-eval for real on a lab whose surface shows the
  model awkward secrets (a quote, a backslash and a line break; a PIN shown as a number; a line
  separator and non-ASCII text), and checks that no file of either shows any spelling of them and that
  every JSON file is still JSON.
- `SecretMaskTest` pins the mask itself: escapes of any kind, keys, numbers, cells.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import secrets
import tempfile
import unittest
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from agent_lab import Effect, Registry, ToolSpec
from agent_lab.cli import main as cli_main
from agent_lab.lab import Lab, Surface
from agent_lab.redaction import NO_SECRETS, REDACTED, SecretMask, secret_spellings

PACKAGE = Path(__file__).resolve().parent.parent / "agent_lab"

MASKED = "masked"  # the text passes through SecretMask (checked below: the function uses a mask)
SINK = "sink"  # writes text its only caller has masked
NO_RUN_SECRET = "no secret of a run"  # text built from definitions, figures or ids only
MODEL_VIEW = "model view"  # what the model is sent: the registry's already redacted views
NO_VALUES = "no values"  # records that hold no argument or output value by construction
CALL = "the call"  # a tool call's arguments sent to the server that runs the tool: what the handler is for
LOGS = "logs"  # log calls: tool, exception type, call id; a handler's text never (test_logs_never_leak)
WORLD = "the world"  # a lab's world keeping its own state (what its tools act on), in the replay's own directory

# module:function (dotted for nested and methods; "*" for every function of a module) -> (kind, why)
WRITERS: dict[str, tuple[str, str]] = {
    "lab/reports.py:_write_whole": (SINK, "write_files' own writer: write_files masks each file with its required mask"),
    "lab/reports.py:_rename_all_or_none": (SINK, "renames the files write_files wrote"),
    "lab/reports.py:_put_back": (SINK, "puts back what a report file held before the run"),
    "lab/tool_eval.py:_write_reports": (MASKED, "the tool-eval reports (a shard's too): write_files(..., "
                                                "mask=evaluation.mask)"),
    "lab/tool_eval.py:merge_tool_eval": (MASKED, "the reports merged from shards, whose results each shard masked "
                                                 "when it wrote them: write_files(..., mask=evaluation.mask)"),
    "modeleval/runner.py:run_model_eval": (MASKED, "the model-eval reports: write_files(..., mask=evaluation.mask)"),
    "modeleval/runner.py:evaluate_model": (MASKED, "the cassette, written with NO_SECRETS: a recording of what the "
                                                   "model was sent (README: it holds what a surface showed), never a "
                                                   "report; a missing recording's message is masked here"),
    "cli.py:_print_summary": (MASKED, "tool-eval's summary lines: evaluation.mask.text"),
    "cli.py:_progress_printer.report": (MASKED, "tool-eval's progress lines: progress_line masks with the run's secrets"),
    "cli.py:_model_eval": (MASKED, "model-eval's error lines: the key and the lab's secrets (_model_eval_mask); its "
                                   "progress lines hold task ids, surface names and verdicts only"),
    "cli.py:_print_model_eval_summary": (MASKED, "model-eval's summary lines: evaluation.mask.text"),
    "cli.py:_print_verdict": (MASKED, "the baseline verdict's lines (regressions quote argument diffs): the "
                                      "run's mask.text"),
    "cli.py:_tool_eval": (NO_RUN_SECRET, "case-file problems (FILE:LINE and the validator's messages, which never "
                                         "quote a value); a lab's errors are masked where they are made"),
    "cli.py:_problem": (NO_RUN_SECRET, "configuration and lab-loading errors, masked where made (Lab._masked)"),
    "cli.py:_emit": (NO_RUN_SECRET, "lint's text, JSON and SARIF: tool definitions (what the model is shown) and "
                                    "rule ids; no world runs"),
    "cli.py:_export": (NO_RUN_SECRET, "tool definitions in a host's format"),
    "cli.py:_inspect": (NO_RUN_SECRET, "tool definitions and contracts"),
    "cli.py:_catalog_cost": (NO_RUN_SECRET, "sizes of tool definitions"),
    "cli.py:_lock": (NO_RUN_SECRET, "how many tools were locked, and the lockfile's path"),
    "cli.py:_docs": (NO_RUN_SECRET, "the reference topics shipped with the package, and their list"),
    "mcp_client/stdio.py:_write_all": (CALL, "JSON-RPC requests to the server child; a tool "
                                                              "call's arguments go to the server that runs it"),
    "atomicfile.py:write_text": (SINK, "writes the text its callers made, whole: cli._emit (lint's and lock's "
                                       "output), Lockfile.write (tool definitions), bench's --json figures"),
    "cli.py:run": (NO_RUN_SECRET, "one line saying the command was interrupted or terminated"),
    "lint/rules.py:<module>": (NO_RUN_SECRET, "the rules table, printed when the module is run"),
    "audit.py:JsonlAuditSink.write": (NO_VALUES, "audit_record's fields: ids, codes, steps, never a value"),
    "steps/conclude.py:_write_audit": (NO_VALUES, "hands audit_record's record to the sink"),
    "mcp.py:_LineWriter.send_line": (MODEL_VIEW, "MCP responses (send and send_batch encode them): "
                                                 "ToolResult.to_model(), redacted by the registry"),
    "mcp.py:_protocol_stream": (MODEL_VIEW, "opens the MCP protocol stream"),
    "mcp_http_answers.py:_Answering.reply": (MODEL_VIEW, "MCP over HTTP: the dispatcher's encoded answers "
                                                        "(ToolResult.to_model(), redacted by the registry) and "
                                                        "fixed refusal texts; never the bearer token"),
    "mcp_http_answers.py:_Answering.write_event": (MODEL_VIEW, "MCP over HTTP: the same answers as events, and a "
                                                              "gateway's confirmation request (redacted arguments)"),
    "cli.py:_serve_over_http": (NO_RUN_SECRET, "the URL serve-mcp --http listens on, and a warning naming the host"),
    "modeleval/loopback.py:LoopbackModelServer._handler_class.Handler._serve": (
        MODEL_VIEW, "the stand-in model server's answers, from the scripted agent"),
    "modeleval/loopback.py:main": (NO_RUN_SECRET, "the stand-in server's URL"),
    "bench/*": (NO_RUN_SECRET, "benchmark figures and the bench's own synthetic case files"),
    "lab/journal.py:Journal.append": (WORLD, "a world's records, appended by the lab's own code to a file in the "
                                             "directory the replay gave that world (a crash case's): its state"),
    "lab/crash.py:_answer": (MODEL_VIEW, "a crash child's answer to the replay that started it, over a pipe: "
                                         "the call's ToolResult.to_model(), or a LabError (the replay masks it)"),
}
LOGGING_MODULES: dict[str, tuple[str, str]] = {
    name: (LOGS, "names the tool, the exception type and the call id (describe_exception withholds a message "
                 "of a tool with redacted fields)")
    for name in ("registry.py", "steps/admit.py", "steps/approval.py", "steps/conclude.py", "steps/deadline.py",
                 "steps/task.py",
                 "steps/idempotency.py", "steps/run.py", "execution.py", "leases.py", "mcp.py", "mcp_calls.py",
                 "mcp_messages.py", "stores/postgres.py",
                 "integrations/_session.py", "integrations/langchain.py", "mcp_client/pending.py",
                 "mcp_client/session.py", "mcp_client/stdio.py", "mcp_client/surfaces.py", "mcp_client/surface_build.py",
                 "gateway.py", "mcp_http.py", "mcp_http_exchange.py", "mcp_http_answers.py")
}
# write_files calls whose mask is NO_SECRETS on purpose.
UNMASKED_FILES = {"modeleval/runner.py:evaluate_model": "the cassette (see WRITERS)"}

FILE_WRITES = {"write", "writelines", "write_text", "write_bytes"}
OS_WRITES = {"replace", "rename", "fdopen", "write"}
LOG_LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
MASK_NAMES = {"mask", "SecretMask", "progress_line", "_model_eval_mask"}


def _write_mode(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _write_kind(call: ast.Call) -> str | None:
    function = call.func
    if isinstance(function, ast.Name):
        if function.id in ("print", "write_files"):
            return function.id
        if function.id == "open" and _write_mode(call):
            return "open"
    if isinstance(function, ast.Attribute):
        owner = function.value
        if isinstance(owner, ast.Name) and owner.id == "os" and function.attr in OS_WRITES:
            return f"os.{function.attr}"
        if isinstance(owner, ast.Name) and owner.id in ("logger", "logging") and function.attr in LOG_LEVELS:
            return "log"
        if function.attr in FILE_WRITES:
            return function.attr
    return None


class _Sites(ast.NodeVisitor):
    """Every write call of a module, by the dotted name of the function (or class) it is in."""

    def __init__(self) -> None:
        self.path: list[str] = []
        self.found: dict[str, list[ast.Call]] = {}
        self.functions: dict[str, ast.AST] = {}

    def _scope(self, node: Any) -> None:
        self.path.append(node.name)
        self.functions[".".join(self.path)] = node
        self.generic_visit(node)
        self.path.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Call(self, node: ast.Call) -> None:
        if _write_kind(node) is not None:
            self.found.setdefault(".".join(self.path) or "<module>", []).append(node)
        self.generic_visit(node)


def _scan() -> dict[str, tuple[list[ast.Call], Any]]:
    sites: dict[str, tuple[list[ast.Call], Any]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        visitor = _Sites()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        module = path.relative_to(PACKAGE).as_posix()
        for function, calls in visitor.found.items():
            sites[f"{module}:{function}"] = (calls, visitor.functions.get(function))
    return sites


def _listed(site: str) -> tuple[str, str] | None:
    module = site.split(":")[0]
    return WRITERS.get(site) or WRITERS.get(module.split("/")[0] + "/*")


class EveryWriterIsKnownTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.sites = _scan()

    def test_the_scan_finds_the_writers_it_is_meant_to_find(self) -> None:
        for site in ("lab/reports.py:_write_whole", "lab/tool_eval.py:_write_reports", "cli.py:_model_eval",
                     "modeleval/runner.py:run_model_eval", "audit.py:JsonlAuditSink.write", "steps/conclude.py:record"):
            self.assertIn(site, self.sites)

    def test_every_place_that_writes_text_out_of_the_process_is_listed_with_how_it_keeps_secrets_out(self) -> None:
        unlisted = []
        for site, (calls, _) in self.sites.items():
            kinds = {_write_kind(call) for call in calls}
            if kinds - {"log"} and _listed(site) is None:
                unlisted.append(f"{site} ({', '.join(sorted(kinds - {'log'}))})")
            if "log" in kinds and site.split(":")[0] not in LOGGING_MODULES:
                unlisted.append(f"{site} (log calls in a module not in LOGGING_MODULES)")
        self.assertEqual(unlisted, [], "writers that are not listed: route their text through a SecretMask and "
                                       "list them in WRITERS (or say why they can hold no secret)")

    def test_no_listed_writer_is_stale(self) -> None:
        modules = {site.split(":")[0] for site in self.sites}
        for site in WRITERS:
            if site.endswith("/*"):
                self.assertTrue(any(module.startswith(site[:-1]) for module in modules), site)
            else:
                self.assertTrue(site in self.sites, f"{site} writes nothing any more: drop it from WRITERS")

    def test_writers_listed_as_masking_use_the_mask(self) -> None:
        for site, (kind, _) in WRITERS.items():
            if kind != MASKED:
                continue
            with self.subTest(site=site):
                _, function = self.sites[site]
                names = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}
                names |= {node.attr for node in ast.walk(function) if isinstance(node, ast.Attribute)}
                self.assertTrue(names & MASK_NAMES, f"{site} is listed as masking but uses no SecretMask")

    def test_every_report_file_is_written_with_a_mask_that_names_the_runs_secrets(self) -> None:
        for site, (calls, _) in self.sites.items():
            for call in calls:
                if _write_kind(call) != "write_files":
                    continue
                with self.subTest(site=site, line=call.lineno):
                    (mask,) = [keyword.value for keyword in call.keywords if keyword.arg == "mask"]
                    if isinstance(mask, ast.Name) and mask.id == "NO_SECRETS":
                        self.assertIn(site, UNMASKED_FILES, "a file written with NO_SECRETS must say why")
                    else:
                        self.assertEqual(ast.unparse(mask), "evaluation.mask")


# -- both commands on a lab that shows its secrets ---------------------------------------------------------

QUOTED = 'pa"ss\\wo\nrd-7Q'  # a quote, a backslash, a line break
PIN = "4821"  # shown to the model as the number 4821 too
SEPARATED = "zé\x85ta\u2028-9981"  # non-ASCII, a next-line and a line separator (JSON Lines escapes those two)
SECRETS = (QUOTED, PIN, SEPARATED)
TOOL = "read_vault"


class Vault:
    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []


def _build(world: Vault, **options: Any) -> Registry:
    def read_vault(arguments: dict[str, Any]) -> dict[str, Any]:
        world.effects.append({"pin": arguments.get("pin"), "label": f"pin {PIN}"})
        return {"note": QUOTED, "pin": int(PIN), "label": f"{SEPARATED} {PIN}", SEPARATED: "as a key"}

    registry = Registry(**options)
    registry.register(ToolSpec(name=TOOL, description="Read the vault note and its PIN.", effect=Effect.READ,
                               input_schema={"type": "object", "properties": {"pin": {"type": "integer"}},
                                             "additionalProperties": False}), read_vault)
    return registry


LEAKY_LAB = Lab(name="leaky", world=Vault, surfaces=[Surface("leaky-v1", _build)], effects=lambda vault: vault.effects,
                secrets=lambda vault: list(SECRETS))


def repeating_agent(request: dict[str, Any]) -> dict[str, Any]:
    """Calls the tool with the PIN, then repeats every secret it was shown."""
    if any(message["role"] == "tool" for message in request["messages"]):
        return {"content": f"The note is {QUOTED}, the PIN {PIN}, the tag {SEPARATED}.", "tool_calls": []}
    return {"content": "", "tool_calls": [{"name": TOOL, "arguments": {"pin": int(PIN)}}]}


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue() + err.getvalue()


class ReportsOfBothCommandsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        directory = tempfile.TemporaryDirectory()
        cls.addClassCleanup(directory.cleanup)
        root = Path(directory.name)
        this = f"{__name__}:LEAKY_LAB"
        (root / "cases.jsonl").write_text(json.dumps({
            "case_id": "vault", "intent": f"Reading the vault shows no secret ({PIN}).",
            "actor": {"id": "agent-1", "tenant": "acme", "permissions": []},
            "calls": [{"tool": TOOL, "arguments": {"pin": int(PIN)}}],
            "expected": {"outcome": "succeeded", "error_code": None, "side_effects": 0, "secrets_masked": True}}) + "\n")
        (root / "tasks.jsonl").write_text(json.dumps({
            "task_id": "vault", "split": "dev", "intent": "Read the vault.", "messages": ["Read the vault."],
            "actor": {"id": "agent-1", "tenant": "acme", "permissions": []},
            "surfaces": {"leaky-v1": {"must_call": [{"tool": TOOL}]}}}) + "\n")
        cls.tool_eval = _run("tool-eval", "--lab", this, "--cases", str(root / "cases.jsonl"), "--out", str(root / "tool"),
                             "-v")
        cls.model_eval = _run("model-eval", "--lab", this, "--model", f"python:{__name__}:repeating_agent",
                              "--tasks", str(root / "tasks.jsonl"), "--repeats", "1", "--out", str(root / "model"), "-v")
        cls.files = {f"{kind}/{path.name}": path.read_text(encoding="utf-8")
                     for kind in ("tool", "model") for path in sorted((root / kind).iterdir())}

    def test_both_commands_ran_and_the_surface_showed_the_model_the_secrets(self) -> None:
        self.assertEqual(self.tool_eval[0], 1, self.tool_eval[1])  # the gate fails: the surface shows secrets
        self.assertEqual(self.model_eval[0], 0, self.model_eval[1])
        self.assertEqual(len([name for name in self.files if name.startswith("tool/")]), 7)
        self.assertEqual(len([name for name in self.files if name.startswith("model/")]), 5)
        self.assertIn("secrets_masked", self.files["tool/tool-failures.md"])

    def test_no_file_or_printed_line_shows_any_spelling_of_a_secret(self) -> None:
        spellings = secret_spellings(SECRETS) | {PIN}
        texts = {**self.files, "tool-eval output": self.tool_eval[1], "model-eval output": self.model_eval[1]}
        for name, text in texts.items():
            with self.subTest(file=name):
                shown = sorted(spelling for spelling in spellings if spelling in text)
                self.assertEqual(len(shown), 0, f"{len(shown)} spelling(s) of a secret in {name}")  # never print them
                self.assertNotIn("wo\\nrd", text)
                self.assertNotIn("-9981", text)

    def test_the_secrets_are_masked_not_dropped(self) -> None:
        for name in ("tool/tool-runs.jsonl", "model/model-eval-runs.jsonl"):
            self.assertIn(REDACTED, self.files[name])

    def test_every_json_file_is_still_json_and_every_xml_file_still_xml(self) -> None:
        for name, text in self.files.items():
            with self.subTest(file=name):
                if name.endswith(".jsonl"):
                    self.assertTrue(all(json.loads(line) is not None for line in text.splitlines()))
                elif name.endswith(".json"):
                    json.loads(text)
                elif name.endswith((".xml", ".svg")):
                    ElementTree.fromstring(text)

    def test_both_runs_files_mask_the_same_call_the_same_way(self) -> None:
        tool_call = json.loads(self.files["tool/tool-runs.jsonl"].splitlines()[0])
        model_call = json.loads(self.files["model/model-eval-runs.jsonl"].splitlines()[0])["calls"][0]
        self.assertEqual(tool_call["arguments"], {"pin": REDACTED})
        self.assertEqual(model_call["arguments"], {"pin": REDACTED})


TOKEN = "tok-" + "9" * 12


def token_agent(request: dict[str, Any]) -> dict[str, Any]:
    """Proposes get_ticket with a `customer_email` argument, a field the ticket tools redact."""
    if any(message["role"] == "tool" for message in request["messages"]):
        return {"content": "done", "tool_calls": []}
    return {"content": "", "tool_calls": [{"name": "get_ticket", "arguments": {"ticket_id": "T-1001",
                                                                               "customer_email": TOKEN}}]}


def token_spreading_agent(request: dict[str, Any]) -> dict[str, Any]:
    """Puts the redacted `customer_email` under another name too, then repeats it in its answer."""
    if any(message["role"] == "tool" for message in request["messages"]):
        return {"content": f"I looked it up with {TOKEN}.", "tool_calls": []}
    return {"content": "", "tool_calls": [{"name": "get_ticket", "arguments": {
        "ticket_id": "T-1001", "customer_email": TOKEN, "email_again": TOKEN, TOKEN: "as a key"}}]}


def number_agent(request: dict[str, Any]) -> dict[str, Any]:
    """Sends the redacted `customer_email` as the number 1, under its name and another."""
    if any(message["role"] == "tool" for message in request["messages"]):
        return {"content": "done", "tool_calls": []}
    return {"content": "", "tool_calls": [{"name": "get_ticket", "arguments": {
        "ticket_id": "T-1001", "customer_email": 1, "again": 1}}]}


def _ticket_tasks(directory: str) -> str:
    tasks = Path(directory) / "tasks.jsonl"
    tasks.write_text(json.dumps({
        "task_id": "t", "split": "dev", "intent": "Read.", "messages": ["Read T-1001."],
        "actor": {"id": "agent-7", "tenant": "acme", "permissions": ["tickets:read"]},
        "surfaces": {"typed-registry-v2": {"must_call": [{"tool": "get_ticket", "outcome": "any"}]}}}) + "\n")
    return str(tasks)


class RedactedArgumentsInModelEvalRunsTest(unittest.TestCase):
    def test_a_redacted_value_the_model_also_puts_elsewhere_is_masked_in_every_report(self) -> None:
        from agent_lab.lab.tickets import lab as ticket_lab
        from agent_lab.modeleval.runner import run_model_eval

        with tempfile.TemporaryDirectory() as directory:
            out = Path(directory) / "out"
            run_model_eval(ticket_lab, [_ticket_tasks(directory)], out_dir=out, repeats=1,
                           model=f"python:{__name__}:token_spreading_agent")
            written = {path.name: path.read_text(encoding="utf-8") for path in out.iterdir()}
        self.assertEqual([name for name, text in written.items() if TOKEN in text], [])
        line = json.loads(written["model-eval-runs.jsonl"].splitlines()[0])
        self.assertEqual(line["calls"][0]["arguments"], {"ticket_id": "T-1001", "customer_email": REDACTED,
                                                         "email_again": REDACTED, REDACTED: "as a key"})
        self.assertEqual(line["answers"], ["I looked it up with [redacted]."])

    def test_a_redacted_number_is_masked_in_what_the_trial_proposed_never_in_its_figures(self) -> None:
        from agent_lab.lab.tickets import lab as ticket_lab
        from agent_lab.modeleval.reports import render_reports
        from agent_lab.modeleval.runner import evaluate_model

        with tempfile.TemporaryDirectory() as directory:
            evaluation = evaluate_model(ticket_lab, [_ticket_tasks(directory)], model=f"python:{__name__}:number_agent",
                                        repeats=1)
        line = json.loads(render_reports(evaluation)["model-eval-runs.jsonl"].splitlines()[0])
        self.assertEqual(line["calls"][0]["arguments"], {"ticket_id": "T-1001", "customer_email": REDACTED, "again": REDACTED})
        self.assertEqual((line["trial"], line["calls"][0]["step"]), (1, 0))  # a 1 of the run's own stays a 1

    def test_a_field_a_tool_redacts_is_masked_in_the_runs_as_tool_eval_masks_it(self) -> None:
        from agent_lab.lab.tickets import lab as ticket_lab
        from agent_lab.modeleval.reports import render_reports
        from agent_lab.modeleval.runner import evaluate_model

        with tempfile.TemporaryDirectory() as directory:
            tasks = Path(directory) / "tasks.jsonl"
            tasks.write_text(json.dumps({
                "task_id": "t", "split": "dev", "intent": "Read.", "messages": ["Read T-1001."],
                "actor": {"id": "agent-7", "tenant": "acme", "permissions": ["tickets:read"]},
                "surfaces": {"typed-registry-v2": {"must_call": [{"tool": "get_ticket", "outcome": "any"}]}}}) + "\n")
            evaluation = evaluate_model(ticket_lab, [str(tasks)], model=f"python:{__name__}:token_agent", repeats=1)
        self.assertIn("customer_email", evaluation.redact_fields)
        runs = render_reports(evaluation)["model-eval-runs.jsonl"]
        self.assertNotIn(TOKEN, runs)
        self.assertEqual(json.loads(runs.splitlines()[0])["calls"][0]["arguments"]["customer_email"], REDACTED)


class RandomWorld:
    """A world that makes a new secret every time it is built."""

    def __init__(self) -> None:
        self.token = "tok-" + secrets.token_hex(10)


def _random_build(world: RandomWorld, **options: Any) -> Registry:
    registry = Registry(**options)
    registry.register(ToolSpec(name="read_token", description="Read the token.", input_schema={"type": "object"}),
                      lambda arguments: {"token": world.token})
    return registry


RANDOM_LAB = Lab(name="random", world=RandomWorld, surfaces=[Surface("random-v1", _random_build)],
                 effects=lambda world: [], secrets=lambda world: [world.token])


def token_repeating_agent(request: dict[str, Any]) -> dict[str, Any]:
    answers = [message for message in request["messages"] if message["role"] == "tool"]
    if answers:
        return {"content": "the token is " + answers[0]["content"]["output"]["token"], "tool_calls": []}
    return {"content": "", "tool_calls": [{"name": "read_token", "arguments": {}}]}


class ModelEvalMasksWhatItsTrialsSawTest(unittest.TestCase):
    def test_secrets_of_each_trials_world_are_masked_not_those_of_a_fresh_world(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            tasks = Path(directory) / "tasks.jsonl"
            tasks.write_text(json.dumps({
                "task_id": "tok", "split": "dev", "intent": "Read.", "messages": ["Read the token."],
                "actor": {"id": "a", "tenant": "t", "permissions": []},
                "surfaces": {"random-v1": {"must_call": [{"tool": "read_token"}]}}}) + "\n")
            code, output = _run("model-eval", "--lab", f"{__name__}:RANDOM_LAB", "--model",
                                f"python:{__name__}:token_repeating_agent", "--tasks", str(tasks), "--repeats", "2",
                                "--out", str(Path(directory) / "out"))
            runs = (Path(directory) / "out" / "model-eval-runs.jsonl").read_text(encoding="utf-8")
        self.assertEqual(code, 0, output)
        self.assertEqual(runs.count("the token is [redacted]"), 2)
        self.assertEqual(re.findall("tok-[0-9a-f]{20}", runs), [])

    def test_a_key_the_endpoint_echoes_into_an_answer_is_masked_in_every_report_and_line(self) -> None:
        import http.server
        import os
        import threading
        from unittest import mock

        key = "sk-echo-" + secrets.token_hex(8)

        class Echo(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "your header was "
                                                            + str(self.headers.get("Authorization"))}}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *arguments: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        with tempfile.TemporaryDirectory() as directory, mock.patch.dict(os.environ, {"ECHO_KEY": key}):
            tasks = Path(directory) / "tasks.jsonl"
            tasks.write_text(json.dumps({
                "task_id": "echo", "split": "dev", "intent": "Say hello.", "messages": ["Hello."],
                "actor": {"id": "a", "tenant": "t", "permissions": []}, "abstain": True,
                "surfaces": {"leaky-v1": {}}}) + "\n")
            code, output = _run("model-eval", "--lab", f"{__name__}:LEAKY_LAB", "--model",
                                f"openai:m@http://127.0.0.1:{server.server_address[1]}#ECHO_KEY", "--tasks", str(tasks),
                                "--repeats", "1", "--out", str(Path(directory) / "out"), "-v")
            written = output + "".join(path.read_text(encoding="utf-8") for path in (Path(directory) / "out").iterdir())
        self.assertEqual(code, 0, output)
        self.assertIn("your header was Bearer [redacted]", written)
        self.assertFalse(key in written)


class SecretMaskTest(unittest.TestCase):
    def setUp(self) -> None:
        self.mask = SecretMask([QUOTED, PIN, "737"])

    def test_a_json_string_is_masked_however_it_escapes_the_secret(self) -> None:
        for spelled in ('"\\u0034\\u0038\\u0032\\u0031"', '"48\\u00321"', '"pa\\"ss\\\\wo\\nrd-7Q"',
                        '"pa\\u0022ss\\u005cwo\\u000ard-7Q"', '"x 737 y"'):
            with self.subTest(spelled=spelled):
                masked = self.mask.json_text('{"note": ' + spelled + "}")
                self.assertEqual(json.loads(masked), {"note": json.loads(spelled).replace(
                    json.loads(spelled).strip("xy "), REDACTED)})

    def test_numbers_literals_and_keys_that_show_a_secret_stay_json(self) -> None:
        text = json.dumps({"pin": 4821, "n": 14821, "cvv": 737, "order": 17375, "k": {PIN: 1}, "ok": True})
        self.assertEqual(json.loads(self.mask.json_text(text)),
                         {"pin": REDACTED, "n": REDACTED, "cvv": REDACTED, "order": 17375, "k": {REDACTED: 1},
                          "ok": True})

    def test_a_masked_string_keeps_a_json_lines_record_on_one_line(self) -> None:
        mask = SecretMask(["secret-1"])
        line = json.dumps({"a": "secret-1 \u2028 x"}, ensure_ascii=False).replace("\u2028", "\\u2028")
        masked = mask.json_text(line)
        self.assertEqual(masked.splitlines(), [masked])
        self.assertEqual(json.loads(masked), {"a": f"{REDACTED} \u2028 x"})

    def test_a_cell_is_masked_before_it_is_cut(self) -> None:
        mask = SecretMask(["the-secret-value"])
        cell = mask.cell("x" * 10 + "the-secret-value", 15)
        self.assertEqual(cell, "x" * 10 + "[red…")
        self.assertNotIn("the-", cell)

    def test_arguments_are_masked_by_field_and_the_repr_shows_no_secret(self) -> None:
        mask = SecretMask([QUOTED], fields=["cvv"])
        self.assertEqual(mask.value({"cvv": 737, "x": 1}), {"cvv": REDACTED, "x": 1})
        self.assertNotIn("pa", repr(mask))
        self.assertEqual(NO_SECRETS.file("a.json", '{"a": 1}'), '{"a": 1}')

    def test_text_files_are_masked_however_markdown_and_xml_spell_the_secret(self) -> None:
        mask = SecretMask(["a<b&c>d-0123"])
        for text in ("a<b&c>d-0123", "a&lt;b&amp;c&gt;d-0123"):
            self.assertEqual(mask.file("r.md", text), REDACTED)
            self.assertEqual(mask.file("junit.xml", text), REDACTED)
        self.assertIsNone(re.search("0123", mask.file("r.svg", "<t>a&lt;b&amp;c&gt;d-0123</t>")))


if __name__ == "__main__":
    unittest.main()
