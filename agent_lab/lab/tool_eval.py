"""`tool-eval`: load cases, replay them through both strategies, grade, measure, and write the reports.

This is the one library function the CLI calls. Bad input raises `CaseFileError` before anything is
written; reports are rendered in memory, then the whole set replaces the old one or nothing does.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..lint import LintConfig, Severity, lint_catalog
from .backend import TicketBackend
from .baseline import BASELINE_NAME
from .candidate import CANDIDATE_NAME
from .cases import STRATEGIES, Case, load_cases
from .grading import grade_run
from .metrics import CaseResult, GateCheck, catalog_size, compare, gate_checks, strategy_metrics
from .replay import STRATEGY_BUILDERS, replay_case

__all__ = [
    "DEFAULT_CASES",
    "DEFAULT_OUT",
    "STRATEGY_NAMES",
    "Evaluation",
    "evaluate",
    "run_tool_eval",
]

DEFAULT_CASES = "datasets/tool-cases.jsonl"  # relative to the current directory
DEFAULT_OUT = "reports"
STRATEGY_NAMES: Mapping[str, str] = {"baseline": BASELINE_NAME, "candidate": CANDIDATE_NAME}


@dataclass(frozen=True)
class Evaluation:
    """Everything one tool-eval run found, ready to render."""

    case_files: tuple[str, ...]
    cases: tuple[Case, ...]
    results: Mapping[str, tuple[CaseResult, ...]]  # strategy -> one result per case, in case order
    metrics: Mapping[str, Mapping[str, Any]]
    comparison: Mapping[str, Sequence[str]]
    gate: tuple[GateCheck, ...]

    @property
    def gate_passed(self) -> bool:
        return all(check.passed for check in self.gate)


def evaluate(case_paths: Sequence[str], *, lint_config: LintConfig | None = None) -> Evaluation:
    """Replay and grade every case of `case_paths` (raises CaseFileError on bad input). The gate's lint
    check runs the lint engine (`agent_lab.lint`) over the candidate and fails on any error-level finding."""
    cases = tuple(load_cases(case_paths))
    with _registry_warnings_silenced():
        results = {
            strategy: tuple(_replay_and_grade(case, strategy) for case in cases) for strategy in STRATEGIES
        }
    metrics = {strategy: _metrics(strategy, results[strategy]) for strategy in STRATEGIES}
    comparison = compare(results)
    candidate = _fresh_registry("candidate")
    try:
        specs = [candidate.spec(name) for name in candidate.names()]
    finally:
        candidate.close()
    lint_errors = [f"{finding.tool or 'catalog'}: {finding.rule} {finding.message}"
                   for finding in lint_catalog(specs, config=lint_config) if finding.severity is Severity.ERROR]
    without_output = [spec.name for spec in specs if spec.output_schema is None]
    return Evaluation(
        case_files=tuple(case_paths),
        cases=cases,
        results=results,
        metrics=metrics,
        comparison=comparison,
        gate=tuple(gate_checks(metrics, comparison, lint_errors, without_output)),
    )


def run_tool_eval(case_paths: Sequence[str], *, out_dir: str | Path = DEFAULT_OUT,
                  junit_path: str | Path | None = None) -> Evaluation:
    """Evaluate, then replace every report or none.

    Raises CaseFileError for bad case files and ReportWriteError for report paths that cannot be
    written; an unusable path is refused before the cases run, and nothing is written on either error.
    """
    from .reports import REPORT_FILES, check_report_targets, render_reports, write_files

    out = Path(out_dir)
    junit = Path(junit_path) if junit_path is not None else out / "junit.xml"
    targets = {name: out / name for name in REPORT_FILES if name != "junit.xml"}
    targets["junit.xml"] = junit
    check_report_targets(targets.values(), keep=case_paths)
    evaluation = evaluate(case_paths)
    rendered = render_reports(evaluation)
    write_files({targets[name]: text for name, text in rendered.items()})
    return evaluation


@contextlib.contextmanager
def _registry_warnings_silenced() -> Iterator[None]:
    """The cases provoke crashes on purpose; the reports record them, so the runtime's log stays quiet."""
    quiet = logging.Filter("agent_lab.lab")  # passes only the lab's own records
    for name in ("agent_lab.registry", "agent_lab.execution"):
        logging.getLogger(name).addFilter(quiet)
    try:
        yield
    finally:
        for name in ("agent_lab.registry", "agent_lab.execution"):
            logging.getLogger(name).removeFilter(quiet)


def _replay_and_grade(case: Case, strategy: str) -> CaseResult:
    run = replay_case(case, strategy)
    return CaseResult(case=case, run=run, grades=grade_run(case, run))


def _fresh_registry(strategy: str) -> Any:
    return STRATEGY_BUILDERS[strategy](TicketBackend())


def _metrics(strategy: str, results: Sequence[CaseResult]) -> dict[str, Any]:
    registry = _fresh_registry(strategy)
    try:
        catalog = catalog_size(registry)
        tools = len(registry.names())
    finally:
        registry.close()
    return {"name": STRATEGY_NAMES[strategy], **strategy_metrics(results, catalog, tools)}
