"""`model-eval`: run every task of a lab on each of its surfaces, `repeats` times, with one model, grade
each trial, measure, and write the reports. This is the one library function the CLI calls.

Where the answers come from is decided once: an in-process agent, a live endpoint, a live endpoint
whose exchanges are recorded into a cassette (`record`), or a cassette alone (`replay`: no network).
Bad input (tasks, lab, model spec, cassette) raises before any report is written; a replayed request
with no recording raises `MissingRecording`.

With a baseline (an earlier run's report directory), the run is also judged against it: the baseline is
read and its tasks checked before anything runs (other tasks, or malformed reports: `BaselineError`),
and the verdict (`model-eval-verdict.json` and `.md`, and a suite of `junit.xml`) joins the run's one
atomic set of reports. Without one, a verdict left in the directory by an earlier run is removed: it
judged other reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence

from .agent import run_trial
from .cassettes import Cassette, MissingRecording, RecordingTransport, ReplayTransport
from .grading import grade_trial
from .labglue import build_registry, new_receipts, open_world, surface_catalog, surfaces_of, world_effects, world_secrets
from .metrics import TrialResult, by_split
from .models import ModelInfo, ModelSpecError, open_model, parse_model_spec
from ..lab.paths import resolved
from ..redaction import NO_SECRETS, SecretMask
from .models.http import Transport, UrllibTransport
from .runreports import BaselineError, RunReports, load_run
from .tasks import Task, load_tasks, tasks_digest

if TYPE_CHECKING:
    from .verdict import Verdict

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
    # Every secret a trial's world held, and the model's key: masked in every report and line.
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    redact_fields: frozenset[str] = frozenset()  # fields some tool redacts: masked in the arguments shown
    reported_models: tuple[str, ...] = ()  # model ids the provider's answers named
    tasks_sha256: str = ""
    catalogs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # surface -> catalog identity
    agent_lab_version: str = ""
    verdict: Optional[Verdict] = None  # the baseline verdict, when run_model_eval was given a baseline

    @property
    def regressions(self) -> int:
        return len(self.verdict.regressions) if self.verdict is not None else 0

    @property
    def infrastructure_failures(self) -> int:
        return sum(1 for results in self.results.values() for result in results if result.grade is None)

    @functools.cached_property
    def mask(self) -> SecretMask:
        """How every report and line about this run is masked (the same path as tool-eval's)."""
        return SecretMask(self.secrets, fields=self.redact_fields)

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
    tasks = selected_tasks(lab, task_paths, split)
    catalogs = {surface.name: surface_catalog(lab, surface) for surface in surfaces}
    client, mode, cassette = _client(model, record, replay, transport)
    results: dict[str, list[TrialResult]] = {surface.name: [] for surface in surfaces}
    masked = _Masked(set(getattr(client, "credentials", ())), set())
    with _registry_warnings_silenced():
        for task in tasks:
            for surface in surfaces:
                if task.on(surface.name) is None:
                    continue
                for trial in range(1, repeats + 1):
                    redacted: set[str] = set()
                    try:
                        result = _one_trial(lab, surface, task, client, trial, masked, redacted)
                    except MissingRecording as missing:  # its detail quotes the conversation the world saw
                        raise MissingRecording(missing.context,
                                               SecretMask(masked.secrets | redacted).text(missing.detail)) from None
                    results[surface.name].append(result)
                    if progress is not None:
                        verdict = "infrastructure failure" if result.grade is None else ("pass" if result.passed else "fail")
                        progress(f"{task.task_id} {surface.name} trial {trial}: {verdict}")
    if mode == "record" and cassette is not None:
        from ..lab.reports import write_files

        cassette.directory.mkdir(parents=True, exist_ok=True)
        # A cassette holds what the model was sent, secrets a surface showed included (README): it is a
        # recording to replay, never a report, and masking it would change what a replay answers.
        write_files({cassette.path: cassette.text()}, mask=NO_SECRETS)
    served = tuple(sorted({name for rs in results.values() for r in rs for name in r.trial.served_by}))
    from .. import __version__

    return ModelEvaluation(
        lab_name=lab_name or str(getattr(lab, "name", "lab")),
        surfaces=tuple((surface.name, bool(getattr(surface, "baseline", False))) for surface in surfaces),
        task_files=tuple(task_paths), tasks=tuple(tasks), split=split, repeats=repeats, model=client.info,
        mode=mode, cassette=record or replay,
        results={name: tuple(rs) for name, rs in results.items()},
        metrics={name: by_split(rs, repeats) for name, rs in results.items() if rs},
        served_by=served,
        secrets=frozenset(masked.secrets),
        redact_fields=frozenset(masked.fields),
        reported_models=tuple(sorted({name for rs in results.values() for r in rs for name in r.trial.reported_models})),
        tasks_sha256=tasks_digest(tasks), catalogs=catalogs, agent_lab_version=__version__,
    )


def selected_tasks(lab: Any, task_paths: Sequence[str], split: str) -> list[Task]:
    """The tasks of `task_paths` in `split` (every one for "all"), checked against the lab's surfaces."""
    if split not in SPLIT_CHOICES:
        raise ValueError(f"split must be one of {', '.join(SPLIT_CHOICES)}")
    return [task for task in load_tasks(task_paths, surfaces=[s.name for s in surfaces_of(lab)])
            if split == "all" or task.split == split]


def run_model_eval(lab: Any, task_paths: Sequence[str], *, out_dir: str | Path, junit_path: str | Path | None = None,
                   baseline: str | Path | None = None, compare_tasks: Optional[Sequence[str]] = None,
                   **options: Any) -> ModelEvaluation:
    """Evaluate, then replace every report or none (see `evaluate_model` for the options). With `baseline`
    (an earlier run's `--out`), judge the run against it too: `evaluation.verdict`, and the verdict files
    beside the reports. Raises BaselineError (before anything runs) for a baseline that cannot be read or
    that ran other tasks, unless `compare_tasks` names the tasks to compare."""
    from ..lab.inputs import run_inputs
    from ..lab.reports import check_report_targets, write_files
    from .cassettes import CASSETTE_FILE
    from .reports import REPORT_FILES, render_reports
    from .verdict import check_comparable
    from .verdict_reports import VERDICT_FILES

    out = Path(out_dir)
    targets = {name: out / name for name in REPORT_FILES}
    if junit_path is not None:
        targets["junit.xml"] = Path(junit_path)
    if compare_tasks and baseline is None:
        raise BaselineError("--compare-task chooses tasks of a baseline verdict: give --baseline DIR too")
    earlier: Optional[RunReports] = None
    if baseline is not None:
        if resolved(baseline) == resolved(out):
            raise BaselineError(f"{baseline}: the baseline is the report directory of this run, which would "
                                "replace it: write this run's reports elsewhere (--out)")
        targets.update({name: out / name for name in VERDICT_FILES})
        earlier = load_run(baseline)
    # Nothing written may replace an input (the tasks, a replayed cassette, pyproject.toml, the lab's
    # module, the baseline's reports), and a recorded cassette is one more file written: never a
    # report's, never an input.
    replayed = [Path(options["replay"]) / CASSETTE_FILE] if options.get("replay") else []
    recorded = [Path(options["record"]) / CASSETTE_FILE] if options.get("record") else []
    inputs = run_inputs(task_files=task_paths, cassettes=replayed)
    if baseline is not None:
        inputs.update({Path(baseline) / name: "a report of the baseline run" for name in (*REPORT_FILES, *VERDICT_FILES)})
    check_report_targets([*targets.values(), *recorded], keep=inputs)
    if earlier is not None:
        tasks = selected_tasks(lab, task_paths, options.get("split", "all"))
        check_comparable(earlier, tasks_digest(tasks), {task.task_id: task.digest for task in tasks}, compare_tasks)
    evaluation = evaluate_model(lab, task_paths, **options)
    rendered = render_reports(evaluation)
    if earlier is not None:
        verdict = _judge(earlier, rendered, out, evaluation.mask, compare_tasks)
        evaluation = dataclasses.replace(evaluation, verdict=verdict)
    write_files({targets[name]: text for name, text in rendered.items()}, mask=evaluation.mask)
    if earlier is None:
        _remove_stale_verdict(out, VERDICT_FILES)
    return evaluation


def _judge(earlier: RunReports, rendered: dict[str, str], out: Path, mask: SecretMask,
           compare_tasks: Optional[Sequence[str]]) -> Verdict:
    """The verdict on this run, added to `rendered` (which `write_files` then masks with `mask`): its two
    files and a suite of junit.xml.

    This run is read from the texts about to be written, masked as `write_files` will mask them: the
    same files, masked the same way, as the baseline's, so a masked argument is never a difference."""
    from ..lab.reports import display_path
    from .verdict import compare_runs
    from .verdict_reports import add_verdict_suite, render_verdict

    this_run = RunReports.from_texts(mask.file("model-eval.json", rendered["model-eval.json"]),
                                     mask.file("model-eval-runs.jsonl", rendered["model-eval-runs.jsonl"]),
                                     where=display_path(str(out)))
    verdict = compare_runs(earlier, this_run, compare_tasks=compare_tasks)
    rendered.update(render_verdict(verdict))
    rendered["junit.xml"] = add_verdict_suite(rendered["junit.xml"], verdict)
    return verdict


def _remove_stale_verdict(out: Path, names: Sequence[str]) -> None:
    for name in names:
        with contextlib.suppress(OSError):  # none there, or not ours to remove: nothing else depends on it
            (out / name).unlink()


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


@dataclass
class _Masked:
    """What the reports must mask, gathered as the trials run: each world's secrets (a world may make
    new ones every time), the model's key, and the fields each surface's tools redact."""

    secrets: set[str]
    fields: set[str]


def _one_trial(lab: Any, surface: Any, task: Task, client: Any, trial: int, masked: _Masked,
               redacted: set[str]) -> TrialResult:
    world = open_world(lab)
    receipts = new_receipts()
    try:
        registry = build_registry(lab, surface, world, receipts)
        try:
            secrets = world_secrets(lab, world)
            masked.secrets.update(secrets)
            masked.fields.update(redacted for name in registry.names() for redacted in registry.spec(name).redact)
            record = run_trial(task, surface.name, registry, client, trial=trial, secrets=secrets,
                               effects=lambda: _settled_effects(lab, world), redacted_values=redacted)
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
