"""Case files: one JSON object per line, checked against `case_schema.json` with our own validator.

A case says who calls (actor), what each strategy proposes (`calls.baseline`, `calls.candidate`) and
what a safe runtime answers (`expected`). Anything wrong with a file is reported as `FILE:LINE: what is
wrong` through one `CaseFileError` holding every problem found, never as a traceback, so a CI log points
straight at the line to fix.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..policy import Actor
from ..schema import Validator

__all__ = ["STRATEGIES", "Case", "CaseFileError", "CaseProblem", "case_schema", "load_cases"]

STRATEGIES = ("baseline", "candidate")
CASE_SCHEMA_PATH = Path(__file__).with_name("case_schema.json")
MAX_VIOLATIONS_PER_LINE = 5  # a oneOf can explain itself many times over; the first few locate the fault


@dataclass(frozen=True)
class CaseProblem:
    """One thing wrong with a case file, at a line (1-based)."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class CaseFileError(ValueError):
    """Every problem found in the case files; `str()` is one `FILE:LINE: message` per line."""

    def __init__(self, problems: Iterable[CaseProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


@dataclass(frozen=True)
class Case:
    """One validated case. `expected` is the raw block; `expectation(strategy)` merges the overrides."""

    case_id: str
    intent: str
    actor: Mapping[str, Any]
    calls: Mapping[str, tuple[Mapping[str, Any], ...]]
    expected: Mapping[str, Any]
    backend: Mapping[str, Any] = field(default_factory=dict)
    receipts: str = "memory"
    tags: tuple[str, ...] = ()
    source_path: str = ""  # the case file as named on the command line
    source_line: int = 0

    @property
    def source(self) -> str:
        """Where the case is, as "FILE:LINE" for messages."""
        return f"{self.source_path}:{self.source_line}"

    def expectation(self, strategy: str) -> dict[str, Any]:
        """The shared expectation with the strategy's own block laid over it, key by key."""
        merged = {key: value for key, value in self.expected.items() if key not in STRATEGIES}
        merged.update(self.expected.get(strategy) or {})
        return merged

    def actor_for_run(self) -> Actor:
        return Actor(id=self.actor["id"], tenant=self.actor["tenant"], permissions=frozenset(self.actor["permissions"]))

    def call_count(self, strategy: str) -> int:
        return sum(1 for step in self.calls[strategy] if "tool" in step)


@functools.lru_cache(maxsize=1)
def _case_validator() -> Validator:
    return Validator(case_schema())


def case_schema() -> dict[str, Any]:
    """The JSON Schema every case line must satisfy (a fresh copy)."""
    return json.loads(CASE_SCHEMA_PATH.read_text(encoding="utf-8"))


def load_cases(paths: Sequence[str]) -> list[Case]:
    """Read every case of `paths`, in order; raise `CaseFileError` listing all problems if any."""
    cases: list[Case] = []
    problems: list[CaseProblem] = []
    first_seen: dict[str, str] = {}
    for path in paths:
        for line_number, text in _lines(path, problems):
            case = _parse_case(path, line_number, text, problems)
            if case is None:
                continue
            if case.case_id in first_seen:
                problems.append(CaseProblem(path, line_number,
                                            f"duplicate case_id {case.case_id!r} (first at {first_seen[case.case_id]})"))
                continue
            first_seen[case.case_id] = case.source
            cases.append(case)
    if not problems and not cases:
        problems.append(CaseProblem(paths[0] if paths else "<no case file>", 1, "no cases found"))
    if problems:
        raise CaseFileError(problems)
    return cases


def _lines(path: str, problems: list[CaseProblem]) -> list[tuple[int, str]]:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        problems.append(CaseProblem(path, 1, "no such case file"))
        return []
    except OSError as exc:
        problems.append(CaseProblem(path, 1, f"cannot read the case file ({exc.strerror or type(exc).__name__})"))
        return []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problems.append(CaseProblem(path, line, "the case file is not UTF-8 text"))
        return []
    return [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _parse_case(path: str, line_number: int, text: str, problems: list[CaseProblem]) -> Case | None:
    def report(message: str) -> None:
        problems.append(CaseProblem(path, line_number, message))

    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicate_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        report(f"broken JSON at column {exc.colno}: {exc.msg}")
        return None
    except _NotPlainJSON as exc:
        report(str(exc))
        return None
    violations = _case_validator().errors(data)
    if violations:
        for violation in violations[:MAX_VIOLATIONS_PER_LINE]:
            report(violation.message)  # names the field by its path, never quotes its value
        return None
    case = _build_case(data, path, line_number)
    for message in _consistency_problems(case):
        report(message)
    return case


class _NotPlainJSON(ValueError):
    pass


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _NotPlainJSON(f"duplicate key {key!r} in one object")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise _NotPlainJSON(f"{name} is not JSON")


def _build_case(data: Mapping[str, Any], path: str, line_number: int) -> Case:
    return Case(
        case_id=data["case_id"],
        intent=data["intent"],
        actor=data["actor"],
        calls={strategy: tuple(data["calls"][strategy]) for strategy in STRATEGIES},
        expected=data["expected"],
        backend=data.get("backend", {}),
        receipts=data.get("receipts", "memory"),
        tags=tuple(data.get("tags", ())),
        source_path=path,
        source_line=line_number,
    )


def _consistency_problems(case: Case) -> list[str]:
    """What the schema cannot say: expectations must refer to calls that exist."""
    found = []
    for strategy in STRATEGIES:
        calls = case.call_count(strategy)
        expectation = case.expectation(strategy)
        if calls == 0:
            found.append(f"'calls/{strategy}' proposes no call (only markers)")
        described = len(expectation.get("steps", ()))
        if described > calls:
            found.append(f"'expected/steps' describes {described} calls but {strategy} proposes {calls}")
        for key in ("same_output", "same_error"):
            beyond = [index for index in expectation.get(key, ()) if index >= calls]
            if beyond:
                found.append(f"'expected/{key}' names call {beyond[0]} but {strategy} proposes {calls} call(s)")
    return found
