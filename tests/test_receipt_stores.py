"""Receipt stores: one contract, run against the in-memory and the SQLite store, plus what only
SQLite promises (a restart keeps receipts; threads and processes racing one key get one winner)."""

import multiprocessing
import os
import queue
import sqlite3
import stat
import tempfile
import threading
import time
import unittest

from agent_lab.idempotency import (
    SCHEMA_VERSION,
    SWEEP_CHUNK,
    SWEEP_EVERY,
    InMemoryReceiptStore,
    NotCanonicalJSON,
    ReceiptKey,
    ReceiptStore,
    Reservation,
    ReservationStatus,
    SqliteReceiptStore,
    fingerprint,
)

TTL_S = 100.0
LEASE_S = 10.0
KEY = ReceiptKey("tenant-a", "record_followup", "action-1")
FIRST = fingerprint("record_followup", {"ticket_id": "T-1", "note": "call back"})
SECOND = fingerprint("record_followup", {"ticket_id": "T-1", "note": "something else"})
RECORD = {"ok": True, "outcome": "succeeded", "output": {"followup_id": "F-1", "note": "Zoë ☎", "tags": ["a", "b"]}}
OTHER_RECORD = {"ok": True, "outcome": "succeeded", "output": {"followup_id": "F-2"}}


class FakeClock:
    """A clock the test moves by hand, so expiry is tested without sleeping."""

    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class ReceiptStoreContract:
    """The behaviour every ReceiptStore promises.  Subclasses say how to build one."""

    def make_store(self, clock):
        raise NotImplementedError

    def setUp(self):
        self.clock = FakeClock()
        self.store = self.make_store(self.clock)
        self.addCleanup(self.store.close)

    def assertStatus(self, reservation, status, fingerprint_held):
        self.assertIsInstance(reservation, Reservation)
        self.assertIs(reservation.status, status)
        self.assertEqual(reservation.fingerprint, fingerprint_held)

    # -- shape --------------------------------------------------------------------------------

    def test_the_store_satisfies_the_receipt_store_protocol(self):
        self.assertIsInstance(self.store, ReceiptStore)

    # -- reserve ------------------------------------------------------------------------------

    def test_a_free_key_is_reserved_for_the_caller(self):
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.RESERVED, FIRST)

    def test_the_same_call_while_in_flight_is_in_progress(self):
        self.store.reserve(KEY, FIRST)
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.IN_PROGRESS, FIRST)
        self.assertIsNone(answer.record)

    def test_other_arguments_while_in_flight_conflict(self):
        self.store.reserve(KEY, FIRST)
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)

    def test_the_same_call_after_completion_replays_the_identical_record(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    def test_other_arguments_after_completion_conflict_without_revealing_the_record(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        answer = self.store.reserve(KEY, SECOND)
        self.assertStatus(answer, ReservationStatus.CONFLICT, FIRST)
        self.assertIsNone(answer.record)

    def test_a_replayed_record_cannot_be_corrupted_by_its_reader(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.store.reserve(KEY, FIRST).record["output"]["tags"].append("mutated")
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)

    def test_a_record_is_stored_as_canonical_json(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, {"output": {"count": 3.0, "ratio": 0.5}})
        self.assertEqual(self.store.reserve(KEY, FIRST).record, {"output": {"count": 3, "ratio": 0.5}})

    def test_a_record_that_is_not_json_is_refused_and_nothing_is_stored(self):
        self.store.reserve(KEY, FIRST)
        with self.assertRaises(NotCanonicalJSON):
            self.store.complete(KEY, FIRST, {"output": float("nan")})
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)

    def test_racing_threads_get_exactly_one_reservation(self):
        start = threading.Barrier(16)
        answers = []

        def contend():
            start.wait(timeout=10)
            answers.append(self.store.reserve(KEY, FIRST).status)

        threads = [threading.Thread(target=contend) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        self.assertEqual(len(answers), 16)
        self.assertEqual(answers.count(ReservationStatus.RESERVED), 1)
        self.assertEqual(answers.count(ReservationStatus.IN_PROGRESS), 15)

    # -- release ------------------------------------------------------------------------------

    def test_release_frees_the_key_for_a_corrected_retry(self):
        self.store.reserve(KEY, FIRST)
        self.store.release(KEY, FIRST)
        self.assertIsNone(self.store.lookup(KEY))
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.RESERVED, SECOND)

    def test_release_with_other_arguments_leaves_the_reservation(self):
        self.store.reserve(KEY, FIRST)
        self.store.release(KEY, SECOND)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)

    def test_release_never_drops_a_completed_receipt(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.store.release(KEY, FIRST)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    def test_release_of_a_free_key_is_harmless(self):
        self.store.release(KEY, FIRST)
        self.assertIsNone(self.store.lookup(KEY))

    # -- expiry -------------------------------------------------------------------------------

    def test_a_reservation_holds_until_its_lease_ends(self):
        self.store.reserve(KEY, FIRST)
        self.clock.advance(LEASE_S - 0.5)
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)

    def test_an_abandoned_reservation_can_be_taken_after_its_lease(self):
        self.store.reserve(KEY, FIRST)
        self.clock.advance(LEASE_S)
        self.assertIsNone(self.store.lookup(KEY))
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.RESERVED, SECOND)

    def test_a_receipt_replays_until_its_ttl_ends(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.clock.advance(TTL_S - 0.5)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    def test_an_expired_receipt_is_treated_as_absent(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.clock.advance(TTL_S)
        self.assertIsNone(self.store.lookup(KEY))
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.RESERVED, SECOND)

    def test_the_receipt_ttl_counts_from_completion_not_from_reservation(self):
        self.store.reserve(KEY, FIRST)
        self.clock.advance(LEASE_S - 1)
        self.store.complete(KEY, FIRST, RECORD)
        self.clock.advance(TTL_S - 1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    # -- late and repeated completion ---------------------------------------------------------

    def test_a_late_completion_after_the_lease_still_stores_its_result(self):
        self.store.reserve(KEY, FIRST)
        self.clock.advance(LEASE_S * 3)
        self.store.complete(KEY, FIRST, RECORD)
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    def test_a_late_completion_leaves_a_key_now_held_by_other_arguments(self):
        self.store.reserve(KEY, FIRST)
        self.clock.advance(LEASE_S)
        self.store.reserve(KEY, SECOND)
        self.store.complete(KEY, FIRST, RECORD)  # must not raise
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, SECOND)
        self.store.complete(KEY, SECOND, OTHER_RECORD)
        self.assertEqual(self.store.reserve(KEY, SECOND).record, OTHER_RECORD)

    def test_a_late_completion_leaves_a_receipt_of_other_arguments(self):
        self.store.reserve(KEY, FIRST)
        self.clock.advance(LEASE_S)
        self.store.reserve(KEY, SECOND)
        self.store.complete(KEY, SECOND, OTHER_RECORD)
        self.store.complete(KEY, FIRST, RECORD)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.CONFLICT, SECOND)

    def test_a_second_completion_keeps_the_first_receipt(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.store.complete(KEY, FIRST, OTHER_RECORD)
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)

    def test_a_completion_without_a_reservation_is_stored(self):
        self.store.complete(KEY, FIRST, RECORD)
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)

    # -- lookup -------------------------------------------------------------------------------

    def test_lookup_of_an_unknown_key_is_none_and_reserves_nothing(self):
        self.assertIsNone(self.store.lookup(KEY))
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.RESERVED, FIRST)

    def test_lookup_reports_an_in_flight_call(self):
        self.store.reserve(KEY, FIRST)
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, FIRST)

    def test_lookup_reports_a_completed_receipt_with_its_record(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        answer = self.store.lookup(KEY)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    # -- isolation ----------------------------------------------------------------------------

    def test_one_tenant_never_sees_another_tenants_receipt(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        other_tenant = ReceiptKey("tenant-b", KEY.tool, KEY.key)
        self.assertIsNone(self.store.lookup(other_tenant))
        self.assertStatus(self.store.reserve(other_tenant, FIRST), ReservationStatus.RESERVED, FIRST)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    def test_the_same_key_on_another_tool_is_a_different_receipt(self):
        self.store.reserve(KEY, FIRST)
        other_tool = ReceiptKey(KEY.tenant, "close_ticket", KEY.key)
        self.assertStatus(self.store.reserve(other_tool, SECOND), ReservationStatus.RESERVED, SECOND)

    # -- construction -------------------------------------------------------------------------

    def test_durations_must_be_positive_finite_seconds(self):
        for bad in (0, -1, float("nan"), float("inf"), True, "10"):
            with self.subTest(ttl_s=bad), self.assertRaises(ValueError):
                self.make_store(self.clock, ttl_s=bad)
            with self.subTest(lease_s=bad), self.assertRaises(ValueError):
                self.make_store(self.clock, lease_s=bad)

    def test_closing_twice_is_harmless(self):
        self.store.close()
        self.store.close()


class InMemoryReceiptStoreTest(ReceiptStoreContract, unittest.TestCase):
    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S):
        return InMemoryReceiptStore(ttl_s=ttl_s, lease_s=lease_s, clock=clock)


class SqliteReceiptStoreTest(ReceiptStoreContract, unittest.TestCase):
    def setUp(self):
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")
        super().setUp()

    def make_store(self, clock, *, ttl_s=TTL_S, lease_s=LEASE_S, synchronous="NORMAL"):
        return SqliteReceiptStore(self.path, ttl_s=ttl_s, lease_s=lease_s, clock=clock, synchronous=synchronous)

    def test_a_receipt_replays_after_a_restart(self):
        self.store.reserve(KEY, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.store.close()
        reopened = self.make_store(self.clock)
        self.addCleanup(reopened.close)
        answer = reopened.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    def test_an_in_flight_reservation_survives_a_restart_until_its_lease_ends(self):
        self.store.reserve(KEY, FIRST)
        self.store.close()
        reopened = self.make_store(self.clock)
        self.addCleanup(reopened.close)
        self.assertStatus(reopened.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)
        self.clock.advance(LEASE_S)
        self.assertStatus(reopened.reserve(KEY, FIRST), ReservationStatus.RESERVED, FIRST)

    def test_two_stores_on_one_file_see_each_others_receipts(self):
        second = self.make_store(self.clock)
        self.addCleanup(second.close)
        self.store.reserve(KEY, FIRST)
        self.assertStatus(second.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)
        self.store.complete(KEY, FIRST, RECORD)
        self.assertEqual(second.reserve(KEY, FIRST).record, RECORD)

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

    def test_an_unknown_synchronous_level_is_refused(self):
        with self.assertRaises(ValueError):
            self.make_store(self.clock, synchronous="NORMAL; DROP TABLE receipts")

    def test_every_synchronous_level_opens(self):
        for level in ("off", "NORMAL", "FULL", "EXTRA"):
            with self.subTest(level=level):
                self.make_store(self.clock, synchronous=level).close()

    def test_expired_rows_are_purged_from_the_file_by_later_reserves(self):
        expired_count = SWEEP_CHUNK + SWEEP_CHUNK // 2  # more than one sweep chunk
        for index in range(expired_count):
            old = ReceiptKey("tenant-a", "record_followup", f"a-old-{index:04d}")
            self.store.reserve(old, FIRST)
            self.store.complete(old, FIRST, RECORD)
        self.clock.advance(TTL_S)
        enough_reserves_for_a_full_pass = (expired_count // SWEEP_CHUNK + 2) * SWEEP_EVERY
        for index in range(enough_reserves_for_a_full_pass):
            self.store.reserve(ReceiptKey("tenant-a", "record_followup", f"b-new-{index:04d}"), FIRST)
        connection = sqlite3.connect(self.path)
        self.addCleanup(connection.close)
        remaining = connection.execute("SELECT COUNT(*) FROM receipts WHERE key LIKE 'a-old-%'").fetchone()[0]
        live = connection.execute("SELECT COUNT(*) FROM receipts WHERE key LIKE 'b-new-%'").fetchone()[0]
        self.assertEqual(remaining, 0)
        self.assertEqual(live, enough_reserves_for_a_full_pass)

    def test_a_closed_store_refuses_to_work(self):
        self.store.close()
        with self.assertRaises(ValueError):
            self.store.reserve(KEY, FIRST)


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
    race_fingerprint = fingerprint(RACE_KEY.tool, RACE_ARGUMENTS)
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
        store.complete(RACE_KEY, race_fingerprint, record)
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
