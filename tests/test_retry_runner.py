"""Retrier: repeats exactly what should_retry allows, with the same idempotency key, one deadline for
the whole sequence, the tool's retry_after honoured and every attempt numbered in the audit.

The world counts effects; the runner's clock and sleep are injected, so no test waits on real time
except for a tool's own deadline (a handler blocked on an event, released by the injected sleep).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import unittest
from typing import Any

from agent_lab import (
    Actor,
    Backoff,
    MemoryAuditSink,
    Registry,
    Retrier,
    ToolCall,
    ToolFailure,
    ToolSpec,
    invoke_with_retries,
)
from agent_lab.errors import NextAction, Outcome

ACTOR = Actor(id="agent-1", tenant="shop", permissions={"refunds"})
NO_JITTER = Backoff(first_s=0.1, factor=2.0, max_s=5.0, jitter=0.0)
KEYED_SCHEMA = {
    "type": "object",
    "properties": {"refund_id": {"type": "string"}, "cents": {"type": "integer"}},
    "required": ["refund_id", "cents"],
    "additionalProperties": False,
}


def refund_spec(**overrides: Any) -> ToolSpec:
    options: dict[str, Any] = dict(
        name="refund", description="Refund an order once per refund_id.", input_schema=KEYED_SCHEMA,
        required_permission="refunds", effect="write", idempotency_key="refund_id", retry_policy="transient",
        timeout_ms=100,
    )
    options.update(overrides)
    return ToolSpec(**options)


class SlowOnceWorld:
    """A refund service whose first call hangs past the tool's deadline until `release` is set."""

    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.finished = threading.Event()  # the first (slow) call has taken effect and returned
        self.calls = 0
        self._lock = threading.Lock()

    def refund(self, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.release.wait(10)
        with self._lock:
            self.effects.append(dict(arguments))
        self.finished.set()
        return {"refunded": arguments["cents"]}


class FakeTime:
    """A clock the runner reads and a sleep that advances it (and may do something on each sleep)."""

    def __init__(self, on_sleep: Any = None) -> None:
        self.now = 1000.0
        self.waits: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.waits))


def registry_with(spec: ToolSpec, handler: Any, **options: Any) -> tuple[Registry, MemoryAuditSink]:
    audit = MemoryAuditSink()
    registry = Registry(audit=audit, **options)
    registry.register(spec, handler)
    return registry, audit


CALL = ToolCall("refund", {"refund_id": "rf-1", "cents": 1250}, call_id="call-refund-1")


class TimedOutWriteTest(unittest.TestCase):
    def test_a_keyed_write_that_timed_out_once_is_retried_and_runs_once(self) -> None:
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(), world.refund)
        self.addCleanup(registry.close)

        def on_sleep(n: int) -> None:  # the late handler finishes and its receipt is stored meanwhile
            world.release.set()
            registry.wait_settled(10)

        fake = FakeTime(on_sleep)
        result = Retrier(attempts=3, backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, CALL, actor=ACTOR)

        self.assertTrue(result.ok)
        self.assertTrue(result.replayed)  # the second attempt was answered from the first one's receipt
        self.assertEqual(result.output, {"refunded": 1250})
        self.assertEqual(len(world.effects), 1)
        self.assertEqual(world.calls, 1)
        self.assertEqual(fake.waits, [0.1])
        attempts = [(r["attempt"], r["outcome"], r["error_code"], r["replayed"]) for r in audit.records]
        self.assertEqual(attempts, [(1, "unknown", "tool_timeout", False), (2, "succeeded", None, True)])
        self.assertEqual({r["call_id"] for r in audit.records}, {"call-refund-1"})

    def test_a_retry_while_the_first_run_still_holds_the_key_waits_and_replays(self) -> None:
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(), world.refund)
        self.addCleanup(registry.close)

        def on_sleep(n: int) -> None:
            if n == 2:  # still running during attempt 2: idempotency_in_progress; then it finishes
                world.release.set()
                registry.wait_settled(10)

        fake = FakeTime(on_sleep)
        result = Retrier(attempts=4, backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, CALL, actor=ACTOR)

        self.assertTrue(result.ok and result.replayed)
        self.assertEqual(len(world.effects), 1)
        self.assertEqual([r["error_code"] for r in audit.records], ["tool_timeout", "idempotency_in_progress", None])
        self.assertEqual([r["attempt"] for r in audit.records], [1, 2, 3])
        self.assertEqual(fake.waits, [0.1, 0.2])

    def test_a_timed_out_write_without_an_idempotency_key_is_not_retried(self) -> None:
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(idempotency_key=None), world.refund)
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(attempts=5, backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, CALL, actor=ACTOR)
        world.release.set()
        world.finished.wait(10)

        self.assertEqual((result.outcome, result.error.code if result.error else None), (Outcome.UNKNOWN, "tool_timeout"))
        self.assertEqual(result.error.next_action if result.error else None, NextAction.LOOKUP_STATUS)
        self.assertEqual(fake.waits, [])
        self.assertEqual(world.calls, 1)
        self.assertEqual([r["attempt"] for r in audit.records], [1])

    def test_a_timed_out_write_whose_policy_says_never_is_not_retried(self) -> None:
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(retry_policy="never"), world.refund)
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(attempts=5, clock=fake.clock, sleep=fake.sleep).invoke(registry, CALL, actor=ACTOR)
        world.release.set()

        self.assertEqual(result.outcome, Outcome.UNKNOWN)
        self.assertEqual(len(audit.records), 1)

    def test_outcome_unknown_after_the_late_window_is_not_retried(self) -> None:
        """No late-completion window: once the deadline passed, the key cannot say what happened, so
        the second attempt answers outcome_unknown (look it up) and the runner stops there."""
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(), world.refund, late_completion_s=0)
        self.addCleanup(registry.close)
        fake = FakeTime(lambda n: registry.wait_settled(10))  # the registry gives the key up as unknown

        with self.assertLogs("agent_lab.leases", "WARNING"):  # "still running after its late-completion window"
            result = Retrier(attempts=5, backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
                registry, CALL, actor=ACTOR)
        world.release.set()
        world.finished.wait(10)

        self.assertEqual(result.error.code if result.error else None, "outcome_unknown")
        self.assertEqual(result.error.next_action if result.error else None, NextAction.LOOKUP_STATUS)
        self.assertEqual([r["error_code"] for r in audit.records], ["tool_timeout", "outcome_unknown"])
        self.assertEqual(world.calls, 1)
        self.assertEqual(len(world.effects), 1)

    def test_the_async_runner_retries_the_same_write_once_too(self) -> None:
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(), world.refund)
        self.addCleanup(registry.close)
        waits: list[float] = []

        async def async_sleep(seconds: float) -> None:
            waits.append(seconds)
            world.release.set()
            await asyncio.get_running_loop().run_in_executor(None, registry.wait_settled, 10)

        retrier = Retrier(attempts=3, backoff=NO_JITTER, async_sleep=async_sleep)
        result = asyncio.run(retrier.ainvoke(registry, CALL, actor=ACTOR))

        self.assertTrue(result.ok and result.replayed)
        self.assertEqual(len(world.effects), 1)
        self.assertEqual([r["attempt"] for r in audit.records], [1, 2])


class Flaky:
    """A read that is unavailable `failures` times (asking for `retry_after_s`), then answers."""

    def __init__(self, failures: int, retry_after_s: Any = None) -> None:
        self.failures = failures
        self.retry_after_s = retry_after_s
        self.calls = 0

    def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            details = {} if self.retry_after_s is None else {"retry_after_s": self.retry_after_s}
            raise ToolFailure("unavailable", "The rates service is down.", details=details)
        return {"rate": 1.1}


def rate_spec(**overrides: Any) -> ToolSpec:
    options: dict[str, Any] = dict(
        name="get_rate", description="Read today's exchange rate.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        retry_policy="transient",
    )
    options.update(overrides)
    return ToolSpec(**options)


RATE = ToolCall("get_rate", {})


class RetryableFailureTest(unittest.TestCase):
    def test_an_unavailable_dependency_is_retried_with_exponential_backoff(self) -> None:
        flaky = Flaky(failures=2)
        registry, audit = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(attempts=3, backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, RATE, actor=ACTOR)

        self.assertTrue(result.ok)
        self.assertEqual(fake.waits, [0.1, 0.2])
        self.assertEqual([r["attempt"] for r in audit.records], [1, 2, 3])

    def test_the_attempts_of_a_call_without_an_id_share_one_in_the_audit(self) -> None:
        registry, audit = registry_with(rate_spec(), Flaky(failures=1))
        self.addCleanup(registry.close)
        fake = FakeTime()

        Retrier(backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(registry, RATE, actor=ACTOR)

        self.assertEqual([r["attempt"] for r in audit.records], [1, 2])
        self.assertEqual(len({r["call_id"] for r in audit.records}), 1)

    def test_the_wait_is_at_least_what_the_tool_asked_for_in_retry_after(self) -> None:
        flaky = Flaky(failures=1, retry_after_s=1.5)
        registry, _ = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(registry, RATE, actor=ACTOR)

        self.assertTrue(result.ok)
        self.assertEqual(fake.waits, [1.5])

    def test_a_retry_after_longer_than_the_cap_ends_the_sequence(self) -> None:
        flaky = Flaky(failures=1, retry_after_s=3600)
        registry, _ = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(max_retry_after_s=60, clock=fake.clock, sleep=fake.sleep).invoke(registry, RATE, actor=ACTOR)

        self.assertEqual(result.error.code if result.error else None, "unavailable")
        self.assertEqual((fake.waits, flaky.calls), ([], 1))

    def test_a_retry_after_that_is_not_a_number_is_ignored(self) -> None:
        for junk in ("soon", float("nan"), -1, True):
            with self.subTest(junk=junk):
                flaky = Flaky(failures=1, retry_after_s=junk)
                registry, _ = registry_with(rate_spec(), flaky)
                fake = FakeTime()
                result = Retrier(backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
                    registry, RATE, actor=ACTOR)
                registry.close()
                self.assertTrue(result.ok)
                self.assertEqual(fake.waits, [0.1])

    def test_the_sequence_stops_before_a_wait_that_would_pass_its_deadline(self) -> None:
        flaky = Flaky(failures=10)
        registry, audit = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        fake = FakeTime()
        backoff = Backoff(first_s=0.4, factor=2.0, max_s=10, jitter=0)

        result = Retrier(attempts=10, backoff=backoff, timeout_s=1.0, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, RATE, actor=ACTOR)

        # t=0 attempt 1, wait 0.4; t=0.4 attempt 2; a wait of 0.8 would end at 1.2, past the deadline.
        self.assertEqual(result.error.code if result.error else None, "unavailable")
        self.assertEqual(fake.waits, [0.4])
        self.assertEqual(flaky.calls, 2)
        self.assertEqual(len(audit.records), 2)

    def test_a_caller_deadline_already_passed_still_answers_with_one_refused_attempt(self) -> None:
        flaky = Flaky(failures=0)
        registry, audit = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(clock=fake.clock, sleep=fake.sleep).invoke(registry, RATE, actor=ACTOR, deadline=fake.now - 1)

        self.assertEqual(result.error.code if result.error else None, "deadline_exceeded")
        self.assertEqual((flaky.calls, fake.waits, len(audit.records)), (0, [], 1))

    def test_jitter_only_shortens_the_wait(self) -> None:
        flaky = Flaky(failures=1)
        registry, _ = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        fake = FakeTime()
        backoff = Backoff(first_s=1.0, factor=2.0, max_s=5, jitter=0.5)

        Retrier(backoff=backoff, clock=fake.clock, sleep=fake.sleep, draw=lambda: 1.0).invoke(registry, RATE, actor=ACTOR)

        self.assertEqual(fake.waits, [0.5])

    def test_a_refusal_a_retry_cannot_fix_is_not_repeated(self) -> None:
        flaky = Flaky(failures=0)
        registry, audit = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)

        result = invoke_with_retries(registry, ToolCall("get_rate", {"extra": 1}), actor=ACTOR, attempts=5)

        self.assertEqual(result.error.code if result.error else None, "invalid_arguments")
        self.assertEqual(len(audit.records), 1)

    def test_a_dependency_failure_of_a_tool_whose_policy_is_never_is_not_retried(self) -> None:
        flaky = Flaky(failures=1)
        registry, audit = registry_with(rate_spec(retry_policy="never"), flaky)
        self.addCleanup(registry.close)

        result = invoke_with_retries(registry, RATE, actor=ACTOR, attempts=5)

        self.assertEqual(result.error.code if result.error else None, "unavailable")
        self.assertEqual(flaky.calls, 1)


class NeverRaisesTest(unittest.TestCase):
    def test_a_sleep_that_raises_ends_the_sequence_with_the_last_result(self) -> None:
        registry, _ = registry_with(rate_spec(), Flaky(failures=3))
        self.addCleanup(registry.close)

        def broken_sleep(seconds: float) -> None:
            raise RuntimeError("no sleep for you")

        result = Retrier(sleep=broken_sleep).invoke(registry, RATE, actor=ACTOR)

        self.assertEqual(result.error.code if result.error else None, "unavailable")

    def test_a_clock_that_breaks_fails_closed(self) -> None:
        """With a deadline to keep and no reading of the time, nothing runs: the one attempt is refused."""
        flaky = Flaky(failures=3)
        registry, audit = registry_with(rate_spec(), flaky)
        self.addCleanup(registry.close)
        readings = iter([1000.0])

        def clock() -> float:
            return next(readings, float("nan"))

        result = Retrier(timeout_s=5, clock=clock, sleep=lambda s: None).invoke(registry, RATE, actor=ACTOR)

        self.assertEqual(result.error.code if result.error else None, "deadline_exceeded")
        self.assertEqual((flaky.calls, len(audit.records)), (0, 1))

    def test_junk_from_the_jitter_draw_counts_as_no_jitter(self) -> None:
        registry, _ = registry_with(rate_spec(), Flaky(failures=1))
        self.addCleanup(registry.close)
        fake = FakeTime()

        result = Retrier(backoff=Backoff(first_s=0.3, jitter=1.0), clock=fake.clock, sleep=fake.sleep,
                         draw=lambda: float("nan")).invoke(registry, RATE, actor=ACTOR)

        self.assertTrue(result.ok)
        self.assertEqual(fake.waits, [0.3])

    def test_an_unknown_tool_is_answered_once(self) -> None:
        registry, audit = registry_with(rate_spec(), Flaky(failures=0))
        self.addCleanup(registry.close)

        result = invoke_with_retries(registry, ToolCall("no_such_tool", {}), actor=ACTOR)

        self.assertEqual(result.error.code if result.error else None, "tool_not_found")
        self.assertEqual(len(audit.records), 1)

    def test_bad_settings_are_refused_when_the_runner_is_built(self) -> None:
        for options in ({"attempts": 0}, {"attempts": True}, {"timeout_s": float("inf")}, {"max_retry_after_s": -1}):
            with self.subTest(options=options), self.assertRaises(ValueError):
                Retrier(**options)
        for options in ({"first_s": -1}, {"jitter": 2}, {"factor": float("nan")}):
            with self.subTest(options=options), self.assertRaises(ValueError):
                Backoff(**options)


class AuditAttemptTest(unittest.TestCase):
    def test_a_lone_invoke_records_no_attempt_number_and_junk_is_recorded_as_none(self) -> None:
        registry, audit = registry_with(rate_spec(), Flaky(failures=0))
        self.addCleanup(registry.close)

        registry.invoke(RATE, actor=ACTOR)
        registry.invoke(RATE, actor=ACTOR, attempt=2)
        registry.invoke(RATE, actor=ACTOR, attempt=True)  # type: ignore[arg-type]
        registry.invoke(RATE, actor=ACTOR, attempt=0)

        self.assertEqual([r["attempt"] for r in audit.records], [None, 2, None, None])


class CallerArgumentsTest(unittest.TestCase):
    """The runner sends the arguments as they were when it was given the call, whatever the caller does
    to its own dict meanwhile (another thread, or the code that waits between attempts)."""

    def test_a_caller_that_changes_its_arguments_between_attempts_changes_neither_the_call_nor_its_key(self) -> None:
        world = SlowOnceWorld()
        registry, audit = registry_with(refund_spec(), world.refund)
        self.addCleanup(registry.close)
        arguments = {"refund_id": "rf-1", "cents": 1250}

        def on_sleep(n: int) -> None:  # the first refund finishes; the caller reuses its dict for another
            world.release.set()
            registry.wait_settled(10)
            arguments.update(refund_id="rf-2", cents=9999)

        fake = FakeTime(on_sleep)
        result = Retrier(attempts=3, backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, ToolCall("refund", arguments), actor=ACTOR)

        self.assertTrue(result.ok and result.replayed)  # attempt 2 is the same call: answered from attempt 1
        self.assertEqual(result.output, {"refunded": 1250})
        self.assertEqual(world.effects, [{"refund_id": "rf-1", "cents": 1250}])  # one refund, never rf-2's
        self.assertEqual(len({record["fingerprint"] for record in audit.records}), 1)

    def test_a_change_deep_inside_the_arguments_does_not_reach_a_later_attempt(self) -> None:
        seen: list[Any] = []
        flaky = Flaky(failures=1)

        def handler(arguments: dict[str, Any]) -> dict[str, Any]:
            seen.append(arguments["currencies"][:])
            return flaky(arguments)

        spec = rate_spec(input_schema={"type": "object", "properties": {"currencies": {
            "type": "array", "items": {"type": "string"}}}, "additionalProperties": False})
        registry, _ = registry_with(spec, handler)
        self.addCleanup(registry.close)
        currencies = ["EUR"]
        fake = FakeTime(lambda n: currencies.append("GBP"))

        result = Retrier(backoff=NO_JITTER, clock=fake.clock, sleep=fake.sleep).invoke(
            registry, ToolCall("get_rate", {"currencies": currencies}), actor=ACTOR)

        self.assertTrue(result.ok)
        self.assertEqual(seen, [["EUR"], ["EUR"]])

    def test_arguments_that_are_not_json_are_refused_once_and_the_runner_never_raises(self) -> None:
        class Hostile:
            @property  # type: ignore[misc]
            def __class__(self) -> Any:  # looking at it runs its code, which raises
                raise RuntimeError("boom")

        registry, audit = registry_with(rate_spec(), Flaky(failures=0))
        self.addCleanup(registry.close)
        for arguments, code in (({"when": (2026, 1)}, "invalid_arguments"), ({"x": Hostile()}, "internal_error")):
            with self.subTest(code=code):
                with self.assertLogs("agent_lab", "DEBUG") if code == "internal_error" else contextlib.nullcontext():
                    result = Retrier(backoff=NO_JITTER, clock=FakeTime().clock).invoke(
                        registry, ToolCall("get_rate", arguments), actor=ACTOR)
                self.assertEqual(result.error.code if result.error else None, code)
        self.assertEqual(len(audit.records), 2)  # each answered once


if __name__ == "__main__":
    unittest.main()
