"""`tool-eval --shard I/N` and `tool-eval --merge DIR...`: a CI matrix runs the cases on N machines and
one job writes the report, which is the report one unsharded run writes, file for file and byte for
byte. Which shard runs a case depends on the case ids alone; parts that do not make one run (other
case sets, labs or catalogs, agent-lab versions, a shard twice or missing) are refused with one line
and exit code 2, and nothing is written.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from agent_lab import cli
from agent_lab.lab.reports import REPORT_FILES
from agent_lab.lab.shards import SHARD_FILE, Shard, ShardError, select_cases, shard_assignment
from agent_lab.lab.cases import load_cases
from agent_lab.lab.loader import load_lab
from agent_lab.lab.tickets import CASES as SHIPPED_CASES
from agent_lab.lab.tickets import lab as ticket_lab
from agent_lab.lab.tickets.candidate import CANDIDATE_NAME
from agent_lab.lab.tool_eval import run_tool_eval
from agent_lab.lab.tickets.world import TicketBackend

CHECKOUT = Path(__file__).resolve().parents[1]
SHARDS = 4
CASES = str(SHIPPED_CASES)  # named on every run, so the project's [tool.agent-lab] cases do not matter


def run_cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(list(argv))
    return code, stdout.getvalue(), stderr.getvalue()


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


class ShardedRunTest(unittest.TestCase):
    """One unsharded run and four shards of the shipped ticket cases, made once for every test here."""

    @classmethod
    def setUpClass(cls) -> None:
        temporary = tempfile.TemporaryDirectory()
        cls.addClassCleanup(temporary.cleanup)
        cls.dir = Path(temporary.name)
        code, _, stderr = run_cli("tool-eval", "--cases", CASES, "--out", str(cls.dir / "whole"))
        assert code == 0, stderr
        cls.shards = []
        for index in range(1, SHARDS + 1):
            out = cls.dir / f"shard-{index}"
            code, _, stderr = run_cli("tool-eval", "--cases", CASES, "--shard", f"{index}/{SHARDS}", "--out", str(out))
            assert code == 0, stderr
            cls.shards.append(out)

    def merge(self, *directories: Path, out: str = "merged") -> tuple[int, str, Path]:
        target = self.dir / out
        code, _, stderr = run_cli("tool-eval", "--merge", *map(str, directories), "--out", str(target))
        return code, stderr, target

    def assert_refused(self, code: int, stderr: str, *phrases: str) -> None:
        self.assertEqual(code, cli.EXIT_BAD_INPUT, stderr)
        self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
        self.assertNotIn("Traceback", stderr)
        for phrase in phrases:
            self.assertIn(phrase, stderr)

    def altered_shard(self, name: str, change: Any, source: Path | None = None) -> Path:
        """A copy of shard 1's directory whose tool-shard.json `change(document)` edited."""
        source = source or self.shards[0]
        copy = self.dir / name
        copy.mkdir()
        document = json.loads((source / SHARD_FILE).read_text(encoding="utf-8"))
        change(document)
        (copy / SHARD_FILE).write_text(json.dumps(document), encoding="utf-8")
        return copy

    # -- the merge equals the unsharded run ------------------------------------------------------------

    def test_four_shards_merged_write_the_unsharded_runs_reports_byte_for_byte(self) -> None:
        code, stderr, merged = self.merge(*self.shards)
        self.assertEqual(code, cli.EXIT_OK, stderr)
        whole = files_of(self.dir / "whole")
        self.assertEqual(sorted(whole), sorted(REPORT_FILES))
        self.assertEqual(files_of(merged), whole)

    def test_the_order_the_shard_directories_are_named_in_does_not_matter(self) -> None:
        code, stderr, merged = self.merge(*reversed(self.shards), out="merged-reversed")
        self.assertEqual(code, cli.EXIT_OK, stderr)
        self.assertEqual(files_of(merged), files_of(self.dir / "whole"))

    def test_every_case_runs_on_exactly_one_shard_and_the_shards_are_even(self) -> None:
        every = [json.loads(line)["case_id"] for line in SHIPPED_CASES.read_text(encoding="utf-8").splitlines()]
        ran = []
        for directory in self.shards:
            document = json.loads((directory / SHARD_FILE).read_text(encoding="utf-8"))
            ran.append([case["case_id"] for case in document["cases"]])
            runs = [json.loads(line) for line in (directory / "tool-runs.jsonl").read_text(encoding="utf-8").splitlines()]
            self.assertEqual({run["case_id"] for run in runs}, set(ran[-1]))  # a shard's own reports cover its cases
        self.assertEqual(sorted(case for part in ran for case in part), sorted(every))
        self.assertLessEqual(max(map(len, ran)) - min(map(len, ran)), 1)

    def test_a_shard_file_shows_no_secret_of_the_world(self) -> None:
        secrets = TicketBackend().secret_values()
        text = "".join((directory / SHARD_FILE).read_text(encoding="utf-8") for directory in self.shards)
        self.assertIn("[redacted]", text)  # the baseline shows customer emails: they were there to mask
        self.assertEqual([secret for secret in secrets if secret in text], [])

    def test_the_merged_gate_decides_the_exit_code(self) -> None:
        def fail_a_candidate_case(document: dict) -> None:
            document["results"][CANDIDATE_NAME][0]["grades"][0]["passed"] = False

        failing = self.altered_shard("failing", fail_a_candidate_case)
        code, stderr, merged = self.merge(failing, *self.shards[1:], out="merged-failing")
        self.assertEqual(code, cli.EXIT_GATE_FAILED, stderr)
        summary = json.loads((merged / "tool-comparison.json").read_text(encoding="utf-8"))
        self.assertFalse(summary["gate"]["passed"])

    # -- refusals ---------------------------------------------------------------------------------------

    def test_a_missing_shard_is_refused(self) -> None:
        code, stderr, merged = self.merge(*self.shards[:3], out="merged-missing")
        self.assert_refused(code, stderr, "shard 4/4 missing")
        self.assertFalse(merged.exists())

    def test_a_shard_given_twice_is_refused(self) -> None:
        code, stderr, _ = self.merge(self.shards[0], *self.shards[:3], out="merged-twice")
        self.assert_refused(code, stderr, "shard 1/4 is given twice")

    def test_shards_of_different_splits_are_refused(self) -> None:
        other = self.dir / "split-in-two"
        code, _, stderr = run_cli("tool-eval", "--cases", CASES, "--shard", "1/2", "--out", str(other))
        self.assertEqual(code, cli.EXIT_OK, stderr)
        code, stderr, _ = self.merge(other, *self.shards, out="merged-split")
        self.assert_refused(code, stderr, "split the cases differently")

    def test_shards_of_different_case_sets_are_refused(self) -> None:
        fewer = self.dir / "fewer.jsonl"
        fewer.write_text("".join(SHIPPED_CASES.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]),
                         encoding="utf-8")
        other = self.dir / "other-cases"
        code, _, stderr = run_cli("tool-eval", "--cases", str(fewer), "--shard", "1/4", "--out", str(other))
        self.assertEqual(code, cli.EXIT_OK, stderr)
        code, stderr, merged = self.merge(other, *self.shards[1:], out="merged-cases")
        self.assert_refused(code, stderr, "ran different case sets")
        self.assertFalse(merged.exists())

    def test_an_edited_case_makes_another_case_set(self) -> None:
        lines = SHIPPED_CASES.read_text(encoding="utf-8").splitlines(keepends=True)
        case = json.loads(lines[0])
        case["intent"] += " (edited)"
        edited = self.dir / "edited.jsonl"
        edited.write_text(json.dumps(case) + "\n" + "".join(lines[1:]), encoding="utf-8")
        original = self.dir / "original.jsonl"
        original.write_text("".join(lines), encoding="utf-8")
        outs = []
        for name, path in (("edited", edited), ("original", original)):
            outs.append(self.dir / f"{name}-shard")
            code, _, stderr = run_cli("tool-eval", "--cases", str(path), "--shard", "1/2", "--out", str(outs[-1]))
            self.assertEqual(code, cli.EXIT_OK, stderr)
        first, second = (json.loads((out / SHARD_FILE).read_text(encoding="utf-8"))["case_set"] for out in outs)
        self.assertEqual(first["case_ids"], second["case_ids"])
        self.assertNotEqual(first["digest"], second["digest"])

    def test_shards_of_different_surface_catalogs_are_refused(self) -> None:
        other_lab = load_lab(str(Path(__file__).resolve().parent / "labs" / "one_more_tool_lab.py") + ":lab")
        other = self.dir / "other-catalog"
        with contextlib.redirect_stderr(io.StringIO()):
            run_tool_eval([CASES], out_dir=other, lab=other_lab, shard=Shard(1, SHARDS))
        code, stderr, merged = self.merge(other, *self.shards[1:], out="merged-catalog")
        self.assert_refused(code, stderr, "different labs or surface catalogs", CANDIDATE_NAME)
        self.assertFalse(merged.exists())

    def test_shards_of_different_agent_lab_versions_are_refused(self) -> None:
        def older_version(document: dict) -> None:
            document["agent_lab"]["version"] = "0.0.9"

        def other_source(document: dict) -> None:
            document["agent_lab"]["source"] = "sha256:" + "0" * 64

        for name, change in (("older", older_version), ("other-source", other_source)):
            with self.subTest(name):
                code, stderr, _ = self.merge(self.altered_shard(name, change), *self.shards[1:], out=f"merged-{name}")
                self.assert_refused(code, stderr, "different agent-lab versions")

    def test_shards_all_written_by_another_agent_lab_than_the_merging_one_are_refused(self) -> None:
        def another_release(document: dict) -> None:
            document["agent_lab"] = {"version": "0.0.9", "source": "sha256:" + "0" * 64}

        others = [self.altered_shard(f"release-{index}", another_release, source)
                  for index, source in enumerate(self.shards, start=1)]
        code, stderr, merged = self.merge(*others, out="merged-release")
        self.assert_refused(code, stderr, "written by agent-lab 0.0.9", "merge with the agent-lab the shards ran")
        self.assertFalse(merged.exists())

    def test_a_directory_that_is_not_a_shard_is_refused(self) -> None:
        code, stderr, _ = self.merge(self.dir / "whole", *self.shards[1:], out="merged-not-a-shard")
        self.assert_refused(code, stderr, "no tool-shard.json")
        broken = self.dir / "broken"
        broken.mkdir()
        (broken / SHARD_FILE).write_text('{"format": "agent-lab-tool-eval-shard/1", "shard": ', encoding="utf-8")
        code, stderr, _ = self.merge(broken, *self.shards[1:], out="merged-broken")
        self.assert_refused(code, stderr, "not a tool-eval shard file")

    def test_a_shard_whose_cases_are_not_its_own_is_refused(self) -> None:
        def swap_cases(document: dict) -> None:
            other = json.loads((self.shards[1] / SHARD_FILE).read_text(encoding="utf-8"))
            document["cases"], document["results"] = other["cases"], other["results"]

        code, stderr, _ = self.merge(self.altered_shard("swapped", swap_cases), *self.shards[1:], out="merged-swapped")
        self.assert_refused(code, stderr, "its cases are not those shard 1/4 runs")

    def test_malformed_parts_are_refused_without_a_traceback(self) -> None:
        breakages = {
            "results-not-a-list": lambda document: document["results"].update({CANDIDATE_NAME: 3}),
            "grade-not-an-object": lambda document: document["results"][CANDIDATE_NAME][0]["grades"].append(1),
            "count-not-a-number": lambda document: document["results"][CANDIDATE_NAME][0].update(side_effects="2"),
            "expected-not-an-object": lambda document: document["cases"][0].update(expected=[]),
            "shard-not-text": lambda document: document.update(shard=[1, 4]),
            "error-not-an-object": lambda document: document["results"][CANDIDATE_NAME][0]["calls"][0].update(
                view={"ok": False, "error": ["not", "an", "object"]}),
            "surface-name-not-a-name": lambda document: document["lab"]["surfaces"][0].update(name="no spaces allowed"),
            "nested-too-deeply": lambda document: document["results"][CANDIDATE_NAME][0]["calls"][0].update(
                view={"ok": True, "output": json.loads("[" * 900 + "]" * 900)}),
        }
        for name, breakage in breakages.items():
            with self.subTest(name):
                code, stderr, _ = self.merge(self.altered_shard(name, breakage), *self.shards[1:], out=f"merged-{name}")
                self.assertEqual(code, cli.EXIT_BAD_INPUT, stderr)
                self.assertEqual(len(stderr.strip().splitlines()), 1, stderr)
                self.assertTrue("not a tool-eval shard file" in stderr or "cannot be put together" in stderr
                                or "different labs" in stderr, stderr)

    def test_parts_that_agree_on_values_no_run_writes_are_refused_without_a_traceback(self) -> None:
        def bad_surface_name(document: dict) -> None:
            surface = document["lab"]["surfaces"][0]
            document["lab"]["catalogs"]["no spaces allowed"] = document["lab"]["catalogs"].pop(surface["name"])
            document["results"]["no spaces allowed"] = document["results"].pop(surface["name"])
            surface["name"] = "no spaces allowed"

        altered = [self.altered_shard(f"renamed-{number}", bad_surface_name, source=directory)
                   for number, directory in enumerate(self.shards)]
        code, stderr, merged = self.merge(*altered, out="merged-renamed")
        self.assert_refused(code, stderr, "cannot be put together")
        self.assertFalse(merged.exists())

    def test_options_of_a_run_are_refused_with_merge(self) -> None:
        code, _, stderr = run_cli("tool-eval", "--merge", str(self.shards[0]), "--cases", str(SHIPPED_CASES))
        self.assert_refused(code, stderr, "--cases")
        code, _, stderr = run_cli("tool-eval", "--merge", str(self.shards[0]), "--shard", "1/4")
        self.assertEqual(code, cli.EXIT_BAD_INPUT)
        # What chose the shards' tools is theirs too: given to a merge, it was ignored (even a missing file).
        for option, value in (("--policy", "/nonexistent.toml"), ("--lock", "/nonexistent.json"),
                              ("--mcp", "no-such-server")):
            with self.subTest(option=option):
                code, _, stderr = run_cli("tool-eval", "--merge", str(self.shards[0]), option, value)
                self.assert_refused(code, stderr, option)


class ShardOptionTest(unittest.TestCase):
    def test_a_shard_is_i_of_n_counted_from_one(self) -> None:
        self.assertEqual(Shard.parse("2/4"), Shard(2, 4))
        for text in ("0/4", "5/4", "4", "a/b", "-1/4", "1/0", "1/4/2", "", " 1/4", "1/99999999999"):
            with self.subTest(text):
                with self.assertRaises(ShardError):
                    Shard.parse(text)
                code, _, stderr = run_cli("tool-eval", "--shard", text)
                self.assertEqual(code, cli.EXIT_BAD_INPUT, stderr)


class ShardAssignmentTest(unittest.TestCase):
    def test_the_assignment_depends_on_the_case_ids_alone_not_on_file_order(self) -> None:
        lines = SHIPPED_CASES.read_text(encoding="utf-8").splitlines(keepends=True)
        with tempfile.TemporaryDirectory() as temporary:
            forward = Path(temporary) / "forward.jsonl"
            backward = Path(temporary) / "backward.jsonl"
            forward.write_text("".join(lines), encoding="utf-8")
            backward.write_text("".join(reversed(lines)), encoding="utf-8")
            for index in range(1, SHARDS + 1):
                shard = Shard(index, SHARDS)
                picked = [{case.case_id for case in select_cases(load_cases([str(path)], lab=ticket_lab), shard)}
                          for path in (forward, backward)]
                self.assertEqual(picked[0], picked[1])
                self.assertTrue(picked[0])

    def test_the_assignment_does_not_depend_on_the_hash_seed(self) -> None:
        source = ("import json; from agent_lab.lab.shards import shard_assignment; "
                  "print(json.dumps(shard_assignment([f'case-{n}' for n in range(50)], 4), sort_keys=True))")
        answers = set()
        for seed in ("1", "2", "random"):
            done = subprocess.run([sys.executable, "-c", source], cwd=CHECKOUT, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONHASHSEED": seed}, timeout=60, check=True)
            answers.add(done.stdout)
        self.assertEqual(len(answers), 1)
        self.assertEqual(json.loads(answers.pop()), shard_assignment([f"case-{n}" for n in range(50)], 4))

    def test_a_case_keeps_its_shard_when_the_others_are_reordered(self) -> None:
        ids = [f"case-{n}" for n in range(40)]
        self.assertEqual(shard_assignment(ids, 3), shard_assignment(list(reversed(ids)), 3))


if __name__ == "__main__":
    unittest.main()
