"""PostgresReceiptStore: the store conformance suite (tests/store_conformance.py) against a real
PostgreSQL server, three times: on an injected clock and on the database's own clock (the default),
in autocommit, and as one transaction per call (a driver that cannot cancel a statement); then
what only this store promises: tables created once by workers starting together, the fingerprint key
kept in the database, a search_path per deployment, a connection the server dropped, a lost commit,
bounded opening, every DB-API paramstyle.

Needs a server: see tests/postgres_support.py (AGENT_LAB_TEST_POSTGRES_DSN); skips with the reason
otherwise, except the tests that need no server.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import unittest
import warnings
from unittest import mock

from agent_lab import Registry
from agent_lab.stores import postgres as postgres_store
from agent_lab.stores import InMemoryReceiptStore, ReceiptKey, ReceiptStoreUnavailable, ReservationStatus
from agent_lab.stores.postgres import (
    DATABASE_CLOCK,
    POSTGRES_SCHEMA_VERSION,
    PostgresReceiptStore,
    _render,
)

from postgres_support import (
    SKIP_REASON,
    FaultyConnection,
    HookedConnection,
    RowShiftingClock,
    ScratchDatabase,
    faulty,
    hooked,
    uncancellable,
)
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
)
from test_registry_fixtures import WRITER, EffectLog, followup_call, followup_spec

PATIENCE_S = 30.0  # a hang guard, never a timing assertion


class PostgresConformance(DurableApprovalConformance, DurableStoreConformance, PurgeAndApprovalConformance,
                          ReceiptStoreConformance, TaskStoreConformance):
    """The conformance suite on a clock the tests move by hand (`clock=`)."""

    def setUp(self) -> None:
        self.database = ScratchDatabase()
        self.addCleanup(self.database.drop)
        self.schema = self.database.new_schema()
        super().setUp()

    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S, fingerprint_key=None):
        return PostgresReceiptStore(self.database.connect(self.schema), ttl_s=ttl_s, lease_s=lease_s, clock=clock,
                                    monotonic=clock.monotonic,
                                    fingerprint_key=fingerprint_key)

    def use_new_storage(self) -> None:
        self.schema = self.database.new_schema()

    def busy_store(self, store):
        """Another client holds the store's tables (as a long migration or a stuck transaction would)."""
        return self.database.tables_locked(self.schema)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class PostgresInjectedClockTest(ClockStepConformance, PostgresConformance, unittest.TestCase):
    """The conformance suite, and steps of the wall clock, on a clock the tests move by hand."""


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class PostgresDatabaseClockTest(PostgresConformance, unittest.TestCase):
    """The same suite on the database's clock (the default); time moves by moving the stored expiries."""

    def setUp(self) -> None:
        super().setUp()
        self.clock = RowShiftingClock(self.database)

    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S, fingerprint_key=None):
        store = PostgresReceiptStore(self.database.connect(self.schema), ttl_s=ttl_s, lease_s=lease_s,
                                     fingerprint_key=fingerprint_key)
        self.assertTrue(store.uses_database_clock)
        return store


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class PostgresTransactionsTest(ClockStepConformance, PostgresConformance, unittest.TestCase):
    """The same suite for a driver whose connections cannot cancel a statement: the store then runs each
    call as one transaction bounded by the server's timeouts, not statement by statement in autocommit."""

    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S, fingerprint_key=None):
        with self.assertLogs("agent_lab.stores.postgres", "WARNING") as logs:
            store = PostgresReceiptStore(uncancellable(self.database.connect(self.schema)), ttl_s=ttl_s,
                                         lease_s=lease_s, clock=clock, monotonic=clock.monotonic,
                                         fingerprint_key=fingerprint_key)
        self.assertIn("no cancel()", logs.output[0])
        return store


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class PostgresStoreTest(unittest.TestCase):
    def setUp(self) -> None:
        self.database = ScratchDatabase()
        self.addCleanup(self.database.drop)
        self.schema = self.database.new_schema()
        self.clock = FakeClock()

    def open(self, schema=None, *, application_name="agent-lab-tests", **options):
        options.setdefault("clock", self.clock)
        if options["clock"] is self.clock:
            options.setdefault("monotonic", self.clock.monotonic)
        connect = self.database.connect(schema or self.schema, application_name=application_name)
        store = PostgresReceiptStore(connect, **options)
        self.addCleanup(store.close)
        return store

    # -- setting up the tables ----------------------------------------------------------------

    def test_a_store_dropped_without_close_ends_its_watchdog_thread(self):
        store = PostgresReceiptStore(self.database.connect(self.schema))
        store.reserve(KEY, FIRST)  # a watched call: the watchdog's thread starts
        watchdog = store._watchdog._thread
        self.assertIsNotNone(watchdog)
        with warnings.catch_warnings():  # psycopg warns of the connections a dropped store leaves open
            warnings.simplefilter("ignore", ResourceWarning)
            del store
            gc.collect()
        watchdog.join(PATIENCE_S)
        self.assertFalse(watchdog.is_alive(), "the watchdog of a dropped store still runs")

    def test_workers_starting_at_once_on_an_empty_database_all_open_and_share_one_fingerprint_key(self):
        start = threading.Barrier(8)
        keys: list = []
        failures: list = []

        def open_one() -> None:
            start.wait(PATIENCE_S)
            try:
                store = PostgresReceiptStore(self.database.connect(self.schema))
            except Exception as error:  # the assertion below reports it
                failures.append(repr(error))
                return
            keys.append(store.fingerprint_key)
            store.close()

        threads = [threading.Thread(target=open_one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE_S)
        self.assertEqual(failures, [])
        self.assertEqual(len(keys), 8)
        self.assertEqual(len(set(keys)), 1)

    def test_the_tables_live_in_the_connections_schema_and_schemas_are_independent(self):
        other_schema = self.database.new_schema()
        here, there = self.open(), self.open(other_schema)
        self.assertNotEqual(here.fingerprint_key, there.fingerprint_key)
        owner = here.reserve(KEY, FIRST).owner
        here.complete(KEY, owner, RECORD)
        self.assertIsNone(there.lookup(KEY))
        with self.database.admin() as connection:
            tables = {row[0] for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schema,)).fetchall()}
        self.assertEqual(tables, {"agent_lab_receipts", "agent_lab_approvals", "agent_lab_store_meta"})

    def test_a_database_written_by_a_newer_schema_version_is_refused(self):
        self.open().close()
        with self.database.admin() as connection:
            connection.execute(f"UPDATE {self.schema}.agent_lab_store_meta SET value = %s WHERE name = 'schema_version'",
                               (str(POSTGRES_SCHEMA_VERSION + 1),))
        with self.assertRaisesRegex(ValueError, "schema version"):
            self.open()

    # Each a change to the tables the store made, as a DBA's schema tool or a hand edit could make it:
    # (statements run in the store's schema, phrases the refusal names).
    CHANGED_SHAPES = {
        "tenant under a case-insensitive collation": (
            ("CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
             "ALTER TABLE agent_lab_receipts ALTER COLUMN tenant TYPE text COLLATE ci"),
            ("agent_lab_receipts'", "column tenant compares with the collation", "ci (nondeterministic)")),
        "owner token under a case-insensitive collation": (
            ("CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
             "ALTER TABLE agent_lab_receipts ALTER COLUMN owner TYPE text COLLATE ci"),
            ("agent_lab_receipts'", "column owner compares with the collation")),
        "tenant of type citext": (
            ("ALTER TABLE agent_lab_approvals ALTER COLUMN tenant TYPE {citext}",),
            ("agent_lab_approvals'", "column tenant is citext, not text")),
        "key of type varchar": (
            ("ALTER TABLE agent_lab_receipts ALTER COLUMN key TYPE varchar(600)",),
            ("agent_lab_receipts'", "column key is character varying(600), not text")),
        "expiry of type real": (
            ("ALTER TABLE agent_lab_receipts ALTER COLUMN expires_at TYPE real",),
            ("agent_lab_receipts'", "column expires_at is real, not double precision")),
        "a column missing": (
            ("ALTER TABLE agent_lab_receipts DROP COLUMN lapse",),
            ("agent_lab_receipts'", "no column lapse")),
        "no primary key": (
            ("ALTER TABLE agent_lab_approvals DROP CONSTRAINT agent_lab_approvals_pkey",),
            ("agent_lab_approvals'", "primary key is (), not (tenant, approval_id)")),
        "primary key in another order": (
            ("ALTER TABLE agent_lab_receipts DROP CONSTRAINT agent_lab_receipts_pkey",
             "ALTER TABLE agent_lab_receipts ADD PRIMARY KEY (key, tool, tenant)"),
            ("agent_lab_receipts'", "primary key is (key, tool, tenant), not (tenant, tool, key)")),
        "a unique index beside the key": (
            ("CREATE UNIQUE INDEX folded ON agent_lab_receipts (tool, key)",),
            ("agent_lab_receipts'", "unique index ('folded')")),
        "a unique constraint beside the key": (
            ("ALTER TABLE agent_lab_store_meta ADD CONSTRAINT one_value UNIQUE (value)",),
            ("agent_lab_store_meta'", "unique index ('one_value')")),
        "a trigger moving each reservation aside": (
            ("CREATE TABLE aside (LIKE agent_lab_receipts)",
             "CREATE FUNCTION move_aside() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO aside"
             " SELECT NEW.*; DELETE FROM agent_lab_receipts WHERE ctid = NEW.ctid; RETURN NULL; END $$",
             "CREATE TRIGGER aside AFTER INSERT ON agent_lab_receipts FOR EACH ROW EXECUTE FUNCTION move_aside()"),
            ("agent_lab_receipts'", "trigger ('aside')")),
        "a rule": (
            ("CREATE RULE kept AS ON DELETE TO agent_lab_receipts DO INSTEAD NOTHING",),
            ("agent_lab_receipts'", "rule ('kept')")),
        "a child table": (
            ("CREATE TABLE more_receipts () INHERITS (agent_lab_receipts)",),
            ("agent_lab_receipts'", "child table ('more_receipts')")),
        "an unlogged table": (
            ("ALTER TABLE agent_lab_receipts SET UNLOGGED",),
            ("agent_lab_receipts'", "UNLOGGED")),
        "a view": (
            ("DROP TABLE agent_lab_approvals",
             "CREATE VIEW agent_lab_approvals AS SELECT 't'::text AS tenant, 'a'::text AS approval_id,"
             " 0::double precision AS kept_until"),
            ("agent_lab_approvals'", "a view, not an ordinary table")),
        "a table dropped": (
            ("DROP TABLE agent_lab_approvals",),
            ("agent_lab_approvals'", "no such table")),
    }

    def in_schema(self, schema, *statements):
        with self.database.admin() as connection:
            connection.execute(f"SET search_path = {schema}")
            for statement in statements:
                connection.execute(statement)

    def citext(self, schema):
        """The citext type, its extension created in `schema` (dropped with it) unless already there."""
        with self.database.admin() as connection:
            if not connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'citext'").fetchone():
                self.skipTest("the server has no citext extension")
            found = connection.execute("SELECT CAST(extnamespace AS regnamespace) FROM pg_extension"
                                       " WHERE extname = 'citext'").fetchone()
            if found is None:
                connection.execute(f"CREATE EXTENSION citext SCHEMA {schema}")
            return f"{found[0] if found else schema}.citext"

    def test_tables_not_of_the_shape_the_statements_rely_on_are_refused_when_opened(self):
        """CREATE TABLE IF NOT EXISTS keeps whatever table it finds: a tenant column under a
        case-insensitive collation (or of type citext) made tenant ACME replay tenant acme's receipt, and
        a trigger moving each new reservation aside ran one key twice (both reproduced). Each is refused
        when a store opens, naming the table and what is wrong."""
        for shape, (statements, phrases) in self.CHANGED_SHAPES.items():
            with self.subTest(shape=shape):
                schema = self.database.new_schema()
                self.open(schema).close()
                self.in_schema(schema, *(statement.format(citext=self.citext(schema) if "{citext}" in statement
                                                          else None) for statement in statements))
                with self.assertRaises(ValueError) as caught:
                    self.open(schema)
                for phrase in ("not a receipt store this code can use", f"'{schema}.", *phrases):
                    self.assertIn(phrase, str(caught.exception))

    def test_a_case_insensitive_table_made_before_the_first_store_is_refused_and_nothing_is_created(self):
        """The review's reproducer: the table made beforehand, so the store's first opening creates the
        others and then refuses it, in one transaction: it leaves nothing behind."""
        self.in_schema(self.schema, "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2',"
                                    " deterministic = false)",
                       """CREATE TABLE agent_lab_receipts (tenant text COLLATE ci NOT NULL, tool text NOT NULL,
                       key text NOT NULL, fingerprint text NOT NULL, state text NOT NULL, record text,
                       expires_at double precision NOT NULL, owner text, lapse text NOT NULL, full_tenant text,
                       full_tool text, full_key text, PRIMARY KEY (tenant, tool, key))""")
        with self.assertRaisesRegex(ValueError, "agent_lab_receipts'.*column tenant .*ci"):
            self.open()
        with self.database.admin() as connection:
            tables = connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schema,))
            self.assertEqual([row[0] for row in tables.fetchall()], ["agent_lab_receipts"])

    def test_tables_made_by_hand_in_the_stores_shape_open_under_the_database_default_collation(self):
        """Without COLLATE a column takes the database's default collation, which PostgreSQL keeps
        deterministic (equal only when the bytes are): such tables, a plain index and a foreign key
        referencing the receipts (whose triggers are PostgreSQL's own) are used as they are."""
        self.in_schema(self.schema,
                       "CREATE TABLE agent_lab_store_meta (name text PRIMARY KEY, value text NOT NULL)",
                       """CREATE TABLE agent_lab_receipts (tenant text NOT NULL, tool text NOT NULL,
                       key text NOT NULL, fingerprint text NOT NULL, state text NOT NULL, record text,
                       expires_at double precision NOT NULL, owner text, lapse text NOT NULL, full_tenant text,
                       full_tool text, full_key text, PRIMARY KEY (tenant, tool, key))""",
                       "CREATE INDEX by_owner ON agent_lab_receipts (owner)",
                       "CREATE TABLE agent_lab_approvals (tenant text, approval_id text, kept_until double precision,"
                       " PRIMARY KEY (tenant, approval_id))",
                       "CREATE TABLE audit_links (tenant text, tool text, key text, FOREIGN KEY (tenant, tool, key)"
                       " REFERENCES agent_lab_receipts ON DELETE CASCADE)")
        store = self.open()
        owner = store.reserve(KEY, FIRST).owner
        self.assertTrue(store.complete(KEY, owner, RECORD))
        self.assertEqual(self.open().reserve(KEY, FIRST).record, RECORD)

    # The tables as version 1 of the store created them (agent-lab before long keys were digested).
    VERSION_1_TABLES = (
        """CREATE TABLE agent_lab_store_meta (name text COLLATE "C" PRIMARY KEY, value text NOT NULL)""",
        """CREATE TABLE agent_lab_receipts (
            tenant text COLLATE "C" NOT NULL, tool text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL,
            fingerprint text COLLATE "C" NOT NULL, state text NOT NULL CHECK (state IN ('in_flight', 'completed')),
            record text, expires_at double precision NOT NULL, owner text COLLATE "C",
            lapse text NOT NULL CHECK (lapse IN ('unknown', 'takeover')), PRIMARY KEY (tenant, tool, key))""",
        "CREATE INDEX agent_lab_receipts_by_expiry ON agent_lab_receipts (expires_at)",
        """CREATE TABLE agent_lab_approvals (tenant text COLLATE "C" NOT NULL, approval_id text COLLATE "C" NOT NULL,
            kept_until double precision NOT NULL, PRIMARY KEY (tenant, approval_id))""",
        "CREATE INDEX agent_lab_approvals_by_retention ON agent_lab_approvals (kept_until)",
    )

    def test_a_version_1_database_is_migrated_and_its_long_and_prefixed_keys_still_replay(self):
        import json

        from agent_lab.fingerprint import fingerprint_key_id

        long_key = "x" * 3000  # it compresses: version 1 could index it as it is
        legacy = {long_key: RECORD, "~sha256:" + "0" * 64: {"output": "prefixed"}, "act-short": {"output": "short"}}
        with self.database.admin() as connection:
            connection.execute(f"SET search_path = {self.schema}")
            for statement in self.VERSION_1_TABLES:
                connection.execute(statement)
            for name, value in (("schema_version", "1"), ("fingerprint_key", FINGERPRINT_KEY.hex()),
                                ("fingerprint_key_id", fingerprint_key_id(FINGERPRINT_KEY))):
                connection.execute("INSERT INTO agent_lab_store_meta VALUES (%s, %s)", (name, value))
            for key, record in legacy.items():
                connection.execute("INSERT INTO agent_lab_receipts VALUES (%s, %s, %s, %s, 'completed', %s, %s, NULL,"
                                   " 'unknown')", ("acme", "record_followup", key, FIRST,
                                                   json.dumps(record, sort_keys=True, separators=(",", ":")),
                                                   self.clock.now + 3600))
            connection.execute("INSERT INTO agent_lab_receipts VALUES ('acme', 'record_followup', %s, %s, 'in_flight',"
                               " NULL, %s, 'owner-1', 'unknown')", ("y" * 3000, FIRST, self.clock.now - 1))
            connection.execute("INSERT INTO agent_lab_approvals VALUES (%s, 'apr-1', %s)",
                               ("t" * 3000, self.clock.now + 3600))
        store = self.open()
        for key, record in legacy.items():
            with self.subTest(key=key[:20]):
                self.assertEqual(store.reserve(ReceiptKey("acme", "record_followup", key), FIRST).record, record)
        self.assertEqual(store.unresolved(), [ReceiptKey("acme", "record_followup", "y" * 3000)])
        self.assertIs(store.consume_approval("t" * 3000, "apr-1", expires_at=self.clock.now + 60), False)
        with self.database.admin() as connection:
            version = connection.execute(f"SELECT value FROM {self.schema}.agent_lab_store_meta"
                                         " WHERE name = 'schema_version'").fetchone()[0]
            self.assertEqual(version, str(POSTGRES_SCHEMA_VERSION))
            # A worker still running version 1 would store a long key as it is, where this version looks
            # for its digest: the table refuses that row, so such a worker can only fail, never run twice.
            with self.assertRaisesRegex(Exception, "stored"):
                connection.execute(f"INSERT INTO {self.schema}.agent_lab_receipts (tenant, tool, key, fingerprint,"
                                   " state, expires_at, lapse) VALUES ('acme', 'record_followup', %s, %s,"
                                   " 'in_flight', 0, 'unknown')", ("z" * 3000, FIRST))
        self.assertEqual(self.open().fingerprint_key, FINGERPRINT_KEY)  # a second opening changes nothing

    def test_a_given_fingerprint_key_is_not_stored_only_its_id_and_another_key_is_refused(self):
        self.open(fingerprint_key=FINGERPRINT_KEY).close()
        with self.database.admin() as connection:
            stored = dict(connection.execute(f"SELECT name, value FROM {self.schema}.agent_lab_store_meta").fetchall())
        self.assertNotIn("fingerprint_key", stored)
        self.assertNotIn(FINGERPRINT_KEY.hex(), " ".join(stored.values()))
        self.assertEqual(self.open(fingerprint_key=FINGERPRINT_KEY).fingerprint_key, FINGERPRINT_KEY)
        with self.assertRaisesRegex(ValueError, "fingerprint_key"):
            self.open()
        with self.assertRaisesRegex(ValueError, "fingerprint_key"):
            self.open(fingerprint_key=b"another key, 32 bytes long......")

    def test_record_text_and_keys_are_stored_as_given_and_ordered_by_code_point(self):
        keys = [ReceiptKey("tenant-a", "tool", name) for name in ("Zoë", "zoe", "Ab", "a b", "€", "😀")]
        store = self.open()
        for key in keys:
            store.reserve(key, FIRST)
        self.clock.advance(store.lease_s)
        self.assertEqual(store.unresolved(), sorted(keys, key=lambda key: key.key))

    def test_on_the_database_clock_a_lease_ends_lease_s_after_the_servers_own_now(self):
        store = self.open(clock=None, lease_s=600)
        store.reserve(KEY, FIRST)
        with self.database.admin() as connection:
            [(lease_left,)] = connection.execute(
                f"SELECT expires_at - date_part('epoch', statement_timestamp()) FROM {self.schema}.agent_lab_receipts"
            ).fetchall()
        self.assertGreater(lease_left, 500)  # 600 s from the server's now, minus however long this test took
        self.assertLessEqual(lease_left, 600)

    # -- connections ----------------------------------------------------------------------------

    def test_on_the_database_clock_a_server_clock_stepped_past_the_ttl_expires_nothing_early(self):
        store = PostgresReceiptStore(hooked(self.database.connect(self.schema)), lease_s=LEASE_S, ttl_s=TTL_S)
        self.addCleanup(store.close)
        self.addCleanup(setattr, HookedConnection, "rewrite", None)
        self.assertTrue(store.complete(KEY, store.reserve(KEY, FIRST).owner, RECORD))
        running = ReceiptKey(KEY.tenant, KEY.tool, "running")
        store.reserve(running, FIRST)
        HookedConnection.step_database_clock(TTL_S * 864 + 1)  # the server's clock jumps a day ahead
        answer = store.reserve(KEY, FIRST)
        self.assertEqual((answer.status, answer.record), (ReservationStatus.REPLAY, RECORD))
        self.assertIs(store.lookup(running).status, ReservationStatus.IN_PROGRESS)
        self.assertEqual(store.unresolved(), [])
        self.assertEqual(store.purge(), 0)
        # A store opened after the step takes the server's clock as it finds it (documented): the guard
        # covers the stores that were open before it.
        opened_after = PostgresReceiptStore(hooked(self.database.connect(self.schema)))
        self.addCleanup(opened_after.close)
        self.assertIsNone(opened_after.lookup(KEY))

    def test_a_pooled_connection_the_server_closed_is_replaced_without_failing_the_next_call(self):
        store = self.open(application_name="agent-lab-idle-victim")
        store.reserve(KEY, FIRST)
        self.assertEqual(self.database.terminate("agent-lab-idle-victim"), 1)
        self.assertIs(store.reserve(KEY, FIRST).status, ReservationStatus.IN_PROGRESS)

    def test_a_connection_killed_mid_call_fails_that_call_as_unavailable_and_the_store_recovers(self):
        store = self.open(application_name="agent-lab-busy-victim")
        answers: list = []
        with self.database.tables_locked(self.schema):
            caller = threading.Thread(target=lambda: answers.append(_outcome(
                lambda: store.reserve(KEY, FIRST, timeout_s=PATIENCE_S))))
            caller.start()
            self.database.wait_for("agent-lab-busy-victim", waiting_for_lock=True)
            self.assertEqual(self.database.terminate("agent-lab-busy-victim", waiting_for_lock=True), 1)
            caller.join(PATIENCE_S)
        self.assertEqual(answers, ["ReceiptStoreUnavailable"])
        self.assertIsNone(store.lookup(KEY))  # the killed transaction changed nothing
        self.assertIs(store.reserve(KEY, FIRST).status, ReservationStatus.RESERVED)

    def test_a_reservation_whose_commit_was_lost_is_freed_by_the_stores_next_call(self):
        store = PostgresReceiptStore(faulty(self.database.connect(self.schema)), clock=self.clock,
                                     monotonic=self.clock.monotonic)
        self.addCleanup(store.close)
        FaultyConnection.lose_commits = 1
        self.addCleanup(setattr, FaultyConnection, "lose_commits", 0)
        with self.assertRaises(ReceiptStoreUnavailable):
            store.reserve(KEY, FIRST)
        observer = self.open()
        self.assertIs(observer.lookup(KEY).status, ReservationStatus.IN_PROGRESS)  # it did commit
        self.assertIsNone(store.lookup(ReceiptKey("t", "tool", "anything")))  # the next call frees it
        self.assertIsNone(observer.lookup(KEY))
        self.assertIs(store.reserve(KEY, FIRST).status, ReservationStatus.RESERVED)

    def orphan_then_slow_release(self, release_takes_s: float, wrap=hooked) -> tuple:
        """A store (in a schema of its own) with one reservation whose commit was lost (freed at the start
        of its next call), whose release then takes `release_takes_s` of the call's time (moved on by
        hand, as if the row was locked that long); and the statements its calls start. `wrap`: hooked
        (autocommit, cut by the watchdog) or uncancellable (one transaction, bounded by the server)."""
        schema = self.database.new_schema()
        store = PostgresReceiptStore(wrap(self.database.connect(schema)), clock=self.clock,
                                     monotonic=self.clock.monotonic)
        self.addCleanup(store.close)
        FaultyConnection.lose_commits = 1
        self.addCleanup(setattr, FaultyConnection, "lose_commits", 0)
        with self.assertRaises(ReceiptStoreUnavailable):
            store.reserve(KEY, FIRST)
        shift = [0.0]
        started: list = []

        def before_statement(sql: str, connection) -> None:
            started.append(sql.split(" ", 1)[0])
            if sql.startswith("DELETE FROM agent_lab_receipts") and "owner" in sql:  # the orphan's release
                shift[0] += release_takes_s

        patcher = mock.patch.object(postgres_store, "_monotonic", lambda: time.monotonic() + shift[0])
        patcher.start()
        self.addCleanup(patcher.stop)
        HookedConnection.before_statement = before_statement
        self.addCleanup(setattr, HookedConnection, "before_statement", None)
        return store, started, schema

    def test_a_call_whose_orphan_release_used_up_its_time_runs_none_of_its_own_statements(self):
        for wrap in (hooked, uncancellable):
            with self.subTest(connections=wrap.__name__), self.opening_logs(wrap):
                store, started, schema = self.orphan_then_slow_release(30.0, wrap)
                other = ReceiptKey("t", "tool", "other")
                with self.assertRaises(ReceiptStoreUnavailable):
                    store.reserve(other, FIRST, timeout_s=30.0)
                self.assertNotIn("INSERT", started)
                HookedConnection.before_statement = None
                self.assertIsNone(store.lookup(other))
                self.assertIsNone(self.open(schema).lookup(KEY))  # the orphan was freed by that next call after all

    def test_after_an_orphan_release_the_calls_own_statements_wait_only_for_what_is_left(self):
        """The release takes 29 s of a 30 s call; then the call's own INSERT waits for another
        transaction inserting the same key: it gives up 1 s later, at the call's deadline, whether the
        watchdog cuts it (autocommit) or the server's lock_timeout does (a transaction); it does not
        wait 30 s afresh (the other transaction rolls back by then, and the insert would succeed)."""
        for wrap in (hooked, uncancellable):
            with self.subTest(connections=wrap.__name__), self.opening_logs(wrap):
                store, started, schema = self.orphan_then_slow_release(29.0, wrap)
                other = ReceiptKey("t", "tool", "other")
                rival = self.database.admin()
                self.addCleanup(rival.close)
                release = threading.Timer(PATIENCE_S, lambda: rival.execute("ROLLBACK"))
                self.addCleanup(release.cancel)
                hook = HookedConnection.before_statement

                def insert_meets_a_rival(sql: str, connection) -> None:
                    if sql.startswith("INSERT INTO agent_lab_receipts") and not release.is_alive():
                        rival.execute("BEGIN")
                        rival.execute(f"INSERT INTO {schema}.agent_lab_receipts (tenant, tool, key, fingerprint,"
                                      " state, expires_at, lapse) VALUES ('t', 'tool', 'other', 'x', 'in_flight', 0,"
                                      " 'unknown')")
                        release.start()
                    hook(sql, connection)

                HookedConnection.before_statement = insert_meets_a_rival
                with self.assertRaises(ReceiptStoreUnavailable):
                    store.reserve(other, FIRST, timeout_s=30.0)
                self.assertTrue(release.is_alive(), "the reserve waited for the rival past its deadline")
                release.cancel()
                rival.execute("ROLLBACK")
                HookedConnection.before_statement = None
                self.assertIn("INSERT", started)
                self.assertIs(store.reserve(other, FIRST).status, ReservationStatus.RESERVED)

    def test_a_receipt_is_one_statement_to_reserve_and_one_to_complete_as_in_raw_sql(self):
        """In autocommit (a driver that can cancel a statement) each of the two calls of a receipt is one
        statement, one round trip; a driver that cannot runs each call as a transaction bounded by the
        server's timeouts (its timeouts, then the statement, between the driver's BEGIN and COMMIT)."""
        for wrap, expected in ((hooked, [["INSERT"], ["UPDATE"]]),
                               (uncancellable, [["SELECT", "INSERT"], ["SELECT", "UPDATE"]])):
            with self.subTest(connections=wrap.__name__), self.opening_logs(wrap):
                store = PostgresReceiptStore(wrap(self.database.connect(self.database.new_schema())))
                self.addCleanup(store.close)
                started: list = []
                HookedConnection.before_statement = lambda sql, connection: started.append(sql.split(" ", 1)[0])
                self.addCleanup(setattr, HookedConnection, "before_statement", None)
                calls = []
                for number in range(3):
                    key = ReceiptKey("t", "tool", f"key-{number}")
                    del started[:]
                    owner = store.reserve(key, FIRST).owner
                    calls.append(list(started))
                    del started[:]
                    self.assertTrue(store.complete(key, owner, RECORD))
                    calls.append(list(started))
                HookedConnection.before_statement = None
                self.assertEqual(calls, expected * 3)

    def opening_logs(self, wrap):
        """A store on uncancellable connections warns when it opens; one on others says nothing."""
        if wrap is uncancellable:
            return self.assertLogs("agent_lab.stores.postgres", "WARNING")
        return contextlib.nullcontext()

    def test_an_unreachable_server_is_unavailable_not_an_exception_of_the_driver(self):
        import psycopg

        def refused():
            return psycopg.connect("host=127.0.0.1 port=1 connect_timeout=2")

        with self.assertRaises(ReceiptStoreUnavailable):
            PostgresReceiptStore(refused, open_timeout_s=PATIENCE_S)

    def test_a_call_waits_for_a_free_pooled_connection_only_within_its_timeout(self):
        store = self.open(pool_size=1, application_name="agent-lab-one-connection")
        with self.database.tables_locked(self.schema):
            holder = threading.Thread(target=lambda: _outcome(lambda: store.reserve(KEY, FIRST, timeout_s=PATIENCE_S)))
            holder.start()
            self.database.wait_for("agent-lab-one-connection", waiting_for_lock=True)
            with self.assertRaisesRegex(ReceiptStoreUnavailable, "no connection"):
                store.lookup(KEY, timeout_s=0.05)
        holder.join(PATIENCE_S)
        self.assertIs(store.lookup(KEY).status, ReservationStatus.IN_PROGRESS)


class PostgresOpeningWithoutAServerTest(unittest.TestCase):
    """Opening is bounded whatever the driver does (no server needed)."""

    def test_a_connect_that_hangs_is_given_up_within_the_open_timeout(self):
        release = threading.Event()
        self.addCleanup(release.set)

        def hangs():
            release.wait(PATIENCE_S)
            raise OSError("never connected")

        with self.assertRaisesRegex(ReceiptStoreUnavailable, "within the timeout"):
            PostgresReceiptStore(hangs, open_timeout_s=0.05)

    def test_a_connect_that_fails_is_unavailable(self):
        def fails():
            raise OSError("connection refused")

        with self.assertRaisesRegex(ReceiptStoreUnavailable, "could not connect"):
            PostgresReceiptStore(fails)

    def test_options_are_checked_before_connecting(self):
        for options in ({"ttl_s": 0}, {"lease_s": float("nan")}, {"pool_size": 0}, {"pool_size": True},
                        {"paramstyle": "percent"}, {"open_timeout_s": -1}):
            with self.subTest(**options), self.assertRaises(ValueError):
                PostgresReceiptStore(_never_called, **options)
        with self.assertRaises(TypeError):
            PostgresReceiptStore("host=localhost")  # a DSN is not a connection factory
        with self.assertRaises(TypeError):
            PostgresReceiptStore(_never_called, clock=1_000_000.0)


def _never_called():
    raise AssertionError("the store connected before checking its options")


class ParamstyleTest(unittest.TestCase):
    """The store's SQL is written once with :name placeholders and rendered for the driver's style."""

    SQL = "UPDATE t SET a = :a, b = :b WHERE c = :a AND d::text = 'x' AND e = CAST(:now AS double precision)"
    VALUES = {"a": 1, "b": 2, "now": 3.5, "unused": 9}

    def test_every_db_api_paramstyle_gets_its_own_placeholders_in_order(self):
        for style, sql, parameters in (
            ("format", "a = %s, b = %s WHERE c = %s", (1, 2, 1, 3.5)),
            ("pyformat", "a = %s, b = %s WHERE c = %s", (1, 2, 1, 3.5)),
            ("qmark", "a = ?, b = ? WHERE c = ?", (1, 2, 1, 3.5)),
            ("numeric", "a = :1, b = :2 WHERE c = :3", (1, 2, 1, 3.5)),
            ("named", "a = :a, b = :b WHERE c = :a", {"a": 1, "b": 2, "now": 3.5}),
        ):
            with self.subTest(paramstyle=style):
                statement = _render(self.SQL, style)
                self.assertIn(sql, statement.sql)
                self.assertIn("d::text = 'x'", statement.sql)  # a cast is not a placeholder
                self.assertEqual(statement.parameters(self.VALUES), parameters)

    def test_the_database_clock_is_the_statements_own_time(self):
        self.assertEqual(DATABASE_CLOCK, "date_part('epoch', statement_timestamp())")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class RegistryOnPostgresTest(unittest.TestCase):
    """The registry on the PostgreSQL store: what several hosts share."""

    def setUp(self) -> None:
        self.database = ScratchDatabase()
        self.addCleanup(self.database.drop)
        self.schema = self.database.new_schema()

    def registry(self, effects: EffectLog, **spec_options) -> Registry:
        store = PostgresReceiptStore(self.database.connect(self.schema), lease_s=60)
        registry = Registry(receipts=store)
        registry.register(followup_spec(**spec_options), effects.record_followup)
        self.addCleanup(store.close)
        self.addCleanup(registry.close)
        return registry

    def test_two_hosts_replay_each_others_receipts(self):
        effects = EffectLog()
        first, second = self.registry(effects), self.registry(effects)
        done = first.invoke(followup_call(), actor=WRITER)
        again = second.invoke(followup_call(), actor=WRITER)
        self.assertTrue(done.ok)
        self.assertTrue(again.replayed)
        self.assertEqual(again.output, done.output)
        self.assertEqual(len(effects.effects), 1)

    def test_a_single_use_approval_spent_on_one_host_is_spent_on_every_host(self):
        effects = EffectLog()
        options = dict(approval="always", single_use_approval=True, idempotency_key=None, effect="destructive")
        first, second = self.registry(effects, **options), self.registry(effects, **options)
        call = followup_call()
        approval = first.approval_for(call, actor=WRITER, approver="manager-7")
        self.assertTrue(first.invoke(call, actor=WRITER, approval=approval).ok)
        reused = second.invoke(call, actor=WRITER, approval=approval)
        self.assertEqual(reused.error.code, "approval_used")
        self.assertEqual(len(effects.effects), 1)

    def test_a_receipt_whose_commit_answer_was_lost_is_confirmed_by_the_retry_and_never_logged_as_fenced(self):
        store = PostgresReceiptStore(faulty(self.database.connect(self.schema)), lease_s=60)
        self.addCleanup(store.close)
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        effects = EffectLog()

        def write_then_lose_the_receipts_answer(arguments):
            FaultyConnection.lose_commits = 1  # the complete commits, then its connection drops
            return effects.record_followup(arguments)

        self.addCleanup(setattr, FaultyConnection, "lose_commits", 0)
        registry.register(followup_spec(), write_then_lose_the_receipts_answer)
        with self.assertLogs("agent_lab.leases", "INFO") as logs:
            first = registry.invoke(followup_call(), actor=WRITER)
            self.assertTrue(registry.wait_settled(PATIENCE_S))  # the keeper's retry on a new connection
        self.assertTrue(first.ok)
        self.assertIn("failed to complete", "\n".join(logs.output))
        self.assertNotIn("fenced", "\n".join(logs.output))  # it landed: the retry recognised its own receipt
        self.assertNotIn("refused", "\n".join(logs.output))
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(again.replayed)
        self.assertEqual(again.output, first.output)
        self.assertEqual(len(effects.effects), 1)

    def test_a_single_use_approval_runs_once_whatever_the_hosts_clocks_say_against_the_databases(self):
        shift = [0.0]  # moved on with the rows (RowShiftingClock): the hosts' clocks keep their offsets
        store = PostgresReceiptStore(self.database.connect(self.schema), lease_s=60, ttl_s=1)  # the database's clock
        self.addCleanup(store.close)
        effects = EffectLog()
        hosts = {}
        for name, offset_s in (("lagging", -5.0), ("ahead", 5.0), ("in step", 0.0)):  # 5 s is more than the ttl
            registry = Registry(receipts=store, clock=lambda offset_s=offset_s: time.time() + offset_s + shift[0])
            self.addCleanup(registry.close)
            registry.register(followup_spec(approval="always", single_use_approval=True, idempotency_key=None),
                              effects.record_followup)
            hosts[name] = registry
        call = followup_call()
        approval = hosts["in step"].approval_for(call, actor=WRITER, approver="manager-7", ttl_s=10)
        with self.assertLogs("agent_lab.registry", "WARNING"):
            self.assertEqual(hosts["lagging"].invoke(call, actor=WRITER, approval=approval).error.code, "internal_error")
        self.assertIsNone(hosts["ahead"].invoke(call, actor=WRITER, approval=approval).error)  # the lagging spent none
        answers = []
        for _ in range(10):  # a retry every second (moved on by hand) while the approval is valid in step
            RowShiftingClock(self.database).advance(1)
            shift[0] += 1
            error = hosts["in step"].invoke(call, actor=WRITER, approval=approval).error
            answers.append("ran" if error is None else error.code)
        self.assertEqual(answers, ["approval_used"] * 9 + ["approval_expired"])
        self.assertEqual(len(effects.effects), 1)

    def test_a_3000_character_idempotency_key_runs_once_and_replays_on_every_store(self):
        import os
        import tempfile

        from agent_lab.stores import SqliteReceiptStore

        from store_conformance import random_text

        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        stores = {"memory": InMemoryReceiptStore(lease_s=60),
                  "sqlite": SqliteReceiptStore(os.path.join(directory.name, "receipts.sqlite3"), lease_s=60),
                  "postgres": PostgresReceiptStore(self.database.connect(self.schema), lease_s=60)}
        long_key = random_text(3000, seed=3)
        for name, store in stores.items():
            self.addCleanup(store.close)
            effects = EffectLog()
            registry = Registry(receipts=store)
            self.addCleanup(registry.close)
            registry.register(followup_spec(), effects.record_followup)
            with self.subTest(store=name):
                first = registry.invoke(followup_call(action_id=long_key), actor=WRITER)
                again = registry.invoke(followup_call(action_id=long_key), actor=WRITER)
                self.assertTrue(first.ok, first.error)
                self.assertTrue(again.replayed)
                self.assertEqual(len(effects.effects), 1)

    def test_an_idempotency_key_with_nul_is_invalid_arguments_on_every_store(self):
        stores = {"memory": InMemoryReceiptStore(),
                  "postgres": PostgresReceiptStore(self.database.connect(self.schema))}
        for name, store in stores.items():
            self.addCleanup(store.close)
            registry = Registry(receipts=store)
            self.addCleanup(registry.close)
            registry.register(followup_spec(), EffectLog().record_followup)
            with self.subTest(store=name):
                result = registry.invoke(followup_call(action_id="act-\x00-1"), actor=WRITER)
                self.assertEqual(result.error.code, "invalid_arguments")
                self.assertEqual(result.error.details["violations"][0]["instance_path"], "/action_id")
                self.assertFalse(result.error.retryable)


def _outcome(call) -> str:
    try:
        call()
    except Exception as error:
        return type(error).__name__
    return "ok"


if __name__ == "__main__":
    unittest.main()
