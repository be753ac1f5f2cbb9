"""`model-eval`: run every task of a lab on each of its surfaces, `repeats` times, with one model, grade
each trial, measure, and write the reports. This is the one library function the CLI calls.

Where the answers come from is decided once: an in-process agent, a live endpoint, a live endpoint
whose exchanges are recorded into a cassette (`record`), or a cassette alone (`replay`: no network).
Bad input (tasks, lab, model spec, cassette) raises before any report is written; a replayed request
with no recording raises `MissingRecording`.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from .agent import run_trial
from .cassettes import Cassette, RecordingTransport, ReplayTransport
from .grading import grade_trial
from .labglue import build_registry, new_receipts, open_world, surfaces_of, world_effects, world_secrets
from .metrics import TrialResult, by_split
from .models import ModelInfo, ModelSpecError, open_model, parse_model_spec
from .models.http import Transport, UrllibTransport
from .tasks import Task, load_tasks

__all__ = ["DEFAULT_MODEL", "DEFAULT_REPEATS", "ModelEvaluation", "evaluate_model", "run_model_eval"]

DEFAULT_MODEL = "python:agent_lab.modeleval.scripted:reference_agent"
DEFAULT_REPEATS = 3
SPLIT_CHOICES = ("dev", "heldout", "all")


@dataclass(frozen=True)
class ModelEvaluation:
    lab_name: str
    surfaces: tuple[tuple[str, bool], ...]  # (name, is baseline)
    task_files: tuple[str, ...]
    tasks: tuple[Task, ...]
    split: str
    repeats: int
    model: ModelInfo
    mode: str  # in-process, live, record or replay
    cassette: Optional[str]
    results: Mapping[str, tuple[TrialResult, ...]]  # surface -> trials in task, trial order
    metrics: Mapping[str, Mapping[str, Mapping[str, Any]]]  # surface -> split -> figures
    served_by: tuple[str, ...]

    @property
    def infrastructure_failures(self) -> int:
        return sum(1 for results in self.results.values() for result in results if result.grade is None)

    @property
    def scripted(self) -> bool:
        """The answers came from a scripted agent (in process, or behind a stand-in server that said so)."""
        return self.model.scripted or any(name.startswith("scripted:") for name in self.served_by)


def evaluate_model(lab: Any, task_paths: Sequence[str], *, model: str = DEFAULT_MODEL, repeats: int = DEFAULT_REPEATS,
                   split: str = "all", record: Optional[str] = None, replay: Optional[str] = None,
                   transport: Optional[Transport] = None, lab_name: Optional[str] = None,
                   progress: Optional[Callable[[str], None]] = None) -> ModelEvaluation:
    """Run and grade every trial. Raises TaskFileError, ModelSpecError, CassetteError or MissingRecording."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError("repeats must be an integer, at least 1")
    if split not in SPLIT_CHOICES:
        raise ValueError(f"split must be one of {', '.join(SPLIT_CHOICES)}")
    if record is not None and replay is not None:
        raise ModelSpecError("--record and --replay exclude each other")
    surfaces = surfaces_of(lab)
    tasks = [task for task in load_tasks(task_paths, surfaces=[s.name for s in surfaces])
             if split == "all" or task.split == split]
    client, mode, cassette = _client(model, record, replay, transport)
    results: dict[str, list[TrialResult]] = {surface.name: [] for surface in surfaces}
    with _registry_warnings_silenced():
        for task in tasks:
            for surface in surfaces:
                if task.on(surface.name) is None:
                    continue
                for trial in range(1, repeats + 1):
                    result = _one_trial(lab, surface, task, client, trial)
                    results[surface.name].append(result)
                    if progress is not None:
                        verdict = "infrastructure failure" if result.grade is None else ("pass" if result.passed else "fail")
                        progress(f"{task.task_id} {surface.name} trial {trial}: {verdict}")
    if mode == "record" and cassette is not None:
        from ..lab.reports import write_files

        cassette.directory.mkdir(parents=True, exist_ok=True)
        write_files({cassette.path: cassette.text()})
    served = tuple(sorted({name for rs in results.values() for r in rs for name in r.trial.served_by}))
    return ModelEvaluation(
        lab_name=lab_name or str(getattr(lab, "name", "lab")),
        surfaces=tuple((surface.name, bool(getattr(surface, "baseline", False))) for surface in surfaces),
        task_files=tuple(task_paths), tasks=tuple(tasks), split=split, repeats=repeats, model=client.info,
        mode=mode, cassette=record or replay,
        results={name: tuple(rs) for name, rs in results.items()},
        metrics={name: by_split(rs, repeats) for name, rs in results.items() if rs},
        served_by=served,
    )


def run_model_eval(lab: Any, task_paths: Sequence[str], *, out_dir: str | Path, junit_path: str | Path | None = None,
                   **options: Any) -> ModelEvaluation:
    """Evaluate, then replace every report or none (see `evaluate_model` for the options)."""
    from ..lab.inputs import run_inputs
    from ..lab.reports import check_report_targets, write_files
    from .cassettes import CASSETTE_FILE
    from .reports import REPORT_FILES, render_reports

    out = Path(out_dir)
    targets = {name: out / name for name in REPORT_FILES}
    if junit_path is not None:
        targets["junit.xml"] = Path(junit_path)
    # Nothing written may replace an input (the tasks, a replayed cassette, pyproject.toml, the lab's
    # module), and a recorded cassette is one more file written: never a report's, never an input.
    replayed = [Path(options["replay"]) / CASSETTE_FILE] if options.get("replay") else []
    recorded = [Path(options["record"]) / CASSETTE_FILE] if options.get("record") else []
    check_report_targets([*targets.values(), *recorded], keep=run_inputs(task_files=task_paths, cassettes=replayed))
    evaluation = evaluate_model(lab, task_paths, **options)
    secrets = world_secrets(lab, open_world(lab))
    rendered = render_reports(evaluation, secrets)
    write_files({targets[name]: text for name, text in rendered.items()})
    return evaluation


def _client(model: str, record: Optional[str], replay: Optional[str], transport: Optional[Transport]) -> tuple[Any, str, Optional[Cassette]]:
    spec = parse_model_spec(model)
    if spec.provider == "python":
        if record is not None or replay is not None:
            raise ModelSpecError("cassettes hold HTTP exchanges; a python: agent runs in this process and needs none")
        return open_model(model), "in-process", None
    if replay is not None:
        cassette = Cassette.load(replay)
        return open_model(model, transport=ReplayTransport(cassette), need_key=False), "replay", cassette
    network = transport if transport is not None else UrllibTransport()
    if record is not None:
        cassette = Cassette(record)
        return open_model(model, transport=RecordingTransport(network, cassette)), "record", cassette
    return open_model(model, transport=network), "live", None


def _one_trial(lab: Any, surface: Any, task: Task, client: Any, trial: int) -> TrialResult:
    world = open_world(lab)
    receipts = new_receipts()
    try:
        registry = build_registry(lab, surface, world, receipts)
        try:
            record = run_trial(task, surface.name, registry, client, trial=trial, secrets=world_secrets(lab, world),
                               effects=lambda: _settled_effects(lab, world))
        finally:
            registry.close()
    finally:
        receipts.close()
    return TrialResult(task=task, trial=record, grade=grade_trial(task, record))


def _settled_effects(lab: Any, world: Any) -> list[Any]:
    """The world's effects once held operations are released and running ones have finished."""
    lab.settle_world(world)
    return world_effects(lab, world)


@contextlib.contextmanager
def _registry_warnings_silenced() -> Iterator[None]:
    """A model's broken calls can make handlers fail on purpose; the reports record it, the log stays quiet."""
    quiet = logging.Filter("agent_lab.modeleval")
    names = ("agent_lab.registry", "agent_lab.execution")
    for name in names:
        logging.getLogger(name).addFilter(quiet)
    try:
        yield
    finally:
        for name in names:
            logging.getLogger(name).removeFilter(quiet)
