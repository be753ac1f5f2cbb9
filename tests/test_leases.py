"""One key, one effect, even when a process dies between its effect and its receipt.

Issue 8, item 1 (and 7, 8): a lapsed reservation of a write is a durable `outcome_unknown`, never a fresh
run, until the application resolves it; the registry renews the leases it holds; a stale holder is fenced
off; a failed `complete()` leaves the key unknown, never free; a store that cannot answer within the call's
deadline answers `receipt_store_unavailable` and nothing runs; a lone-surrogate key is invalid arguments.

Time: the stores take a `clock`; "after the lease" is a clock moved forward, never a sleep. Waits are
on events or conditions, each with a generous hang guard that is not a timing assertion.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import signal
import sqlite3
import tempfile
import threading
import time
import unittest
import weakref
from typing import Any
from unittest import mock

from agent_lab.audit import MemoryAuditSink
from agent_lab.calls import ToolCall
from agent_lab.errors import NextAction, Outcome
from agent_lab.leases import RECEIPT_RETRY_ATTEMPTS
from agent_lab.registry import Registry
from agent_lab.stores._clock import system_monotonic
from agent_lab.stores import BUSY_TIMEOUT_MS, InMemoryReceiptStore, ReceiptKey, ReservationStatus, SqliteReceiptStore
from agent_lab.spec import ToolSpec

from store_conformance import FakeClock
from test_registry_fixtures import WRITER, EffectLog, followup_call, followup_spec

PATIENCE_S = 60.0  # a hang guard, never a timing assertion
CRASH_LEASE_S = 60.0  # short next to the default 300 s; the test moves the clock past it, never sleeps
KEY = ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")


def wait_for(condition, what: str, patience_s: float = PATIENCE_S) -> None:
    give_up = time.monotonic() + patience_s
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.002)


def read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as file:
        return file.read().splitlines()


def write_effect_then_die(effects_path: str):
    def handler(arguments):
        with open(effects_path, "a", encoding="utf-8") as effects:
            effects.write(arguments["action_id"] + "\n")
            effects.flush()
            os.fsync(effects.fileno())
        os.kill(os.getpid(), signal.SIGKILL)  # between the effect and its receipt
        return {"followup_id": "never-returned"}

    return handler


def crash_in_child(database: str, effects_path: str) -> None:
    """A spawned process: reserve the key, take effect, and die before the receipt."""
    registry = Registry(receipts=SqliteReceiptStore(database, lease_s=CRASH_LEASE_S), late_completion_s=1.0)
    registry.register(followup_spec(timeout_ms=5_000), write_effect_then_die(effects_path))
    registry.invoke(followup_call(), actor=WRITER)


def appending(effects_path: str):
    def handler(arguments):
        with open(effects_path, "a", encoding="utf-8") as effects:
            effects.write(arguments["action_id"] + "\n")
        return {"followup_id": "F-retry", "ticket_id": arguments["ticket_id"]}

    return handler


@unittest.skipUnless(hasattr(signal, "SIGKILL"), "needs SIGKILL (POSIX)")
class CrashBetweenEffectAndReceiptTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.database = os.path.join(directory.name, "receipts.sqlite3")
        self.effects_path = os.path.join(directory.name, "effects.log")
        open(self.effects_path, "w").close()
        SqliteReceiptStore(self.database).close()  # the file exists before the child races to create it

    def crash_a_child(self) -> None:
        context = multiprocessing.get_context("spawn")
        child = context.Process(target=crash_in_child, args=(self.database, self.effects_path))
        child.start()
        child.join(PATIENCE_S * 2)
        if child.is_alive():
            child.kill()
            self.fail("the crashing child did not die")
        self.assertEqual(child.exitcode, -signal.SIGKILL)
        self.assertEqual(read_lines(self.effects_path), ["act-1"])

    def registry(self, *, lease_lapsed: bool) -> Registry:
        """Another process's registry on the same file; `lease_lapsed`: its clock is past the lease."""
        later = CRASH_LEASE_S + 1 if lease_lapsed else 0  # both of its clocks are that much later
        store = SqliteReceiptStore(self.database, lease_s=CRASH_LEASE_S, clock=lambda: time.time() + later,
                                   monotonic=lambda: system_monotonic() + later)
        registry = Registry(receipts=store)
        registry.register(followup_spec(timeout_ms=5_000), appending(self.effects_path))
        self.addCleanup(store.close)
        self.addCleanup(registry.close)
        return registry

    def test_sigkill_between_effect_and_receipt_leaves_one_effect_and_unknown(self) -> None:
        self.crash_a_child()

        before = self.registry(lease_lapsed=False).invoke(followup_call(), actor=WRITER)
        self.assertEqual((before.error.code, before.outcome), ("idempotency_in_progress", Outcome.REJECTED))
        self.assertEqual(before.error.next_action, NextAction.RETRY_LATER)

        after_lease = self.registry(lease_lapsed=True)
        for attempt in range(3):  # durable: the same answer however often the model retries
            with self.subTest(attempt=attempt):
                after = after_lease.invoke(followup_call(), actor=WRITER)
                self.assertEqual((after.error.code, after.outcome), ("outcome_unknown", Outcome.UNKNOWN))
                self.assertEqual(after.error.next_action, NextAction.LOOKUP_STATUS)
                self.assertFalse(after.error.retryable)
        other_arguments = after_lease.invoke(followup_call(note="Something else."), actor=WRITER)
        self.assertEqual(other_arguments.error.code, "idempotency_conflict")
        self.assertEqual(after_lease.receipts.unresolved(), [KEY])
        self.assertEqual(read_lines(self.effects_path), ["act-1"], "exactly one effect")

        # The application looks it up, finds the follow-up, and says so: every retry replays it.
        found = {"followup_id": "F-1", "ticket_id": "T-1001"}
        self.assertTrue(after_lease.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                                    happened=True, output=found))
        for registry in (after_lease, self.registry(lease_lapsed=False)):
            replay = registry.invoke(followup_call(), actor=WRITER)
            self.assertTrue(replay.ok and replay.replayed, replay)
            self.assertEqual(replay.output, found)
        self.assertEqual(after_lease.receipts.unresolved(), [])
        self.assertEqual(read_lines(self.effects_path), ["act-1"])

    def test_a_crashed_write_resolved_as_not_happened_runs_once_on_the_next_retry(self) -> None:
        self.crash_a_child()
        registry = self.registry(lease_lapsed=True)
        self.assertEqual(registry.invoke(followup_call(), actor=WRITER).error.code, "outcome_unknown")
        self.assertTrue(registry.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                                 happened=False))
        retried = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(retried.ok and not retried.replayed, retried)
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(read_lines(self.effects_path), ["act-1", "act-1"])  # as documented: the key was free

    def test_only_an_unknown_key_can_be_resolved(self) -> None:
        registry = self.registry(lease_lapsed=False)
        resolve = lambda: registry.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,  # noqa: E731
                                                   happened=False)
        self.assertFalse(resolve())  # free
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)
        self.assertFalse(resolve())  # completed: it replays
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        with self.assertRaisesRegex(KeyError, "no_such_tool"):
            registry.resolve_unknown("no_such_tool", "act-1", tenant=WRITER.tenant, happened=False)


class ResolveUnknownOnABusyStoreTest(unittest.TestCase):
    def test_resolve_unknown_answers_false_when_the_store_cannot_answer_and_true_once_it_can(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "receipts.sqlite3")
            clock = FakeClock()
            store = SqliteReceiptStore(path, lease_s=CRASH_LEASE_S, clock=clock, monotonic=clock.monotonic)
            self.addCleanup(store.close)
            registry = Registry(receipts=store)
            self.addCleanup(registry.close)
            registry.register(followup_spec(timeout_ms=5_000), EffectLog().record_followup)
            store.reserve(KEY, registry.fingerprint("record_ticket_followup", followup_call().arguments))
            clock.advance(CRASH_LEASE_S)  # its holder died: the key is unknown
            resolve = lambda: registry.resolve_unknown(  # noqa: E731
                "record_ticket_followup", "act-1", tenant=WRITER.tenant, happened=False, timeout_s=0.05)
            writer = sqlite3.connect(path, isolation_level=None)
            self.addCleanup(writer.close)
            writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock: the store cannot answer
            with self.assertLogs("agent_lab.registry", "WARNING") as logs:
                self.assertIs(resolve(), False)  # as documented; it used to raise ReceiptStoreUnavailable
            self.assertIn("ReceiptStoreUnavailable", "\n".join(logs.output))
            writer.execute("ROLLBACK")
            self.assertIs(store.lookup(KEY).status, ReservationStatus.UNKNOWN)  # nothing was changed
            self.assertIs(resolve(), True)
            self.assertIsNone(store.lookup(KEY))


class FailingCompleteStore(InMemoryReceiptStore):
    """A store whose writes of receipts fail (a full disk, a database error); everything else works."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.complete_attempts = 0

    def complete(self, key, owner, record, **options):
        self.complete_attempts += 1
        raise OSError("disk full")


class FailedCompleteTest(unittest.TestCase):
    def test_a_failed_complete_is_retried_and_then_leaves_the_key_unknown_never_free(self) -> None:
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        clock = FakeClock()
        store = FailingCompleteStore(lease_s=60, clock=clock, monotonic=clock.monotonic)
        effects = EffectLog()
        audit = MemoryAuditSink()
        registry = Registry(receipts=store, audit=audit)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=1_000), effects.record_followup)

        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(first.ok)  # the effect happened and the caller is told so
        self.assertEqual(audit.records[-1]["receipt"], "pending")
        self.assertTrue(registry.wait_settled(PATIENCE_S))
        self.assertEqual(store.complete_attempts, 1 + RECEIPT_RETRY_ATTEMPTS)  # bounded retries

        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.error.code, again.outcome), ("outcome_unknown", Outcome.UNKNOWN))

        another_process = Registry(receipts=store)
        self.addCleanup(another_process.close)
        another_process.register(followup_spec(timeout_ms=1_000), effects.record_followup)
        clock.advance(61)  # no renewal came after the registry gave up: the lease lapses
        elsewhere = another_process.invoke(followup_call(), actor=WRITER)
        self.assertEqual((elsewhere.error.code, elsewhere.outcome), ("outcome_unknown", Outcome.UNKNOWN))
        self.assertIs(store.lookup(KEY).status, ReservationStatus.UNKNOWN)
        self.assertEqual(len(effects.effects), 1)

    def test_a_complete_that_succeeds_on_a_retry_stores_the_real_receipt(self) -> None:
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)

        class FailsOnce(InMemoryReceiptStore):
            failed = False

            def complete(self, key, owner, record, **options):
                if not self.failed:
                    self.failed = True
                    raise OSError("database is locked")
                return super().complete(key, owner, record, **options)

        store = FailsOnce()
        effects = EffectLog()
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        registry.register(followup_spec(), effects.record_followup)
        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(registry.wait_settled(PATIENCE_S))
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(again.replayed)
        self.assertEqual(again.output, first.output)
        self.assertEqual(len(effects.effects), 1)


class RenewCountingStore(InMemoryReceiptStore):
    """Notes the store clock at every renewal, so a test can wait for one made after it moved the clock."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.renewed_at: list[float] = []
        self.renewed = threading.Condition()

    def renew(self, key, owner, **options):
        now = self._clock()
        kept = super().renew(key, owner, **options)
        with self.renewed:
            self.renewed_at.append(now if kept else float("nan"))
            self.renewed.notify_all()
        return kept

    def wait_for_renewal_at(self, now: float) -> None:
        with self.renewed:
            if not self.renewed.wait_for(lambda: any(at >= now for at in self.renewed_at), PATIENCE_S):
                raise AssertionError("no renewal came")


class LeaseRenewalTest(unittest.TestCase):
    def test_renewals_too_rare_to_keep_the_lease_are_refused_when_the_registry_is_made(self) -> None:
        # Renewed every 10 s against a 1.5 s lease, a write running past its late-completion window
        # lapsed to unknown while it still ran; another process resolved it "did not happen" and ran it
        # again, and both took effect.
        store = InMemoryReceiptStore(lease_s=1.5)
        with self.assertRaisesRegex(ValueError, "renew_every_s .* at most half the receipt store's lease_s"):
            Registry(receipts=store, renew_every_s=10)
        with self.assertRaisesRegex(ValueError, "at most half"):
            Registry(receipts=store, renew_every_s=0.76)
        Registry(receipts=store, renew_every_s=0.75).close()  # two renewals a lease: one may fail

    def test_a_handler_outliving_its_lease_is_renewed_and_never_runs_twice(self) -> None:
        clock = FakeClock()
        store = RenewCountingStore(lease_s=60, clock=clock, monotonic=clock.monotonic)
        effects = EffectLog()
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def long_write(arguments):
            started.set()
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        registry = Registry(receipts=store, renew_every_s=0.005)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=20_000), long_write)
        answers: list = []
        runner = threading.Thread(target=lambda: answers.append(registry.invoke(followup_call(), actor=WRITER)))
        runner.start()
        self.addCleanup(runner.join, PATIENCE_S)
        self.assertTrue(started.wait(PATIENCE_S))
        for _ in range(4):  # 200 s of store time: the first lease (60 s) is long gone
            clock.advance(50)
            store.wait_for_renewal_at(clock.now)

        another_process = Registry(receipts=store)
        self.addCleanup(another_process.close)
        another_process.register(followup_spec(timeout_ms=20_000), effects.record_followup)
        during = another_process.invoke(followup_call(), actor=WRITER)
        self.assertEqual((during.error.code, during.outcome), ("idempotency_in_progress", Outcome.REJECTED))

        with store.renewed:
            refused = [at for at in store.renewed_at if at != at]  # NaN marks a renewal the store refused
        self.assertEqual(refused, [])
        release.set()
        runner.join(PATIENCE_S)
        self.assertTrue(answers[0].ok)
        self.assertTrue(another_process.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(len(effects.effects), 1)


def status_spec(**overrides: Any) -> ToolSpec:
    """A read with an idempotency key: a lapsed lease may be taken over (there is no effect to protect)."""
    options: dict[str, Any] = dict(
        name="lookup_status",
        description="Look up the status of an action.",
        input_schema={"type": "object", "properties": {"action_id": {"type": "string"}}, "required": ["action_id"]},
        idempotency_key="action_id",
        timeout_ms=5_000,
    )
    options.update(overrides)
    return ToolSpec(**options)


class FencingTest(unittest.TestCase):
    def test_a_stale_holders_complete_is_refused_and_recorded(self) -> None:
        clock = FakeClock()
        store = InMemoryReceiptStore(lease_s=60, clock=clock, monotonic=clock.monotonic)
        audit = MemoryAuditSink()
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def slow_lookup(arguments):
            started.set()
            release.wait(PATIENCE_S)
            return {"status": "from the stale holder"}

        # Its first renewal is lease_s / 3 (20 s) away in real time: the fake clock passes the lease first.
        stale = Registry(receipts=store, audit=audit)
        self.addCleanup(stale.close)
        stale.register(status_spec(), slow_lookup)
        answers: list = []
        runner = threading.Thread(target=lambda: answers.append(stale.invoke(ToolCall("lookup_status", {"action_id": "a-1"}), actor=WRITER)))
        runner.start()
        self.addCleanup(runner.join, PATIENCE_S)
        self.assertTrue(started.wait(PATIENCE_S))
        clock.advance(61)  # the lease lapsed: a read may be taken over

        taker = Registry(receipts=store)
        self.addCleanup(taker.close)
        taker.register(status_spec(), lambda arguments: {"status": "from the new holder"})
        fresh = taker.invoke(ToolCall("lookup_status", {"action_id": "a-1"}), actor=WRITER)
        self.assertEqual(fresh.output, {"status": "from the new holder"})

        with self.assertLogs("agent_lab.leases", "WARNING") as logs:
            release.set()
            runner.join(PATIENCE_S)
        self.assertIn("fenced by the owner token", "\n".join(logs.output))
        self.assertNotIn("a-1", "\n".join(logs.output))  # the log names the tool, never the key
        self.assertTrue(answers[0].ok)  # the stale holder's own caller still gets its own answer
        self.assertEqual(audit.records[-1]["receipt"], "refused")
        replay = taker.invoke(ToolCall("lookup_status", {"action_id": "a-1"}), actor=WRITER)
        self.assertEqual((replay.replayed, replay.output), (True, {"status": "from the new holder"}))


class DeadlineBoundedStoreTest(unittest.TestCase):
    def setUp(self) -> None:
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        self.effects = EffectLog()

    def test_a_locked_sqlite_file_answers_receipt_store_unavailable_within_the_deadline(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "receipts.sqlite3")
            store = SqliteReceiptStore(path)
            registry = Registry(receipts=store)
            registry.register(followup_spec(), self.effects.record_followup)
            holder = sqlite3.connect(path, isolation_level=None)
            try:
                holder.execute("BEGIN IMMEDIATE")  # another process writes, and keeps the lock
                started = time.monotonic()
                result = registry.invoke(followup_call(), actor=WRITER, deadline=time.monotonic() + 0.1)
                elapsed = time.monotonic() - started
                holder.execute("ROLLBACK")
                self.assertEqual((result.error.code, result.outcome), ("receipt_store_unavailable", Outcome.REJECTED))
                self.assertTrue(result.error.retryable)
                self.assertEqual(result.error.next_action, NextAction.RETRY_LATER)
                self.assertEqual(self.effects.effects, [])  # no handler runs without a reservation
                # A bound far above the 0.1 s deadline, and below the 5 s SQLite used to wait whatever the deadline.
                self.assertLess(elapsed, BUSY_TIMEOUT_MS / 1000)
                self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)  # nothing was left reserved
            finally:
                holder.close()
                registry.close()
                store.close()

    def test_the_deadline_passing_during_reserve_never_starts_the_handler(self) -> None:
        class SlowReserve(InMemoryReceiptStore):
            """Answers only after the caller's deadline (as a reserve waiting on a busy database can)."""

            deadline = 0.0

            def reserve(self, key, fingerprint, **options):
                wait_for(lambda: time.monotonic() > self.deadline, "the deadline to pass")
                return super().reserve(key, fingerprint, **options)

        store = SlowReserve()
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        registry.register(followup_spec(), self.effects.record_followup)
        store.deadline = time.monotonic() + 0.05
        result = registry.invoke(followup_call(), actor=WRITER, deadline=store.deadline)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])
        self.assertIsNone(store.lookup(KEY))  # the late reservation was given back: the key is free
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)

    def test_the_pre_run_steps_count_against_the_tools_timeout(self) -> None:
        def slow_guard(arguments, actor):
            time.sleep(0.1)  # longer than the whole 50 ms timeout of the tool
            return True

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=50, resource_guard=slow_guard), self.effects.record_followup)
        result = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_a_store_that_cannot_reserve_in_time_is_a_retryable_refusal_for_reads_too(self) -> None:
        class Unreachable(InMemoryReceiptStore):
            def reserve(self, key, fingerprint, **options):
                from agent_lab.stores import ReceiptStoreUnavailable

                raise ReceiptStoreUnavailable("connection refused")

        ran: list = []
        registry = Registry(receipts=Unreachable())
        self.addCleanup(registry.close)
        registry.register(status_spec(), lambda arguments: ran.append(1) or {})
        result = registry.invoke(ToolCall("lookup_status", {"action_id": "a-1"}), actor=WRITER)
        self.assertEqual((result.error.code, result.error.retryable), ("receipt_store_unavailable", True))
        self.assertEqual(ran, [])


class LeaseCoversRunTest(unittest.TestCase):
    def test_a_lease_shorter_than_timeout_plus_the_late_window_is_refused_at_registration(self) -> None:
        registry = Registry(receipts=InMemoryReceiptStore(lease_s=20), late_completion_s=30)
        self.addCleanup(registry.close)
        with self.assertRaises(ValueError) as caught:
            registry.register(followup_spec(timeout_ms=10_000), EffectLog().record_followup)
        message = str(caught.exception)
        for number in ("20 s", "10000 ms", "30 s", "40 s"):
            self.assertIn(number, message)
        registry.register(status_spec(timeout_ms=10_000), lambda arguments: {})  # a read needs its timeout only
        registry.register(followup_spec(name="quick_write", timeout_ms=1_000, idempotency_key=None), lambda a: {})

    def test_a_registry_owned_store_is_not_checked(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=1e12), EffectLog().record_followup)


class LateCompletionWindowTest(unittest.TestCase):
    def test_a_write_past_its_late_completion_window_is_unknown_then_its_late_result_replays(self) -> None:
        effects = EffectLog()
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments):
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        registry = Registry(late_completion_s=0.05)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=20), stuck_write)
        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        with self.assertLogs("agent_lab.leases", "WARNING") as logs:
            wait_for(lambda: registry.invoke(followup_call(), actor=WRITER).error.code == "outcome_unknown",
                     "the late window to end")
        self.assertIn("late-completion window", "\n".join(logs.output))
        unknown = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((unknown.outcome, unknown.error.next_action), (Outcome.UNKNOWN, NextAction.LOOKUP_STATUS))

        release.set()  # the handler finally returns: its owner token still holds the key, so its result lands
        wait_for(lambda: registry.receipts.lookup(KEY).status is ReservationStatus.REPLAY, "the late receipt")
        after = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(after.ok and after.replayed)
        self.assertEqual(after.output, {"followup_id": "F-1", "ticket_id": "T-1001"})
        self.assertEqual(len(effects.effects), 1)


class StillRunningIsNotUnknownTest(unittest.TestCase):
    def test_a_key_whose_handler_still_runs_here_past_its_late_window_cannot_be_resolved(self) -> None:
        effects = EffectLog()
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments):
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        store = InMemoryReceiptStore(lease_s=0.5)  # covers the 20 ms timeout and the 50 ms late window
        registry = Registry(receipts=store, late_completion_s=0.05)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=20), stuck_write)
        with self.assertLogs("agent_lab.leases", "WARNING"):
            registry.invoke(followup_call(), actor=WRITER)
            wait_for(lambda: registry.invoke(followup_call(), actor=WRITER).error.code == "outcome_unknown",
                     "the late window to end")
        [hold] = registry._holder.holds()
        wait_for(lambda: time.monotonic() > hold.unknown_until, "the store's lease to lapse")
        resolve = lambda happened, **output: registry.resolve_unknown(  # noqa: E731
            "record_ticket_followup", "act-1", tenant=WRITER.tenant, happened=happened, **output)
        self.assertFalse(resolve(False))  # "did not happen" would let a retry run it a second time
        self.assertFalse(resolve(True, output={"followup_id": "F-9", "ticket_id": "T-1001"}))
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.error.code, again.outcome), ("outcome_unknown", Outcome.UNKNOWN))
        self.assertEqual(effects.effects, [])

        release.set()  # the handler returns: its result is the key's receipt, and the one effect
        wait_for(lambda: store.lookup(KEY).status is ReservationStatus.REPLAY, "the late receipt")
        after = registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(after.ok and after.replayed)
        self.assertEqual(after.output, {"followup_id": "F-1", "ticket_id": "T-1001"})
        self.assertEqual(len(effects.effects), 1)
        self.assertFalse(resolve(False))  # settled now: nothing to resolve


class StillRunningOnAnotherHostTest(unittest.TestCase):
    """Host A's write outlives its late window; host B (another store on the same file) must not be able
    to free the key while A's handler still runs: A keeps renewing its lease until the handler returns."""

    def test_a_key_whose_handler_still_runs_on_another_host_stays_in_progress_there_and_cannot_be_freed(self) -> None:
        effects = EffectLog()
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments):
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        path = os.path.join(directory.name, "receipts.sqlite3")
        clock = FakeClock()
        hosts = []
        for renew_every_s in (0.005, None):  # host A renews often; host B only answers
            store = SqliteReceiptStore(path, lease_s=CRASH_LEASE_S, clock=clock, monotonic=clock.monotonic)
            registry = Registry(receipts=store, late_completion_s=0.05, renew_every_s=renew_every_s)
            registry.register(followup_spec(timeout_ms=20), stuck_write)
            self.addCleanup(store.close)
            self.addCleanup(registry.close)
            hosts.append((registry, store))
        (host_a, _), (host_b, store_b) = hosts
        resolve_on_b = lambda: host_b.resolve_unknown(  # noqa: E731
            "record_ticket_followup", "act-1", tenant=WRITER.tenant, happened=False)

        with self.assertLogs("agent_lab.leases", "WARNING"):
            first = host_a.invoke(followup_call(), actor=WRITER)
            self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
            wait_for(lambda: host_a.invoke(followup_call(), actor=WRITER).error.code == "outcome_unknown",
                     "host A's late window to end")
        clock.advance(CRASH_LEASE_S + 1)  # longer than a lease since host A's late window ended
        # Host A's handler still runs, so its keeper renews the lease: B sees the key in progress again.
        wait_for(lambda: store_b.lookup(KEY).status is ReservationStatus.IN_PROGRESS,
                 "host A to renew the lease of its running handler", patience_s=10.0)
        elsewhere = host_b.invoke(followup_call(), actor=WRITER)
        self.assertEqual((elsewhere.error.code, elsewhere.error.next_action),
                         ("idempotency_in_progress", NextAction.RETRY_LATER))
        self.assertIs(resolve_on_b(), False)  # "did not happen" would let B's retry run it a second time
        self.assertEqual(store_b.unresolved(), [])
        self.assertEqual(effects.effects, [])

        release.set()  # A's handler returns: its result is the receipt on every host, and the one effect
        wait_for(lambda: store_b.lookup(KEY).status is ReservationStatus.REPLAY, "host A's late receipt")
        self.assertTrue(host_b.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(len(effects.effects), 1)

    def test_a_closed_registry_keeps_renewing_the_lease_of_a_handler_that_still_runs_until_it_returns(self) -> None:
        effects = EffectLog()
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments):
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        clock = FakeClock()
        store = RenewCountingStore(lease_s=60, clock=clock, monotonic=clock.monotonic)
        registry = Registry(receipts=store, late_completion_s=0.05, renew_every_s=0.005)
        registry.register(followup_spec(timeout_ms=20), stuck_write)
        with self.assertLogs("agent_lab.leases", "WARNING"):
            registry.invoke(followup_call(), actor=WRITER)
            wait_for(lambda: registry.invoke(followup_call(), actor=WRITER).error.code == "outcome_unknown",
                     "the late window to end")
            registry.close()  # returns at once: the keeper goes on only for the handler that still runs
            clock.advance(61)
            wait_for(lambda: clock.now in store.renewed_at, "a renewal after the registry was closed", patience_s=10.0)
        self.assertIs(store.lookup(KEY).status, ReservationStatus.IN_PROGRESS)
        release.set()
        wait_for(lambda: store.lookup(KEY).status is ReservationStatus.REPLAY, "the late receipt")
        self.assertEqual(len(effects.effects), 1)


class PausedCompleteStore(InMemoryReceiptStore):
    """Its completions wait for `go` once `pause` is set, after noting that they started."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.pause, self.started, self.go = threading.Event(), threading.Event(), threading.Event()

    def complete(self, key, owner, record, **options):
        if self.pause.is_set():
            self.started.set()
            self.go.wait(PATIENCE_S)
        return super().complete(key, owner, record, **options)


class LateOutcomeOnItsWayTest(unittest.TestCase):
    def test_a_key_whose_late_handler_returned_cannot_be_resolved_while_its_receipt_is_being_stored(self) -> None:
        effects = EffectLog()
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments):
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        store = PausedCompleteStore(lease_s=60)
        self.addCleanup(store.go.set)
        registry = Registry(receipts=store, late_completion_s=0.05)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=20), stuck_write)
        with self.assertLogs("agent_lab.leases", "WARNING"):
            registry.invoke(followup_call(), actor=WRITER)
            wait_for(lambda: registry.invoke(followup_call(), actor=WRITER).error.code == "outcome_unknown",
                     "the late window to end")
        store.pause.set()
        release.set()  # the effect happens; its receipt is on its way to the store
        self.assertTrue(store.started.wait(PATIENCE_S))
        self.assertFalse(registry.resolve_unknown("record_ticket_followup", "act-1", tenant=WRITER.tenant,
                                                  happened=False))
        store.go.set()
        wait_for(lambda: store.lookup(KEY).status is ReservationStatus.REPLAY, "the late receipt")
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(len(effects.effects), 1)


class ExitingRenewStore(InMemoryReceiptStore):
    """Its first renewal raises SystemExit (a driver calling sys.exit in the keeper's thread, say)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.first_renewal = threading.Event()

    def renew(self, key, owner, **options):
        if not self.first_renewal.is_set():
            self.first_renewal.set()
            raise SystemExit(1)
        return super().renew(key, owner, **options)


class KeeperOutlivesItsStoreTest(unittest.TestCase):
    def test_a_process_exit_raised_by_a_renewal_does_not_end_the_keeper_and_the_late_window_still_ends(self) -> None:
        store = ExitingRenewStore(lease_s=60)
        effects = EffectLog()
        release = threading.Event()
        self.addCleanup(release.set)

        def stuck_write(arguments):
            store.first_renewal.wait(PATIENCE_S)  # the keeper has met the exit before the call times out
            release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        registry = Registry(receipts=store, renew_every_s=0.001, late_completion_s=0.05)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=200), stuck_write)
        with self.assertLogs("agent_lab.leases", "WARNING") as logs:
            first = registry.invoke(followup_call(), actor=WRITER)
            self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
            self.assertTrue(registry.wait_settled(PATIENCE_S))  # given up after the late window, by the keeper
        self.assertIn("SystemExit", "\n".join(logs.output))
        self.assertEqual(registry.invoke(followup_call(), actor=WRITER).error.code, "outcome_unknown")
        release.set()
        wait_for(lambda: store.lookup(KEY).status is ReservationStatus.REPLAY, "the late receipt")
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(len(effects.effects), 1)

    def test_a_keeper_that_died_anyway_is_started_again_by_the_next_hold(self) -> None:
        registry = Registry(receipts=InMemoryReceiptStore(lease_s=60), renew_every_s=0.001, late_completion_s=0.05)
        self.addCleanup(registry.close)
        holder = registry._holder
        holder.hold(ReceiptKey("acme", "t", "k1"), "fp", "owner-1", writes=True, tool="t")
        dead = holder._thread
        holder._thread = threading.Thread(target=lambda: None)  # a keeper thread that has ended
        holder._thread.start()
        holder._thread.join()
        holder.hold(ReceiptKey("acme", "t", "k2"), "fp", "owner-2", writes=True, tool="t")
        self.assertTrue(holder._thread.is_alive())
        self.assertIsNot(holder._thread, dead)


class IdleKeeperTest(unittest.TestCase):
    """A keeper thread holds its registry's key holder, and through it the store: it must not outlive
    the registry. It ends once no key has been held for `KEEPER_IDLE_S` (shortened here), and the next
    held key starts another, which keeps that key's lease as the first one did."""

    def setUp(self) -> None:
        patcher = mock.patch("agent_lab.leases.KEEPER_IDLE_S", 0.05)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_a_registry_dropped_without_close_leaves_no_thread_and_is_freed(self) -> None:
        effects = EffectLog()
        registry = Registry(receipts=InMemoryReceiptStore())
        registry.register(followup_spec(), effects.record_followup)
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)
        keeper = registry._holder._thread
        self.assertIsNotNone(keeper)
        dropped = weakref.ref(registry)
        del registry
        keeper.join(PATIENCE_S)
        self.assertFalse(keeper.is_alive(), "the keeper of a dropped registry still runs")
        gc.collect()
        self.assertIsNone(dropped(), "the dropped registry is still reachable")

    def test_a_keeper_ended_for_idleness_is_started_again_and_renews_the_next_key(self) -> None:
        clock = FakeClock()
        store = RenewCountingStore(lease_s=60, clock=clock, monotonic=clock.monotonic)
        effects = EffectLog()
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def long_write(arguments):
            if arguments["action_id"] == "act-2":
                started.set()
                release.wait(PATIENCE_S)
            return effects.record_followup(arguments)

        registry = Registry(receipts=store, renew_every_s=0.005)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=20_000), long_write)
        self.assertTrue(registry.invoke(followup_call(action_id="act-1"), actor=WRITER).ok)
        first_keeper = registry._holder._thread
        first_keeper.join(PATIENCE_S)
        self.assertFalse(first_keeper.is_alive())

        answers: list = []
        runner = threading.Thread(target=lambda: answers.append(
            registry.invoke(followup_call(action_id="act-2"), actor=WRITER)))
        runner.start()
        self.addCleanup(runner.join, PATIENCE_S)
        self.assertTrue(started.wait(PATIENCE_S))
        self.assertIsNot(registry._holder._thread, first_keeper)
        for _ in range(3):  # 150 s of store time, past the 60 s lease: renewed by the new keeper
            clock.advance(50)
            store.wait_for_renewal_at(clock.now)
        release.set()
        runner.join(PATIENCE_S)
        self.assertTrue(answers[0].ok)
        self.assertEqual(len(effects.effects), 2)


class LoneSurrogateKeyTest(unittest.TestCase):
    def test_a_lone_surrogate_idempotency_key_is_invalid_arguments_not_retry_later_for_every_store(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            sqlite_store = SqliteReceiptStore(os.path.join(directory, "receipts.sqlite3"))
            self.addCleanup(sqlite_store.close)
            for name, store in (("memory", InMemoryReceiptStore()), ("sqlite", sqlite_store)):
                with self.subTest(store=name):
                    effects = EffectLog()
                    registry = Registry(receipts=store)
                    self.addCleanup(registry.close)
                    registry.register(followup_spec(), effects.record_followup)
                    result = registry.invoke(followup_call(action_id="act-\ud800"), actor=WRITER)
                    self.assertEqual((result.error.code, result.outcome), ("invalid_arguments", Outcome.REJECTED))
                    self.assertFalse(result.error.retryable)
                    self.assertEqual(result.error.next_action, NextAction.FIX_ARGUMENTS)
                    self.assertEqual(result.error.details["violations"][0]["instance_path"], "/action_id")
                    self.assertEqual(effects.effects, [])
                    self.assertTrue(registry.invoke(followup_call(action_id="act-\u00e9"), actor=WRITER).ok)


if __name__ == "__main__":
    unittest.main()
