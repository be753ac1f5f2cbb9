"""Task files: one JSON object per line, checked against `task_schema.json` with our own validator.

A task says what the user asks (`messages`, sent one at a time: the next after the model answers
without a tool call), who asks (`actor`), how approvals are given (`approvals`), how many model turns
it may take (`step_limit`), what a trial may spend (`budget`: model turns, tool calls, tokens, latency)
and what success means: on each surface it runs on, calls that must happen and calls that must not,
the shape of the trajectory (`trajectory`: these calls strictly in order, in any order, among others,
or nothing but them), how often a tool may be called (`max_calls`), arguments that must stay absent
(`absent_arguments`), errors injected into chosen calls, calls a person approves; for every surface,
effects the world must end with, "minefield" effects that must never happen, whether the right answer
is no tool call at all (`abstain`) and what the final answer may say.

Each task carries the SHA-256 of its canonical JSON (`digest`), and a task set one over all of them
(`tasks_digest`): a baseline verdict compares two runs only when they ran the same tasks.

Anything wrong with a file is one `TaskFileError` listing every problem as `FILE:LINE: message`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..errors import CATALOGUE
from ..fingerprint import canonical_json
from ..lab.jsonl import LineProblem, NotPlainJSON, lone_surrogate_at, read_lines, read_plain_json
from ..policy import Actor
from ..schema import MAX_INSTANCE_DEPTH, SchemaError, Validator

__all__ = [
    "BUDGETS",
    "DEFAULT_STEP_LIMIT",
    "SPLITS",
    "TRAJECTORY_MATCHES",
    "Task",
    "TaskFileError",
    "TaskProblem",
    "load_tasks",
    "task_schema",
    "tasks_digest",
]

TASK_SCHEMA_PATH = Path(__file__).with_name("task_schema.json")
SPLITS = ("dev", "heldout")
BUDGETS = ("model_turns", "tool_calls", "tokens", "latency_ms")
TRAJECTORY_MATCHES = ("strict", "unordered", "subset", "superset")
DEFAULT_STEP_LIMIT = 8
MAX_TASK_FILE_BYTES = 16 * 1024 * 1024
MAX_VIOLATIONS_PER_LINE = 5
MAX_PROBLEMS = 100


TaskProblem = LineProblem
"""One thing wrong with a task file, at a line (1-based)."""


class TaskFileError(ValueError):
    """Every problem found in the task files; `str()` is one `FILE:LINE: message` per line."""

    def __init__(self, problems: Iterable[TaskProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


@dataclass(frozen=True)
class Task:
    """One validated task (the JSON of its line, with defaults filled in)."""

    task_id: str
    split: str
    intent: str
    messages: tuple[str, ...]
    actor: Mapping[str, Any]
    surfaces: Mapping[str, Mapping[str, Any]]
    step_limit: int = DEFAULT_STEP_LIMIT
    approvals: str = "never"
    abstain: bool = False
    effects: tuple[Mapping[str, Any], ...] = ()
    minefields: tuple[Mapping[str, Any], ...] = ()
    answer: Mapping[str, Any] = field(default_factory=dict)
    system: Optional[str] = None
    tags: tuple[str, ...] = ()
    budget: Mapping[str, Any] = field(default_factory=dict)
    digest: str = ""  # SHA-256 of the task's canonical JSON: equal digests, the same task
    source_path: str = ""
    source_line: int = 0

    @property
    def source(self) -> str:
        return f"{self.source_path}:{self.source_line}"

    def actor_for_run(self) -> Actor:
        return Actor(id=self.actor["id"], tenant=self.actor["tenant"], permissions=frozenset(self.actor["permissions"]))

    def on(self, surface: str) -> Optional[Mapping[str, Any]]:
        """The task's expectations on `surface`, or None when the task does not run there."""
        return self.surfaces.get(surface)


def task_schema() -> dict[str, Any]:
    """The JSON Schema every task line must satisfy (a fresh copy)."""
    return json.loads(TASK_SCHEMA_PATH.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def _task_validator() -> Validator:
    return Validator(task_schema())


def tasks_digest(tasks: Sequence[Task]) -> str:
    """One SHA-256 for a task set: over each task's id and digest, in id order (so the files' order, their
    paths and their formatting do not count; what the tasks say does)."""
    return digest_of_task_digests({task.task_id: task.digest for task in tasks})


def digest_of_task_digests(digests: Mapping[str, str]) -> str:
    """`tasks_digest` from task ids and their digests (as a report lists them)."""
    return hashlib.sha256(canonical_json(dict(digests)).encode("utf-8")).hexdigest()


def load_tasks(paths: Sequence[str], *, surfaces: Optional[Sequence[str]] = None) -> list[Task]:
    """Every task of `paths`, in order. With `surfaces` (the lab's surface names), a task that names
    another surface is a problem too. Raises `TaskFileError` listing all problems."""
    tasks: list[Task] = []
    problems: list[TaskProblem] = []
    first_seen: dict[str, str] = {}
    for path in paths:
        for number, text in read_lines(path, kind="task", max_bytes=MAX_TASK_FILE_BYTES, problems=problems):
            if len(problems) >= MAX_PROBLEMS:
                problems.append(TaskProblem(path, number, f"stopped reading after {MAX_PROBLEMS} problems"))
                raise TaskFileError(problems)
            task = _parse_task(path, number, text, problems, surfaces)
            if task is None:
                continue
            if task.task_id in first_seen:
                problems.append(TaskProblem(path, number, f"duplicate task_id {task.task_id!r} (first at "
                                                          f"{first_seen[task.task_id]})"))
                continue
            first_seen[task.task_id] = task.source
            tasks.append(task)
    if not problems and not tasks:
        problems.append(TaskProblem(paths[0] if paths else "<no task file>", 1, "no tasks found"))
    if problems:
        raise TaskFileError(problems)
    return tasks


def _parse_task(path: str, number: int, text: str, problems: list[TaskProblem],
                surfaces: Optional[Sequence[str]]) -> Optional[Task]:
    def report(message: str) -> None:
        problems.append(TaskProblem(path, number, message))

    try:
        data = read_plain_json(text, max_depth=MAX_INSTANCE_DEPTH, kind="tasks")
    except json.JSONDecodeError as error:
        report(f"broken JSON at column {error.colno}: {error.msg}")
        return None
    except NotPlainJSON as error:
        report(str(error))
        return None
    violations = _task_validator().errors(data, limit=MAX_VIOLATIONS_PER_LINE)
    if violations:
        for violation in violations:
            report(violation.message)
        return None
    surrogate_at = lone_surrogate_at(data)  # after validation: the nesting is bounded
    if surrogate_at is not None:
        report(f"'{surrogate_at[1:]}' holds a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text")
        return None
    task = Task(
        task_id=data["task_id"], split=data["split"], intent=data["intent"], messages=tuple(data["messages"]),
        actor=data["actor"], surfaces=data["surfaces"], step_limit=data.get("step_limit", DEFAULT_STEP_LIMIT),
        approvals=data.get("approvals", "never"), abstain=data.get("abstain", False),
        effects=tuple(data.get("effects", ())), minefields=tuple(data.get("minefields", ())),
        answer=data.get("answer", {}), system=data.get("system"), tags=tuple(data.get("tags", ())),
        budget=data.get("budget", {}), digest=hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest(),
        source_path=path, source_line=number,
    )
    for message in _consistency_problems(task, surfaces):
        report(message)
    return task


def _consistency_problems(task: Task, surfaces: Optional[Sequence[str]]) -> list[str]:
    """What the schema cannot say: names exist, schemas compile, and every task can fail."""
    found: list[str] = []
    for name, expectations in task.surfaces.items():
        where = f"surfaces/{name}"
        if surfaces is not None and name not in surfaces:
            found.append(f"'{where}' names a surface the lab does not have (it has: {', '.join(surfaces)})")
        if task.abstain and expectations.get("must_call"):
            found.append(f"'{where}/must_call' lists calls, but the task says the right answer is to abstain")
        if expectations.get("approve") and task.approvals != "listed":
            found.append(f"'{where}/approve' lists calls, but approvals is {task.approvals!r} (use \"listed\")")
        for index, injection in enumerate(expectations.get("inject", ())):
            if injection["error"] not in CATALOGUE:
                found.append(f"'{where}/inject/{index}/error' is not an error code of the catalogue")
        for key in ("must_call", "must_not_call", "approve"):
            for index, match in enumerate(expectations.get(key, ())):
                found += _schema_problems(f"{where}/{key}/{index}/arguments", match.get("arguments", {}))
        found += _trajectory_problems(task, where, expectations.get("trajectory"))
        if not (task.abstain or expectations.get("must_call") or expectations.get("must_not_call") or task.effects
                or task.minefields or task.answer.get("contains") or task.answer.get("not_contains")
                or task.answer.get("no_secrets") or "trajectory" in expectations or expectations.get("max_calls")
                or expectations.get("absent_arguments") or task.budget):
            found.append(f"'{where}' says nothing that could fail: add must_call, must_not_call, trajectory, "
                         "max_calls, absent_arguments, effects, minefields, abstain, answer checks or a budget")
    if task.approvals == "listed" and not any(e.get("approve") for e in task.surfaces.values()):
        found.append("'approvals' is \"listed\" but no surface lists a call to approve")
    if task.budget.get("model_turns", 0) >= task.step_limit:
        found.append(f"'budget/model_turns' is {task.budget['model_turns']}, but the step limit ({task.step_limit}) "
                     "stops a trial first: the budget could never be exceeded (lower it, or raise step_limit)")
    for index, expected in enumerate(task.effects):
        found += _schema_problems(f"effects/{index}/match", expected["match"])
    for index, minefield in enumerate(task.minefields):
        found += _schema_problems(f"minefields/{index}", minefield)
    return found


def _trajectory_problems(task: Task, where: str, trajectory: Optional[Mapping[str, Any]]) -> list[str]:
    if trajectory is None:
        return []
    found = []
    for index, match in enumerate(trajectory["calls"]):
        found += _schema_problems(f"{where}/trajectory/calls/{index}/arguments", match.get("arguments", {}))
    if task.abstain and trajectory["calls"] and trajectory["match"] != "superset":
        found.append(f"'{where}/trajectory' requires calls ({trajectory['match']}), but the task says the right "
                     "answer is to abstain")
    return found


def _schema_problems(where: str, match: Mapping[str, Any]) -> list[str]:
    found = []
    for pointer, constraint in match.items():
        if "schema" in constraint:
            try:
                Validator(constraint["schema"])
            except SchemaError as error:
                found.append(f"'{where}/{pointer.replace('~', '~0').replace('/', '~1')}/schema' is not a valid "
                             f"JSON Schema: {error}")
    return found
