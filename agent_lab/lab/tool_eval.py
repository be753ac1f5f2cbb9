"""`tool-eval`: load a lab's cases, replay them on every surface, grade, measure, and write the reports.

This is the one library function the CLI calls (and `merge_tool_eval` for `--merge`: `shards` says how
a case set is split over machines and put back together). Bad input raises `CaseFileError` (the case
files) or `LabError` (the lab's own code) before anything is written; reports are rendered in memory,
then the whole set replaces the old one or nothing does.

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
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, TypeVar

from ..interrupts import raise_stop_request
from ..lint import LintConfig
from ..redaction import SecretMask
from .cases import Case, load_cases
from .definition import Lab, LabError, Surface, describe_exception
from .grading import grade_run
from .metrics import CaseResult, GateCheck, SurfaceCatalog, compare, gate_checks, surface_catalog, surface_metrics
from .replay import replay_case

if TYPE_CHECKING:
    from .shards import MergedRun, Shard, ShardRun

__all__ = [
    "DEFAULT_OUT",
    "MAX_DEFAULT_JOBS",
    "Evaluation",
    "Progress",
    "SurfaceMap",
    "checked_jobs",
    "default_jobs",
    "evaluate",
    "merge_tool_eval",
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
    shard: ShardRun | None = None  # set when this run is one shard of a case set (`--shard I/N`)

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
             lint_config: LintConfig | None = None, jobs: int | None = None, shard: Shard | None = None) -> Evaluation:
    """Replay and grade every case of `case_paths` on every surface of `lab` (default: the built-in lab).

    `jobs` replays run at once (None: `default_jobs()`; 1: one after another); the result is the same
    whatever it is, and so is the error when a case or the lab's code fails (the first in case order).
    The lab's code (world factory, builders, hooks) is then called from several threads at once, each
    time for a world of its own; a lab whose code shares state between worlds runs with `jobs=1`.

    The gate's lint check runs the lint engine (`agent_lab.lint`) over each candidate under
    `lint_config` (the project's `[tool.agent-lab.lint]`; default: every rule at its default severity)
    and fails on any error-level finding, exactly as `agent-lab lint` would for that surface.
    With `shard` (I of N), every case file is read and checked but only the cases shard I runs are
    replayed (see `shards`); the evaluation covers those and remembers the whole set, for the merge.
    Raises CaseFileError on bad case files and LabError when the lab's own code fails.
    """
    if lab is None:
        from .loader import default_lab

        lab = default_lab()
    workers = checked_jobs(jobs) if jobs is not None else default_jobs()
    every_case = tuple(load_cases(case_paths, lab=lab))
    cases = every_case
    if shard is not None:
        from .shards import select_cases

        cases = select_cases(every_case, shard)
    with quiet_registry_logs(), _Replays(lab, cases, workers) as replays:
        # The surfaces are inspected while the first replays run; a broken builder still fails the run
        # with the inspection's error, before any case's.
        catalogs, secrets = _inspect_surfaces(lab, lint_config)
        rows = _gather_rows(cases, lab.surfaces, replays.result, progress)
    results = {surface.name: tuple(row[column] for row in rows) for column, surface in enumerate(lab.surfaces)}
    for row in rows:
        for result in row:
            if result.run is not None:
                secrets |= result.run.secrets
    shard_run = None
    if shard is not None:
        from .shards import ShardRun, case_set_digest

        shard_run = ShardRun(shard, tuple(case.case_id for case in every_case), case_set_digest(every_case))
    return _evaluation(lab.name, tuple(lab.surfaces), tuple(case_paths), cases, results, catalogs,
                       frozenset(secrets), shard_run)


def _evaluation(lab: str, surfaces: tuple[Surface, ...], case_files: tuple[str, ...], cases: tuple[Case, ...],
                results: Mapping[str, tuple[CaseResult, ...]], catalogs: Mapping[str, SurfaceCatalog],
                secrets: frozenset[str], shard: ShardRun | None) -> Evaluation:
    """The figures, the comparison and the gate over `results`: one computation for a run, a shard
    and a merge of shards alike, so a merged report's verdict is the one a single run reaches."""
    roles = {surface.name: surface.role for surface in surfaces}
    metrics = {surface.name: surface_metrics(surface.name, surface.role, results[surface.name], catalogs[surface.name])
               for surface in surfaces}
    baseline = next((surface for surface in surfaces if surface.baseline), None)
    candidates = tuple(surface for surface in surfaces if not surface.baseline)
    comparison = {candidate.name: compare(results[baseline.name], results[candidate.name])
                  for candidate in candidates} if baseline is not None else {}
    gate = [check for candidate in candidates for check in gate_checks(
        candidate.name, metrics[candidate.name], results[candidate.name], comparison.get(candidate.name),
        catalogs[candidate.name])]
    return Evaluation(
        lab=lab,
        surfaces=surfaces,
        baseline=baseline,
        candidates=candidates,
        case_files=case_files,
        cases=cases,
        results=SurfaceMap(results, roles),
        metrics=SurfaceMap(metrics, roles),
        comparison=comparison,
        gate=tuple(gate),
        secrets=frozenset(secrets),
        redact_fields=frozenset(name for catalog in catalogs.values() for name in catalog.redact_fields),
        catalogs=dict(catalogs),
        shard=shard,
    )


def merged_evaluation(merged: MergedRun) -> Evaluation:
    """The evaluation one run of the whole case set would have made, from its shards' parts."""
    surfaces = tuple(Surface(name, _no_registry, baseline=baseline) for name, baseline in merged.surfaces)
    # The parts were masked when the shards wrote them; nothing is left to mask.
    return _evaluation(merged.lab, surfaces, merged.case_files, merged.cases, merged.results, merged.catalogs,
                       frozenset(), None)


def _no_registry(world: Any, **options: Any) -> Any:
    """A merged report's surfaces are names and roles only: nothing replays on them."""
    raise LabError("a surface of a merged tool-eval report cannot build a registry")


def run_tool_eval(case_paths: Sequence[str], *, out_dir: str | Path = DEFAULT_OUT,
                  junit_path: str | Path | None = None, lab: Lab | None = None,
                  progress: Progress | None = None, lint_config: LintConfig | None = None,
                  jobs: int | None = None, shard: Shard | None = None) -> Evaluation:
    """Evaluate (see `evaluate`), then replace every report or none.

    With `shard`, the reports cover that shard's cases and `tool-shard.json` joins them in `out_dir`:
    what `merge_tool_eval` needs to write the whole run's reports from every shard's directory.
    Raises CaseFileError for bad case files, LabError for a lab whose code fails, and ReportWriteError
    for report paths that cannot be written; an unusable path is refused before the cases run, and
    nothing is written on any of these errors.
    """
    from .inputs import run_inputs
    from .reports import check_report_targets

    targets = _report_targets(out_dir, junit_path, shard=shard is not None)
    if jobs is not None:
        checked_jobs(jobs)  # refused before anything runs
    check_report_targets(targets.values(), keep=run_inputs(case_paths))  # pyproject.toml and the lab's module too
    evaluation = evaluate(case_paths, lab=lab, progress=progress, lint_config=lint_config, jobs=jobs, shard=shard)
    _write_reports(evaluation, targets)
    return evaluation


def merge_tool_eval(shard_dirs: Sequence[str | Path], *, out_dir: str | Path = DEFAULT_OUT,
                    junit_path: str | Path | None = None) -> Evaluation:
    """Write one run's reports from the output directories of its shards (`tool-eval --merge`).

    The shards must be every shard, once each, of one case set run by one agent-lab on one lab with
    the same catalogs; ShardError (one line) otherwise, before anything is written. The reports are
    those one unsharded run writes (see `shards`); ReportWriteError as for `run_tool_eval`, and no
    report may replace a shard's own file (nor pyproject.toml or a loaded module).
    """
    from .inputs import run_inputs
    from .reports import check_report_targets, render_reports, write_files
    from .shards import SHARD_FILE, ShardError, read_shards

    directories = [str(directory) for directory in shard_dirs]
    targets = _report_targets(out_dir, junit_path, shard=False)
    merged = read_shards(directories)
    kept = run_inputs()
    kept.update({Path(directory) / SHARD_FILE: "a shard this merge reads" for directory in directories})
    check_report_targets(targets.values(), keep=kept)
    try:
        evaluation = merged_evaluation(merged)
        rendered = render_reports(evaluation)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as error:
        # Parts that passed every check of their shape but hold values no run writes (a shard file
        # edited by hand): one line, as for any bad input, not a traceback.
        raise ShardError(f"tool-eval --merge: the shards' results cannot be put together ({type(error).__name__}; "
                         "was a tool-shard.json changed by hand?)") from None
    # The shards' results were masked with each shard's secrets when written; the merged run masks
    # with what it knows (its tools' redacted fields).
    write_files({targets[name]: text for name, text in rendered.items()}, mask=evaluation.mask)
    return evaluation


def _report_targets(out_dir: str | Path, junit_path: str | Path | None, *, shard: bool) -> dict[str, Path]:
    from .reports import REPORT_FILES

    out = Path(out_dir)
    targets = {name: out / name for name in REPORT_FILES if name != "junit.xml"}
    targets["junit.xml"] = Path(junit_path) if junit_path is not None else out / "junit.xml"
    if shard:
        from .shards import SHARD_FILE

        targets[SHARD_FILE] = out / SHARD_FILE
    return targets


def _write_reports(evaluation: Evaluation, targets: Mapping[str, Path]) -> None:
    from .reports import render_reports, write_files

    rendered = render_reports(evaluation)
    write_files({targets[name]: text for name, text in rendered.items()}, mask=evaluation.mask)


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
    """Build each surface once on a fresh world: its catalog and specs, and the world's secrets. The
    lint rules run on the candidates only: a baseline's findings would gate nothing and show nowhere."""
    catalogs: dict[str, SurfaceCatalog] = {}
    secrets: set[str] = set()
    for surface in lab.surfaces:
        world = lab.new_world()
        secrets |= lab.secrets_of(world)
        registry = lab.build(surface, world)
        try:
            catalogs[surface.name] = surface_catalog(registry, lint_config, lint=not surface.baseline)
        finally:
            registry.close()
    return catalogs, secrets
