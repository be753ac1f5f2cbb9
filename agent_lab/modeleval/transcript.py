"""The conversation of one trial, in a form no provider owns.

The agent loop appends three kinds of entries: what the user said, what the model answered (its text,
the calls it proposed, and the provider's own message so it can be sent back unchanged), and what the
registry answered each call. Each model client renders this transcript into its provider's request
format on every turn; nothing here knows a wire format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ..calls import InvalidJSONArguments, ToolCall, ToolResult

__all__ = [
    "ModelTurn",
    "ProposedCall",
    "ToolAnswer",
    "Transcript",
    "TurnContext",
    "Usage",
    "UserMessage",
]


@dataclass(frozen=True)
class ProposedCall:
    """One tool call as the model proposed it. `call` already carries the catalog's tool name (mapped
    back from the host's name) and parsed arguments, or an `InvalidJSONArguments` when they could not
    be read: such a call is a failed proposal, never an abstention."""

    call: ToolCall
    host_name: str  # the name exactly as the model wrote it

    @property
    def unparseable(self) -> bool:
        return isinstance(self.call.arguments, InvalidJSONArguments)


@dataclass(frozen=True)
class Usage:
    """Tokens the provider says it used for one turn (None when it did not say)."""

    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None


@dataclass(frozen=True)
class ModelTurn:
    """One answer of the model: text, proposed calls, and the provider's message for the next request.

    `latency_ms` is the wall time of the request as measured when it was made; a replayed turn carries
    the value recorded in the cassette, an in-process agent none (it is not a model)."""

    text: str
    calls: tuple[ProposedCall, ...]
    raw: Any = field(default=None, repr=False)  # the provider's message: argument text, never in a repr
    usage: Usage = field(default_factory=Usage)
    latency_ms: Optional[float] = None
    served_by: Optional[str] = None  # what answered, when the endpoint says so (e.g. a scripted stand-in)
    reported_model: Optional[str] = None  # the model id the provider's answer names (its "model" field)


@dataclass(frozen=True)
class UserMessage:
    text: str


@dataclass(frozen=True)
class ToolAnswer:
    """The registry's answer to one proposed call, as the model will see it (`result.to_model()`)."""

    call_id: str
    result: ToolResult


TranscriptEntry = Union[UserMessage, ModelTurn, ToolAnswer]
Transcript = tuple[TranscriptEntry, ...]


@dataclass(frozen=True)
class TurnContext:
    """Where a model request belongs, for cassette messages and infrastructure reports."""

    task_id: str
    surface: str
    trial: int
    step: int

    def describe(self) -> str:
        return f"task {self.task_id!r}, surface {self.surface!r}, trial {self.trial}, step {self.step}"
