"""The README cannot rot: its examples run, its case example loads, and it names what the lab writes."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from agent_lab.lab.cases import load_cases
from agent_lab.lab.reports import REPORT_FILES

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
EXAMPLE = re.compile(r"<!-- example -->\s*```python\n(.*?)```", re.DOTALL)
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
        [example] = [block for language, block in FENCE.findall(README) if language == "json"]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "example.jsonl"
            path.write_text(example, encoding="utf-8")
            [case] = load_cases([str(path)])
        self.assertEqual(case.case_id, "write-needs-approval")

    def test_every_report_file_and_exit_code_is_documented(self) -> None:
        for name in REPORT_FILES:
            self.assertIn(f"`{name}`", README)
        for code in (0, 1, 2):
            self.assertRegex(README, rf"\n\| {code} \| ")


if __name__ == "__main__":
    unittest.main()
