"""should_retry: one test per row of its decision table, plus the budget and argument checks."""

import unittest

from agent_lab.calls import ToolResult
from agent_lab.errors import NextAction, Outcome, ToolError, ToolFailure
from agent_lab.retry import should_retry
from agent_lab.spec import Effect, RetryPolicy, ToolSpec

WRITE_SCHEMA = {
    "type": "object",
    "properties": {"action_id": {"type": "string"}, "title": {"type": "string"}},
    "required": ["action_id"],
}


def spec(*, effect=Effect.READ, key=False, policy=RetryPolicy.TRANSIENT):
    return ToolSpec(
        name="tool",
        description="A tool under test.",
        input_schema=WRITE_SCHEMA,
        effect=effect,
        idempotency_key="action_id" if key else None,
        retry_policy=policy,
    )


def failure(code, *, outcome=None, retryable=None, replayed=False):
    error = ToolError.from_code(code, retryable=retryable)
    from agent_lab.errors import CATALOGUE

    return ToolResult(
        ok=False, outcome=outcome or CATALOGUE[code].outcome, tool="tool", error=error, replayed=replayed
    )


def timed_out_write():
    """What the registry reports for a write that ran past its deadline: unknown, look it up."""
    error = ToolError.from_code("tool_timeout", retryable=False, next_action=NextAction.LOOKUP_STATUS)
    return ToolResult(ok=False, outcome=Outcome.UNKNOWN, tool="tool", error=error)


def domain_error(*, retryable, outcome=Outcome.FAILED):
    error = ToolFailure("rate_limited", "Slow down.", category="conflict", retryable=retryable).error
    return ToolResult(ok=False, outcome=outcome, tool="tool", error=error)


READ = spec()
READ_NEVER = spec(policy=RetryPolicy.NEVER)
WRITE_KEY = spec(effect=Effect.WRITE, key=True)
WRITE_KEY_NEVER = spec(effect=Effect.WRITE, key=True, policy=RetryPolicy.NEVER)
WRITE_NO_KEY = spec(effect=Effect.WRITE)
DESTRUCTIVE_KEY = spec(effect=Effect.DESTRUCTIVE, key=True)


class DecisionTableTest(unittest.TestCase):
    def test_row_1_no_retry_once_the_budget_is_spent(self):
        result = failure("unavailable")
        self.assertTrue(should_retry(result, READ, attempt=2, budget=3))
        self.assertFalse(should_retry(result, READ, attempt=3, budget=3))
        self.assertFalse(should_retry(result, READ, attempt=4, budget=3))
        self.assertFalse(should_retry(result, READ, attempt=1, budget=1))
        self.assertFalse(should_retry(result, READ, attempt=1, budget=0))

    def test_row_2_succeeded_results_are_never_retried(self):
        result = ToolResult(ok=True, outcome=Outcome.SUCCEEDED, tool="tool", output={"n": 1})
        self.assertFalse(should_retry(result, READ, attempt=1, budget=5))
        self.assertFalse(should_retry(result, WRITE_KEY, attempt=1, budget=5))

    def test_row_3_a_failed_result_without_an_error_is_not_retried(self):
        result = ToolResult(ok=False, outcome=Outcome.FAILED, tool="tool")
        self.assertFalse(should_retry(result, READ, attempt=1, budget=5))

    def test_row_4_a_replayed_result_is_not_retried_because_it_would_replay_again(self):
        result = failure("unavailable", replayed=True)
        self.assertFalse(should_retry(result, WRITE_KEY, attempt=1, budget=5))

    def test_row_5_dependency_errors_are_not_retried_when_the_policy_says_never(self):
        self.assertFalse(should_retry(failure("tool_timeout"), READ_NEVER, attempt=1, budget=5))
        self.assertFalse(should_retry(failure("unavailable"), READ_NEVER, attempt=1, budget=5))
        self.assertFalse(should_retry(failure("unavailable"), WRITE_KEY_NEVER, attempt=1, budget=5))

    def test_row_6_retryable_dependency_errors_are_retried_under_a_transient_policy(self):
        self.assertTrue(should_retry(failure("tool_timeout"), READ, attempt=1, budget=2))
        self.assertTrue(should_retry(failure("unavailable"), READ, attempt=1, budget=2))
        self.assertTrue(should_retry(failure("unavailable"), WRITE_NO_KEY, attempt=1, budget=2))

    def test_row_7_other_retryable_errors_with_a_known_outcome_are_retried_whatever_the_policy(self):
        in_progress = failure("idempotency_in_progress")
        self.assertIs(in_progress.outcome, Outcome.REJECTED)
        self.assertTrue(should_retry(in_progress, WRITE_KEY_NEVER, attempt=1, budget=2))
        self.assertTrue(should_retry(domain_error(retryable=True), READ_NEVER, attempt=1, budget=2))

    def test_row_8_errors_that_are_not_retryable_are_not_retried(self):
        for code in ("invalid_arguments", "permission_denied", "approval_required", "idempotency_conflict",
                     "deadline_exceeded", "handler_exception", "not_found", "invalid_cursor", "output_too_large"):
            with self.subTest(code=code):
                self.assertFalse(should_retry(failure(code), READ, attempt=1, budget=5))
                self.assertFalse(should_retry(failure(code), WRITE_KEY, attempt=1, budget=5))
        # A read timeout the registry marked not retryable (its policy is never) stays unretried.
        self.assertFalse(should_retry(failure("tool_timeout", retryable=False), READ, attempt=1, budget=5))

    def test_row_9_an_unknown_read_is_judged_like_a_known_failure(self):
        self.assertTrue(should_retry(failure("tool_timeout", outcome=Outcome.UNKNOWN), READ, attempt=1, budget=2))
        self.assertFalse(
            should_retry(failure("tool_timeout", outcome=Outcome.UNKNOWN), READ_NEVER, attempt=1, budget=2)
        )
        self.assertFalse(
            should_retry(failure("handler_exception", outcome=Outcome.UNKNOWN), READ, attempt=1, budget=2)
        )

    def test_row_10_an_unknown_write_without_an_idempotency_key_is_never_retried(self):
        self.assertFalse(should_retry(timed_out_write(), WRITE_NO_KEY, attempt=1, budget=5))
        retryable_unknown = failure("unavailable", outcome=Outcome.UNKNOWN)
        self.assertTrue(retryable_unknown.error.retryable)
        self.assertFalse(should_retry(retryable_unknown, WRITE_NO_KEY, attempt=1, budget=5))

    def test_row_11_an_unknown_write_with_a_key_is_not_retried_when_the_policy_says_never(self):
        self.assertFalse(should_retry(timed_out_write(), WRITE_KEY_NEVER, attempt=1, budget=5))
        retryable = domain_error(retryable=True, outcome=Outcome.UNKNOWN)
        self.assertFalse(should_retry(retryable, WRITE_KEY_NEVER, attempt=1, budget=5))

    def test_row_12_a_timed_out_write_with_a_key_is_retried_under_a_transient_policy(self):
        result = timed_out_write()
        self.assertFalse(result.error.retryable)  # the flag alone would say no
        self.assertTrue(should_retry(result, WRITE_KEY, attempt=1, budget=2))
        self.assertTrue(should_retry(result, DESTRUCTIVE_KEY, attempt=1, budget=2))

    def test_row_13_an_unknown_write_with_a_key_and_a_retryable_error_is_retried(self):
        result = domain_error(retryable=True, outcome=Outcome.UNKNOWN)
        self.assertTrue(should_retry(result, WRITE_KEY, attempt=1, budget=2))
        self.assertTrue(should_retry(result, DESTRUCTIVE_KEY, attempt=1, budget=2))

    def test_row_14_an_unknown_write_whose_error_is_not_retryable_is_not_retried(self):
        crashed = failure("handler_exception", outcome=Outcome.UNKNOWN)
        self.assertFalse(should_retry(crashed, WRITE_KEY, attempt=1, budget=5))
        self.assertFalse(should_retry(domain_error(retryable=False, outcome=Outcome.UNKNOWN), WRITE_KEY, 1, 5))


class RetryLoopThroughTheRegistryTest(unittest.TestCase):
    """A retry loop driven by should_retry never doubles a timed-out write that carries a key."""

    def test_timed_out_write_is_retried_until_its_late_result_replays_with_one_effect(self):
        import threading
        import time

        from agent_lab.calls import ToolCall
        from agent_lab.policy import Actor
        from agent_lab.registry import Registry

        effects = []
        release = threading.Event()

        def slow_write(arguments):
            release.wait(5)
            effects.append(arguments["action_id"])
            return {"done": True}

        write = ToolSpec(name="tool", description="A slow write.", input_schema=WRITE_SCHEMA, effect=Effect.WRITE,
                         idempotency_key="action_id", retry_policy=RetryPolicy.TRANSIENT, timeout_ms=30)
        call = ToolCall("tool", {"action_id": "act-0001", "title": "x"})
        seen = []
        with Registry() as registry:
            registry.register(write, slow_write)
            attempt, budget = 1, 200
            result = registry.invoke(call, actor=Actor(id="u", tenant="t"))
            seen.append(result.error.code)
            release.set()  # the first attempt's handler finishes late, after its caller gave up
            while should_retry(result, write, attempt, budget):
                time.sleep(0.002)
                attempt += 1
                result = registry.invoke(call, actor=Actor(id="u", tenant="t"))
                seen.append(result.error.code if result.error else None)
        self.assertEqual(seen[0], "tool_timeout")
        self.assertTrue(result.ok and result.replayed, seen)
        self.assertEqual(set(seen[1:-1]), set(seen[1:-1]) & {"idempotency_in_progress"})
        self.assertEqual(effects, ["act-0001"])


class ArgumentsTest(unittest.TestCase):
    def test_attempt_below_one_or_negative_budget_is_refused(self):
        result = failure("unavailable")
        for attempt, budget in ((0, 3), (-1, 3), (1, -1), (True, 3), (1, 2.0), ("1", 3)):
            with self.subTest(attempt=attempt, budget=budget), self.assertRaises(ValueError):
                should_retry(result, READ, attempt, budget)  # type: ignore[arg-type]

    def test_a_retry_loop_makes_at_most_budget_attempts(self):
        attempts = 0
        result = failure("unavailable")
        while True:
            attempts += 1
            if not should_retry(result, READ, attempts, budget=4):
                break
        self.assertEqual(attempts, 4)


if __name__ == "__main__":
    unittest.main()
