"""Real wall-clock deadlines: the caller stops waiting, a late write keeps its single effect.

Deadlines here are tens of milliseconds; the upper bounds asserted on elapsed time are far larger
(a second) and far below how long the handlers would block, so they bound behaviour without being
timing benchmarks.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import signal
import threading
import time
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.context import CallContext
from agent_lab.errors import Category, NextAction, Outcome, ToolFailure
from agent_lab.idempotency import InMemoryReceiptStore, ReceiptKey, ReservationStatus
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import READER, WRITER, followup_call, followup_spec

BLOCK_S = 5.0  # how long a blocked handler would take if nobody stopped waiting
GENEROUS_S = 1.0  # the caller must be back well within this


def read_spec(name: str = "slow_lookup", **options: Any) -> ToolSpec:
    options.setdefault("timeout_ms", 50)
    return ToolSpec(name=name, description="A slow read.", input_schema={"type": "object"}, **options)


def dict_blocking_in_items(entered: threading.Event, release: threading.Event, left: threading.Event) -> type:
    """A dict subclass whose `items()` (what reading a returned value calls) blocks until `release`,
    up to BLOCK_S: handler code that runs wherever the registry reads what the handler handed back."""

    class Blocking(dict):
        def items(self):  # type: ignore[override]
            entered.set()
            release.wait(BLOCK_S)
            left.set()
            return super().items()

    return Blocking


def datetime_blocking_in_utcoffset(entered: threading.Event, release: threading.Event,
                                   left: threading.Event) -> datetime.datetime:
    """A datetime whose tzinfo's `utcoffset()` (what writing it as RFC 3339 calls) blocks until
    `release`, up to BLOCK_S: handler code that runs where the registry writes an output as JSON."""

    class BlockingZone(datetime.tzinfo):
        def utcoffset(self, moment: object) -> datetime.timedelta:
            entered.set()
            release.wait(BLOCK_S)
            left.set()
            return datetime.timedelta(0)

    return datetime.datetime(2026, 8, 4, 9, 30, tzinfo=BlockingZone())


class DeadlineTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.release = threading.Event()  # lets blocked handlers finish when the test ends
        self.addCleanup(self.release.set)
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.threads_before = threading.active_count()

    def timed_invoke(self, call: ToolCall, actor=READER, **options):
        started = time.monotonic()
        result = self.registry.invoke(call, actor=actor, **options)
        return result, time.monotonic() - started

    def wait_until(self, condition, timeout: float = 5.0) -> None:
        end = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > end:
                self.fail("condition not reached in time")
            time.sleep(0.005)


class SyncDeadlineTest(DeadlineTestCase):
    def test_caller_returns_near_the_tool_timeout_while_the_handler_is_still_blocked(self) -> None:
        self.registry.register(read_spec(), lambda arguments: self.release.wait(BLOCK_S) and {})
        result, elapsed = self.timed_invoke(ToolCall("slow_lookup", {}))
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual(result.error.code, "tool_timeout")
        self.assertEqual((result.error.category, result.outcome), (Category.DEPENDENCY, Outcome.FAILED))
        self.assertFalse(result.error.retryable)

    def test_a_read_timeout_is_retryable_when_the_retry_policy_is_transient(self) -> None:
        self.registry.register(read_spec(retry_policy="transient"), lambda arguments: self.release.wait(BLOCK_S))
        result, _ = self.timed_invoke(ToolCall("slow_lookup", {}))
        self.assertTrue(result.error.retryable)
        self.assertEqual(result.error.next_action, NextAction.RETRY)

    def test_the_caller_deadline_wins_when_it_is_earlier_than_the_tool_timeout(self) -> None:
        seen: list[CallContext] = []

        def handler(arguments, ctx):
            seen.append(ctx)
            return self.release.wait(BLOCK_S)

        self.registry.register(read_spec(timeout_ms=60_000), handler)
        deadline = time.monotonic() + 0.05
        result, elapsed = self.timed_invoke(ToolCall("slow_lookup", {}), deadline=deadline)
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual(result.error.code, "tool_timeout")
        self.assertEqual(seen[0].deadline, deadline)

    def test_the_handler_is_told_when_the_caller_stopped_waiting(self) -> None:
        contexts: list[CallContext] = []

        def handler(arguments, ctx):
            contexts.append(ctx)
            ctx.cancel_event.wait(BLOCK_S)
            return {}

        self.registry.register(read_spec(), handler)
        self.timed_invoke(ToolCall("slow_lookup", {}))
        self.assertTrue(contexts[0].cancelled())
        self.assertEqual(contexts[0].remaining(), 0.0)

    def test_a_handler_that_finishes_in_time_is_not_disturbed(self) -> None:
        self.registry.register(read_spec(timeout_ms=5_000), lambda arguments: {"fine": True})
        result, _ = self.timed_invoke(ToolCall("slow_lookup", {}))
        self.assertEqual(result.output, {"fine": True})

    def test_a_job_that_never_got_a_worker_before_the_deadline_did_not_run(self) -> None:
        registry = Registry(max_workers=1)
        self.addCleanup(registry.close)
        ran: list[str] = []
        hog_started = threading.Event()

        def hog_handler(arguments):
            hog_started.set()
            return self.release.wait(BLOCK_S)

        registry.register(read_spec(name="hog", timeout_ms=60_000), hog_handler)
        registry.register(read_spec(name="victim"), lambda arguments: ran.append("victim"))
        hog = threading.Thread(target=registry.invoke, args=(ToolCall("hog", {}),), kwargs={"actor": READER})
        hog.start()
        self.addCleanup(hog.join)
        self.assertTrue(hog_started.wait(GENEROUS_S))  # the only worker is busy from now on
        result = registry.invoke(ToolCall("victim", {}), actor=READER)
        self.release.set()
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        hog.join()
        time.sleep(0.02)
        self.assertEqual(ran, [])

    def test_calls_refused_while_stuck_handlers_hold_every_worker_leave_nothing_queued_behind(self) -> None:
        registry = Registry(max_workers=2)
        self.addCleanup(registry.close)
        started = threading.Semaphore(0)

        def stuck(arguments):
            started.release()
            return self.release.wait(BLOCK_S)

        registry.register(read_spec(name="stuck", timeout_ms=10), stuck)
        registry.register(read_spec(name="victim", timeout_ms=5), lambda arguments: {})
        for _ in range(2):
            self.assertEqual(registry.invoke(ToolCall("stuck", {}), actor=READER).error.code, "tool_timeout")
        self.assertTrue(started.acquire(timeout=GENEROUS_S) and started.acquire(timeout=GENEROUS_S))
        for _ in range(30):
            result = registry.invoke(ToolCall("victim", {"payload": "x" * 10_000}), actor=READER)
            self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        gc.collect()
        waiting = [item for item in gc.get_objects() if isinstance(item, CallContext) and item.tool == "victim"]
        self.assertEqual(waiting, [])  # no refused call's context (or arguments) waits in a queue
        self.assertLessEqual(threading.active_count(), self.threads_before + 2)

    def test_a_write_whose_queued_job_close_drops_is_rejected_and_its_key_stays_free(self) -> None:
        # A job can sit in the executor's queue for a moment after a worker slot freed up (the worker is
        # still running the previous job's completion callbacks). close() drops such a job: nothing ran,
        # so its caller must hear "rejected" and the key must stay free, never an unknown receipt.
        class CompleteWaits(InMemoryReceiptStore):
            def __init__(self) -> None:
                super().__init__()
                self.completing, self.go_on = threading.Event(), threading.Event()

            def complete(self, *arguments: Any, **options: Any) -> bool:
                if not self.completing.is_set():  # the late write's receipt: stored on its worker
                    self.completing.set()
                    self.go_on.wait(BLOCK_S)
                return super().complete(*arguments, **options)

        store = CompleteWaits()
        self.addCleanup(store.go_on.set)
        registry = Registry(receipts=store, max_workers=1)
        self.addCleanup(registry.close)
        effects: list[str] = []

        def record(arguments: dict) -> dict:
            if arguments["action_id"] == "act-late":
                self.release.wait(BLOCK_S)
            effects.append(arguments["action_id"])
            return {"followup_id": "F-1"}

        registry.register(followup_spec(timeout_ms=10_000), record)
        late = registry.invoke(followup_call(action_id="act-late"), actor=WRITER, deadline=time.monotonic() + 0.05)
        self.assertEqual(late.error.code, "tool_timeout")
        self.release.set()
        self.assertTrue(store.completing.wait(BLOCK_S))  # the only worker is busy storing the late receipt
        results: list[Any] = []
        caller = threading.Thread(target=lambda: results.append(
            registry.invoke(followup_call(action_id="act-queued"), actor=WRITER)))
        caller.start()
        self.wait_until(lambda: registry._pool._executor._work_queue.qsize() == 1)  # its job is queued
        registry.close()
        caller.join(BLOCK_S)
        (dropped,) = results
        self.assertEqual(dropped.outcome, Outcome.REJECTED)
        self.assertNotIn("act-queued", effects)
        self.assertIsNone(store.lookup(ReceiptKey("acme", "record_ticket_followup", "act-queued")))

    def test_code_of_what_a_handler_hands_back_runs_before_the_deadline_not_after_it_on_the_callers_thread(self) -> None:
        # Writing a returned value as JSON or reading a ToolFailure's details can run the handler's code
        # (a tzinfo's utcoffset(), a dict subclass's items()). It runs on the worker, under the
        # deadline: the caller hears tool_timeout while that code is still blocked.
        entered, left = threading.Event(), threading.Event()
        Blocking = dict_blocking_in_items(entered, self.release, left)
        when = datetime_blocking_in_utcoffset(entered, self.release, left)

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(read_spec(timeout_ms=50), lambda arguments: {"rows": [when]})
        result = registry.invoke(ToolCall("slow_lookup", {}), actor=READER)
        self.assertTrue(entered.is_set())
        self.assertFalse(left.is_set())  # the caller did not wait for it
        self.assertEqual((result.error.code, result.outcome), ("tool_timeout", Outcome.FAILED))

        # A ToolFailure's details are copied through the dict's own storage, as outputs are: a dict
        # subclass's items() is never called, so it cannot block anyone.
        entered.clear()
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(read_spec(timeout_ms=50), lambda arguments: (_ for _ in ()).throw(
            ToolFailure("conflict", "The ticket is closed.", details={"why": Blocking(a=1)})))
        result = registry.invoke(ToolCall("slow_lookup", {}), actor=READER)
        self.assertFalse(entered.is_set())
        self.assertEqual((result.error.code, dict(result.error.details)), ("conflict", {"why": {"a": 1}}))

    def test_a_deadline_given_as_a_number_subclass_is_read_as_its_plain_value(self) -> None:
        class Elastic(float):
            """Claims to be later than any time and to leave an hour, whatever its value says."""

            def __lt__(self, other: object) -> bool:
                return False

            def __le__(self, other: object) -> bool:
                return False

            def __sub__(self, other: object) -> float:
                return 3600.0

        self.registry.register(read_spec(timeout_ms=60_000), lambda arguments: self.release.wait(BLOCK_S) and {})
        result, elapsed = self.timed_invoke(ToolCall("slow_lookup", {}), deadline=Elastic(time.monotonic() + 0.03))
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual(result.error.code, "tool_timeout")
        passed, _ = self.timed_invoke(ToolCall("slow_lookup", {}), deadline=Elastic(time.monotonic() - 1))
        self.assertEqual(passed.error.code, "deadline_exceeded")

    def test_a_caller_deadline_already_passed_runs_nothing(self) -> None:
        ran: list[str] = []
        self.registry.register(read_spec(), lambda arguments: ran.append("ran"))
        result, _ = self.timed_invoke(ToolCall("slow_lookup", {}), deadline=time.monotonic())
        self.assertEqual((result.error.code, result.outcome), ("deadline_exceeded", Outcome.REJECTED))
        self.assertEqual(ran, [])


class LateWriteTest(DeadlineTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.effects: list[str] = []

        def slow_write(arguments):
            self.release.wait(BLOCK_S)
            self.effects.append(arguments["action_id"])
            return {"followup_id": "F-1", "ticket_id": arguments["ticket_id"]}

        self.slow_write = slow_write
        self.registry.register(followup_spec(timeout_ms=50), slow_write)
        self.key = ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")

    def stored(self) -> bool:
        found = self.registry.receipts.lookup(self.key)
        return found is not None and found.status is ReservationStatus.REPLAY

    def test_a_timed_out_write_is_unknown_in_progress_then_replays_its_single_effect(self) -> None:
        first, elapsed = self.timed_invoke(followup_call(), actor=WRITER)
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        self.assertEqual(first.error.next_action, NextAction.LOOKUP_STATUS)
        self.assertFalse(first.error.retryable)

        while_running, _ = self.timed_invoke(followup_call(), actor=WRITER)
        self.assertEqual(while_running.error.code, "idempotency_in_progress")
        self.assertTrue(while_running.error.retryable)

        self.release.set()
        self.wait_until(self.stored)
        after, _ = self.timed_invoke(followup_call(), actor=WRITER)
        self.assertTrue(after.ok and after.replayed)
        self.assertEqual(after.output, {"followup_id": "F-1", "ticket_id": "T-1001"})
        self.assertEqual(self.effects, ["act-1"])

    def test_a_late_write_still_running_after_its_reservation_lease_expired_is_never_run_twice(self) -> None:
        now = [1_000_000.0]
        store = InMemoryReceiptStore(lease_s=60, clock=lambda: now[0], monotonic=lambda: now[0])
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        registry.register(followup_spec(timeout_ms=50), self.slow_write)
        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        now[0] += 3600  # the store's lease on the key has long expired; the handler is still running
        for call in (followup_call(), followup_call(note="Other.")):
            again = registry.invoke(call, actor=WRITER)
            self.assertIn(again.error.code, ("idempotency_in_progress", "idempotency_conflict"))
            self.assertEqual(again.outcome, Outcome.REJECTED)
        self.release.set()
        self.wait_until(lambda: (store.lookup(self.key) or None) is not None
                        and store.lookup(self.key).status is ReservationStatus.REPLAY)
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(self.effects, ["act-1"])

    def test_a_write_running_within_a_deadline_longer_than_the_lease_is_never_run_twice(self) -> None:
        now = [1_000_000.0]
        # The lease must cover the timeout plus the late-completion window (checked at registration);
        # the fake clock then jumps far past it while the handler runs.
        store = InMemoryReceiptStore(lease_s=700, clock=lambda: now[0], monotonic=lambda: now[0])
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        started = threading.Event()

        def long_write(arguments):
            started.set()
            return self.slow_write(arguments)

        registry.register(followup_spec(timeout_ms=600_000), long_write)  # ten minutes: longer than the lease
        first = threading.Thread(target=registry.invoke, args=(followup_call(),), kwargs={"actor": WRITER})
        first.start()
        self.addCleanup(first.join)
        self.assertTrue(started.wait(GENEROUS_S))
        now[0] += 3600
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.error.code, again.outcome), ("idempotency_in_progress", Outcome.REJECTED))
        self.release.set()
        first.join()
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(self.effects, ["act-1"])

    def test_a_call_interrupted_by_the_callers_ctrl_c_leaves_the_key_to_the_stores_lease(self) -> None:
        now = [1_000_000.0]
        store = InMemoryReceiptStore(lease_s=60, clock=lambda: now[0], monotonic=lambda: now[0])
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        attempts: list[str] = []
        started = threading.Event()
        self.addCleanup(self.release.set)

        def interrupted_once(arguments):
            attempts.append(arguments["action_id"])
            if len(attempts) == 1:
                started.set()  # the caller presses Ctrl-C while it waits for this write
                self.release.wait(BLOCK_S)
            return {"followup_id": "F-1"}

        def press_ctrl_c() -> None:
            if started.wait(BLOCK_S):
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        registry.register(followup_spec(timeout_ms=2000), interrupted_once)
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        with self.assertRaises(KeyboardInterrupt):  # the caller's own Ctrl-C passes through invoke
            registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual(registry.invoke(followup_call(), actor=WRITER).error.code, "idempotency_in_progress")
        now[0] += 3600  # the lease is over, with no receipt: the write may have happened, so it is unknown
        after = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((after.error.code, after.outcome), ("outcome_unknown", Outcome.UNKNOWN))
        self.assertEqual(attempts, ["act-1"])

    def test_a_late_write_with_other_arguments_under_the_same_key_is_a_conflict(self) -> None:
        self.timed_invoke(followup_call(), actor=WRITER)
        other, _ = self.timed_invoke(followup_call(note="Other."), actor=WRITER)
        self.assertEqual(other.error.code, "idempotency_conflict")

    def test_run_inline_reports_an_overrun_like_a_timeout_and_stores_the_real_result(self) -> None:
        registry = Registry(run_inline=True)
        self.addCleanup(registry.close)
        effects: list[str] = []

        def overrunning_write(arguments):
            time.sleep(0.08)
            effects.append(arguments["action_id"])
            return {"followup_id": "F-7"}

        registry.register(followup_spec(timeout_ms=20), overrunning_write)
        first = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        again = registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.output, again.replayed), ({"followup_id": "F-7"}, True))
        self.assertEqual(effects, ["act-1"])


class InlineDeadlineTest(DeadlineTestCase):
    def test_run_inline_reports_a_read_that_overran_its_deadline_as_a_timeout(self) -> None:
        registry = Registry(run_inline=True)
        self.addCleanup(registry.close)
        registry.register(read_spec(timeout_ms=10), lambda arguments: time.sleep(0.03) or {})
        registry.register(read_spec(name="fast", timeout_ms=5_000), lambda arguments: {"fast": True})
        self.assertEqual(registry.invoke(ToolCall("slow_lookup", {}), actor=READER).error.code, "tool_timeout")
        self.assertEqual(registry.invoke(ToolCall("fast", {}), actor=READER).output, {"fast": True})


class UnboundedTimeoutTest(DeadlineTestCase):
    """A timeout longer than the platform can wait for (threading.TIMEOUT_MAX) is simply a long wait."""

    def test_a_write_with_an_astronomical_timeout_runs_and_succeeds_once(self) -> None:
        effects: list[dict] = []

        def handler(arguments):
            time.sleep(0.01)  # the caller is really waiting when the handler returns
            effects.append(arguments)
            return {"ok": True}

        async def async_handler(arguments):
            await asyncio.sleep(0.01)
            effects.append(arguments)
            return {"ok": True}

        self.registry.register(followup_spec(timeout_ms=1e300), handler)
        self.registry.register(followup_spec(name="async_followup", timeout_ms=1e300), async_handler)
        for name in ("record_ticket_followup", "async_followup"):
            with self.subTest(tool=name):
                call = ToolCall(name, followup_call(action_id="act-" + name).arguments)
                result = self.registry.invoke(call, actor=WRITER)
                self.assertTrue(result.ok, result)
                self.assertTrue(asyncio.run(self.registry.ainvoke(call, actor=WRITER)).replayed)
        self.assertEqual(len(effects), 2)


class AsyncDeadlineTest(DeadlineTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.cancelled = threading.Event()

        async def sleepy(arguments):
            try:
                await asyncio.sleep(BLOCK_S)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return {}

        async def quick(arguments, ctx: CallContext):
            await asyncio.sleep(0)
            return {"tool": ctx.tool}

        self.registry.register(read_spec(name="sleepy"), sleepy)
        self.registry.register(read_spec(name="quick", timeout_ms=5_000), quick)

    def test_invoke_cancels_an_async_handler_at_the_deadline(self) -> None:
        result, elapsed = self.timed_invoke(ToolCall("sleepy", {}))
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual(result.error.code, "tool_timeout")
        self.assertTrue(self.cancelled.wait(GENEROUS_S))

    def test_code_of_what_an_async_handler_returns_runs_neither_on_the_callers_thread_nor_on_the_tools_loop(
            self) -> None:
        entered, left = threading.Event(), threading.Event()
        when = datetime_blocking_in_utcoffset(entered, self.release, left)

        async def handler(arguments):
            return {"rows": [when]}

        self.registry.register(read_spec(timeout_ms=50), handler)
        result = self.registry.invoke(ToolCall("slow_lookup", {}), actor=READER)
        self.assertEqual((result.error.code, result.outcome), ("tool_timeout", Outcome.FAILED))
        self.assertTrue(entered.wait(GENEROUS_S))
        # the caller did not wait for it, and the registry's other async tools are served meanwhile
        self.assertEqual(self.registry.invoke(ToolCall("quick", {}), actor=READER).output, {"tool": "quick"})
        self.assertFalse(left.is_set())

    def test_close_answers_an_async_call_it_cancels_instead_of_leaving_it_to_wait_for_its_deadline(self) -> None:
        started = threading.Event()

        async def handler(arguments):
            started.set()
            await asyncio.sleep(BLOCK_S * 10)
            return {}

        self.registry.register(read_spec(timeout_ms=600_000), handler)
        results: list[Any] = []
        caller = threading.Thread(target=lambda: results.append(
            self.registry.invoke(ToolCall("slow_lookup", {}), actor=READER)), daemon=True)
        caller.start()
        self.assertTrue(started.wait(BLOCK_S))
        self.registry.close()
        caller.join(BLOCK_S)  # its deadline is ten minutes away
        self.assertFalse(caller.is_alive())
        self.assertEqual(results[0].error.code, "tool_timeout")

    def test_invoke_runs_an_async_handler_with_its_context(self) -> None:
        result, _ = self.timed_invoke(ToolCall("quick", {}))
        self.assertEqual(result.output, {"tool": "quick"})

    def test_ainvoke_cancels_an_async_handler_at_the_deadline(self) -> None:
        async def scenario():
            started = time.monotonic()
            result = await self.registry.ainvoke(ToolCall("sleepy", {}), actor=READER)
            return result, time.monotonic() - started

        result, elapsed = asyncio.run(scenario())
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual(result.error.code, "tool_timeout")
        self.assertTrue(self.cancelled.is_set())

    def test_an_async_handler_that_ignores_its_cancellation_is_left_behind_at_the_deadline(self) -> None:
        async def stubborn(arguments):
            gives_up = time.monotonic() + BLOCK_S  # so that a failing test fails instead of hanging
            while not self.release.is_set() and time.monotonic() < gives_up:
                try:
                    await asyncio.sleep(0.005)
                except asyncio.CancelledError:
                    pass  # refuses to stop
            return {}

        self.registry.register(read_spec(name="stubborn"), stubborn)

        async def scenario():
            started = time.monotonic()
            result = await self.registry.ainvoke(ToolCall("stubborn", {}), actor=READER)
            elapsed = time.monotonic() - started
            self.release.set()  # let it end, or asyncio.run would wait for it when it closes the loop
            return result, elapsed

        for name, run in (("ainvoke", lambda: asyncio.run(scenario())),
                          ("invoke", lambda: self.timed_invoke(ToolCall("stubborn", {})))):
            with self.subTest(caller=name):
                self.release.clear()
                result, elapsed = run()
                self.assertLess(elapsed, GENEROUS_S)
                self.assertEqual((result.error.code, result.outcome), ("tool_timeout", Outcome.FAILED))

    def test_an_async_handler_that_raises_cancelled_error_itself_is_contained_not_a_cancelled_caller(self) -> None:
        async def gives_up(arguments):
            raise asyncio.CancelledError()

        self.registry.register(read_spec(name="gives_up"), gives_up)
        with self.assertLogs("agent_lab.execution", "WARNING"):
            results = [self.registry.invoke(ToolCall("gives_up", {}), actor=READER),
                       asyncio.run(self.registry.ainvoke(ToolCall("gives_up", {}), actor=READER))]
        for result in results:
            self.assertEqual((result.error.code, result.outcome), ("handler_exception", Outcome.FAILED))

    def test_a_cancelled_ainvoke_whose_write_returned_broken_output_still_records_and_settles_the_key(self) -> None:
        returned = threading.Event()
        audit: list[dict] = []
        self.registry.close()
        self.registry = Registry(audit=type("Sink", (), {"write": lambda _, r: audit.append(r), "close": lambda _: None})())
        self.addCleanup(self.registry.close)

        def write(arguments):
            returned.set()
            return {"followup_id": {1, 2}}  # a set: not JSON

        self.registry.register(followup_spec(timeout_ms=60_000), write)

        async def scenario():
            task = asyncio.ensure_future(self.registry.ainvoke(followup_call(), actor=WRITER))
            await asyncio.sleep(0)  # ainvoke submits the job and starts waiting
            returned.wait(GENEROUS_S)
            time.sleep(0.05)  # the job has finished, but the loop has not seen it yet
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(scenario())
        self.assertEqual([(record["outcome"], record["error_code"]) for record in audit], [("unknown", "invalid_tool_output")])
        lookup = self.registry.receipts.lookup(ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1"))
        self.assertEqual(lookup.status, ReservationStatus.REPLAY)

    def test_ainvoke_runs_sync_handlers_on_the_pool_without_blocking_the_loop(self) -> None:
        self.registry.register(read_spec(name="blocking"), lambda arguments: self.release.wait(BLOCK_S))
        ticks: list[int] = []

        async def ticker():
            for tick in range(3):
                ticks.append(tick)
                await asyncio.sleep(0.005)

        async def scenario():
            started = time.monotonic()
            result, _ = await asyncio.gather(self.registry.ainvoke(ToolCall("blocking", {}), actor=READER), ticker())
            return result, time.monotonic() - started

        result, elapsed = asyncio.run(scenario())
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual(result.error.code, "tool_timeout")
        self.assertEqual(ticks, [0, 1, 2])

    def test_ainvoke_keeps_a_late_sync_write_to_one_effect(self) -> None:
        effects: list[str] = []

        def slow_write(arguments):
            self.release.wait(BLOCK_S)
            effects.append(arguments["action_id"])
            return {"followup_id": "F-1"}

        self.registry.register(followup_spec(timeout_ms=30), slow_write)

        async def scenario():
            first = await self.registry.ainvoke(followup_call(), actor=WRITER)
            during = await self.registry.ainvoke(followup_call(), actor=WRITER)
            return first, during

        first, during = asyncio.run(scenario())
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        self.assertEqual(during.error.code, "idempotency_in_progress")
        self.release.set()
        key = ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")
        self.wait_until(lambda: (self.registry.receipts.lookup(key) or None) is not None
                        and self.registry.receipts.lookup(key).status is ReservationStatus.REPLAY)
        after = asyncio.run(self.registry.ainvoke(followup_call(), actor=WRITER))
        self.assertTrue(after.replayed)
        self.assertEqual(effects, ["act-1"])

    def test_an_async_write_cancelled_at_its_deadline_replays_unknown_instead_of_running_again(self) -> None:
        effects: list[str] = []

        async def slow_async_write(arguments):
            await asyncio.sleep(BLOCK_S)
            effects.append(arguments["action_id"])
            return {"followup_id": "F-1"}

        self.registry.register(followup_spec(timeout_ms=30), slow_async_write)
        first, elapsed = self.timed_invoke(followup_call(), actor=WRITER)
        self.assertLess(elapsed, GENEROUS_S)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        # answered at the deadline; the cancelled handler's end is its receipt, as a late pooled write's is
        self.assertTrue(self.registry.wait_settled(GENEROUS_S))
        again, _ = self.timed_invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.error.code, again.outcome, again.replayed), ("tool_timeout", Outcome.UNKNOWN, True))
        self.assertEqual(effects, [])

    def test_cancelling_the_ainvoke_caller_propagates_and_a_late_write_still_lands_once(self) -> None:
        effects: list[str] = []
        started = threading.Event()

        def slow_write(arguments):
            started.set()
            self.release.wait(BLOCK_S)
            effects.append(arguments["action_id"])
            return {"followup_id": "F-1"}

        self.registry.register(followup_spec(timeout_ms=60_000), slow_write)

        async def scenario():
            task = asyncio.ensure_future(self.registry.ainvoke(followup_call(), actor=WRITER))
            while not started.is_set():
                await asyncio.sleep(0.001)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(scenario())
        self.release.set()
        key = ReceiptKey(WRITER.tenant, "record_ticket_followup", "act-1")
        self.wait_until(lambda: getattr(self.registry.receipts.lookup(key), "status", None) is ReservationStatus.REPLAY)
        self.assertTrue(self.registry.invoke(followup_call(), actor=WRITER).replayed)
        self.assertEqual(effects, ["act-1"])

    def test_cancelling_ainvoke_while_the_write_still_waits_for_a_worker_frees_the_key(self) -> None:
        registry = Registry(max_workers=1)
        self.addCleanup(registry.close)
        hog_started = threading.Event()
        effects: list[str] = []

        def hog(arguments):
            hog_started.set()
            return self.release.wait(BLOCK_S) and {}

        registry.register(read_spec(name="hog", timeout_ms=60_000), hog)
        registry.register(followup_spec(timeout_ms=60_000), lambda arguments: effects.append("write") or {})
        hogger = threading.Thread(target=registry.invoke, args=(ToolCall("hog", {}),), kwargs={"actor": READER})
        hogger.start()
        self.addCleanup(hogger.join)
        self.assertTrue(hog_started.wait(GENEROUS_S))

        async def scenario():
            task = asyncio.ensure_future(registry.ainvoke(followup_call(), actor=WRITER))
            await asyncio.sleep(0.02)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(scenario())
        self.release.set()
        hogger.join()
        self.assertEqual(effects, [])
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)  # the key was released
        self.assertEqual(effects, ["write"])

    def test_ainvoke_with_a_sync_handler_that_finishes_returns_its_output(self) -> None:
        self.registry.register(read_spec(name="fast", timeout_ms=5_000), lambda arguments: {"fast": True})
        result = asyncio.run(self.registry.ainvoke(ToolCall("fast", {}), actor=READER))
        self.assertEqual(result.output, {"fast": True})


if __name__ == "__main__":
    unittest.main()
