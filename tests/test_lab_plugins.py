"""Gate your own tools: a lab that is not the ticket lab runs through the same engine, gate and reports.

The files lab (tests/labs/files_lab.py) has its own world, effects and secrets, a baseline and two
candidates, and cases that use every marker, sqlite receipts across a restart, approvals and calls
keyed by surface. Broken labs and cases that name no surface are bad input: exit 2, one line, no
traceback, nothing written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from agent_lab import Registry
from agent_lab.cli import main
from agent_lab.lab import Lab, LabError, Surface, evaluate, lab_test_case, load_lab
from agent_lab.lab.cases import CaseFileError, load_cases
from agent_lab.lab.replay import replay_case
from agent_lab.lab.reports import REPORT_FILES
from labs import files_lab

REPO = Path(__file__).resolve().parent.parent
FILES_LAB = REPO / "tests" / "labs" / "files_lab.py"
FILES_CASES = REPO / "tests" / "labs" / "files-cases.jsonl"
V2, V3, NAIVE = "files-typed-v2", "files-typed-v3", "files-naive-v1"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def files_cases(**changes: dict) -> list[dict]:
    """The files lab's cases, with `changes[case_id]` laid over the matching case."""
    cases = [json.loads(line) for line in FILES_CASES.read_text(encoding="utf-8").splitlines()]
    return [{**case, **changes.get(case["case_id"], {})} for case in cases]


class TemporaryDirectoryTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def write(self, name: str, text: str) -> str:
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    def write_cases(self, name: str, cases: list[dict]) -> str:
        return self.write(name, "".join(json.dumps(case) + "\n" for case in cases))


class FilesLabGateTest(unittest.TestCase):
    """One evaluation of the files lab's cases on all three surfaces, shared by the tests below."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.evaluation = evaluate([str(FILES_CASES)], lab=files_lab.lab)
        cls.runs = {name: {result.case.case_id: result for result in results}
                    for name, results in cls.evaluation.results.items()}

    def test_both_candidates_pass_every_case_and_the_gate_passes(self) -> None:
        failing = {name: [case_id for case_id, result in results.items() if not result.passed]
                   for name, results in self.runs.items() if name != NAIVE}
        self.assertEqual(failing, {V2: [], V3: []})
        self.assertTrue(self.evaluation.gate_passed)
        self.assertEqual(len(self.evaluation.gate), 16)  # eight checks for each of the two candidates

    def test_the_baselines_duplicates_unsafe_effects_and_leaks_are_counted_from_the_files_world(self) -> None:
        naive = self.evaluation.metrics[NAIVE]
        self.assertEqual((naive["role"], naive["cases_passed"]), ("baseline", 1))
        self.assertGreater(naive["unsafe_side_effects"], 0)
        self.assertGreater(naive["secret_leaks"], 0)
        retry = self.runs[NAIVE]["retry-writes-once"].run
        self.assertEqual((retry.side_effects, retry.duplicate_side_effects), (2, 1))
        self.assertTrue(self.runs[NAIVE]["read-masks-the-token"].run.calls[0].leaked_secret)
        for name in (V2, V3):
            figures = self.evaluation.metrics[name]
            self.assertEqual((figures["unsafe_side_effects"], figures["duplicate_side_effects"], figures["secret_leaks"]),
                             (0, 0, 0), name)

    def test_background_await_write_started_and_settle_hold_a_write_in_flight(self) -> None:
        calls = self.runs[V2]["duplicate-while-in-flight"].run.calls
        codes = [call.view.get("error", {}).get("code") for call in calls]
        self.assertEqual(codes, ["tool_timeout", "idempotency_in_progress", None])
        self.assertTrue(calls[2].view["replayed"])
        self.assertEqual(self.runs[V2]["duplicate-while-in-flight"].run.side_effects, 1)

    def test_sqlite_receipts_survive_a_restart(self) -> None:
        calls = self.runs[V2]["receipts-survive-a-restart"].run.calls
        self.assertEqual([call.view.get("replayed", False) for call in calls], [False, True])

    def test_a_reference_to_an_earlier_answer_is_resolved_before_the_call(self) -> None:
        calls = self.runs[V3]["reference-an-earlier-answer"].run.calls
        self.assertEqual(calls[1].arguments, {"path": "/acme/new.txt"})

    def test_calls_keyed_by_surface_run_each_surfaces_own_steps(self) -> None:
        self.assertEqual([call.tool for call in self.runs[V3]["size-without-content"].run.calls], ["stat_file"])
        self.assertEqual([call.tool for call in self.runs[V2]["size-without-content"].run.calls], ["read_file"])

    def test_each_candidate_is_compared_with_the_baseline(self) -> None:
        self.assertEqual(sorted(self.evaluation.comparison), [V2, V3])
        self.assertEqual(self.evaluation.comparison[V2]["regressions"], [])

    def test_results_answer_to_a_role_only_when_one_surface_has_it(self) -> None:
        self.assertEqual(self.evaluation.metrics["baseline"]["name"], NAIVE)
        with self.assertRaises(KeyError):
            self.evaluation.metrics["candidate"]  # two candidates: a role names neither


class ReceiptStoreTest(unittest.TestCase):
    def test_memory_receipts_do_not_survive_a_restart_so_the_retry_writes_again(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "memory.jsonl"
            [case] = [case for case in files_cases() if case["case_id"] == "receipts-survive-a-restart"]
            path.write_text(json.dumps({**case, "receipts": "memory"}) + "\n", encoding="utf-8")
            [loaded] = load_cases([str(path)], lab=files_lab.lab)
        run = replay_case(loaded, V2, lab=files_lab.lab)
        self.assertEqual((run.side_effects, run.duplicate_side_effects), (2, 1))  # the lab really restarted


class OneSurfaceLabTest(TemporaryDirectoryTest):
    def test_a_lab_with_one_candidate_and_no_baseline_gates_without_a_comparison(self) -> None:
        out = self.dir / "out"
        code, _, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:single", "--cases", str(FILES_CASES), "--out", str(out))
        self.assertEqual(code, 2)  # one case gives steps to surfaces this lab does not have
        self.assertIn(f"{FILES_CASES}:10: 'calls/files-naive-v1': lab 'files-single' has no surface", stderr)
        cases = [case for case in files_cases() if isinstance(case["calls"], list)]
        code, stdout, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:single",
                                   "--cases", self.write_cases("shared.jsonl", cases), "--out", str(out))
        self.assertEqual((code, stderr), (0, ""))
        comparison = json.loads((out / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertEqual((comparison["baseline"], comparison["comparison"], list(comparison["surfaces"])),
                         (None, {}, [V2]))
        self.assertFalse(any("regression" in check["name"] for check in comparison["gate"]["checks"]))
        markdown = (out / "tool-comparison.md").read_text(encoding="utf-8")
        self.assertIn("Lab: `files-single`. Surfaces: `files-typed-v2` (candidate).", markdown)
        self.assertIn("No baseline surface", markdown)


class UnsafeSurfaceTest(TemporaryDirectoryTest):
    def test_a_surface_that_writes_twice_and_shows_a_secret_fails_the_gate_with_the_reasons(self) -> None:
        out = self.dir / "out"
        cases = self.write_cases("shared.jsonl", [case for case in files_cases() if isinstance(case["calls"], list)])
        code, stdout, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:unsafe", "--cases", cases, "--out", str(out))
        self.assertEqual((code, stderr), (1, ""))
        self.assertIn("[ ] files-naive-v1 has no duplicate side effects: 5 duplicate side effect(s)", stdout)
        self.assertIn("[ ] files-naive-v1 shows no secret to the model: 3 call(s) showed a secret", stdout)
        failures = (out / "tool-failures.md").read_text(encoding="utf-8")
        retry = failures.split("### retry-writes-once", 1)[1].split("###", 1)[0]
        self.assertIn("| side_effects | 1 | 2 |", retry)
        self.assertIn("| secrets_masked | no secret shown | a secret shown in call(s) 0 |", failures)
        reports = "".join(path.read_text(encoding="utf-8") for path in out.iterdir())
        self.assertEqual([secret for secret in files_lab.FileStore().secrets() if secret in reports], [])


class BrokenLabTest(TemporaryDirectoryTest):
    """Every way a lab can be broken is bad input: exit 2, one line naming MODULE:ATTR and the cause."""

    LAB_SOURCE = textwrap.dedent('''
        from agent_lab import Registry, ToolSpec
        from agent_lab.lab import Lab, Surface

        class World:
            effects = []

        def build(world, **options):
            registry = Registry(**options)
            registry.register(ToolSpec(name="ping", description="Ping.", input_schema={"type": "object"},
                                       output_schema={"type": "object"}), lambda arguments: {})
            return registry

        PARTS = dict(name="broken", world=World, surfaces=[Surface("only", build)], effects=lambda world: world.effects)
    ''')

    def assert_bad_input(self, lab: str, expected: str, *, cases: str | None = None) -> None:
        cases = cases or self.write_cases("ping.jsonl", [{
            "case_id": "ping", "intent": "Ping.", "actor": {"id": "a", "tenant": "t", "permissions": []},
            "calls": [{"tool": "ping", "arguments": {}}], "expected": {"outcome": "succeeded", "side_effects": 0}}])
        out = self.dir / "out"
        code, stdout, stderr = run("tool-eval", "--lab", lab, "--cases", cases, "--out", str(out))
        self.assertEqual((code, stdout), (2, ""), stderr)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertIn(expected, stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertFalse(out.exists())

    def lab_file(self, body: str) -> str:
        return self.write("broken_lab.py", self.LAB_SOURCE + textwrap.dedent(body))

    def test_a_module_that_does_not_exist(self) -> None:
        self.assert_bad_input("no_such_module_for_agent_lab:lab", "no_such_module_for_agent_lab:lab: no module named "
                              "'no_such_module_for_agent_lab'")

    def test_a_lab_file_whose_import_fails(self) -> None:
        path = self.lab_file("import not_a_module_at_all\n")
        self.assert_bad_input(f"{path}:lab", f"{path}:lab: importing {path} raised ModuleNotFoundError: "
                              "No module named 'not_a_module_at_all'")

    def test_a_lab_file_that_calls_sys_exit_while_imported(self) -> None:
        path = self.lab_file("import sys\nsys.exit(3)\n")
        self.assert_bad_input(f"{path}:lab", f"{path}:lab: importing {path} raised SystemExit: 3")

    def test_a_missing_attribute_is_named_with_the_file_the_user_gave(self) -> None:
        path = self.lab_file("lab = Lab(**PARTS)\n")
        self.assert_bad_input(f"{path}:labb", f"{path}:labb: {path} has no attribute 'labb'")

    def test_a_value_that_is_not_a_lab(self) -> None:
        self.assert_bad_input(f"{FILES_LAB}:WORLD_OPTIONS", f"{FILES_LAB}:WORLD_OPTIONS: is a dict, not an agent_lab.lab.Lab")

    def test_a_lab_that_is_invalid_when_built(self) -> None:
        path = self.lab_file("lab = Lab(**{**PARTS, 'surfaces': [Surface('only', build, baseline=True)]})\n")
        self.assert_bad_input(f"{path}:lab", "raised ValueError: Lab 'broken': needs at least one candidate surface")

    def test_a_world_factory_that_raises(self) -> None:
        path = self.lab_file("def no_world():\n    raise RuntimeError('no database')\n"
                             "lab = Lab(**{**PARTS, 'world': no_world})\n")
        self.assert_bad_input(f"{path}:lab", f"{path}:lab: world() raised RuntimeError: no database")

    def test_a_builder_that_raises(self) -> None:
        path = self.lab_file("def bad(world, **options):\n    raise KeyError('token')\n"
                             "lab = Lab(**{**PARTS, 'surfaces': [Surface('only', bad)]})\n")
        self.assert_bad_input(f"{path}:lab", f"{path}:lab: surface 'only': build(world) raised KeyError: 'token'")

    def test_a_builder_that_returns_no_registry(self) -> None:
        path = self.lab_file("lab = Lab(**{**PARTS, 'surfaces': [Surface('only', lambda world, **options: {})]})\n")
        self.assert_bad_input(f"{path}:lab", "surface 'only': build(world) returned dict, not a Registry")

    def test_a_builder_that_ignores_the_registry_options(self) -> None:
        path = self.lab_file("def own(world, **options):\n    return build(world)\n"
                             "lab = Lab(**{**PARTS, 'surfaces': [Surface('only', own)]})\n")
        self.assert_bad_input(f"{path}:lab", "must pass the options on to Registry(**options)")

    def test_effects_that_are_not_json(self) -> None:
        path = self.lab_file("lab = Lab(**{**PARTS, 'effects': lambda world: [object()]})\n")
        self.assert_bad_input(f"{path}:lab", "effects(world) record 0 is not JSON")

    def test_effects_that_are_one_string_or_a_mapping_not_a_list_of_records(self) -> None:
        for returned, kind in (("'refund-1'", "str"), ("{'r-1': {'cents': 5}}", "dict")):
            with self.subTest(effects=kind):
                path = self.write(f"{kind}_effects_lab.py", self.LAB_SOURCE + f"lab = Lab(**{{**PARTS, 'effects': "
                                  f"lambda world: {returned}}})\n")
                self.assert_bad_input(f"{path}:lab", f"effects(world) must return a list of records, not a {kind}")

    def test_secrets_as_a_mapping_of_names_to_secrets(self) -> None:
        path = self.write("mapping_secrets_lab.py", self.LAB_SOURCE + "lab = Lab(**{**PARTS, 'secrets': "
                          "lambda world: {'card-token': 'tok_live_4242_visa'}})\n")
        self.assert_bad_input(f"{path}:lab", "secrets(world) must return a collection of strings, not a dict")

    def test_a_case_that_names_a_surface_the_lab_does_not_have(self) -> None:
        case = files_cases()[0]
        case["calls"] = {"files-typed-v9": case["calls"]}
        cases = self.write_cases("unknown.jsonl", [case])
        self.assert_bad_input(f"{FILES_LAB}:lab", f"{cases}:1: 'calls/files-typed-v9': lab 'files' has no surface "
                              "'files-typed-v9' (surfaces: files-naive-v1, files-typed-v2, files-typed-v3)", cases=cases)


class LabValueTest(unittest.TestCase):
    """A Lab and its Surfaces are checked when built: a mistake is a clear TypeError or ValueError."""

    @staticmethod
    def build(world: object, **options: object) -> Registry:
        return Registry(**options)  # type: ignore[arg-type]

    def lab(self, **changes: object) -> Lab:
        parts: dict = {"name": "demo", "world": dict, "surfaces": [Surface("typed", self.build)],
                       "effects": lambda world: []}
        return Lab(**{**parts, **changes})

    def test_surfaces_check_their_parts(self) -> None:
        for arguments, error in ((("has space", self.build), ValueError), (("x", "not callable"), TypeError),
                                 (("x", lambda world: None), TypeError), (("steps", self.build), ValueError),
                                 (("candidate", self.build, True), ValueError)):
            with self.subTest(arguments=arguments), self.assertRaises(error):
                name, build, *baseline = arguments
                Surface(name, build, baseline=baseline[0] if baseline else False)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            Surface("x", self.build, baseline=1)  # type: ignore[arg-type]

    def test_labs_check_their_parts(self) -> None:
        baseline = Surface("wide", self.build, baseline=True)
        for changes, error in (({"surfaces": [baseline]}, ValueError), ({"surfaces": []}, ValueError),
                               ({"surfaces": [baseline, Surface("wide", self.build)]}, ValueError),
                               ({"surfaces": [baseline, Surface("b", self.build, baseline=True), Surface("c", self.build)]},
                                ValueError),
                               ({"surfaces": ["typed"]}, TypeError), ({"world": "World"}, TypeError),
                               ({"effects": None}, TypeError), ({"world_options": {"type": "no-such-type"}}, ValueError),
                               ({"cases": "cases.jsonl"}, TypeError), ({"name": ""}, ValueError)):
            with self.subTest(changes=changes), self.assertRaises(error):
                self.lab(**changes)

    def test_a_lab_is_frozen_and_names_a_surface_by_name_or_by_its_role(self) -> None:
        lab = self.lab(surfaces=[Surface("wide", self.build, baseline=True), Surface("typed", self.build)])
        with self.assertRaises(dataclasses.FrozenInstanceError):
            lab.name = "other"  # type: ignore[misc]
        self.assertEqual((lab.surface("baseline").name, lab.surface("candidate").name, lab.surface("typed").name),
                         ("wide", "typed", "typed"))
        with self.assertRaises(KeyError):
            lab.surface("nope")

    def test_every_case_and_surface_gets_a_world_of_its_own(self) -> None:
        worlds: list[files_lab.FileStore] = []

        def counted_world(**options: object) -> files_lab.FileStore:
            worlds.append(files_lab.FileStore(**options))  # type: ignore[arg-type]
            return worlds[-1]

        lab = dataclasses.replace(files_lab.lab, world=counted_world)
        evaluation = evaluate([str(FILES_CASES)], lab=lab)
        runs = sum(result.ran for results in evaluation.results.values() for result in results)
        self.assertEqual(len(worlds), runs + len(lab.surfaces))  # one more per surface to read its catalog
        self.assertEqual(len({id(world) for world in worlds}), len(worlds))

    def test_load_lab_refuses_what_is_not_a_lab(self) -> None:
        with self.assertRaises(LabError) as caught:
            load_lab(f"{FILES_LAB}:registry")
        self.assertEqual(str(caught.exception), f"{FILES_LAB}:registry: is the function registry, not an agent_lab.lab.Lab")


class EngineKnowsNoDomainTest(unittest.TestCase):
    def test_no_engine_module_names_the_ticket_lab(self) -> None:
        engine = REPO / "agent_lab" / "lab"
        for name in ("cases.py", "case_schema.json", "definition.py", "grading.py", "inspection.py", "metrics.py",
                     "pointer.py", "pyproject.py", "replay.py", "reports.py", "testing.py", "tool_eval.py"):
            with self.subTest(module=name):
                self.assertNotIn("ticket", (engine / name).read_text(encoding="utf-8").lower())


class CasesForALabTest(TemporaryDirectoryTest):
    """What only the lab can say about a case is checked when the case file is loaded."""

    def problems(self, cases: list[dict], lab: Lab = files_lab.lab) -> list[str]:
        path = self.write_cases("cases.jsonl", cases)
        with self.assertRaises(CaseFileError) as caught:
            load_cases([path], lab=lab)
        return [str(problem).split(": ", 1)[1] for problem in caught.exception.problems]

    def test_a_role_that_names_two_surfaces_is_ambiguous(self) -> None:
        case = files_cases()[0]
        case["calls"] = {"candidate": case["calls"]}
        self.assertEqual(self.problems([case]), [
            "'calls/candidate': lab 'files' has 2 candidate surfaces (files-typed-v2, files-typed-v3): name one"])

    def test_world_options_are_checked_against_the_labs_schema(self) -> None:
        case = {**files_cases()[0], "world": {"write_delay_ms": -1}}
        [problem] = self.problems([case])
        self.assertTrue(problem.startswith("'world' options: 'write_delay_ms'"), problem)

    def test_an_expectation_for_a_surface_the_case_does_not_run_is_refused(self) -> None:
        case = files_cases()[0]
        case["calls"] = {V2: case["calls"], V3: case["calls"]}
        case["expected"][NAIVE] = {"outcome": "succeeded"}
        self.assertEqual(self.problems([case]),
                         [f"'expected/{NAIVE}' describes surface '{NAIVE}', which this case does not run"])

    def test_markers_and_checks_the_lab_cannot_serve_are_refused(self) -> None:
        bare = dataclasses.replace(files_lab.single, writes_started=None, secrets=None)
        [case] = [case for case in files_cases() if case["case_id"] == "duplicate-while-in-flight"]
        case["expected"]["secrets_masked"] = True
        problems = self.problems([case], lab=bare)
        self.assertIn("'calls/1' waits for a write, but lab 'files-single' cannot tell when one starts "
                      "(Lab(writes_started=...))", problems)
        self.assertIn("'expected/secrets_masked' cannot fail: lab 'files-single' names no secrets (Lab(secrets=...))",
                      problems)


class NotRunTest(TemporaryDirectoryTest):
    def test_a_candidate_without_steps_is_not_run_never_passed_and_fails_the_gate(self) -> None:
        case = files_cases()[0]
        case["calls"] = {NAIVE: case["calls"], V2: case["calls"]}  # nothing for files-typed-v3
        out = self.dir / "out"
        code, stdout, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:lab",
                                   "--cases", self.write_cases("cases.jsonl", [case]), "--out", str(out))
        self.assertEqual((code, stderr), (1, ""))
        self.assertIn("candidate files-typed-v3     0/1 cases passed, 1 not run", stdout)
        self.assertIn("[ ] files-typed-v3 passes every case: 0 of 1 cases passed; not run: read-masks-the-token", stdout)
        comparison = json.loads((out / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertEqual(comparison["cases"][0]["surfaces"][V3], {
            "ran": False, "passed": False, "failed_grades": [], "side_effects": None, "duplicate_side_effects": None})
        self.assertIn("| read-masks-the-token | Read a file; its share token never reaches the model. | fail (1) | pass | "
                      "not run |", (out / "tool-comparison.md").read_text(encoding="utf-8"))
        root = ElementTree.parse(out / "junit.xml").getroot()
        [testcase] = [case for case in root.iter("testcase") if case.get("classname") == f"tool-eval.{V3}"]
        self.assertEqual(testcase.find("failure").text, "not run: the case has no steps for this surface")


class ReportsForNSurfacesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        from agent_lab.lab.reports import render_reports

        cls.reports = render_reports(evaluate([str(FILES_CASES)], lab=files_lab.lab))

    def test_the_markdown_names_the_lab_and_every_surface(self) -> None:
        markdown = self.reports["tool-comparison.md"]
        self.assertTrue(markdown.startswith(f"# Tool comparison: {NAIVE} vs {V2} vs {V3}\n"))
        self.assertIn(f"Lab: `files`. Surfaces: `{NAIVE}` (baseline), `{V2}` (candidate), `{V3}` (candidate).", markdown)
        self.assertIn(f"| metric | baseline ({NAIVE}) | candidate ({V2}) | candidate ({V3}) |", markdown)
        self.assertIn(f"### {V3} against {NAIVE}", markdown)

    def test_the_chart_says_for_every_metric_which_way_is_better_and_draws_costs_as_outlines(self) -> None:
        root = ElementTree.fromstring(self.reports["tool-comparison.svg"])
        texts = [element.text for element in root.iter("{http://www.w3.org/2000/svg}text")]
        hints = [text for text in texts if "better" in text or "cost" in text]
        self.assertEqual(hints, ["higher is better"] * 2 + ["lower is better"] * 4
                         + ["a cost: lower is cheaper, never a win"])
        bars = [rect for rect in root.iter("{http://www.w3.org/2000/svg}rect") if rect.get("height") == "18"]
        self.assertEqual(len(bars), 7 * 3)
        self.assertEqual([rect.get("fill") for rect in bars[-3:]], ["none"] * 3)  # the catalog cost
        self.assertTrue(all(rect.get("fill") != "none" for rect in bars[:-3]))
        for label in (f"baseline ({NAIVE})", f"candidate ({V2})", f"candidate ({V3})"):
            self.assertIn(label, texts)

    def test_junit_has_a_suite_per_surface_and_the_baselines_failures_are_skipped(self) -> None:
        root = ElementTree.fromstring(self.reports["junit.xml"])
        suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
        self.assertEqual(list(suites), [f"candidate ({V2})", f"candidate ({V3})", f"baseline ({NAIVE})", "gate"])
        self.assertEqual(suites[f"baseline ({NAIVE})"].get("failures"), "0")
        self.assertEqual(suites[f"baseline ({NAIVE})"].get("skipped"), "9")


class ProgressTest(TemporaryDirectoryTest):
    def test_verbose_prints_one_line_per_case_on_stderr_and_never_in_the_reports(self) -> None:
        quiet, verbose = self.dir / "quiet", self.dir / "verbose"
        code, _, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:lab", "--cases", str(FILES_CASES), "--out", str(quiet))
        self.assertEqual((code, stderr), (0, ""))  # stderr is not a terminal here
        code, stdout, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:lab", "--cases", str(FILES_CASES),
                                   "--out", str(verbose), "-v")
        self.assertEqual(code, 0)
        lines = stderr.splitlines()
        self.assertEqual(len(lines), len(files_cases()))
        self.assertEqual(lines[0], f"read-masks-the-token: {NAIVE} fail, {V2} pass, {V3} pass")
        self.assertIn("gate passed", stdout)
        for name in REPORT_FILES:
            self.assertEqual((quiet / name).read_bytes(), (verbose / name).read_bytes(), name)


    def test_a_progress_line_masks_a_secret_of_the_world_as_the_reports_do(self) -> None:
        token = files_lab.FileStore().files["/acme/readme.txt"]["share_token"]  # a valid case id, too
        case = dict(files_cases()[0], case_id=token)
        cases = self.write_cases("token.jsonl", [case])
        code, _, stderr = run("tool-eval", "--lab", f"{FILES_LAB}:lab", "--cases", cases, "--out",
                              str(self.dir / "out"), "-v")
        self.assertEqual(code, 0)
        self.assertEqual(stderr.splitlines(), [f"[redacted]: {NAIVE} fail, {V2} pass, {V3} pass"])
        for name in REPORT_FILES:
            self.assertNotIn(token, (self.dir / "out" / name).read_text(encoding="utf-8"), name)

    def test_a_terminal_on_stderr_gets_progress_without_asking(self) -> None:
        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        cases = self.write_cases("two.jsonl", files_cases()[:2])
        terminal = Terminal()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(terminal):
            code = main(["tool-eval", "--lab", f"{FILES_LAB}:lab", "--cases", cases, "--out", str(self.dir / "out")])
        self.assertEqual((code, len(terminal.getvalue().splitlines())), (0, 2))


class InspectExportServeTest(TemporaryDirectoryTest):
    def test_inspect_lists_every_surfaces_runtime_contract_as_a_table(self) -> None:
        code, stdout, stderr = run("inspect", "--lab", f"{FILES_LAB}:lab")
        self.assertEqual((code, stderr), (0, ""))
        self.assertIn("lab files, baseline files-naive-v1: 3 tool(s)", stdout)
        self.assertIn("lab files, candidate files-typed-v3: 4 tool(s)", stdout)
        header = next(line for line in stdout.splitlines() if line.startswith("tool "))
        for column in ("effect", "permission", "approval", "condition", "single-use", "idempotency key", "retry",
                       "timeout ms", "execution", "input budget", "output budget", "formats", "guard", "redact",
                       "open world", "warnings"):
            self.assertIn(column, header)
        delete = next(line for line in stdout.splitlines() if line.startswith("delete_file") and "always" in line)
        self.assertEqual(delete.split()[:7], ["delete_file", "destructive", "files:write", "always", "-", "no",
                                              "request_id"])
        self.assertIn("write tool without idempotency_key: a retried call may repeat its effect", stdout)

    def test_inspect_json_for_a_registry_and_for_one_surface(self) -> None:
        code, stdout, _ = run("inspect", "--registry", f"{FILES_LAB}:registry", "--json")
        self.assertEqual(code, 0)
        document = json.loads(stdout)
        self.assertEqual(document["lab"], None)
        [surface] = document["surfaces"]
        read = surface["tools"][0]
        self.assertEqual(read, {"name": "read_file", "effect": "read", "permission": "files:read", "approval": "never",
                                "approval_condition": None, "single_use_approval": False, "idempotency_key": None,
                                "retry_policy": "never", "timeout_ms": 10000, "execution": "pool", "task_support": "forbidden",
                                "max_input_bytes": 16384, "max_output_bytes": 65536, "format_assertion": True,
                                "resource_guard": "_guard.<locals>.<lambda>", "redact": ["share_token"],
                                "open_world": False, "output_schema": True, "warnings": [],
                                "provenance": None})
        code, stdout, _ = run("inspect", "--lab", f"{FILES_LAB}:lab", "--surface", "baseline", "--json")
        self.assertEqual([surface["name"] for surface in json.loads(stdout)["surfaces"]], [NAIVE])

    def test_inspect_shows_every_runtime_field_a_spec_can_set(self) -> None:
        from agent_lab import ToolSpec
        from agent_lab.lab.inspection import describe_tools

        def only_open_tickets(arguments, actor):
            return True

        def over_limit(arguments):
            return arguments.get("amount", 0) > 100

        schema = {"type": "object", "properties": {"request_id": {"type": "string"}}, "required": ["request_id"]}
        spec = ToolSpec(name="refund", description="Refund.", input_schema=schema, effect="write",
                        required_permission="refunds:write", approval="conditional", approval_condition=over_limit,
                        single_use_approval=True, idempotency_key="request_id", retry_policy="transient",
                        timeout_ms=250.5, execution="inline", task_support="optional", max_input_bytes=2048,
                        max_output_bytes=4096,
                        format_assertion=False, resource_guard=only_open_tickets, redact=("card",), open_world=True)
        with Registry() as registry:
            registry.register(spec, lambda arguments: {})
            [row] = describe_tools(registry)
        self.assertEqual(row, {
            "name": "refund", "effect": "write", "permission": "refunds:write", "approval": "conditional",
            "approval_condition": "InspectExportServeTest.test_inspect_shows_every_runtime_field_a_spec_can_set"
                                  ".<locals>.over_limit",
            "single_use_approval": True, "idempotency_key": "request_id", "retry_policy": "transient",
            "timeout_ms": 250.5, "execution": "inline", "task_support": "optional", "max_input_bytes": 2048, "max_output_bytes": 4096,
            "format_assertion": False,
            "resource_guard": "InspectExportServeTest.test_inspect_shows_every_runtime_field_a_spec_can_set"
                              ".<locals>.only_open_tickets",
            "redact": ["card"], "open_world": True, "output_schema": False, "warnings": list(spec.warnings),
            "provenance": None})
        runtime_fields = {field.name for field in dataclasses.fields(ToolSpec)} - {
            "name", "description", "input_schema", "output_schema", "title", "warnings", "input_validator",
            "output_validator"}
        shown = {"required_permission": "permission", "approval": "approval"}
        self.assertEqual({shown.get(name, name) for name in runtime_fields} - set(row), set())  # none left out

    def test_export_takes_a_lab_surface_or_a_registry(self) -> None:
        code, stdout, _ = run("export", "--lab", f"{FILES_LAB}:lab", "--surface", V3, "--format", "mcp")
        self.assertEqual((code, [tool["name"] for tool in json.loads(stdout)]),
                         (0, ["read_file", "write_file", "delete_file", "stat_file"]))
        code, stdout, _ = run("export", "--registry", f"{FILES_LAB}:registry", "--format", "anthropic")
        self.assertEqual((code, len(json.loads(stdout))), (0, 3))

    def test_a_lab_with_two_candidates_needs_surface_and_a_registry_takes_none(self) -> None:
        code, stdout, stderr = run("export", "--lab", f"{FILES_LAB}:lab", "--format", "mcp")
        self.assertEqual((code, stdout), (2, ""))
        self.assertEqual(stderr, f"{FILES_LAB}:lab: lab 'files' has 2 candidate surfaces (files-typed-v2, "
                                 "files-typed-v3): choose one with --surface\n")
        code, _, stderr = run("serve-mcp", "--registry", f"{FILES_LAB}:registry", "--surface", V2)
        self.assertEqual(code, 2)
        self.assertIn("does not apply to --registry", stderr)
        code, _, stderr = run("inspect", "--registry", f"{FILES_LAB}:lab")
        self.assertEqual((code, stderr), (2, f"{FILES_LAB}:lab: is a Lab, not a Registry or a function returning one\n"))

    def test_serve_mcp_serves_a_users_registry_as_the_configured_actor(self) -> None:
        messages = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file",
                                                                          "arguments": {"path": "/acme/readme.txt"}}},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "delete_file", "arguments": {
                "path": "/acme/readme.txt", "request_id": "req-00000001"}}},
        ]
        process = subprocess.run(
            [sys.executable, "run_lab.py", "serve-mcp", "--registry", f"{FILES_LAB}:registry", "--tenant", "acme"],
            cwd=REPO, input=b"".join(json.dumps(message).encode() + b"\n" for message in messages),
            capture_output=True, timeout=60)
        self.assertEqual(process.returncode, 0, process.stderr.decode(errors="replace"))
        by_id = {response["id"]: response for response in map(json.loads, process.stdout.splitlines())}
        self.assertEqual([tool["name"] for tool in by_id[2]["result"]["tools"]], ["read_file", "write_file", "delete_file"])
        read = by_id[3]["result"]
        self.assertEqual(read["structuredContent"]["share_token"], "[redacted]")
        self.assertEqual(json.loads(by_id[4]["result"]["content"][0]["text"])["error"]["code"], "approval_required")


class LabTestCaseTest(TemporaryDirectoryTest):
    """`lab_test_case` turns each case x candidate surface into one unittest test."""

    def run_tests(self, test_class: type) -> unittest.TestResult:
        # A fresh loader: `python -m unittest -k PATTERN` sets the pattern on the shared default one,
        # which would then drop every generated test whose name does not match it.
        suite = unittest.TestLoader().loadTestsFromTestCase(test_class)
        result = unittest.TestResult()
        suite.run(result)
        return result

    def test_one_passing_test_per_case_and_candidate_named_after_both(self) -> None:
        test_class = lab_test_case(files_lab.lab, FILES_CASES)
        names = unittest.TestLoader().getTestCaseNames(test_class)
        self.assertEqual(len(names), 2 * len(files_cases()))
        self.assertIn("test_retry_writes_once__files_typed_v2", names)
        self.assertIn("test_retry_writes_once__files_typed_v3", names)
        result = self.run_tests(test_class)
        self.assertEqual((result.testsRun, result.failures, result.errors), (2 * len(files_cases()), [], []))

    def test_a_failing_case_names_the_case_the_surface_and_every_differing_grade_without_secrets(self) -> None:
        case = files_cases()[0]
        case["expected"]["checks"] = [{"path": "/output/content", "equals": "Something else."}]
        unsafe = lab_test_case(files_lab.unsafe, self.write_cases("wrong.jsonl", [case]))
        [(test, message)] = self.run_tests(unsafe).failures
        self.assertIn("test_read_masks_the_token__files_naive_v1", test.id())
        self.assertIn("read-masks-the-token (", message)
        self.assertIn("on files-naive-v1: 2 grade(s) differ", message)
        self.assertIn("final.check[0] equals at /output/content: expected 'Something else.', actual 'Welcome to acme.'",
                      message)
        self.assertIn("secrets_masked: expected 'no secret shown', actual 'a secret shown in call(s) 0'", message)
        self.assertFalse(any(secret in message for secret in files_lab.FileStore().secrets()))

    def test_a_candidate_without_steps_fails_as_not_run(self) -> None:
        case = files_cases()[0]
        case["calls"] = {V2: case["calls"]}
        result = self.run_tests(lab_test_case(files_lab.lab, self.write_cases("partial.jsonl", [case])))
        [(test, message)] = result.failures
        self.assertIn("__files_typed_v3", test.id())
        self.assertIn("not run: the case has no steps for this surface", message)

    def test_a_test_id_names_the_users_module_and_reruns_that_one_test(self) -> None:
        self.write("test_user_contracts.py", (
            "from agent_lab.lab import lab_test_case\n"
            f"from labs.files_lab import lab\n\nFilesLabTest = lab_test_case(lab, {str(FILES_CASES)!r})\n"))
        sys.path[:0] = [str(self.dir), str(REPO / "tests")]
        self.addCleanup(sys.modules.pop, "test_user_contracts", None)
        self.addCleanup(sys.path.remove, str(self.dir))
        self.addCleanup(sys.path.remove, str(REPO / "tests"))
        loader = unittest.TestLoader()
        ids = [test.id() for suite in loader.loadTestsFromName("test_user_contracts") for test in suite]
        self.assertIn("test_user_contracts.FilesLabTest.test_retry_writes_once__files_typed_v2", ids)
        again = loader.loadTestsFromName("test_user_contracts.FilesLabTest.test_retry_writes_once__files_typed_v2")
        result = unittest.TestResult()
        again.run(result)
        self.assertEqual((result.testsRun, result.failures, result.errors), (1, [], []))

    def test_a_broken_case_file_fails_when_the_class_is_made(self) -> None:
        with self.assertRaises(CaseFileError):
            lab_test_case(files_lab.lab, self.write("broken.jsonl", "{oops\n"))


class ProjectConfigurationTest(TemporaryDirectoryTest):
    """[tool.agent-lab] in the current directory's pyproject.toml configures a plain `tool-eval`."""

    def run_in(self, *argv: str) -> subprocess.CompletedProcess:
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        return subprocess.run([sys.executable, "-m", "agent_lab", *argv], cwd=self.dir, env=environment,
                              capture_output=True, text=True, timeout=120)

    def setUp(self) -> None:
        super().setUp()
        (self.dir / "labs").mkdir()
        self.write("labs/files_lab.py", FILES_LAB.read_text(encoding="utf-8"))
        self.write("labs/__init__.py", "")
        cases = [case for case in files_cases() if case["case_id"] in ("read-masks-the-token", "retry-writes-once")]
        self.write_cases("cases.jsonl", cases)

    def test_the_table_names_the_lab_cases_and_report_paths(self) -> None:
        self.write("pyproject.toml", '[project]\nname = "mine"\n\n[tool.agent-lab]\nlab = "labs.files_lab:lab"\n'
                                     'cases = ["cases.jsonl"]\nout = "gate"\njunit = "ci/junit.xml"\n')
        done = self.run_in("tool-eval")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(path.name for path in (self.dir / "gate").iterdir()),
                         sorted(name for name in REPORT_FILES if name != "junit.xml"))
        self.assertTrue((self.dir / "ci" / "junit.xml").exists())
        comparison = json.loads((self.dir / "gate" / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertEqual((comparison["lab"], comparison["case_files"]), ("files", ["cases.jsonl"]))

    def test_flags_beat_the_table(self) -> None:
        self.write("pyproject.toml", '[tool.agent-lab]\nlab = "labs.files_lab:nothing"\ncases = "missing.jsonl"\nout = "gate"\n')
        done = self.run_in("tool-eval", "--lab", "labs/files_lab.py:single", "--cases", "cases.jsonl", "--out", "mine")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue((self.dir / "mine" / "junit.xml").exists())
        self.assertFalse((self.dir / "gate").exists())

    def test_the_tables_cases_go_with_its_lab_and_never_silently_with_another_lab_named_by_flag(self) -> None:
        self.write("pyproject.toml", '[tool.agent-lab]\nlab = "labs.files_lab:lab"\ncases = "cases.jsonl"\n')
        one = [case for case in files_cases() if case["case_id"] == "read-masks-the-token"]
        self.write_cases("own.jsonl", one)
        self.write("labs/own_lab.py", "from agent_lab.lab import Lab\nfrom labs.files_lab import COMMON, TYPED_V2\n"
                                      "own = Lab(name='files-own', surfaces=[TYPED_V2], cases=['own.jsonl'], **COMMON)\n")
        shipping = self.run_in("tool-eval", "--lab", "labs.own_lab:own", "--out", "own-out")
        self.assertEqual(shipping.returncode, 0, shipping.stderr)
        self.assertEqual(shipping.stderr, "tool-eval: running the lab's own case files; the cases in [tool.agent-lab] "
                                          "of pyproject.toml, cases.jsonl, go with labs.files_lab:lab, not with "
                                          "--lab labs.own_lab:own\n")
        comparison = json.loads((self.dir / "own-out" / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertEqual((comparison["lab"], comparison["case_files"]), ("files-own", ["own.jsonl"]))
        shipping_none = self.run_in("tool-eval", "--lab", "labs.files_lab:single", "--out", "single-out")
        self.assertEqual(shipping_none.returncode, 2)
        self.assertIn("lab 'files-single' ships no case files: name them with --cases FILE (the cases in "
                      "[tool.agent-lab] of pyproject.toml, cases.jsonl, go with labs.files_lab:lab", shipping_none.stderr)
        same = self.run_in("tool-eval", "--lab", "labs.files_lab:lab", "--out", "same-out")  # the table's own lab
        self.assertEqual((same.returncode, same.stderr), (0, ""))
        comparison = json.loads((self.dir / "same-out" / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertEqual(comparison["case_files"], ["cases.jsonl"])

    def test_model_eval_runs_the_shipped_ticket_tasks_only_on_the_ticket_lab(self) -> None:
        done = self.run_in("model-eval", "--lab", "labs.files_lab:lab", "--out", "eval")
        self.assertEqual((done.returncode, done.stdout), (2, ""))
        self.assertEqual(done.stderr, "model-eval: lab 'files': name its tasks with --tasks FILE (the shipped tasks, "
                                      "tickets.jsonl, are the built-in lab's, agent_lab.lab.tickets:lab)\n")
        self.assertFalse((self.dir / "eval").exists())

    def test_a_table_with_an_unknown_key_or_broken_toml_is_bad_input(self) -> None:
        number = ("pyproject.toml:2: the value of 'cases' must be a string; Python 3.10 reads only strings"
                  if sys.version_info < (3, 11) else "pyproject.toml: [tool.agent-lab] cases must be a path or a list")
        for text, expected in (('[tool.agent-lab]\nlabs = "x:y"\n', "unknown key 'labs' in [tool.agent-lab]"),
                               ('[tool.agent-lab]\ncases = 3\n', number),
                               ('[tool.agent-lab\n', "pyproject.toml")):
            with self.subTest(text=text):
                self.write("pyproject.toml", text)
                done = self.run_in("tool-eval")
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(expected, done.stderr)
                self.assertNotIn("Traceback", done.stderr)

    def test_sub_tables_of_other_commands_are_left_to_them(self) -> None:
        # [tool.agent-lab.lint] is no longer another command's: the gate reads it (tests/test_lint_config.py).
        self.write("pyproject.toml", '[tool.agent-lab]\nlab = "labs.files_lab:lab"\ncases = "cases.jsonl"\n\n'
                                     '[tool.agent-lab.other-command]\nselect = ["naming"]\nlevel = 2\n')
        done = self.run_in("tool-eval", "--out", "out")
        self.assertEqual(done.returncode, 0, done.stderr)


class BuiltinLabAnywhereTest(unittest.TestCase):
    def test_the_packaged_cases_are_the_repositorys_dataset(self) -> None:
        from agent_lab.lab.tickets import CASES

        self.assertEqual(CASES.read_bytes(), (REPO / "datasets" / "tool-cases.jsonl").read_bytes())

    def test_tool_eval_from_an_unrelated_directory_runs_the_built_in_lab_and_its_shipped_cases(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            environment = {**os.environ, "PYTHONPATH": str(REPO)}
            done = subprocess.run([sys.executable, "-m", "agent_lab", "tool-eval"], cwd=tmp, env=environment,
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            comparison = json.loads((Path(tmp) / "reports" / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertEqual((comparison["lab"], comparison["case_files"]), ("tickets", ["tool-cases.jsonl"]))
        self.assertEqual(len(comparison["cases"]), len((REPO / "datasets" / "tool-cases.jsonl").read_text().splitlines()))


if __name__ == "__main__":
    unittest.main()
