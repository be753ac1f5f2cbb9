"""model-eval: does a model choose, fill and recover better on one tool surface than another?

A model proposes, `Registry.invoke` decides, the model sees `to_model()`; tasks say what success means;
every trial is graded and measured per surface and split, with pass^k over repeats; cassettes make a
run over a network model replayable offline; a baseline verdict judges one run against an earlier one
(regressed, fixed, still failing, unchanged, inconclusive). The CLI front door is `agent-lab model-eval`; the library
one is `run_model_eval` / `evaluate_model`.
"""

from .agent import Trial, run_trial
from .cassettes import Cassette, CassetteError, MissingRecording
from .metrics import UnequalTrials, pass_hat_k, wilson_interval
from .models import InfrastructureFailure, ModelSpecError, open_model
from .runner import DEFAULT_MODEL, ModelEvaluation, evaluate_model, run_model_eval
from .runreports import BaselineError, RunReports, load_run
from .tasks import Task, TaskFileError, load_tasks
from .verdict import Verdict, compare_runs

__all__ = [
    "DEFAULT_MODEL",
    "BaselineError",
    "Cassette",
    "CassetteError",
    "InfrastructureFailure",
    "MissingRecording",
    "ModelEvaluation",
    "ModelSpecError",
    "RunReports",
    "Task",
    "TaskFileError",
    "Trial",
    "UnequalTrials",
    "Verdict",
    "compare_runs",
    "evaluate_model",
    "load_run",
    "load_tasks",
    "open_model",
    "pass_hat_k",
    "run_model_eval",
    "run_trial",
    "wilson_interval",
]
