"""The command line under hostile input: every bad path, file, setting or reader is one line on stderr
and an exit code (2 for bad input; a gate's own verdict otherwise), never a traceback, and nothing
half-written is left behind. Each test here failed on the code before its fix."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any
from unittest import mock

from agent_lab import cli
from agent_lab.gateway import GatewayError, open_receipts
from agent_lab.lab.reports import REPORT_FILES

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO / "datasets" / "tool-cases.jsonl"


def run(*argv: str) -> tuple[int, str, str]:
    """The command in this process: (exit code, stdout, stderr); an exception here is a traceback."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


class Scratch(unittest.TestCase):
    def setUp(self) -> None:
        scratch = tempfile.TemporaryDirectory()
        self.addCleanup(scratch.cleanup)
        self.dir = Path(scratch.name)
        self.cases = self.dir / "one.jsonl"
        self.cases.write_text(DATASET.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")


class SymbolicLinkLoopTest(Scratch):
    """`ln -s loop loop`: Path.resolve() raises RuntimeError on it before Python 3.13."""

    def setUp(self) -> None:
        super().setUp()
        self.loop = self.dir / "loop"
        os.symlink(self.loop, self.loop)

    def assert_one_line_refusal(self, *argv: str) -> str:
        code, _, stderr = run(*argv)
        self.assertEqual(code, 2, stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        self.assertIn("Too many levels of symbolic links", stderr)
        return stderr

    def test_a_case_file_that_is_a_link_loop_is_one_line_and_exit_2(self) -> None:
        stderr = self.assert_one_line_refusal("tool-eval", "--cases", str(self.loop), "--out", str(self.dir / "out"))
        self.assertTrue(stderr.startswith(f"{self.loop}:1: "), stderr)

    def test_a_report_directory_or_junit_file_that_is_a_link_loop_is_refused_and_nothing_written(self) -> None:
        for flags in (["--out", str(self.loop)], ["--out", str(self.dir / "out"), "--junit", str(self.loop)]):
            with self.subTest(flags=flags[-2]):
                stderr = self.assert_one_line_refusal("tool-eval", "--cases", str(self.cases), *flags)
                self.assertTrue(stderr.startswith("cannot write the reports: "), stderr)
                self.assertFalse((self.dir / "out").exists())

    def test_model_eval_reports_or_a_baseline_behind_a_link_loop_are_one_line_and_exit_2(self) -> None:
        self.assert_one_line_refusal("model-eval", "--repeats", "1", "--out", str(self.loop))
        code, _, stderr = run("model-eval", "--repeats", "1", "--out", str(self.dir / "out"), "--baseline", str(self.loop))
        self.assertEqual(code, 2, stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        self.assertFalse((self.dir / "out").exists())



def run_in(directory: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command as a process started in `directory` (whose pyproject.toml it reads)."""
    return subprocess.run([sys.executable, str(REPO / "run_lab.py"), *argv], cwd=directory, capture_output=True,
                          text=True, timeout=120)


class PyprojectPathTest(Scratch):
    def test_a_path_setting_holding_a_nul_is_one_line_naming_the_file_and_key(self) -> None:
        for key, command in (("cases", "tool-eval"), ("out", "tool-eval"), ("junit", "tool-eval"), ("lock", "lint")):
            with self.subTest(key=key):
                servers = f'mcp = "{sys.executable} {REPO / "tests" / "mcp_hostile_server.py"} well-behaved"\n' \
                    if key == "lock" else ""
                (self.dir / "pyproject.toml").write_text(f'[tool.agent-lab]\n{key} = "a\\u0000b"\n{servers}',
                                                         encoding="utf-8")
                done = run_in(self.dir, command)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertEqual(done.stderr.strip().splitlines(),
                                 [f"pyproject.toml: [tool.agent-lab] {key} holds a NUL character (\\u0000), which no "
                                  "path or command line can"])

class ReceiptStoreSpecTest(Scratch):
    """serve-mcp --upstream S --receipts STORE that will not open: one line, not a traceback's frames."""

    def test_a_sqlite_file_that_cannot_be_opened_is_one_line(self) -> None:
        (self.dir / "a-directory").mkdir()
        (self.dir / "not-a-database").write_bytes(b"hello, not SQLite\n" * 100)
        for name, reason in (("a-directory", "Is a directory"), ("missing/receipts.db", "No such file or directory"),
                             ("not-a-database", "file is not a database")):
            with self.subTest(store=name):
                with self.assertRaises(GatewayError) as refused:
                    open_receipts(f"sqlite:{self.dir / name}")
                self.assertEqual(len(str(refused.exception).splitlines()), 1, str(refused.exception))
                self.assertIn(reason, str(refused.exception))
                self.assertNotIn('File "', str(refused.exception))

    def test_serve_mcp_with_receipts_it_cannot_open_exits_2_with_one_line(self) -> None:
        server = f"{sys.executable} {REPO / 'tests' / 'mcp_hostile_server.py'} well-behaved {self.dir}"
        done = run_in(self.dir, "serve-mcp", "--upstream", server, "--receipts", f"sqlite:{self.dir}")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        self.assertIn("Is a directory", done.stderr)

    @unittest.skipUnless(importlib.util.find_spec("psycopg"), "the PostgreSQL store needs psycopg")
    def test_a_postgresql_store_that_cannot_connect_is_one_line_without_the_dsn(self) -> None:
        with socket.socket() as listener:  # a port nobody listens on once this closes
            listener.bind(("127.0.0.1", 0))
            port = listener.getsockname()[1]
        with self.assertRaises(GatewayError) as refused:
            open_receipts(f"postgresql://agent:hunter2@127.0.0.1:{port}/receipts")
        self.assertEqual(len(str(refused.exception).splitlines()), 1, str(refused.exception))
        self.assertIn("could not connect", str(refused.exception))
        self.assertNotIn("hunter2", str(refused.exception))

class ReaderGoneTest(Scratch):
    """`agent-lab lint | head -1` under `set -o pipefail`: a reader that stops early must not turn a
    failed verdict into success (the tool-eval gate's test is in test_cli)."""

    def exit_code_with_reader_gone(self, *argv: str) -> int:
        codes = set()
        for unbuffered in ("1", ""):  # unbuffered: EPIPE inside main; buffered: at the flush
            environment = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
            with subprocess.Popen([sys.executable, str(REPO / "run_lab.py"), *argv], cwd=self.dir, env=environment,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
                assert process.stdout is not None and process.stderr is not None
                process.stdout.close()  # gone before the first byte: the command must see EPIPE
                stderr = process.stderr.read().decode()
                code = process.wait(timeout=120)
            self.assertNotIn("Traceback", stderr)
            self.assertNotIn("BrokenPipeError", stderr)
            codes.add(code)
        self.assertEqual(len(codes), 1, codes)
        return codes.pop()

    def test_lint_with_an_error_finding_exits_1_whoever_reads_its_report(self) -> None:
        for report in ("text", "sarif"):
            with self.subTest(format=report):
                self.assertEqual(run("lint", "--surface", "wide-tool-v1", "--format", report, "--output",
                                     str(self.dir / "report"))[0], 1)
                self.assertEqual(self.exit_code_with_reader_gone("lint", "--surface", "wide-tool-v1", "--format", report), 1)

    def test_model_eval_with_infrastructure_failures_exits_1_whoever_reads_its_summary(self) -> None:
        with socket.socket() as listener:  # a port nobody listens on once this closes: every request fails
            listener.bind(("127.0.0.1", 0))
            port = listener.getsockname()[1]
        code = self.exit_code_with_reader_gone("model-eval", "--repeats", "1", "--attempts", "1", "--out",
                                               str(self.dir / "out"), "--model", f"openai:gpt-x@http://127.0.0.1:{port}/v1")
        self.assertEqual(code, 1)
        self.assertTrue((self.dir / "out" / "model-eval.json").is_file())

class SharedReportDirectoryTest(Scratch):
    """--out in a directory others may write in (a shared /tmp/reports): what they leave there is never
    written through, and never receives what a link of theirs pointed at."""

    def setUp(self) -> None:
        super().setUp()
        self.out = self.dir / "shared"
        self.out.mkdir()
        self.victim = self.dir / "victim.txt"
        self.victim.write_text("precious\n", encoding="utf-8")

    def assert_victim_untouched_and_no_report_a_link(self) -> None:
        self.assertEqual(self.victim.read_text(encoding="utf-8"), "precious\n")
        self.assertEqual([name for name in REPORT_FILES if (self.out / name).is_symlink()], [])
        self.assertEqual({(self.out / name).is_file() for name in REPORT_FILES}, {True})

    def test_a_link_planted_at_the_temporary_name_a_pid_predicts_is_not_written_through(self) -> None:
        for name in REPORT_FILES:
            os.symlink(self.victim, self.out / f".{name}.{os.getpid()}.tmp")
        code, _, stderr = run("tool-eval", "--cases", str(self.cases), "--out", str(self.out))
        self.assertEqual(code, 0, stderr)
        self.assert_victim_untouched_and_no_report_a_link()

    def test_a_link_at_the_very_temporary_name_is_refused_not_followed(self) -> None:
        with mock.patch("secrets.token_hex", return_value="guessed"):
            for name in REPORT_FILES:
                os.symlink(self.victim, self.out / f".{name}.guessed.tmp")
            code, _, stderr = run("tool-eval", "--cases", str(self.cases), "--out", str(self.out))
        self.assertEqual(code, 2, stderr)
        self.assertEqual(len(stderr.splitlines()), 1, stderr)
        self.assertIn("File exists", stderr)
        self.assertEqual(self.victim.read_text(encoding="utf-8"), "precious\n")
        self.assertEqual(sorted(path.name for path in self.out.iterdir() if not path.is_symlink()), [])

    def test_ctrl_c_just_after_a_temporary_file_is_made_leaves_no_temporary_file(self) -> None:
        opened: list[object] = []

        def interrupted_once_the_third_exists(path: object, *args: object, **kwargs: object) -> object:
            handle = open(path, *args, **kwargs)  # type: ignore[call-overload]
            opened.append(path)
            if len(opened) == 3:
                handle.close()
                signal.raise_signal(signal.SIGINT)  # a real Ctrl-C: its handler raises KeyboardInterrupt here
            return handle

        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        with mock.patch("agent_lab.lab.reports.open", interrupted_once_the_third_exists, create=True), \
                self.assertRaises(KeyboardInterrupt):
            run("tool-eval", "--cases", str(self.cases), "--out", str(self.out))
        self.assertEqual(len(opened), 3)
        self.assertEqual(sorted(path.name for path in self.out.iterdir()), [])

    def test_a_report_set_put_back_restores_a_link_and_copies_nothing_it_pointed_at(self) -> None:
        os.symlink(self.victim, self.out / "tool-runs.jsonl")  # left by someone else before the run
        real_replace, renames = os.replace, []

        def the_last_report_cannot_be_renamed(source: object, target: object) -> None:
            renames.append(target)
            if Path(str(target)).name == "junit.xml":
                raise PermissionError(13, "Permission denied")
            real_replace(source, target)  # type: ignore[arg-type]

        with mock.patch("os.replace", side_effect=the_last_report_cannot_be_renamed):
            code, _, stderr = run("tool-eval", "--cases", str(self.cases), "--out", str(self.out))
        self.assertEqual(code, 2, stderr)
        self.assertEqual(self.victim.read_text(encoding="utf-8"), "precious\n")
        self.assertEqual(os.readlink(self.out / "tool-runs.jsonl"), str(self.victim))
        self.assertEqual(sorted(path.name for path in self.out.iterdir()), ["tool-runs.jsonl"])

class EditedCassetteTest(Scratch):
    """model-eval --replay DIR whose cassette.jsonl was edited by hand (one value on one line)."""

    CASSETTES = REPO / "datasets" / "model-cassettes"

    def replay(self, name: str, api: str, edit: Any) -> tuple[int, str, str]:
        lines = (self.CASSETTES / name / "cassette.jsonl").read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            record = json.loads(line)
            if edit(record):
                lines[number] = json.dumps(record)
                break
        else:
            self.fail("no recording to edit")
        cassette = self.dir / name
        cassette.mkdir()
        (cassette / "cassette.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return run("model-eval", "--model", f"{api}:stand-in@http://127.0.0.1:8765", "--replay", str(cassette),
                   "--out", str(self.dir / "out"), "--repeats", "1")

    def test_a_recording_whose_latency_or_trial_is_not_one_is_refused_at_its_line(self) -> None:
        def latency(value: Any) -> Any:
            return lambda record: record["response"].update(latency_ms=value) or True

        def asked(key: str, value: Any) -> Any:
            return lambda record: record["asked"].update({key: value}) or True

        for what, edit in (("latency text", latency("x")), ("latency true", latency(True)),
                           ("latency a list", latency([1])), ("latency negative", latency(-1)),
                           ("task a list", asked("task", [])), ("trial an object", asked("trial", {"a": 1}))):
            with self.subTest(what):
                shutil.rmtree(self.dir / "openai-chat", ignore_errors=True)
                code, _, stderr = self.replay("openai-chat", "openai", edit)
                self.assertEqual(code, 2, stderr)
                self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
                self.assertTrue(stderr.strip().endswith("cassette.jsonl:1: not a cassette recording"), stderr)
                self.assertFalse((self.dir / "out").exists())

    def test_a_responses_message_whose_content_is_not_a_list_is_read_as_no_text(self) -> None:
        def content_true(record: dict) -> bool:
            for item in record["response"]["body"].get("output", []):
                if item.get("type") == "message":
                    item["content"] = True
                    return True
            return False

        code, _, stderr = self.replay("openai-responses", "openai-responses", content_true)
        self.assertIn(code, (0, 1), stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertTrue((self.dir / "out" / "model-eval.json").is_file())


if __name__ == "__main__":
    unittest.main()
