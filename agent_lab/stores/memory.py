"""Receipts in a dict: for tests, the lab and single-process applications."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..fingerprint import check_fingerprint_key, new_fingerprint_key
from . import _rules as rules
from ._clock import StepGuard, system_monotonic
from .protocol import PURGE_LIMIT, Lapse, ReceiptKey, Reservation, ReservationStatus, acquire_within, store_timeout

__all__ = ["InMemoryReceiptStore"]

# Module constants: an enum member read through its class costs a descriptor call (CPython 3.11).
_LAPSE_UNKNOWN, _UNKNOWN = Lapse.UNKNOWN, Lapse.UNKNOWN.value
_RESERVED, _REPLAY, _CONFLICT = ReservationStatus.RESERVED, ReservationStatus.REPLAY, ReservationStatus.CONFLICT
_COMPLETED, _IN_FLIGHT = rules.COMPLETED, rules.IN_FLIGHT
_Entry = rules.Entry
_LAPSE_DEFAULT = _Entry._field_defaults["lapse"]
_new_object = object.__new__
_new_tuple = tuple.__new__

_TIMEOUT_MAX = threading.TIMEOUT_MAX

_MIN_SWEEP_INTERVAL = 1024
"""The in-memory store scans for expired entries after max(this, the number of entries its last scan
kept) reserves that add an entry (and approval spends that do). Each adds one, so a scan sees at most
twice what it counts from: O(1) per added entry on average, however large the store grows, and the
scans keep coming when every call brings a new key (counted against the store's size now, a stream of
new keys would never catch up). A reserve answered from an entry (a replay, a conflict) adds nothing to
sweep and counts for nothing: it pays no share of the scans."""


class InMemoryReceiptStore:
    """Receipts in a dict guarded by a lock: for tests, the lab and single-process apps.

    Everything is lost when the process ends. Time: ``clock`` is the wall clock expiry is counted on,
    guarded by ``monotonic`` against steps (see `agent_lab.stores._clock`): a receipt never expires, and a
    lease never lapses, sooner than the monotonic clock says; a test that moves time by hand moves both.
    A record is kept as the value its canonical JSON text
    parses to (`rules.record_value`: what the SQLite store gives back from its text), built once when it
    is stored; every replay hands out its own copy (`rules.copy_record`), so both stores replay
    identically and no reader can change the receipt, without writing and parsing text on every call.
    ``fingerprint_key`` is random unless given (fingerprints then differ from one store to the next).
    """

    def __init__(
        self,
        *,
        ttl_s: float = 86400,
        lease_s: float = 300,
        clock: Callable[[], float] = time.time,
        fingerprint_key: Optional[bytes] = None,
        monotonic: Optional[Callable[[], float]] = None,
    ) -> None:
        self._ttl_s = rules.check_duration("ttl_s", ttl_s)
        self._lease_s = rules.check_duration("lease_s", lease_s)
        self._clock = clock
        self._times = StepGuard(clock, system_monotonic if monotonic is None else monotonic,
                                max(self._ttl_s, self._lease_s)).times  # () -> (check, stamp)
        self._fingerprint_key = new_fingerprint_key() if fingerprint_key is None else check_fingerprint_key(fingerprint_key)
        self._entries: Dict[Tuple[str, str, str], rules.Entry] = {}
        self._spent_approvals: Dict[Tuple[str, str], float] = {}  # (tenant, approval id) -> kept until
        self._lock = threading.Lock()
        self._reserves_since_sweep = 0
        self._sweep_after = _MIN_SWEEP_INTERVAL  # added entries until the next scan
        self._closed = False

    @property
    def lease_s(self) -> float:
        return self._lease_s

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    @property
    def fingerprint_key(self) -> bytes:
        return self._fingerprint_key

    def reserve(
        self, key: ReceiptKey, fingerprint: str, *, lapse: Lapse = Lapse.UNKNOWN, timeout_s: Optional[float] = None
    ) -> Reservation:
        # The registry's arguments (exact types) are taken as they are; anything else is checked.
        if type(fingerprint) is not str:
            rules.check_fingerprint(fingerprint)
        lapse_value = _UNKNOWN if lapse is _LAPSE_UNKNOWN else rules.check_lapse(lapse)
        address = (key.tenant, key.tool, key.key) if type(key) is ReceiptKey else rules.address(key)
        # A bad timeout is refused before the lock is taken (the registry's, a plain float, is taken as it is).
        wait_s = timeout_s if type(timeout_s) is float and 0.0 <= timeout_s <= _TIMEOUT_MAX else \
            store_timeout(timeout_s)
        lock = self._lock
        if not lock.acquire(False):  # free nearly always: only then wait, within the timeout
            acquire_within(lock, wait_s)
        try:  # written out, not `with self._locked(...)`: every idempotent call comes here
            if self._closed:
                raise ValueError("the receipt store is closed")
            entry = self._entries.get(address)
            # A live entry: the two answers retries get, as `decide_reserve` gives them, without its calls.
            # Live by the wall clock alone is live by the guarded one too (the guard never checks expiry
            # against a time later than the wall clock's reading), so these ask no guard.
            if entry is not None and entry.expires_at > self._clock():
                if entry.fingerprint != fingerprint:
                    conflict = _new_object(Reservation)
                    fields = conflict.__dict__
                    fields["status"] = _CONFLICT
                    fields["fingerprint"] = entry.fingerprint
                    return conflict
                if entry.record is not None and entry.state == _COMPLETED:
                    replay = _new_object(Reservation)
                    fields = replay.__dict__
                    fields["status"] = _REPLAY
                    fields["record"] = rules.copy_record(entry.record)
                    fields["fingerprint"] = fingerprint
                    return replay
            now, stamp = self._times()
            if entry is not None:
                answer = rules.decide_reserve(entry, fingerprint, now)
                if answer is not None:
                    return answer
            # Only a reserve that adds an entry counts towards the next scan: a replay or a refusal adds
            # nothing to sweep, so it pays nothing for it.
            self._reserves_since_sweep += 1
            if self._reserves_since_sweep >= self._sweep_after:
                self._sweep(now)
            owner = rules.new_owner_token()
            # rules.Entry(fingerprint, IN_FLIGHT, None, expires_at, owner=owner, lapse=lapse_value), without
            # the named tuple's Python __new__ and its keywords (one per reserve and one per completion).
            self._entries[address] = _new_tuple(_Entry, (fingerprint, _IN_FLIGHT, None, stamp + self._lease_s,
                                                         owner, lapse_value, None))
            reserved = _new_object(Reservation)  # rules.reservation(_RESERVED, None, fingerprint, owner), inline
            fields = reserved.__dict__
            fields["status"] = _RESERVED
            fields["fingerprint"] = fingerprint
            fields["owner"] = owner
            return reserved
        finally:
            lock.release()

    def renew(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)
        with self._locked(timeout_s):
            entry = self._entries.get(address)
            if not rules.held_by(entry, owner):
                return False
            assert entry is not None
            self._entries[address] = rules.Entry(
                entry.fingerprint, rules.IN_FLIGHT, None, self._times()[1] + self._lease_s, owner=owner,
                lapse=entry.lapse
            )
            return True

    def complete(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        # The registry's arguments (exact types) are taken as they are, as in `reserve`; anything else is checked.
        if type(owner) is not str:
            rules.check_owner(owner)
        value = rules.record_value(record)
        address = (key.tenant, key.tool, key.key) if type(key) is ReceiptKey else rules.address(key)
        wait_s = timeout_s if type(timeout_s) is float and 0.0 <= timeout_s <= _TIMEOUT_MAX else \
            store_timeout(timeout_s)
        lock = self._lock
        if not lock.acquire(blocking=False):
            acquire_within(lock, wait_s)
        try:  # written out, as in `reserve`: every write that runs comes here
            if self._closed:
                raise ValueError("the receipt store is closed")
            entry = self._entries.get(address)
            # rules.held_by(entry, owner), inline (an owner token is a str, never None)
            if entry is None or entry.state != _IN_FLIGHT or entry.owner != owner:
                return rules.completed_by(entry, owner, value)  # a retry of a completion that landed
            expires_at = self._times()[1] + self._ttl_s
            # rules.Entry(entry.fingerprint, COMPLETED, None, expires_at, owner=owner, record=value), as in `reserve`
            self._entries[address] = _new_tuple(_Entry, (entry.fingerprint, _COMPLETED, None, expires_at, owner,
                                                         _LAPSE_DEFAULT, value))
            return True
        finally:
            lock.release()

    def complete_unknown(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        rules.check_owner(owner)
        value = rules.record_value(record)
        address = rules.address(key)
        with self._locked(timeout_s):
            entry = self._entries.get(address)
            if not rules.held_by(entry, owner):
                return rules.completed_by(entry, owner, value)
            assert entry is not None
            self._entries[address] = rules.Entry(entry.fingerprint, rules.COMPLETED, None, rules.UNRESOLVED_UNTIL,
                                                 owner=owner, record=value)
            return True

    def keep(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None,
             until_resolved: bool = False) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)
        with self._locked(timeout_s):
            now, stamp = self._times()
            entry = self._entries.get(address)
            if not rules.kept_by(entry, owner, now):
                return False
            assert entry is not None
            until = rules.UNRESOLVED_UNTIL if until_resolved else stamp + self._ttl_s
            self._entries[address] = entry._replace(expires_at=max(entry.expires_at, until))
            return True

    def let_expire(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)
        with self._locked(timeout_s):
            entry = self._entries.get(address)
            if not rules.expires_by(entry, owner):
                return False
            assert entry is not None
            self._entries[address] = entry._replace(expires_at=self._times()[1] + self._ttl_s)
            return True

    def release(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)
        with self._locked(timeout_s):
            if not rules.held_by(self._entries.get(address), owner):
                return False
            del self._entries[address]
            return True

    def resolve(
        self,
        key: ReceiptKey,
        fingerprint: str,
        *,
        record: Optional[Mapping[str, Any]],
        timeout_s: Optional[float] = None,
    ) -> bool:
        rules.check_fingerprint(fingerprint)
        value = rules.record_value(record) if record is not None else None
        address = rules.address(key)
        with self._locked(timeout_s):
            now, stamp = self._times()
            if not rules.may_resolve(self._entries.get(address), fingerprint, now):
                return False
            if value is None:
                del self._entries[address]
            else:
                self._entries[address] = rules.Entry(fingerprint, rules.COMPLETED, None, stamp + self._ttl_s,
                                                     record=value)
            return True

    def lookup(self, key: ReceiptKey, *, timeout_s: Optional[float] = None) -> Optional[Reservation]:
        address = rules.address(key)
        with self._locked(timeout_s):
            now = self._times()[0]
            entry = self._entries.get(address)
            if entry is not None and entry.is_purgeable(now):
                del self._entries[address]
                return None
            return rules.status_of(entry, now)

    def unresolved(self, *, limit: int = 100, timeout_s: Optional[float] = None) -> List[ReceiptKey]:
        rules.check_limit(limit)
        with self._locked(timeout_s):
            now = self._times()[0]
            found = sorted(address for address, entry in self._entries.items()
                           if entry.is_unresolved(now) and address[1] != rules.TASK_GATE_TOOL)
        return [ReceiptKey(*address) for address in found[:limit]]

    def purge(self, *, limit: int = PURGE_LIMIT, timeout_s: Optional[float] = None) -> int:
        rules.check_limit(limit)
        with self._locked(timeout_s):
            now = self._times()[0]
            expired = rules.purgeable(self._entries, now)[:limit]
            for address in expired:
                del self._entries[address]
            spent = [key for key, kept_until in self._spent_approvals.items() if kept_until <= now]
            spent = spent[: limit - len(expired)]
            for key in spent:
                del self._spent_approvals[key]
            return len(expired) + len(spent)

    def consume_approval(
        self, tenant: str, approval_id: str, *, expires_at: float, now: Optional[float] = None,
        timeout_s: Optional[float] = None,
    ) -> Optional[bool]:
        tenant, approval_id, expires_at, caller_now = rules.check_approval(tenant, approval_id, expires_at, now)
        with self._locked(timeout_s):
            store_now, stamp = self._times()
            if rules.caller_lags(caller_now, store_now, self._ttl_s):
                return None
            kept_until = self._spent_approvals.get((tenant, approval_id))
            if kept_until is not None and kept_until > store_now:
                return False
            self._reserves_since_sweep += 1  # a spend that adds an entry counts, as a reserve that does
            if self._reserves_since_sweep >= self._sweep_after:
                self._sweep(store_now)
            self._spent_approvals[(tenant, approval_id)] = rules.approval_kept_until(expires_at, caller_now, stamp,
                                                                                     self._ttl_s)
            return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._entries.clear()
            self._spent_approvals.clear()

    def _locked(self, timeout_s: Optional[float]) -> "_Locked":
        """The store's lock, waited for no longer than the call's timeout (`with self._locked(t):`)."""
        return _Locked(self, timeout_s)

    def __enter__(self) -> "InMemoryReceiptStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _sweep(self, now: float) -> None:
        """Drop expired entries once in a while, so abandoned keys do not pile up forever (unknown
        ones stay: they wait for the application to resolve them). Callers count the entry they add,
        and call this once the count reaches `_sweep_after` (see `_MIN_SWEEP_INTERVAL`)."""
        self._reserves_since_sweep = 0
        for address in rules.purgeable(self._entries, now):
            del self._entries[address]
        for key in [key for key, kept_until in self._spent_approvals.items() if kept_until <= now]:
            del self._spent_approvals[key]
        self._sweep_after = max(_MIN_SWEEP_INTERVAL, len(self._entries) + len(self._spent_approvals))


class _Locked:
    """Holds an in-memory store's lock for one call (a class, not a generator: it is on every call)."""

    __slots__ = ("_store", "_timeout_s")

    def __init__(self, store: InMemoryReceiptStore, timeout_s: Optional[float]) -> None:
        self._store = store
        self._timeout_s = timeout_s

    def __enter__(self) -> None:
        store = self._store
        timeout_s = store_timeout(self._timeout_s)
        if not store._lock.acquire(blocking=False):  # free nearly always: only then wait, within the timeout
            acquire_within(store._lock, timeout_s)
        if store._closed:
            store._lock.release()
            raise ValueError("the receipt store is closed")

    def __exit__(self, *exc_info: object) -> None:
        self._store._lock.release()
