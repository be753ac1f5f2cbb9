"""Model clients for model-eval: three HTTP wire formats and in-process agents (see `clients`)."""

from .base import ModelClient, ModelInfo, ModelSession
from .clients import HttpModel, ModelSpecError, PythonModel, agent_messages, open_model, parse_model_spec
from .http import HttpRequest, HttpResponse, InfrastructureFailure, Transport, UrllibTransport, is_secret_header

__all__ = [
    "HttpModel",
    "HttpRequest",
    "HttpResponse",
    "InfrastructureFailure",
    "ModelClient",
    "ModelInfo",
    "ModelSession",
    "ModelSpecError",
    "PythonModel",
    "Transport",
    "UrllibTransport",
    "agent_messages",
    "is_secret_header",
    "open_model",
    "parse_model_spec",
]
