"""A scratch PostgreSQL database for the tests (no tests here).

The tests reach a server through `AGENT_LAB_TEST_POSTGRES_DSN` (a libpq connection string; `.ci/run`
starts a throwaway server and sets it, `.ci/postgres.sh` does the same by hand) with psycopg 3.
Without either, `SKIP_REASON` says why and the PostgreSQL tests skip. Each test works in a schema of
its own (the store's tables go where the connection's `search_path` points), dropped afterwards.

This module is also a tiny DB-API "driver" (`paramstyle`, `Error`) for `FaultyConnection`, a psycopg
connection wrapped to inject faults a real server cannot be made to produce on cue.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import uuid
from typing import Any, Callable, Iterator, List, Optional

DSN_VARIABLE = "AGENT_LAB_TEST_POSTGRES_DSN"


def _skip_reason() -> Optional[str]:
    if not os.environ.get(DSN_VARIABLE):
        return (f"no PostgreSQL server configured: set {DSN_VARIABLE} to a libpq connection string "
                f"(source .ci/postgres.sh and run start_postgres DIR to start a throwaway one)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'psycopg[binary]' (a test-only dependency)"
    return None


SKIP_REASON = _skip_reason()
DSN = os.environ.get(DSN_VARIABLE, "")

# The DB-API surface of this module, for FaultyConnection (see the module docstring).
paramstyle = "pyformat"
if SKIP_REASON is None:
    import psycopg

    Error: Any = psycopg.Error
else:
    Error = Exception


class ScratchDatabase:
    """Schemas created for one test and dropped at its end, and connections into them."""

    def __init__(self) -> None:
        self.schemas: List[str] = []

    def new_schema(self) -> str:
        name = "agent_lab_test_" + uuid.uuid4().hex[:12]
        with self.admin() as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        self.schemas.append(name)
        return name

    def connect(self, schema: str, *, application_name: str = "agent-lab-tests") -> Callable[[], Any]:
        """A connection factory for the store: tables in `schema`, named `application_name` in
        pg_stat_activity (so a test can find the store's connections)."""
        import psycopg

        return functools.partial(psycopg.connect, DSN, options=f"-c search_path={schema}",
                                 application_name=application_name, connect_timeout=10)

    def admin(self) -> Any:
        """A connection of the test itself (autocommit), outside any store; its commits never wait for a
        synchronous standby (see MissingStandby)."""
        import psycopg

        return psycopg.connect(DSN, autocommit=True, connect_timeout=10, options="-c synchronous_commit=local")

    def drop(self) -> None:
        if not self.schemas:
            return
        with self.admin() as connection:
            for schema in self.schemas:
                connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.schemas.clear()

    @contextlib.contextmanager
    def tables_locked(self, schema: str) -> Iterator[None]:
        """Another client holds every table of the store in `schema` (ACCESS EXCLUSIVE) meanwhile."""
        with self.admin() as connection:
            connection.execute("BEGIN")
            connection.execute(f"LOCK TABLE {schema}.agent_lab_receipts, {schema}.agent_lab_approvals"
                               f" IN ACCESS EXCLUSIVE MODE")
            try:
                yield
            finally:
                connection.execute("ROLLBACK")

    def terminate(self, application_name: str, *, waiting_for_lock: bool = False) -> int:
        """pg_terminate_backend on the connections named `application_name` (only those waiting for
        a lock, if asked); how many were terminated. From PostgreSQL 14 on, it waits (up to 30 s) until
        each of them has ended: its connection is then closed by the server, not about to be."""
        condition = " AND wait_event_type = 'Lock'" if waiting_for_lock else ""
        with self.admin() as connection:
            waits = int(connection.execute("SHOW server_version_num").fetchone()[0]) >= 140000
            rows = connection.execute(
                f"SELECT pg_terminate_backend(pid{', 30000' if waits else ''}) FROM pg_stat_activity"
                " WHERE application_name = %s" + condition, (application_name,)).fetchall()
        return sum(1 for (done,) in rows if done)

    def wait_for(self, application_name: str, *, waiting_for_lock: bool, patience_s: float = 30.0) -> None:
        """Wait (polling the server, a hang guard) until a connection named so waits for a lock."""
        give_up = time.monotonic() + patience_s
        with self.admin() as connection:
            while time.monotonic() < give_up:
                row = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                    (application_name,)).fetchone()
                if row[0] > 0 or not waiting_for_lock:
                    return
                time.sleep(0.01)
        raise AssertionError(f"no connection named {application_name!r} started waiting for a lock")


class MissingStandby:
    """The test server waits, at every commit of a transaction that wrote, for a synchronous standby that
    does not exist (`synchronous_standby_names` names one), as a primary does whose standby is down; from
    `start()` until `stop()`. It takes a superuser (ALTER SYSTEM: the test server's own user is one) and
    holds up every writer of the server meanwhile, so use it in tests that run alone on their server,
    as the store tests do (the test's own admin connections commit locally). A run killed meanwhile
    leaves the setting behind: `ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf();`."""

    SETTING = "synchronous_standby_names"
    PROBE = "agent-lab-standby-probe"

    def __init__(self, database: ScratchDatabase) -> None:
        self._database = database

    def start(self, patience_s: float = 30.0) -> None:
        import unittest

        with self._database.admin() as connection:
            superuser = connection.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
            if not superuser or not superuser[0]:
                raise unittest.SkipTest("needs a superuser connection to set synchronous_standby_names")
            connection.execute(f"ALTER SYSTEM SET {self.SETTING} = 'agent_lab_missing_standby'")
            connection.execute("SELECT pg_reload_conf()")
        give_up = time.monotonic() + patience_s
        try:
            while not self._a_commit_waits():  # the setting reaches the server's processes a little later
                if time.monotonic() > give_up:
                    raise AssertionError("the server never started waiting for its synchronous standby")
        except BaseException:
            self.stop()
            raise

    def stop(self, patience_s: float = 30.0) -> None:
        with self._database.admin() as connection:
            connection.execute(f"ALTER SYSTEM RESET {self.SETTING}")
            connection.execute("SELECT pg_reload_conf()")
            give_up = time.monotonic() + patience_s
            while connection.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
                                     ).fetchone()[0]:  # the waiting commits are let go
                if time.monotonic() > give_up:
                    raise AssertionError("commits still wait for a synchronous standby after it was reset")
                time.sleep(0.01)

    def __enter__(self) -> "MissingStandby":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _a_commit_waits(self) -> bool:
        """Commit a transaction that wrote (a temporary table: nothing is left behind) on a connection of
        its own: True when that commit waited for the standby (it is then cancelled, and keeps its local
        commit)."""
        import psycopg

        probe = psycopg.connect(DSN, connect_timeout=10, application_name=self.PROBE)
        try:
            probe.execute("CREATE TEMPORARY TABLE agent_lab_standby_probe (x int) ON COMMIT DROP")
            committed = threading.Event()

            def commit() -> None:
                try:
                    probe.commit()
                finally:
                    committed.set()

            committer = threading.Thread(target=commit)
            committer.start()
            waited = False
            with self._database.admin() as connection:
                while not committed.is_set() and not waited:
                    waited = connection.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event = 'SyncRep'",
                        (self.PROBE,)).fetchone()[0] > 0
                    time.sleep(0.005)
                if waited:
                    connection.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                                       " WHERE application_name = %s", (self.PROBE,))
            committer.join(30.0)
            return waited
        finally:
            probe.close()


class RowShiftingClock:
    """Moves time for stores that run on the database's clock, which no test can move: it moves every
    stored expiry back instead (the same thing, seen from the rows). `now` is the wall clock, which a
    server on this machine shares."""

    def __init__(self, database: ScratchDatabase) -> None:
        self._database = database

    @property
    def now(self) -> float:
        return time.time()

    def __call__(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        with self._database.admin() as connection:
            for schema in self._database.schemas:
                if connection.execute("SELECT to_regclass(%s)", (f"{schema}.agent_lab_receipts",)).fetchone()[0]:
                    connection.execute(f"UPDATE {schema}.agent_lab_receipts SET expires_at = expires_at - %s",
                                       (seconds,))
                    connection.execute(f"UPDATE {schema}.agent_lab_approvals SET kept_until = kept_until - %s",
                                       (seconds,))


class FaultyConnection:
    """A psycopg connection whose next commit can be made to happen and then fail as if the connection
    dropped before the answer arrived (`lose_commits`), the one fault a networked store cannot tell from
    a commit that never happened. A commit is `commit()` in a transaction, and in autocommit a statement
    that writes (INSERT, UPDATE or DELETE: each commits as it runs)."""

    lose_commits = 0  # class-wide: how many of the next commits (of any FaultyConnection) are "lost"

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def cursor(self) -> Any:
        return _FaultyCursor(self._connection)

    def commit(self) -> None:
        self._connection.commit()
        if not self._connection.autocommit:
            _lose_a_commit(self._connection)

    def rollback(self) -> None:
        self._connection.rollback()

    def cancel_safe(self) -> None:
        self._connection.cancel_safe()

    def close(self) -> None:
        self._connection.close()

    @property
    def autocommit(self) -> bool:
        return bool(self._connection.autocommit)

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self._connection.autocommit = value


def _lose_a_commit(connection: Any) -> None:
    if FaultyConnection.lose_commits > 0:
        FaultyConnection.lose_commits -= 1
        connection.close()
        raise psycopg.OperationalError("server closed the connection unexpectedly (injected)")


class _FaultyCursor:
    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._cursor = connection.cursor()

    def execute(self, sql: Any, parameters: Any = None) -> Any:
        answer = self._cursor.execute(sql, parameters)
        if self._connection.autocommit and str(sql).split(" ", 1)[0] in ("INSERT", "UPDATE", "DELETE"):
            _lose_a_commit(self._connection)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def faulty(connect: Callable[[], Any]) -> Callable[[], FaultyConnection]:
    return lambda: FaultyConnection(connect())


class HookedConnection(FaultyConnection):
    """A FaultyConnection that calls `before_statement(sql, connection)` (class-wide; None: nothing)
    before each statement the store runs, with the raw psycopg connection of that transaction: a test
    can move time on there, or read the transaction's settings. `rewrite(sql)` (class-wide; None:
    nothing) changes each statement before it is sent: `step_database_clock` makes the server's clock
    read later, as a clock stepped on the server would, which no test can do to a real server."""

    before_statement: Optional[Callable[[str, Any], None]] = None
    rewrite: Optional[Callable[[str], str]] = None

    @staticmethod
    def step_database_clock(seconds: float) -> None:
        later = f"(statement_timestamp() + interval '{float(seconds)!r} seconds')"
        HookedConnection.rewrite = staticmethod(lambda sql: sql.replace("statement_timestamp()", later))

    def cursor(self) -> Any:
        return _HookedCursor(self._connection)


class _HookedCursor(_FaultyCursor):
    def execute(self, sql: Any, parameters: Any = None) -> Any:
        hook = HookedConnection.before_statement
        if hook is not None:
            hook(str(sql), self._connection)
        rewrite = HookedConnection.rewrite
        if rewrite is not None:
            sql = rewrite(str(sql))
        return super().execute(sql, parameters)


def hooked(connect: Callable[[], Any]) -> Callable[[], HookedConnection]:
    return lambda: HookedConnection(connect())


class UncancellableConnection(HookedConnection):
    """A HookedConnection whose driver has no way to cancel a running statement: the store then runs each
    call as one transaction bounded by the server's timeouts (its way for such drivers)."""

    cancel_safe = None  # type: ignore[assignment]


def uncancellable(connect: Callable[[], Any]) -> Callable[[], UncancellableConnection]:
    return lambda: UncancellableConnection(connect())
