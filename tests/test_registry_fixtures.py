"""Shared tools, actors and sinks for the runtime tests (no tests here).

A tiny ticket world: two tenants, a read tool with a resource guard, a write tool with an idempotency
key that appends to an effect log, and helpers to build a registry around them.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from agent_lab.calls import ToolCall
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

TICKETS = {
    "T-1001": {"tenant": "acme", "subject": "Printer on fire"},
    "T-2001": {"tenant": "globex", "subject": "Globex secret merger"},
}

READER = Actor(id="u-reader", tenant="acme", permissions={"tickets:read"})
WRITER = Actor(id="u-writer", tenant="acme", permissions={"tickets:read", "tickets:write"})
OUTSIDER = Actor(id="u-out", tenant="acme", permissions=set())
GLOBEX_WRITER = Actor(id="u-globex", tenant="globex", permissions={"tickets:read", "tickets:write"})

TICKET_ID = {"type": "string", "pattern": "^T-[0-9]{4}$"}


def ticket_visible(arguments: Mapping[str, Any], actor: Actor) -> bool:
    """The resource guard of the lab: the ticket exists and belongs to the actor's tenant."""
    ticket = TICKETS.get(arguments.get("ticket_id"))
    return ticket is not None and ticket["tenant"] == actor.tenant


def get_ticket_spec(**overrides: Any) -> ToolSpec:
    options: dict[str, Any] = dict(
        name="get_ticket",
        description="Read one ticket of the caller's tenant.",
        input_schema={
            "type": "object",
            "properties": {"ticket_id": TICKET_ID},
            "required": ["ticket_id"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"ticket_id": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["ticket_id", "subject"],
        },
        required_permission="tickets:read",
        resource_guard=ticket_visible,
    )
    options.update(overrides)
    return ToolSpec(**options)


def get_ticket(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"ticket_id": arguments["ticket_id"], "subject": TICKETS[arguments["ticket_id"]]["subject"]}


def followup_spec(**overrides: Any) -> ToolSpec:
    options: dict[str, Any] = dict(
        name="record_ticket_followup",
        description="Record a follow-up note on a ticket.",
        input_schema={
            "type": "object",
            "properties": {
                "ticket_id": TICKET_ID,
                "note": {"type": "string", "maxLength": 500},
                "action_id": {"type": "string"},
                "api_token": {"type": "string"},
            },
            "required": ["ticket_id", "note", "action_id"],
            "additionalProperties": False,
        },
        required_permission="tickets:write",
        effect="write",
        idempotency_key="action_id",
        redact=("api_token",),
    )
    options.update(overrides)
    return ToolSpec(**options)


class EffectLog:
    """Counts side effects of the write tool (thread-safe)."""

    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record_followup(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.effects.append(dict(arguments))
            number = len(self.effects)
        return {"followup_id": f"F-{number}", "ticket_id": arguments["ticket_id"]}


class ListAuditSink:
    """An AuditSink that keeps records in a list."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))

    def close(self) -> None:
        pass


def followup_call(**changes: Any) -> ToolCall:
    arguments = {"ticket_id": "T-1001", "note": "Called the customer back.", "action_id": "act-1"}
    arguments.update(changes)
    return ToolCall("record_ticket_followup", arguments)


def ticket_registry(effects: EffectLog | None = None, **registry_options: Any) -> Registry:
    """A registry with get_ticket and record_ticket_followup (the write appends to `effects`)."""
    registry = Registry(**registry_options)
    registry.register(get_ticket_spec(), get_ticket)
    registry.register(followup_spec(), (effects or EffectLog()).record_followup)
    return registry
