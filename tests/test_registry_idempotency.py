"""Idempotency through the registry: one effect per (tenant, tool, key), replays identical receipts."""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import tempfile
import threading
import time
import unittest
from typing import Any, Mapping

from agent_lab.calls import ToolCall
from agent_lab.errors import Outcome, ToolFailure
from agent_lab.idempotency import InMemoryReceiptStore, ReceiptKey, SqliteReceiptStore
from agent_lab.registry import Registry

from store_conformance import FakeClock
from test_registry_fixtures import GLOBEX_WRITER, WRITER, EffectLog, followup_call, followup_spec, ticket_registry


def without_replay_flag(view: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in view.items() if key != "replayed"}


class ReplayAndConflictTest(unittest.TestCase):
    def setUp(self) -> None:
        self.effects = EffectLog()
        self.registry = ticket_registry(self.effects)
        self.addCleanup(self.registry.close)

    def test_same_key_and_arguments_replays_the_identical_receipt_without_a_second_effect(self) -> None:
        first = self.registry.invoke(followup_call(), actor=WRITER)
        again = self.registry.invoke(ToolCall(followup_call().name, followup_call().arguments, call_id="retry-1"),
                                     actor=WRITER)
        self.assertTrue(first.ok and not first.replayed)
        self.assertTrue(again.replayed)
        self.assertEqual(again.call_id, "retry-1")
        self.assertEqual(without_replay_flag(again.to_model()), first.to_model())
        self.assertEqual(again.fingerprint, first.fingerprint)
        self.assertEqual(len(self.effects.effects), 1)

    def test_equivalent_arguments_replay_key_order_does_not_matter(self) -> None:
        self.registry.invoke(followup_call(), actor=WRITER)
        reordered = ToolCall("record_ticket_followup", dict(reversed(list(followup_call().arguments.items()))))
        self.assertTrue(self.registry.invoke(reordered, actor=WRITER).replayed)
        self.assertEqual(len(self.effects.effects), 1)

    def test_same_key_with_other_arguments_is_a_conflict(self) -> None:
        self.registry.invoke(followup_call(), actor=WRITER)
        result = self.registry.invoke(followup_call(note="Something else."), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("idempotency_conflict", Outcome.REJECTED))
        self.assertEqual(result.error.next_action.value, "use_new_key")
        self.assertEqual(len(self.effects.effects), 1)

    def test_a_new_key_runs_again(self) -> None:
        self.registry.invoke(followup_call(), actor=WRITER)
        self.assertFalse(self.registry.invoke(followup_call(action_id="act-2"), actor=WRITER).replayed)
        self.assertEqual(len(self.effects.effects), 2)

    def test_receipts_of_one_tenant_are_never_visible_to_another(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        effects = EffectLog()
        registry.register(followup_spec(), effects.record_followup)
        acme = registry.invoke(followup_call(), actor=WRITER)
        globex = registry.invoke(followup_call(), actor=GLOBEX_WRITER)
        self.assertFalse(globex.replayed)
        self.assertNotEqual(acme.output["followup_id"], globex.output["followup_id"])
        self.assertEqual(len(effects.effects), 2)
        self.assertEqual(registry.invoke(followup_call(), actor=GLOBEX_WRITER).output, globex.output)


class ReservationReleaseTest(unittest.TestCase):
    def setUp(self) -> None:
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        self.attempts = 0

    def registry_with(self, handler) -> Registry:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(followup_spec(), handler)
        return registry

    def test_a_retryable_failure_with_no_effect_frees_the_key_for_a_retry(self) -> None:
        def flaky(arguments):
            self.attempts += 1
            if self.attempts == 1:
                raise ToolFailure("unavailable", "The ticket service is down.")
            return {"followup_id": "F-1"}

        registry = self.registry_with(flaky)
        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.error.code, first.outcome), ("unavailable", Outcome.FAILED))
        second = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(second.ok and not second.replayed)
        self.assertEqual(self.attempts, 2)

    def test_a_final_business_failure_is_stored_and_replayed(self) -> None:
        def closed(arguments):
            self.attempts += 1
            raise ToolFailure("conflict", "The ticket is closed.")

        registry = self.registry_with(closed)
        registry.invoke(followup_call(), actor=WRITER)
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.error.code, again.replayed), ("conflict", True))
        self.assertEqual(self.attempts, 1)

    def test_a_write_whose_outcome_is_unknown_replays_unknown_instead_of_repeating(self) -> None:
        def crash_after_effect(arguments):
            self.attempts += 1
            raise RuntimeError("connection reset after commit")

        registry = self.registry_with(crash_after_effect)
        first = registry.invoke(followup_call(), actor=WRITER)
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual(first.outcome, Outcome.UNKNOWN)
        self.assertEqual((again.outcome, again.replayed, again.error.code), (Outcome.UNKNOWN, True, "handler_exception"))
        self.assertEqual(self.attempts, 1)

    def test_a_write_that_could_not_start_because_the_registry_closed_frees_its_key(self) -> None:
        store = InMemoryReceiptStore()
        effects = EffectLog()
        for run_async_handler in (False, True):
            with self.subTest(async_handler=run_async_handler):
                registry = Registry(receipts=store)  # e.g. the application shuts down while a call is admitted

                def closing_guard(arguments, actor):
                    registry.close()
                    return True

                async def async_write(arguments):
                    return effects.record_followup(arguments)

                handler = async_write if run_async_handler else effects.record_followup
                registry.register(followup_spec(resource_guard=closing_guard), handler)
                result = registry.invoke(followup_call(), actor=WRITER)
                self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))
                self.assertIsNone(store.lookup(ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")))
        self.assertEqual(effects.effects, [])
        later = ticket_registry(effects, receipts=store)
        self.addCleanup(later.close)
        self.assertTrue(later.invoke(followup_call(), actor=WRITER).ok)  # the same key runs once it can

    def test_a_refusal_after_reservation_releases_the_key(self) -> None:
        registry = Registry(max_workers=1)
        self.addCleanup(registry.close)
        gate = threading.Event()
        blocker_started = threading.Event()

        def blocking(arguments):
            blocker_started.set()
            return gate.wait(5) and {}

        registry.register(followup_spec(name="blocker", idempotency_key=None), blocking)
        effects = EffectLog()
        registry.register(followup_spec(), effects.record_followup)
        blocker = threading.Thread(
            target=registry.invoke, args=(ToolCall("blocker", followup_call().arguments),), kwargs={"actor": WRITER}
        )
        blocker.start()
        self.assertTrue(blocker_started.wait(5))  # the only worker is busy from now on
        queued = registry.invoke(followup_call(), actor=WRITER, deadline=time.monotonic() + 0.05)
        gate.set()
        blocker.join()
        self.assertEqual((queued.error.code, queued.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(effects.effects, [])
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)
        self.assertEqual(len(effects.effects), 1)


# -- the race: 16 threads and 2 processes, one key, one SQLite file -------------------------------

RACE_THREADS = 16
RACE_PROCESSES = 2


def append_effect(effects_path: str):
    def handler(arguments):
        time.sleep(0.02)  # widen the window in which a second runner could slip in
        with open(effects_path, "a", encoding="utf-8") as effects:
            effects.write(f"{os.getpid()} {threading.get_ident()} {arguments['action_id']}\n")
        return {"followup_id": "F-1", "ticket_id": arguments["ticket_id"]}

    return handler


def race_registry(database: str, effects_path: str) -> Registry:
    registry = Registry(receipts=SqliteReceiptStore(database), max_workers=RACE_THREADS)
    registry.register(followup_spec(), append_effect(effects_path))
    return registry


def race_once(registry: Registry) -> tuple:
    result = registry.invoke(followup_call(), actor=WRITER)
    return (result.ok, result.replayed, result.error.code if result.error else None)


def race_in_child(database: str, effects_path: str, ready, go, answers) -> None:
    """Runs in a spawned process: one registry, one call, when the parent says go."""
    registry = race_registry(database, effects_path)
    try:
        ready.put(os.getpid())
        go.wait(10)
        answers.put(race_once(registry))
    finally:
        registry.close()
        registry.receipts.close()


def wait_until_ready(ready, children, *, patience_s: float = 120.0) -> None:
    """Wait for every child's ready signal; a child that died says so at once instead of timing out."""
    waiting_for, give_up = len(children), time.monotonic() + patience_s
    while waiting_for:
        try:
            ready.get(timeout=0.5)
            waiting_for -= 1
        except queue.Empty:
            dead = [child.exitcode for child in children if child.exitcode is not None]
            if dead:
                raise AssertionError(f"a racing process exited before it was ready (exit codes {dead})") from None
            if time.monotonic() > give_up:
                raise AssertionError(f"racing processes not ready after {patience_s:.0f} s") from None


def stop_process(child) -> None:
    if child.is_alive():
        child.terminate()
    child.join(10)


class UnknownOutcomeKeptUntilResolvedTest(unittest.TestCase):
    """A write whose handler raised may have taken effect: its key replays that unknown outcome, is
    listed by unresolved(), and is settled by resolve_unknown, however long that takes; it never runs
    again on its own once the store's ttl has passed (the effect would happen twice)."""

    TTL_S = 100.0

    def setUp(self) -> None:
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        self.clock = FakeClock()
        self.attempts = 0
        self.failing = True

    def handler(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        self.attempts += 1
        if self.failing:
            raise ConnectionResetError("the ticket service hung up after taking the follow-up")
        return {"followup_id": f"F-{self.attempts}"}

    def stores(self) -> list[tuple[str, Any]]:
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        times = dict(ttl_s=self.TTL_S, lease_s=60.0, clock=self.clock, monotonic=self.clock.monotonic)
        return [("memory", InMemoryReceiptStore(**times)),
                ("sqlite", SqliteReceiptStore(os.path.join(folder.name, "receipts.db"), **times))]

    def registry_on(self, store: Any) -> Registry:
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        self.addCleanup(store.close)
        registry.register(followup_spec(), self.handler)
        return registry

    def raised_once(self, registry: Registry) -> None:
        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.outcome, first.error.code), (Outcome.UNKNOWN, "handler_exception"))
        self.failing = False  # the service is back: a retry that ran would now succeed, a second effect

    def test_the_key_replays_unknown_past_the_ttl_and_is_listed_until_resolved(self) -> None:
        for name, store in self.stores():
            with self.subTest(store=name):
                self.attempts, self.failing = 0, True
                registry = self.registry_on(store)
                self.raised_once(registry)
                key = ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")
                for _ in range(3):
                    again = registry.invoke(followup_call(), actor=WRITER)
                    self.assertEqual((again.outcome, again.replayed, again.error.code),
                                     (Outcome.UNKNOWN, True, "handler_exception"))
                    self.assertEqual(store.unresolved(), [key])
                    self.clock.advance(self.TTL_S * 2)
                    store.purge()
                self.assertEqual(self.attempts, 1)

    def test_resolve_unknown_settles_it_as_happened(self) -> None:
        for name, store in self.stores():
            with self.subTest(store=name):
                self.attempts, self.failing = 0, True
                registry = self.registry_on(store)
                self.raised_once(registry)
                self.clock.advance(self.TTL_S * 2)
                self.assertTrue(registry.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                                         happened=True, output={"followup_id": "F-1"}))
                self.assertEqual(store.unresolved(), [])
                again = registry.invoke(followup_call(), actor=WRITER)
                self.assertEqual((again.ok, again.replayed, again.output), (True, True, {"followup_id": "F-1"}))
                self.assertFalse(registry.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                                          happened=False))  # settled already
                self.assertEqual(self.attempts, 1)

    def test_resolve_unknown_settles_it_as_not_happened_and_the_next_call_runs(self) -> None:
        for name, store in self.stores():
            with self.subTest(store=name):
                self.attempts, self.failing = 0, True
                registry = self.registry_on(store)
                self.raised_once(registry)
                self.assertTrue(registry.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                                         happened=False))
                self.assertEqual(store.unresolved(), [])
                again = registry.invoke(followup_call(), actor=WRITER)
                self.assertEqual((again.ok, again.replayed), (True, False))
                self.assertEqual(self.attempts, 2)

    def test_a_store_of_ones_own_without_complete_unknown_still_replays_the_unknown_outcome(self) -> None:
        inner = InMemoryReceiptStore(ttl_s=self.TTL_S, lease_s=60.0, clock=self.clock, monotonic=self.clock.monotonic)
        store = WithoutCompleteUnknown(inner)
        registry = self.registry_on(store)
        self.raised_once(registry)
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.outcome, again.replayed), (Outcome.UNKNOWN, True))
        self.assertEqual(self.attempts, 1)


class WithoutCompleteUnknown:
    """A receipt store written before `complete_unknown` existed: the protocol's methods only."""

    def __init__(self, inner: InMemoryReceiptStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "complete_unknown":
            raise AttributeError(name)
        return getattr(self._inner, name)


class SqliteRaceAndRestartTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.database = os.path.join(directory.name, "receipts.sqlite3")
        self.effects_path = os.path.join(directory.name, "effects.log")
        open(self.effects_path, "w").close()

    def effect_lines(self) -> list[str]:
        with open(self.effects_path, encoding="utf-8") as effects:
            return effects.read().splitlines()

    def test_sixteen_threads_and_two_processes_racing_one_key_run_the_handler_once(self) -> None:
        context = multiprocessing.get_context("spawn")
        ready, answers, go = context.Queue(), context.Queue(), context.Event()
        children = [
            context.Process(target=race_in_child, args=(self.database, self.effects_path, ready, go, answers))
            for _ in range(RACE_PROCESSES)
        ]
        for child in children:
            child.start()
            self.addCleanup(stop_process, child)
        wait_until_ready(ready, children)
        registry = race_registry(self.database, self.effects_path)
        self.addCleanup(registry.receipts.close)
        self.addCleanup(registry.close)
        local_answers: list = []
        barrier = threading.Barrier(RACE_THREADS + 1)

        def racer() -> None:
            barrier.wait()
            local_answers.append(race_once(registry))

        threads = [threading.Thread(target=racer) for _ in range(RACE_THREADS)]
        for thread in threads:
            thread.start()
        go.set()
        barrier.wait()
        for thread in threads:
            thread.join(10)
        all_answers = local_answers + [answers.get(timeout=30) for _ in children]
        for child in children:
            child.join(30)
            self.assertEqual(child.exitcode, 0)
        self.assertEqual(len(self.effect_lines()), 1, self.effect_lines())
        self.assertEqual(len(all_answers), RACE_THREADS + RACE_PROCESSES)
        fresh = [answer for answer in all_answers if answer == (True, False, None)]
        self.assertEqual(len(fresh), 1, all_answers)
        for answer in all_answers:
            self.assertIn(answer, {(True, False, None), (True, True, None), (False, False, "idempotency_in_progress")})
        self.assertEqual(race_once(registry), (True, True, None))

    def test_a_new_registry_on_the_same_file_replays_after_a_restart(self) -> None:
        first_registry = race_registry(self.database, self.effects_path)
        first = first_registry.invoke(followup_call(), actor=WRITER)
        first_registry.close()
        first_registry.receipts.close()

        restarted = race_registry(self.database, self.effects_path)
        self.addCleanup(restarted.receipts.close)
        self.addCleanup(restarted.close)
        again = restarted.invoke(followup_call(), actor=WRITER)
        self.assertTrue(again.replayed)
        self.assertEqual(without_replay_flag(again.to_model()), first.to_model())
        self.assertEqual(len(self.effect_lines()), 1)


if __name__ == "__main__":
    unittest.main()
