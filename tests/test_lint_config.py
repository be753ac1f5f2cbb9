"""`[tool.agent-lab.lint]` is read by the labs settings reader on every Python (tomllib on 3.11+, the
small reader on 3.10, which refuses what it does not read with FILE:LINE), and the same table decides
both `agent-lab lint` and the tool-eval gate."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock

from agent_lab.cli import main
from agent_lab.lab import pyproject
from agent_lab.lab.pyproject import ConfigError, read_lint_subset
from agent_lab.lab.settings import lint_config, tool_eval_settings
from agent_lab.lint import LintConfig
from agent_lab.lint.config import TABLE_KINDS

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

REPOSITORY = Path(__file__).resolve().parents[1]

DOCUMENTS = {
    "every key, inline tables": '''
[project]
name = "shop"
description = """[tool.agent-lab.lint]
select = 3"""

[tool.agent-lab]
lab = "shop.lab:lab"

[tool.agent-lab.lint]
select = ["AL", ]  # every rule
ignore = ['AL102', "AL2"]
hosts = ["openai", "anthropic"]
severity = { AL204 = "warning", "AL309" = 'error', AL501 = "off" }
max-tools = { openai = 15, mcp = 40 }
max-catalog-tokens = 8_000
max-schema-depth = 6

[tool.other]
x = 1.5
''',
    "tables as headers, in any order": '''
[tool.agent-lab.lint.severity]
AL204 = "warning"

[tool.agent-lab.lint]
max-catalog-tokens = +9000

[tool.agent-lab.lint.max-tools]
openai = 10
''',
    "one budget for every host, an empty table": '[tool.agent-lab.lint]\nmax-tools = 25\nseverity = {}\n',
    "no lint table": '[tool.agent-lab]\nlab = "a:b"\n',
}

EXPECTED = {
    "every key, inline tables": {
        "select": ["AL"], "ignore": ["AL102", "AL2"], "hosts": ["openai", "anthropic"],
        "severity": {"AL204": "warning", "AL309": "error", "AL501": "off"}, "max-tools": {"openai": 15, "mcp": 40},
        "max-catalog-tokens": 8000, "max-schema-depth": 6},
    "tables as headers, in any order": {"severity": {"AL204": "warning"}, "max-catalog-tokens": 9000,
                                        "max-tools": {"openai": 10}},
    "one budget for every host, an empty table": {"max-tools": 25, "severity": {}},
    "no lint table": {},
}

REFUSED = {
    "[tool.agent-lab.lint]\nmax-catalog-tokens = 8000.5\n":
        "pyproject.toml:2: the value of 'max-catalog-tokens' must be an integer",
    "[tool.agent-lab.lint]\nmax-catalog-tokens = true\n":
        "pyproject.toml:2: the value of 'max-catalog-tokens' must be an integer",
    "[tool.agent-lab.lint]\nmax-tools = 0x10\n": "pyproject.toml:2: the value of 'max-tools' must be an integer",
    '[tool.agent-lab.lint]\nselect = "AL1"\n': "pyproject.toml:2: the value of 'select' must be an array of strings",
    '[tool.agent-lab.lint]\nhosts = ["openai", 3]\n': "pyproject.toml:2: each item of the array must be a string",
    '\n[tool.agent-lab.lint]\nselekt = ["AL1"]\n': "pyproject.toml:3: unknown key 'selekt' in [tool.agent-lab.lint]",
    '[tool.agent-lab.lint]\nseverity.AL204 = "warning"\n': "pyproject.toml:2: dotted key 'severity.AL204'",
    "[tool.agent-lab.lint]\nseverity = { AL204 = 1 }\n": "pyproject.toml:2: the value of severity.AL204 must be a string",
    '[tool.agent-lab.lint]\nmax-tools = { openai = "x" }\n':
        "pyproject.toml:2: the value of max-tools.openai must be an integer",
    "[tool.agent-lab.lint]\nmax-tools = { openai = 1, openai = 2 }\n": "pyproject.toml:2: 'openai' is given twice",
    '[tool.agent-lab.lint]\nseverity = { AL204 = "warning",\n AL309 = "error" }\n':
        "pyproject.toml:2: the inline table of 'severity' must end on its line",
    '[tool.agent-lab.lint]\nselect = ["AL1"]\nselect = ["AL2"]\n': "pyproject.toml:3: 'select' is given twice",
    "[tool.agent-lab.lint]\nmax-tools = { openai = 1 mcp = 2 }\n":
        "pyproject.toml:2: expected ',' or '}' in the inline table of 'max-tools'",
    '[tool.agent-lab.lint]\nseverity = {}\n[tool.agent-lab.lint.severity]\n': "pyproject.toml:3: 'severity' is given twice",
    "[tool.agent-lab.lint.nope]\n": "pyproject.toml:1: unknown key 'nope' in [tool.agent-lab.lint]",
    "[tool.agent-lab.lint.select]\n": "pyproject.toml:1: 'select' in [tool.agent-lab.lint] must be an array of strings, "
                                     "not a table",
    "[tool.agent-lab.lint.severity.deeper]\n": "pyproject.toml:1: [tool.agent-lab.lint.severity.deeper] is not a table",
    '[tool.agent-lab]\nlint = { select = ["AL1"] }\n':
        "pyproject.toml:2: [tool.agent-lab.lint] written as dotted keys or an inline table",
    '[[tool.agent-lab.lint]]\nselect = ["AL1"]\n':
        "pyproject.toml:1: [tool.agent-lab.lint] must be a table, not an array of tables",
}


def as_python_3_10():
    """Make the settings reader take its Python 3.10 path (no tomllib)."""
    return mock.patch.object(pyproject, "sys", types.SimpleNamespace(version_info=(3, 10, 13)))


class SmallLintReaderTest(unittest.TestCase):
    def test_it_reads_every_key_of_the_lint_table(self) -> None:
        for name, text in DOCUMENTS.items():
            with self.subTest(document=name):
                self.assertEqual(read_lint_subset(text, "pyproject.toml", kinds=TABLE_KINDS), EXPECTED[name])

    @unittest.skipIf(tomllib is None, "tomllib arrived in Python 3.11: nothing to compare against")
    def test_it_agrees_with_tomllib_on_every_document_it_accepts(self) -> None:
        for name, text in DOCUMENTS.items():
            with self.subTest(document=name):
                table = tomllib.loads(text).get("tool", {}).get("agent-lab", {}).get("lint", {})
                self.assertEqual(read_lint_subset(text, "pyproject.toml", kinds=TABLE_KINDS), table)

    def test_it_refuses_anything_else_with_the_file_and_line(self) -> None:
        for text, message in REFUSED.items():
            with self.subTest(text=text), self.assertRaises(ConfigError) as caught:
                read_lint_subset(text, "pyproject.toml", kinds=TABLE_KINDS)
            self.assertTrue(str(caught.exception).startswith(message), str(caught.exception))

    def test_the_lint_table_is_read_by_the_same_settings_on_3_10_and_on_3_11(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text(DOCUMENTS["every key, inline tables"], encoding="utf-8")
            with as_python_3_10(), mock.patch.object(pyproject, "read_lint_subset", wraps=read_lint_subset) as small:
                old = lint_config(Path(directory))
            small.assert_called_once()
            new = lint_config(Path(directory))
        self.assertEqual(old, new)
        self.assertEqual(old.ignore, ("AL102", "AL2"))
        self.assertEqual(old.options["max_tools"]["openai"], 15)
        self.assertEqual(old.options["max_catalog_tokens"], 8000)
        self.assertEqual(old.severity, {"AL204": "warning", "AL309": "error", "AL501": "off"})

    def test_no_file_or_no_table_is_the_default_configuration(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            self.assertEqual(lint_config(Path(directory)), LintConfig())
            Path(directory, "pyproject.toml").write_text(DOCUMENTS["no lint table"], encoding="utf-8")
            self.assertEqual(lint_config(Path(directory)), LintConfig())


class OneTableForLintAndTheGateTest(unittest.TestCase):
    def run_in(self, directory: str, *arguments: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _chdir(directory):
            status = main(list(arguments))
        return status, out.getvalue(), err.getvalue()

    def test_a_bad_table_is_one_line_and_exit_2_for_lint_catalog_cost_and_tool_eval(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text("[tool.agent-lab.lint]\nmax-catalog-tokens = 1.5\n",
                                                         encoding="utf-8")
            for arguments in (("lint",), ("tool-eval", "--out", str(Path(directory, "r")))):
                with self.subTest(arguments=arguments), as_python_3_10():
                    status, out, err = self.run_in(directory, *arguments)
                    self.assertEqual((status, out), (2, ""))
                    self.assertTrue(err.startswith("pyproject.toml:2: the value of 'max-catalog-tokens' must be an "
                                                   "integer"), err)
                    self.assertEqual(len(err.strip().splitlines()), 1)

    def test_tool_eval_settings_carry_the_projects_lint_configuration(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text('[tool.agent-lab.lint]\nseverity = { AL102 = "error" }\n',
                                                         encoding="utf-8")
            settings = tool_eval_settings(directory=Path(directory))
        self.assertEqual(settings.lint, LintConfig(severity={"AL102": "error"}))

    def test_the_gate_fails_on_what_the_projects_table_makes_an_error_exactly_as_lint_does(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            Path(directory, "pyproject.toml").write_text('[tool.agent-lab.lint]\nseverity = { AL102 = "error" }\n',
                                                         encoding="utf-8")
            environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
            gate = subprocess.run([sys.executable, "-m", "agent_lab", "tool-eval", "--out", "reports"], cwd=directory,
                                  env=environment, capture_output=True, text=True, timeout=300)
            lint = subprocess.run([sys.executable, "-m", "agent_lab", "lint"], cwd=directory, env=environment,
                                  capture_output=True, text=True, timeout=120)
        self.assertEqual((gate.returncode, lint.returncode), (1, 1), gate.stderr + lint.stderr)
        self.assertIn("[ ] typed-registry-v2 has no error-level lint finding: slow_ticket_lookup: AL102", gate.stdout)
        self.assertIn("AL102 error [typed-registry-v2] slow_ticket_lookup", lint.stdout)


@contextlib.contextmanager
def _chdir(directory: str):
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


if __name__ == "__main__":
    unittest.main()
