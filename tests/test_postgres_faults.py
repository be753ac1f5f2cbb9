"""Faults against a real PostgreSQL server, end to end through the registry: one key, one effect.

* 4 processes x 8 threads race the same keys: exactly one effect per key, every contender ends with
  the winner's result;
* the server kills (pg_terminate_backend) the store's connection in the middle of a reserve, and of a
  complete: the call that met it answers a retryable error or keeps its result, the handler never runs
  twice, and the store carries on on a new connection;
* a worker is killed (SIGKILL) between its effect and its receipt: the key is in progress until the
  lease lapses, then `outcome_unknown` for everyone until it is resolved as documented.

Needs a server: see tests/postgres_support.py (AGENT_LAB_TEST_POSTGRES_DSN).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import random
import signal
import tempfile
import threading
import time
import unittest
from typing import Any, Dict, List, Tuple

from agent_lab import Registry
from agent_lab.errors import NextAction, Outcome
from agent_lab.leases import ReceiptNote
from agent_lab.stores import PostgresReceiptStore, ReceiptKey, ReservationStatus

from postgres_support import DSN, SKIP_REASON, MissingStandby, RowShiftingClock, ScratchDatabase
from test_registry_fixtures import WRITER, ListAuditSink, followup_call, followup_spec

PATIENCE_S = 60.0  # a hang guard, never a timing assertion
PROCESSES = 4
THREADS_PER_PROCESS = 8
RACE_KEYS = 20


def append_effect(path: str, line: str) -> None:
    """One effect: one line appended with a single write (atomic for O_APPEND on a local file)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, (line + "\n").encode("utf-8"))
    finally:
        os.close(descriptor)


def read_effects(path: str) -> List[str]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as effects:
        return effects.read().splitlines()


def connect_factory(schema: str, application_name: str) -> Any:
    import functools

    import psycopg

    return functools.partial(psycopg.connect, DSN, options=f"-c search_path={schema}",
                             application_name=application_name, connect_timeout=10)


# -- the race: runs in each spawned process --------------------------------------------------------

def race_in_process(schema: str, effects_path: str, process_index: int, start: Any, results: Any) -> None:
    store = PostgresReceiptStore(connect_factory(schema, "agent-lab-race"), lease_s=60)
    registry = Registry(receipts=store, max_workers=THREADS_PER_PROCESS)

    def record_followup(arguments: Dict[str, Any]) -> Dict[str, Any]:
        label = f"process-{process_index}-{threading.current_thread().name}"
        append_effect(effects_path, f"{arguments['action_id']} {label}")
        return {"recorded_by": label}

    registry.register(followup_spec(), record_followup)
    outcomes: List[Tuple[str, str, int, Any]] = []
    lock = threading.Lock()

    def contend(thread_index: int) -> None:
        keys = [f"race-{index:02d}" for index in range(RACE_KEYS)]
        random.Random(process_index * 100 + thread_index).shuffle(keys)
        start.wait(PATIENCE_S)
        for key in keys:
            final, in_progress_seen = settle(registry, key)
            with lock:
                outcomes.append((key, final, in_progress_seen, None if final.startswith("error") else final))

    threads = [threading.Thread(target=contend, args=(index,), name=f"thread-{index}")
               for index in range(THREADS_PER_PROCESS)]
    for thread in threads:
        thread.start()
    results.put(("ready", process_index))
    for thread in threads:
        thread.join(PATIENCE_S * 2)
    registry.close()
    store.close()
    results.put(("outcomes", outcomes))


def settle(registry: Registry, key: str) -> Tuple[str, int]:
    """Invoke the write under `key` until it has a final answer; ("ran:<by>" | "replayed:<by>" | "error:<code>",
    how many `idempotency_in_progress` answers came first)."""
    call = followup_call(action_id=key, note=f"exactly once for {key}")
    in_progress = 0
    give_up_at = time.monotonic() + PATIENCE_S
    while True:
        result = registry.invoke(call, actor=WRITER)
        if result.ok:
            return (f"{'replayed' if result.replayed else 'ran'}:{result.output['recorded_by']}", in_progress)
        if result.error.code != "idempotency_in_progress" or time.monotonic() > give_up_at:
            return (f"error:{result.error.code}", in_progress)
        in_progress += 1
        time.sleep(0.001)


# -- the SIGKILL: runs in the spawned worker that dies holding a key ----------------------------------

def hold_a_key_and_wait_to_be_killed(schema: str, effects_path: str, events: Any) -> None:
    store = PostgresReceiptStore(connect_factory(schema, "agent-lab-doomed"), lease_s=30)
    registry = Registry(receipts=store, late_completion_s=5)

    def record_followup(arguments: Dict[str, Any]) -> Dict[str, Any]:
        append_effect(effects_path, f"{arguments['action_id']} doomed worker")
        events.put("effect done")
        time.sleep(PATIENCE_S)  # killed here: between the effect and its receipt
        return {"recorded_by": "doomed worker"}

    registry.register(followup_spec(timeout_ms=20_000), record_followup)
    registry.invoke(followup_call(action_id="act-killed"), actor=WRITER)


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class PostgresFaultTest(unittest.TestCase):
    def setUp(self) -> None:
        self.database = ScratchDatabase()
        self.addCleanup(self.database.drop)
        self.schema = self.database.new_schema()
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.effects_path = os.path.join(directory.name, "effects.txt")
        PostgresReceiptStore(connect_factory(self.schema, "agent-lab-setup")).close()  # tables exist before the races

    def registry(self, application_name: str, *, lease_s: float = 60) -> Tuple[Registry, Any]:
        store = PostgresReceiptStore(connect_factory(self.schema, application_name), lease_s=lease_s)
        audit = ListAuditSink()
        registry = Registry(receipts=store, audit=audit)
        self.addCleanup(store.close)
        self.addCleanup(registry.close)
        return registry, audit

    # -- racing processes ------------------------------------------------------------------------

    def test_four_processes_of_eight_threads_racing_the_same_keys_take_effect_exactly_once_per_key(self):
        outcomes = self.run_race()
        effects = read_effects(self.effects_path)
        keys = [f"race-{index:02d}" for index in range(RACE_KEYS)]
        self.assertEqual(len(outcomes), PROCESSES * THREADS_PER_PROCESS * RACE_KEYS)
        self.assertEqual(sorted(line.split()[0] for line in effects), keys, "one effect per key")
        winners = {line.split()[0]: line.split()[1] for line in effects}
        for key, final, _in_progress, _ in outcomes:
            with self.subTest(key=key):
                self.assertIn(final, (f"ran:{winners[key]}", f"replayed:{winners[key]}"))
        ran = [outcome for outcome in outcomes if outcome[1].startswith("ran:")]
        self.assertEqual(len(ran), RACE_KEYS)

    def run_race(self) -> List[Tuple[str, str, int, Any]]:
        context = multiprocessing.get_context("spawn")
        start = context.Event()
        results = context.Queue()
        processes = [context.Process(target=race_in_process, args=(self.schema, self.effects_path, index, start, results))
                     for index in range(PROCESSES)]
        for process in processes:
            process.start()
        outcomes: List[Tuple[str, str, int, Any]] = []
        try:
            for _ in range(PROCESSES):
                self.assertEqual(self.receive(results, processes)[0], "ready")
            start.set()
            for _ in range(PROCESSES):
                kind, payload = self.receive(results, processes)
                self.assertEqual(kind, "outcomes")
                outcomes.extend(payload)
        finally:
            start.set()
            for process in processes:
                process.join(PATIENCE_S)
                if process.is_alive():
                    process.kill()
        for process in processes:
            self.assertEqual(process.exitcode, 0)
        return outcomes

    def receive(self, results: Any, processes: List[Any]) -> Any:
        give_up_at = time.monotonic() + PATIENCE_S * 2
        while time.monotonic() < give_up_at:
            try:
                return results.get(timeout=0.1)
            except queue.Empty:
                crashed = [process.exitcode for process in processes if process.exitcode not in (None, 0)]
                if crashed:
                    self.fail(f"a racing process crashed with exit code {crashed[0]}")
        self.fail("the racing processes did not answer")

    # -- connections killed by the server ----------------------------------------------------------

    def test_a_connection_killed_during_reserve_answers_retry_later_and_the_retry_runs_once(self):
        registry, _ = self.registry("agent-lab-killed-reserve")
        effects: List[str] = []
        registry.register(followup_spec(), lambda arguments: effects.append(arguments["action_id"]) or {"ok": True})
        answers: List[Any] = []
        with self.database.tables_locked(self.schema), self.assertLogs("agent_lab.registry", "WARNING"):
            caller = threading.Thread(target=lambda: answers.append(registry.invoke(followup_call(), actor=WRITER)))
            caller.start()
            self.database.wait_for("agent-lab-killed-reserve", waiting_for_lock=True)
            self.assertEqual(self.database.terminate("agent-lab-killed-reserve", waiting_for_lock=True), 1)
            caller.join(PATIENCE_S)
        [refused] = answers
        self.assertEqual((refused.error.code, refused.outcome, refused.error.retryable),
                         ("receipt_store_unavailable", Outcome.REJECTED, True))
        self.assertEqual(refused.error.next_action, NextAction.RETRY_LATER)
        self.assertEqual(effects, [])
        retried = registry.invoke(followup_call(), actor=WRITER)  # on a new connection
        self.assertTrue(retried.ok)
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(effects, ["act-1"])

    def test_a_connection_killed_while_storing_the_receipt_keeps_the_result_and_one_effect(self):
        registry, audit = self.registry("agent-lab-killed-complete")
        started, proceed = threading.Event(), threading.Event()

        def record_followup(arguments: Dict[str, Any]) -> Dict[str, Any]:
            started.set()
            proceed.wait(PATIENCE_S)
            append_effect(self.effects_path, arguments["action_id"])
            return {"recorded_by": "the only run"}

        registry.register(followup_spec(), record_followup)
        answers: List[Any] = []
        caller = threading.Thread(target=lambda: answers.append(registry.invoke(followup_call(), actor=WRITER)))
        caller.start()
        self.assertTrue(started.wait(PATIENCE_S))
        with self.database.admin() as blocker, self.assertLogs("agent_lab.leases", "WARNING"):
            # The blocker holds the reservation's row, so the complete must wait for it.
            blocker.execute("BEGIN")
            blocker.execute(f"SELECT 1 FROM {self.schema}.agent_lab_receipts WHERE key = 'act-1' FOR UPDATE")
            proceed.set()
            self.database.wait_for("agent-lab-killed-complete", waiting_for_lock=True)
            self.assertEqual(self.database.terminate("agent-lab-killed-complete", waiting_for_lock=True), 1)
            blocker.execute("ROLLBACK")
            caller.join(PATIENCE_S)
        [first] = answers
        self.assertTrue(first.ok)  # the effect happened; its caller gets its result
        self.assertTrue(registry.wait_settled(PATIENCE_S))  # the keeper stored the receipt on a new connection
        self.assertEqual(audit.records[0]["receipt"], ReceiptNote.PENDING.value)
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(again.replayed)
        self.assertEqual(again.output, {"recorded_by": "the only run"})
        self.assertEqual(read_effects(self.effects_path), ["act-1"])

    # -- a commit the server holds past the call's deadline ------------------------------------------

    def test_a_reserve_whose_commit_waits_for_a_missing_standby_is_cut_at_the_deadline_and_runs_nothing(self):
        registry, _ = self.registry("agent-lab-sync-reserve")
        effects: List[str] = []
        registry.register(followup_spec(), lambda arguments: effects.append(arguments["action_id"]) or {"ok": True})
        answers: List[Any] = []
        with MissingStandby(self.database), self.assertLogs("agent_lab.registry", "WARNING"):
            caller = threading.Thread(target=lambda: answers.append(
                registry.invoke(followup_call(), actor=WRITER, deadline=time.monotonic() + 0.5)))
            caller.start()
            caller.join(10.0)  # a hang guard far above the 0.5 s deadline: the commit waits for ever
            self.assertFalse(caller.is_alive(), "invoke waited for the missing standby past its deadline")
        [refused] = answers
        self.assertEqual((refused.error.code, refused.error.next_action), ("receipt_store_unavailable",
                                                                           NextAction.RETRY_LATER))
        self.assertEqual(effects, [])
        # The standby is back: the reservation the cut commit may have made is freed by the store's next
        # call (its owner token was never handed out), and the retry runs the tool once.
        retried = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(retried.ok, retried.error)
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(effects, ["act-1"])

    def test_a_receipt_whose_commit_waits_for_a_missing_standby_is_cut_and_confirmed_once_it_is_back(self):
        registry, audit = self.registry("agent-lab-sync-complete")
        standby = MissingStandby(self.database)
        self.addCleanup(standby.stop)

        def write_then_lose_the_standby(arguments: Dict[str, Any]) -> Dict[str, Any]:
            append_effect(self.effects_path, arguments["action_id"])
            standby.start()  # the receipt's commit will wait for a standby that is gone
            return {"recorded_by": "the only run"}

        registry.register(followup_spec(timeout_ms=4_000), write_then_lose_the_standby)
        answers: List[Any] = []
        with self.assertLogs("agent_lab.leases", "INFO") as logs:
            caller = threading.Thread(target=lambda: answers.append(registry.invoke(followup_call(), actor=WRITER)))
            caller.start()
            caller.join(20.0)  # a hang guard far above the 4 s timeout
            self.assertFalse(caller.is_alive(), "invoke waited for the missing standby past its deadline")
            standby.stop()
            self.assertTrue(registry.wait_settled(PATIENCE_S))  # the keeper's retry confirms the receipt
        [first] = answers
        self.assertTrue(first.ok)  # the effect happened: its caller is told so
        self.assertEqual(audit.records[0]["receipt"], ReceiptNote.PENDING.value)
        self.assertNotIn("fenced", "\n".join(logs.output))
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(again.replayed)
        self.assertEqual(again.output, {"recorded_by": "the only run"})
        self.assertEqual(read_effects(self.effects_path), ["act-1"])

    # -- a handler that outlives its late window on one host --------------------------------------

    def test_a_write_still_running_on_one_host_past_its_late_window_cannot_be_freed_from_another(self):
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments: Dict[str, Any]) -> Dict[str, Any]:
            release.wait(PATIENCE_S)
            append_effect(self.effects_path, f"{arguments['action_id']} host A, late")
            return {"recorded_by": "host A"}

        store_a = PostgresReceiptStore(connect_factory(self.schema, "agent-lab-host-a"), lease_s=60)
        host_a = Registry(receipts=store_a, late_completion_s=0.05, renew_every_s=0.01)
        self.addCleanup(store_a.close)
        self.addCleanup(host_a.close)
        host_a.register(followup_spec(timeout_ms=20), stuck_write)
        host_b, _ = self.registry("agent-lab-host-b")
        host_b.register(followup_spec(timeout_ms=20), lambda arguments: append_effect(
            self.effects_path, f"{arguments['action_id']} host B") or {"recorded_by": "host B"})
        key = ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")

        with self.assertLogs("agent_lab.leases", "WARNING"):
            self.assertEqual(host_a.invoke(followup_call(), actor=WRITER).error.code, "tool_timeout")
            give_up = time.monotonic() + PATIENCE_S
            while host_a.invoke(followup_call(), actor=WRITER).error.code != "outcome_unknown":
                self.assertLess(time.monotonic(), give_up, "host A's late window did not end")
                time.sleep(0.01)
        RowShiftingClock(self.database).advance(61)  # a whole lease has passed on the database's clock
        give_up = time.monotonic() + 10.0
        while host_b.receipts.lookup(key).status is not ReservationStatus.IN_PROGRESS:  # A renews its lease
            self.assertLess(time.monotonic(), give_up, "host A stopped renewing the lease of a running handler")
            time.sleep(0.01)
        self.assertEqual(host_b.invoke(followup_call(), actor=WRITER).error.code, "idempotency_in_progress")
        self.assertIs(host_b.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                             happened=False), False)
        release.set()
        give_up = time.monotonic() + PATIENCE_S
        while host_b.receipts.lookup(key).status is not ReservationStatus.REPLAY:
            self.assertLess(time.monotonic(), give_up, "host A's late receipt never landed")
            time.sleep(0.01)
        self.assertEqual(host_b.invoke(followup_call(), actor=WRITER).output, {"recorded_by": "host A"})
        self.assertEqual(read_effects(self.effects_path), ["act-1 host A, late"])

    # -- a worker killed while it holds a key ------------------------------------------------------

    def test_a_worker_killed_between_effect_and_receipt_leaves_the_key_unknown_until_resolved(self):
        context = multiprocessing.get_context("spawn")
        events = context.Queue()
        doomed = context.Process(target=hold_a_key_and_wait_to_be_killed, args=(self.schema, self.effects_path, events))
        doomed.start()
        try:
            self.assertEqual(events.get(timeout=PATIENCE_S), "effect done")
        finally:
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.join(PATIENCE_S)
        self.assertEqual(doomed.exitcode, -signal.SIGKILL)
        registry, _ = self.registry("agent-lab-survivor")
        registry.register(followup_spec(), lambda arguments: {"recorded_by": "a second run"})
        store = registry.receipts
        call = followup_call(action_id="act-killed")
        key = ReceiptKey(WRITER.tenant, call.name, "act-killed")

        while_leased = registry.invoke(call, actor=WRITER)
        self.assertEqual(while_leased.error.code, "idempotency_in_progress")
        RowShiftingClock(self.database).advance(30)  # the dead worker's lease lapses
        after_lease = registry.invoke(call, actor=WRITER)
        self.assertEqual((after_lease.error.code, after_lease.outcome, after_lease.error.next_action),
                         ("outcome_unknown", Outcome.UNKNOWN, NextAction.LOOKUP_STATUS))
        self.assertEqual(store.unresolved(), [key])
        self.assertIs(store.lookup(key).status, ReservationStatus.UNKNOWN)

        # The documented way out: the application finds the effect happened and says so.
        self.assertTrue(registry.resolve_unknown(call.name, "act-killed", tenant=WRITER.tenant, happened=True,
                                                 output={"recorded_by": "doomed worker"}))
        replayed = registry.invoke(call, actor=WRITER)
        self.assertTrue(replayed.replayed)
        self.assertEqual(replayed.output, {"recorded_by": "doomed worker"})
        self.assertEqual(store.unresolved(), [])
        self.assertEqual(read_effects(self.effects_path), ["act-killed doomed worker"])


if __name__ == "__main__":
    unittest.main()
