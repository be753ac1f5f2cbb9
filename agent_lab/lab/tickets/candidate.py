"""`typed-registry-v2`: the same ticket system exposed as small typed tools with runtime contracts.

Each tool says exactly what it takes (closed input schemas with patterns and bounds), what it returns
(an output schema on every tool), who may call it (a permission plus a tenant guard on every ticket id),
whether a person must approve it, and how a repeated write is recognised (`action_id`). The descriptions
are written for the model: they are the only documentation it reads.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any, Callable, Mapping

from ...context import CallContext
from ...errors import ToolFailure
from ...policy import Actor
from ...registry import Registry
from ...spec import ApprovalPolicy, Effect, RetryPolicy, ToolSpec
from .world import PRIORITIES, STATUSES, TicketBackend

__all__ = [
    "CANDIDATE_NAME",
    "CREDIT_APPROVAL_THRESHOLD_CENTS",
    "LIST_PAGE_SIZE_MAX",
    "build_candidate_registry",
    "candidate_specs",
]

CANDIDATE_NAME = "typed-registry-v2"
LIST_PAGE_SIZE_MAX = 10
CREDIT_APPROVAL_THRESHOLD_CENTS = 5_000  # credits above 50.00 need a person's approval
THREAD_LIMIT_MAX = 50
THREAD_OUTPUT_BUDGET_BYTES = 2_048
LOOKUP_TIMEOUT_MS = 500  # a fast lookup finishes well inside it on a loaded CI machine; the slow one is held 1 s
WRITE_TIMEOUT_MS = 400  # the slow write is held 1 s: the deadline passes long before it lands

# -- shared schema pieces -------------------------------------------------------------------------

TICKET_ID = {
    "type": "string",
    "pattern": "^T-[0-9]{4}$",
    "description": "Ticket id as shown to the user, e.g. \"T-1001\".",
}
ACTION_ID = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_-]{8,64}$",
    "description": (
        "A unique id you choose for this one action (8-64 letters, digits, - or _). Reuse the same id "
        "when you retry the same action; use a new id for a different action."
    ),
}
NOTE = {"type": "string", "minLength": 1, "maxLength": 500, "description": "The follow-up text, 1-500 characters."}
TICKET_SUMMARY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "status": {"enum": list(STATUSES)},
    },
    "required": ["id", "title", "status"],
    "additionalProperties": False,
}
TICKET: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "status": {"enum": list(STATUSES)},
        "priority": {"enum": list(PRIORITIES)},
        "customer_email": {"type": "string", "description": "Masked: never shown to the model."},
    },
    "required": ["id", "title", "status", "priority", "customer_email"],
    "additionalProperties": False,
}


def _object(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": required, "additionalProperties": False}


def _ticket_guard(backend: TicketBackend) -> Callable[[Mapping[str, Any], Actor], bool]:
    """The resource guard: the ticket exists and belongs to the actor's tenant (else: not_found)."""

    def ticket_visible(arguments: Mapping[str, Any], actor: Actor) -> bool:
        return backend.visible(str(arguments.get("ticket_id")), actor.tenant)

    return ticket_visible


def _credit_needs_approval(arguments: Mapping[str, Any]) -> bool:
    return arguments["amount_cents"] > CREDIT_APPROVAL_THRESHOLD_CENTS


# -- the specs -----------------------------------------------------------------------------------


def candidate_specs(backend: TicketBackend | None = None) -> list[ToolSpec]:
    """The typed-registry-v2 tool specs; guards check tickets against `backend` (a fresh one if None).

    tool-eval builds this surface for every case, and building the same seven contracts again each
    time was a large part of its CPU, so they are built (checked, compiled) once per process. Whether a
    ticket is visible to a tenant depends only on the backend's tickets, which every backend shares
    (the seed, never changed): the specs whose guard checks that seed serve every such backend as they
    are; a backend with tickets of its own gets copies guarded by itself."""
    seeded = backend is None or backend.has_seed_tickets()
    with _BUILDING:  # replays starting together would each build them: lru_cache waits for no call under way
        contracts = _seed_guarded_contracts() if seeded else _contracts()
    if backend is None or seeded:
        return list(contracts)
    guard = _ticket_guard(backend)
    return [dataclasses.replace(spec, resource_guard=guard) if spec.resource_guard is _UNBOUND_GUARD else spec
            for spec in contracts]


_BUILDING = threading.Lock()


@functools.lru_cache(maxsize=1)
def _seed_guarded_contracts() -> tuple[ToolSpec, ...]:
    guard = _ticket_guard(TicketBackend())  # it answers as every backend holding the seed tickets does
    return tuple(dataclasses.replace(spec, resource_guard=guard) if spec.resource_guard is _UNBOUND_GUARD else spec
                 for spec in _contracts())


def _unbound_guard(arguments: Mapping[str, Any], actor: Actor) -> bool:
    """The guard the contracts are built with, replaced by one over a backend's tickets before any
    spec is handed out: refuses all."""
    return False


_UNBOUND_GUARD = _unbound_guard


@functools.lru_cache(maxsize=1)
def _contracts() -> tuple[ToolSpec, ...]:
    guard = _UNBOUND_GUARD
    return (
        ToolSpec(
            name="get_ticket",
            title="Get ticket",
            description=(
                "Read one ticket of your organisation by id: title, status and priority. The customer's "
                "email is masked. A ticket that does not exist or is not yours answers not_found."
            ),
            input_schema=_object({"ticket_id": TICKET_ID}, ["ticket_id"]),
            output_schema=_object({"ticket": TICKET}, ["ticket"]),
            required_permission="tickets:read",
            resource_guard=guard,
            redact=("customer_email",),
        ),
        ToolSpec(
            name="list_tickets",
            title="List tickets",
            description=(
                f"List your organisation's tickets in id order, at most {LIST_PAGE_SIZE_MAX} per page, "
                "optionally only those with one status. When next_cursor is not null, call again with the "
                "same status and cursor=next_cursor for the next page; never build a cursor yourself."
            ),
            input_schema=_object(
                {
                    "status": {"enum": list(STATUSES), "description": "Only tickets with this status."},
                    "page_size": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": LIST_PAGE_SIZE_MAX,
                        "default": LIST_PAGE_SIZE_MAX,
                        "description": f"Tickets per page, 1-{LIST_PAGE_SIZE_MAX}.",
                    },
                    "cursor": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 512,
                        "description": "The next_cursor of the previous page, unchanged.",
                    },
                },
                [],
            ),
            output_schema=_object(
                {
                    "items": {"type": "array", "items": TICKET_SUMMARY, "maxItems": LIST_PAGE_SIZE_MAX},
                    "next_cursor": {"type": ["string", "null"]},
                },
                ["items", "next_cursor"],
            ),
            required_permission="tickets:read",
        ),
        ToolSpec(
            name="get_ticket_thread",
            title="Get ticket thread",
            description=(
                f"Read the newest messages of a ticket's conversation (limit 1-{THREAD_LIMIT_MAX}, default 20). "
                "If the answer is output_too_large, ask again with a smaller limit."
            ),
            input_schema=_object(
                {
                    "ticket_id": TICKET_ID,
                    "limit": {"type": "integer", "minimum": 1, "maximum": THREAD_LIMIT_MAX, "default": 20},
                },
                ["ticket_id"],
            ),
            output_schema=_object(
                {
                    "ticket_id": {"type": "string"},
                    "messages": {
                        "type": "array",
                        "items": _object({"author": {"enum": ["customer", "agent"]}, "body": {"type": "string"}},
                                         ["author", "body"]),
                    },
                },
                ["ticket_id", "messages"],
            ),
            required_permission="tickets:read",
            resource_guard=guard,
            max_output_bytes=THREAD_OUTPUT_BUDGET_BYTES,
        ),
        ToolSpec(
            name="slow_ticket_lookup",
            title="Look up live ticket status",
            description=(
                "Ask the upstream helpdesk for a ticket's live status and priority. The helpdesk is sometimes "
                "slow: a tool_timeout answer is safe to retry once."
            ),
            input_schema=_object({"ticket_id": TICKET_ID}, ["ticket_id"]),
            output_schema=_object(
                {
                    "ticket_id": {"type": "string"},
                    "status": {"enum": list(STATUSES)},
                    "priority": {"enum": list(PRIORITIES)},
                },
                ["ticket_id", "status", "priority"],
            ),
            required_permission="tickets:read",
            resource_guard=guard,
            retry_policy=RetryPolicy.TRANSIENT,
            timeout_ms=LOOKUP_TIMEOUT_MS,
            open_world=True,
        ),
        ToolSpec(
            name="preview_ticket_followup",
            title="Preview a follow-up",
            description=(
                "Show what record_ticket_followup would write, without writing anything. Use it first, so a "
                "person can approve the exact follow-up."
            ),
            input_schema=_object({"ticket_id": TICKET_ID, "note": NOTE}, ["ticket_id", "note"]),
            output_schema=_object(
                {"ticket_id": {"type": "string"}, "ticket_title": {"type": "string"}, "note": {"type": "string"}},
                ["ticket_id", "ticket_title", "note"],
            ),
            required_permission="tickets:read",
            resource_guard=guard,
        ),
        ToolSpec(
            name="record_ticket_followup",
            title="Record a follow-up",
            description=(
                "Add a follow-up note to a ticket. Needs a person's approval of exactly these arguments "
                "(approval_required: ask for it; approval_mismatch: the arguments changed). Retrying with the "
                "same action_id never writes twice. On outcome unknown, do not send a new action_id: repeat "
                "the same call later to learn what happened."
            ),
            input_schema=_object({"ticket_id": TICKET_ID, "note": NOTE, "action_id": ACTION_ID},
                                 ["ticket_id", "note", "action_id"]),
            output_schema=_object(
                {"followup": _object({"id": {"type": "string"}, "ticket_id": {"type": "string"},
                                      "note": {"type": "string"}}, ["id", "ticket_id", "note"])},
                ["followup"],
            ),
            required_permission="tickets:write",
            resource_guard=guard,
            effect=Effect.WRITE,
            approval=ApprovalPolicy.ALWAYS,
            idempotency_key="action_id",
            timeout_ms=WRITE_TIMEOUT_MS,
        ),
        ToolSpec(
            name="issue_ticket_credit",
            title="Issue a credit",
            description=(
                "Credit the customer of a ticket, in cents (1-100000). Credits above "
                f"{CREDIT_APPROVAL_THRESHOLD_CENTS} cents need a person's approval of exactly these arguments. "
                "Retrying with the same action_id never credits twice."
            ),
            input_schema=_object(
                {
                    "ticket_id": TICKET_ID,
                    "amount_cents": {"type": "integer", "minimum": 1, "maximum": 100_000},
                    "reason": {"type": "string", "minLength": 1, "maxLength": 200},
                    "action_id": ACTION_ID,
                },
                ["ticket_id", "amount_cents", "reason", "action_id"],
            ),
            output_schema=_object(
                {"credit": _object({"id": {"type": "string"}, "ticket_id": {"type": "string"},
                                    "amount_cents": {"type": "integer"}}, ["id", "ticket_id", "amount_cents"])},
                ["credit"],
            ),
            required_permission="tickets:credit",
            resource_guard=guard,
            effect=Effect.WRITE,
            approval=ApprovalPolicy.CONDITIONAL,
            approval_condition=_credit_needs_approval,
            idempotency_key="action_id",
            timeout_ms=WRITE_TIMEOUT_MS,
        ),
    )


# -- the handlers --------------------------------------------------------------------------------


def _handlers(backend: TicketBackend) -> dict[str, Callable[..., Any]]:
    def visible_ticket(ticket_id: str, ctx: CallContext) -> dict[str, Any]:
        # The registry's guard already refused invisible tickets; this keeps the handler safe on its own.
        ticket = backend.get(ticket_id) if backend.visible(ticket_id, ctx.actor.tenant) else None
        if ticket is None:
            raise ToolFailure("not_found", "No ticket with that id is visible to you.")
        return ticket

    def get_ticket(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        ticket = visible_ticket(arguments["ticket_id"], ctx)
        return {"ticket": {name: ticket[name] for name in TICKET["properties"]}}

    def list_tickets(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        status = arguments.get("status")
        page_size = int(arguments.get("page_size", LIST_PAGE_SIZE_MAX))
        query = {"tenant": ctx.actor.tenant, "status": status}
        start = ctx.cursors.read(arguments["cursor"], query) if "cursor" in arguments else 0  # type: ignore[union-attr]
        matching = backend.tickets(tenant=ctx.actor.tenant, status=status)
        page = matching[start:start + page_size]
        end = start + len(page)
        return {
            "items": [{name: ticket[name] for name in TICKET_SUMMARY["properties"]} for ticket in page],
            "next_cursor": ctx.cursors.issue(end, query) if end < len(matching) else None,  # type: ignore[union-attr]
        }

    def get_ticket_thread(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        visible_ticket(arguments["ticket_id"], ctx)
        limit = int(arguments.get("limit", 20))
        messages = backend.thread(arguments["ticket_id"])[-limit:]
        return {
            "ticket_id": arguments["ticket_id"],
            "messages": [{"author": message["author"], "body": message["body"]} for message in messages],
        }

    def slow_ticket_lookup(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        visible_ticket(arguments["ticket_id"], ctx)
        ticket = backend.lookup_live(arguments["ticket_id"])
        if ticket is None:
            raise ToolFailure("not_found", "No ticket with that id is visible to you.")
        return {"ticket_id": ticket["id"], "status": ticket["status"], "priority": ticket["priority"]}

    def preview_ticket_followup(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        ticket = visible_ticket(arguments["ticket_id"], ctx)
        return {"ticket_id": ticket["id"], "ticket_title": ticket["title"], "note": arguments["note"]}

    def record_ticket_followup(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        visible_ticket(arguments["ticket_id"], ctx)
        followup = backend.record_followup(arguments["ticket_id"], arguments["note"], action_id=arguments["action_id"])
        return {"followup": followup}

    def issue_ticket_credit(arguments: Mapping[str, Any], ctx: CallContext) -> dict[str, Any]:
        visible_ticket(arguments["ticket_id"], ctx)
        credit = backend.issue_credit(
            arguments["ticket_id"], int(arguments["amount_cents"]), arguments["reason"], action_id=arguments["action_id"]
        )
        return {"credit": {name: credit[name] for name in ("id", "ticket_id", "amount_cents")}}

    return {
        "get_ticket": get_ticket,
        "list_tickets": list_tickets,
        "get_ticket_thread": get_ticket_thread,
        "slow_ticket_lookup": slow_ticket_lookup,
        "preview_ticket_followup": preview_ticket_followup,
        "record_ticket_followup": record_ticket_followup,
        "issue_ticket_credit": issue_ticket_credit,
    }


def build_candidate_registry(backend: TicketBackend, **registry_options: Any) -> Registry:
    """A registry with every typed-registry-v2 tool over `backend`."""
    registry = Registry(**registry_options)
    handlers = _handlers(backend)
    for spec in candidate_specs(backend):
        registry.register(spec, handlers[spec.name])
    return registry
