"""`[tool.agent-lab]` reads the same on every Python: tomllib on 3.11+, a small strict reader on 3.10."""

from __future__ import annotations

import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock

from agent_lab.lab import pyproject
from agent_lab.lab.pyproject import ConfigError, read_agent_lab_table, read_table_subset

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

DOCUMENTS = {
    "a project with the table between others": '''
[build-system]
requires = ["setuptools>=61"]  # a comment with [tool.agent-lab] in it
build-backend = "setuptools.build_meta"

[project]
name = "shop"
description = """A multi-line string that looks like a table:
[tool.agent-lab]
lab = "not this one"
"""
dependencies = [
  "agent-lab",
  ['nested', "arrays"],
]
released = 1979-05-27 07:32:00Z
point = {x = 1, y = "]", z = [1, 2]}

[tool.agent-lab]
lab = "shop.lab:lab"   # the lab
cases = [
  "tests/cases.jsonl",  # first
  'tests\\literal.jsonl',
]
out = "r\\u00e9ports\\tx"
junit = 'ci/junit.xml'
jobs = 4

[tool.agent-lab.lint]
select = ["naming"]
level = 3

[[tool.other]]
x = 1
''',
    "a quoted table name": '[tool."agent-lab"]\nlab = "a:b"\n',
    "spaces around the dots": "[ tool . agent-lab ]\ncases = []\n",
    "no table at all": 'title = "x"\n[tool.black]\nline-length = 100\n',
    "an empty document": "",
    "windows line endings": '[tool.agent-lab]\r\nlab = "a:b"\r\n',
}

REFUSED = {
    '[tool.agent-lab]\nlab = 4\n': "pyproject.toml:2: the value of 'lab' must be a string",
    '[tool.agent-lab]\njobs = "4"\n': "pyproject.toml:2: the value of 'jobs' must be an integer",
    '[tool]\nagent-lab = {lab = "x:y"}\n': "pyproject.toml:2: [tool.agent-lab] written as dotted keys or an inline table",
    'tool.agent-lab.lab = "x:y"\n': "pyproject.toml:1: [tool.agent-lab] written as dotted keys",
    '[tool.agent-lab]\nlab = """x:y"""\n': "pyproject.toml:2: the value of 'lab' is a multi-line string",
    '[[tool.agent-lab]]\nlab = "x:y"\n': "pyproject.toml:1: [tool.agent-lab] must be a table, not an array of tables",
    '[tool.agent-lab]\nlab = "a"\n[tool.agent-lab]\ncases = "b"\n': "pyproject.toml:3: [tool.agent-lab] is defined twice",
    '[tool.agent-lab]\nlab = "a"\nlab = "b"\n': "pyproject.toml:3: 'lab' is given twice",
    '[tool.agent-lab]\nlab = "x:y" trailing\n': "pyproject.toml:2: unexpected text after a value",
    '[tool.agent-lab]\nlab = "unterminated\n': "pyproject.toml:2: the value of 'lab' is a string that does not end",
    '[tool.agent-lab]\nlab = "\\q"\n': "pyproject.toml:2: an unknown escape \\q",
    '[tool.agent-lab]\ncases = ["a", 3]\n': "pyproject.toml:2: each item of the array must be a string",
}


class SmallReaderTest(unittest.TestCase):
    def test_it_reads_the_table_tomllib_reads_sub_tables_aside(self) -> None:
        expected = {
            "a project with the table between others": {
                "lab": "shop.lab:lab", "cases": ["tests/cases.jsonl", "tests\\literal.jsonl"],
                "out": "r\u00e9ports\tx", "junit": "ci/junit.xml", "jobs": 4},
            "a quoted table name": {"lab": "a:b"},
            "spaces around the dots": {"cases": []},
            "no table at all": {},
            "an empty document": {},
            "windows line endings": {"lab": "a:b"},
        }
        for name, text in DOCUMENTS.items():
            with self.subTest(document=name):
                self.assertEqual(read_table_subset(text, "pyproject.toml"), expected[name])

    @unittest.skipIf(tomllib is None, "tomllib arrived in Python 3.11: nothing to compare against")
    def test_it_agrees_with_tomllib_on_every_document_it_accepts(self) -> None:
        for name, text in DOCUMENTS.items():
            with self.subTest(document=name):
                table = tomllib.loads(text).get("tool", {}).get("agent-lab", {})
                scalars = {key: value for key, value in table.items() if not isinstance(value, dict)}
                self.assertEqual(read_table_subset(text, "pyproject.toml"), scalars)

    def test_it_refuses_what_it_does_not_read_with_the_line_and_a_way_out(self) -> None:
        for text, message in REFUSED.items():
            with self.subTest(text=text), self.assertRaises(ConfigError) as caught:
                read_table_subset(text, "pyproject.toml")
            self.assertTrue(str(caught.exception).startswith(message), str(caught.exception))

    def test_python_3_10_reads_the_file_with_the_small_reader(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pyproject.toml"
            path.write_text(DOCUMENTS["a project with the table between others"], encoding="utf-8")
            with mock.patch.object(pyproject, "sys", types.SimpleNamespace(version_info=(3, 10, 13))), \
                    mock.patch.object(pyproject, "read_table_subset", wraps=read_table_subset) as small:
                table = read_agent_lab_table(path, where="pyproject.toml")
            small.assert_called_once()
        self.assertEqual(table["lab"], "shop.lab:lab")

    def test_a_document_nested_too_deeply_for_tomllib_is_one_line_whichever_table_holds_it(self) -> None:
        # tomllib reads arrays by recursion: 500 nested ones (in any table) raised a RecursionError.
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pyproject.toml"
            path.write_text("[other]\nx = " + "[" * 1000 + "]" * 1000 + "\n", encoding="utf-8")
            with self.assertRaisesRegex(ConfigError, "pyproject.toml: not valid TOML \\(nested too deeply"):
                read_agent_lab_table(path, where="pyproject.toml")

    def test_a_missing_file_is_no_table(self) -> None:
        self.assertEqual(read_agent_lab_table(Path(tempfile.gettempdir()) / "no-such-dir" / "pyproject.toml"), {})


if __name__ == "__main__":
    unittest.main()
