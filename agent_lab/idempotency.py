"""Argument fingerprints and idempotency receipt stores.

A write tool that carries an idempotency key must take effect at most once per key, however often
a model or a flaky network repeats the call.  This module gives the registry the two pieces it needs:

* ``fingerprint(tool, arguments)``: a SHA-256 over the *canonical JSON* of the call, so that two
  proposals meaning the same thing (key order, ``1`` versus ``1.0``) get the same fingerprint and
  two proposals meaning different things (``true`` versus ``1``) never do.
* Receipt stores behind one protocol (``ReceiptStore``): ``reserve`` a key before running the
  handler, ``complete`` it with the result record afterwards, ``release`` it when the call was
  refused before any effect.  ``InMemoryReceiptStore`` serves one process; ``SqliteReceiptStore``
  serves several threads and processes sharing one file and survives a restart.

Receipts are keyed by ``ReceiptKey(tenant, tool, key)``: one tenant never sees another's receipt.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple, Union, runtime_checkable

__all__ = [
    "MAX_CANONICAL_DEPTH",
    "MAX_INTEGER_BITS",
    "SCHEMA_VERSION",
    "BUSY_TIMEOUT_MS",
    "SWEEP_EVERY",
    "SWEEP_CHUNK",
    "NotCanonicalJSON",
    "canonical_json",
    "fingerprint",
    "ReceiptKey",
    "ReservationStatus",
    "Reservation",
    "ReceiptStore",
    "InMemoryReceiptStore",
    "SqliteReceiptStore",
]

# ---------------------------------------------------------------------------------------------
# Canonical JSON
# ---------------------------------------------------------------------------------------------

MAX_CANONICAL_DEPTH = 64
"""How many arrays/objects may nest inside one another (``[]`` is one level).  Deeper values are
refused, so hostile input can neither exhaust the stack nor loop forever on a cyclic structure."""

MAX_INTEGER_BITS = 14_000
"""Integers wider than this (about 4,200 decimal digits) are refused: no real argument needs them,
and Python 3.11+ refuses to print much larger ones anyway."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# Built once: json.dumps with options builds a new encoder on every call (a third of its cost here).
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class NotCanonicalJSON(ValueError):
    """A value that has no canonical JSON form.

    ``pointer`` is the JSON Pointer of the offending place ("" for the root) and ``reason`` says
    what is wrong with it.  Neither ever contains the value itself (it could be a secret).
    """

    def __init__(self, pointer: str, reason: str) -> None:
        self.pointer = pointer
        self.reason = reason
        where = f"at {pointer!r}" if pointer else "at the root"
        super().__init__(f"not canonical JSON {where}: {reason}")


def canonical_json(value: object) -> str:
    """Return the one canonical JSON text for ``value``.

    Rules: object keys sorted (by code point), separators ``,`` and ``:`` with no spaces, non-ASCII
    written as itself (UTF-8 when encoded) except lone surrogates, which are escaped as ``\\uXXXX``
    so the text always encodes.  Integral floats are written as integers (``1.0`` -> ``1``, ``-0.0``
    -> ``0``, ``1e20`` -> ``100000000000000000000``) because JSON does not tell them apart; other
    floats use Python's shortest round-tripping ``repr``.  ``True`` stays ``true`` and never equals
    ``1``.

    Only ``dict`` (with ``str`` keys), ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``
    are accepted (subclasses are written as their base type).  NaN, Infinity, tuples, sets, bytes,
    other objects, non-string keys and nesting deeper than ``MAX_CANONICAL_DEPTH`` raise
    ``NotCanonicalJSON`` naming the JSON Pointer of the first offending place.
    """
    plain = _plain_value(value, [], 0)
    return _escape_lone_surrogates(_CANONICAL_ENCODER.encode(plain))


def fingerprint(tool: str, arguments: object) -> str:
    """Return ``"sha256:" + hex`` of ``canonical_json({"tool": tool, "arguments": arguments})``.

    The text is assembled from the canonical arguments directly, so the wrapper object does not
    count towards ``MAX_CANONICAL_DEPTH`` and error pointers point *into the arguments* (the same
    pointers a schema violation would use).
    """
    if not isinstance(tool, str):
        raise NotCanonicalJSON("", "the tool name must be a string")
    # Sorted keys: "arguments" comes before "tool". A name is a string: no need to walk it as a value.
    tool_text = _escape_lone_surrogates(_CANONICAL_ENCODER.encode(str.__str__(tool)))
    text = '{"arguments":' + canonical_json(arguments) + ',"tool":' + tool_text + "}"
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain_value(value: object, path: List[str], depth: int) -> object:
    """Return ``value`` rebuilt from exact JSON types, or raise ``NotCanonicalJSON``.

    ``path`` holds the pointer tokens of the place being visited (only joined when reporting);
    ``depth`` counts the containers enclosing ``value``.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return _plain_int(value, path)  # type: ignore[arg-type]
    if kind is float:
        return _plain_float(value, path)  # type: ignore[arg-type]
    if isinstance(value, dict):
        return _plain_object(value, path, depth)
    if isinstance(value, list):
        return _plain_array(value, path, depth)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool cannot be subclassed, so this is a true integer (e.g. IntEnum)
        return _plain_int(int.__int__(value), path)
    if isinstance(value, float):
        return _plain_float(float.__float__(value), path)
    raise NotCanonicalJSON(_pointer(path), f"a value of type {kind.__name__} is not JSON")


def _plain_int(value: int, path: List[str]) -> int:
    if value.bit_length() > MAX_INTEGER_BITS:
        raise NotCanonicalJSON(_pointer(path), f"an integer wider than {MAX_INTEGER_BITS} bits is refused")
    return value


def _plain_float(value: float, path: List[str]) -> Union[int, float]:
    if not math.isfinite(value):
        raise NotCanonicalJSON(_pointer(path), "NaN and Infinity are not JSON numbers")
    if value.is_integer():
        return int(value)  # 1.0 -> 1, -0.0 -> 0, 1e20 -> 100000000000000000000
    return value


def _plain_object(value: Mapping[Any, Any], path: List[str], depth: int) -> Dict[str, object]:
    _check_depth(path, depth)
    for key in value:
        if not isinstance(key, str):
            raise NotCanonicalJSON(_pointer(path), f"an object key of type {type(key).__name__} is not a string")
    plain: Dict[str, object] = {}
    for key in sorted(value):  # visit in canonical order so the first error reported is canonical too
        path.append(key)
        plain[str.__str__(key)] = _plain_value(value[key], path, depth + 1)
        path.pop()
    return plain


def _plain_array(value: List[Any], path: List[str], depth: int) -> List[object]:
    _check_depth(path, depth)
    plain: List[object] = []
    for index, item in enumerate(value):
        path.append(str(index))
        plain.append(_plain_value(item, path, depth + 1))
        path.pop()
    return plain


def _check_depth(path: List[str], depth: int) -> None:
    if depth >= MAX_CANONICAL_DEPTH:
        raise NotCanonicalJSON(_pointer(path), f"nesting deeper than {MAX_CANONICAL_DEPTH} levels is refused")


def _pointer(path: List[str]) -> str:
    """JSON Pointer (RFC 6901) for a list of reference tokens."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in path)


def _escape_lone_surrogates(text: str) -> str:
    """Escape surrogate code points, which ``ensure_ascii=False`` leaves raw and UTF-8 cannot encode.

    They can only occur inside strings (all JSON syntax is ASCII), where ``\\uXXXX`` means the same.
    """
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(lambda match: "\\u%04x" % ord(match.group()), text)


# ---------------------------------------------------------------------------------------------
# Receipts: the shared vocabulary
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiptKey:
    """Where a receipt lives: the tenant, the tool, and the caller's idempotency key."""

    tenant: str
    tool: str
    key: str

    def __post_init__(self) -> None:
        for field_name in ("tenant", "tool", "key"):
            if not isinstance(getattr(self, field_name), str):
                raise TypeError(f"ReceiptKey.{field_name} must be a string")


class ReservationStatus(str, enum.Enum):
    """What ``reserve`` (or ``lookup``) found under a key."""

    RESERVED = "reserved"  # the key was free and now belongs to this caller: run the handler
    REPLAY = "replay"  # a completed receipt with the same fingerprint: return its record
    CONFLICT = "conflict"  # the key is held (running or completed) by different arguments
    IN_PROGRESS = "in_progress"  # the same arguments are still running under a live lease


@dataclass(frozen=True)
class Reservation:
    """The answer of ``reserve`` / ``lookup``.

    ``record`` is the stored result record when ``status`` is REPLAY (a fresh dict every time, so
    callers may not corrupt the receipt).  ``fingerprint`` is the one already stored under the key
    (REPLAY / CONFLICT / IN_PROGRESS), or the caller's own for RESERVED.
    """

    status: ReservationStatus
    record: Optional[Mapping[str, Any]] = None
    fingerprint: Optional[str] = None


@runtime_checkable
class ReceiptStore(Protocol):
    """Where idempotency receipts live.  Every method is safe to call from several threads."""

    def reserve(self, key: ReceiptKey, fingerprint: str) -> Reservation:
        """Atomically claim ``key`` for ``fingerprint``, or report what already holds it."""
        ...

    def complete(self, key: ReceiptKey, fingerprint: str, record: Mapping[str, Any]) -> None:
        """Store the result record; later reserves with the same fingerprint replay it."""
        ...

    def release(self, key: ReceiptKey, fingerprint: str) -> None:
        """Drop an in-flight reservation (the call was refused before any effect)."""
        ...

    def lookup(self, key: ReceiptKey) -> Optional[Reservation]:
        """The status of ``key`` without reserving it; None when nothing live holds it."""
        ...

    def close(self) -> None:
        """Release the store's resources.  Closing twice is harmless."""
        ...


_IN_FLIGHT = "in_flight"
_COMPLETED = "completed"


@dataclass(frozen=True)
class _Entry:
    """One stored row: an in-flight reservation (record_text None) or a completed receipt."""

    fingerprint: str
    state: str
    record_text: Optional[str]
    expires_at: float

    def is_live(self, now: float) -> bool:
        """Expired entries count as absent: a receipt after its ttl, a reservation after its lease."""
        return self.expires_at > now


def _decide(entry: Optional[_Entry], fingerprint: str, now: float) -> Optional[Reservation]:
    """What a reserve finds under a key: None when the key is free, else the answer to return.

    Shared by both stores (as are ``_status_of`` and ``_complete_may_write``), so they cannot drift.
    """
    if entry is not None and entry.is_live(now) and entry.fingerprint != fingerprint:
        return Reservation(ReservationStatus.CONFLICT, fingerprint=entry.fingerprint)
    return _status_of(entry, now)


def _status_of(entry: Optional[_Entry], now: float) -> Optional[Reservation]:
    """What ``lookup`` reports for an entry: None when absent or expired."""
    if entry is None or not entry.is_live(now):
        return None
    if entry.state == _COMPLETED:
        return _replay(entry)
    return Reservation(ReservationStatus.IN_PROGRESS, fingerprint=entry.fingerprint)


def _replay(entry: _Entry) -> Reservation:
    record = json.loads(entry.record_text) if entry.record_text is not None else None
    return Reservation(ReservationStatus.REPLAY, record=record, fingerprint=entry.fingerprint)


def _complete_may_write(entry: Optional[_Entry], fingerprint: str, now: float) -> bool:
    """A completion is stored unless a live entry says otherwise.

    * absent or expired: store it (a late handler finishing after its lease keeps its result);
    * in flight with the same fingerprint: store it (the normal case);
    * completed with the same fingerprint: keep the first receipt, so every replay is identical;
    * held by a different fingerprint: leave it (that caller owns the key now).
    """
    if entry is None or not entry.is_live(now):
        return True
    return entry.state == _IN_FLIGHT and entry.fingerprint == fingerprint


def _check_duration(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds greater than 0")
    return float(value)


def _check_fingerprint(fingerprint: object) -> None:
    if not isinstance(fingerprint, str):
        raise TypeError("fingerprint must be a string, as returned by fingerprint()")


def _record_text(record: Mapping[str, Any]) -> str:
    """The record as canonical JSON; raises NotCanonicalJSON before anything is stored."""
    if not isinstance(record, Mapping):
        raise NotCanonicalJSON("", "a receipt record must be a JSON object")
    return canonical_json(dict(record))


# ---------------------------------------------------------------------------------------------
# In-memory store
# ---------------------------------------------------------------------------------------------

_MIN_SWEEP_INTERVAL = 1024
"""The in-memory store scans for expired entries after max(this, number of entries) reserves, so a
full scan costs O(1) per reserve on average however large the store grows."""


class InMemoryReceiptStore:
    """Receipts in a dict guarded by a lock: for tests, the lab and single-process apps.

    Everything is lost when the process ends.  Records are kept as canonical JSON text and parsed
    again on every replay, exactly as the SQLite store does, so both stores replay identically.
    """

    def __init__(self, *, ttl_s: float = 86400, lease_s: float = 300, clock: Callable[[], float] = time.time) -> None:
        self._ttl_s = _check_duration("ttl_s", ttl_s)
        self._lease_s = _check_duration("lease_s", lease_s)
        self._clock = clock
        self._entries: Dict[Tuple[str, str, str], _Entry] = {}
        self._lock = threading.Lock()
        self._reserves_since_sweep = 0

    def reserve(self, key: ReceiptKey, fingerprint: str) -> Reservation:
        _check_fingerprint(fingerprint)
        with self._lock:
            now = self._clock()
            self._sweep_now_and_then(now)
            address = _address(key)
            answer = _decide(self._entries.get(address), fingerprint, now)
            if answer is not None:
                return answer
            self._entries[address] = _Entry(fingerprint, _IN_FLIGHT, None, now + self._lease_s)
            return Reservation(ReservationStatus.RESERVED, fingerprint=fingerprint)

    def complete(self, key: ReceiptKey, fingerprint: str, record: Mapping[str, Any]) -> None:
        _check_fingerprint(fingerprint)
        text = _record_text(record)
        with self._lock:
            now = self._clock()
            address = _address(key)
            if _complete_may_write(self._entries.get(address), fingerprint, now):
                self._entries[address] = _Entry(fingerprint, _COMPLETED, text, now + self._ttl_s)

    def release(self, key: ReceiptKey, fingerprint: str) -> None:
        with self._lock:
            address = _address(key)
            entry = self._entries.get(address)
            if entry is not None and entry.state == _IN_FLIGHT and entry.fingerprint == fingerprint:
                del self._entries[address]

    def lookup(self, key: ReceiptKey) -> Optional[Reservation]:
        with self._lock:
            now = self._clock()
            address = _address(key)
            entry = self._entries.get(address)
            if entry is not None and not entry.is_live(now):
                del self._entries[address]
                return None
            return _status_of(entry, now)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()

    def __enter__(self) -> "InMemoryReceiptStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _sweep_now_and_then(self, now: float) -> None:
        """Drop every expired entry once in a while, so abandoned keys do not pile up forever."""
        self._reserves_since_sweep += 1
        if self._reserves_since_sweep < max(_MIN_SWEEP_INTERVAL, len(self._entries)):
            return
        self._reserves_since_sweep = 0
        expired = [address for address, entry in self._entries.items() if not entry.is_live(now)]
        for address in expired:
            del self._entries[address]


def _address(key: ReceiptKey) -> Tuple[str, str, str]:
    if not isinstance(key, ReceiptKey):
        raise TypeError("key must be a ReceiptKey")
    return (key.tenant, key.tool, key.key)


# ---------------------------------------------------------------------------------------------
# SQLite store
# ---------------------------------------------------------------------------------------------

SCHEMA_VERSION = 1
"""Stored in ``PRAGMA user_version``; a file written by a newer schema is refused, not guessed at."""

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another writer (thread or process) before giving up."""

_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS receipts (
    tenant      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    record      TEXT,
    expires_at  REAL NOT NULL,
    PRIMARY KEY (tenant, tool, key)
) WITHOUT ROWID
"""
_SELECT_ENTRY = (
    "SELECT fingerprint, state, record, expires_at FROM receipts WHERE tenant = ? AND tool = ? AND key = ?"
)
_UPSERT_ENTRY = (
    "INSERT OR REPLACE INTO receipts (tenant, tool, key, fingerprint, state, record, expires_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_IN_FLIGHT = (
    "DELETE FROM receipts WHERE tenant = ? AND tool = ? AND key = ? AND state = 'in_flight' AND fingerprint = ?"
)
_SELECT_FIRST_SWEEP_CHUNK = "SELECT tenant, tool, key, expires_at FROM receipts ORDER BY tenant, tool, key LIMIT ?"
_SELECT_NEXT_SWEEP_CHUNK = (
    "SELECT tenant, tool, key, expires_at FROM receipts WHERE (tenant, tool, key) > (?, ?, ?)"
    " ORDER BY tenant, tool, key LIMIT ?"
)
_DELETE_EXPIRED_ENTRY = "DELETE FROM receipts WHERE tenant = ? AND tool = ? AND key = ? AND expires_at <= ?"

SWEEP_EVERY = 64
SWEEP_CHUNK = 256
"""Every ``SWEEP_EVERY`` reserves, the SQLite store examines the next ``SWEEP_CHUNK`` rows in key
order (wrapping around) and deletes the expired ones.  This bounded, incremental sweep replaces an
index on the expiry time, which would cost about a third of the write throughput."""


class SqliteReceiptStore:
    """Receipts in one SQLite file, shared by threads and processes and kept across restarts.

    Concurrency: the file uses the WAL journal, so readers never block the single writer.  Every
    ``reserve`` and ``complete`` is one ``BEGIN IMMEDIATE`` transaction (read the row, decide,
    write), which takes SQLite's write lock up front: two contenders, in any threads or processes,
    can never both see the key free.  A contender that finds the lock taken waits up to
    ``BUSY_TIMEOUT_MS``.  Within a process, one connection is shared by all threads behind a lock.
    Expiry times are absolute ``clock()`` seconds, so the default wall clock (``time.time``) is
    the right one for a file shared between processes and restarts; a monotonic clock is not.

    Durability: ``synchronous="NORMAL"`` (the default) with WAL never corrupts the file and loses
    nothing when the *process* crashes; after a power loss or OS crash the last transactions
    before the crash may be rolled back, so a receipt written just before could be missing and a
    retry could run the effect again.  Pass ``synchronous="FULL"`` to sync the WAL on every commit
    and close that window, at the cost of one fsync per reserve/complete.

    Privacy: records are stored as given. The registry masks a tool's `redact` fields before it
    completes a receipt, but every other value is a real tool result, so a new file is created
    readable and writable by its owner only (mode 0600 on POSIX).

    Do not use a store across ``fork``: open it in the child (the ``spawn`` start method is fine).
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        ttl_s: float = 86400,
        lease_s: float = 300,
        clock: Callable[[], float] = time.time,
        synchronous: str = "NORMAL",
    ) -> None:
        self._ttl_s = _check_duration("ttl_s", ttl_s)
        self._lease_s = _check_duration("lease_s", lease_s)
        self._clock = clock
        level = synchronous.upper() if isinstance(synchronous, str) else None
        if level not in _SYNCHRONOUS_LEVELS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS_LEVELS)}")
        self._lock = threading.Lock()
        self._reserves_since_sweep = 0
        self._sweep_after: Optional[Tuple[str, str, str]] = None  # where the next sweep chunk starts
        self._connection: Optional[sqlite3.Connection] = _open_connection(os.fspath(path), level)

    # -- the protocol -------------------------------------------------------------------------

    def reserve(self, key: ReceiptKey, fingerprint: str) -> Reservation:
        _check_fingerprint(fingerprint)
        address = _address(key)
        with self._lock:
            connection = self._open()
            with _immediate_transaction(connection):
                now = self._clock()
                self._sweep_now_and_then(connection, now)
                answer = _decide(_read_entry(connection, address), fingerprint, now)
                if answer is not None:
                    return answer
                connection.execute(_UPSERT_ENTRY, (*address, fingerprint, _IN_FLIGHT, None, now + self._lease_s))
                return Reservation(ReservationStatus.RESERVED, fingerprint=fingerprint)

    def complete(self, key: ReceiptKey, fingerprint: str, record: Mapping[str, Any]) -> None:
        _check_fingerprint(fingerprint)
        address = _address(key)
        text = _record_text(record)
        with self._lock:
            connection = self._open()
            with _immediate_transaction(connection):
                now = self._clock()
                if _complete_may_write(_read_entry(connection, address), fingerprint, now):
                    connection.execute(_UPSERT_ENTRY, (*address, fingerprint, _COMPLETED, text, now + self._ttl_s))

    def release(self, key: ReceiptKey, fingerprint: str) -> None:
        address = _address(key)
        with self._lock:
            self._open().execute(_DELETE_IN_FLIGHT, (*address, fingerprint))  # one statement: atomic

    def lookup(self, key: ReceiptKey) -> Optional[Reservation]:
        address = _address(key)
        with self._lock:
            entry = _read_entry(self._open(), address)
            return _status_of(entry, self._clock())

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> "SqliteReceiptStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("the receipt store is closed")
        return self._connection

    def _sweep_now_and_then(self, connection: sqlite3.Connection, now: float) -> None:
        """Purge expired rows, a bounded chunk at a time (inside the caller's transaction)."""
        self._reserves_since_sweep += 1
        if self._reserves_since_sweep < SWEEP_EVERY:
            return
        self._reserves_since_sweep = 0
        if self._sweep_after is None:
            rows = connection.execute(_SELECT_FIRST_SWEEP_CHUNK, (SWEEP_CHUNK,)).fetchall()
        else:
            rows = connection.execute(_SELECT_NEXT_SWEEP_CHUNK, (*self._sweep_after, SWEEP_CHUNK)).fetchall()
        self._sweep_after = tuple(rows[-1][:3]) if len(rows) == SWEEP_CHUNK else None  # None: wrap around
        expired = [(tenant, tool, key, now) for tenant, tool, key, expires_at in rows if expires_at <= now]
        if expired:
            connection.executemany(_DELETE_EXPIRED_ENTRY, expired)


def _open_connection(path: str, synchronous: str) -> sqlite3.Connection:
    """Open the file in WAL mode and make sure the schema is there, once per store."""
    _create_private_file(path)
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
        _use_wal(connection)
        connection.execute(f"PRAGMA synchronous = {synchronous}")  # checked against a fixed list
        _ensure_schema(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _use_wal(connection: sqlite3.Connection) -> None:
    """Put the file in WAL mode (a setting stored in the file; ":memory:" stays "memory").

    Switching needs an exclusive lock, and while another connection holds a write lock (another process
    creating the schema of the same new file) SQLite refuses the switch at once with "database is locked",
    without waiting through its busy handler. So a file already in WAL is left alone, and a switch is
    retried until the busy timeout.
    """
    give_up = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0] in ("wal", "memory"):
                return
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() >= give_up:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock, so trying again can succeed."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (primary codes)
    return "locked" in str(error) or "busy" in str(error)  # Python 3.10 carries only the message


def _create_private_file(path: str) -> None:
    """Create a missing database file readable by its owner only.

    Receipts hold real tool results (only the tools' `redact` fields are masked), so the file should
    not be world-readable; SQLite gives its -wal and -shm files the same permissions as the database.
    """
    if path in ("", ":memory:"):
        return
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(descriptor)


def _ensure_schema(connection: sqlite3.Connection) -> None:
    with _immediate_transaction(connection):
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"receipt store schema version {version} is newer than this code understands ({SCHEMA_VERSION})"
            )
        if version < SCHEMA_VERSION:
            connection.execute(_CREATE_TABLE)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


class _immediate_transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if the body raises."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def __enter__(self) -> sqlite3.Connection:
        self._connection.execute("BEGIN IMMEDIATE")
        return self._connection

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if exc_type is None:
            self._connection.execute("COMMIT")
        elif self._connection.in_transaction:  # SQLite may already have rolled back by itself
            self._connection.execute("ROLLBACK")


def _read_entry(connection: sqlite3.Connection, address: Tuple[str, str, str]) -> Optional[_Entry]:
    row = connection.execute(_SELECT_ENTRY, address).fetchone()
    if row is None:
        return None
    stored_fingerprint, state, record_text, expires_at = row
    return _Entry(stored_fingerprint, state, record_text, expires_at)
