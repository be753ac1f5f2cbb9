"""The SQLite store's reserve takes a free key in one INSERT, answers a held key from a read, and
decides again under the write lock when the row has nothing to keep or was removed in between; its
busy timeout never outwaits the call's time. (The conformance suite holds the answers; these pin each path.)"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import unittest
from unittest import mock

from agent_lab.stores import Lapse, ReceiptKey, ReceiptStoreUnavailable, ReservationStatus, SqliteReceiptStore
from agent_lab.stores import sqlite as sqlite_store
from agent_lab.stores._clock import REBASE_S

from store_conformance import FIRST, KEY, LEASE_S, RECORD, SECOND, TTL_S, FakeClock


class ReservePathsTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")
        self.clock = FakeClock()
        self.store = SqliteReceiptStore(self.path, ttl_s=TTL_S, lease_s=LEASE_S, clock=self.clock,
                                        monotonic=self.clock.monotonic)
        self.addCleanup(self.store.close)

    def rows(self) -> list:
        with sqlite3.connect(self.path) as reader:
            rows = reader.execute("SELECT key, fingerprint, state, owner, lapse FROM receipts").fetchall()
        reader.close()
        return rows

    def test_a_free_key_is_taken_by_one_statement_and_never_read(self) -> None:
        with mock.patch.object(sqlite_store, "_read_entry", side_effect=AssertionError("read")):
            reservation = self.store.reserve(KEY, FIRST, lapse=Lapse.TAKEOVER)
        self.assertEqual(reservation.status, ReservationStatus.RESERVED)
        self.assertEqual(self.rows(), [(KEY.key, FIRST, "in_flight", reservation.owner, "takeover")])

    def test_a_held_key_is_answered_from_what_holds_it_and_left_unchanged(self) -> None:
        owner = self.store.reserve(KEY, FIRST).owner
        before = self.rows()
        self.assertEqual(self.store.reserve(KEY, FIRST).status, ReservationStatus.IN_PROGRESS)
        self.assertEqual(self.store.reserve(KEY, SECOND).status, ReservationStatus.CONFLICT)
        self.assertEqual(self.rows(), before)
        self.assertTrue(self.store.complete(KEY, owner, RECORD))
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)
        self.clock.advance(LEASE_S)  # an unknown key is kept as it is, whatever the arguments
        unknown = ReceiptKey(KEY.tenant, KEY.tool, "unknown")
        self.store.reserve(unknown, FIRST)
        self.clock.advance(LEASE_S)
        self.assertEqual(self.store.reserve(unknown, SECOND).status, ReservationStatus.CONFLICT)
        self.assertEqual(self.store.reserve(unknown, FIRST).status, ReservationStatus.UNKNOWN)

    def test_an_expired_receipt_or_a_lapsed_read_is_replaced_under_the_write_lock_with_a_new_owner(self) -> None:
        first_owner = self.store.reserve(KEY, FIRST).owner
        self.store.complete(KEY, first_owner, RECORD)
        read_key = ReceiptKey(KEY.tenant, KEY.tool, "read")
        read_owner = self.store.reserve(read_key, FIRST, lapse=Lapse.TAKEOVER).owner
        self.clock.advance(TTL_S)
        with mock.patch.object(sqlite_store, "_read_entry", wraps=sqlite_store._read_entry) as reads:
            again = self.store.reserve(KEY, SECOND)
            taken_over = self.store.reserve(read_key, SECOND)
        self.assertEqual(reads.call_count, 4)  # each: the plain read, then the read under the write lock
        self.assertEqual((again.status, taken_over.status), (ReservationStatus.RESERVED, ReservationStatus.RESERVED))
        self.assertNotIn(again.owner, (first_owner, None))
        self.assertFalse(self.store.complete(read_key, read_owner, RECORD))  # the stale holder is fenced off
        self.assertTrue(self.store.complete(KEY, again.owner, RECORD))

    def test_a_key_freed_between_the_claim_and_the_read_is_decided_again_under_the_write_lock(self) -> None:
        owner = self.store.reserve(KEY, FIRST).owner
        real_read = sqlite_store._read_entry
        reads = []

        def released_meanwhile(connection, address):
            if not reads:  # another process releases the key right after this reserve's claim failed
                other = SqliteReceiptStore(self.path, ttl_s=TTL_S, lease_s=LEASE_S, clock=self.clock,
                                           monotonic=self.clock.monotonic)
                self.assertTrue(other.release(KEY, owner))
                other.close()
            reads.append(address)
            return real_read(connection, address)

        with mock.patch.object(sqlite_store, "_read_entry", side_effect=released_meanwhile):
            reservation = self.store.reserve(KEY, SECOND)
        self.assertEqual(len(reads), 2)  # the plain read, then the read under the write lock
        self.assertEqual(reservation.status, ReservationStatus.RESERVED)
        self.assertEqual(self.rows(), [(KEY.key, SECOND, "in_flight", reservation.owner, "unknown")])
        self.assertTrue(self.store.complete(KEY, reservation.owner, RECORD))


class OneCallOneBudgetTest(unittest.TestCase):
    """Each statement waits for SQLite's lock up to the busy timeout: a reserve of several statements
    (sweep, claim, the write-locked decision) must share the call's time among them, not give each the
    whole of it. The call's time is moved on by hand (`_monotonic`) while a statement runs, as if it
    had waited that long for another process's lock."""

    CALL_S = 30.0

    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")
        self.clock = FakeClock()
        self.store = SqliteReceiptStore(self.path, ttl_s=TTL_S, lease_s=LEASE_S, clock=self.clock,
                                        monotonic=self.clock.monotonic)
        self.addCleanup(self.store.close)
        self.moment = 1000.0
        self.started: list = []
        patcher = mock.patch.object(sqlite_store, "_monotonic", lambda: self.moment, create=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def waits_on(self, prefix: str, seconds: float) -> None:
        def trace(sql: str) -> None:
            self.started.append(sql.split(" ", 2)[0])
            if sql.startswith(prefix):
                self.moment += seconds

        self.store._connection.set_trace_callback(trace)
        self.addCleanup(self.store._connection.set_trace_callback, None)

    def test_a_claim_that_used_up_the_call_s_time_starts_no_second_wait_for_the_lock(self) -> None:
        self.store.reserve(KEY, FIRST, lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)  # a lapsed read: taking it over needs the write-locked decision
        self.waits_on("INSERT OR IGNORE", self.CALL_S)
        with self.assertRaises(ReceiptStoreUnavailable):
            self.store.reserve(KEY, SECOND, lapse=Lapse.TAKEOVER, timeout_s=self.CALL_S)
        self.assertNotIn("BEGIN", self.started)
        self.assertEqual(self.store.lookup(KEY), None)  # the lapsed read is still there, untaken

    def test_the_write_locked_decision_waits_only_for_what_the_claim_left(self) -> None:
        self.store.reserve(KEY, FIRST, lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)
        self.waits_on("INSERT OR IGNORE", self.CALL_S - 10.0)
        self.assertEqual(self.store.reserve(KEY, SECOND, timeout_s=self.CALL_S).status, ReservationStatus.RESERVED)
        self.assertIn("BEGIN", self.started)
        self.assertLessEqual(self.store._busy_timeout_ms, 10_000)

    def test_a_sweep_that_used_up_the_call_s_time_starts_no_claim(self) -> None:
        self.store._reserves_since_sweep = sqlite_store.SWEEP_EVERY - 1  # this reserve sweeps first
        self.waits_on("DELETE FROM receipts", self.CALL_S)
        with self.assertRaises(ReceiptStoreUnavailable):
            self.store.reserve(KEY, FIRST, timeout_s=self.CALL_S)
        self.assertNotIn("INSERT", self.started)
        self.assertEqual(self.store.lookup(KEY), None)


class _RecordedConnection:
    """A store's connection that records, for each statement, the busy timeout it ran with."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.statements: list = []

    def execute(self, sql: str, *parameters: object) -> sqlite3.Cursor:
        if not sql.startswith("PRAGMA"):
            busy_ms = self.connection.execute("PRAGMA busy_timeout").fetchone()[0]
            self.statements.append((sql.split(" (", 1)[0], busy_ms))
        return self.connection.execute(sql, *parameters)

    def __getattr__(self, name: str) -> object:
        return getattr(self.connection, name)


@unittest.skipIf(sqlite_store.boot_identity() is None, "the clock anchor is kept in the file only for a known boot")
class AnchorSaveTakesNoneOfTheCallsTimeTest(unittest.TestCase):
    """Now and then (`REBASE_S`) a call keeps the clock guard's state in the file. While another program
    holds the write lock, that save must not wait: it waited the call's whole time, then the call's own
    statement waited it again (a reserve with timeout_s=1 answered after 1.9 s; reproduced)."""

    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")
        self.store = SqliteReceiptStore(self.path)  # the system's clocks: the anchor is kept in the file
        self.addCleanup(self.store.close)
        self.store._guard._base_at -= REBASE_S  # as if idle for REBASE_S: the next reading moves the base
        self.recorded = _RecordedConnection(self.store._connection)
        self.store._connection = self.recorded
        self.addCleanup(setattr, self.store, "_connection", self.recorded.connection)

    def kept_anchor(self) -> str:
        reader = sqlite3.connect(self.path)
        try:
            return reader.execute("SELECT value FROM store_meta WHERE name = 'clock_anchor'").fetchone()[0]
        finally:
            reader.close()

    def test_under_another_writer_s_lock_the_call_keeps_its_time_and_the_next_call_saves(self) -> None:
        other = sqlite3.connect(self.path, isolation_level=None)
        self.addCleanup(other.close)
        other.execute("BEGIN IMMEDIATE")
        with self.assertRaises(ReceiptStoreUnavailable):
            self.store.reserve(KEY, FIRST, timeout_s=0.2)
        writes = [(sql, busy_ms) for sql, busy_ms in self.recorded.statements if sql.startswith("INSERT")]
        self.assertEqual([sql for sql, _ in writes][-1], "INSERT OR IGNORE INTO receipts")  # the call's own
        self.assertLessEqual(sum(busy_ms for _, busy_ms in writes), 200)
        other.execute("COMMIT")
        self.assertNotEqual(self.kept_anchor().split(" ", 1)[1], self.store._guard.saved())
        self.store.lookup(KEY, timeout_s=5)  # the next call saves what the busy one could not
        self.assertEqual(self.kept_anchor().split(" ", 1)[1], self.store._guard.saved())


class BusyTimeoutTest(unittest.TestCase):
    def test_the_busy_timeout_never_exceeds_the_time_left_and_is_at_most_an_eighth_shorter(self) -> None:
        for milliseconds in list(range(0, 300)) + [999, 1000, 4999, 5000, 123_456, 2**31 - 1]:
            seconds = milliseconds / 1000 + 0.0004
            with self.subTest(seconds=seconds):
                chosen = sqlite_store._busy_timeout_ms(seconds)
                self.assertLessEqual(chosen, seconds * 1000)
                self.assertGreaterEqual(chosen, int(seconds * 1000) * 7 / 8)

    def test_nearby_deadlines_share_one_setting(self) -> None:
        self.assertEqual(len({sqlite_store._busy_timeout_ms(4.9 - step / 1000) for step in range(100)}), 1)


if __name__ == "__main__":
    unittest.main()
