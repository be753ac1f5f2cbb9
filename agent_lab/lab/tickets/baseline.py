"""`wide-tool-v1`: the tool surface many agents start with, kept as the lab's baseline.

One `ticket_operation` tool takes a free `operation` string and a free `payload` object. It declares
no permission, no approval, no idempotency key and no output schema; every failure is the same generic
`tool_failed`; listing returns every ticket of every tenant. It runs on the library's own `Registry` (a
permissive spec with a long timeout), so the comparison measures the surface, not a different runtime.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from ...errors import Category, ToolFailure
from ...registry import Registry
from ...spec import Effect, ToolSpec
from .world import TicketBackend

__all__ = ["BASELINE_NAME", "baseline_specs", "build_baseline_registry"]

BASELINE_NAME = "wide-tool-v1"
BASELINE_TIMEOUT_MS = 30_000
BASELINE_MAX_OUTPUT_BYTES = 16 * 1024 * 1024  # effectively no budget

_SPEC_ARGS: dict[str, Any] = {
    "name": "ticket_operation",
    "description": "Perform an operation on tickets. Put the operation name in `operation` and its data in `payload`.",
    "input_schema": {
        "type": "object",
        "properties": {"operation": {"type": "string"}, "payload": {"type": "object"}},
        "required": ["operation"],
    },
    "effect": Effect.WRITE,
    "timeout_ms": BASELINE_TIMEOUT_MS,
    "max_output_bytes": BASELINE_MAX_OUTPUT_BYTES,
}


def baseline_specs() -> list[ToolSpec]:
    """The baseline's one tool spec (it carries warnings: a write without an idempotency key)."""
    return [_baseline_spec()]


@functools.lru_cache(maxsize=1)
def _baseline_spec() -> ToolSpec:
    """Built once: the spec refers to no world (a frozen value every registry may share), so the lab
    need not rebuild it for every case it replays."""
    return ToolSpec(**_SPEC_ARGS)


def build_baseline_registry(backend: TicketBackend, **registry_options: Any) -> Registry:
    """A registry exposing only `ticket_operation` over `backend`."""
    registry = Registry(**registry_options)
    registry.register(_baseline_spec(), _handler(backend))
    return registry


def _handler(backend: TicketBackend) -> Callable[[Mapping[str, Any]], Any]:
    operations = _operations(backend)

    def ticket_operation(arguments: Mapping[str, Any]) -> Any:
        payload = arguments.get("payload") or {}
        try:
            return operations[arguments["operation"]](payload)
        except Exception:  # the baseline's weakness: every failure looks the same
            raise ToolFailure("tool_failed", "ticket_operation failed.", category=Category.INTERNAL) from None

    return ticket_operation


def _operations(backend: TicketBackend) -> dict[str, Callable[[Mapping[str, Any]], Any]]:
    def need_ticket(ticket: Any) -> Any:
        if ticket is None:
            raise LookupError("no such ticket")
        return ticket

    return {
        "get": lambda p: need_ticket(backend.get(p["ticket_id"])),
        "list": lambda p: backend.tickets(),
        "slow_lookup": lambda p: need_ticket(backend.lookup_live(p["ticket_id"])),
        "thread": lambda p: [message["body"] for message in backend.thread(p["ticket_id"])],
        "preview_followup": lambda p: {"ticket": need_ticket(backend.get(p["ticket_id"])), "note": p["note"]},
        "record_followup": lambda p: backend.record_followup(p["ticket_id"], p["note"], action_id=p.get("action_id")),
        "credit": lambda p: backend.issue_credit(
            p["ticket_id"], p["amount_cents"], p.get("reason", ""), action_id=p.get("action_id")
        ),
    }
