"""agent-lab: make an LLM agent's tools safe to call.

A model only proposes a tool call; `Registry.invoke` decides whether it may run, runs it under a
deadline and returns a `ToolResult` the model can act on. This module is the front door: everything in
`__all__` is the public, typed API. Host formats live in `agent_lab.adapters` and the MCP stdio server in
`agent_lab.mcp`, the MCP client that imports a foreign server's tools in `agent_lab.mcp_client`; other
modules are importable but not promised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name is imported on first use
    from .audit import AuditSink, JsonlAuditSink, MemoryAuditSink
    from .calls import ToolCall, ToolResult
    from .context import CallContext
    from .cursor import CursorCodec
    from .errors import CATALOGUE, Category, NextAction, Outcome, ToolError, ToolFailure
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
    from .interrupts import tracking_interrupts
    from .mcp_http import HttpLimits, McpHttpServer, serve_gateway_http, serve_http
    from .policy import Actor, Approval
    from .provenance import Provenance
    from .redaction import REDACTED, redact
    from .registry import Registry
    from .retry import Backoff, Retrier, invoke_with_retries, should_retry
    from .schema import SchemaError, Validator, Violation
    from .signature import Describe, Len, Pattern, Range, tool
    from .spec import ApprovalPolicy, Effect, Execution, RetryPolicy, TaskSupport, ToolSpec
    from .tasks import TaskState, TaskStatus

# Imported now: `fingerprint` names both a submodule and a function, and importing the submodule later
# (the registry does) would make `agent_lab.fingerprint` the module.
from .fingerprint import NotCanonicalJSON, canonical_json, fingerprint

__version__ = "0.1.0"

# Public name -> the submodule defining it. `import agent_lab` (and so every command line: `agent_lab.cli`
# is a submodule) loads none of them: a command imports what it uses, and `agent_lab.Registry` imports
# the registry when it is first asked for (PEP 562).
_EXPORTS = {
    "AuditSink": "audit",
    "JsonlAuditSink": "audit",
    "MemoryAuditSink": "audit",
    "ToolCall": "calls",
    "ToolResult": "calls",
    "CallContext": "context",
    "CursorCodec": "cursor",
    "CATALOGUE": "errors",
    "Category": "errors",
    "NextAction": "errors",
    "Outcome": "errors",
    "ToolError": "errors",
    "ToolFailure": "errors",
    "InMemoryReceiptStore": "stores",
    "Lapse": "stores",
    "PostgresReceiptStore": "stores",
    "ReceiptKey": "stores",
    "ReceiptStore": "stores",
    "ReceiptStoreUnavailable": "stores",
    "Reservation": "stores",
    "ReservationStatus": "stores",
    "SqliteReceiptStore": "stores",
    "Actor": "policy",
    "Approval": "policy",
    "Provenance": "provenance",
    "tracking_interrupts": "interrupts",
    "HttpLimits": "mcp_http",
    "McpHttpServer": "mcp_http",
    "serve_gateway_http": "mcp_http",
    "serve_http": "mcp_http",
    "REDACTED": "redaction",
    "redact": "redaction",
    "Registry": "registry",
    "Backoff": "retry",
    "Retrier": "retry",
    "invoke_with_retries": "retry",
    "should_retry": "retry",
    "SchemaError": "schema",
    "Validator": "schema",
    "Violation": "schema",
    "Describe": "signature",
    "Len": "signature",
    "Pattern": "signature",
    "Range": "signature",
    "tool": "signature",
    "ApprovalPolicy": "spec",
    "Effect": "spec",
    "Execution": "spec",
    "RetryPolicy": "spec",
    "TaskSupport": "spec",
    "ToolSpec": "spec",
    "TaskState": "tasks",
    "TaskStatus": "tasks",
}

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
    "HttpLimits",
    "InMemoryReceiptStore",
    "JsonlAuditSink",
    "Lapse",
    "Len",
    "McpHttpServer",
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
    "TaskState",
    "TaskStatus",
    "TaskSupport",
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
    "serve_gateway_http",
    "serve_http",
    "should_retry",
    "tool",
    "tracking_interrupts",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
