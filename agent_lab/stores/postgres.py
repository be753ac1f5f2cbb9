"""Receipts in PostgreSQL: one database shared by the workers of many hosts.

The library stays dependency-free: the store takes a *connection factory*, any callable returning a new
DB-API 2.0 connection (psycopg 3 is what the tests and the README use), and speaks only SQL through it.
Each method is one conditional statement in the common case (a free key's reserve, its complete), run
on a pooled connection in autocommit, one round trip, as a raw INSERT or UPDATE would be: the rules
(``_rules``) are the same as the SQLite store's, written as conditional statements, so the conformance
suite holds both to the same answers. See ``PostgresReceiptStore`` for the decisions (clock, pool,
deadlines, reconnecting).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import operator
import re
import select
import sys
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union

from ..fingerprint import check_fingerprint_key, fingerprint_key_id, new_fingerprint_key
from . import _postgres_shape as shape
from . import _rules as rules
from ._clock import StepGuard, system_monotonic
from .protocol import (
    PURGE_LIMIT,
    Lapse,
    ReceiptKey,
    ReceiptStoreUnavailable,
    Reservation,
    ReservationStatus,
    store_timeout,
)

__all__ = [
    "OBSERVE_EVERY_S",
    "OPEN_TIMEOUT_S",
    "POOL_SIZE",
    "POSTGRES_SCHEMA_VERSION",
    "PURGE_CHUNK",
    "PURGE_EVERY",
    "PostgresReceiptStore",
]

logger = logging.getLogger("agent_lab.stores.postgres")

POSTGRES_SCHEMA_VERSION = 2
"""Stored in the table ``agent_lab_store_meta``; a database written by a newer version is refused, an
older one is migrated when opened. Version 2 stores a key part too long for a btree index by its digest
(see ``STORED_PART_MAX_BYTES``)."""

STORED_PART_MAX_BYTES = 512
"""A tenant, tool, idempotency key or approval id longer than this (in UTF-8), or starting with
``DIGEST_PREFIX``, is stored in its table's primary key as ``DIGEST_PREFIX`` + the hex SHA-256 of its
UTF-8 text, and the receipt keeps the whole text beside it (``full_tenant``, ``full_tool``,
``full_key``). PostgreSQL cannot index a row of more than 2,704 bytes; without this a long key (one
that does not compress) failed on every try, forever. Every part that fits is stored as it is."""

DIGEST_PREFIX = "~sha256:"

POOL_SIZE = 8
"""Connections one store opens at most (lazily, as concurrent calls need them): the registry's default
worker count. Each process has its own store and pool; size the server's ``max_connections`` for all."""

OPEN_TIMEOUT_S = 10.0
"""How long the constructor waits for a connection, the set-up lock and creating the tables."""

PURGE_EVERY = 64
PURGE_CHUNK = 256
"""Every ``PURGE_EVERY`` reserves, a store deletes up to ``PURGE_CHUNK`` expired entries (oldest first,
skipping rows other workers hold), in the reserve's own call; ``purge()`` does it on demand."""

RESERVE_ATTEMPTS = 4
"""A reserve that keeps finding its key changed under it (freed, then taken, between two statements)
gives up after this many rounds with ReceiptStoreUnavailable (retry later); one round is the norm."""

IDLE_IN_TRANSACTION_FLOOR_MS = 1000
"""A call run as a transaction (see "Deadlines") that is left idle longer than its timeout (and at least
this long) is ended by the server: a frozen or partitioned worker cannot hold a row lock that others wait
for. In autocommit no call is ever idle in a transaction."""

OBSERVE_EVERY_S = 0.05
"""How often at most the step guard takes in the database's clock from the rows of the store's statements.
Readings it skips change nothing it promises: between two readings the guard's floor moves on by the
monotonic clock, entries are judged by the earlier of the floor and the database's clock, and a step is
held (forward) or taken (backward) at the next reading, which only lets entries live longer meanwhile."""

_MAX_TIMEOUT_MS = 2**31 - 1  # PostgreSQL's integer settings
_SET_UP_LOCK = 7_316_245_019_226_041_923  # pg_advisory_xact_lock key: one set-up at a time, any schema
_META, _RECEIPTS, _APPROVALS = "agent_lab_store_meta", "agent_lab_receipts", "agent_lab_approvals"
_VERSION_ROW, _KEY_ROW, _KEY_ID_ROW = "schema_version", "fingerprint_key", "fingerprint_key_id"
DATABASE_CLOCK = "date_part('epoch', statement_timestamp())"
"""The SQL for "now" when the store uses the database's clock: seconds since the epoch at the start of
each statement, the same for every host."""

# -- the SQL, with :name placeholders (rendered for the driver's paramstyle) and {now}, {stamp}, {lease},
# {ttl}: {now} is the time expiry is decided by, {stamp} the time new expiries count from (see _clock.py). -


def _stored_form_check(column: str) -> str:
    """A primary-key part is stored as it is (short, without the digest prefix) or as a digest: the CHECK
    that fences off a worker of version 1, which would store a long key as it is where this version
    looks for its digest."""
    return (f"CHECK ((octet_length({column}) <= {STORED_PART_MAX_BYTES} AND left({column}, {len(DIGEST_PREFIX)})"
            f" <> '{DIGEST_PREFIX}') OR {column} ~ '^{DIGEST_PREFIX}[0-9a-f]{{64}}$')")


def _stored_form_sql(column: str) -> str:
    """`_stored_part` in SQL (for migrating rows of version 1)."""
    return f"'{DIGEST_PREFIX}' || encode(sha256(convert_to({column}, 'UTF8')), 'hex')"


def _needs_digest_sql(column: str) -> str:
    return (f"(octet_length({column}) > {STORED_PART_MAX_BYTES}"
            f" OR left({column}, {len(DIGEST_PREFIX)}) = '{DIGEST_PREFIX}')")


_CREATE = (
    f"""CREATE TABLE IF NOT EXISTS {_META} (
        name  text COLLATE "C" PRIMARY KEY,
        value text NOT NULL
    )""",
    # COLLATE "C": text compares and sorts by code point, as Python does, whatever the database's locale.
    f"""CREATE TABLE IF NOT EXISTS {_RECEIPTS} (
        tenant      text COLLATE "C" NOT NULL {_stored_form_check("tenant")},
        tool        text COLLATE "C" NOT NULL {_stored_form_check("tool")},
        key         text COLLATE "C" NOT NULL {_stored_form_check("key")},
        fingerprint text COLLATE "C" NOT NULL,
        state       text NOT NULL CHECK (state IN ('in_flight', 'completed')),
        record      text,
        expires_at  double precision NOT NULL,
        owner       text COLLATE "C",
        lapse       text NOT NULL CHECK (lapse IN ('unknown', 'takeover')),
        full_tenant text COLLATE "C",
        full_tool   text COLLATE "C",
        full_key    text COLLATE "C",
        PRIMARY KEY (tenant, tool, key)
    )""",
    f"CREATE INDEX IF NOT EXISTS {_RECEIPTS}_by_expiry ON {_RECEIPTS} (expires_at)",
    f"""CREATE TABLE IF NOT EXISTS {_APPROVALS} (
        tenant      text COLLATE "C" NOT NULL {_stored_form_check("tenant")},
        approval_id text COLLATE "C" NOT NULL {_stored_form_check("approval_id")},
        kept_until  double precision NOT NULL,
        PRIMARY KEY (tenant, approval_id)
    )""",
    f"CREATE INDEX IF NOT EXISTS {_APPROVALS}_by_retention ON {_APPROVALS} (kept_until)",
)

# What the statements rely on in each table: refused when opened otherwise (see _postgres_shape.problem).
_SHAPES: Dict[str, shape.TableShape] = {
    _META: (("name",), {"name": shape.TEXT, "value": shape.TEXT}),
    _RECEIPTS: (("tenant", "tool", "key"), {
        **{column: shape.TEXT for column in ("tenant", "tool", "key", "fingerprint", "state", "record", "owner",
                                             "lapse", "full_tenant", "full_tool", "full_key")},
        "expires_at": shape.FLOAT}),
    _APPROVALS: (("tenant", "approval_id"),
                 {"tenant": shape.TEXT, "approval_id": shape.TEXT, "kept_until": shape.FLOAT}),
}
_ADDED_IN_V2 = ("full_tenant", "full_tool", "full_key")

_MIGRATE_FROM_V1 = (
    # The whole text of a part stored as a digest, then every row of version 1 whose part is stored as a
    # digest from now on (long, or starting with the prefix), then the checks that keep it so.
    f"ALTER TABLE {_RECEIPTS} ADD COLUMN IF NOT EXISTS full_tenant text COLLATE \"C\","
    " ADD COLUMN IF NOT EXISTS full_tool text COLLATE \"C\", ADD COLUMN IF NOT EXISTS full_key text COLLATE \"C\"",
    *(f"UPDATE {_RECEIPTS} SET full_{column} = {column}, {column} = {_stored_form_sql(column)}"
      f" WHERE {_needs_digest_sql(column)}" for column in ("tenant", "tool", "key")),
    *(f"UPDATE {_APPROVALS} SET {column} = {_stored_form_sql(column)} WHERE {_needs_digest_sql(column)}"
      for column in ("tenant", "approval_id")),
    *(f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_stored {_stored_form_check(column)}"
      for table, columns in ((_RECEIPTS, ("tenant", "tool", "key")), (_APPROVALS, ("tenant", "approval_id")))
      for column in columns),
)

_WHERE_KEY = "tenant = :tenant AND tool = :tool AND key = :key"
# The rules of _rules.py as SQL: fencing (held_by), resolving (may_resolve), purging (is_purgeable).
_WHERE_HELD_BY = _WHERE_KEY + " AND state = 'in_flight' AND owner = :owner"
# A receipt of unknown outcome expires at +infinity (rules.UNRESOLVED_UNTIL): kept until resolved.
_NEVER = "CAST('Infinity' AS double precision)"
_IS_UNRESOLVED = ("((state = 'in_flight' AND lapse = 'unknown' AND expires_at <= {now})"
                  f" OR (state = 'completed' AND expires_at = {_NEVER}))")
_WHERE_UNKNOWN = _WHERE_KEY + " AND " + _IS_UNRESOLVED + " AND fingerprint = :fingerprint"
_PURGEABLE = "expires_at <= {now} AND NOT (state = 'in_flight' AND lapse = 'unknown')"

# Each conditional statement answers with a row when its condition held (RETURNING), and every row ends
# with {clock}, the database's clock for the step guard (NULL on an injected clock): a call reads the
# clock in the statement that does its work, without a round trip of its own.
_SQL = {
    # Transactions only (see PostgresReceiptStore, "Deadlines"): the call's timeouts, for its transaction.
    "timeouts": (
        "SELECT set_config('statement_timeout', :statement_ms, true), set_config('lock_timeout', :lock_ms, true),"
        " set_config('idle_in_transaction_session_timeout', :idle_ms, true), {clock}"
    ),
    # A key whose parts are all stored as they are (the common case) leaves full_* out: NULL.
    "insert_new": (
        f"INSERT INTO {_RECEIPTS} (tenant, tool, key, fingerprint, state, record, expires_at, owner, lapse)"
        " VALUES (:tenant, :tool, :key, :fingerprint, 'in_flight', NULL, {stamp} + {lease}, :owner, :lapse)"
        " ON CONFLICT (tenant, tool, key) DO NOTHING RETURNING {clock}"
    ),
    "insert_new_digested": (
        f"INSERT INTO {_RECEIPTS} (tenant, tool, key, fingerprint, state, record, expires_at, owner, lapse,"
        " full_tenant, full_tool, full_key) VALUES (:tenant, :tool, :key, :fingerprint, 'in_flight', NULL,"
        " {stamp} + {lease}, :owner, :lapse, :full_tenant, :full_tool, :full_key)"
        " ON CONFLICT (tenant, tool, key) DO NOTHING RETURNING {clock}"
    ),
    "select_entry": (
        f"SELECT fingerprint, state, record, expires_at, owner, lapse, {{now}}, {{clock}} FROM {_RECEIPTS} WHERE "
        + _WHERE_KEY
    ),
    # A lapsed read or an expired receipt is taken over by a conditional UPDATE: it changes the row only
    # if the row is (still) purgeable now, whatever happened since it was read.
    "take_over": (
        f"UPDATE {_RECEIPTS} SET fingerprint = :fingerprint, state = 'in_flight', record = NULL,"
        " expires_at = {stamp} + {lease}, owner = :owner, lapse = :lapse"
        " WHERE " + _WHERE_KEY + " AND " + _PURGEABLE + " RETURNING {clock}"
    ),
    "renew": (
        f"UPDATE {_RECEIPTS} SET expires_at = {{stamp}} + {{lease}} WHERE " + _WHERE_HELD_BY + " RETURNING {clock}"
    ),
    # The holder keeps its owner token in the receipt: a completion that changes nothing is then asked
    # whether it repeats one that landed (its first answer was lost with a connection): its own record.
    "complete": (
        f"UPDATE {_RECEIPTS} SET state = 'completed', record = :record, expires_at = {{stamp}} + {{ttl}}"
        " WHERE " + _WHERE_HELD_BY + " RETURNING {clock}"
    ),
    "complete_unknown": (
        f"UPDATE {_RECEIPTS} SET state = 'completed', record = :record, expires_at = {_NEVER}"
        " WHERE " + _WHERE_HELD_BY + " RETURNING {clock}"
    ),
    "completed_by": (
        f"SELECT {{clock}} FROM {_RECEIPTS} WHERE " + _WHERE_KEY + " AND state = 'completed' AND owner = :owner"
        " AND record = :record"
    ),
    # rules.kept_by: a live receipt its owner completed; never shortened.
    "keep": (
        f"UPDATE {_RECEIPTS} SET expires_at = GREATEST(expires_at, {{stamp}} + {{ttl}}) WHERE " + _WHERE_KEY
        + " AND state = 'completed' AND owner = :owner AND expires_at > {now} RETURNING {clock}"
    ),
    "keep_until_resolved": (
        f"UPDATE {_RECEIPTS} SET expires_at = {_NEVER} WHERE " + _WHERE_KEY
        + " AND state = 'completed' AND owner = :owner AND expires_at > {now} RETURNING {clock}"
    ),
    # rules.expires_by: a receipt kept until resolved that its owner completed.
    "let_expire": (
        f"UPDATE {_RECEIPTS} SET expires_at = {{stamp}} + {{ttl}} WHERE " + _WHERE_KEY
        + f" AND state = 'completed' AND owner = :owner AND expires_at = {_NEVER} RETURNING {{clock}}"
    ),
    "release": f"DELETE FROM {_RECEIPTS} WHERE " + _WHERE_HELD_BY + " RETURNING {clock}",
    "resolve_happened": (
        f"UPDATE {_RECEIPTS} SET state = 'completed', record = :record, expires_at = {{stamp}} + {{ttl}},"
        " owner = NULL WHERE " + _WHERE_UNKNOWN + " RETURNING {clock}"
    ),
    "resolve_not_happened": f"DELETE FROM {_RECEIPTS} WHERE " + _WHERE_UNKNOWN + " RETURNING {clock}",
    "unresolved": (
        f"SELECT COALESCE(full_tenant, tenant), COALESCE(full_tool, tool), COALESCE(full_key, key) FROM {_RECEIPTS}"
        " WHERE " + _IS_UNRESOLVED + f" AND tool <> '{rules.TASK_GATE_TOOL}' ORDER BY 1, 2, 3 LIMIT :limit"
    ),
    # SKIP LOCKED: two workers purging at once split the work instead of waiting for each other.
    "purge_receipts": (
        f"DELETE FROM {_RECEIPTS} WHERE ctid IN (SELECT ctid FROM {_RECEIPTS} WHERE " + _PURGEABLE +
        " ORDER BY expires_at LIMIT :limit FOR UPDATE SKIP LOCKED)"
    ),
    "purge_approvals": (
        f"DELETE FROM {_APPROVALS} WHERE ctid IN (SELECT ctid FROM {_APPROVALS} WHERE kept_until <= {{now}}"
        " ORDER BY kept_until LIMIT :limit FOR UPDATE SKIP LOCKED)"
    ),
    # A first use inserts the row; a use past the row's retention replaces it; any other use changes nothing.
    # The retention (rules.approval_kept_until): until expired by the caller's clock (the validity left there,
    # when it is given) and by the database's, plus the ttl. Nothing is spent for a caller whose clock lags by
    # more than the ttl (rules.caller_lags); `caller_lags` then tells that refusal from a use before.
    # (The WHERE also parts the SELECT from ON CONFLICT, which PostgreSQL's grammar needs.)
    "spend_approval": (
        f"INSERT INTO {_APPROVALS} (tenant, approval_id, kept_until)"
        " SELECT :tenant, :approval_id, GREATEST({stamp} + COALESCE(GREATEST(CAST(:expires_at AS double precision)"
        " - CAST(:caller_now AS double precision), 0), 0), CAST(:expires_at AS double precision)) + {ttl}"
        " WHERE CAST(:caller_now AS double precision) IS NULL"
        " OR CAST(:caller_now AS double precision) >= {now} - {ttl}"
        f" ON CONFLICT (tenant, approval_id) DO UPDATE SET kept_until = EXCLUDED.kept_until"
        f" WHERE {_APPROVALS}.kept_until <= {{now}} RETURNING {{clock}}"
    ),
    "caller_lags": "SELECT CAST(:caller_now AS double precision) < {now} - {ttl}",
    "table_shapes": shape.sql(tuple(_SHAPES)),
    "select_meta": f"SELECT name, value FROM {_META}",
    "insert_meta": f"INSERT INTO {_META} (name, value) VALUES (:name, :value) ON CONFLICT (name) DO NOTHING",
    "update_meta": f"UPDATE {_META} SET value = :value WHERE name = :name",
    "set_up_lock": f"SELECT pg_advisory_xact_lock({_SET_UP_LOCK})",
}
_READS = frozenset({"timeouts", "select_entry", "completed_by", "unresolved", "table_shapes", "select_meta",
                    "caller_lags"})
"""The statements that change nothing: a call whose connection fails before it sent any other statement
may run again on a new connection (see `_call_until`)."""

_Answer = TypeVar("_Answer")
_monotonic = time.monotonic  # a module global, so that tests can move a call's time on
_PLACEHOLDER = re.compile(r"(?<![:\w]):([a-z_]+)\b")


def _watchdog_can_cut(connection: Any) -> bool:
    """Whether the store's calls autocommit: only when the watchdog can cut a call at its deadline (see
    "Deadlines" above), which needs the driver's cancel() and a settable autocommit. Warns when it cannot."""
    if _canceller(connection) is None:
        logger.warning("the receipt database driver's connections have no cancel(): a call still running "
                       "at its deadline (a COMMIT waiting for a synchronous standby) cannot be cut there")
        return False
    return isinstance(getattr(connection, "autocommit", None), bool)


class PostgresReceiptStore:
    """Receipts, reservations and spent approvals in PostgreSQL, shared by every worker on every host.

    ``connect`` is a callable that returns a new DB-API 2.0 connection, e.g.
    ``functools.partial(psycopg.connect, dsn, connect_timeout=5)``. The store calls it from a helper
    thread whenever its pool needs a connection. The tables (``agent_lab_receipts``,
    ``agent_lab_approvals``, ``agent_lab_store_meta``) are created in the connection's current schema
    (its ``search_path``) if they are missing; several workers starting at once take turns through an
    advisory lock. ``paramstyle`` is read from the connection's driver module (``psycopg.paramstyle``)
    unless given; every DB-API style is supported.

    Clock. By default every expiry (leases, receipt ttls, the retention of spent approvals) is computed
    by the *database's* clock, in each statement (``statement_timestamp()``): hosts whose clocks
    disagree still agree on when a lease lapsed. ``clock=`` replaces it by a clock of this process (a
    callable returning seconds since the epoch), sent with each statement: for tests that move time
    by hand, or a deployment that trusts its hosts' clocks. Every store sharing the tables must then use
    the same kind of clock; never mix the two on one database. Either clock is guarded against steps by
    this process's ``monotonic`` clock (see `agent_lab.stores._clock`): the database's clock is read
    when the store opens and then from the answers of its statements (each row ends with it, at no
    round trip of its own; taken in at most every ``OBSERVE_EVERY_S``), and nothing expires sooner than
    the time the store has seen pass since it opened, so a server clock stepped forward by more than a
    ttl never lets a retry run again on a store that was open before the step (one opened after it
    takes the clock as it finds it).

    Concurrency. ``reserve`` is an ``INSERT ... ON CONFLICT DO NOTHING``: exactly one contender inserts
    a free key, in any process on any host. A key that holds an expired receipt or a lapsed read is
    taken over with a conditional ``UPDATE ... WHERE expires_at <= now``, so two contenders can never
    both take it. ``renew``, ``complete``, ``release``, ``resolve`` and ``consume_approval`` are single
    conditional statements. Each statement is atomic by itself and rechecks its condition, so a call
    needs no transaction around its statements: a connection runs in autocommit, each statement commits
    as it runs, and a free key's reserve, or a complete, is one round trip. Calls run on the
    connections of the store's pool (up to ``pool_size``, opened when needed and shared by the
    process's threads, one call at a time on each).

    Deadlines. A call waits for a pooled connection (or a new one) no longer than its ``timeout_s``, and
    is watched from its first statement (`_Watchdog`): at its deadline the store sends the connection's
    cancel request, which ends whatever the server is doing for it (a wait for a locked row or table, a
    slow statement, a COMMIT waiting for a synchronous standby, which no server timeout bounds), drops
    the connection and answers ``ReceiptStoreUnavailable``; the call's outcome is then unknown (as after
    a lost commit, below). A call whose time is up sends nothing. The server's own timeouts are not set
    (a ``SET`` would cost a round trip per call, and a session setting would outlive the call on a
    connection that a transaction-pooling proxy such as PgBouncer shares; set ``statement_timeout`` on
    the role if the server should bound the store's statements by itself as well). A driver whose
    connections have no ``cancel_safe()`` or ``cancel()`` (or no ``autocommit``) cannot be cut that way:
    the store then runs each call as one transaction that sets ``statement_timeout``, ``lock_timeout``
    and ``idle_in_transaction_session_timeout`` from what is left of its time (``SET LOCAL``, through
    ``set_config``; with psycopg, BEGIN, the timeouts and COMMIT are three more round trips a call), so
    the server gives up in time, except in a COMMIT's wait (the store warns when it opens). Opening a
    connection is bounded by the call's time too, whatever the driver does; give the factory its own
    connect timeout as well (psycopg: ``connect_timeout``), so abandoned attempts end.

    Lost connections. Any driver error is ``ReceiptStoreUnavailable`` for the call that met it (retry
    later), and the connection is dropped if it cannot be rolled back; the next call opens a new one. A
    connection the server closed while it sat in the pool (an idle timeout, ``pg_terminate_backend``,
    a restart) has the server's goodbye waiting on its socket: the pool looks (one poll, when the driver
    gives its ``fileno()``) and drops it before a call uses it; a call whose connection still turns out
    dead before it sent anything that changes data retries once on a new connection. A connection lost
    in the middle of a statement that changes data fails that call. If a reserve's commit is lost with
    its connection, the store does not know whether the key is now reserved for an owner token it never
    handed out; it frees that reservation (by its token) at the start of its next call. A lost commit of
    ``consume_approval`` may leave the approval spent (a person approves again: fail closed).

    Not across ``fork``: open the store in the child process.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        ttl_s: float = 86400,
        lease_s: float = 300,
        clock: Optional[Callable[[], float]] = None,
        fingerprint_key: Optional[bytes] = None,
        pool_size: int = POOL_SIZE,
        paramstyle: Optional[str] = None,
        open_timeout_s: float = OPEN_TIMEOUT_S,
        monotonic: Optional[Callable[[], float]] = None,
    ) -> None:
        if not callable(connect):
            raise TypeError("connect must be a callable that returns a new DB-API connection")
        self._ttl_s = rules.check_duration("ttl_s", ttl_s)
        self._lease_s = rules.check_duration("lease_s", lease_s)
        if clock is not None and not callable(clock):
            raise TypeError("clock must be None (the database's clock) or a callable returning epoch seconds")
        self._clock = clock
        self._monotonic = system_monotonic if monotonic is None else monotonic
        self._guard = StepGuard(lambda: _epoch_seconds(clock()) if clock is not None else math.nan,
                                self._monotonic, max(self._ttl_s, self._lease_s))
        self._guard_lock = threading.Lock()  # calls run on several connections at once
        self._observe_after = -math.inf  # monotonic: when the database's clock is next taken in
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError("pool_size must be a positive integer")
        if paramstyle is not None and paramstyle not in _PARAMSTYLES:
            raise ValueError(f"paramstyle must be one of {', '.join(_PARAMSTYLES)}")
        open_timeout_s = rules.check_duration("open_timeout_s", open_timeout_s)
        given_key = None if fingerprint_key is None else check_fingerprint_key(fingerprint_key)
        self._pool = _Pool(connect, pool_size)
        self._watchdog = _Watchdog()
        # A store dropped without close() ends its watchdog's thread (which holds the watchdog, not the store).
        weakref.finalize(self, self._watchdog.close).atexit = False
        self._orphans: List[Tuple[Tuple[str, str, str], str]] = []  # reservations whose commit was lost
        self._orphans_lock = threading.Lock()
        self._reserves_since_purge = 0
        deadline = _monotonic() + open_timeout_s
        try:
            first = self._pool.checkout(deadline)
            self._pool.checkin(first)
            self._transactions = not _watchdog_can_cut(first.connection)
            driver = sys.modules.get(type(first.connection).__module__.partition(".")[0])
            self._errors: Tuple[Type[BaseException], ...] = _driver_errors(driver)
            self._statements = _render_all(paramstyle or _driver_paramstyle(driver), clock is not None,
                                           lease_s=self._lease_s, ttl_s=self._ttl_s)
            self._fingerprint_key = self._call_until(deadline, lambda call: _set_up(call, given_key),
                                                     transaction=True)
        except BaseException:
            self._watchdog.close()
            self._pool.close()
            raise

    @property
    def lease_s(self) -> float:
        return self._lease_s

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    @property
    def fingerprint_key(self) -> bytes:
        return self._fingerprint_key

    @property
    def uses_database_clock(self) -> bool:
        """True unless the store was given a ``clock``."""
        return self._clock is None

    # -- the protocol -------------------------------------------------------------------------

    def reserve(
        self, key: ReceiptKey, fingerprint: str, *, lapse: Lapse = Lapse.UNKNOWN, timeout_s: Optional[float] = None
    ) -> Reservation:
        rules.check_fingerprint(fingerprint)
        lapse_value = rules.check_lapse(lapse)
        address = rules.address(key)

        def work(call: _Call) -> Reservation:
            self._purge_now_and_then(call)
            for _ in range(RESERVE_ATTEMPTS):
                owner = rules.new_owner_token()
                values = self._values(address, fingerprint=fingerprint, owner=owner, lapse=lapse_value)
                call.may_reserve(address, owner)
                digested = not (values["full_tenant"] is None and values["full_tool"] is None
                                and values["full_key"] is None)
                if call.changed("insert_new_digested" if digested else "insert_new", values):
                    return rules.reservation(ReservationStatus.RESERVED, fingerprint=fingerprint, owner=owner)
                row = call.row("select_entry", values)
                if row is None:  # released or resolved since the insert: try again
                    continue
                entry, now = _entry(row)
                answer = rules.decide_reserve(entry, fingerprint, now)
                if answer is not None:
                    return answer
                call.bound_by_deadline()  # the takeover may wait for a row lock
                if call.changed("take_over", values):
                    return rules.reservation(ReservationStatus.RESERVED, fingerprint=fingerprint, owner=owner)
            raise ReceiptStoreUnavailable("the key kept changing while it was being reserved; try again")

        return self._call(timeout_s, work)

    def renew(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        values = self._values(rules.address(key), owner=owner)
        return self._call(timeout_s, lambda call: call.changed("renew", values))

    def complete(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        rules.check_owner(owner)
        values = self._values(rules.address(key), owner=owner, record=rules.record_text(record))
        return self._call(timeout_s, lambda call: call.changed("complete", values)
                          or call.row("completed_by", values) is not None)

    def complete_unknown(
        self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *, timeout_s: Optional[float] = None
    ) -> bool:
        rules.check_owner(owner)
        values = self._values(rules.address(key), owner=owner, record=rules.record_text(record))
        return self._call(timeout_s, lambda call: call.changed("complete_unknown", values)
                          or call.row("completed_by", values) is not None)

    def keep(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None,
             until_resolved: bool = False) -> bool:
        rules.check_owner(owner)
        values = self._values(rules.address(key), owner=owner)
        statement = "keep_until_resolved" if until_resolved else "keep"
        return self._call(timeout_s, lambda call: call.changed(statement, values))

    def let_expire(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        values = self._values(rules.address(key), owner=owner)
        return self._call(timeout_s, lambda call: call.changed("let_expire", values))

    def release(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        rules.check_owner(owner)
        values = self._values(rules.address(key), owner=owner)
        return self._call(timeout_s, lambda call: call.changed("release", values))

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
        values = self._values(rules.address(key), fingerprint=fingerprint, record=text)
        statement = "resolve_not_happened" if text is None else "resolve_happened"
        return self._call(timeout_s, lambda call: call.changed(statement, values))

    def lookup(self, key: ReceiptKey, *, timeout_s: Optional[float] = None) -> Optional[Reservation]:
        values = self._values(rules.address(key))

        def work(call: _Call) -> Optional[Reservation]:
            row = call.row("select_entry", values)
            return None if row is None else rules.status_of(*_entry(row))

        return self._call(timeout_s, work)

    def unresolved(self, *, limit: int = 100, timeout_s: Optional[float] = None) -> List[ReceiptKey]:
        rules.check_limit(limit)
        values = self._values(None, limit=limit)
        rows = self._call(timeout_s, lambda call: call.rows("unresolved", values))
        return [ReceiptKey(tenant, tool, key) for tenant, tool, key in rows]

    def purge(self, *, limit: int = PURGE_LIMIT, timeout_s: Optional[float] = None) -> int:
        rules.check_limit(limit)
        return self._call(timeout_s, lambda call: self._purge(call, limit))

    def consume_approval(
        self, tenant: str, approval_id: str, *, expires_at: float, now: Optional[float] = None,
        timeout_s: Optional[float] = None,
    ) -> Optional[bool]:
        tenant, approval_id, expires_at, caller_now = rules.check_approval(tenant, approval_id, expires_at, now)
        values = self._values(None, tenant=_stored_part(tenant), approval_id=_stored_part(approval_id),
                              expires_at=expires_at, caller_now=caller_now)

        def spend(call: "_Call") -> Optional[bool]:
            if call.changed("spend_approval", values):
                return True
            if caller_now is None or not call.rows("caller_lags", values)[0][0]:
                return False
            return None

        return self._call(timeout_s, spend)

    def close(self) -> None:
        self._watchdog.close()
        self._pool.close()

    def __enter__(self) -> "PostgresReceiptStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------------

    def _values(self, address: Optional[Tuple[str, str, str]], **values: Any) -> Dict[str, Any]:
        """A statement's parameters: the key's address as stored (`_stored_part`; the whole text of a
        part stored as a digest goes in full_*), the other `values` it needs, and this process's "now"
        when the store runs on an injected clock (the database's clock is bounded by a floor)."""
        if address is not None:
            tenant, tool, key = address
            if (len(tenant) <= _SURELY_SHORT and len(tool) <= _SURELY_SHORT and len(key) <= _SURELY_SHORT
                    and not (tenant.startswith(DIGEST_PREFIX) or tool.startswith(DIGEST_PREFIX)
                             or key.startswith(DIGEST_PREFIX))):  # the common case: every part as it is
                values["tenant"], values["tool"], values["key"] = tenant, tool, key
                values["full_tenant"] = values["full_tool"] = values["full_key"] = None
            else:
                stored = [_stored_part(part) for part in address]
                values["tenant"], values["tool"], values["key"] = stored
                values["full_tenant"], values["full_tool"], values["full_key"] = (
                    None if kept is part else part for kept, part in zip(stored, address))
        if self._clock is not None:
            with self._guard_lock:
                values["now"], values["stamp"] = self._guard.times()
        else:  # the database's clock is bounded by what this process has seen pass (None: not yet); the
            # floor reads one attribute of the guard, so it needs no lock
            floor = self._guard.floor(self._monotonic())
            values["floor"] = floor if math.isfinite(floor) else None
        return values

    def _observe_database_clock(self, database_now: Any) -> None:
        """The database's clock as a statement of a call read it: what the guard's floor follows. Read at
        most every `OBSERVE_EVERY_S` (a busy store gets thousands of readings a second; the guard needs no
        more than a few, see the constant)."""
        if self._clock is None and type(database_now) is float:
            received_at = self._monotonic()
            if received_at >= self._observe_after:
                with self._guard_lock:
                    self._guard.observe(database_now, received_at)
                    self._observe_after = received_at + OBSERVE_EVERY_S

    def _call(self, timeout_s: Optional[float], work: Callable[["_Call"], _Answer]) -> _Answer:
        return self._call_until(_monotonic() + store_timeout(timeout_s), work)

    def _call_until(self, deadline: float, work: Callable[["_Call"], _Answer], *,
                    transaction: Optional[bool] = None) -> _Answer:
        """Run ``work`` on a pooled connection, all within ``deadline`` (monotonic): as one transaction
        (``transaction``, default: when the store cannot run in autocommit, see the class docstring),
        or statement by statement in autocommit.

        A driver error is ReceiptStoreUnavailable. A call whose connection turns out to be dead before
        it sent anything that changes data (closed by the server while idle in the pool, if the pool's
        look at it did not notice) is tried once more on a new connection.
        """
        in_transaction = self._transactions if transaction is None else transaction
        for attempt in (1, 2):
            if _monotonic() >= deadline:
                raise ReceiptStoreUnavailable("the receipt database call had no time left (its deadline has passed)")
            link = self._pool.checkout(deadline)
            call = _Call(self, link, deadline, in_transaction)
            watch = self._watchdog.watch(deadline, link.connection)  # cancels the call if it runs past its deadline
            try:
                if in_transaction or link.autocommit is in_transaction:
                    call.begin()
                if self._orphans:
                    self._free_orphans(call)
                answer = work(call)
                if in_transaction:
                    call.commit()
            except self._errors as error:
                cut = self._watchdog.unwatch(watch)
                if call.abandon(cut=cut) and attempt == 1 and not cut and not call.sent_write:
                    logger.info("a pooled receipt-database connection was closed by the server; reconnecting")
                    continue
                raise _unavailable("cut at its deadline" if cut else "a statement failed", error) from error
            except BaseException:
                call.abandon(cut=self._watchdog.unwatch(watch))
                raise
            if self._watchdog.unwatch(watch):
                # The deadline passed before the call was done (a COMMIT waiting for a synchronous standby,
                # say): it was cancelled, and whether it committed is unknown, as after a lost connection.
                call.abandon(cut=True)
                raise ReceiptStoreUnavailable("the receipt database did not confirm the call within its timeout "
                                              "(cancelled at the deadline; it may have committed)")
            self._pool.checkin(link)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _drop_if_broken(self, link: "_Link") -> bool:
        """Roll back; if even that fails (or the driver says the connection is closed), the connection is
        dead: close and forget it (True)."""
        try:
            if getattr(link.connection, "closed", False):
                raise ConnectionError("closed")
            link.connection.rollback()
        except Exception:  # noqa: BLE001 - any failure here means the connection is unusable
            self._pool.discard(link)
            return True
        self._pool.checkin(link)
        return False

    def _orphaned(self, address: Tuple[str, str, str], owner: str) -> None:
        with self._orphans_lock:
            self._orphans.append((address, owner))

    def _free_orphans(self, call: "_Call") -> None:
        """Release reservations whose commit was lost with a connection: their owner tokens were never
        handed out, so no handler runs under them (a release of one that never committed does nothing)."""
        with self._orphans_lock:
            orphans, self._orphans = self._orphans, []
        call.on_failure(lambda: self._requeue(orphans))
        for address, owner in orphans:
            call.changed("release", self._values(address, owner=owner))
        call.bound_by_deadline()  # a release may have waited for a row lock: the call's own statements
        # get only what is left of its time

    def _requeue(self, orphans: List[Tuple[Tuple[str, str, str], str]]) -> None:
        with self._orphans_lock:
            self._orphans[:0] = orphans

    def _purge_now_and_then(self, call: "_Call") -> None:
        self._reserves_since_purge += 1  # a race between threads only shifts when the next purge runs
        if self._reserves_since_purge >= PURGE_EVERY:
            self._reserves_since_purge = 0
            self._purge(call, PURGE_CHUNK)
            call.bound_by_deadline()  # what the purge took is not given to the reserve again

    def _purge(self, call: "_Call", limit: int) -> int:
        deleted = call.count("purge_receipts", self._values(None, limit=limit))
        if deleted < limit:
            deleted += call.count("purge_approvals", self._values(None, limit=limit - deleted))
        return deleted


def _set_up(call: "_Call", given_key: Optional[bytes]) -> bytes:
    """Create the tables if needed, check their shape and settle the fingerprint key, in one call. The
    common case (tables there, key stored) only reads, two statements; otherwise an advisory lock makes
    workers starting at once take turns, so none meets another's half-created table or writes a second
    key. Tables that are there but not of the shape the statements rely on are refused (ValueError)."""
    shapes = call.rows("table_shapes", {})
    if shape.exists(shapes, _META):
        meta = call.meta()
        if meta.get(_VERSION_ROW) == str(POSTGRES_SCHEMA_VERSION):
            key, new_rows = _settle_fingerprint_key(meta, given_key)
            if not new_rows:
                _check_shapes(shapes)
                return key
    call.row("set_up_lock", {})
    for statement in _CREATE:
        call.execute_sql(statement)
    meta = call.meta()
    stored_version = meta.get(_VERSION_ROW)
    # Before any migration: a refusal rolls the whole set-up back, so nothing is changed.
    _check_shapes(call.rows("table_shapes", {}), optional=_ADDED_IN_V2 if stored_version == "1" else ())
    if stored_version == "1":  # migrated in this transaction: every worker sees version 1 or 2 whole
        for statement in _MIGRATE_FROM_V1:
            call.execute_sql(statement)
        call.execute("update_meta", {"name": _VERSION_ROW, "value": str(POSTGRES_SCHEMA_VERSION)})
    elif stored_version is not None and stored_version != str(POSTGRES_SCHEMA_VERSION):
        raise ValueError(f"receipt store schema version {stored_version} is not the version this code "
                         f"understands ({POSTGRES_SCHEMA_VERSION})")
    key, new_rows = _settle_fingerprint_key(meta, given_key)
    if stored_version is None:
        new_rows.append((_VERSION_ROW, str(POSTGRES_SCHEMA_VERSION)))
    for name, value in new_rows:
        call.execute("insert_meta", {"name": name, "value": value})
    return key


def _check_shapes(rows: Sequence[Sequence[Any]], *, optional: Sequence[str] = ()) -> None:
    problem = shape.problem(rows, _SHAPES, optional=optional)
    if problem:
        raise ValueError(f"the receipt database is not a receipt store this code can use: {problem}")


class _Call:
    """One call's statements on one pooled connection, with the call's deadline: one transaction, or
    (autocommit) statement by statement, each statement committed as it runs."""

    __slots__ = ("_store", "_link", "_deadline", "_transaction", "_on_failure", "started", "sent_write")

    def __init__(self, store: PostgresReceiptStore, link: "_Link", deadline: float, transaction: bool) -> None:
        self._store = store
        self._link = link
        self._deadline = deadline
        self._transaction = transaction
        self._on_failure: Optional[Callable[[], None]] = None
        self.started = False  # a statement has been sent
        self.sent_write = False  # a statement that may change data has been sent

    def begin(self) -> None:
        """Put the connection in the call's mode (when it is not in it); a transaction starts with its
        timeouts."""
        link = self._link
        if link.autocommit is self._transaction:
            link.connection.autocommit = not self._transaction
            link.autocommit = not self._transaction
        if self._transaction:
            self.bound_by_deadline()

    def bound_by_deadline(self) -> None:
        """Give up if the call's time is up; in a transaction, also let the server spend no more than what
        is left of it on what follows (in autocommit the watchdog cuts the call at its deadline)."""
        left_ms = math.ceil((self._deadline - _monotonic()) * 1000)
        if left_ms <= 0 and self.started:
            raise ReceiptStoreUnavailable("the receipt database did not answer within the timeout")
        if not self._transaction:
            return
        statement_ms = str(min(max(left_ms, 1), _MAX_TIMEOUT_MS))
        idle_ms = str(min(max(left_ms, IDLE_IN_TRANSACTION_FLOOR_MS), _MAX_TIMEOUT_MS))
        self.row("timeouts", {"statement_ms": statement_ms, "lock_ms": statement_ms, "idle_ms": idle_ms})

    def execute(self, name: str, values: Mapping[str, Any]) -> Any:
        return self._run(self._store._statements[name], values)

    def _run(self, statement: _Statement, values: Mapping[str, Any]) -> Any:
        cursor = self._link.cursor
        if cursor is None:
            cursor = self._link.cursor = self._link.connection.cursor()
        self.started = True
        if statement.writes:
            self.sent_write = True
        cursor.execute(statement.sql, statement.parameters(values))
        return cursor

    def execute_sql(self, sql: str) -> None:
        """A statement without parameters (the set-up's DDL)."""
        cursor = self._link.cursor
        if cursor is None:
            cursor = self._link.cursor = self._link.connection.cursor()
        self.started = self.sent_write = True
        cursor.execute(sql)

    def row(self, name: str, values: Mapping[str, Any]) -> Optional[Sequence[Any]]:
        """The statement's first row; a row ending with the database's clock feeds the step guard."""
        statement = self._store._statements[name]
        row = self._run(statement, values).fetchone()
        if row is not None and statement.clocked:
            self._store._observe_database_clock(row[-1])
        return row

    def rows(self, name: str, values: Mapping[str, Any]) -> List[Sequence[Any]]:
        return list(self.execute(name, values).fetchall())

    def meta(self) -> Dict[str, str]:
        """The rows of the store's meta table (name -> value)."""
        return {str(name): str(value) for name, value in self.rows("select_meta", {})}

    def count(self, name: str, values: Mapping[str, Any]) -> int:
        rowcount = self.execute(name, values).rowcount
        return rowcount if isinstance(rowcount, int) and rowcount > 0 else 0

    def changed(self, name: str, values: Mapping[str, Any]) -> bool:
        """Whether a conditional statement found its row (the condition held) and changed it: it then
        answers with a row (RETURNING), counted by the driver; the row is fetched only when the step
        guard takes a reading (or the driver does not count)."""
        statement = self._store._statements[name]
        cursor = self._run(statement, values)
        rowcount = cursor.rowcount
        store = self._store
        if type(rowcount) is not int or rowcount < 0 or (store._clock is None
                                                         and store._monotonic() >= store._observe_after):
            row = cursor.fetchone()
            if row is not None and statement.clocked:
                store._observe_database_clock(row[-1])
            return row is not None
        return rowcount > 0

    def may_reserve(self, address: Tuple[str, str, str], owner: str) -> None:
        """From here on a lost commit may have reserved ``address`` for ``owner``: free it later."""
        previous = self._on_failure
        store = self._store

        def orphan() -> None:
            if previous is not None:
                previous()
            store._orphaned(address, owner)

        self._on_failure = orphan

    def on_failure(self, action: Callable[[], None]) -> None:
        previous = self._on_failure

        def both() -> None:
            if previous is not None:
                previous()
            action()

        self._on_failure = both

    def commit(self) -> None:
        """End a transaction (in autocommit every statement commits as it runs: there is nothing to end)."""
        self.sent_write = True  # whether a lost COMMIT committed is unknown
        self._link.connection.commit()

    def abandon(self, *, cut: bool = False) -> bool:
        """The call failed: run the failure actions and roll back; True when the connection was dead
        (and has been dropped). A connection the watchdog `cut` is dropped too: the cancel it was sent
        may still arrive, and would then cancel whatever the connection ran next."""
        self._link.forget_cursor()
        if self._on_failure is not None:
            self._on_failure()
        if cut:
            self._store._pool.discard(self._link)
            return True
        return self._store._drop_if_broken(self._link)


class _Watchdog:
    """Cancels a call still running on its connection at the call's deadline.

    The server bounds each statement by ``statement_timeout``, but not the wait a COMMIT makes once it is
    written: for a synchronous standby (``synchronous_standby_names``), or for the disk. Only a cancel
    request ends that wait (the server then keeps the commit it made locally, and says so with a
    warning), so every call is watched from its start: one thread per store, woken only when a deadline
    earlier than the one it waits for comes in, sends the connection's cancel (``cancel_safe`` or
    ``cancel``, as psycopg and psycopg2 have them; on a thread of its own) when a call's time is up. The
    call then ends as a call whose connection was lost: unavailable, its outcome unknown (`_call_until`).
    A driver without a cancel method leaves such a wait to the server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watched: Dict[int, Tuple[float, Any]] = {}  # ticket -> (deadline, connection)
        self._tickets = 0
        self._wakes_at = math.inf  # when the thread looks next (inf: only when a call is watched)
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def watch(self, deadline: float, connection: Any) -> int:
        """Watch a call until `deadline` (monotonic); the ticket to `unwatch` it with."""
        with self._lock:
            self._tickets += 1
            ticket = self._tickets
            self._watched[ticket] = (deadline, connection)
            if deadline < self._wakes_at and not self._closed:
                self._wakes_at = deadline
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="agent-lab-postgres-watchdog",
                                                    daemon=True)
                    self._thread.start()
                else:
                    self._wake.notify()
            return ticket

    def unwatch(self, ticket: int) -> bool:
        """Stop watching a call; True when it was cut (its deadline passed first and a cancel was sent).
        Without the lock: the call and the thread each take the ticket out with one `dict.pop` (atomic),
        and whichever does so first decides whether the call was cut."""
        return self._watched.pop(ticket, None) is None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify()

    def _run(self) -> None:
        with self._lock:
            while not self._closed:
                now = _monotonic()
                watched = list(self._watched.items())  # one copy (calls unwatch without the lock)
                connections = []
                for ticket, (deadline, connection) in watched:
                    if deadline <= now and self._watched.pop(ticket, None) is not None:  # not unwatched meanwhile
                        connections.append(connection)
                self._wakes_at = min((deadline for _, (deadline, _) in watched if deadline > now), default=math.inf)
                for connection in connections:
                    threading.Thread(target=_cancel_quietly, args=(connection,), name="agent-lab-postgres-cancel",
                                     daemon=True).start()
                if not connections:
                    self._wake.wait(None if self._wakes_at == math.inf else min(self._wakes_at - now,
                                                                               threading.TIMEOUT_MAX))


def _canceller(connection: Any) -> Optional[Callable[[], Any]]:
    """The connection's way to cancel what it runs from another thread, if its driver has one."""
    for name in ("cancel_safe", "cancel"):
        method = getattr(connection, name, None)
        if callable(method):
            return method
    return None


def _cancel_quietly(connection: Any) -> None:
    cancel = _canceller(connection)
    if cancel is None:
        return
    try:
        cancel()
    except Exception as error:  # noqa: BLE001 - the connection may be closed or dead by now: nothing to cancel
        logger.debug("cancelling a receipt-database call at its deadline failed: %s", type(error).__name__)


class _Link:
    """A pooled connection, the cursor its calls reuse, and whether it is in autocommit."""

    __slots__ = ("connection", "cursor", "autocommit", "_readable")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.cursor: Any = None
        self.autocommit = False
        self._readable: Optional[Callable[[], Any]] = None  # set up on the first look (`looks_closed`)

    def forget_cursor(self) -> None:
        """Close the cursor after a failure: the next call starts with a new one."""
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            try:
                cursor.close()
            except Exception:  # noqa: BLE001 - a cursor of a dead connection: nothing to free
                pass

    def looks_closed(self) -> bool:
        """Whether the server has sent something to this idle connection: a connection nobody uses is
        never spoken to, except to say it is being closed (an idle timeout, pg_terminate_backend, a
        shutdown) before the server hangs up. One poll of its socket, when the driver gives it
        (``fileno()``); then a call does not send its first statement into a connection already gone."""
        try:
            readable = self._readable
            if readable is None:
                readable = self._readable = _readable_check(self.connection)
            return bool(readable())
        except Exception:  # noqa: BLE001 - a driver that cannot say (or a closed connection): drop it
            return True


def _readable_check(connection: Any) -> Callable[[], Any]:
    """A check whether `connection`'s socket has something to read (never, for a driver that does not
    give its ``fileno()``). The socket stays the same for as long as the connection lives; one closed
    since reads as readable (poll answers POLLNVAL)."""
    fileno = getattr(connection, "fileno", None)
    if fileno is None:
        return lambda: False
    descriptor = fileno()
    poll = getattr(select, "poll", None)
    if poll is None:  # no poll() (Windows): select(), which takes sockets there
        return lambda: bool(select.select([descriptor], [], [], 0)[0])
    poller = poll()
    poller.register(descriptor, select.POLLIN)
    return functools.partial(poller.poll, 0)  # a list of events: empty (false) when there is nothing to read


class _Pool:
    """Up to ``size`` connections, opened by a helper thread when a call needs one and none is idle.

    Opening runs off the caller's thread so that a caller waits for it no longer than its own deadline,
    whatever the driver does; one opening at a time, so a database that is down is not hammered. An
    idle connection the server has closed meanwhile is dropped when it is taken (`_Link.looks_closed`).
    """

    def __init__(self, connect: Callable[[], Any], size: int) -> None:
        self._connect = connect
        self._size = size
        self._idle: List[_Link] = []
        self._count = 0  # connections open or being opened
        self._opening = False
        self._failures = 0  # failed openings so far: a waiter that sees this change gives up
        self._last_failure: Optional[BaseException] = None
        self._lock = threading.Lock()  # taken directly where no one waits (the common case)
        self._changed = threading.Condition(self._lock)
        self._waiting = 0  # callers waiting in `_take`
        self._closed = False

    def checkout(self, deadline: float) -> _Link:
        while True:
            with self._lock:
                link = self._idle.pop() if self._idle and not self._closed else None  # the most recently used
            if link is None:
                link = self._take(deadline)
            if not link.looks_closed():
                return link
            logger.info("a pooled receipt-database connection was closed by the server; dropping it")
            self.discard(link)

    def _take(self, deadline: float) -> _Link:
        with self._changed:
            failures = self._failures
            while True:
                if self._closed:
                    raise ValueError("the receipt store is closed")
                if self._idle:
                    return self._idle.pop()  # the most recently used: the likeliest to be alive
                if self._failures != failures:
                    raise _unavailable("could not connect", self._last_failure) from self._last_failure
                if not self._opening and self._count < self._size:
                    self._opening = True
                    self._count += 1
                    threading.Thread(target=self._open_one, name="agent-lab-postgres-connect", daemon=True).start()
                left = deadline - _monotonic()
                if left <= 0:
                    raise ReceiptStoreUnavailable("no connection to the receipt database within the timeout")
                self._waiting += 1
                try:
                    self._changed.wait(left)
                finally:
                    self._waiting -= 1

    def checkin(self, link: _Link) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(link)
                if self._waiting:
                    self._changed.notify()
                return
            self._count -= 1
        _close_quietly(link.connection)

    def discard(self, link: _Link) -> None:
        with self._changed:
            self._count -= 1
            self._changed.notify_all()
        _close_quietly(link.connection)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._changed.notify_all()
        for link in idle:
            _close_quietly(link.connection)

    def _open_one(self) -> None:
        try:
            connection = self._connect()
            if getattr(connection, "autocommit", False):  # a call sets the mode it runs in (see _Call.begin)
                connection.autocommit = False
        except Exception as error:  # noqa: BLE001 - reported to the callers waiting for it
            with self._changed:
                self._opening = False
                self._count -= 1
                self._failures += 1
                self._last_failure = error
                self._changed.notify_all()
            return
        with self._changed:
            self._opening = False
            if not self._closed:
                self._idle.append(_Link(connection))
                self._changed.notify_all()
                return
            self._count -= 1
        _close_quietly(connection)


class _Statement:
    """One statement rendered for a paramstyle: its SQL, how to order its parameters, whether it may
    change something (every statement but the `_READS`) and whether its rows end with the clock."""

    __slots__ = ("sql", "names", "named", "writes", "clocked", "_ordered")

    def __init__(self, sql: str, names: Tuple[str, ...], named: bool, *, writes: bool = True,
                 clocked: bool = False) -> None:
        self.sql = sql
        self.names = names
        self.named = named
        self.writes = writes
        self.clocked = clocked  # its rows end with the database's clock
        # The values in placeholder order, taken in C (itemgetter gives one value bare, not in a tuple).
        getter = operator.itemgetter(*names) if names else (lambda values: ())
        self._ordered: Callable[[Mapping[str, Any]], Tuple[Any, ...]] = (
            (lambda values: (getter(values),)) if len(names) == 1 else getter)

    def parameters(self, values: Mapping[str, Any]) -> Union[Tuple[Any, ...], Dict[str, Any]]:
        if self.named:
            return {name: values[name] for name in self.names}
        return self._ordered(values)


_PARAMSTYLES = ("qmark", "numeric", "named", "format", "pyformat")


def _render_all(paramstyle: str, injected_clock: bool, *, lease_s: float, ttl_s: float) -> Dict[str, _Statement]:
    if injected_clock:  # the guarded times of this process's clock, sent with each statement
        now, stamp, clock = "CAST(:now AS double precision)", "CAST(:stamp AS double precision)", "NULL"
    else:  # the database's clock, bounded by this process's guard of it (a NULL floor bounds nothing)
        now = f"LEAST({DATABASE_CLOCK}, CAST(:floor AS double precision))"
        stamp = f"GREATEST({DATABASE_CLOCK}, CAST(:floor AS double precision))"
        clock = DATABASE_CLOCK
    statements = {}
    for name, template in _SQL.items():
        sql = template.format(now=now, stamp=stamp, clock=clock, lease=repr(lease_s), ttl=repr(ttl_s))
        statements[name] = _render(sql, paramstyle, writes=name not in _READS, clocked="{clock}" in template)
    return statements


def _render(sql: str, paramstyle: str, *, writes: bool = True, clocked: bool = False) -> _Statement:
    """Replace the ``:name`` placeholders by the driver's (``%s``, ``?``, ``:1`` or ``:name``)."""
    if "%" in sql or "?" in sql:
        raise AssertionError("the store's SQL must not contain '%' or '?'")  # they would clash with placeholders
    names: List[str] = []

    def placeholder(match: "re.Match[str]") -> str:
        names.append(match.group(1))
        if paramstyle in ("format", "pyformat"):
            return "%s"
        if paramstyle == "qmark":
            return "?"
        if paramstyle == "numeric":
            return f":{len(names)}"
        return f":{match.group(1)}"

    rendered = _PLACEHOLDER.sub(placeholder, sql)
    return _Statement(rendered, tuple(names), paramstyle == "named", writes=writes, clocked=clocked)


def _driver_paramstyle(driver: Any) -> str:
    paramstyle = getattr(driver, "paramstyle", None)
    if paramstyle not in _PARAMSTYLES:
        raise TypeError("cannot tell the driver's paramstyle from its module: pass paramstyle=")
    return str(paramstyle)


def _driver_errors(driver: Any) -> Tuple[Type[BaseException], ...]:
    """The exceptions that mean "the database failed": the driver's DB-API ``Error`` and OSError."""
    error = getattr(driver, "Error", None)
    if not (isinstance(error, type) and issubclass(error, Exception)):
        raise TypeError("the connection's module has no DB-API Error class; is it a DB-API 2.0 driver?")
    return (error, OSError)


def _unavailable(what: str, error: Optional[BaseException]) -> ReceiptStoreUnavailable:
    """A ReceiptStoreUnavailable naming the driver error by class and SQLSTATE, never by its message
    (which can quote the values of a row); raise it ``from`` the error, which stays in the process."""
    if error is None:
        return ReceiptStoreUnavailable(f"the receipt database failed: {what}")
    sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    sqlstate_note = f", SQLSTATE {sqlstate}" if isinstance(sqlstate, str) else ""
    return ReceiptStoreUnavailable(f"the receipt database failed: {what} ({type(error).__name__}{sqlstate_note})")


def _close_quietly(connection: Any) -> None:
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - closing a dead connection may fail; there is nothing left to free
        pass


def _stored_part(text: str) -> str:
    """How a tenant, tool, key or approval id is stored in a primary key: as it is, or (too long for a
    btree row, or starting with DIGEST_PREFIX, so that no text is ever stored as another's digest)
    DIGEST_PREFIX + the hex SHA-256 of its UTF-8 text. The same text always gives the same form, and two
    texts never share one (short of a SHA-256 collision). Returns `text` itself when it is kept."""
    if len(text) <= _SURELY_SHORT and not text.startswith(DIGEST_PREFIX):  # at most 4 UTF-8 bytes a character
        return text
    if len(text.encode("utf-8")) <= STORED_PART_MAX_BYTES and not text.startswith(DIGEST_PREFIX):
        return text
    return DIGEST_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


_SURELY_SHORT = STORED_PART_MAX_BYTES // 4


def _epoch_seconds(now: Any) -> float:
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise ValueError("the store's clock must return a finite number of seconds")
    return float(now)


def _entry(row: Sequence[Any]) -> Tuple[rules.Entry, float]:
    """A selected row (and the statement's "now") as the rules' Entry."""
    fingerprint, state, record_text, expires_at, owner, lapse, now = row[:7]
    return rules.Entry(fingerprint, state, record_text, float(expires_at), owner=owner, lapse=lapse), float(now)


def _settle_fingerprint_key(meta: Mapping[str, str], given_key: Optional[bytes]) -> Tuple[bytes, List[Tuple[str, str]]]:
    """The store's fingerprint key, and the meta rows to write for it (none when all is stored): the
    same rules as a SQLite file's (a given key stores only its id; a stored id must match)."""
    stored_key, stored_id = meta.get(_KEY_ROW), meta.get(_KEY_ID_ROW)
    if given_key is not None:
        if stored_id is None:
            return given_key, [(_KEY_ID_ROW, fingerprint_key_id(given_key))]
        if stored_id != fingerprint_key_id(given_key):
            raise ValueError("fingerprint_key is not the key this receipt database's fingerprints were made with")
        return given_key, []
    if stored_key is not None:
        return check_fingerprint_key(bytes.fromhex(stored_key)), []
    if stored_id is not None:
        raise ValueError("this receipt database's fingerprint key is not stored in it: pass it as fingerprint_key=")
    key = new_fingerprint_key()
    return key, [(_KEY_ROW, key.hex()), (_KEY_ID_ROW, fingerprint_key_id(key))]
