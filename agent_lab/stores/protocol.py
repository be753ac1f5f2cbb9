"""The receipt store protocol: what every store (in-memory, SQLite, and later PostgreSQL) promises.

A write tool that carries an idempotency key must take effect at most once per key, even when the
process running it is killed between the effect and its receipt. The registry gets that from a store
through these operations, each atomic, each bounded by a timeout:

* ``reserve(key, fingerprint, lapse=...)`` claims a free key and returns an *owner token*; or says what
  holds the key already: a receipt to replay, a conflict (other arguments), a call in progress, or an
  ``unknown`` outcome.
* ``renew(key, owner)`` extends the holder's lease while its handler runs.
* ``complete(key, owner, record)`` stores the result record; ``release(key, owner)`` frees the key
  after a refusal or a failure known to have had no effect. Both are *fenced*: they act only for the
  current owner, so a holder that was taken over or resolved meanwhile changes nothing (False).
* ``complete_unknown(key, owner, record)`` (optional; the stores here have it) stores the record of a
  write whose outcome is unknown (its handler raised or timed out after it may have taken effect): the
  key replays it like any receipt, but it never expires and is never purged; ``unresolved()`` lists it
  and ``resolve`` settles it, as a lapsed reservation. Fenced and repeatable like ``complete``. A store
  without it gets ``complete`` from the registry: the receipt then expires with the ttl, after which the
  key runs again.
* ``keep(key, owner)`` (optional; the stores here have it) keeps a live receipt that ``owner`` completed
  for ``ttl_s`` from now, never shorter: a task's ``accepted`` receipt, while the task's call runs (a
  write task's is stored with ``complete_unknown``, kept until its run ends: a store without it is
  refused for write tools that may run as tasks).
  Without it, a tool that may run as a task is refused at ``register``. ``keep(key, owner,
  until_resolved=True)`` keeps it as a receipt of unknown outcome (see ``complete_unknown``): a write
  task's ``accepted`` receipt once the task ended with its outcome unknown. A store whose ``keep`` does
  not take ``until_resolved`` is refused for write tools that may run as tasks.
* ``let_expire(key, owner)`` (optional; the stores here have it) lets a receipt of unknown outcome that
  ``owner`` completed expire ``ttl_s`` from now, as a receipt completed now; False for anyone else's (one
  resolved, and maybe reserved again by another call since). A write task's ``accepted`` when its run
  ends with its outcome known. A store without it is refused for write tools that may run as tasks.
* ``unresolved()`` never lists a task's gate (tool ``agent_lab/task-gate``): it is the task run's own.
* ``consume_approval(tenant, approval_id, ...)`` spends a single-use approval: the ledger of spent
  approvals lives in the same store as the receipts, so every host sharing it sees one use.
* ``purge()`` reclaims expired entries (a store may also do so now and then by itself).
* A reservation whose lease lapsed without a receipt (its holder crashed, or could not store its
  receipt) is ``unknown`` when it was reserved with ``Lapse.UNKNOWN`` (writes: the effect may have
  happened), and stays so until the application ``resolve``s it (so does a receipt stored by
  ``complete_unknown``); with ``Lapse.TAKEOVER`` (reads: no
  effect to protect) the next caller simply takes the key over.

Every method takes ``timeout_s`` (None: ``STORE_TIMEOUT_S``) and raises ``ReceiptStoreUnavailable`` when
it cannot answer within it (a lock held elsewhere, an unreachable or failing database); the registry
derives the timeout from the call's deadline and answers ``receipt_store_unavailable`` (retry later).

Receipts are keyed by ``ReceiptKey(tenant, tool, key)``: one tenant never sees another's receipt.
Each store also holds the key of the argument fingerprints (``fingerprint_key``), so that every
registry sharing the store fingerprints a call alike, across processes and restarts.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Protocol, runtime_checkable

from ..fingerprint import has_lone_surrogate

__all__ = [
    "PURGE_LIMIT",
    "STORE_TIMEOUT_S",
    "Lapse",
    "ReceiptKey",
    "ReceiptStore",
    "ReceiptStoreUnavailable",
    "Reservation",
    "ReservationStatus",
    "acquire_within",
    "store_timeout",
]

STORE_TIMEOUT_S = 5.0
"""How long a store call may wait (for a lock, a busy database) when its caller gives no timeout."""

PURGE_LIMIT = 1000
"""How many expired entries one ``purge()`` call deletes at most (call it again for more)."""


class ReceiptStoreUnavailable(Exception):
    """The store could not answer within the call's timeout, or cannot be reached at all.

    Retrying later may succeed. The message is operator-facing and never holds a key or a record.
    A SQLite or in-memory store changed nothing when it raises this; a networked store may not know
    whether its last statement committed (a reservation made that way lapses like a crashed holder's).
    """


@dataclass(frozen=True)
class ReceiptKey:
    """Where a receipt lives: the tenant, the tool, and the caller's idempotency key.

    Each part is a plain string of Unicode text: a lone surrogate (``"\\ud800"``) cannot be stored by
    a database as text, and neither can NUL (``"\\x00"``, refused by PostgreSQL's text type), so both are
    refused here, the same for every store.
    """

    tenant: str
    tool: str
    key: str

    def __post_init__(self) -> None:
        for field_name in ("tenant", "tool", "key"):
            value = getattr(self, field_name)
            if type(value) is not str:
                if not isinstance(value, str):
                    raise TypeError(f"ReceiptKey.{field_name} must be a string")
                value = str.__str__(value)  # its plain text: a subclass could hash or compare as it likes
                object.__setattr__(self, field_name, value)
            if has_lone_surrogate(value) or "\x00" in value:
                raise ValueError(f"ReceiptKey.{field_name} must be Unicode text without lone surrogates or NUL")


class Lapse(str, enum.Enum):
    """What a reservation whose lease lapsed without a receipt means for its key."""

    UNKNOWN = "unknown"  # a write: the effect may have happened; the key answers unknown until resolved
    TAKEOVER = "takeover"  # a read: nothing to protect; the next caller takes the key over

    def __str__(self) -> str:
        return self.value


class ReservationStatus(str, enum.Enum):
    """What ``reserve`` (or ``lookup``) found under a key."""

    RESERVED = "reserved"  # the key was free and now belongs to this caller (see Reservation.owner)
    REPLAY = "replay"  # a completed receipt with the same fingerprint: return its record
    CONFLICT = "conflict"  # the key is held (running, completed or unknown) for different arguments
    IN_PROGRESS = "in_progress"  # the same arguments are still running under a live lease
    UNKNOWN = "unknown"  # a write's lease lapsed without a receipt: it may have taken effect

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Reservation:
    """The answer of ``reserve`` / ``lookup``.

    ``record`` is the stored result record when ``status`` is REPLAY (a fresh dict every time, so
    callers may not corrupt the receipt). ``fingerprint`` is the one already stored under the key, or
    the caller's own for RESERVED. ``owner`` is the owner token of a RESERVED answer: the only value
    that lets ``renew``, ``complete`` and ``release`` act on the reservation (never shown elsewhere).
    """

    status: ReservationStatus
    record: Optional[Mapping[str, Any]] = None
    fingerprint: Optional[str] = None
    owner: Optional[str] = None

    def __repr__(self) -> str:  # the owner token is a capability: keep it out of logs
        shown = "set" if self.owner is not None else None
        return f"Reservation(status={self.status.value!r}, fingerprint={self.fingerprint!r}, owner={shown})"


@runtime_checkable
class ReceiptStore(Protocol):
    """Where idempotency receipts live. Every method is atomic and safe to call from several threads.

    ``timeout_s`` bounds how long a method may wait (None: ``STORE_TIMEOUT_S``); past it the method
    raises ``ReceiptStoreUnavailable``. Any other exception is a bug or a misuse (a closed store).
    """

    @property
    def lease_s(self) -> float:
        """How long a reservation holds without being renewed."""
        ...

    @property
    def fingerprint_key(self) -> bytes:
        """The key every registry on this store fingerprints calls with."""
        ...

    def reserve(
        self, key: ReceiptKey, fingerprint: str, *, lapse: Lapse = Lapse.UNKNOWN, timeout_s: Optional[float] = None
    ) -> Reservation:
        """Atomically claim ``key`` for ``fingerprint`` (RESERVED, with a fresh owner token), or
        report what holds it. ``lapse`` says what the reservation means if its lease lapses."""
        ...

    def renew(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        """Extend the lease of ``owner``'s reservation by ``lease_s`` from now; False if ``owner`` no
        longer holds it (taken over, resolved, completed or released)."""
        ...

    def complete(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        """Store the result record for ``owner``'s reservation (also after its lease lapsed, as long
        as nobody took the key over or resolved it); False, storing nothing, otherwise. A repeat by the
        same owner with the same record (its first answer was lost, say with a connection) changes
        nothing and is True: that record is the receipt. Its ttl counts from the first completion."""
        ...

    def release(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        """Free ``owner``'s reservation (the call had no effect); False if ``owner`` no longer holds it."""
        ...

    def resolve(
        self,
        key: ReceiptKey,
        fingerprint: str,
        *,
        record: Optional[Mapping[str, Any]],
        timeout_s: Optional[float] = None,
    ) -> bool:
        """Settle an ``unknown`` key (a lapsed write reservation, or a receipt of unknown outcome) for
        ``fingerprint``: with a record, "it happened" (later calls replay the record, kept ``ttl_s`` from
        now); with None, "it did not happen" (the key is free). False if the key is not unknown for that
        fingerprint (still in progress, completed, free or held by other arguments)."""
        ...

    def lookup(self, key: ReceiptKey, *, timeout_s: Optional[float] = None) -> Optional[Reservation]:
        """The status of ``key`` without reserving it; None when nothing holds it."""
        ...

    def unresolved(self, *, limit: int = 100, timeout_s: Optional[float] = None) -> List[ReceiptKey]:
        """Up to ``limit`` keys that wait for ``resolve``, in key order: ``unknown`` ones (what crashes left
        behind) and receipts of unknown outcome (``complete_unknown``)."""
        ...

    def purge(self, *, limit: int = PURGE_LIMIT, timeout_s: Optional[float] = None) -> int:
        """Delete up to ``limit`` entries that expired with nothing left to keep (receipts past their ttl,
        reads' lapsed reservations, spent approvals past their retention) and return how many. Never an
        ``unknown`` key nor a receipt of unknown outcome: they wait for ``resolve``. Expired entries
        already count as absent; this only reclaims their space."""
        ...

    def consume_approval(
        self, tenant: str, approval_id: str, *, expires_at: float, now: Optional[float] = None,
        timeout_s: Optional[float] = None,
    ) -> Optional[bool]:
        """Spend a single-use approval, atomically: True for its first use (from now on it is used, for
        every registry sharing the store), False when it was used before.

        ``expires_at`` is the approval's expiry and ``now`` the time by the clock that checks it (the
        registry's). The store remembers the use until the approval has expired by that clock (the
        validity left there, ``expires_at - now``, measured on the store's own) and by the store's, plus
        its receipt ``ttl_s``. So every host whose clock lags the store's by at most ``ttl_s`` finds it
        spent for as long as it takes it for valid. A clock that lags by more cannot be covered: the
        store then spends nothing and answers None (the registry refuses the call). Without ``now`` the
        expiry is read on the store's own clock."""
        ...

    def close(self) -> None:
        """Release the store's resources. Closing twice is harmless."""
        ...


def store_timeout(timeout_s: Optional[float]) -> float:
    """The seconds a store call may wait: ``STORE_TIMEOUT_S`` for None, 0 for a past deadline."""
    if timeout_s is None:
        return STORE_TIMEOUT_S
    if type(timeout_s) is float and 0.0 <= timeout_s <= _TIMEOUT_MAX:  # the registry's case: a plain float
        return timeout_s
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or math.isnan(timeout_s):
        raise ValueError("timeout_s must be a number of seconds or None")
    return min(max(0.0, float(timeout_s)), _TIMEOUT_MAX)


_TIMEOUT_MAX = threading.TIMEOUT_MAX


def acquire_within(lock: Any, timeout_s: float) -> float:
    """Take ``lock`` within ``timeout_s`` seconds and return the seconds left; raise
    ``ReceiptStoreUnavailable`` (holding nothing) when it stays taken that long."""
    if lock.acquire(blocking=False):  # the common case: free, no time spent
        return timeout_s
    started = time.monotonic()
    taken = lock.acquire(timeout=timeout_s) if timeout_s > 0 else False
    if not taken:
        raise ReceiptStoreUnavailable("the receipt store is busy: its lock was not free within the timeout")
    return max(0.0, timeout_s - (time.monotonic() - started))
