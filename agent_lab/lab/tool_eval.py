"""`tool-eval`: load a lab's cases, replay them on every surface, grade, measure, and write the reports.

This is the one library function the CLI calls. Bad input raises `CaseFileError` (the case files) or
`LabError` (the lab's own code) before anything is written; reports are rendered in memory, then the
whole set replaces the old one or nothing does.

Cases are independent (each replays on a fresh world and a fresh registry per surface), so `jobs`
replays run at once on a bounded pool of threads. Threads, not processes: a replay spends its time
waiting (deadlines, held operations, settling), which threads overlap however the GIL is held, and a
thread shares the loaded lab, where a process would have to import it again by reference and pay an
interpreter's start-up per worker. Results are gathered by case and surface order, never by completion,
so the reports, the progress lines and the first error raised are those of a serial run.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from ..interrupts import raise_stop_request
from ..lint import LintConfig
from ..redaction import SecretMask
from .cases import Case, load_cases
from .definition import Lab, LabError, Surface, describe_exception
from .grading import grade_run
from .metrics import CaseResult, GateCheck, SurfaceCatalog, compare, gate_checks, surface_catalog, surface_metrics
from .replay import replay_case

__all__ = [
    "DEFAULT_OUT",
    "MAX_DEFAULT_JOBS",
    "Evaluation",
    "Progress",
    "SurfaceMap",
    "checked_jobs",
    "default_jobs",
    "evaluate",
    "progress_line",
    "quiet_registry_logs",
    "run_tool_eval",
]

DEFAULT_OUT = "reports"
MAX_DEFAULT_JOBS = 32
# The runtime's loggers the cases provoke on purpose (crashes, timeouts, and the fault cases' refused
# receipts and lapsed leases, which the lease keeper reports).
QUIETED_LOGGERS = ("agent_lab.registry", "agent_lab.execution", "agent_lab.leases")
Value = TypeVar("Value")
# Called after each case with its results on every surface, in the lab's surface order.
Progress = Callable[[Case, Sequence[CaseResult]], None]


class SurfaceMap(Mapping[str, Value]):
    """A read-only mapping keyed by surface name that also answers to a role ("baseline",
    "candidate") when exactly one surface has it, the way case files may name a surface."""

    def __init__(self, items: Mapping[str, Value], roles: Mapping[str, str]) -> None:
        self._items = dict(items)
        self._roles = dict(roles)

    def __getitem__(self, key: str) -> Value:
        if key in self._items:
            return self._items[key]
        holders = [name for name, role in self._roles.items() if role == key]
        if len(holders) == 1:
            return self._items[holders[0]]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"SurfaceMap({self._items!r})"


@dataclass(frozen=True)
class Evaluation:
    """Everything one tool-eval run found, ready to render."""

    lab: str
    surfaces: tuple[Surface, ...]
    case_files: tuple[str, ...]
    cases: tuple[Case, ...]
    results: SurfaceMap[tuple[CaseResult, ...]]  # surface -> one result per case, in case order
    metrics: SurfaceMap[Mapping[str, Any]]
    comparison: Mapping[str, Mapping[str, Sequence[str]]]  # candidate -> buckets; empty without a baseline
    gate: tuple[GateCheck, ...]
    secrets: frozenset[str] = field(repr=False)  # every secret any world of the run held: masked in every report
    redact_fields: frozenset[str]  # fields some tool redacts: masked in the arguments the runs show

    baseline: Surface | None  # the lab's baseline, if it has one
    candidates: tuple[Surface, ...]  # the surfaces that gate, in the lab's order
    # surface -> what its catalog shows and its lint configuration decides (effect findings' severities
    # and tool locations, for the reports)
    catalogs: Mapping[str, SurfaceCatalog] = field(default_factory=dict)

    @property
    def gate_passed(self) -> bool:
        return all(check.passed for check in self.gate)

    @functools.cached_property
    def mask(self) -> SecretMask:
        """How every report and line about this run is masked: its secrets, its tools' redacted fields."""
        return SecretMask(self.secrets, fields=self.redact_fields)


def default_jobs() -> int:
    """How many replays run at once when nobody says: the core count plus four, at most 32 (the
    standard library's default for a thread pool whose workers mostly wait, as replays do)."""
    return min(MAX_DEFAULT_JOBS, (os.cpu_count() or 1) + 4)


def checked_jobs(jobs: Any) -> int:
    """`jobs` if it is a whole number of at least 1 (ValueError otherwise; 1 replays one case at a time)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number of at least 1, not {jobs!r}")
    return jobs


def evaluate(case_paths: Sequence[str], *, lab: Lab | None = None, progress: Progress | None = None,
             lint_config: LintConfig | None = None, jobs: int | None = None) -> Evaluation:
    """Replay and grade every case of `case_paths` on every surface of `lab` (default: the built-in lab).

    `jobs` replays run at once (None: `default_jobs()`; 1: one after another); the result is the same
    whatever it is, and so is the error when a case or the lab's code fails (the first in case order).
    The lab's code (world factory, builders, hooks) is then called from several threads at once, each
    time for a world of its own; a lab whose code shares state between worlds runs with `jobs=1`.

    The gate's lint check runs the lint engine (`agent_lab.lint`) over each candidate under
    `lint_config` (the project's `[tool.agent-lab.lint]`; default: every rule at its default severity)
    and fails on any error-level finding, exactly as `agent-lab lint` would for that surface.
    Raises CaseFileError on bad case files and LabError when the lab's own code fails.
    """
    if lab is None:
        from .loader import default_lab

        lab = default_lab()
    workers = checked_jobs(jobs) if jobs is not None else default_jobs()
    cases = tuple(load_cases(case_paths, lab=lab))
    with quiet_registry_logs(), _Replays(lab, cases, workers) as replays:
        # The surfaces are inspected while the first replays run; a broken builder still fails the run
        # with the inspection's error, before any case's.
        catalogs, secrets = _inspect_surfaces(lab, lint_config)
        rows = _gather_rows(cases, lab.surfaces, replays.result, progress)
    roles = {surface.name: surface.role for surface in lab.surfaces}
    results = {surface.name: tuple(row[column] for row in rows) for column, surface in enumerate(lab.surfaces)}
    metrics = {surface.name: surface_metrics(surface.name, surface.role, results[surface.name], catalogs[surface.name])
               for surface in lab.surfaces}
    baseline = lab.baseline
    comparison = {candidate.name: compare(results[baseline.name], results[candidate.name])
                  for candidate in lab.candidates} if baseline is not None else {}
    gate = [check for candidate in lab.candidates for check in gate_checks(
        candidate.name, metrics[candidate.name], results[candidate.name], comparison.get(candidate.name),
        catalogs[candidate.name])]
    for row in rows:
        for result in row:
            if result.run is not None:
                secrets |= result.run.secrets
    return Evaluation(
        lab=lab.name,
        surfaces=tuple(lab.surfaces),
        baseline=lab.baseline,
        candidates=lab.candidates,
        case_files=tuple(case_paths),
        cases=cases,
        results=SurfaceMap(results, roles),
        metrics=SurfaceMap(metrics, roles),
        comparison=comparison,
        gate=tuple(gate),
        secrets=frozenset(secrets),
        redact_fields=frozenset(field for catalog in catalogs.values() for field in catalog.redact_fields),
        catalogs=catalogs,
    )


def run_tool_eval(case_paths: Sequence[str], *, out_dir: str | Path = DEFAULT_OUT,
                  junit_path: str | Path | None = None, lab: Lab | None = None,
                  progress: Progress | None = None, lint_config: LintConfig | None = None,
                  jobs: int | None = None) -> Evaluation:
    """Evaluate (see `evaluate`), then replace every report or none.

    Raises CaseFileError for bad case files, LabError for a lab whose code fails, and ReportWriteError
    for report paths that cannot be written; an unusable path is refused before the cases run, and
    nothing is written on any of these errors.
    """
    from .inputs import run_inputs
    from .reports import REPORT_FILES, check_report_targets, render_reports, write_files

    out = Path(out_dir)
    junit = Path(junit_path) if junit_path is not None else out / "junit.xml"
    targets = {name: out / name for name in REPORT_FILES if name != "junit.xml"}
    targets["junit.xml"] = junit
    if jobs is not None:
        checked_jobs(jobs)  # refused before anything runs
    check_report_targets(targets.values(), keep=run_inputs(case_paths))  # pyproject.toml and the lab's module too
    evaluation = evaluate(case_paths, lab=lab, progress=progress, lint_config=lint_config, jobs=jobs)
    rendered = render_reports(evaluation)
    write_files({targets[name]: text for name, text in rendered.items()}, mask=evaluation.mask)
    return evaluation


def progress_line(case: Case, results: Sequence[CaseResult]) -> str:
    """One line about one case: its id and each surface's verdict ("case-id: wide-v1 fail, typed-v2 pass"),
    with the secrets its worlds held masked, as in every report (the line goes to a CI log)."""
    verdicts = ", ".join(f"{result.surface} {_verdict(result)}" for result in results)
    secrets = frozenset().union(*(result.run.secrets for result in results if result.run is not None))
    return SecretMask(secrets).text(f"{case.case_id}: {verdicts}")


def _verdict(result: CaseResult) -> str:
    if not result.ran:
        return "not run"
    return "pass" if result.passed else "fail"


@contextlib.contextmanager
def quiet_registry_logs() -> Iterator[None]:
    """The cases provoke crashes on purpose; the reports record them, so the runtime's log stays quiet."""
    quiet = logging.Filter("agent_lab.lab")  # passes only the lab's own records
    for name in QUIETED_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    try:
        yield
    finally:
        for name in QUIETED_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)


class _Replays:
    """Every (case, surface) replay of a run, `workers` at a time, as jobs numbered case by case.

    With one worker nothing starts ahead: `result(index)` replays job `index` when asked, as a serial
    run does. Otherwise, on entering, the jobs of cases that wait on their world (slow operations,
    held writes, marker steps) go to a pool of `workers` threads, and all other jobs to one thread of
    their own, in case order: Python threads share one interpreter lock, so busy replays gain nothing
    from running side by side, and several of them at once would starve each other's calls of the
    time their deadlines give (a 150 ms write refused as `deadline_exceeded` on a loaded machine).
    So a run costs about the longest waiting case or the busy cases one after another, whichever is
    longer. `result(index)` waits for job `index`, so results are read in the order they are asked
    for, never in the order they finish. Leaving on an error drops the jobs not yet
    started and waits for those running (each replay is bounded by its wait limits), so no replay
    outlives the run.
    """

    def __init__(self, lab: Lab, cases: Sequence[Case], workers: int) -> None:
        self.lab = lab
        self.jobs = [(case, surface) for case in cases for surface in lab.surfaces]
        self.workers = min(workers, len(self.jobs))
        self.pools: list[concurrent.futures.ThreadPoolExecutor] = []
        self.futures: dict[int, concurrent.futures.Future[CaseResult]] = {}

    def __enter__(self) -> _Replays:
        if self.workers > 1:
            waiting = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="tool-eval-wait")
            busy = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tool-eval-busy")
            self.pools = [waiting, busy]
            for index, (case, surface) in enumerate(self.jobs):
                pool = waiting if _waits_on_world(case) else busy
                self.futures[index] = pool.submit(_replay_and_grade, self.lab, case, surface)
        return self

    def result(self, index: int) -> CaseResult:
        """Job `index`'s result (case `index // len(surfaces)`, surface `index % len(surfaces)`)."""
        if not self.pools:
            return _replay_and_grade(self.lab, *self.jobs[index])
        return self.futures[index].result()

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        for pool in self.pools:
            pool.shutdown(wait=True, cancel_futures=error is not None)


def _gather_rows(cases: Sequence[Case], surfaces: Sequence[Surface], result: Callable[[int], CaseResult],
                 progress: Progress | None) -> list[tuple[CaseResult, ...]]:
    """One row per case (its result on each surface, in the lab's order), job `case * len(surfaces) +
    surface` by job, reporting each case to `progress` once its row is complete: in case order, and the
    first job in that order that raised raises here, as in a serial run."""
    rows = []
    for row_index, case in enumerate(cases):
        first = row_index * len(surfaces)
        row = tuple(result(first + column) for column in range(len(surfaces)))
        if progress is not None:
            progress(case, row)
        rows.append(row)
    return rows


def _waits_on_world(case: Case) -> bool:
    """Whether a case configures its world (slow operations, say) or waits on it with a marker step:
    such cases spend their time waiting, so they run side by side. Where a case runs never shows in a
    report."""
    if case.world:
        return True
    steps = [case.shared_calls, *case.calls.values()]
    return any("do" in step or step.get("background") for surface_steps in steps for step in surface_steps)


def _replay_and_grade(lab: Lab, case: Case, surface: Surface) -> CaseResult:
    if case.steps_for(surface.name, surface.role) is None:
        return CaseResult(case=case, surface=surface.name, role=surface.role, run=None)
    try:
        run = replay_case(case, surface, lab=lab)
    except Exception:
        raise  # a LabError, a CaseFileError, or a bug of ours (shown as one)
    except BaseException as error:  # noqa: BLE001 - the engine raises none: the lab's objects did
        raise_stop_request(error)  # (a Registry subclass's own methods, say); only Ctrl-C stops the run
        raise LabError(f"case {case.case_id!r} on surface {surface.name!r}: the lab's code raised "
                       f"{describe_exception(error)}") from None
    return CaseResult(case=case, surface=surface.name, role=surface.role, run=run, grades=grade_run(case, run))


def _inspect_surfaces(lab: Lab, lint_config: LintConfig | None) -> tuple[dict[str, SurfaceCatalog], set[str]]:
    """Build each surface once on a fresh world: its catalog and specs, and the world's secrets."""
    catalogs: dict[str, SurfaceCatalog] = {}
    secrets: set[str] = set()
    for surface in lab.surfaces:
        world = lab.new_world()
        secrets |= lab.secrets_of(world)
        registry = lab.build(surface, world)
        try:
            catalogs[surface.name] = surface_catalog(registry, lint_config)
        finally:
            registry.close()
    return catalogs, secrets
