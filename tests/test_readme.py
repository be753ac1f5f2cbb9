"""The README and its reference cannot rot: the quickstarts run as written, the case example loads, the
reference names what the lab writes, and the walkthrough's files (agent_lab/docs/ci.md) make a green gate.

The topics' own examples, flags and keywords are checked in tests/test_docs.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from agent_lab.lab.cases import load_cases
from agent_lab.lab.reports import REPORT_FILES

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = REPO / "agent_lab" / "docs"
LAB_DOC = (DOCS / "lab.md").read_text(encoding="utf-8")
REPORTS_DOC = (DOCS / "reports.md").read_text(encoding="utf-8")
WALKTHROUGH = (DOCS / "ci.md").read_text(encoding="utf-8")
QUICKSTART_FILE = re.compile(r"<!-- quickstart-file: ([\w./-]+) -->\s*```\w*\n(.*?)```", re.DOTALL)
QUICKSTART_COMMANDS = re.compile(r"<!-- quickstart-commands -->\s*```sh\n(.*?)```", re.DOTALL)
EXAMPLE = re.compile(r"<!-- example -->\s*```python\n(.*?)```", re.DOTALL)
FILE = re.compile(r"<!-- file: ([\w./-]+) -->\s*```\w*\n(.*?)```", re.DOTALL)
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


class ReadmeTest(unittest.TestCase):
    def test_the_two_commands_come_first(self) -> None:
        language, first_block = FENCE.search(README).groups()
        self.assertEqual(language, "sh")
        commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
        self.assertEqual(commands, ["python run_lab.py tool-eval", "python -m unittest discover -s tests"])

    def test_every_python_example_runs(self) -> None:
        examples = EXAMPLE.findall(README)
        self.assertTrue(examples, "the README has no <!-- example --> python block")
        for number, code in enumerate(examples):
            with self.subTest(example=number):
                done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                      timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)

    def test_the_case_example_is_a_valid_case(self) -> None:
        [example] = [block for language, block in FENCE.findall(LAB_DOC) if language == "json"]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "example.jsonl"
            path.write_text(example, encoding="utf-8")
            [case] = load_cases([str(path)])
        self.assertEqual(case.case_id, "write-needs-approval")

    def test_every_report_file_and_exit_code_is_documented(self) -> None:
        for name in REPORT_FILES:
            self.assertIn(f"`{name}`", REPORTS_DOC)
        for code in (0, 1, 2):
            self.assertRegex(REPORTS_DOC, rf"\n\| {code} \| ")


class QuickstartsTest(unittest.TestCase):
    """Quickstarts 2 and 3 of the README, run as written in an empty directory (quickstart 1 is an example
    block, run above). `agent-lab` is this checkout's run_lab.py, as an installed script would be."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def write_files(self, quickstart: int) -> None:
        section = README.split(f"## Quickstart {quickstart}:", 1)[1].split("\n## ", 1)[0]
        for name, text in QUICKSTART_FILE.findall(section):
            (self.dir / name).write_text(text, encoding="utf-8")

    def agent_lab(self, line: str) -> subprocess.CompletedProcess:
        program = f"{sys.executable} {REPO / 'run_lab.py'}"
        argv = shlex.split(re.sub(r"(?<![\w.-])agent-lab(?= )", program, line.split(" #", 1)[0]))
        return subprocess.run(argv, cwd=self.dir, capture_output=True, text=True, timeout=180)

    def test_quickstart_2_gates_the_notes_lab_green_and_red_without_its_idempotency_key(self) -> None:
        self.write_files(2)
        done = self.agent_lab("agent-lab tool-eval")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("gate passed", done.stdout)
        lab = self.dir / "notes_lab.py"
        lab.write_text(lab.read_text(encoding="utf-8").replace(', idempotency_key="request_id"', ""), encoding="utf-8")
        done = self.agent_lab("agent-lab tool-eval")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)

    def test_quickstart_3_inspects_lints_locks_and_gates_an_mcp_server(self) -> None:
        self.write_files(3)
        [block] = QUICKSTART_COMMANDS.findall(README)
        lines = [line for line in block.splitlines() if line.strip()]
        self.assertEqual([line.split()[1] for line in lines], ["inspect", "lint", "lock", "tool-eval"])
        for line in lines:
            with self.subTest(line=line):
                done = self.agent_lab(line)
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue((self.dir / "agent-lab.lock.json").is_file())
        self.assertIn("gate passed", done.stdout)


class GateYourOwnToolsTest(unittest.TestCase):
    """The walkthrough's files (agent_lab/docs/ci.md), written to a directory outside the repository, do what
    it says."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.files = dict(FILE.findall(WALKTHROUGH))
        for name, text in self.files.items():
            (self.dir / name).parent.mkdir(parents=True, exist_ok=True)
            (self.dir / name).write_text(text, encoding="utf-8")
        self.environment = {**os.environ, "PYTHONPATH": str(REPO)}

    def run_here(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *argv], cwd=self.dir, env=self.environment, capture_output=True,
                              text=True, timeout=120)

    def test_the_walkthrough_names_a_lab_its_cases_the_table_and_a_test_module(self) -> None:
        self.assertEqual(sorted(self.files), ["pyproject.toml", "refund-cases.jsonl", "refund-fault-cases.jsonl",
                                              "refunds_lab.py", "tests/test_tool_contracts.py"])

    def test_the_table_alone_runs_a_passing_gate_with_the_baselines_effects_and_leaks_counted(self) -> None:
        done = self.run_here("-m", "agent_lab", "tool-eval")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        surfaces = json.loads((self.dir / "reports" / "tool-comparison.json").read_text(encoding="utf-8"))["surfaces"]
        typed, wide = surfaces["refunds-typed-v2"], surfaces["refunds-wide-v1"]
        self.assertEqual((typed["cases_passed"], typed["cases"]), (3, 3))
        self.assertEqual((wide["cases_passed"], wide["duplicate_side_effects"], wide["secret_leaks"]), (0, 1, 1))

    def test_the_five_fault_cases_run_from_the_docs_alone_and_only_the_wide_surface_repeats_refunds(self) -> None:
        done = self.run_here("-m", "agent_lab", "tool-eval", "--cases", "refund-cases.jsonl",
                             "--cases", "refund-fault-cases.jsonl")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        surfaces = json.loads((self.dir / "reports" / "tool-comparison.json").read_text(encoding="utf-8"))["surfaces"]
        typed, wide = surfaces["refunds-typed-v2"], surfaces["refunds-wide-v1"]
        self.assertEqual((typed["fault_cases"], typed["fault_cases_passed"], typed["fault_duplicate_side_effects"]),
                         (5, 5, 0))
        self.assertEqual((wide["fault_cases"], wide["fault_cases_passed"], wide["fault_duplicate_side_effects"]),
                         (5, 0, 5))
        runs = [json.loads(line) for line in (self.dir / "reports" / "tool-runs.jsonl").read_text(encoding="utf-8")
                .splitlines()]
        crashed = [run for run in runs if run["kind"] == "call" and "crashed" in run["result"]]
        self.assertEqual([run["surface"] for run in crashed], ["refunds-wide-v1", "refunds-typed-v2"])  # killed
        refunds = {run["surface"]: run["side_effects"] for run in runs
                   if run["kind"] == "case" and run["case_id"] == "crash-after-refund"}
        self.assertEqual(refunds, {"refunds-wide-v1": 2, "refunds-typed-v2": 1})

    def test_a_crash_case_runs_when_the_lab_is_named_by_its_file_path(self) -> None:
        # The crash child imports the lab as the parent did: here from a file outside the repository.
        crash = (self.dir / "refund-fault-cases.jsonl").read_text(encoding="utf-8").splitlines()[0]
        (self.dir / "crash.jsonl").write_text(crash + "\n", encoding="utf-8")
        done = subprocess.run([sys.executable, "run_lab.py", "tool-eval", "--lab", f"{self.dir / 'refunds_lab.py'}:lab",
                               "--cases", str(self.dir / "crash.jsonl"), "--out", str(self.dir / "out")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        runs = (self.dir / "out" / "tool-runs.jsonl").read_text(encoding="utf-8")
        self.assertEqual(runs.count('"crashed":'), 2)

    def test_run_lab_py_takes_the_lab_file_by_path(self) -> None:
        done = subprocess.run([sys.executable, "run_lab.py", "tool-eval", "--lab", f"{self.dir / 'refunds_lab.py'}:lab",
                               "--cases", str(self.dir / "refund-cases.jsonl"), "--out", str(self.dir / "out")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_without_the_idempotency_key_the_gate_fails_and_says_why(self) -> None:
        lab = self.dir / "refunds_lab.py"
        lab.write_text(lab.read_text(encoding="utf-8").replace(', idempotency_key="refund_id"', ""), encoding="utf-8")
        done = self.run_here("-m", "agent_lab", "tool-eval")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        failures = (self.dir / "reports" / "tool-failures.md").read_text(encoding="utf-8")
        self.assertIn("| side_effects | 1 | 2 |", failures.split("### retry-refunds-once", 1)[1])

    def test_the_test_module_runs_each_case_on_the_candidate(self) -> None:
        done = self.run_here("-m", "unittest", "discover", "-s", "tests", "-v")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("Ran 3 tests", done.stderr)
        self.assertIn("test_retry_refunds_once__refunds_typed_v2", done.stderr)

    def test_a_test_id_of_the_test_module_reruns_that_one_case(self) -> None:
        done = self.run_here("-m", "unittest", "tests.test_tool_contracts.RefundsLabTest.test_retry_refunds_once__refunds_typed_v2")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("Ran 1 test", done.stderr)

    @unittest.skipIf(importlib.util.find_spec("pytest") is None, "pytest is not importable; pip install pytest")
    def test_plain_pytest_collects_the_test_module(self) -> None:
        # As the `pytest` command runs: the current directory is not put on sys.path (-I), only tests/.
        code = f"import sys; sys.path.insert(0, {str(REPO)!r}); import pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests']))"
        done = subprocess.run([sys.executable, "-I", "-c", code], cwd=self.dir, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("3 passed", done.stdout)


if __name__ == "__main__":
    unittest.main()
