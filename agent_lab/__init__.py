"""agent-lab: make an LLM agent's tools safe to call.

A model only proposes a tool call; `Registry.invoke` decides whether it may run, runs it under a
deadline and returns a `ToolResult` the model can act on. This module is the front door: everything in
`__all__` is the public, typed API. Host formats live in `agent_lab.adapters` and the MCP stdio server in
`agent_lab.mcp`, the MCP client that imports a foreign server's tools in `agent_lab.mcp_client`; other
modules are importable but not promised.
"""

from __future__ import annotations

from .audit import AuditSink, JsonlAuditSink, MemoryAuditSink
from .calls import ToolCall, ToolResult
from .context import CallContext
from .cursor import CursorCodec
from .errors import CATALOGUE, Category, NextAction, Outcome, ToolError, ToolFailure
from .fingerprint import NotCanonicalJSON, canonical_json, fingerprint
from .interrupts import tracking_interrupts
from .stores import (
    InMemoryReceiptStore,
    Lapse,
    PostgresReceiptStore,
    ReceiptKey,
    ReceiptStore,
    ReceiptStoreUnavailable,
    Reservation,
    ReservationStatus,
    SqliteReceiptStore,
)
from .policy import Actor, Approval
from .provenance import Provenance
from .redaction import REDACTED, redact
from .registry import Registry
from .retry import Backoff, Retrier, invoke_with_retries, should_retry
from .schema import SchemaError, Validator, Violation
from .signature import Describe, Len, Pattern, Range, tool
from .spec import ApprovalPolicy, Effect, Execution, RetryPolicy, ToolSpec

__version__ = "0.1.0"

__all__ = [
    "CATALOGUE",
    "REDACTED",
    "Actor",
    "Approval",
    "ApprovalPolicy",
    "AuditSink",
    "Backoff",
    "CallContext",
    "Category",
    "CursorCodec",
    "Describe",
    "Effect",
    "Execution",
    "InMemoryReceiptStore",
    "JsonlAuditSink",
    "Lapse",
    "Len",
    "MemoryAuditSink",
    "NextAction",
    "NotCanonicalJSON",
    "Outcome",
    "Pattern",
    "PostgresReceiptStore",
    "Provenance",
    "Range",
    "ReceiptKey",
    "ReceiptStore",
    "ReceiptStoreUnavailable",
    "Registry",
    "Reservation",
    "Retrier",
    "ReservationStatus",
    "RetryPolicy",
    "SchemaError",
    "SqliteReceiptStore",
    "ToolCall",
    "ToolError",
    "ToolFailure",
    "ToolResult",
    "ToolSpec",
    "Validator",
    "Violation",
    "__version__",
    "canonical_json",
    "fingerprint",
    "invoke_with_retries",
    "redact",
    "should_retry",
    "tool",
    "tracking_interrupts",
]
