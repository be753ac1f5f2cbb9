"""The rules every store applies to one stored entry, written once so the stores cannot drift.

An entry is an in-flight reservation (an owner, a lease, what a lapse means) or a completed receipt (a
record and an expiry). The in-memory store applies these functions directly; the SQLite store applies
``decide_reserve`` in its reserve transaction and writes the other rules as the WHERE clauses of
single statements (the conformance suite, tests/store_conformance.py, holds both to the same answers).
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from ..fingerprint import NotCanonicalJSON, canonical_json, has_lone_surrogate
from .protocol import Lapse, ReceiptKey, Reservation, ReservationStatus

IN_FLIGHT = "in_flight"
COMPLETED = "completed"


@dataclass(frozen=True)
class Entry:
    """One stored row. ``owner`` is None for a completed receipt (and for in-flight rows written
    before owner tokens existed, which nobody can complete: they lapse to unknown)."""

    fingerprint: str
    state: str
    record_text: Optional[str]
    expires_at: float
    owner: Optional[str] = None
    lapse: str = Lapse.UNKNOWN.value

    def is_live(self, now: float) -> bool:
        """A receipt before its ttl, a reservation before its lease ends."""
        return self.expires_at > now

    def is_unknown(self, now: float) -> bool:
        """A write's reservation whose lease lapsed without a receipt: kept until resolved."""
        return self.state == IN_FLIGHT and self.lapse == Lapse.UNKNOWN.value and not self.is_live(now)

    def is_purgeable(self, now: float) -> bool:
        """Expired and nothing to keep: a receipt past its ttl, a read's lapsed reservation."""
        return not self.is_live(now) and not self.is_unknown(now)


def decide_reserve(entry: Optional[Entry], fingerprint: str, now: float) -> Optional[Reservation]:
    """What a reserve finds under a key: None when the caller may take it, else the answer to return."""
    if entry is None or entry.is_purgeable(now):
        return None
    if entry.fingerprint != fingerprint:
        return Reservation(ReservationStatus.CONFLICT, fingerprint=entry.fingerprint)
    return status_of(entry, now)


def status_of(entry: Optional[Entry], now: float) -> Optional[Reservation]:
    """What ``lookup`` reports for an entry: None when absent or expired with nothing to keep."""
    if entry is None or entry.is_purgeable(now):
        return None
    if entry.state == COMPLETED:
        record = json.loads(entry.record_text) if entry.record_text is not None else None
        return Reservation(ReservationStatus.REPLAY, record=record, fingerprint=entry.fingerprint)
    if entry.is_live(now):
        return Reservation(ReservationStatus.IN_PROGRESS, fingerprint=entry.fingerprint)
    return Reservation(ReservationStatus.UNKNOWN, fingerprint=entry.fingerprint)


def held_by(entry: Optional[Entry], owner: str) -> bool:
    """Fencing: only the current owner of an in-flight reservation may renew, complete or release it.

    A lapsed lease alone does not take the key from its owner; a takeover or a resolution does (they
    replace or remove the entry), so a stale holder can never overwrite what came after it.
    """
    return entry is not None and entry.state == IN_FLIGHT and entry.owner is not None and entry.owner == owner


def may_resolve(entry: Optional[Entry], fingerprint: str, now: float) -> bool:
    """Only an unknown key, for the fingerprint it was reserved with, can be resolved."""
    return entry is not None and entry.is_unknown(now) and entry.fingerprint == fingerprint


def new_owner_token() -> str:
    """An unguessable owner token (a capability: whoever has it may complete the reservation)."""
    return secrets.token_hex(16)


def address(key: ReceiptKey) -> Tuple[str, str, str]:
    """The (tenant, tool, key) a receipt is stored under."""
    if not isinstance(key, ReceiptKey):
        raise TypeError("key must be a ReceiptKey")
    return (key.tenant, key.tool, key.key)


def check_duration(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds greater than 0")
    return float(value)


def check_fingerprint(fingerprint: object) -> None:
    if not isinstance(fingerprint, str):
        raise TypeError("fingerprint must be a string, as returned by fingerprint()")


def check_owner(owner: object) -> None:
    if not isinstance(owner, str):
        raise TypeError("owner must be the owner token of a reservation (a string)")


def check_lapse(lapse: object) -> str:
    if lapse is Lapse.UNKNOWN or lapse is Lapse.TAKEOVER:
        return lapse.value
    try:
        return Lapse(lapse).value
    except ValueError:
        raise ValueError("lapse must be Lapse.UNKNOWN or Lapse.TAKEOVER") from None


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be a positive integer")
    return limit


def check_approval(tenant: object, approval_id: object, expires_at: object) -> Tuple[str, str, float]:
    """The (tenant, approval id, expiry) of an approval to spend, as plain values a database can store."""
    if isinstance(expires_at, bool) or not isinstance(expires_at, (int, float)) or not math.isfinite(expires_at):
        raise ValueError("expires_at must be a finite number of seconds")
    return _storable_text("tenant", tenant), _storable_text("approval_id", approval_id), float(expires_at)


def _storable_text(name: str, value: object) -> str:
    """Non-empty plain text that every store can hold (the rule ReceiptKey applies to its parts)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string")
    text = str.__str__(value)
    if not text or has_lone_surrogate(text) or "\x00" in text:
        raise ValueError(f"{name} must be non-empty Unicode text without lone surrogates or NUL")
    return text


def approval_kept_until(expires_at: float, now: float, ttl_s: float) -> float:
    """Until when a spent approval is remembered: its expiry (or now, if later) plus the receipt ttl, a
    margin that covers clocks of other hosts running somewhat ahead of the store's."""
    return max(expires_at, now) + ttl_s


def record_text(record: Mapping[str, Any]) -> str:
    """The record as canonical JSON; raises NotCanonicalJSON before anything is stored."""
    if type(record) is dict:  # the registry's case: canonical_json copies nothing it does not change
        return canonical_json(record)
    if not isinstance(record, Mapping):
        raise NotCanonicalJSON("", "a receipt record must be a JSON object")
    return canonical_json(dict(record))
