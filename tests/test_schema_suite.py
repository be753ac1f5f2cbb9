"""The official JSON Schema Test Suite, every dialect we implement, one unittest per case.

The suite lives outside the repository: $JSON_SCHEMA_TEST_SUITE, or ../shared/json-schema-test-suite
next to the repository root. Each folder (draft2020-12, draft2019-09, draft7, draft6, draft4) runs with
its dialect as `Validator(dialect=...)`, so schemas without `$schema` are read in that dialect, and
`http://localhost:1234/...` references are served offline from its remotes/ folder through
`resources=`. The optional folders run too (format assertion on for the format files). Every case runs
or is skipped with its own reason.
"""

from __future__ import annotations

import json
import os
import re
import unittest
from pathlib import Path

from agent_lab.schema import DRAFT_04, DRAFT_06, DRAFT_07, DRAFT_2019_09, DRAFT_2020_12, SchemaError, Validator

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITE_ROOT = Path(os.environ.get("JSON_SCHEMA_TEST_SUITE") or REPO_ROOT.parent / "shared" / "json-schema-test-suite")
REMOTES_FOLDER = SUITE_ROOT / "remotes"

# Suite folder -> the dialect its schemas are written in.
DIALECT_FOLDERS = {
    "draft2020-12": DRAFT_2020_12,
    "draft2019-09": DRAFT_2019_09,
    "draft7": DRAFT_07,
    "draft6": DRAFT_06,
    "draft4": DRAFT_04,
}

# Optional files whose cases assert formats: run with format assertion on.
FORMAT_ASSERTION_FILES = {"optional/format-assertion.json"}

# What this validator deliberately does not do, each with the reason; every other case must pass.
UNSUPPORTED_FILES = {
    ("draft7", "optional/content.json"):
        "contentMediaType and contentEncoding are annotations here (draft-07 lets a validator check "
        "them or not); decoding base64 or parsing embedded JSON is left to the tool",
}
UNSUPPORTED_GROUPS: dict = {}


def _remote_resources() -> dict:
    resources = {}
    for path in sorted(REMOTES_FOLDER.rglob("*.json")):
        uri = "http://localhost:1234/" + path.relative_to(REMOTES_FOLDER).as_posix()
        resources[uri] = json.loads(path.read_text(encoding="utf-8"))
    return resources


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()[:60]


class _SuiteGroup:
    """One schema of a suite file; its Validator is compiled once, on first use."""

    def __init__(self, dialect: str, relative: str, group: dict, resources: dict) -> None:
        self.dialect = dialect
        self.relative = relative
        self.group = group
        self.resources = resources
        self.format_assertion = relative.startswith("optional/format/") or relative in FORMAT_ASSERTION_FILES
        self._validator = None
        self._error = None

    def validator(self) -> Validator:
        if self._validator is None and self._error is None:
            try:
                self._validator = Validator(self.group["schema"], dialect=self.dialect, resources=self.resources,
                                            format_assertion=self.format_assertion)
            except SchemaError as error:
                self._error = error
        if self._error is not None:
            raise self._error
        return self._validator


def _make_test(group: _SuiteGroup, case: dict, skip_reason):
    def test(self):
        if skip_reason:
            self.skipTest(skip_reason)
        validator = group.validator()
        verdict = validator.is_valid(case["data"])
        violations = validator.errors(case["data"])
        self.assertEqual(verdict, case["valid"], f"{group.group['description']} / {case['description']}")
        self.assertEqual(not violations, case["valid"], "errors() must agree with is_valid()")

    return test


def suite_files(folder: str):
    """(relative path, parsed file) for every test file of one dialect's folder, in a stable order."""
    root = SUITE_ROOT / "tests" / folder
    for path in sorted(root.rglob("*.json")):
        yield path.relative_to(root).as_posix(), json.loads(path.read_text(encoding="utf-8"))


def skip_reason(folder: str, relative: str, group_description: str):
    return UNSUPPORTED_FILES.get((folder, relative)) or UNSUPPORTED_GROUPS.get((folder, relative, group_description))


def _build_test_classes() -> dict:
    classes = {}
    resources = _remote_resources()
    for folder, dialect in DIALECT_FOLDERS.items():
        for relative, groups in suite_files(folder):
            methods = {}
            for group_index, group_data in enumerate(groups):
                group = _SuiteGroup(dialect, relative, group_data, resources)
                reason = skip_reason(folder, relative, group_data["description"])
                for case_index, case in enumerate(group_data["tests"]):
                    slug = f"{_slug(group_data['description'])}__{_slug(case['description'])}"
                    name = f"test_{group_index:02d}_{case_index:02d}_{slug}"
                    methods[name] = _make_test(group, case, reason)
            class_name = f"Suite_{_slug(folder)}_{_slug(relative.replace('.json', ''))}"
            classes[class_name] = type(class_name, (unittest.TestCase,), methods)
    return classes


if all((SUITE_ROOT / "tests" / folder).is_dir() for folder in DIALECT_FOLDERS):
    globals().update(_build_test_classes())
else:
    class SuiteMissing(unittest.TestCase):
        def test_official_suite_is_available(self):
            self.skipTest(f"JSON Schema Test Suite not found at {SUITE_ROOT} (set JSON_SCHEMA_TEST_SUITE)")


if __name__ == "__main__":
    unittest.main()
