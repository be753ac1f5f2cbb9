"""Receipt stores: the conformance suite (tests/store_conformance.py) run against the in-memory and
the SQLite store, plus what only SQLite promises (a restart keeps receipts and the fingerprint key;
threads and processes racing one key get one winner; a version-1 file is migrated)."""

import contextlib
import multiprocessing
import os
import queue
import sqlite3
import stat
import sys
import tempfile
import threading
import time
import unittest

from agent_lab.idempotency import (
    SCHEMA_VERSION,
    SWEEP_CHUNK,
    SWEEP_EVERY,
    InMemoryReceiptStore,
    ReceiptKey,
    ReservationStatus,
    SqliteReceiptStore,
    fingerprint,
)
from agent_lab.registry import Registry
from agent_lab.stores import Lapse, ReceiptStoreUnavailable

from store_conformance import (
    FINGERPRINT_KEY,
    FIRST,
    KEY,
    LEASE_S,
    RECORD,
    TTL_S,
    ClockStepConformance,
    DurableApprovalConformance,
    DurableStoreConformance,
    FakeClock,
    PurgeAndApprovalConformance,
    ReceiptStoreConformance,
    TaskStoreConformance,
    holding,
)
from test_registry_fixtures import WRITER, followup_call, followup_spec


class InMemoryReceiptStoreTest(ClockStepConformance, PurgeAndApprovalConformance, ReceiptStoreConformance,
                               TaskStoreConformance, unittest.TestCase):
    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S, fingerprint_key=None):
        return InMemoryReceiptStore(ttl_s=ttl_s, lease_s=lease_s, clock=clock, fingerprint_key=fingerprint_key,
                                    monotonic=clock.monotonic)

    def busy_store(self, store):
        return holding(store._lock)

    def test_each_store_gets_its_own_random_fingerprint_key(self):
        self.assertNotEqual(self.store.fingerprint_key, self.make_store(self.clock).fingerprint_key)


class SqliteReceiptStoreTest(ClockStepConformance, DurableApprovalConformance, DurableStoreConformance,
                             PurgeAndApprovalConformance, ReceiptStoreConformance, TaskStoreConformance,
                             unittest.TestCase):
    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.directory = directory.name
        self.path = os.path.join(self.directory, "receipts.sqlite3")
        super().setUp()

    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S, synchronous="NORMAL", fingerprint_key=None):
        return SqliteReceiptStore(self.path, ttl_s=ttl_s, lease_s=lease_s, clock=clock, monotonic=clock.monotonic,
                                  synchronous=synchronous,
                                  fingerprint_key=fingerprint_key)

    def use_new_storage(self):
        self.path = os.path.join(self.directory, f"receipts-{len(os.listdir(self.directory))}.sqlite3")

    @contextlib.contextmanager
    def busy_store(self, store):
        """Another connection (as another process would) holds the file's write lock."""
        other = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            other.execute("BEGIN IMMEDIATE")
            yield
            other.execute("ROLLBACK")
        finally:
            other.close()

    def test_the_file_uses_wal_and_records_its_schema_version(self):
        with sqlite3.connect(self.path) as connection:
            self.assertEqual(connection.execute("PRAGMA journal_mode").fetchone()[0], "wal")
            self.assertEqual(connection.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        connection.close()

    @unittest.skipUnless(os.name == "posix", "file modes are a POSIX notion")
    def test_a_new_file_is_readable_by_its_owner_only(self):
        self.store.reserve(KEY, FIRST)
        for suffix in ("", "-wal"):
            with self.subTest(file="receipts.sqlite3" + suffix):
                self.assertEqual(stat.S_IMODE(os.stat(self.path + suffix).st_mode) & 0o077, 0)

    def test_a_file_written_by_a_newer_schema_is_refused(self):
        self.store.close()
        connection = sqlite3.connect(self.path)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        connection.close()
        with self.assertRaises(ValueError) as caught:
            self.make_store(self.clock)
        self.assertIn("schema version", str(caught.exception))

    def rebuild_table(self, table, columns, *, user_version=None):
        """Replace a table of the file by one of the given column definitions, as a hand edit would."""
        self.store.close()
        connection = sqlite3.connect(self.path, isolation_level=None)
        connection.execute(f"DROP TABLE {table}")
        connection.execute(f"CREATE TABLE {table} ({columns})")
        if user_version is not None:
            connection.execute(f"PRAGMA user_version = {user_version}")
        connection.close()

    def assert_refused(self, *phrases):
        with self.assertRaises(ValueError) as caught:
            self.make_store(self.clock)
        for phrase in (self.path, *phrases):
            self.assertIn(phrase, str(caught.exception))

    def test_a_receipts_table_without_its_primary_key_is_refused_not_run_twice(self):
        without_key = ("tenant TEXT NOT NULL, tool TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
                       " state TEXT NOT NULL, record TEXT, expires_at REAL NOT NULL, owner TEXT, lapse TEXT")
        for version in (SCHEMA_VERSION, 0):  # 0: some other program's `receipts` table, kept by the creation
            with self.subTest(user_version=version):
                self.rebuild_table("receipts", without_key, user_version=version)
                self.assert_refused("'receipts'", "primary key is ()")
                with sqlite3.connect(self.path) as connection:  # refused before anything was migrated
                    self.assertEqual(connection.execute("PRAGMA user_version").fetchone()[0], version)
                connection.close()

    def test_a_table_whose_primary_key_or_columns_differ_from_what_the_store_relies_on_is_refused(self):
        shapes = {
            "receipts": ("tenant TEXT, tool TEXT, key TEXT, fingerprint TEXT, state TEXT, record TEXT,"
                         " expires_at REAL, owner TEXT, lapse TEXT, PRIMARY KEY (tool, key)",
                         "primary key is (tool, key)"),
            "approvals": ("tenant TEXT, approval_id TEXT PRIMARY KEY, kept_until REAL", "primary key is (approval_id)"),
            "store_meta": ("name TEXT, value TEXT", "primary key is ()"),
        }
        for table, (columns, phrase) in shapes.items():
            with self.subTest(table=table):
                self.use_new_storage()
                self.store = self.make_store(self.clock)
                self.rebuild_table(table, columns)
                self.assert_refused(f"'{table}'", phrase)
        self.use_new_storage()
        self.store = self.make_store(self.clock)
        self.rebuild_table("approvals", "tenant TEXT, approval_id TEXT, PRIMARY KEY (tenant, approval_id)")
        self.assert_refused("'approvals'", "no column kept_until")

    def test_a_key_compared_other_than_byte_for_byte_is_refused(self):
        """NOCASE on the key made tenant "ACME" replay tenant "acme"'s receipts (reproduced)."""
        self.rebuild_table("receipts", "tenant TEXT COLLATE NOCASE, tool TEXT, key TEXT, fingerprint TEXT, state TEXT,"
                                       " record TEXT, expires_at REAL, owner TEXT, lapse TEXT,"
                                       " PRIMARY KEY (tenant, tool, key)")
        self.assert_refused("'receipts'", "compares with NOCASE, not BINARY")

    def test_a_key_compared_other_than_byte_for_byte_beside_or_despite_a_binary_primary_key_is_refused(self):
        """The check read only the primary key's collation: a NOCASE column under a `COLLATE BINARY` key
        (the statements' `tenant = ?` folds case) answered tenant "acme" from tenant "ACME"'s receipt, and
        a unique index on the key with NOCASE let tenant "ACME"'s reservation REPLACE tenant "acme"'s
        receipt, so acme's key ran again (both reproduced)."""
        columns = ("tenant TEXT {}, tool TEXT, key TEXT, fingerprint TEXT, state TEXT, record TEXT, expires_at REAL,"
                   " owner TEXT, lapse TEXT, PRIMARY KEY (tenant {}, tool, key)")
        for collation in ("NOCASE", "RTRIM", '"nocase"'):
            with self.subTest(column=collation):
                self.use_new_storage()
                self.store = self.make_store(self.clock)
                self.rebuild_table("receipts", columns.format(f"COLLATE {collation}", "COLLATE BINARY"))
                self.assert_refused("'receipts'", "compares with " + collation.strip('"').upper() + ", not BINARY")
        for index in ("tenant COLLATE NOCASE, tool, key", "tool, key"):  # one tenant's key would replace another's
            with self.subTest(unique_index=index):
                self.use_new_storage()
                self.store = self.make_store(self.clock)
                self.store.close()
                with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as connection:
                    connection.execute(f"CREATE UNIQUE INDEX folded ON receipts ({index})")
                self.assert_refused("'receipts'", "unique index ('folded')")
        self.use_new_storage()
        self.store = self.make_store(self.clock)
        self.store.close()
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as connection:
            connection.execute("CREATE INDEX by_expiry ON receipts (expires_at)")  # changes no key: opens
        self.store = self.make_store(self.clock)
        self.assertEqual(self.store.reserve(KEY, FIRST).status, ReservationStatus.RESERVED)

    def test_a_table_with_a_trigger_is_refused(self):
        """A trigger that moved each new reservation aside let two stores reserve one key (reproduced)."""
        self.store.close()
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as connection:
            connection.execute("CREATE TRIGGER aside AFTER INSERT ON receipts BEGIN"
                               " UPDATE receipts SET key = key || '~' WHERE rowid = NEW.rowid; END")
        self.assert_refused("'receipts'", "trigger ('aside')")

    @unittest.skipUnless(hasattr(os, "link"), "hard links")
    def test_a_file_with_a_second_name_is_refused_by_either_name(self):
        """SQLite names the write-ahead log after the path: two names, two logs, two effects for one key."""
        self.store.close()
        second = os.path.join(self.directory, "second-name.sqlite3")
        os.link(self.path, second)
        for path in (self.path, second):
            with self.subTest(path=path), self.assertRaises(ValueError) as caught:
                SqliteReceiptStore(path, clock=self.clock, monotonic=self.clock.monotonic)
            self.assertIn("hard links", str(caught.exception))
            self.assertFalse(os.path.exists(path + "-wal"))  # refused before SQLite touched it
        os.unlink(second)
        self.store = self.make_store(self.clock)  # one name again: opens
        self.assertEqual(self.store.reserve(KEY, FIRST).status, ReservationStatus.RESERVED)

    def test_a_file_corrupted_under_an_open_store_is_unavailable_for_every_call_never_another_error(self):
        for number in range(300):  # enough rows for the table to span pages of its own
            self.store.reserve(ReceiptKey(KEY.tenant, KEY.tool, f"key-{number}"), FIRST)
        self.store.close()
        with sqlite3.connect(self.path) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            root_page = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'receipts'").fetchone()[0]
            page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        connection.close()
        self.store = self.make_store(self.clock)
        with open(self.path, "r+b") as file:  # the disk (or another program) damages the table's root page
            file.seek(page_size * (root_page - 1))
            file.write(b"\xff" * page_size)
        calls = {
            "reserve": lambda: self.store.reserve(KEY, FIRST),
            "lookup": lambda: self.store.lookup(ReceiptKey(KEY.tenant, KEY.tool, "key-7")),
            "complete": lambda: self.store.complete(KEY, "0" * 32, RECORD),
            "unresolved": lambda: self.store.unresolved(),
        }
        for name, call in calls.items():
            with self.subTest(call=name), self.assertRaises(ReceiptStoreUnavailable):
                call()

    def test_a_file_deleted_under_an_open_store_is_refused_by_it_and_by_a_new_store_never_split(self):
        effects = []
        registries = []

        def registry_on(store):
            registry = Registry(receipts=store, late_completion_s=1)
            registry.register(followup_spec(timeout_ms=1_000),
                              lambda arguments: effects.append(arguments["action_id"]) or {})
            self.addCleanup(registry.close)
            registries.append(registry)
            return registry

        first = registry_on(self.store)
        self.assertTrue(first.invoke(followup_call(action_id="act-1"), actor=WRITER).ok)
        os.remove(self.path)  # an operator, a cleanup job or a bad deploy removes the file; -wal and -shm stay
        for action_id in ("act-1", "act-2"):  # a replay from the unlinked file, a run into it: both refused
            with self.subTest(action_id=action_id), self.assertLogs("agent_lab.registry", "WARNING"):
                refused = first.invoke(followup_call(action_id=action_id), actor=WRITER)
                self.assertEqual((refused.error.code, refused.error.retryable), ("receipt_store_unavailable", True))
        with self.assertRaisesRegex(ReceiptStoreUnavailable, "write-ahead log"):
            self.make_store(self.clock)  # a new store would start empty beside the old log: run act-1 again
        self.assertEqual(effects, ["act-1"])
        for suffix in ("-wal", "-shm"):  # the operator starts an empty store on purpose
            os.remove(self.path + suffix)
        second = registry_on(self.make_store(self.clock))
        self.addCleanup(second.receipts.close)
        self.assertTrue(second.invoke(followup_call(action_id="act-2"), actor=WRITER).ok)
        with self.assertLogs("agent_lab.registry", "WARNING"):  # the old store never writes into the new file
            self.assertEqual(first.invoke(followup_call(action_id="act-2"), actor=WRITER).error.code,
                             "receipt_store_unavailable")
        self.assertEqual(effects, ["act-1", "act-2"])

    def test_a_file_replaced_under_an_open_store_is_refused_until_it_is_back(self):
        owner = self.store.reserve(KEY, FIRST).owner
        self.assertTrue(self.store.complete(KEY, owner, RECORD))
        moved, replacement = self.path + ".moved", self.path + ".replacement"
        SqliteReceiptStore(replacement, ttl_s=TTL_S, lease_s=LEASE_S, clock=self.clock,
                           monotonic=self.clock.monotonic).close()  # another file
        os.rename(self.path, moved)
        os.replace(replacement, self.path)  # a restore from a backup, a deploy copying a file over it
        for name, call in (("reserve", lambda: self.store.reserve(KEY, FIRST)),
                           ("lookup", lambda: self.store.lookup(KEY)),
                           ("complete", lambda: self.store.complete(KEY, owner, RECORD))):
            with self.subTest(call=name), self.assertRaisesRegex(ReceiptStoreUnavailable, "removed or replaced"):
                call()
        os.replace(moved, self.path)  # the original is back under its path
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)

    def test_an_unknown_synchronous_level_is_refused(self):
        with self.assertRaises(ValueError):
            self.make_store(self.clock, synchronous="NORMAL; DROP TABLE receipts")

    def test_every_synchronous_level_opens(self):
        for level in ("off", "NORMAL", "FULL", "EXTRA"):
            with self.subTest(level=level):
                self.make_store(self.clock, synchronous=level).close()

    def test_expired_rows_are_purged_from_the_file_by_later_reserves_but_unknown_ones_stay(self):
        expired_count = SWEEP_CHUNK + SWEEP_CHUNK // 2  # more than one sweep chunk
        for index in range(expired_count):
            old = ReceiptKey("tenant-a", "record_followup", f"a-old-{index:04d}")
            self.store.complete(old, self.store.reserve(old, FIRST).owner, RECORD)
        self.store.reserve(ReceiptKey("tenant-a", "record_followup", "a-old-read"), FIRST, lapse=Lapse.TAKEOVER)
        self.store.reserve(ReceiptKey("tenant-a", "record_followup", "a-old-unknown"), FIRST, lapse=Lapse.UNKNOWN)
        self.clock.advance(TTL_S)
        enough_reserves_for_a_full_pass = (expired_count // SWEEP_CHUNK + 2) * SWEEP_EVERY
        for index in range(enough_reserves_for_a_full_pass):
            self.store.reserve(ReceiptKey("tenant-a", "record_followup", f"b-new-{index:04d}"), FIRST)
        connection = sqlite3.connect(self.path)
        self.addCleanup(connection.close)
        remaining = connection.execute("SELECT key FROM receipts WHERE key LIKE 'a-old-%'").fetchall()
        live = connection.execute("SELECT COUNT(*) FROM receipts WHERE key LIKE 'b-new-%'").fetchone()[0]
        self.assertEqual(remaining, [("a-old-unknown",)])
        self.assertEqual(live, enough_reserves_for_a_full_pass)

    def test_a_file_created_with_a_given_fingerprint_key_stores_only_its_id(self):
        self.use_new_storage()
        keyed = self.make_store(self.clock, fingerprint_key=FINGERPRINT_KEY)
        keyed.close()
        content = b""
        for suffix in ("", "-wal"):
            if os.path.exists(self.path + suffix):
                with open(self.path + suffix, "rb") as database:
                    content += database.read()
        self.assertNotIn(FINGERPRINT_KEY, content)
        self.assertNotIn(FINGERPRINT_KEY.hex().encode(), content)
        self.assertEqual(self.make_store(self.clock, fingerprint_key=FINGERPRINT_KEY).fingerprint_key, FINGERPRINT_KEY)
        with self.assertRaisesRegex(ValueError, "fingerprint_key"):
            self.make_store(self.clock)  # the key is not in the file: it must be given
        with self.assertRaisesRegex(ValueError, "fingerprint_key"):
            self.make_store(self.clock, fingerprint_key=b"another key, 32 bytes long......")

    def test_opening_a_file_with_another_fingerprint_key_than_its_own_is_refused(self):
        with self.assertRaisesRegex(ValueError, "fingerprint_key"):
            self.make_store(self.clock, fingerprint_key=FINGERPRINT_KEY)


class SqliteWallClockStepTest(unittest.TestCase):
    """The store's wall clock (time.time, read through `clock=`) is stepped forward by a day and a second,
    the receipt ttl; the system's monotonic clock, which the store guards it with, is not."""

    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")
        self.step = 0.0
        self.effects = []

    def registry(self):
        store = SqliteReceiptStore(self.path, clock=lambda: time.time() + self.step)  # ttl_s: a day
        registry = Registry(receipts=store)
        registry.register(followup_spec(), lambda arguments: self.effects.append(arguments["action_id"]) or {})
        self.addCleanup(store.close)
        self.addCleanup(registry.close)
        return registry

    def test_a_retry_after_the_wall_clock_stepped_past_the_ttl_replays_and_never_runs_again(self):
        registry = self.registry()
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)
        self.step = 86_401.0
        retried = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(retried.ok and retried.replayed, retried)
        self.assertEqual(self.effects, ["act-1"])

    @unittest.skipUnless(sys.platform.startswith("linux"), "the anchor is kept per boot only where the monotonic "
                                                           "clock counts from boot for every process (Linux)")
    def test_a_store_opened_after_the_step_still_counts_from_before_it(self):
        self.assertTrue(self.registry().invoke(followup_call(), actor=WRITER).ok)
        self.step = 86_401.0
        restarted = self.registry()  # a process started after the step, on the same file
        retried = restarted.invoke(followup_call(), actor=WRITER)
        self.assertTrue(retried.ok and retried.replayed, retried)
        self.assertEqual(self.effects, ["act-1"])


class ReceiptKeyTest(unittest.TestCase):
    def test_a_lone_surrogate_in_any_part_of_a_receipt_key_is_refused_for_every_store(self):
        for part in ("tenant", "tool", "key"):
            parts = {"tenant": "acme", "tool": "record_followup", "key": "act-1"}
            parts[part] = "act-\ud800"
            with self.subTest(part=part), self.assertRaisesRegex(ValueError, part):
                ReceiptKey(**parts)

    def test_a_nul_in_any_part_of_a_receipt_key_is_refused_for_every_store(self):
        # PostgreSQL's text type cannot hold NUL; the same key must mean the same thing on every store.
        for part in ("tenant", "tool", "key"):
            parts = {"tenant": "acme", "tool": "record_followup", "key": "act-1"}
            parts[part] = "act-\x00-1"
            with self.subTest(part=part), self.assertRaisesRegex(ValueError, part):
                ReceiptKey(**parts)

    def test_parts_must_be_strings(self):
        with self.assertRaises(TypeError):
            ReceiptKey("acme", "record_followup", 7)


# -- version 1 files --------------------------------------------------------------------------

V1_SCHEMA = """
CREATE TABLE receipts (
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


class SqliteMigrationTest(unittest.TestCase):
    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts-v1.sqlite3")
        self.clock = FakeClock()
        connection = sqlite3.connect(self.path)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(V1_SCHEMA)
        rows = [
            ("acme", "record_followup", "done", "sha256:aa", "completed", '{"ok":true}', self.clock.now + TTL_S),
            ("acme", "record_followup", "running", "sha256:bb", "in_flight", None, self.clock.now + LEASE_S),
        ]
        connection.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        connection.execute("PRAGMA user_version = 1")
        connection.commit()
        connection.close()

    def open(self):
        store = SqliteReceiptStore(self.path, ttl_s=TTL_S, lease_s=LEASE_S, clock=self.clock,
                                   monotonic=self.clock.monotonic)
        self.addCleanup(store.close)
        return store

    def test_a_version_1_file_is_migrated_and_keeps_its_receipts(self):
        store = self.open()
        with contextlib.closing(sqlite3.connect(self.path)) as connection:
            self.assertEqual(connection.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        done = ReceiptKey("acme", "record_followup", "done")
        self.assertEqual(store.reserve(done, "sha256:aa").record, {"ok": True})
        self.assertIs(store.reserve(done, "hmac-sha256:" + "c" * 64).status, ReservationStatus.CONFLICT)

    def test_a_version_1_reservation_cannot_be_completed_and_lapses_to_unknown(self):
        store = self.open()
        running = ReceiptKey("acme", "record_followup", "running")
        self.assertIs(store.reserve(running, "sha256:bb").status, ReservationStatus.IN_PROGRESS)
        self.assertFalse(store.complete(running, "", RECORD))
        self.clock.advance(LEASE_S)
        self.assertIs(store.reserve(running, "sha256:bb").status, ReservationStatus.UNKNOWN)
        self.assertTrue(store.resolve(running, "sha256:bb", record=None))
        self.assertIs(store.reserve(running, "sha256:bb").status, ReservationStatus.RESERVED)

    def test_a_migrated_file_gets_a_fingerprint_key_that_stays(self):
        key = self.open().fingerprint_key
        self.assertEqual(self.open().fingerprint_key, key)

    def test_new_reservations_on_a_migrated_file_carry_owners(self):
        store = self.open()
        fresh = ReceiptKey("acme", "record_followup", "fresh")
        owner = store.reserve(fresh, FIRST, lapse=Lapse.TAKEOVER).owner
        self.assertTrue(store.complete(fresh, owner, RECORD))
        self.assertEqual(store.lookup(fresh).record, RECORD)


# -- threads and processes racing one key on one file ----------------------------------------

RACE_KEY = ReceiptKey("tenant-a", "record_followup", "race-1")
RACE_ARGUMENTS = {"ticket_id": "T-9", "note": "exactly once"}
THREADS_IN_MAIN = 16
PROCESSES = 2
THREADS_PER_PROCESS = 4
CONTENDERS = THREADS_IN_MAIN + PROCESSES * THREADS_PER_PROCESS
PATIENCE_S = 30.0  # a hang guard, not a timing assertion


def contend(store, effects_path, start, attempts, label):
    """Reserve the race key; the winner runs the 'handler' (one line in the effects file) and
    completes; every loser retries while the winner is in flight and ends with what it saw.

    The winner's handler waits until every contender has made its first attempt, so all of them
    really race an in-flight reservation (a fast winner would otherwise finish before most start).
    """
    race_fingerprint = fingerprint(RACE_KEY.tool, RACE_ARGUMENTS, key=store.fingerprint_key)
    start.wait(PATIENCE_S)
    first = store.reserve(RACE_KEY, race_fingerprint)
    with attempts.get_lock():
        attempts.value += 1
    if first.status is ReservationStatus.RESERVED:
        give_up_waiting_at = time.monotonic() + PATIENCE_S
        while attempts.value < CONTENDERS and time.monotonic() < give_up_waiting_at:
            time.sleep(0.001)
        with open(effects_path, "a", encoding="utf-8") as effects:
            effects.write(f"follow-up recorded by {label}\n")
        record = {"ok": True, "outcome": "succeeded", "output": {"recorded_by": label}}
        store.complete(RACE_KEY, first.owner, record)
        return (label, first.status.value, first.status.value, record)
    final = first
    give_up_at = time.monotonic() + PATIENCE_S
    while final.status is ReservationStatus.IN_PROGRESS and time.monotonic() < give_up_at:
        time.sleep(0.002)
        final = store.reserve(RACE_KEY, race_fingerprint)
    return (label, first.status.value, final.status.value, final.record)


def race_in_child_process(path, effects_path, start, attempts, results, process_index):
    """Entry point of a spawned contender process: a few threads sharing one store."""
    store = SqliteReceiptStore(path)
    outcomes = []

    def run(thread_index):
        outcomes.append(contend(store, effects_path, start, attempts, f"process-{process_index}-thread-{thread_index}"))

    threads = [threading.Thread(target=run, args=(index,)) for index in range(THREADS_PER_PROCESS)]
    for thread in threads:
        thread.start()
    results.put(("ready", process_index))
    for thread in threads:
        thread.join(PATIENCE_S * 2)
    store.close()
    for outcome in outcomes:
        results.put(("outcome", outcome))
    results.put(("done", process_index))


class SqliteOpeningTest(unittest.TestCase):
    def test_a_store_opens_while_another_process_holds_a_write_lock_on_the_new_file(self):
        # Regression: two processes opening one new file at once. While one creates the schema (a write
        # lock), SQLite refuses the other's switch to WAL at once ("database is locked"), busy timeout or not.
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "receipts.sqlite3")
            holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.addCleanup(holder.close)
            holder.execute("CREATE TABLE setup_in_progress (x)")
            holder.execute("BEGIN IMMEDIATE")
            opened: list = []

            def open_store():
                try:
                    SqliteReceiptStore(path).close()
                    opened.append("opened")
                except sqlite3.OperationalError as error:
                    opened.append(f"refused: {error}")

            opener = threading.Thread(target=open_store)
            opener.start()
            time.sleep(0.2)  # let the opener meet the lock; the holder then finishes its setup
            holder.execute("COMMIT")
            opener.join(30)
            self.assertEqual(opened, ["opened"])


class SqliteRaceTest(unittest.TestCase):
    def test_threads_and_processes_racing_one_key_run_the_handler_exactly_once(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "receipts.sqlite3")
            effects_path = os.path.join(directory, "effects.txt")
            SqliteReceiptStore(path).close()  # create the file so no contender races the schema
            outcomes = self.run_race(path, effects_path)
            with open(effects_path, encoding="utf-8") as effects:
                effect_lines = effects.read().splitlines()

        self.assertEqual(len(outcomes), CONTENDERS)
        winners = [outcome for outcome in outcomes if outcome[1] == "reserved"]
        self.assertEqual(len(winners), 1, "exactly one contender may reserve the key")
        winner_label, _, _, winner_record = winners[0]
        self.assertEqual(effect_lines, [f"follow-up recorded by {winner_label}"])
        for label, first, final, record in outcomes:
            if label != winner_label:
                with self.subTest(contender=label):
                    self.assertEqual(first, "in_progress")
                    self.assertEqual(final, "replay")
                    self.assertEqual(record, winner_record)

    def run_race(self, path, effects_path):
        context = multiprocessing.get_context("spawn")
        start = context.Event()
        attempts = context.Value("i", 0)
        results = context.Queue()
        processes = [
            context.Process(target=race_in_child_process, args=(path, effects_path, start, attempts, results, index))
            for index in range(PROCESSES)
        ]
        for process in processes:
            process.start()
        try:
            outcomes = self.race_in_this_process(path, effects_path, start, attempts, results, processes)
            outcomes.extend(self.collect_child_outcomes(results, processes))
        finally:
            start.set()  # never leave a child waiting, whatever failed
            for process in processes:
                process.join(PATIENCE_S)
                if process.is_alive():
                    process.terminate()
        for process in processes:
            self.assertEqual(process.exitcode, 0)
        return outcomes

    def race_in_this_process(self, path, effects_path, start, attempts, results, processes):
        """16 threads: the even ones share one store, the odd ones each open their own."""
        shared = SqliteReceiptStore(path)
        stores = [shared if index % 2 == 0 else SqliteReceiptStore(path) for index in range(THREADS_IN_MAIN)]
        outcomes = []

        def run(index):
            outcomes.append(contend(stores[index], effects_path, start, attempts, f"main-thread-{index}"))

        threads = [threading.Thread(target=run, args=(index,)) for index in range(THREADS_IN_MAIN)]
        for thread in threads:
            thread.start()
        for _ in range(PROCESSES):  # every child's threads are waiting: start everyone at once
            self.assertEqual(self.receive(results, processes)[0], "ready")
        start.set()
        for thread in threads:
            thread.join(PATIENCE_S * 2)
        for store in set(stores):
            store.close()
        return outcomes

    def receive(self, results, processes):
        """The next message from a child; fails at once (not after the hang guard) if one crashed."""
        give_up_at = time.monotonic() + PATIENCE_S
        while time.monotonic() < give_up_at:
            try:
                return results.get(timeout=0.05)
            except queue.Empty:
                crashed = [process.exitcode for process in processes if process.exitcode not in (None, 0)]
                if crashed:
                    self.fail(f"a contender process crashed with exit code {crashed[0]}")
        self.fail("the contender processes did not answer")

    def collect_child_outcomes(self, results, processes):
        outcomes = []
        finished = 0
        while finished < PROCESSES:
            kind, payload = self.receive(results, processes)
            if kind == "outcome":
                outcomes.append(payload)
            elif kind == "done":
                finished += 1
        return outcomes


if __name__ == "__main__":
    unittest.main()
