"""A lab's cases as unittest tests, for a team's own test suite (pytest collects them unchanged).

    # tests/test_tool_contracts.py
    from agent_lab.lab import lab_test_case
    from mypackage.lab import lab

    ToolContractTest = lab_test_case(lab, "tests/tool-cases.jsonl")

gives one test per case and candidate surface, named `test_<case_id>__<surface>` (ids with `_` for
`-`), in a class named `<Lab name>LabTest` (or `name=`) of the calling module, whose failure message lists every grade that differed, expected against actual, with the
world's secrets masked, and every effect finding (a tool whose calls changed the world against what it
declares: AL801, AL802). A case that gives a candidate no steps fails as "not run". Baselines are
references and get no tests. Case files are read when the class is made, so a broken file fails the
import with its `FILE:LINE` problems.
"""

from __future__ import annotations

import re
import sys
import unittest
from pathlib import Path
from typing import Any, Callable, Sequence

from ..redaction import SecretMask
from .cases import Case, load_cases
from .definition import Lab, Surface
from .grading import grade_run
from .replay import replay_case

__all__ = ["lab_test_case"]

MAX_SHOWN = 300  # characters of one expected or actual value in a failure message
_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]")


def lab_test_case(lab: Lab, cases: str | Path | Sequence[str | Path] | None = None, *,
                  name: str | None = None) -> type[unittest.TestCase]:
    """A `unittest.TestCase` subclass with one test per case of `cases` (default: `lab.cases`) and
    candidate surface of `lab`. Raises CaseFileError for bad case files, TypeError for a non-Lab."""
    if not isinstance(lab, Lab):
        raise TypeError(f"lab_test_case() needs an agent_lab.lab.Lab, not {type(lab).__name__}")
    paths = [str(cases)] if isinstance(cases, (str, Path)) else [str(path) for path in (cases or lab.cases)]
    if not paths:
        raise ValueError(f"lab {lab.name!r} ships no case files: pass cases=...")
    loaded = load_cases(paths, lab=lab)
    members: dict[str, Any] = {"__doc__": f"The cases of lab {lab.name!r} on its candidate surfaces ({', '.join(paths)})."}
    for case in loaded:
        for surface in lab.candidates:
            method = f"test_{_identifier(case.case_id)}__{_identifier(surface.name)}"
            while method in members:  # two surface names that differ only in punctuation
                method += "_"
            members[method] = _case_test(lab, case, surface)
    class_name = name or f"{_camel(lab.name)}LabTest"
    # The class belongs to the module that made it, as a class statement there would: a test id then
    # reads `tests.test_tool_contracts.RefundsLabTest.test_...` (not agent_lab's module) and reruns
    # that one test when the class is bound to its name.
    members["__module__"] = _caller_module()
    members["__qualname__"] = class_name
    return type(class_name, (unittest.TestCase,), members)


def _caller_module() -> str:
    frame = sys._getframe(2)  # 0: here, 1: lab_test_case, 2: its caller
    return str(frame.f_globals.get("__name__", __name__))


def _case_test(lab: Lab, case: Case, surface: Surface) -> Callable[[unittest.TestCase], None]:
    def test(self: unittest.TestCase) -> None:
        where = f"{case.case_id} ({case.source}) on {surface.name}"
        if case.steps_for(surface.name, surface.role) is None:
            self.fail(f"{where}: not run: the case has no steps for this surface")
        from .tool_eval import quiet_registry_logs

        with quiet_registry_logs():
            run = replay_case(case, surface, lab=lab)
        failed = [grade for grade in grade_run(case, run) if not grade.passed]
        lines = [f"{where}: {len(failed)} grade(s) differ"] if failed else []
        lines += [f"  {grade.name}: expected {_shown(grade.expected, run.secrets)}, "
                  f"actual {_shown(grade.actual, run.secrets)}" for grade in failed]
        if run.effect_findings:  # the gate's failure of its own kind: a tool that did what it declares it won't
            lines.append(f"{where}: {len(run.effect_findings)} tool(s) changed the world against their declaration")
            mask = SecretMask(run.secrets)
            lines += [f"  {finding.rule}: {mask.text(str(finding))}" for finding in run.effect_findings]
        if lines:
            self.fail("\n".join(lines))

    test.__doc__ = f"{case.case_id} on {surface.name}: {' '.join(case.intent.split())}"
    return test


def _shown(value: Any, secrets: frozenset[str]) -> str:
    text = SecretMask(secrets).text(repr(value))  # masked (as repr spells it) before it is cut
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _identifier(text: str) -> str:
    return _NOT_IDENTIFIER.sub("_", text)


def _camel(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", text) if part) or "Lab"
