"""The command line: exit 0 gate passed, 1 gate failed, 2 bad input; reports deterministic and atomic."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import re
import os
import signal
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from unittest import mock

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

    def reports_then_changed_cases(self) -> tuple[Path, dict[str, bytes], str]:
        """A run's report directory, its reports, and cases whose next run changes every report."""
        out = self.dir / "out"
        run("tool-eval", "--cases", self.cases, "--out", str(out))
        changed = [line.replace("Read", "Look up") for line in Path(self.cases).read_text(encoding="utf-8").splitlines()]
        return out, self.reports(out), self.write_cases("changed.jsonl", changed)

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

    def test_junit_xml_is_well_formed_and_its_counts_match_its_testcases(self) -> None:
        failing = json.loads(Path(self.cases).read_text(encoding="utf-8").splitlines()[0])
        failing["case_id"] = "control-characters"
        failing["expected"]["candidate"]["checks"].append({"path": "/output/ticket/id\u0001", "equals": "x\u0002\ufffe"})
        cases = self.write_cases("control.jsonl", [Path(self.cases).read_text(encoding="utf-8"), json.dumps(failing)])
        out = self.dir / "out"
        code, _, _ = run("tool-eval", "--cases", cases, "--out", str(out))
        self.assertEqual(code, 1)
        root = ElementTree.parse(out / "junit.xml").getroot()  # raises on a character XML 1.0 forbids
        totals = {"tests": 0, "failures": 0, "skipped": 0}
        for suite in root.iter("testsuite"):
            counted = {"tests": len(suite.findall("testcase")), "failures": len(suite.findall("testcase/failure")),
                       "skipped": len(suite.findall("testcase/skipped"))}
            self.assertEqual({key: int(suite.get(key)) for key in counted}, counted, suite.get("name"))
            totals = {key: totals[key] + counted[key] for key in totals}
        self.assertEqual({key: int(root.get(key)) for key in totals}, totals)
        self.assertGreater(totals["failures"], 0)

    def test_a_report_that_cannot_be_written_leaves_every_earlier_report_untouched(self) -> None:
        out, before, cases = self.reports_then_changed_cases()
        real_replace, renamed = os.replace, []

        def fourth_rename_fails(source: object, target: object) -> None:
            renamed.append(target)
            if len(renamed) == 4:
                raise OSError(28, "No space left on device")
            real_replace(source, target)

        with mock.patch("os.replace", side_effect=fourth_rename_fails):
            code, _, stderr = run("tool-eval", "--cases", cases, "--out", str(out))
        self.assertGreaterEqual(len(renamed), 4)
        self.assertEqual(code, 2)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertIn("No space left on device", stderr)
        self.assertEqual(self.reports(out), before)  # also: no temporary file left behind

    def test_junit_naming_the_reports_directory_is_refused_before_any_case_runs(self) -> None:
        out = self.dir / "out"  # not there yet: it only becomes a directory when the reports are written
        with mock.patch("agent_lab.lab.tool_eval.evaluate", side_effect=AssertionError("a case ran")):
            code, stdout, stderr = run("tool-eval", "--cases", self.cases, "--out", str(out), "--junit", str(out))
        self.assertEqual((code, stdout), (2, ""))
        self.assertEqual(stderr.splitlines(), [f"cannot write the reports: {out}: the directory of another report, "
                                               "not a file"])
        self.assertFalse(out.exists())

    def test_ctrl_c_between_two_renames_leaves_every_earlier_report_untouched(self) -> None:
        out, before, cases = self.reports_then_changed_cases()
        real_replace, renamed = os.replace, []

        def interrupted_at_the_fourth_rename(source: object, target: object) -> None:
            renamed.append(target)
            if len(renamed) == 4:
                signal.raise_signal(signal.SIGINT)  # a real Ctrl-C: its handler raises KeyboardInterrupt here
            real_replace(source, target)

        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        with mock.patch("os.replace", side_effect=interrupted_at_the_fourth_rename), \
                self.assertRaises(KeyboardInterrupt):
            run("tool-eval", "--cases", cases, "--out", str(out))
        self.assertEqual(len(renamed), 4 + 3)  # the fourth interrupted; the three before put back, each by a rename
        self.assertEqual(self.reports(out), before)  # also: no temporary file left behind

    def stopped_by_the_entry_point_at_the_fourth_rename(self, signum: int) -> tuple[object, str]:
        """`cli.run` (the process's entry point) given `signum` between two renames of the report set:
        its exit code and its last line on stderr, once the earlier reports were found untouched."""
        out, before, cases = self.reports_then_changed_cases()
        real_replace, renamed = os.replace, []

        def signalled_at_the_fourth_rename(source: object, target: object) -> None:
            renamed.append(target)
            if len(renamed) == 4:
                if signal.getsignal(signum) in (signal.SIG_DFL, signal.SIG_IGN):  # it would end this process
                    raise AssertionError(f"signal {signum} has no handler: it would end the process on the spot")
                signal.raise_signal(signum)  # its handler raises here, on the main thread
            real_replace(source, target)

        threshold = gc.get_threshold()
        self.addCleanup(gc.set_threshold, *threshold)  # the entry point's own setting, for this process only
        self.addCleanup(gc.unfreeze)
        err = io.StringIO()
        with mock.patch("os.replace", side_effect=signalled_at_the_fourth_rename), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
                self.assertRaises(SystemExit) as exited:
            cli.run(["tool-eval", "--cases", cases, "--out", str(out)])
        self.assertEqual(self.reports(out), before)  # also: no temporary file left behind
        return exited.exception.code, err.getvalue().strip().splitlines()[-1]

    def test_sigterm_between_two_renames_leaves_every_earlier_report_untouched_and_exits_143(self) -> None:
        # What a CI runner sends a cancelled job: by default it ended the process on the spot, and the
        # temporary files of the report set stayed in --out. The entry point takes it as Ctrl-C's kin.
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        code, line = self.stopped_by_the_entry_point_at_the_fourth_rename(signal.SIGTERM)
        self.assertEqual((code, line), (cli.EXIT_TERMINATED, "agent-lab: terminated"))
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)  # the process's own handling is back

    def test_ctrl_c_at_the_entry_point_is_one_line_and_exit_130_not_a_traceback(self) -> None:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        code, line = self.stopped_by_the_entry_point_at_the_fourth_rename(signal.SIGINT)
        self.assertEqual((code, line), (cli.EXIT_INTERRUPTED, "agent-lab: interrupted"))

    def test_a_directory_that_refuses_new_files_leaves_every_earlier_report_untouched(self) -> None:
        out, before, cases = self.reports_then_changed_cases()
        opened: list[object] = []

        def third_file_is_refused(path: object, *args: object, **kwargs: object) -> object:
            opened.append(path)
            if len(opened) == 3:
                raise PermissionError(13, "Permission denied")
            return open(path, *args, **kwargs)  # type: ignore[call-overload]

        with mock.patch("agent_lab.lab.reports.open", third_file_is_refused, create=True):
            code, _, stderr = run("tool-eval", "--cases", cases, "--out", str(out))
        self.assertEqual(len(opened), 3)
        self.assertEqual((code, len(stderr.splitlines())), (2, 1), stderr)
        self.assertIn("Permission denied", stderr)
        self.assertEqual(self.reports(out), before)

    def test_out_naming_a_file_is_bad_input_reported_before_evaluating(self) -> None:
        a_file = self.dir / "a-file"
        a_file.write_text("keep me", encoding="utf-8")
        for out in (a_file, a_file / "reports"):
            with self.subTest(out=out), mock.patch("agent_lab.lab.tool_eval.evaluate") as evaluate:
                code, _, stderr = run("tool-eval", "--cases", self.cases, "--out", str(out))
                self.assertEqual((code, stderr), (2, f"cannot write the reports: {a_file}: a file, not a directory\n"))
                evaluate.assert_not_called()
        self.assertEqual(a_file.read_text(encoding="utf-8"), "keep me")

    def test_junit_naming_a_directory_or_another_report_is_bad_input_and_nothing_is_written(self) -> None:
        out = self.dir / "out"
        for junit, problem in ((self.dir, "a directory, not a file"),
                               (out / "tool-runs.jsonl", "two reports would be written to this file")):
            with self.subTest(junit=junit):
                code, _, stderr = run("tool-eval", "--cases", self.cases, "--out", str(out), "--junit", str(junit))
                self.assertEqual((code, stderr), (2, f"cannot write the reports: {junit}: {problem}\n"))
                self.assertFalse(out.exists())

    def test_a_report_aimed_at_a_case_file_is_refused_and_the_case_file_kept(self) -> None:
        before = Path(self.cases).read_bytes()
        code, _, stderr = run("tool-eval", "--cases", self.cases, "--out", str(self.dir / "out"), "--junit", self.cases)
        self.assertEqual((code, stderr), (2, f"cannot write the reports: {self.cases}: a case file of this run\n"))
        self.assertEqual(Path(self.cases).read_bytes(), before)

    def test_an_empty_path_is_bad_input_not_the_current_directory(self) -> None:
        for option in ("--cases", "--out", "--junit"):
            with self.subTest(option=option):
                code, _, stderr = run("tool-eval", option, "")
                self.assertEqual(code, 2)
                self.assertIn(f"argument {option}: an empty path", stderr)

    def test_an_intent_with_line_breaks_cannot_add_lines_to_the_markdown_reports(self) -> None:
        case = json.loads(Path(self.cases).read_text(encoding="utf-8").splitlines()[0])
        case["intent"] = "Read one ticket.\n\n## Gate passed\r\n- [x] everything"
        case["expected"]["side_effects"] = 1  # fails for both strategies, so it is listed everywhere
        out = self.dir / "out"
        run("tool-eval", "--cases", self.write_cases("intent.jsonl", [json.dumps(case)]), "--out", str(out))
        for name in ("tool-comparison.md", "tool-failures.md"):
            lines = (out / name).read_text(encoding="utf-8").splitlines()
            with self.subTest(report=name):
                self.assertNotIn("## Gate passed", lines)
                self.assertNotIn("- [x] everything", lines)

    def test_a_reader_that_stops_early_does_not_turn_a_failed_gate_into_success(self) -> None:
        wrong = json.loads(Path(self.cases).read_text(encoding="utf-8").splitlines()[0])
        wrong["expected"]["side_effects"] = 3
        command = [sys.executable, "run_lab.py", "tool-eval", "--cases", self.write_cases("wrong.jsonl", [json.dumps(wrong)]),
                   "--out", str(self.dir / "out")]
        for unbuffered in ("1", ""):  # unbuffered: EPIPE inside main; buffered: at the final flush
            environment = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
            with self.subTest(unbuffered=unbuffered), subprocess.Popen(
                command, cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ) as process:
                assert process.stdout is not None and process.stderr is not None
                process.stdout.close()  # like `| head -1` under `set -o pipefail`
                stderr = process.stderr.read().decode()
                code = process.wait(timeout=60)
                self.assertNotIn("Traceback", stderr)
                self.assertNotIn("BrokenPipeError", stderr)
                self.assertEqual(code, 1, stderr)

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


class OneCommandParserTest(unittest.TestCase):
    """`main` builds only the parser of the command it runs (`build_parser(only=...)`)."""

    @staticmethod
    def subparsers(parser):
        [action] = [action for action in parser._actions if action.__class__.__name__ == "_SubParsersAction"]
        return action.choices

    def test_commands_names_every_command_the_parser_adds_in_its_order(self) -> None:
        self.assertEqual(tuple(self.subparsers(cli.build_parser())), cli.COMMANDS)

    def test_a_command_alone_has_the_same_options_usage_and_help_as_in_the_whole_parser(self) -> None:
        whole = self.subparsers(cli.build_parser())
        for name in cli.COMMANDS:
            with self.subTest(name):
                alone = self.subparsers(cli.build_parser(only=name))
                self.assertEqual(list(alone), [name])
                self.assertEqual(alone[name].format_help(), whole[name].format_help())
                self.assertEqual(alone[name].format_usage(), whole[name].format_usage())
                self.assertEqual(alone[name]._defaults, whole[name]._defaults)

    def test_only_a_first_argument_naming_a_command_exactly_narrows_the_parser(self) -> None:
        self.assertEqual(cli._command_named_first(["tool-eval", "--jobs", "2"]), "tool-eval")
        for argv in ([], ["--help"], ["tool-ev"], ["--jobs", "tool-eval"]):
            self.assertIsNone(cli._command_named_first(argv))
