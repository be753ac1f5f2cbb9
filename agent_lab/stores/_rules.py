"""The rules every store applies to one stored entry, written once so the stores cannot drift.

An entry is an in-flight reservation (an owner, a lease, what a lapse means) or a completed receipt (a
record and an expiry). The in-memory store applies these functions directly; the SQLite store applies
``decide_reserve`` in its reserve transaction and writes the other rules as the WHERE clauses of
single statements (the conformance suite, tests/store_conformance.py, holds both to the same answers).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any, List, NamedTuple, Optional, Tuple, TypeVar

from ..fingerprint import MAX_CANONICAL_DEPTH, MAX_INTEGER_BITS, NotCanonicalJSON, canonical_json, has_lone_surrogate
from .protocol import Lapse, ReceiptKey, Reservation, ReservationStatus

_Address = TypeVar("_Address")

IN_FLIGHT = "in_flight"
COMPLETED = "completed"

UNRESOLVED_UNTIL = math.inf
TASK_GATE_TOOL = "agent_lab/task-gate"
"""The tool part of a task's gate key (`agent_lab.tasks`). A started task's `start` is kept until its run
ends, as an unresolved receipt would be, but `unresolved()` never lists it: it is the run's own, and a
hand that resolved it would let a reader say "did not run" of a task whose host died mid-call."""
"""The expiry of a receipt of unknown outcome (``complete_unknown``): never. It replays like any
receipt, but it is kept, and listed by ``unresolved()``, until the application resolves it: the effect
may have happened, so its key must not run again on its own once a ttl has passed. No ttl is infinite
(`check_duration`), so this expiry marks such a receipt in every store without a column of its own."""


class Entry(NamedTuple):
    """One stored row. ``owner`` is the owner token of an in-flight reservation, and of the holder that
    completed a receipt (so that a retry of that same completion, whose first answer was lost, can be
    told apart from someone else's); None for a receipt the application resolved, and for in-flight rows
    written before owner tokens existed (nobody can complete those: they lapse to unknown).

    A receipt's record is ``record_text`` (canonical JSON, as a database stores it) or, in a store that
    keeps rows in memory, ``record``: the value that text parses to, built once by `record_value` and
    never handed out (`status_of` gives every reader its own copy). An immutable tuple: one is built
    for every reserve and completion, and a frozen dataclass costs several times as much to build."""

    fingerprint: str
    state: str
    record_text: Optional[str]
    expires_at: float
    owner: Optional[str] = None
    lapse: str = Lapse.UNKNOWN.value
    record: Any = None

    def is_live(self, now: float) -> bool:
        """A receipt before its ttl, a reservation before its lease ends."""
        return self.expires_at > now

    def is_unknown(self, now: float) -> bool:
        """A write's reservation whose lease lapsed without a receipt: kept until resolved."""
        return self.state == IN_FLIGHT and self.lapse == _UNKNOWN and not self.expires_at > now

    def is_unresolved(self, now: float) -> bool:
        """What ``unresolved()`` lists and ``resolve`` settles: a write's lapsed reservation, or a
        receipt of unknown outcome (kept until resolved: `UNRESOLVED_UNTIL`)."""
        return self.is_unknown(now) or (self.state == COMPLETED and self.expires_at == UNRESOLVED_UNTIL)

    def is_purgeable(self, now: float) -> bool:
        """Expired and nothing to keep: a receipt past its ttl, a read's lapsed reservation. (A receipt
        of unknown outcome never expires.)"""
        return not self.expires_at > now and not self.is_unknown(now)


_LAPSE_UNKNOWN, _LAPSE_TAKEOVER = Lapse.UNKNOWN, Lapse.TAKEOVER
_UNKNOWN, _TAKEOVER = _LAPSE_UNKNOWN.value, _LAPSE_TAKEOVER.value


def purgeable(entries: Mapping[_Address, Entry], now: float) -> List[_Address]:
    """The addresses of the `entries` that are purgeable at `now` (`Entry.is_purgeable`), in one pass
    without a call per entry: a store's sweep looks at every entry it keeps."""
    return [address for address, entry in entries.items()
            if not entry.expires_at > now and not (entry.state == IN_FLIGHT and entry.lapse == _UNKNOWN)]


def reservation(status: ReservationStatus, record: Optional[Mapping[str, Any]] = None,
                fingerprint: Optional[str] = None, owner: Optional[str] = None) -> Reservation:
    """``Reservation(...)``, built without the frozen dataclass's one ``object.__setattr__`` per field:
    every reserve returns one (the same object; it has no checks to skip). A field left None is not
    stored on the instance: the dataclass keeps that default on the class, where reading finds it."""
    answer = _new_object(Reservation)
    fields = answer.__dict__  # item by item: cheaper than update() with keywords
    fields["status"] = status
    if record is not None:
        fields["record"] = record
    if fingerprint is not None:
        fields["fingerprint"] = fingerprint
    if owner is not None:
        fields["owner"] = owner
    return answer


_new_object = object.__new__
# Module constants: an enum member read through its class costs a descriptor call (CPython 3.11).
_REPLAY, _CONFLICT, _IN_PROGRESS, _UNKNOWN_STATUS = (ReservationStatus.REPLAY, ReservationStatus.CONFLICT,
                                                     ReservationStatus.IN_PROGRESS, ReservationStatus.UNKNOWN)


def decide_reserve(entry: Optional[Entry], fingerprint: str, now: float) -> Optional[Reservation]:
    """What a reserve finds under a key: None when the caller may take it, else the answer to return."""
    if entry is None or (not entry.expires_at > now and not entry.is_unknown(now)):  # absent, or purgeable
        return None
    if entry.fingerprint != fingerprint:
        return reservation(_CONFLICT, None, entry.fingerprint)
    return _status_of_kept(entry, now)


def status_of(entry: Optional[Entry], now: float) -> Optional[Reservation]:
    """What ``lookup`` reports for an entry: None when absent or expired with nothing to keep."""
    if entry is None or entry.is_purgeable(now):
        return None
    return _status_of_kept(entry, now)


def _status_of_kept(entry: Entry, now: float) -> Reservation:
    """`status_of` for an entry known to be kept (not purgeable): every replay asks, so once is enough."""
    if entry.state == COMPLETED:
        if entry.record is not None:
            record = copy_record(entry.record)
        else:
            record = json.loads(entry.record_text) if entry.record_text is not None else None
        return reservation(_REPLAY, record, entry.fingerprint)
    if entry.is_live(now):
        return reservation(_IN_PROGRESS, None, entry.fingerprint)
    return reservation(_UNKNOWN_STATUS, None, entry.fingerprint)


def held_by(entry: Optional[Entry], owner: str) -> bool:
    """Fencing: only the current owner of an in-flight reservation may renew, complete or release it.

    A lapsed lease alone does not take the key from its owner; a takeover or a resolution does (they
    replace or remove the entry), so a stale holder can never overwrite what came after it.
    """
    return entry is not None and entry.state == IN_FLIGHT and entry.owner is not None and entry.owner == owner


def completed_by(entry: Optional[Entry], owner: str, record: Any) -> bool:
    """A completion repeated by the holder that already stored this very record (the answer to its
    first attempt was lost): it changes nothing and is reported as stored, not as fenced."""
    return entry is not None and entry.state == COMPLETED and entry.owner is not None and entry.owner == owner \
        and entry.record == record


def kept_by(entry: Optional[Entry], owner: str, now: float) -> bool:
    """Only a live receipt that ``owner`` completed may be kept longer (``keep``): an expired one may
    have been read as free already, and one resolved or taken over is no longer the holder's."""
    return entry is not None and entry.state == COMPLETED and entry.owner is not None and entry.owner == owner \
        and entry.expires_at > now


def expires_by(entry: Optional[Entry], owner: str) -> bool:
    """Only a receipt kept until resolved that ``owner`` completed may be let expire (``let_expire``): one
    resolved meanwhile, and then reserved again by another call, is that call's, whatever it replays."""
    return entry is not None and entry.state == COMPLETED and entry.owner is not None and entry.owner == owner \
        and entry.expires_at == UNRESOLVED_UNTIL


def may_resolve(entry: Optional[Entry], fingerprint: str, now: float) -> bool:
    """Only an unknown key (a write's lapsed reservation, or a receipt of unknown outcome), for the
    fingerprint it was reserved with, can be resolved."""
    return entry is not None and entry.is_unresolved(now) and entry.fingerprint == fingerprint


def new_owner_token() -> str:
    """An unguessable owner token (a capability: whoever has it may complete the reservation): 128
    bits from the system's CSPRNG, as `secrets.token_hex(16)` draws them, without its three calls."""
    return os.urandom(16).hex()


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
    if lapse is _LAPSE_UNKNOWN:  # module constants: an enum member looked up on its class costs a descriptor call
        return _UNKNOWN
    if lapse is _LAPSE_TAKEOVER:
        return _TAKEOVER
    try:
        return Lapse(lapse).value
    except ValueError:
        raise ValueError("lapse must be Lapse.UNKNOWN or Lapse.TAKEOVER") from None


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be a positive integer")
    return limit


def check_approval(tenant: object, approval_id: object, expires_at: object,
                   now: object = None) -> Tuple[str, str, float, Optional[float]]:
    """The (tenant, approval id, expiry, caller's clock reading) of an approval to spend, as plain values
    a database can store. The reading is None when the caller does not say what its clock reads
    (``now``): the expiry is then read on the store's own clock."""
    expiry = _seconds("expires_at", expires_at)
    caller_now = None if now is None else _seconds("now", now)
    return _storable_text("tenant", tenant), _storable_text("approval_id", approval_id), expiry, caller_now


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds")
    return float(value)


def _storable_text(name: str, value: object) -> str:
    """Non-empty plain text that every store can hold (the rule ReceiptKey applies to its parts)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string")
    text = str.__str__(value)
    if not text or has_lone_surrogate(text) or "\x00" in text:
        raise ValueError(f"{name} must be non-empty Unicode text without lone surrogates or NUL")
    return text


def approval_kept_until(expires_at: float, caller_now: Optional[float], now: float, ttl_s: float) -> float:
    """Until when (on the store's clock, `now`) a spent approval is remembered: until it has expired by
    both the clock that checked it (its validity left there, ``expires_at - caller_now``, measured on
    this one) and by this one, plus the receipt ttl as a margin.

    Why both, and why the margin: the spender's clock may lead the store's (its validity left is then
    shorter than the store's), and another host may check the same approval by a clock that lags the
    store's. Such a host takes the approval for valid until the store's clock reads ``expires_at``
    plus its lag; `caller_lags` refuses a spend from a host that lags by more than the ttl, so every
    host that may spend finds the use remembered for as long as it takes the approval for valid."""
    if caller_now is None:
        return max(expires_at, now) + ttl_s
    return max(now + max(0.0, expires_at - caller_now), expires_at) + ttl_s


def caller_lags(caller_now: Optional[float], now: float, ttl_s: float) -> bool:
    """The clock that checked an approval (`caller_now`) lags the store's (`now`) by more than the
    receipt ttl: the store would forget a use of it while that clock still takes it for valid, so
    nothing is spent (fail closed). A clock that leads is harmless: it takes approvals for expired
    sooner."""
    return caller_now is not None and caller_now < now - ttl_s


def record_text(record: Mapping[str, Any]) -> str:
    """The record as canonical JSON; raises NotCanonicalJSON before anything is stored."""
    if type(record) is dict:  # the registry's case: canonical_json copies nothing it does not change
        return canonical_json(record)
    if not isinstance(record, Mapping):
        raise NotCanonicalJSON("", "a receipt record must be a JSON object")
    return canonical_json(dict(record))


def record_value(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record exactly as ``json.loads(record_text(record))`` gives it back (keys sorted, integral
    floats as integers, subclasses as their base types), for a store that keeps it in memory; raises
    NotCanonicalJSON before anything is stored. A record of exact JSON types without floats (what the
    registry stores) is copied in one walk; anything else takes the way through the canonical text.

    The value is kept in a form that is quick to copy (see `copy_record`); never hand it out itself."""
    if type(record) is dict:  # what the registry stores; asked first (a Mapping check is an ABC check)
        try:
            return _kept(record, 0, False)
        except _TakeTheText:
            pass
    elif not isinstance(record, Mapping):
        raise NotCanonicalJSON("", "a receipt record must be a JSON object")
    return _kept(json.loads(canonical_json(dict(record))), 0, True)


class _TakeTheText(Exception):
    """Raised by `_kept` for a value only the canonical text can settle."""


class _KeptObject(dict):
    """A kept JSON object; `containers` names its members that hold an object or an array (none: a
    shallow copy is a whole copy)."""

    __slots__ = ("containers",)
    containers: Tuple[str, ...]


class _FlatArray(list):
    """A kept JSON array with no object or array inside: a shallow copy is a whole copy."""

    __slots__ = ()


def _kept(value: Any, depth: int, parsed: bool) -> Any:
    """`value` (an object or an array) as `record_value` keeps it: object keys sorted (by code point,
    as canonical JSON sorts them), objects as `_KeptObject`, arrays of scalars as `_FlatArray`.
    `_TakeTheText` (unless `parsed`: a value json.loads made from canonical text, already what it
    should be) for a float (canonical JSON may rewrite it), a subclass, a non-string key, an integer
    too wide or nesting too deep (canonical JSON refuses those, and says where). Scalars are checked
    in the loop, without a call each: this runs on every completion."""
    kind = type(value)
    if (kind is not dict and kind is not list) or (depth >= MAX_CANONICAL_DEPTH and not parsed):
        raise _TakeTheText()
    if kind is list:
        items = [item if type(item) in _SCALARS and (parsed or type(item) is not float) else _kept_item(item, depth, parsed)
                 for item in value]
        if any(type(item) in _KEPT_CONTAINERS for item in items):
            return items  # a plain list: copied item by item
        kept_array = _FlatArray()
        list.extend(kept_array, items)
        return kept_array
    if parsed:
        keys = list(value)
    else:
        try:
            keys = sorted(value)
        except TypeError:  # keys of several types: not JSON
            raise _TakeTheText() from None
    kept = _KeptObject()
    containers = []
    for key in keys:
        if type(key) is not str:
            raise _TakeTheText()
        item = value[key]
        item_kind = type(item)
        if item_kind is str or item_kind is bool or item is None or (item_kind is float and parsed):
            kept[key] = item
        elif item_kind is int:
            if not parsed and item.bit_length() > MAX_INTEGER_BITS:
                raise _TakeTheText()
            kept[key] = item
        else:
            kept[key] = _kept(item, depth + 1, parsed)
            containers.append(key)
    kept.containers = tuple(containers)
    return kept


def _kept_item(item: Any, depth: int, parsed: bool) -> Any:
    """An array item that is not a plain scalar: an integer to check, or a container to keep."""
    if type(item) is int:
        if not parsed and item.bit_length() > MAX_INTEGER_BITS:
            raise _TakeTheText()
        return item
    return _kept(item, depth + 1, parsed)


_SCALARS = frozenset((str, bool, type(None), float))
_copy_dict = dict.copy
_KEPT_CONTAINERS = (_KeptObject, _FlatArray, list)


def copy_record(value: Any) -> Any:
    """A fresh, plain copy (dicts and lists) of a value `record_value` built: what a reader gets, so
    nothing it does to the copy reaches the stored receipt."""
    kind = type(value)
    if kind is _KeptObject:
        copy = _copy_dict(value)  # a plain dict: dict.copy makes one of a subclass
        for key in value.containers:
            item = copy[key]
            item_kind = type(item)  # a flat member (the common output) is copied here, without a call
            if item_kind is _KeptObject and not item.containers:
                copy[key] = _copy_dict(item)
            elif item_kind is _FlatArray:
                copy[key] = list(item)
            else:
                copy[key] = copy_record(item)
        return copy
    if kind is _FlatArray:
        return list(value)
    if kind is list:
        return [copy_record(item) for item in value]
    return value
