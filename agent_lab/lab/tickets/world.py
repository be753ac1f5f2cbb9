"""An in-memory ticket system: the world both surfaces of the ticket lab act on.

Every case replays against a fresh `TicketBackend`, so its data is deterministic: 25 tickets
(T-1001 .. T-1025) shared by two tenants, each with a customer email that is a secret. Writes go
through `record_followup` and `issue_credit`; each appends one entry to `effects`, so the lab can count
side effects and see duplicates (the same action applied twice). Some paths are deliberately slow or
broken so the lab can replay timeouts, a handler crash and legacy data that breaks an output schema.

Given a `directory`, the backend keeps what it writes (follow-ups, credits, effects) in journals there
(`agent_lab.lab.journal.Journal`), so a backend opened on the same directory in another process sees
the same writes: that is how the lab's crash cases find the effect of a process they killed.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Union

from ..journal import Journal

__all__ = [
    "CORRUPT_THREAD_TICKET",
    "LEGACY_PRIORITY_TICKET",
    "LONG_THREAD_TICKET",
    "PRIORITIES",
    "SECRET_FIELDS",
    "STATUSES",
    "TENANTS",
    "Effect",
    "TicketBackend",
]

TENANTS = ("acme", "globex")
STATUSES = ("open", "pending", "closed")
PRIORITIES = ("low", "normal", "high", "urgent")
SECRET_FIELDS = frozenset({"customer_email"})  # values that must never reach a model or a report

FIRST_TICKET_NUMBER = 1001
TICKET_COUNT = 25
ACME_TICKET_COUNT = 20  # T-1001..T-1020 belong to acme, T-1021..T-1025 to globex
LONG_THREAD_TICKET = "T-1007"  # a thread far larger than any sane output budget
CORRUPT_THREAD_TICKET = "T-1013"  # a thread record damaged by an old migration: reading it crashes
LEGACY_PRIORITY_TICKET = "T-1017"  # imported from an old system with a priority outside the enum
LONG_THREAD_MESSAGES = 60
WAIT_LIMIT_S = 5.0  # how long the lab waits for slow writes to settle before giving up


@dataclass(frozen=True)
class Effect:
    """One side effect the backend applied: what kind, to which ticket, and for which action."""

    kind: str  # "followup" or "credit"
    ticket_id: str
    action: str  # the caller's action id, or "-" when it sent none
    content: str  # a digest of what was written, so a repeat of the same action is recognisable


def _ticket(number: int) -> dict[str, Any]:
    index = number - FIRST_TICKET_NUMBER
    tenant = TENANTS[0] if index < ACME_TICKET_COUNT else TENANTS[1]
    ticket_id = f"T-{number}"
    priority = PRIORITIES[index % len(PRIORITIES)]
    if ticket_id == LEGACY_PRIORITY_TICKET:
        priority = "p0"
    return {
        "id": ticket_id,
        "tenant": tenant,
        "title": f"Ticket {number}: {_TITLES[index % len(_TITLES)]}",
        "status": STATUSES[index % len(STATUSES)],
        "priority": priority,
        "customer_email": f"customer.{number}@{tenant}-mail.example",
    }


_TITLES = (
    "Login fails after password reset",
    "Invoice shows the wrong currency",
    "Export to CSV times out",
    "Cannot add a second admin",
    "Webhook retries flood the endpoint",
)


def _thread(ticket_id: str) -> list[Any]:
    if ticket_id == CORRUPT_THREAD_TICKET:
        return [{"author": "agent", "body": "Looking into it."}, None]
    count = LONG_THREAD_MESSAGES if ticket_id == LONG_THREAD_TICKET else 2
    return [
        {
            "author": "customer" if n % 2 == 0 else "agent",
            "body": f"Message {n + 1} on {ticket_id}: " + "steps to reproduce and logs attached. " * 3,
        }
        for n in range(count)
    ]


@functools.lru_cache(maxsize=1)
def _seed() -> tuple[dict[str, dict[str, Any]], dict[str, list[Any]]]:
    """The tickets and threads every world starts from (ticket id -> ticket, ticket id -> messages)."""
    tickets = {ticket["id"]: ticket
               for ticket in (_ticket(n) for n in range(FIRST_TICKET_NUMBER, FIRST_TICKET_NUMBER + TICKET_COUNT))}
    return tickets, {ticket_id: _thread(ticket_id) for ticket_id in tickets}


def _within(number: int, limit: int | None) -> bool:
    """Whether the `number`-th operation is among the first `limit` (None: no limit)."""
    return limit is None or number <= limit


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class TicketBackend:
    """A fresh, deterministic ticket store with an observable side-effect log.

    lookup_delay_ms / slow_lookups: the upstream lookup is held this long, for the first `slow_lookups`
    lookups only (None: every lookup). write_delay_ms / slow_writes: likewise for writes, which are held
    after they start and before they apply their effect (a slow database), so a caller's deadline can
    pass while the write is still running. A held operation also ends as soon as the lab calls
    `release_held()` (its `settle` step): the lab decides when a slow operation finishes, so a case
    does not depend on how fast the machine is (a sleep would race the caller's deadline under load).
    Thread-safe: the registry runs handlers on worker threads. With `directory`, writes are kept in
    journals there, shared with every backend opened on that directory (see the module docstring); the
    counters of started and running writes stay per process.
    """

    def __init__(self, *, lookup_delay_ms: int = 0, slow_lookups: int | None = None, write_delay_ms: int = 0,
                 slow_writes: int | None = None, directory: Union[str, "os.PathLike[str]", None] = None) -> None:
        self.lookup_delay_s = lookup_delay_ms / 1000.0
        self.slow_lookups = slow_lookups
        self.write_delay_s = write_delay_ms / 1000.0
        self.slow_writes = slow_writes
        # Read-only after it is made, and every read hands out a copy: one seed serves every world.
        self._tickets, self._threads = _seed()
        self._followups: Any = [] if directory is None else Journal(directory, "followups")
        self._credits: Any = [] if directory is None else Journal(directory, "credits")
        self._effects: Any = [] if directory is None else Journal(directory, "effects")  # Effect, or its dict
        self._lookups = 0
        self._writes_started = 0
        self._writes_running = 0
        self._releases = 0  # how many times the lab released held operations
        self._changed = threading.Condition()

    # -- reads -----------------------------------------------------------------------------------

    def get(self, ticket_id: str) -> dict[str, Any] | None:
        """A copy of the ticket, or None when there is no such ticket."""
        ticket = self._tickets.get(ticket_id)
        return copy.deepcopy(ticket) if ticket is not None else None

    def has_seed_tickets(self) -> bool:
        """Whether this backend's tickets are the seed every backend starts from (always, today: no
        option changes them), so that any such backend says alike which tickets a tenant sees."""
        return self._tickets is _seed()[0]

    def visible(self, ticket_id: str, tenant: str) -> bool:
        """True when the ticket exists and belongs to `tenant` (anything else is invisible)."""
        ticket = self._tickets.get(ticket_id)
        return ticket is not None and ticket["tenant"] == tenant

    def tickets(self, *, tenant: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Copies of the matching tickets in id order (tenant None: every tenant)."""
        return [
            copy.deepcopy(ticket)
            for ticket_id, ticket in sorted(self._tickets.items())
            if (tenant is None or ticket["tenant"] == tenant) and (status is None or ticket["status"] == status)
        ]

    def lookup_live(self, ticket_id: str) -> dict[str, Any] | None:
        """The slow upstream path: like `get`, after the configured hold."""
        with self._changed:
            self._lookups += 1
            if _within(self._lookups, self.slow_lookups):
                self._hold(self.lookup_delay_s)
        return self.get(ticket_id)

    def thread(self, ticket_id: str) -> list[Any]:
        """The ticket's messages, oldest first (a copy; one legacy thread holds a damaged record)."""
        return copy.deepcopy(self._threads.get(ticket_id, []))

    def secret_values(self) -> frozenset[str]:
        """Every secret value the backend holds, so the lab can prove none reached the model."""
        return frozenset(
            str(ticket[name]) for ticket in self._tickets.values() for name in SECRET_FIELDS if name in ticket
        )

    # -- writes ----------------------------------------------------------------------------------

    def record_followup(self, ticket_id: str, note: str, *, action_id: str | None = None) -> dict[str, Any]:
        """Append a follow-up note to a ticket (one side effect)."""
        if ticket_id not in self._tickets:
            raise KeyError(ticket_id)
        self._begin_write()
        try:
            with self._changed:
                followup = {"id": f"F-{len(self._followups) + 1:04d}", "ticket_id": ticket_id, "note": note}
                self._followups.append(followup)
                self._apply(Effect("followup", ticket_id, action_id or "-", _digest(ticket_id, note)))
                return dict(followup)
        finally:
            self._end_write()

    def issue_credit(self, ticket_id: str, amount_cents: int, reason: str, *, action_id: str | None = None) -> dict[str, Any]:
        """Credit the ticket's customer (one side effect)."""
        if ticket_id not in self._tickets:
            raise KeyError(ticket_id)
        self._begin_write()
        try:
            with self._changed:
                credit = {
                    "id": f"C-{len(self._credits) + 1:04d}",
                    "ticket_id": ticket_id,
                    "amount_cents": int(amount_cents),
                    "reason": reason,
                }
                self._credits.append(credit)
                self._apply(Effect("credit", ticket_id, action_id or "-", _digest(ticket_id, amount_cents, reason)))
                return dict(credit)
        finally:
            self._end_write()

    def _begin_write(self) -> None:
        with self._changed:
            self._writes_started += 1
            self._writes_running += 1
            self._changed.notify_all()
            if _within(self._writes_started, self.slow_writes):
                self._hold(self.write_delay_s)

    def _hold(self, seconds: float) -> None:
        """Wait (holding `_changed`, which the wait releases) for `seconds` or the lab's next release."""
        if seconds > 0:
            releases = self._releases
            self._changed.wait_for(lambda: self._releases != releases, seconds)

    def release_held(self) -> None:
        """End every lookup or write held right now (later slow ones are held again)."""
        with self._changed:
            self._releases += 1
            self._changed.notify_all()

    def _end_write(self) -> None:
        with self._changed:
            self._writes_running -= 1
            self._changed.notify_all()

    def _apply(self, effect: Effect) -> None:
        self._effects.append(effect if isinstance(self._effects, list) else dataclasses.asdict(effect))

    # -- what the lab observes ---------------------------------------------------------------------

    def effect_records(self) -> list[dict[str, Any]]:
        """The effects as JSON records, in order: what the lab counts and compares."""
        return [dataclasses.asdict(effect) for effect in self.effects]

    def settle(self) -> None:
        """End every held operation and wait until no write runs (the lab's `settle` step)."""
        self.release_held()
        self.wait_idle()

    @property
    def effects(self) -> tuple[Effect, ...]:
        with self._changed:
            return tuple(effect if isinstance(effect, Effect) else Effect(**effect) for effect in self._effects)

    @property
    def effect_count(self) -> int:
        return len(self.effects)

    @property
    def duplicate_count(self) -> int:
        """Effects that repeat an earlier one exactly (same kind, ticket, action and content)."""
        seen: set[Effect] = set()
        duplicates = 0
        for effect in self.effects:
            duplicates += effect in seen
            seen.add(effect)
        return duplicates

    @property
    def writes_started(self) -> int:
        with self._changed:
            return self._writes_started

    def wait_write_started(self, count: int = 1, timeout_s: float = WAIT_LIMIT_S) -> bool:
        """Block until `count` writes have begun (a call is in flight); False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._writes_started >= count, timeout_s)

    def wait_idle(self, timeout_s: float = WAIT_LIMIT_S) -> bool:
        """Block until no write is running (late handlers have finished); False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._writes_running == 0, timeout_s)
