"""A model-eval run as its reports tell it: what a baseline verdict compares.

A verdict compares two runs through the same files (`model-eval.json` and `model-eval-runs.jsonl`), the
earlier run's from its directory and this run's as they are about to be written, so both sides went
through the same rendering and masking: a masked argument is `[redacted]` on both sides, never a
difference. Everything read is checked (strict JSON, a bounded read, the shape a verdict needs, trial
counts that agree between the two files); the first problem is one `BaselineError` line naming the file
(and line), never a traceback. A report written before runs carried their identity is refused with a
message that says to run the baseline again.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from ..lab.jsonl import BYTE_ORDER_MARK, LineProblem, NotPlainJSON, read_lines, read_plain_json
from ..lab.reports import display_path
from ..schema import MAX_INSTANCE_DEPTH, Validator
from .tasks import digest_of_task_digests

__all__ = ["BaselineError", "RunReports", "TrialLine", "load_run"]

REPORT_NAME = "model-eval.json"
RUNS_NAME = "model-eval-runs.jsonl"
MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_RUNS_BYTES = 256 * 1024 * 1024

_HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_COUNT = {"type": "integer", "minimum": 0}
_REPORT_SCHEMA = {
    "type": "object",
    "required": ["identity", "tasks", "surfaces"],
    "properties": {
        "surfaces": {"type": "array", "items": {
            "type": "object", "required": ["name", "baseline"],
            "properties": {"name": {"type": "string"}, "baseline": {"type": "boolean"}},
        }},
        "identity": {
            "type": "object",
            "required": ["lab", "agent_lab_version", "model", "tasks_sha256", "surfaces", "split", "repeats", "mode"],
            "properties": {
                "lab": {"type": "string"},
                "agent_lab_version": {"type": "string"},
                "model": {
                    "type": "object",
                    "required": ["spec", "reported"],
                    "properties": {"spec": {"type": "string"},
                                   "reported": {"type": "array", "items": {"type": "string"}}},
                },
                "tasks_sha256": _HEX64,
                "surfaces": {"type": "object", "additionalProperties": {
                    "type": "object",
                    "required": ["catalog_sha256", "idempotency_keys"],
                    "properties": {"catalog_sha256": _HEX64,
                                   "idempotency_keys": {"type": "object",
                                                        "additionalProperties": {"type": "string", "pattern": "^/"}}},
                }},
                "split": {"type": "string"},
                "repeats": {"type": "integer", "minimum": 1},
                "mode": {"type": "string"},
            },
        },
        "tasks": {"type": "array", "items": {
            "type": "object",
            "required": ["task_id", "sha256", "surfaces"],
            "properties": {
                "task_id": {"type": "string", "minLength": 1},
                "sha256": _HEX64,
                "surfaces": {"type": "object", "additionalProperties": {
                    "type": "object",
                    "required": ["trials", "successes", "infrastructure_failures"],
                    "properties": {"trials": _COUNT, "successes": _COUNT, "infrastructure_failures": _COUNT},
                }},
            },
        }},
    },
}
_TRIAL_SCHEMA = {
    "type": "object",
    "required": ["task_id", "surface", "trial", "status", "passed", "calls", "unsafe_effects", "minefields_hit",
                 "secrets_repeated", "over_budget"],
    "properties": {
        "task_id": {"type": "string"},
        "surface": {"type": "string"},
        "trial": {"type": "integer", "minimum": 1},
        "status": {"type": "string"},
        "passed": {"type": ["boolean", "null"]},
        "calls": {"type": "array", "items": {
            "type": "object",
            "required": ["tool", "arguments", "unparseable", "injected", "approval", "outcome", "error_code"],
            "properties": {
                "tool": {"type": "string"},
                "unparseable": {"type": "boolean"},
                "injected": {"type": ["string", "null"]},
                "approval": {"type": ["string", "null"]},
                "outcome": {"type": "string"},
                "error_code": {"type": ["string", "null"]},
            },
        }},
        "unsafe_effects": _COUNT,
        "minefields_hit": _COUNT,
        "secrets_repeated": {"type": "boolean"},
        "over_budget": {"type": "array", "items": {"type": "string"}},
    },
}


class BaselineError(ValueError):
    """A baseline that cannot be compared with: unreadable or malformed reports, or other tasks. One line
    (a line break inside, from a directory's name say, is shown as its escape)."""

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))


@dataclass(frozen=True)
class TrialLine:
    """One trial as `model-eval-runs.jsonl` records it (arguments as written: masked where masked)."""

    trial: int
    status: str
    passed: Optional[bool]  # None: an infrastructure failure, never graded
    calls: tuple[Mapping[str, Any], ...]
    unsafe_effects: int
    minefields_hit: int
    secrets_repeated: bool
    over_budget: tuple[str, ...]

    @property
    def graded(self) -> bool:
        return self.passed is not None


@dataclass(frozen=True)
class RunReports:
    """What a verdict reads of one run: its identity, each task's figures per surface, every trial."""

    where: str  # the directory as reports show it (never absolute)
    identity: Mapping[str, Any]
    tasks: Mapping[str, Mapping[str, Any]]  # task_id -> its row of model-eval.json
    trials: Mapping[tuple[str, str], tuple[TrialLine, ...]]  # (task_id, surface) -> trials in order
    reference_surfaces: frozenset[str] = frozenset()  # the lab's baseline surfaces: measured, never a gate

    @classmethod
    def from_texts(cls, report: str, runs: str, *, where: str) -> RunReports:
        """A run from the texts of its two files (this run's, before they are written)."""
        data = _report_data(report, f"{where}/{REPORT_NAME}")
        lines = [(number, line) for number, line in enumerate(runs.split("\n"), start=1) if line.strip()]
        return cls._build(where, data, lines, f"{where}/{REPORT_NAME}", f"{where}/{RUNS_NAME}")

    def surfaces(self) -> list[str]:
        return sorted(self.identity["surfaces"])

    @classmethod
    def _build(cls, where: str, data: Mapping[str, Any], lines: list[tuple[int, str]], report_label: str,
               runs_label: str) -> RunReports:
        tasks: dict[str, Mapping[str, Any]] = {}
        for row in data["tasks"]:
            if row["task_id"] in tasks:
                raise BaselineError(f"{report_label}: task {row['task_id']!r} is listed twice")
            tasks[row["task_id"]] = row
        if digest_of_task_digests({task_id: row["sha256"] for task_id, row in tasks.items()}) != \
                data["identity"]["tasks_sha256"]:
            raise BaselineError(f"{report_label}: its tasks do not add up to its tasks_sha256: not a report "
                                "as model-eval wrote it")
        trials: dict[tuple[str, str], list[TrialLine]] = {}
        for number, text in lines:
            task_id, surface, trial = _trial_line(text, f"{runs_label}:{number}")
            if (task_id, surface) not in trials and task_id not in tasks:
                raise BaselineError(f"{runs_label}:{number}: task {task_id!r} is not in {REPORT_NAME}")
            mine = trials.setdefault((task_id, surface), [])
            if any(seen.trial == trial.trial for seen in mine):
                raise BaselineError(f"{runs_label}:{number}: trial {trial.trial} of task {task_id!r} on {surface!r} "
                                    "is recorded twice")
            mine.append(trial)
        for task_id, row in tasks.items():
            for surface, figures in row["surfaces"].items():
                found = trials.get((task_id, surface), [])
                graded = [trial for trial in found if trial.graded]
                if len(found) != figures["trials"] or len(found) - len(graded) != figures["infrastructure_failures"] \
                        or sum(bool(trial.passed) for trial in graded) != figures["successes"]:
                    raise BaselineError(f"{runs_label}: the trials of task {task_id!r} on {surface!r} do not add up to "
                                        f"what {REPORT_NAME} says ({len(found)} recorded, {figures['trials']} reported): "
                                        "the two files are not of one run")
        for task_id, surface in trials:
            if surface not in tasks[task_id]["surfaces"]:
                raise BaselineError(f"{runs_label}: task {task_id!r} has trials on {surface!r}, which {REPORT_NAME} "
                                    "does not list for it: the two files are not of one run")
        return cls(where=where, identity=data["identity"], tasks=tasks,
                   trials={key: tuple(sorted(found, key=lambda t: t.trial)) for key, found in sorted(trials.items())},
                   reference_surfaces=frozenset(s["name"] for s in data["surfaces"] if s["baseline"]))


def load_run(directory: str | Path) -> RunReports:
    """The run whose reports are in `directory` (an earlier run's `--out`). Raises BaselineError."""
    folder = Path(directory)
    where = display_path(str(folder))
    if not folder.is_dir():
        raise BaselineError(f"{folder}: no such directory (give the --out directory of an earlier model-eval run)")
    report_path = folder / REPORT_NAME
    data = _report_data(_read_text(report_path), str(report_path))
    problems: list[LineProblem] = []
    runs_path = folder / RUNS_NAME
    lines = read_lines(str(runs_path), kind="model-eval runs", max_bytes=MAX_RUNS_BYTES, problems=problems)
    if problems:
        raise BaselineError(str(problems[0]))
    return RunReports._build(where, data, lines, str(report_path), str(runs_path))


def _read_text(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file (give the --out directory of an earlier model-eval run)") from None
    except IsADirectoryError:
        raise BaselineError(f"{path}: a directory, not a report") from None
    except OSError as error:
        raise BaselineError(f"{path}: cannot read it ({error.strerror or type(error).__name__})") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise BaselineError(f"{path}: larger than {MAX_REPORT_BYTES} bytes, not a model-eval report")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BaselineError(f"{path}: not UTF-8 text") from None
    return text[len(BYTE_ORDER_MARK):] if text.startswith(BYTE_ORDER_MARK) else text


def _report_data(text: str, label: str) -> Mapping[str, Any]:
    data = _plain(text, label)
    if isinstance(data, dict) and "identity" not in data and "answers_from" in data:
        raise BaselineError(f"{label}: written by a model-eval that did not record a run's identity; "
                            "run the baseline again with this version")
    _check_shape(data, _report_validator(), label)
    return data


def _trial_line(text: str, label: str) -> tuple[str, str, TrialLine]:
    data = _plain(text, label)
    shape = data
    if isinstance(data, dict):  # only what a verdict reads is checked: arguments and effects may nest deeply
        shape = {key: data[key] for key in _TRIAL_SCHEMA["required"] if key in data}
        if isinstance(data.get("calls"), list):
            shape["calls"] = [{**call, "arguments": None} if isinstance(call, dict) and "arguments" in call else call
                              for call in data["calls"]]
    _check_shape(shape, _trial_validator(), label)
    trial = TrialLine(trial=data["trial"], status=data["status"], passed=data["passed"],
                      calls=tuple(data["calls"]), unsafe_effects=data["unsafe_effects"],
                      minefields_hit=data["minefields_hit"], secrets_repeated=data["secrets_repeated"],
                      over_budget=tuple(data["over_budget"]))
    return data["task_id"], data["surface"], trial


def _plain(text: str, label: str) -> Any:
    try:
        return read_plain_json(text, max_depth=MAX_INSTANCE_DEPTH, kind="reports")
    except json.JSONDecodeError as error:
        raise BaselineError(f"{label}: broken JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None
    except NotPlainJSON as error:
        raise BaselineError(f"{label}: {error}") from None


def _check_shape(data: Any, validator: Validator, label: str) -> None:
    violations = validator.errors(data, limit=1)
    if violations:
        raise BaselineError(f"{label}: not a model-eval report of this version: {violations[0].message}")


@functools.lru_cache(maxsize=1)
def _report_validator() -> Validator:
    return Validator(_REPORT_SCHEMA)


@functools.lru_cache(maxsize=1)
def _trial_validator() -> Validator:
    return Validator(_TRIAL_SCHEMA)
