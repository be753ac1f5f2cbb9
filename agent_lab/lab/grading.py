"""Grade one surface's replay of a case against the case's expectation for that surface.

Each grade is named after what it checks (`final.error_code`, `call[1].outcome`, `side_effects`,
`secrets_masked`, ...) and carries the expected and the actual value, so a failure report can say
exactly what differed. A case passes on a surface when every grade passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..jsonvalue import json_equal
from .cases import Case
from .pointer import MISSING, resolve_pointer
from .replay import CallRun, SurfaceRun

__all__ = ["Grade", "case_passed", "grade_run", "result_field"]

RESULT_FIELDS = ("outcome", "error_code", "retryable", "next_action", "replayed")


@dataclass(frozen=True)
class Grade:
    """One named comparison of expected and actual."""

    name: str
    expected: Any
    actual: Any
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expected": self.expected, "actual": self.actual, "passed": self.passed}


def case_passed(grades: Sequence[Grade]) -> bool:
    return all(grade.passed for grade in grades)


def grade_run(case: Case, run: SurfaceRun) -> tuple[Grade, ...]:
    """Every grade of `run` against the case's expectation for its surface, in a stable order."""
    expectation = case.expectation(run.surface, run.role)
    grades: list[Grade] = []
    if run.calls:
        grades.extend(_result_grades("final", expectation, run.calls[-1]))
    for index, step_expectation in enumerate(expectation.get("steps", ())):
        grades.extend(_result_grades(f"call[{index}]", step_expectation, run.calls[index]))
    grades.append(_equal("side_effects", expectation["side_effects"], run.side_effects))
    for key, part in (("same_output", "output"), ("same_error", "error")):
        if key in expectation:
            grades.append(_sameness(key, part, expectation[key], run.calls))
    if expectation.get("secrets_masked"):
        leaked = [call.index for call in run.calls if call.leaked_secret]
        actual = "no secret shown" if not leaked else f"a secret shown in call(s) {', '.join(map(str, leaked))}"
        grades.append(Grade("secrets_masked", "no secret shown", actual, not leaked))
    return tuple(grades)


def result_field(view: Mapping[str, Any], name: str) -> Any:
    """One graded field of a model view (error fields are None for a call that did not fail)."""
    error = view.get("error") or {}
    if name == "outcome":
        return view.get("outcome")
    if name == "error_code":
        return error.get("code")
    if name == "replayed":
        return bool(view.get("replayed", False))
    return error.get(name)  # retryable, next_action


def _result_grades(label: str, expectation: Mapping[str, Any], call: CallRun) -> list[Grade]:
    grades = [
        _equal(f"{label}.{name}", expectation[name], result_field(call.view, name))
        for name in RESULT_FIELDS
        if name in expectation
    ]
    for number, check in enumerate(expectation.get("checks", ())):
        grades.append(_check(f"{label}.check[{number}]", check, call.view))
    return grades


def _equal(name: str, expected: Any, actual: Any) -> Grade:
    return Grade(name, expected, actual, json_equal(expected, actual))  # json_equal: True is not 1


def _check(name: str, check: Mapping[str, Any], view: Mapping[str, Any]) -> Grade:
    """Apply one check (`equals`, `length`, `present`, `contains`, `not_contains`) at its pointer."""
    path = check["path"]
    kind = next(key for key in check if key != "path")
    wanted = check[kind]
    value = resolve_pointer(view, path)
    found = value is not MISSING
    label = f"{name} {kind} at {path or '/'}"
    if kind == "present":
        return Grade(label, wanted, found, found == wanted)
    if kind == "equals":
        return Grade(label, wanted, value if found else "(absent)", found and json_equal(value, wanted))
    if kind == "length":
        size = len(value) if found and isinstance(value, (list, dict, str)) else None
        return Grade(label, wanted, size if size is not None else "(no length)", size == wanted)
    expected = f"contains {wanted!r}" if kind == "contains" else f"does not contain {wanted!r}"
    if not found:  # a text check at a path that leads nowhere proves nothing either way
        return Grade(label, expected, "(absent)", False)
    holds = wanted in _text(value)
    return Grade(label, expected, "contains it" if holds else "does not", holds == (kind == "contains"))


def _sameness(name: str, part: str, indexes: Sequence[int], calls: Sequence[CallRun]) -> Grade:
    """Whether the listed calls showed the model the identical output (or error)."""
    values = [json.dumps(calls[index].view.get(part), sort_keys=True) for index in indexes]
    present = all(calls[index].view.get(part) is not None for index in indexes)
    same = present and len(set(values)) == 1
    listed = ", ".join(map(str, indexes))
    actual = f"identical {part}s" if same else (f"a call without {part}" if not present else f"different {part}s")
    return Grade(name, f"identical {part}s of calls {listed}", actual, same)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
