"""Nothing a run writes may replace a file the run reads.

`--junit pyproject.toml` (or `junit = "pyproject.toml"` in the table itself) used to overwrite the
project's configuration with JUnit XML, and a model-eval `--junit` the cassette it replayed. Every
output (tool-eval's reports and JUnit file, lint's `--output`, model-eval's reports and recorded
cassette) is checked against the run's inputs (case and task files, replayed cassettes, pyproject.toml,
every loaded Python module's source, the lab's included) before any work: bad input, exit 2, one line,
the input byte for byte unchanged, however the path is spelled (relative, through `..`, a symbolic link,
a hard link).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import unittest
from pathlib import Path

from agent_lab.cli import main

REPO = Path(__file__).resolve().parent.parent
FILES_LAB = REPO / "tests" / "labs" / "files_lab.py"
FILES_CASES = REPO / "tests" / "labs" / "files-cases.jsonl"
CASSETTE = REPO / "datasets" / "model-cassettes" / "openai-chat"
STAND_IN = "openai:stand-in@http://127.0.0.1:8765"  # never reached: the run is refused before it starts


class OutputsNeverInputsTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name).resolve()
        previous = os.getcwd()
        os.chdir(self.dir)
        self.addCleanup(os.chdir, previous)
        shutil.copy(FILES_LAB, self.dir / "files_lab.py")
        shutil.copy(FILES_CASES, self.dir / "cases.jsonl")
        self.pyproject = self.dir / "pyproject.toml"
        self.pyproject.write_text('[tool.agent-lab]\nlab = "files_lab.py:lab"\ncases = "cases.jsonl"\n', encoding="utf-8")

    def contents(self) -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in self.dir.rglob("*") if path.is_file()}

    def assert_refused(self, *argv: str, naming: str) -> None:
        before = self.contents()
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(list(argv))
        self.assertEqual((code, stdout.getvalue()), (2, ""), stderr.getvalue())
        self.assertEqual(len(stderr.getvalue().splitlines()), 1, stderr.getvalue())
        self.assertIn(naming, stderr.getvalue())
        self.assertEqual(self.contents(), before)  # nothing changed, nothing new

    def test_junit_on_the_projects_pyproject_from_the_flag_or_the_table_itself_is_refused(self) -> None:
        self.assert_refused("tool-eval", "--junit", "pyproject.toml", naming="pyproject.toml: the project's pyproject.toml")
        self.pyproject.write_text(self.pyproject.read_text(encoding="utf-8") + 'junit = "pyproject.toml"\n',
                                  encoding="utf-8")
        self.assert_refused("tool-eval", naming="pyproject.toml: the project's pyproject.toml")

    def test_every_spelling_of_an_input_is_refused(self) -> None:
        (self.dir / "sub").mkdir()
        (self.dir / "linked.toml").symlink_to(self.pyproject)
        os.link(self.dir / "cases.jsonl", self.dir / "hard-link.jsonl")
        spellings = {
            "./sub/../pyproject.toml": "the project's pyproject.toml",
            str(self.pyproject): "the project's pyproject.toml",
            "linked.toml": "the project's pyproject.toml",
            "cases.jsonl": "a case file of this run",
            "hard-link.jsonl": "a case file of this run",
            "files_lab.py": "a Python module this run loaded",
            str(REPO / "agent_lab" / "cli.py"): "a Python module this run loaded",
        }
        for junit, what in spellings.items():
            with self.subTest(junit=junit):
                self.assert_refused("tool-eval", "--out", "out", "--junit", junit, naming=f"{Path(junit)}: {what}")

    def test_a_reports_directory_holding_a_case_file_named_like_a_report_is_refused(self) -> None:
        (self.dir / "gate").mkdir()
        shutil.copy(FILES_CASES, self.dir / "gate" / "tool-runs.jsonl")
        self.assert_refused("tool-eval", "--cases", "gate/tool-runs.jsonl", "--out", "gate",
                            naming="gate/tool-runs.jsonl: a case file of this run")

    def test_lint_output_on_the_pyproject_or_the_labs_module_is_refused(self) -> None:
        for output, what in (("pyproject.toml", "the project's pyproject.toml"),
                             ("files_lab.py", "a Python module this run loaded")):
            with self.subTest(output=output):
                self.assert_refused("lint", "--format", "sarif", "--output", output,
                                    naming=f"lint: cannot write {output}: it is {what}")

    def test_model_eval_never_writes_over_its_tasks_the_cassette_it_replays_or_the_one_it_records(self) -> None:
        shutil.copytree(CASSETTE, self.dir / "cassette")
        tasks = REPO / "agent_lab" / "modeleval" / "tasks" / "tickets.jsonl"
        shutil.copy(tasks, self.dir / "tasks.jsonl")
        replay = ("model-eval", "--model", STAND_IN, "--replay", "cassette", "--out", "out")
        self.assert_refused(*replay, "--tasks", "tasks.jsonl", "--junit", "cassette/cassette.jsonl",
                            naming="cassette/cassette.jsonl: a cassette this run replays")
        self.assert_refused(*replay, "--tasks", "tasks.jsonl", "--junit", "./tasks.jsonl",
                            naming="tasks.jsonl: a task file of this run")
        self.assert_refused("model-eval", "--model", STAND_IN, "--tasks", "tasks.jsonl", "--record", "recorded",
                            "--out", "out", "--junit", "recorded/cassette.jsonl", naming="recorded/cassette.jsonl: two reports would be written")
        (self.dir / "kept").mkdir()
        shutil.copy(tasks, self.dir / "kept" / "cassette.jsonl")  # tasks where a recording would go
        self.assert_refused("model-eval", "--model", STAND_IN, "--tasks", "kept/cassette.jsonl", "--record", "kept",
                            "--out", "out", naming="kept/cassette.jsonl: a task file of this run")


if __name__ == "__main__":
    unittest.main()
