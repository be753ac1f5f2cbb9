"""`tool-eval --jobs N`: cases replay concurrently, and nothing a user sees depends on N.

The reports are byte-identical whatever N is, also for a lab whose cases finish in the opposite order
to the one they start in; a bad N is bad input (exit 2); a broken lab or case gives the same exit code
and message as a serial run, the first in case order. No timing is asserted.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from agent_lab import cli
from agent_lab.lab import tool_eval
from agent_lab.lab.cases import CaseFileError
from agent_lab.lab.definition import LabError
from agent_lab.lab.reports import REPORT_FILES
from agent_lab.lab.settings import ConfigError, tool_eval_settings
from agent_lab.lab.tickets import CASES as SHIPPED_CASES
from agent_lab.lab.tool_eval import run_tool_eval

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from labs import order_lab  # noqa: E402


def report_files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in REPORT_FILES}


class TempDirTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def write_cases(self, cases: list[dict]) -> str:
        path = self.dir / "cases.jsonl"
        path.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
        return str(path)

    def run_cli(self, *argv: str) -> tuple[int, str]:
        stderr, stdout = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            code = cli.main(list(argv))
        return code, stderr.getvalue()


class ShippedCasesTest(TempDirTest):
    def test_the_reports_are_byte_identical_serially_with_four_jobs_and_by_default(self) -> None:
        reports = {}
        for jobs in (1, 4, None):
            out = self.dir / f"jobs-{jobs}"
            evaluation = run_tool_eval([str(SHIPPED_CASES)], out_dir=out, jobs=jobs)
            self.assertTrue(evaluation.gate_passed)
            reports[jobs] = report_files(out)
        self.assertEqual(reports[4], reports[1])
        self.assertEqual(reports[None], reports[1])

    def test_progress_sees_every_case_once_in_case_order(self) -> None:
        seen: list[str] = []
        evaluation = tool_eval.evaluate([str(SHIPPED_CASES)], jobs=8, progress=lambda case, row: seen.append(case.case_id))
        self.assertEqual(seen, [case.case_id for case in evaluation.cases])


class FinishingOutOfOrderTest(TempDirTest):
    CASES = 4

    def test_cases_that_finish_last_to_first_give_the_serial_reports(self) -> None:
        cases = self.write_cases(order_lab.case_lines(self.CASES))
        serial_lab, serial = order_lab.make_lab(self.CASES)
        run_tool_eval([cases], out_dir=self.dir / "serial", lab=serial_lab, jobs=1)
        reversed_lab, concurrent = order_lab.make_lab(self.CASES, reverse=True)
        evaluation = run_tool_eval([cases], out_dir=self.dir / "concurrent", lab=reversed_lab, jobs=self.CASES)

        self.assertEqual(serial.order, [0, 1, 2, 3])
        self.assertEqual(concurrent.order, [3, 2, 1, 0])  # they really finished last to first
        self.assertEqual([case.case_id for case in evaluation.cases], ["case-0", "case-1", "case-2", "case-3"])
        self.assertTrue(evaluation.gate_passed)
        self.assertEqual(report_files(self.dir / "concurrent"), report_files(self.dir / "serial"))


class BadJobsTest(TempDirTest):
    def test_a_jobs_flag_that_is_not_a_whole_number_of_at_least_one_is_exit_2(self) -> None:
        for value in ("0", "-1", "x", "1.5", ""):
            with self.subTest(value=value):
                code, stderr = self.run_cli("tool-eval", "--jobs", value, "--out", str(self.dir / "out"))
                self.assertEqual(code, 2)
                self.assertIn(f"argument -j/--jobs: {value!r} is not a whole number of at least 1", stderr)
                self.assertFalse((self.dir / "out").exists())

    def test_the_library_refuses_a_bad_jobs_value_before_anything_runs(self) -> None:
        for value in (0, -3, True, 2.0, "4"):
            with self.subTest(value=value), self.assertRaises(ValueError):
                run_tool_eval([str(SHIPPED_CASES)], out_dir=self.dir / "out", jobs=value)  # type: ignore[arg-type]
        self.assertFalse((self.dir / "out").exists())

    @unittest.skipIf(sys.version_info < (3, 11), "Python 3.10's small TOML reader reads no integers; --jobs is the way there")
    def test_the_table_sets_jobs_and_the_flag_beats_it(self) -> None:
        (self.dir / "pyproject.toml").write_text("[tool.agent-lab]\njobs = 3\n", encoding="utf-8")
        self.assertEqual(tool_eval_settings(directory=self.dir).jobs, 3)
        self.assertEqual(tool_eval_settings(jobs=1, directory=self.dir).jobs, 1)
        self.assertIsNone(tool_eval_settings(directory=self.dir / "elsewhere").jobs)

    @unittest.skipIf(sys.version_info < (3, 11), "Python 3.10's small TOML reader reads no integers")
    def test_a_bad_jobs_value_in_the_table_is_a_config_error(self) -> None:
        for value in ("0", "-2", "true", '"4"', "2.5"):
            with self.subTest(value=value):
                (self.dir / "pyproject.toml").write_text(f"[tool.agent-lab]\njobs = {value}\n", encoding="utf-8")
                with self.assertRaises(ConfigError) as caught:
                    tool_eval_settings(directory=self.dir)
                self.assertIn("[tool.agent-lab] jobs must be a whole number of at least 1", str(caught.exception))

    def test_the_default_comes_from_the_core_count(self) -> None:
        with mock.patch.object(tool_eval.os, "cpu_count", return_value=2):
            self.assertEqual(tool_eval.default_jobs(), 6)
        with mock.patch.object(tool_eval.os, "cpu_count", return_value=None):
            self.assertEqual(tool_eval.default_jobs(), 5)
        with mock.patch.object(tool_eval.os, "cpu_count", return_value=512):
            self.assertEqual(tool_eval.default_jobs(), tool_eval.MAX_DEFAULT_JOBS)


class BrokenUnderJobsTest(TempDirTest):
    """Whatever N is, the same exit code and message: the first failure in case order."""

    def run_both(self, *argv: str) -> dict[str, tuple[int, str]]:
        return {jobs: self.run_cli("tool-eval", *argv, "--out", str(self.dir / f"out-{jobs}"), "--jobs", jobs)
                for jobs in ("1", "6")}

    def test_a_world_that_cannot_be_made(self) -> None:
        cases = self.write_cases(order_lab.case_lines(6))
        runs = self.run_both("--lab", str(TESTS / "labs" / "order_lab.py") + ":broken_worlds", "--cases", cases)
        self.assertEqual(runs["6"], runs["1"])
        code, stderr = runs["1"]
        self.assertEqual(code, 2)
        self.assertIn("world() raised RuntimeError: world 2 is broken", stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertFalse((self.dir / "out-6").exists())

    def test_a_builder_that_raises_is_the_inspections_error(self) -> None:
        cases = self.write_cases(order_lab.case_lines(3))
        runs = self.run_both("--lab", str(TESTS / "labs" / "order_lab.py") + ":broken_builder", "--cases", cases)
        self.assertEqual(runs["6"], runs["1"])
        self.assertEqual(runs["1"][0], 2)
        self.assertIn("surface 'order-v1': build(world) raised RuntimeError: this surface cannot be built", runs["1"][1])

    def test_a_case_value_that_cannot_be_replayed_is_its_file_and_line(self) -> None:
        lines = order_lab.case_lines(5)
        for place in (1, 3):  # approved arguments too wide to fingerprint: refused only when replayed
            lines[place]["calls"][0]["approval"] = {"arguments": {"n": int("9" * 4250)}}
        cases = self.write_cases(lines)
        runs = self.run_both("--lab", str(TESTS / "labs" / "order_lab.py") + ":broken_worlds", "--cases", cases)
        self.assertEqual(runs["6"], runs["1"])
        code, stderr = runs["1"]
        self.assertEqual(code, 2)
        self.assertTrue(stderr.startswith(f"{cases}:2: 'calls/0/approval' cannot be replayed"), stderr)

    def test_the_first_failure_in_case_order_wins_though_a_later_case_failed_first(self) -> None:
        cases = self.write_cases(order_lab.case_lines(6))
        lab, finishing = order_lab.make_lab(6, fail_at=(2, 4), fail_late_first=True)
        with self.assertRaises(LabError) as caught:
            run_tool_eval([cases], out_dir=self.dir / "out", lab=lab, jobs=6)
        self.assertEqual(str(caught.exception), "world() raised RuntimeError: world 2 is broken")
        self.assertEqual(finishing.failed, {2, 4})  # case 4 failed, and before case 2 did
        self.assertFalse((self.dir / "out").exists())

    def test_a_case_file_problem_is_raised_whatever_the_jobs(self) -> None:
        lines = order_lab.case_lines(3)
        lines[2]["calls"][0]["approval"] = {"arguments": {"n": int("9" * 4250)}}
        cases = self.write_cases(lines)
        lab, _ = order_lab.make_lab(3)
        for jobs in (1, 3):
            with self.subTest(jobs=jobs), self.assertRaises(CaseFileError) as caught:
                tool_eval.evaluate([cases], lab=lab, jobs=jobs)
            self.assertEqual([problem.line for problem in caught.exception.problems], [3])


if __name__ == "__main__":
    unittest.main()
