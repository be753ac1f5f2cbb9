"""Receipts in one SQLite file, shared by the threads and processes of one host, kept across restarts."""

from __future__ import annotations

import math
import os
import re
import sqlite3
import threading
import time
from typing import Any, Callable, List, Mapping, Optional, Tuple, TypeVar, Union

from ..fingerprint import check_fingerprint_key, fingerprint_key_id, new_fingerprint_key
from . import _rules as rules
from ._clock import StepGuard, boot_identity, system_monotonic
from .protocol import (
    PURGE_LIMIT,
    Lapse,
    ReceiptKey,
    ReceiptStoreUnavailable,
    Reservation,
    ReservationStatus,
    acquire_within,
    store_timeout,
)

__all__ = ["BUSY_TIMEOUT_MS", "SCHEMA_VERSION", "SWEEP_CHUNK", "SWEEP_EVERY", "SqliteReceiptStore"]

SCHEMA_VERSION = 3
"""Stored in ``PRAGMA user_version``. Version 2 added owner tokens, what a lapse means, and the
fingerprint key; version 3 the ledger of spent single-use approvals. An older file is migrated when
opened, a newer one is refused, not guessed at."""

BUSY_TIMEOUT_MS = 5000
"""How long opening a store waits for another writer (a process setting up the same new file).
Each later call waits only as long as its own ``timeout_s`` allows."""

SWEEP_EVERY = 128
SWEEP_CHUNK = 256
"""Every ``SWEEP_EVERY`` reserves, the SQLite store examines the next ``SWEEP_CHUNK`` rows in key
order (wrapping around) and deletes the expired ones (never an unknown one: it waits to be resolved).
This bounded, incremental sweep replaces an index on the expiry time, which would cost about a third
of the write throughput. Two rows examined per reserve, in SQL, cost a reserve under a microsecond; a full pass
over a table of N rows takes N / 2 reserves, so a row is deleted at most that many reserves after it
expired."""

_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")

# Version 1's table plus, at the end (where ALTER TABLE puts them), the columns version 2 added.
_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS receipts (
    tenant      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    record      TEXT,
    expires_at  REAL NOT NULL,
    owner       TEXT,
    lapse       TEXT NOT NULL DEFAULT 'unknown' CHECK (lapse IN ('unknown', 'takeover')),
    PRIMARY KEY (tenant, tool, key)
) WITHOUT ROWID
"""
_MIGRATE_FROM_V1 = (
    "ALTER TABLE receipts ADD COLUMN owner TEXT",
    "ALTER TABLE receipts ADD COLUMN lapse TEXT NOT NULL DEFAULT 'unknown' CHECK (lapse IN ('unknown', 'takeover'))",
)
_CREATE_META = "CREATE TABLE IF NOT EXISTS store_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
_CREATE_APPROVALS = """
CREATE TABLE IF NOT EXISTS approvals (
    tenant      TEXT NOT NULL,
    approval_id TEXT NOT NULL,
    kept_until  REAL NOT NULL,
    PRIMARY KEY (tenant, approval_id)
) WITHOUT ROWID
"""
# What the statements below rely on, table by table: (the primary key, in order; the other columns).
# The primary key is what makes a claim atomic: without it two processes each insert a row for one key.
_TABLE_SHAPES = {
    "receipts": (("tenant", "tool", "key"),
                 ("fingerprint", "state", "record", "expires_at", "owner", "lapse")),
    "store_meta": (("name",), ("value",)),
    "approvals": (("tenant", "approval_id"), ("kept_until",)),
}
_KEY_ROW, _KEY_ID_ROW = "fingerprint_key", "fingerprint_key_id"
_ANCHOR_ROW = "clock_anchor"  # "<boot id> <StepGuard.saved()>": the clock guard's state for this boot
_SAVE_ANCHOR = "INSERT OR REPLACE INTO store_meta (name, value) VALUES ('clock_anchor', ?)"
_HOLD_ROW = "clock_hold"  # the longest lifetime (ttl or lease) any store on this file writes: how long to hold a step
_SAVE_HOLD = "INSERT OR REPLACE INTO store_meta (name, value) VALUES ('clock_hold', ?)"

_WHERE_KEY = "tenant = ? AND tool = ? AND key = ?"
# The fencing rule (rules.held_by) and the resolving rule (rules.may_resolve) as SQL.
_WHERE_HELD_BY = _WHERE_KEY + " AND state = 'in_flight' AND owner = ?"
# 9e999 is SQLite's +infinity (rules.UNRESOLVED_UNTIL): the expiry of a receipt of unknown outcome.
_IS_UNRESOLVED = ("((state = 'in_flight' AND lapse = 'unknown' AND expires_at <= ?)"
                  " OR (state = 'completed' AND expires_at = 9e999))")
_WHERE_UNKNOWN = _WHERE_KEY + " AND " + _IS_UNRESOLVED + " AND fingerprint = ?"

_SELECT_ENTRY = "SELECT fingerprint, state, record, expires_at, owner, lapse FROM receipts WHERE " + _WHERE_KEY
# The purge rule (rules.Entry.is_purgeable) as SQL, for the row `receipts` at time `?`.
_PURGEABLE = "receipts.expires_at <= ? AND NOT (receipts.state = 'in_flight' AND receipts.lapse = 'unknown')"
# A reserve's common case in one statement: insert the reservation of a key nobody holds. A row under
# the key (live, unknown, or expired with nothing to keep) makes it change nothing (no row inserted).
# It costs what a raw INSERT costs; an ON CONFLICT ... DO UPDATE clause costs more, an exception too.
_CLAIM = (
    "INSERT OR IGNORE INTO receipts (tenant, tool, key, fingerprint, state, record, expires_at, owner, lapse)"
    " VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, ?)"
)
_UPSERT_ENTRY = (
    "INSERT OR REPLACE INTO receipts (tenant, tool, key, fingerprint, state, record, expires_at, owner, lapse)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_RENEW = "UPDATE receipts SET expires_at = ? WHERE " + _WHERE_HELD_BY
# The holder keeps its owner token in the receipt: a completion that changes nothing is then asked
# whether it is a retry of one that landed (its first answer was lost): its own record under its owner.
_COMPLETE = "UPDATE receipts SET state = 'completed', record = ?, expires_at = ? WHERE " + _WHERE_HELD_BY
_COMPLETED_BY = "SELECT 1 FROM receipts WHERE " + _WHERE_KEY + " AND state = 'completed' AND owner = ? AND record = ?"
# rules.kept_by: a live receipt its owner completed; never shortened.
_KEEP = ("UPDATE receipts SET expires_at = MAX(expires_at, ?) WHERE " + _WHERE_KEY
         + " AND state = 'completed' AND owner = ? AND expires_at > ?")
# rules.expires_by: a receipt kept until resolved that its owner completed.
_LET_EXPIRE = ("UPDATE receipts SET expires_at = ? WHERE " + _WHERE_KEY
               + " AND state = 'completed' AND owner = ? AND expires_at = 9e999")
_RELEASE = "DELETE FROM receipts WHERE " + _WHERE_HELD_BY
_RESOLVE_HAPPENED = (
    "UPDATE receipts SET state = 'completed', record = ?, expires_at = ?, owner = NULL WHERE " + _WHERE_UNKNOWN
)
_RESOLVE_NOT_HAPPENED = "DELETE FROM receipts WHERE " + _WHERE_UNKNOWN
_SELECT_UNRESOLVED = (
    "SELECT tenant, tool, key FROM receipts WHERE " + _IS_UNRESOLVED + f" AND tool <> '{rules.TASK_GATE_TOOL}'"
    " ORDER BY tenant, tool, key LIMIT ?"
)
# The sweep: where a chunk ends (its last key; none when fewer rows are left), then one DELETE of the
# purgeable rows in the chunk's key range. Both walk the primary key; no row reaches Python.
_AFTER = "(tenant, tool, key) > (?, ?, ?)"
_UP_TO = "(tenant, tool, key) <= (?, ?, ?)"
_SWEEP_END_FIRST = "SELECT tenant, tool, key FROM receipts ORDER BY tenant, tool, key LIMIT 1 OFFSET ?"
_SWEEP_END_NEXT = "SELECT tenant, tool, key FROM receipts WHERE " + _AFTER + " ORDER BY tenant, tool, key LIMIT 1 OFFSET ?"
_SWEEP_DELETE = {  # (has a start, has an end) -> statement; the purge rule's time comes last
    (False, False): "DELETE FROM receipts WHERE " + _PURGEABLE,
    (False, True): "DELETE FROM receipts WHERE " + _UP_TO + " AND " + _PURGEABLE,
    (True, False): "DELETE FROM receipts WHERE " + _AFTER + " AND " + _PURGEABLE,
    (True, True): "DELETE FROM receipts WHERE " + _AFTER + " AND " + _UP_TO + " AND " + _PURGEABLE,
}
_PURGE_RECEIPTS = (
    "DELETE FROM receipts WHERE (tenant, tool, key) IN (SELECT tenant, tool, key FROM receipts"
    " WHERE expires_at <= ? AND NOT (state = 'in_flight' AND lapse = 'unknown') LIMIT ?)"
)
_PURGE_APPROVALS = (
    "DELETE FROM approvals WHERE (tenant, approval_id) IN"
    " (SELECT tenant, approval_id FROM approvals WHERE kept_until <= ? LIMIT ?)"
)
# A first use inserts the row; a use past the row's retention replaces it; any other use changes nothing.
_SPEND_APPROVAL = (
    "INSERT INTO approvals (tenant, approval_id, kept_until) VALUES (?, ?, ?)"
    " ON CONFLICT (tenant, approval_id) DO UPDATE SET kept_until = excluded.kept_until"
    " WHERE approvals.kept_until <= ?"
)

_Answer = TypeVar("_Answer")
_monotonic = time.monotonic  # a module global, so that tests can move a call's time on


class SqliteReceiptStore:
    """Receipts in one SQLite file, shared by threads and processes and kept across restarts.

    Concurrency: the file uses the WAL journal, so readers never block the single writer. ``reserve``
    first tries one ``INSERT OR IGNORE`` of the reservation: atomic by itself, it takes a key no row
    holds (the common case: one statement, like a raw insert) and changes nothing otherwise. A held
    key is then answered from a read of its row (a replay needs no write lock); only when that row has
    nothing left to keep (expired), or is gone, does a ``BEGIN IMMEDIATE`` transaction read, decide
    and replace it under SQLite's write lock. Two contenders, in any threads or processes, can never
    both take the key. ``renew``, ``complete``, ``release`` and ``resolve`` are single conditional
    statements, atomic by themselves. Within a process one connection is shared by all threads behind a lock. Every call
    waits for that lock, and then for SQLite's (its busy timeout, set per call), only as long as its
    ``timeout_s`` allows; then it raises ``ReceiptStoreUnavailable``, having changed nothing.
    Expiry times are absolute ``clock()`` seconds, so the default wall clock (``time.time``) is the
    right one for a file shared between processes and restarts; a monotonic clock is not. The wall
    clock is guarded against steps by ``monotonic`` (see `agent_lab.stores._clock`): nothing expires
    sooner than the monotonic clock says, so a wall clock stepped forward by more than a ttl never lets
    a retry run again. With the system's monotonic clock (the default) on Linux, the guard's anchor is
    kept in the file for the current boot, so a process that opens the file after a step (a restart)
    still counts from before it; after a reboot, or with a ``monotonic`` you pass, the anchor is taken
    when the store opens. A test that moves time by hand moves both clocks.

    Fingerprint key: a new file gets a random key, stored in it (table ``store_meta``) inside the
    transaction that creates the schema, so processes opening a new file at once all read the one key.
    Pass ``fingerprint_key=`` to keep the key out of the file: only its public id is stored, and
    opening the file with another key (or without one) is refused.

    Durability: ``synchronous="NORMAL"`` (the default) with WAL never corrupts the file and loses
    nothing when the *process* crashes; after a power loss or OS crash the last transactions
    before the crash may be rolled back, so a receipt written just before could be missing and a
    retry could run the effect again. Pass ``synchronous="FULL"`` to sync the WAL on every commit
    and close that window, at the cost of one fsync per reserve/complete.

    Privacy: records are stored as given. The registry masks a tool's `redact` fields before it
    completes a receipt, but every other value is a real tool result (and whoever holds a stored
    fingerprint key can test guesses against the fingerprints), so a new file is created readable
    and writable by its owner only (mode 0600 on POSIX).

    Migration: a version-1 file (written before owner tokens and keyed fingerprints) is migrated in
    place when opened. Its in-flight reservations have no owner, so nobody can complete them: they
    lapse to ``unknown``. Its receipts keep their unkeyed ``sha256:`` fingerprints, so a retry of
    such a key answers ``idempotency_conflict`` (never a second effect) until the receipt expires.

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
        fingerprint_key: Optional[bytes] = None,
        monotonic: Optional[Callable[[], float]] = None,
    ) -> None:
        self._ttl_s = rules.check_duration("ttl_s", ttl_s)
        self._lease_s = rules.check_duration("lease_s", lease_s)
        self._clock = clock
        self._guard = StepGuard(clock, system_monotonic if monotonic is None else monotonic,
                                max(self._ttl_s, self._lease_s))
        self._boot = boot_identity() if monotonic is None else None  # keep the anchor in the file for it
        level = synchronous.upper() if isinstance(synchronous, str) else None
        if level not in _SYNCHRONOUS_LEVELS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS_LEVELS)}")
        given_key = None if fingerprint_key is None else check_fingerprint_key(fingerprint_key)
        self._lock = threading.Lock()
        self._reserves_since_sweep = 0
        self._sweep_after: Optional[Tuple[str, str, str]] = None  # where the next sweep chunk starts
        self._busy_timeout_ms = BUSY_TIMEOUT_MS
        self._busy_timeout_for = -1.0  # the `timeout_s` the busy timeout was last set for
        self._call_deadline = 0.0  # monotonic: when the current call's time is up (set by `_call`)
        self._path = os.fspath(path)
        connection, self._fingerprint_key = _open_connection(self._path, level, given_key, self._boot, self._guard)
        self._connection: Optional[sqlite3.Connection] = connection
        # The file this store opened, by device and inode: a call finding another file (or none) under the
        # path refuses, so a store whose file was deleted or replaced never splits in two (see `_call`).
        self._identity = _file_identity(self._path)

    @property
    def lease_s(self) -> float:
        return self._lease_s

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    @property
    def fingerprint_key(self) -> bytes:
        return self._fingerprint_key

    # -- the protocol -------------------------------------------------------------------------

    def reserve(
        self, key: ReceiptKey, fingerprint: str, *, lapse: Lapse = Lapse.UNKNOWN, timeout_s: Optional[float] = None
    ) -> Reservation:
        rules.check_fingerprint(fingerprint)
        lapse_value = rules.check_lapse(lapse)
        address = rules.address(key)

        owner = rules.new_owner_token()

        def work(connection: sqlite3.Connection) -> Reservation:
            now, stamp = self._times(connection)
            if self._sweep_now_and_then(connection, now):  # its DELETE may have waited for the lock
                self._wait_no_longer_than_the_call(connection)
            # 1. Take a key no row holds, in one atomic statement.
            if _changed(connection.execute(_CLAIM, (*address, fingerprint, stamp + self._lease_s, owner, lapse_value))):
                return rules.reservation(ReservationStatus.RESERVED, fingerprint=fingerprint, owner=owner)
            # 2. Answer from the row as it is now (a replay needs no write lock).
            answer = rules.decide_reserve(_read_entry(connection, address), fingerprint, now)
            if answer is not None:
                return answer
            # 3. The row has nothing to keep (expired), or was removed after 1: decide again under the
            #    write lock, where nothing can move, and replace it. The claim may have waited for the
            #    lock already: this wait gets only what is left of the call's time.
            self._wait_no_longer_than_the_call(connection)
            with _immediate_transaction(connection):
                now, stamp = self._times(connection)
                answer = rules.decide_reserve(_read_entry(connection, address), fingerprint, now)
                if answer is not None:
                    return answer
                connection.execute(
                    _UPSERT_ENTRY,
                    (*address, fingerprint, rules.IN_FLIGHT, None, stamp + self._lease_s, owner, lapse_value),
                )
                return rules.reservation(ReservationStatus.RESERVED, fingerprint=fingerprint, owner=owner)

        return self._call(timeout_s, work)

    def renew(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)
        return self._call(timeout_s, lambda connection: _changed(
            connection.execute(_RENEW, (self._times(connection)[1] + self._lease_s, *address, owner))))

    def complete(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        return self._complete(key, owner, record, timeout_s, lambda connection: self._times(connection)[1] + self._ttl_s)

    def complete_unknown(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        return self._complete(key, owner, record, timeout_s, lambda connection: rules.UNRESOLVED_UNTIL)

    def _complete(self, key: ReceiptKey, owner: str, record: Mapping[str, Any], timeout_s: Optional[float],
                  expiry: Callable[[sqlite3.Connection], float]) -> bool:
        """Store ``owner``'s record until ``expiry`` (or find it stored already: a repeated completion)."""
        rules.check_owner(owner)
        text = rules.record_text(record)
        address = rules.address(key)

        def work(connection: sqlite3.Connection) -> bool:
            if _changed(connection.execute(_COMPLETE, (text, expiry(connection), *address, owner))):
                return True
            return connection.execute(_COMPLETED_BY, (*address, owner, text)).fetchone() is not None

        return self._call(timeout_s, work)

    def keep(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None,
             until_resolved: bool = False) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)

        def work(connection: sqlite3.Connection) -> bool:
            now, stamp = self._times(connection)
            until = rules.UNRESOLVED_UNTIL if until_resolved else stamp + self._ttl_s
            return _changed(connection.execute(_KEEP, (until, *address, owner, now)))

        return self._call(timeout_s, work)

    def let_expire(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)

        def work(connection: sqlite3.Connection) -> bool:
            stamp = self._times(connection)[1]
            return _changed(connection.execute(_LET_EXPIRE, (stamp + self._ttl_s, *address, owner)))

        return self._call(timeout_s, work)

    def release(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        address = rules.address(key)
        return self._call(timeout_s, lambda connection: _changed(connection.execute(_RELEASE, (*address, owner))))

    def resolve(
        self,
        key: ReceiptKey,
        fingerprint: str,
        *,
        record: Optional[Mapping[str, Any]],
        timeout_s: Optional[float] = None,
    ) -> bool:
        rules.check_fingerprint(fingerprint)
        text = rules.record_text(record) if record is not None else None
        address = rules.address(key)

        def work(connection: sqlite3.Connection) -> bool:
            now, stamp = self._times(connection)
            if text is None:
                return _changed(connection.execute(_RESOLVE_NOT_HAPPENED, (*address, now, fingerprint)))
            return _changed(connection.execute(_RESOLVE_HAPPENED,
                                               (text, stamp + self._ttl_s, *address, now, fingerprint)))

        return self._call(timeout_s, work)

    def lookup(self, key: ReceiptKey, *, timeout_s: Optional[float] = None) -> Optional[Reservation]:
        address = rules.address(key)
        return self._call(timeout_s, lambda connection: rules.status_of(_read_entry(connection, address),
                                                                        self._times(connection)[0]))

    def unresolved(self, *, limit: int = 100, timeout_s: Optional[float] = None) -> List[ReceiptKey]:
        rules.check_limit(limit)
        rows = self._call(timeout_s, lambda connection: connection.execute(
            _SELECT_UNRESOLVED, (self._times(connection)[0], limit)).fetchall())
        return [ReceiptKey(tenant, tool, key) for tenant, tool, key in rows]

    def purge(self, *, limit: int = PURGE_LIMIT, timeout_s: Optional[float] = None) -> int:
        rules.check_limit(limit)

        def work(connection: sqlite3.Connection) -> int:
            with _immediate_transaction(connection):
                now = self._times(connection)[0]
                deleted = connection.execute(_PURGE_RECEIPTS, (now, limit)).rowcount
                if deleted < limit:
                    deleted += connection.execute(_PURGE_APPROVALS, (now, limit - deleted)).rowcount
                return deleted

        return self._call(timeout_s, work)

    def consume_approval(
        self, tenant: str, approval_id: str, *, expires_at: float, now: Optional[float] = None,
        timeout_s: Optional[float] = None,
    ) -> Optional[bool]:
        tenant, approval_id, expires_at, caller_now = rules.check_approval(tenant, approval_id, expires_at, now)

        def work(connection: sqlite3.Connection) -> Optional[bool]:
            now, stamp = self._times(connection)
            if rules.caller_lags(caller_now, now, self._ttl_s):
                return None
            kept_until = rules.approval_kept_until(expires_at, caller_now, stamp, self._ttl_s)
            return _changed(connection.execute(_SPEND_APPROVAL, (tenant, approval_id, kept_until, now)))

        return self._call(timeout_s, work)

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

    def _call(self, timeout_s: Optional[float], work: Callable[[sqlite3.Connection], _Answer]) -> _Answer:
        """Run ``work`` on the connection, waiting for the thread lock and then SQLite's lock no
        longer than ``timeout_s`` in all; a busy or failing database is ReceiptStoreUnavailable."""
        left = acquire_within(self._lock, store_timeout(timeout_s))
        self._call_deadline = _monotonic() + left
        try:
            connection = self._connection
            if connection is None:
                raise ValueError("the receipt store is closed")
            if self._identity is not None and _file_identity(self._path) != self._identity:
                raise ReceiptStoreUnavailable(
                    "the receipt database file was removed or replaced while this store had it open; it refuses "
                    "every call until that file is back (a new file would not know the receipts stored before)")
            try:
                if left != self._busy_timeout_for:
                    self._wait_at_most(connection, left)
                return work(connection)
            except sqlite3.ProgrammingError:  # a misuse (the statement or the connection), not the database
                raise
            except sqlite3.DatabaseError as error:  # locked, busy, disk full, I/O error, a corrupted file
                raise ReceiptStoreUnavailable(f"the receipt database failed: {error}") from error
        finally:
            self._lock.release()

    def _times(self, connection: sqlite3.Connection) -> Tuple[float, float]:
        """(check, stamp): the time to decide expiry by, and to count new expiries from (`StepGuard`).
        A step the guard has just taken becomes the file's anchor, for processes that open it later."""
        guard = self._guard
        if guard.step_due():  # before a step is taken: does a store on this file need it held longer?
            _take_up_hold(connection, guard)
        times = guard.times()
        if guard.changed:
            guard.changed = self._boot is not None and not self._save_anchor(connection)
        return times

    def _save_anchor(self, connection: sqlite3.Connection) -> bool:
        """Keep the clock guard's state in the file for this boot, if that needs no wait: True when saved.

        Best effort, and none of the call's time: outside a transaction of this call (which holds the
        write lock already) the save does not wait for another writer (busy timeout 0), so a call whose
        save met the lock still gives its own statements all its time (a save that waited, then the
        statement, took twice the call's time). One that did not save tries again at the next call."""
        saved = f"{self._boot} {self._guard.saved()}"
        if connection.in_transaction:
            try:
                connection.execute(_SAVE_ANCHOR, (saved,))
            except sqlite3.OperationalError:
                return False
            return True
        connection.execute("PRAGMA busy_timeout = 0")
        self._busy_timeout_ms = 0
        try:
            connection.execute(_SAVE_ANCHOR, (saved,))
        except sqlite3.OperationalError:  # another writer holds the lock: kept in this process until then
            return False
        finally:
            self._wait_no_longer_than_the_call(connection)  # the call's own time again, what is left of it
        return True

    def _wait_no_longer_than_the_call(self, connection: sqlite3.Connection) -> None:
        """Before another statement of a call that may wait for SQLite's lock (each statement waits up
        to the busy timeout): set the busy timeout to what is left of the call's time, or, when nothing
        is left, give up (ReceiptStoreUnavailable) rather than start it."""
        left = self._call_deadline - _monotonic()
        if left <= 0:
            raise ReceiptStoreUnavailable("the receipt database did not answer within the timeout")
        self._wait_at_most(connection, left)

    def _wait_at_most(self, connection: sqlite3.Connection, seconds: float) -> None:
        """Set SQLite's busy timeout (how long a statement waits for another writer) for this call.

        Rounded down to a coarse step (see `_busy_timeout_ms`), so that calls whose deadlines differ by
        a little (every registry call: its time left) reuse the setting instead of paying a PRAGMA."""
        milliseconds = _busy_timeout_ms(seconds)
        if milliseconds != self._busy_timeout_ms:
            connection.execute(f"PRAGMA busy_timeout = {milliseconds}")  # an int: nothing to inject
            self._busy_timeout_ms = milliseconds
        self._busy_timeout_for = seconds

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("the receipt store is closed")
        return self._connection

    def _sweep_now_and_then(self, connection: sqlite3.Connection, now: float) -> bool:
        """Purge the expired rows of the next chunk of keys, every ``SWEEP_EVERY`` reserves.

        Its own statements (each atomic, applying the purge rule row by row), so a reserve's claim stays
        one statement; where the chunk ended is only a hint for the next sweep. True when it swept."""
        self._reserves_since_sweep += 1
        if self._reserves_since_sweep < SWEEP_EVERY:
            return False
        self._reserves_since_sweep = 0
        start = self._sweep_after
        if start is None:
            end = connection.execute(_SWEEP_END_FIRST, (SWEEP_CHUNK - 1,)).fetchone()
        else:
            end = connection.execute(_SWEEP_END_NEXT, (*start, SWEEP_CHUNK - 1)).fetchone()
        bounds = (*(start or ()), *(end or ()), now)
        connection.execute(_SWEEP_DELETE[start is not None, end is not None], bounds)
        self._sweep_after = None if end is None else (end[0], end[1], end[2])  # None: wrap around
        return True


def _busy_timeout_ms(seconds: float) -> int:
    """``seconds`` in whole milliseconds, rounded down to its four leading binary digits above 16 ms.

    Never more than the time given (a call must not outwait its deadline) and at most an eighth less
    (SQLite's own busy handler sleeps in steps of up to 100 ms anyway), so nearby deadlines share one
    value."""
    milliseconds = min(int(seconds * 1000), 2**31 - 1)
    if milliseconds <= 16:
        return milliseconds
    shift = milliseconds.bit_length() - 4
    return (milliseconds >> shift) << shift


def _changed(cursor: sqlite3.Cursor) -> bool:
    """Whether a conditional statement found its row (the condition held) and changed it."""
    return cursor.rowcount == 1


def _open_connection(path: str, synchronous: str, given_key: Optional[bytes], boot: Optional[str],
                     guard: StepGuard) -> Tuple[sqlite3.Connection, bytes]:
    """Open the file in WAL mode, make sure the schema is there, settle the fingerprint key and the clock
    guard's anchor (kept in the file for the current `boot`; None: this store's own)."""
    _create_private_file(path)
    _refuse_a_second_name(path)
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
        _use_wal(connection)
        connection.execute(f"PRAGMA synchronous = {synchronous}")  # checked against a fixed list
        key = _ensure_schema(connection, path, given_key, boot, guard)
    except BaseException:
        connection.close()
        raise
    return connection, key


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

    A missing file beside a write-ahead log that is not empty is refused (ReceiptStoreUnavailable): the
    database was deleted while in use, and a new file there would both lose its receipts and meet its log.
    """
    if path in ("", ":memory:"):
        return
    if not os.path.exists(path):
        try:
            wal_bytes = os.path.getsize(path + "-wal")
        except OSError:
            wal_bytes = 0
        if wal_bytes > 0:
            raise ReceiptStoreUnavailable(
                "the receipt database file is missing but its write-ahead log (-wal) is still there: it was "
                "deleted while in use; restore it, or remove the -wal and -shm files to start an empty store")
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(descriptor)


def _refuse_a_second_name(path: str) -> None:
    """Refuse (ValueError) a database file with more than one name (hard link).

    SQLite names the write-ahead log and its index after the path it was given, so processes opening one
    file by two names each write their own -wal, never see each other's reservations, and each takes the
    same key (reproduced: two effects). A file bind-mounted at two paths is one name to the kernel and
    cannot be told apart here: mount the directory, not the file."""
    if path in ("", ":memory:"):
        return
    try:
        links = os.stat(path).st_nlink
    except OSError:
        return  # connecting reports it
    if links > 1:
        raise ValueError(
            f"{path!r} has {links} names (hard links): processes opening it by different names would each "
            "keep their own write-ahead log and take the same key twice; give the receipt file one name")


def _file_identity(path: str) -> Optional[Tuple[int, int]]:
    """The (device, inode) of the file at `path`; None for an in-memory database or a missing file."""
    if path in ("", ":memory:"):
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino)


def _ensure_schema(connection: sqlite3.Connection, path: str, given_key: Optional[bytes], boot: Optional[str],
                   guard: StepGuard) -> bytes:
    """Create or migrate the schema, check the tables' shape, settle the clock guard's state and return
    the fingerprint key, all in one write transaction, so that processes opening one new file at once wait
    for each other and agree on everything."""
    with _immediate_transaction(connection):
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"receipt store schema version {version} is newer than this code understands ({SCHEMA_VERSION})"
            )
        if version == 1:
            for statement in _MIGRATE_FROM_V1:
                connection.execute(statement)
        if version < SCHEMA_VERSION:
            connection.execute(_CREATE_TABLE)
            connection.execute(_CREATE_META)
            connection.execute(_CREATE_APPROVALS)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        _check_tables(connection, path)
        _settle_anchor(connection, boot, guard)
        _settle_hold(connection, boot, guard)
        return _settle_fingerprint_key(connection, given_key)


def _check_tables(connection: sqlite3.Connection, path: str) -> None:
    """Refuse (ValueError) a file whose tables are not the shape the store's statements rely on.

    ``CREATE TABLE IF NOT EXISTS`` keeps a table that is already there, and the version number says
    nothing about it: a `receipts` table without its primary key (hand-edited, restored by another tool,
    or some other program's table in a file of version 0) let every process insert its own reservation
    of one key, and each ran the effect (reproduced). So each table must have exactly its primary key,
    in order, and every column the statements use."""
    for table, (primary_key, others) in _TABLE_SHAPES.items():
        columns = {name: position for _, name, _, _, _, position in
                   connection.execute(f"PRAGMA main.table_info({table})").fetchall()}  # a fixed name
        found_key = tuple(name for name, position in sorted(columns.items(), key=lambda item: item[1])
                          if position > 0)
        missing = [name for name in (*primary_key, *others) if name not in columns]
        if not columns or missing or found_key != primary_key:
            what = ("there is no such table" if not columns else
                    f"it has no column {', '.join(missing)}" if missing else
                    f"its primary key is ({', '.join(found_key)}), not ({', '.join(primary_key)}), so "
                    "processes could each take the same key")
            raise ValueError(f"{path!r} is not a receipt store this code can use: table {table!r}: {what}")
        problem = _primary_key_problem(connection, table)
        if problem:
            raise ValueError(f"{path!r} is not a receipt store this code can use: table {table!r}: {problem}")


_COLLATE = re.compile(r"\bCOLLATE\s*[\"'`\[]?(\w*)", re.IGNORECASE)


def _primary_key_problem(connection: sqlite3.Connection, table: str) -> str:
    """What keeps `table`'s rows from being one per key as the statements compare keys, or "": a trigger
    on it (one that moved each new reservation aside let two stores reserve one key; reproduced), its
    primary key under a collation other than BINARY (NOCASE made tenant "ACME" replay the receipts of
    tenant "acme"; reproduced), a column declared with one (the statements' `tenant = ?` compares with
    the column's collation, whatever the key's: a NOCASE column under a `COLLATE BINARY` key answered
    tenant "acme" from tenant "ACME"'s receipt; reproduced), or a unique index beside the primary key
    (under one on the key with NOCASE, tenant "ACME"'s reservation REPLACEd tenant "acme"'s receipt and
    acme's key ran again; reproduced). The table's SQL is the hand-edited part: ours has no COLLATE."""
    trigger = connection.execute("SELECT name FROM main.sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                                 (table,)).fetchone()
    if trigger is not None:
        return f"it has a trigger ({trigger[0]!r}), which could change what the store writes"
    row = connection.execute("SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    for collation in _COLLATE.findall(str(row[0] if row is not None else "")):
        if collation.upper() != "BINARY":
            return f"a column compares with {collation.upper() or 'another collation'}, not BINARY"
    for _, index, unique, origin, _ in connection.execute(f"PRAGMA main.index_list({table})").fetchall():  # a fixed name
        if unique and origin != "pk":
            return (f"it has a unique index ({index!r}) beside its primary key, under which a write to one key "
                    "could replace another's row")
        if origin == "pk":
            for _, _, column, _, collation, is_key in connection.execute(
                    "SELECT * FROM pragma_index_xinfo(?)", (index,)).fetchall():
                if is_key and str(collation).upper() != "BINARY":
                    return f"its key column {column!r} compares with {str(collation).upper()}, not BINARY"
    return ""


def _settle_anchor(connection: sqlite3.Connection, boot: Optional[str], guard: StepGuard) -> None:
    """The clock guard's state: the one kept in the file for this boot (its anchor, and a step it holds,
    which a process started after the step then holds on until the same moment), or (a new boot, a new
    file, or no boot to keep it for) an anchor at the clocks' offset now, kept for this boot from now on."""
    if boot is not None:
        row = connection.execute("SELECT value FROM store_meta WHERE name = ?", (_ANCHOR_ROW,)).fetchone()
        kept_boot, _, kept = str(row[0]).partition(" ") if row is not None else ("", "", "")
        if kept_boot == boot and guard.restore(kept):
            return
    guard.times()  # the first reading anchors the guard at now's offset
    guard.changed = False
    if boot is not None:
        connection.execute(_SAVE_ANCHOR, (f"{boot} {guard.saved()}",))


def _settle_hold(connection: sqlite3.Connection, boot: Optional[str], guard: StepGuard) -> None:
    """How long a step is held: as long as the longest lifetime any store on this file writes. This
    store's own is added to the file's; the guard holds the longer of the two (a step restored from the
    file, too, is held that long from now), so no store takes a step while another's entries written
    before it could still be live (see `StepGuard.hold_at_least`)."""
    kept = _kept_hold(connection)
    if kept is None or kept < guard.hold_s:
        connection.execute(_SAVE_HOLD, (repr(guard.hold_s),))
    guard.hold_at_least(max(kept or 0.0, guard.hold_s))
    if guard.changed:
        guard.changed = False
        if boot is not None:
            connection.execute(_SAVE_ANCHOR, (f"{boot} {guard.saved()}",))


def _take_up_hold(connection: sqlite3.Connection, guard: StepGuard) -> None:
    """Before this store takes a step: hold it longer if a store that opened the file since needs it."""
    kept = _kept_hold(connection)
    if kept is not None:
        guard.hold_at_least(kept)


def _kept_hold(connection: sqlite3.Connection) -> Optional[float]:
    row = connection.execute("SELECT value FROM store_meta WHERE name = ?", (_HOLD_ROW,)).fetchone()
    try:
        hold = float(row[0]) if row is not None else None
    except (TypeError, ValueError):
        return None
    return hold if hold is not None and math.isfinite(hold) and hold > 0 else None


def _settle_fingerprint_key(connection: sqlite3.Connection, given_key: Optional[bytes]) -> bytes:
    """The file's fingerprint key: the one stored in it, the one given (checked against the stored
    id), or, for a new file, a random one stored now."""
    meta = dict(connection.execute("SELECT name, value FROM store_meta").fetchall())
    stored_key, stored_id = meta.get(_KEY_ROW), meta.get(_KEY_ID_ROW)
    if given_key is not None:
        if stored_id is None:
            connection.execute("INSERT INTO store_meta (name, value) VALUES (?, ?)",
                               (_KEY_ID_ROW, fingerprint_key_id(given_key)))
        elif stored_id != fingerprint_key_id(given_key):
            raise ValueError("fingerprint_key is not the key this receipt file's fingerprints were made with")
        return given_key
    if stored_key is not None:
        return check_fingerprint_key(bytes.fromhex(stored_key))
    if stored_id is not None:
        raise ValueError("this receipt file's fingerprint key is not stored in it: pass it as fingerprint_key=")
    key = new_fingerprint_key()
    connection.executemany("INSERT INTO store_meta (name, value) VALUES (?, ?)",
                           ((_KEY_ROW, key.hex()), (_KEY_ID_ROW, fingerprint_key_id(key))))
    return key


class _immediate_transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if the body raises."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def __enter__(self) -> sqlite3.Connection:
        self._connection.execute("BEGIN IMMEDIATE")
        return self._connection

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if exc_type is None:
            try:
                self._connection.execute("COMMIT")
            except BaseException:  # e.g. the disk is full: never leave the transaction open
                self._roll_back()
                raise
        else:
            self._roll_back()

    def _roll_back(self) -> None:
        if self._connection.in_transaction:  # SQLite may already have rolled back by itself
            self._connection.execute("ROLLBACK")


def _read_entry(connection: sqlite3.Connection, address: Tuple[str, str, str]) -> Optional[rules.Entry]:
    row = connection.execute(_SELECT_ENTRY, address).fetchone()
    if row is None:
        return None
    stored_fingerprint, state, record_text, expires_at, owner, lapse = row
    return rules.Entry(stored_fingerprint, state, record_text, expires_at, owner=owner, lapse=lapse)
