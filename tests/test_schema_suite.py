"""The official JSON Schema Test Suite (draft 2020-12), one unittest per case.

The suite lives outside the repository: $JSON_SCHEMA_TEST_SUITE, or ../shared/json-schema-test-suite
next to the repository root. `http://localhost:1234/...` references are served offline from its
remotes/ folder through `resources=`. Every case runs or is skipped with its own reason.
"""

from __future__ import annotations

import json
import os
import re
import unittest
from pathlib import Path

from agent_lab.schema import SchemaError, Validator

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITE_ROOT = Path(os.environ.get("JSON_SCHEMA_TEST_SUITE") or REPO_ROOT.parent / "shared" / "json-schema-test-suite")
DRAFT_FOLDER = SUITE_ROOT / "tests" / "draft2020-12"
REMOTES_FOLDER = SUITE_ROOT / "remotes"

# Optional files whose cases assert formats: run with format assertion on.
FORMAT_ASSERTION_FILES = {"optional/format-assertion.json"}

# What this validator deliberately does not support, each with the reason; every other case must pass.
UNSUPPORTED_FILES = {
    "optional/dependencies-compatibility.json":
        "the pre-2019 'dependencies' keyword is not part of draft 2020-12 (use dependentRequired/dependentSchemas)",
}
UNSUPPORTED_GROUPS = {
    ("optional/cross-draft.json", "refs to historic drafts are processed as historic drafts"):
        "only draft 2020-12 is implemented; a $ref into a draft 2019-09 document is refused",
}


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

    def __init__(self, relative: str, group: dict, resources: dict) -> None:
        self.relative = relative
        self.group = group
        self.resources = resources
        self.format_assertion = relative.startswith("optional/format/") or relative in FORMAT_ASSERTION_FILES
        self._validator = None
        self._error = None

    def validator(self) -> Validator:
        if self._validator is None and self._error is None:
            try:
                self._validator = Validator(self.group["schema"], resources=self.resources,
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


def _build_test_classes() -> dict:
    classes = {}
    resources = _remote_resources()
    for path in sorted(DRAFT_FOLDER.rglob("*.json")):
        relative = path.relative_to(DRAFT_FOLDER).as_posix()
        methods = {}
        for group_index, group_data in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            group = _SuiteGroup(relative, group_data, resources)
            reason = UNSUPPORTED_FILES.get(relative) or UNSUPPORTED_GROUPS.get((relative, group_data["description"]))
            for case_index, case in enumerate(group_data["tests"]):
                slug = f"{_slug(group_data['description'])}__{_slug(case['description'])}"
                name = f"test_{group_index:02d}_{case_index:02d}_{slug}"
                methods[name] = _make_test(group, case, reason)
        class_name = "Suite_" + _slug(relative.replace(".json", ""))
        classes[class_name] = type(class_name, (unittest.TestCase,), methods)
    return classes


if DRAFT_FOLDER.is_dir():
    globals().update(_build_test_classes())
else:
    class SuiteMissing(unittest.TestCase):
        def test_official_suite_is_available(self):
            self.skipTest(f"JSON Schema Test Suite not found at {SUITE_ROOT} (set JSON_SCHEMA_TEST_SUITE)")


if __name__ == "__main__":
    unittest.main()
