"""What every model client offers the agent loop, whatever speaks behind it.

A `ModelClient` opens one `ModelSession` per trial over the surface's registry and the task's actor (the
session exports only the tools that actor may call, in the provider's shape), and the session answers
`turn(system, transcript, context)` with one `ModelTurn`. A client that cannot get an answer raises
`InfrastructureFailure`; everything the model itself got wrong is inside the turn, for grading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

from ...policy import Actor
from ...registry import Registry
from ..transcript import ModelTurn, Transcript, TurnContext

__all__ = ["ModelClient", "ModelInfo", "ModelSession"]


@dataclass(frozen=True)
class ModelInfo:
    """What the reports say about the model: the spec as given (without secrets), the wire format,
    and whether the answers come from a scripted agent rather than a model."""

    spec: str
    kind: str  # "http" or "python"
    api: str  # "openai-chat", "openai-responses", "anthropic-messages" or "python"
    model: Optional[str] = None
    scripted: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "api": self.api, "model": self.model,
                "scripted": self.scripted, "note": self.note}


class ModelSession(Protocol):
    def turn(self, system: str, transcript: Transcript, context: TurnContext) -> ModelTurn: ...


class ModelClient(Protocol):
    info: ModelInfo

    def session(self, registry: Registry, actor: Actor) -> ModelSession: ...
