"""The command line: exit 0 gate passed, 1 gate failed, 2 bad input; reports deterministic and atomic."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from agent_lab import cli
from agent_lab.lab.reports import REPORT_FILES

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO / "datasets" / "tool-cases.jsonl"
QUICK_CASES = ("read-ticket", "write-needs-approval", "duplicate-action", "cross-tenant-read", "secret-field-masked")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


class ToolEvalCommandTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        lines = [line for line in DATASET.read_text(encoding="utf-8").splitlines()
                 if json.loads(line)["case_id"] in QUICK_CASES]
        self.cases = self.write_cases("quick.jsonl", lines)

    def write_cases(self, name: str, lines: list[str]) -> str:
        path = self.dir / name
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return str(path)

    def reports(self, out: Path) -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in sorted(out.iterdir())}

    def test_a_passing_gate_exits_0_and_writes_every_report(self) -> None:
        out = self.dir / "out"
        code, stdout, stderr = run("tool-eval", "--cases", self.cases, "--out", str(out))
        self.assertEqual((code, stderr), (0, ""))
        self.assertIn("gate passed", stdout)
        self.assertEqual(sorted(self.reports(out)), sorted(REPORT_FILES))

    def test_a_failing_gate_exits_1_and_still_reports_why(self) -> None:
        wrong = json.loads(Path(self.cases).read_text(encoding="utf-8").splitlines()[0])
        wrong["expected"]["side_effects"] = 3
        cases = self.write_cases("wrong.jsonl", [json.dumps(wrong)])
        out = self.dir / "out"
        code, stdout, _ = run("tool-eval", "--cases", cases, "--out", str(out))
        self.assertEqual(code, 1)
        self.assertIn("gate FAILED", stdout)
        junit = (out / "junit.xml").read_text(encoding="utf-8")
        self.assertIn('failures="2"', junit.splitlines()[1])  # the candidate case and the gate check
        self.assertIn("side_effects", (out / "tool-failures.md").read_text(encoding="utf-8"))

    def test_bad_input_exits_2_with_file_and_line_and_writes_nothing(self) -> None:
        fine = json.loads(Path(self.cases).read_text(encoding="utf-8").splitlines()[0])
        fine["case_id"] = "a-fine-case"
        broken = self.write_cases("broken.jsonl", [json.dumps(fine), "{oops"])
        out = self.dir / "out"
        code, stdout, stderr = run("tool-eval", "--cases", self.cases, "--cases", broken, "--out", str(out))
        self.assertEqual(code, 2)
        self.assertEqual(stderr.splitlines(), [f"{broken}:2: broken JSON at column 2: Expecting property name "
                                               "enclosed in double quotes"])
        self.assertNotIn("Traceback", stdout + stderr)
        self.assertFalse(out.exists())

    def test_bad_input_leaves_earlier_reports_untouched(self) -> None:
        out = self.dir / "out"
        run("tool-eval", "--cases", self.cases, "--out", str(out))
        before = self.reports(out)
        code, _, stderr = run("tool-eval", "--cases", str(self.dir / "missing.jsonl"), "--out", str(out))
        self.assertEqual((code, stderr), (2, f"{self.dir / 'missing.jsonl'}:1: no such case file\n"))
        self.assertEqual(self.reports(out), before)

    def test_two_runs_write_byte_identical_reports(self) -> None:
        first, second = self.dir / "first", self.dir / "second"
        run("tool-eval", "--cases", self.cases, "--out", str(first))
        run("tool-eval", "--cases", self.cases, "--out", str(second))
        self.assertEqual(self.reports(first), self.reports(second))

    def test_reports_hold_no_absolute_path_timestamp_duration_or_secret(self) -> None:
        out = self.dir / "out"
        run("tool-eval", "--cases", self.cases, "--out", str(out))
        text = "".join(data.decode("utf-8") for data in self.reports(out).values())
        self.assertNotIn(str(self.dir), text)
        self.assertNotIn("duration_ms", text)
        self.assertIsNone(re.search(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", text))
        self.assertIsNone(re.search(r"customer\.\d+@", text))

    def test_junit_goes_where_asked(self) -> None:
        out, junit = self.dir / "out", self.dir / "ci" / "tool-eval.xml"
        code, _, _ = run("tool-eval", "--cases", self.cases, "--out", str(out), "--junit", str(junit))
        self.assertEqual(code, 0)
        self.assertTrue(junit.read_text(encoding="utf-8").startswith("<?xml"))
        self.assertFalse((out / "junit.xml").exists())

    def test_expected_baseline_failures_are_skipped_testcases_not_failures(self) -> None:
        out = self.dir / "out"
        run("tool-eval", "--cases", self.cases, "--out", str(out))
        junit = (out / "junit.xml").read_text(encoding="utf-8")
        self.assertIn('failures="0"', junit.splitlines()[1])
        self.assertIn("<skipped message=\"expected baseline failure", junit)

    def test_an_unknown_subcommand_is_bad_input(self) -> None:
        code, _, stderr = run("tool-evaluate")
        self.assertEqual(code, 2)
        self.assertIn("invalid choice", stderr)


class BenchCommandTest(unittest.TestCase):
    def test_bench_options_pass_through_to_the_bench_front_door(self) -> None:
        code, stdout, _ = run("bench", "--help")
        self.assertEqual(code, 0)
        self.assertIn("--only", stdout)

    def test_unknown_options_of_tool_eval_are_bad_input(self) -> None:
        code, _, stderr = run("tool-eval", "--bogus")
        self.assertEqual(code, 2)
        self.assertIn("--bogus", stderr)


class EntryPointTest(unittest.TestCase):
    def test_run_lab_py_and_python_m_agent_lab_reach_the_same_command_line(self) -> None:
        for command in ([sys.executable, "run_lab.py", "--help"], [sys.executable, "-m", "agent_lab", "--help"]):
            with self.subTest(command=command[1]):
                done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertIn("tool-eval", done.stdout)

    def test_a_reader_that_stops_early_gets_no_traceback(self) -> None:
        command = [sys.executable, "run_lab.py", "export", "--format", "mcp"]
        with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
            assert process.stdout is not None and process.stderr is not None
            process.stdout.close()  # like `| head`, but closed before export writes a byte: it must see EPIPE
            stderr = process.stderr.read().decode()
            code = process.wait(timeout=60)
        self.assertNotIn("Traceback", stderr)
        self.assertEqual(code, 0, stderr)


if __name__ == "__main__":
    unittest.main()
