"""A small shop world for the framework adapter tests (no tests here).

Tools: `refund` (a write keyed by refund_id), `get_customer` (a read whose output holds a secret token,
redacted), `close_account` (destructive, always needs a person's approval, keyed by action_id) and
`purge_all` (admin only, so an agent's session never lists it). The world counts every effect, so a test
can tell "ran once" from "answered once".
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import threading
from typing import Any

from agent_lab import Actor, MemoryAuditSink, Registry, ToolSpec

SECRET_TOKEN = "tok_live_8f3a9c1e77d24b"
AGENT = Actor(id="agent-7", tenant="shop", permissions={"refunds", "customers:read", "accounts:close"})


class ShopWorld:
    def __init__(self) -> None:
        self.refunds: list[dict[str, Any]] = []
        self.closed: list[dict[str, Any]] = []
        self.purged = 0
        self.refunded = threading.Event()  # set once a refund has taken effect
        self._lock = threading.Lock()

    def refund(self, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.refunds.append(dict(arguments))
            self.refunded.set()
            return {"refund_number": len(self.refunds), "order_id": arguments["order_id"], "cents": arguments["cents"]}

    def get_customer(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"customer_id": arguments["customer_id"], "name": "Ada Lovelace", "api_token": SECRET_TOKEN}

    def close_account(self, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.closed.append(dict(arguments))
        return {"closed": arguments["account_id"]}

    def purge_all(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.purged += 1
        return {"purged": True}


SPECS = {
    "refund": ToolSpec(
        name="refund", description="Refund part of an order. Retrying with the same refund_id never refunds twice.",
        input_schema={
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "pattern": "^A-[0-9]{4}$"},
                "cents": {"type": "integer", "minimum": 1},
                "refund_id": {"type": "string", "minLength": 4},
            },
            "required": ["order_id", "cents", "refund_id"],
            "additionalProperties": False,
        },
        required_permission="refunds", effect="write", idempotency_key="refund_id",
    ),
    "get_customer": ToolSpec(
        name="get_customer", description="Read a customer's profile.",
        input_schema={"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"],
                      "additionalProperties": False},
        required_permission="customers:read", redact=("api_token",),
    ),
    "close_account": ToolSpec(
        name="close_account", description="Close a customer's account. A person must approve each call.",
        input_schema={
            "type": "object",
            "properties": {"account_id": {"type": "string"}, "action_id": {"type": "string", "minLength": 4}},
            "required": ["account_id", "action_id"],
            "additionalProperties": False,
        },
        required_permission="accounts:close", effect="destructive", approval="always", idempotency_key="action_id",
    ),
    "purge_all": ToolSpec(
        name="purge_all", description="Delete every account.", input_schema={"type": "object", "properties": {}},
        required_permission="admin", effect="destructive",
    ),
}


def shop_registry() -> tuple[Registry, ShopWorld, MemoryAuditSink]:
    world = ShopWorld()
    audit = MemoryAuditSink()
    registry = Registry(audit=audit)
    for name, spec in SPECS.items():
        registry.register(spec, getattr(world, name))
    return registry, world, audit


def print_versions(*distributions: str) -> None:
    """Say which framework versions the test ran against (CI logs show it next to the results)."""
    found = []
    for name in distributions:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    print("framework versions: " + ", ".join(found), file=sys.stderr, flush=True)


def tool_view(text: Any) -> dict[str, Any]:
    """The JSON a tool handed the model (text, or already a dict); a framework's own text (a rejection
    message, say) as {"text": ...}."""
    if isinstance(text, dict):
        return text
    try:
        view = json.loads(text)
    except (TypeError, ValueError):
        return {"text": text}
    return view if isinstance(view, dict) else {"text": text}
