"""Case files: one JSON object per line, checked against `case_schema.json` with our own validator.

A case says who calls (actor), what the surfaces of a lab propose (`calls`: one list of steps for
every surface, or lists keyed by surface name or role) and what a safe runtime answers (`expected`).
Anything wrong with a file is reported as `FILE:LINE: what is wrong` through one `CaseFileError` holding
every problem found, never as a traceback, so a CI log points straight at the line to fix. Given the
lab, the loader also checks what only the lab can say: that every surface a case names exists, that its
`world` block fits the lab's `world_options`, and that its markers and checks are ones the lab can run.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..jsonvalue import json_type, pointer_join
from ..policy import Actor
from ..schema import MAX_INSTANCE_DEPTH, Validator
from .definition import EXPECTATION_KEYS, Lab
from .faults import ARMING_MARKERS, CRASH, REDELIVER, RESOLVE, TWICE, deliveries, delivers
from .jsonl import LineProblem, NotPlainJSON, lone_surrogate_at, read_lines, read_plain_json

__all__ = ["Case", "CaseFileError", "CaseProblem", "case_schema", "load_cases"]

CASE_SCHEMA_PATH = Path(__file__).with_name("case_schema.json")
MAX_VIOLATIONS_PER_LINE = 5  # a oneOf can explain itself many times over; the first few locate the fault
MAX_PROBLEMS = 100  # reported before reading stops
MAX_CASE_FILE_BYTES = 64 * 1024 * 1024  # far beyond any real case file; a bound on what one read holds
REFERENCE_KEYS = frozenset({"$from_call", "pointer"})
REFERENCE_SHAPE = '{"$from_call": N, "pointer": "/json/pointer"}'


CaseProblem = LineProblem
"""One thing wrong with a case file, at a line (1-based)."""


class CaseFileError(ValueError):
    """Every problem found in the case files; `str()` is one `FILE:LINE: message` per line."""

    def __init__(self, problems: Iterable[CaseProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


Steps = tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Case:
    """One validated case, as written: `calls` keyed as in the file (empty when `shared_calls` holds
    the one list every surface replays) and the raw `expected` block. A surface is looked up by its
    name first, then by its role ("baseline" / "candidate"); the loader has checked, given the lab, that
    a role names exactly one surface."""

    case_id: str
    intent: str
    actor: Mapping[str, Any]
    calls: Mapping[str, Steps]
    expected: Mapping[str, Any]
    shared_calls: Steps = ()
    world: Mapping[str, Any] = field(default_factory=dict)
    receipts: str = "memory"
    tags: tuple[str, ...] = ()
    source_path: str = ""  # the case file as named on the command line
    source_line: int = 0

    @property
    def source(self) -> str:
        """Where the case is, as "FILE:LINE" for messages."""
        return f"{self.source_path}:{self.source_line}"

    def steps_for(self, surface: str, role: str | None = None) -> Steps | None:
        """The steps `surface` replays (None: the case does not run it)."""
        if self.shared_calls:
            return self.shared_calls
        key = _key_for(self.calls, surface, role)
        return self.calls[key] if key is not None else None

    def expectation(self, surface: str, role: str | None = None) -> dict[str, Any]:
        """The shared expectation with the surface's own block laid over it, key by key."""
        merged = {key: value for key, value in self.expected.items() if key in EXPECTATION_KEYS}
        overrides = {key: value for key, value in self.expected.items() if key not in EXPECTATION_KEYS}
        key = _key_for(overrides, surface, role)
        merged.update(overrides[key] if key is not None else {})
        return merged

    def actor_for_run(self) -> Actor:
        return Actor(id=self.actor["id"], tenant=self.actor["tenant"], permissions=frozenset(self.actor["permissions"]))

    def call_count(self, surface: str, role: str | None = None) -> int:
        """How many results the surface's steps produce: one per delivery (a call or a `redeliver`),
        two for a delivery armed by `deliver_twice`."""
        return deliveries(self.steps_for(surface, role) or ())


def _key_for(blocks: Mapping[str, Any], surface: str, role: str | None) -> str | None:
    if surface in blocks:
        return surface
    return role if role is not None and role in blocks else None


CASE_SCHEMA_MEMOISED = frozenset({"https://agent-lab.example/schemas/tool-case.json#/$defs/result",
                                  "https://agent-lab.example/schemas/tool-case.json#/$defs/steps"})
"""Where the case schema's compilation memoises (`Validator._with_memo_hint`: one compilation, not two)."""


@functools.lru_cache(maxsize=1)
def _case_validator() -> Validator:
    return Validator._with_memo_hint(case_schema(), CASE_SCHEMA_MEMOISED)


def case_schema() -> dict[str, Any]:
    """The JSON Schema every case line must satisfy (a fresh copy)."""
    return json.loads(CASE_SCHEMA_PATH.read_text(encoding="utf-8"))


def load_cases(paths: Sequence[str], *, lab: Lab | None = None) -> list[Case]:
    """Read every case of `paths`, in order; raise `CaseFileError` listing all problems if any.

    With `lab`, also check each case against it (surface names, world options, markers it can run).
    """
    cases: list[Case] = []
    problems: list[CaseProblem] = []
    first_seen: dict[str, str] = {}
    files_read: set[Path] = set()
    for path in paths:
        if _given_before(path, files_read):
            problems.append(CaseProblem(path, 1, "this case file is given twice"))
            continue
        for line_number, text in read_lines(path, kind="case", max_bytes=MAX_CASE_FILE_BYTES, problems=problems):
            if len(problems) >= MAX_PROBLEMS:  # a log of a million lines helps nobody: fix these, run again
                problems.append(CaseProblem(path, line_number, f"stopped reading after {MAX_PROBLEMS} problems"))
                raise CaseFileError(problems)
            case = _parse_case(path, line_number, text, problems, lab)
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


def _given_before(path: str, files_read: set[Path]) -> bool:
    """True when `path` names a file already read under this or another spelling (./a, a, a symlink)."""
    from .paths import resolved as leads_to

    resolved = leads_to(path)  # a symbolic link loop as written: reading it then says what is wrong
    if resolved in files_read:
        return True
    files_read.add(resolved)
    return False


def _parse_case(path: str, line_number: int, text: str, problems: list[CaseProblem], lab: Lab | None) -> Case | None:
    def report(message: str) -> None:
        problems.append(CaseProblem(path, line_number, message))

    try:
        data = read_plain_json(text, max_depth=MAX_INSTANCE_DEPTH, kind="cases")
    except json.JSONDecodeError as exc:
        report(f"broken JSON at column {exc.colno}: {exc.msg}")
        return None
    except NotPlainJSON as exc:
        report(str(exc))
        return None
    violations = _case_validator().errors(data)
    if violations:
        for violation in violations[:MAX_VIOLATIONS_PER_LINE]:
            report(violation.message)  # names the field by its path, never quotes its value
        return None
    surrogate_at = lone_surrogate_at(data)  # after validation: the nesting is bounded
    if surrogate_at is not None:
        report(f"'{surrogate_at[1:]}' holds a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text")
        return None
    case = _build_case(data, path, line_number)
    for message in _consistency_problems(case) if lab is None else _lab_problems(case, lab):
        report(message)
    return case


def _build_case(data: Mapping[str, Any], path: str, line_number: int) -> Case:
    calls = data["calls"]
    return Case(
        case_id=data["case_id"],
        intent=data["intent"],
        actor=data["actor"],
        calls={} if isinstance(calls, list) else {key: tuple(steps) for key, steps in calls.items()},
        shared_calls=tuple(calls) if isinstance(calls, list) else (),
        expected=data["expected"],
        world=data.get("world", {}),
        receipts=data.get("receipts", "memory"),
        tags=tuple(data.get("tags", ())),
        source_path=path,
        source_line=line_number,
    )


def _consistency_problems(case: Case) -> list[str]:
    """What the schema cannot say, per block of steps as written: the steps can run, and the
    expectation can fail (without a lab, a key of `calls` is taken as a surface name)."""
    found = _receipt_problems(case)
    if case.shared_calls:
        found += _step_problems("calls", case.shared_calls)
        found += _crash_problems("calls", case.shared_calls, case)
        named = [key for key in case.expected if key not in EXPECTATION_KEYS] or [""]
        for key in named:
            found += _expectation_problems(key or "every surface", case.expectation(key), case.call_count(key))
    for key, steps in case.calls.items():
        found += _step_problems(f"calls/{key}", steps)
        found += _crash_problems(f"calls/{key}", steps, case)
        found += _expectation_problems(key, case.expectation(key), case.call_count(key))
    return found


def _lab_problems(case: Case, lab: Lab) -> list[str]:
    """What only the lab can say: the surfaces named exist, the world options fit, every surface that
    runs can run its steps and fail its expectation, and the lab can do what the markers and checks ask."""
    found = _surface_key_problems("calls", case.calls, lab)
    found += _surface_key_problems("expected", {key: None for key in case.expected if key not in EXPECTATION_KEYS}, lab)
    if found:
        return found
    found += _world_problems(case.world, lab)
    found += _receipt_problems(case)
    found += [f"'expected/{key}' describes surface {lab.surface(key).name!r}, which this case does not run"
              for key in case.expected if key not in EXPECTATION_KEYS
              and case.steps_for(lab.surface(key).name, lab.surface(key).role) is None]
    for surface in lab.surfaces:
        steps = case.steps_for(surface.name, surface.role)
        if steps is None:
            continue
        prefix = "calls" if case.shared_calls else f"calls/{_key_for(case.calls, surface.name, surface.role)}"
        found += _step_problems(prefix, steps)
        found += _crash_problems(prefix, steps, case)
        found += _marker_problems(prefix, steps, lab)
        expectation = case.expectation(surface.name, surface.role)
        found += _expectation_problems(surface.name, expectation, case.call_count(surface.name, surface.role))
        if expectation.get("secrets_masked") and lab.secrets is None:
            found.append(f"'expected/secrets_masked' cannot fail: lab {lab.name!r} names no secrets (Lab(secrets=...))")
    return list(dict.fromkeys(found))  # one surface's problem shared by all (one list of steps) is said once


def _surface_key_problems(block: str, keyed: Mapping[str, Any], lab: Lab) -> list[str]:
    """Every key must name one surface of the lab, and no surface may be named twice."""
    found = []
    named: dict[str, str] = {}
    for key in keyed:
        try:
            surface = lab.surface(key)
        except KeyError as error:
            found.append(f"'{block}/{key}': {error.args[0]}")
            continue
        if surface.name in named:
            found.append(f"'{block}/{named[surface.name]}' and '{block}/{key}' both name surface {surface.name!r}")
        named[surface.name] = key
    return found


def _world_problems(world: Mapping[str, Any], lab: Lab) -> list[str]:
    if not world:
        return []
    if lab.world_options_validator is None:
        return [f"'world': lab {lab.name!r} takes no world options (Lab(world_options=...) would declare them)"]
    return [f"'world' options: {violation.message}"
            for violation in lab.world_options_validator.errors(dict(world))[:MAX_VIOLATIONS_PER_LINE]]


def _marker_problems(prefix: str, steps: Sequence[Mapping[str, Any]], lab: Lab) -> list[str]:
    """What the markers ask of the lab: a way to tell when a write starts, and for a crash a world that
    lives in files and a lab a child process can import."""
    found = []
    for position, step in enumerate(steps):
        marker = step.get("do")
        if marker == "await_write_started" and lab.writes_started is None:
            found.append(f"'{prefix}/{position}' waits for a write, but lab {lab.name!r} cannot tell when one starts "
                         "(Lab(writes_started=...))")
        elif marker == CRASH:
            from .crash import crash_lab_problem

            problem = crash_lab_problem(lab)
            if problem is not None:
                found.append(f"'{prefix}/{position}' crashes a child process, but {problem}")
    return found


def _receipt_problems(case: Case) -> list[str]:
    if case.receipts != "postgres":
        return []
    from .receipt_places import postgres_problem

    problem = postgres_problem()
    return [] if problem is None else [f"'receipts' is postgres: {problem}"]


def _crash_problems(prefix: str, steps: Sequence[Mapping[str, Any]], case: Case) -> list[str]:
    """A crash loses the process and everything in its memory: the receipts must outlive it."""
    if case.receipts != "memory":
        return []
    return [f"'{prefix}/{position}' crashes the process running the call, and an in-memory receipt store dies "
            "with it: name a store that outlives it (\"receipts\": \"sqlite\" or \"postgres\")"
            for position, step in enumerate(steps) if step.get("do") == CRASH]


def _step_problems(prefix: str, steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """References must name a call whose result exists by then; waiting for a write needs one in flight;
    a redelivery or a resolution needs an earlier call; an arming marker needs a delivery right after it."""
    found = []
    answered: set[int] = set()  # calls whose result the replay holds when the next step starts
    in_flight: set[int] = set()  # background calls (and calls delivered twice) not yet settled
    calls = 0
    armed: dict[str, int] = {}  # arming marker -> its position, waiting for the next delivery
    for position, step in enumerate(steps):
        where = f"{prefix}/{position}"
        marker = step.get("do")
        if armed and not delivers(step) and marker not in ARMING_MARKERS:
            found += [f"'{prefix}/{at}' ({name}) must be followed by a call or a redeliver step"
                      for name, at in armed.items()]
            armed.clear()
        if marker in ("settle", "restart"):
            answered |= in_flight
            in_flight.clear()
        elif marker == "await_write_started" and not in_flight:
            found.append(f"'{where}' waits for a write, but no background call is in flight by then")
        elif marker in (REDELIVER, RESOLVE) and calls == 0:
            found.append(f"'{where}' ({marker}) acts on the latest call, but no call comes before it")
        elif marker in ARMING_MARKERS:
            if armed:
                found.append(f"'{where}' ({marker}) cannot apply to the same delivery as {', '.join(armed)}")
            armed[marker] = position
        if not delivers(step):
            continue
        if "tool" in step:
            for pointer, reference in _references(step["arguments"], ""):
                problem = _reference_problem(f"{where}/arguments{pointer}", reference, answered)
                if problem is not None:
                    found.append(problem)
        if CRASH in armed and step.get("background"):
            found.append(f"'{where}' is the call that crashes, which runs in the foreground: drop 'background'")
        count = 2 if TWICE in armed else 1
        for _ in range(count):
            (in_flight if step.get("background") or TWICE in armed else answered).add(calls)
            calls += 1
        armed.clear()
    found += [f"'{prefix}/{at}' ({name}) must be followed by a call or a redeliver step" for name, at in armed.items()]
    return found


def _references(value: Any, pointer: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object in `value` that names `$from_call`, with its JSON Pointer (not looking inside one)."""
    if isinstance(value, dict):
        if "$from_call" in value:
            yield pointer, value
            return
        for key, item in value.items():
            yield from _references(item, pointer_join(pointer, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _references(item, pointer_join(pointer, index))


def _reference_problem(where: str, reference: Mapping[str, Any], answered: set[int]) -> str | None:
    """What is wrong with one `{"$from_call": N, "pointer": P}`, if anything."""
    pointer = reference.get("pointer")
    target = reference["$from_call"]
    if set(reference) != REFERENCE_KEYS or json_type(target) != "integer" or not isinstance(pointer, str) or (
        pointer and not pointer.startswith("/")
    ):
        return f"'{where}' must be a reference {REFERENCE_SHAPE} with N the index of an earlier call"
    if int(target) not in answered:
        return f"'{where}' refers to call {int(target)}, which has no result by then (name an earlier call that has returned)"
    return None


def _expectation_problems(surface: str, expectation: Mapping[str, Any], calls: int) -> list[str]:
    """Expectations must name calls that exist, and must be able to fail (no vacuous pass)."""
    found = []
    if calls == 0:
        found.append(f"the steps of {surface} propose no call (only markers)")
    described = len(expectation.get("steps", ()))
    if described > calls:
        found.append(f"'expected/steps' describes {described} calls but {surface} proposes {calls}")
    for key in ("same_output", "same_error"):
        beyond = [index for index in expectation.get(key, ()) if index >= calls]
        if beyond:
            found.append(f"'expected/{key}' names call {beyond[0]} but {surface} proposes {calls} call(s)")
    outcome, error_code = expectation.get("outcome"), expectation.get("error_code")
    if outcome is None:
        found.append(f"'expected' gives no final outcome for {surface} (set 'outcome', shared or per strategy)")
    elif outcome != "succeeded" and "error_code" not in expectation:
        found.append(f"'expected' says outcome {outcome} for {surface} but names no 'error_code' (any error would pass)")
    elif (outcome == "succeeded") != (error_code is None):
        found.append(f"'expected' says outcome {outcome} for {surface} with error_code {error_code!r} "
                     "(no result has both)")
    return found
