"""model-eval: does a model choose, fill and recover better on one tool surface than another?

A model proposes, `Registry.invoke` decides, the model sees `to_model()`; tasks say what success means;
every trial is graded and measured per surface and split, with pass^k over repeats; cassettes make a
run over a network model replayable offline. The CLI front door is `agent-lab model-eval`; the library
one is `run_model_eval` / `evaluate_model`.
"""

from .agent import Trial, run_trial
from .cassettes import Cassette, CassetteError, MissingRecording
from .metrics import UnequalTrials, pass_hat_k, wilson_interval
from .models import InfrastructureFailure, ModelSpecError, open_model
from .runner import DEFAULT_MODEL, ModelEvaluation, evaluate_model, run_model_eval
from .tasks import Task, TaskFileError, load_tasks

__all__ = [
    "DEFAULT_MODEL",
    "Cassette",
    "CassetteError",
    "InfrastructureFailure",
    "MissingRecording",
    "ModelEvaluation",
    "ModelSpecError",
    "Task",
    "TaskFileError",
    "Trial",
    "UnequalTrials",
    "evaluate_model",
    "load_tasks",
    "open_model",
    "pass_hat_k",
    "run_model_eval",
    "run_trial",
    "wilson_interval",
]
