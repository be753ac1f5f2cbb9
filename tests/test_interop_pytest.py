"""pytest collects a lab's `lab_test_case` class unchanged: one test per case and candidate surface.

Skipped, with the reason, when pytest is not importable; .ci/run installs it in a throwaway venv so CI
always runs this.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import pytest  # noqa: F401

    PYTEST_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    PYTEST_MISSING = f"pytest is not importable ({exc}); pip install pytest"

REPO = Path(__file__).resolve().parent.parent
TEST_MODULE = f"""
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
from agent_lab.lab import lab_test_case
from labs.files_lab import lab

FilesContractTest = lab_test_case(lab, {str(REPO / "tests" / "labs" / "files-cases.jsonl")!r})
"""


@unittest.skipIf(PYTEST_MISSING is not None, PYTEST_MISSING or "")
class PytestCollectsLabTestsTest(unittest.TestCase):
    def test_pytest_runs_one_passing_test_per_case_and_candidate(self) -> None:
        cases = (REPO / "tests" / "labs" / "files-cases.jsonl").read_text(encoding="utf-8").splitlines()
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "test_files_contracts.py").write_text(TEST_MODULE, encoding="utf-8")
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", tmp,
                                   "test_files_contracts.py"], cwd=tmp, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "PYTHONPATH": str(REPO)})
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn(f"{2 * len(cases)} passed", done.stdout)


if __name__ == "__main__":
    unittest.main()
