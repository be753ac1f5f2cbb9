"""agent-lab: make an LLM agent's tools safe to call.

A model only proposes a tool call; `Registry.invoke` decides whether it may run, runs it under a
deadline and returns a `ToolResult` the model can act on. This module is the front door: everything in
`__all__` is the public, typed API; other modules are importable but not promised.
"""

from __future__ import annotations

from .calls import ToolCall, ToolResult
from .context import CallContext
from .errors import CATALOGUE, Category, NextAction, Outcome, ToolError, ToolFailure
from .policy import Actor, Approval
from .spec import ApprovalPolicy, Effect, RetryPolicy, ToolSpec

__version__ = "0.1.0"

__all__ = [
    "CATALOGUE",
    "Actor",
    "Approval",
    "ApprovalPolicy",
    "CallContext",
    "Category",
    "Effect",
    "NextAction",
    "Outcome",
    "RetryPolicy",
    "ToolCall",
    "ToolError",
    "ToolFailure",
    "ToolResult",
    "ToolSpec",
    "__version__",
]
