"""The check of what a handler hands back counts against the call's deadline, wherever it runs.

A call is on time only if its handler *and* the check of its output (the copy, the size bound, the
output schema) end by the deadline. A check that ends later answers `tool_timeout`: a read's result is
dropped (outcome failed), a write is outcome unknown with `lookup_status`, and since its effect did
happen, its real result becomes the key's receipt, so the same key replays it and never runs again.

Each test makes the run end past the deadline without measuring time: the output holds a dict subclass
whose `items()` (handler code the check runs when it reads a value that is not plain JSON) waits until
the deadline has passed, or the handler keeps the interpreter lock past it, as `re` does while it
backtracks, so that the waiting caller can only look once the job is done.
"""

from __future__ import annotations

import asyncio
import datetime
import sys
import threading
import time
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.errors import NextAction, Outcome, ToolFailure
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import READER, WRITER, EffectLog, followup_call, followup_spec

OVERRUN_S = 0.05  # how far past the deadline the check ends
GENEROUS_S = 2.0


def wait_past(deadline: float, *, spin: bool = False) -> None:
    """Return once `deadline` has passed by OVERRUN_S. `spin`: in a Python loop that never lets go of
    the interpreter lock under a long switch interval (see `holding_the_lock`), instead of sleeping."""
    until = deadline + OVERRUN_S
    if spin:
        while time.monotonic() < until:
            pass
    else:
        time.sleep(max(0.0, until - time.monotonic()))


def late_output(deadline: float, *, spin: bool = False, broken: bool = False) -> dict:
    """An output whose check ends past `deadline`: it holds a datetime whose tzinfo's `utcoffset()` (what
    writing it as RFC 3339 calls, during the output's copy and check) waits past the deadline. `broken`:
    a NaN follows it, so the check, once it gets there, finds the output is not JSON."""

    class LateZone(datetime.tzinfo):
        def utcoffset(self, moment: object) -> datetime.timedelta:
            wait_past(deadline, spin=spin)
            return datetime.timedelta(0)

    rows: list = [datetime.datetime(2026, 8, 4, 9, 30, tzinfo=LateZone())]
    return {"rows": rows + [float("nan")] if broken else rows}


class holding_the_lock:
    """A switch interval so long that a thread running Python code keeps the interpreter lock until it
    blocks: the waiting caller cannot wake at its deadline, as when `re` backtracks on another thread."""

    def __enter__(self) -> None:
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(30.0)

    def __exit__(self, *exc_info: object) -> None:
        sys.setswitchinterval(self.interval)


def read_spec(**options: Any) -> ToolSpec:
    options.setdefault("timeout_ms", 200)
    options.setdefault("name", "lookup")
    return ToolSpec(description="A read.", input_schema={"type": "object"}, output_schema={"type": "object"},
                    **options)


class OutputCheckCountsAgainstTheDeadlineTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)

    def assert_read_timed_out(self, result) -> None:
        self.assertEqual((result.error.code if result.error else None, result.outcome),
                         ("tool_timeout", Outcome.FAILED))
        self.assertIsNone(result.output)

    def test_a_pooled_check_that_holds_the_interpreter_lock_past_the_deadline_is_a_timeout(self) -> None:
        # The case: re held the GIL in the check, so the caller woke after the job was done and
        # took it for on time.
        self.registry.register(read_spec(), lambda arguments, ctx: late_output(ctx.deadline, spin=True))
        with holding_the_lock():
            result = self.registry.invoke(ToolCall("lookup", {}), actor=READER)
        self.assert_read_timed_out(result)

    def test_a_check_on_the_tools_loop_that_ends_past_the_deadline_is_a_timeout(self) -> None:
        async def handler(arguments, ctx):
            return late_output(ctx.deadline)

        self.registry.register(read_spec(), handler)
        started = time.monotonic()
        result = self.registry.invoke(ToolCall("lookup", {}), actor=READER)
        self.assert_read_timed_out(result)
        self.assertLess(time.monotonic() - started, GENEROUS_S)

    def test_a_check_under_ainvoke_that_ends_past_the_deadline_is_a_timeout(self) -> None:
        async def handler(arguments, ctx):
            return late_output(ctx.deadline)

        self.registry.register(read_spec(), handler)
        result = asyncio.run(self.registry.ainvoke(ToolCall("lookup", {}), actor=READER))
        self.assert_read_timed_out(result)

    def test_a_check_that_ends_in_time_is_on_time(self) -> None:
        async def handler(arguments, ctx):
            return {"rows": [1]}

        self.registry.register(read_spec(timeout_ms=5_000), handler)
        for result in (self.registry.invoke(ToolCall("lookup", {}), actor=READER),
                       asyncio.run(self.registry.ainvoke(ToolCall("lookup", {}), actor=READER))):
            self.assertEqual((result.ok, result.output), (True, {"rows": [1]}))

    def test_a_pooled_write_that_ends_late_is_unknown_and_its_real_result_becomes_the_receipt(self) -> None:
        effects = EffectLog()

        def write(arguments, ctx):
            output = effects.record_followup(arguments)
            wait_past(ctx.deadline, spin=True)  # the effect happened; the caller cannot look until now
            return output

        self.registry.register(followup_spec(timeout_ms=200), write)
        with holding_the_lock():
            first = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        self.assertEqual(first.error.next_action, NextAction.LOOKUP_STATUS)
        self.assertTrue(self.registry.wait_settled(GENEROUS_S))
        again = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.replayed, again.ok, again.output), (True, True, {"followup_id": "F-1",
                                                                                "ticket_id": "T-1001"}))
        self.assertEqual(len(effects.effects), 1)

    def test_an_async_write_whose_check_ends_late_is_unknown_and_replays_what_the_check_found(self) -> None:
        effects = EffectLog()

        async def write(arguments, ctx):
            effects.record_followup(arguments)
            return late_output(ctx.deadline, broken=True)  # broken output, found broken past the deadline

        self.registry.register(followup_spec(timeout_ms=200), write)
        for number, run in enumerate(("invoke", "ainvoke")):
            with self.subTest(run=run):
                call = followup_call(action_id=f"act-{run}")
                if run == "invoke":
                    first = self.registry.invoke(call, actor=WRITER)
                else:
                    first = asyncio.run(self.registry.ainvoke(call, actor=WRITER))
                self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
                self.assertTrue(self.registry.wait_settled(GENEROUS_S))
                again = self.registry.invoke(call, actor=WRITER)
                self.assertTrue(again.replayed)
                self.assertEqual((again.error.code, again.outcome), ("invalid_tool_output", Outcome.UNKNOWN))
                self.assertEqual(len(effects.effects), number + 1)  # the replay ran nothing

class HeldCheck:
    """Handler code that the output check runs (a tzinfo's `utcoffset`, a str's `__hash__`), held until
    the test lets it go: `ended` is set once it returns. A check that holds its caller is let go only by
    HOLD_S running out, after which the answer comes, so `ended` set at the answer means the caller was
    held by the check; unset, the caller was answered while the check still ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.ended = threading.Event()

    def hold(self) -> None:
        self.entered.set()
        self.release.wait(HOLD_S)
        self.ended.set()

    def output(self, **members: Any) -> dict:
        """An output with a datetime whose tzinfo's `utcoffset()` (what writing it as RFC 3339 calls) is held."""
        held = self

        class HeldZone(datetime.tzinfo):
            def utcoffset(self, moment: object) -> datetime.timedelta:
                held.hold()
                return datetime.timedelta(0)

        return {**members, "at": datetime.datetime(2026, 8, 4, 9, 30, tzinfo=HeldZone())}


HOLD_S = 5.0


def invoke_as(run: str, registry: Registry, call: ToolCall, actor: Any) -> Any:
    """`registry.invoke(call)`, or `ainvoke` on a loop of its own, as `run` says."""
    if run == "invoke":
        return registry.invoke(call, actor=actor)
    return asyncio.run(registry.ainvoke(call, actor=actor))


class AsyncHandlerAnsweredByTheDeadlineTest(unittest.TestCase):
    """The caller of an async handler is answered by the deadline whatever the handler hands back: the
    check of an output that is not small plain JSON runs on a thread of its own, as a sync handler's runs
    on its worker, so it never holds the loop the handler ran on (the caller's under `ainvoke`, the one
    the registry's async tools share under `invoke`); a write's real result, checked late, is still its
    key's receipt."""

    def setUp(self) -> None:
        self.registry = Registry()
        self.addCleanup(self.registry.close)
        self.check = HeldCheck()
        self.addCleanup(self.check.release.set)

    def test_a_read_is_answered_at_its_deadline_while_the_check_of_its_output_still_runs(self) -> None:
        async def handler(arguments, ctx):
            return self.check.output(rows=[1, 2])

        self.registry.register(read_spec(), handler)
        result = asyncio.run(self.registry.ainvoke(ToolCall("lookup", {}), actor=READER))
        answered_while_checking = not self.check.ended.is_set()
        self.assertEqual((result.error.code if result.error else None, result.outcome), ("tool_timeout", Outcome.FAILED))
        self.assertTrue(answered_while_checking)

    def test_a_write_answered_while_its_check_runs_replays_the_checked_result_and_runs_once(self) -> None:
        effects = EffectLog()

        async def write(arguments, ctx):
            return self.check.output(**effects.record_followup(arguments))

        self.registry.register(followup_spec(timeout_ms=200), write)
        for number, run in enumerate(("ainvoke", "invoke")):
            with self.subTest(run=run):
                check = self.check = HeldCheck()
                self.addCleanup(check.release.set)
                call = followup_call(action_id=f"act-{run}")
                first = invoke_as(run, self.registry, call, WRITER)
                answered_while_checking = not check.ended.is_set()
                self.assertEqual((first.error.code, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
                self.assertEqual(first.error.next_action, NextAction.LOOKUP_STATUS)
                self.assertTrue(answered_while_checking)
                check.release.set()
                self.assertTrue(self.registry.wait_settled(GENEROUS_S))
                again = invoke_as(run, self.registry, call, WRITER)
                self.assertEqual((again.replayed, again.ok, again.output), (True, True, {
                    "followup_id": f"F-{number + 1}", "ticket_id": "T-1001", "at": "2026-08-04T09:30:00+00:00"}))
                self.assertEqual(len(effects.effects), number + 1)  # the replay ran nothing

    def test_a_tool_failure_is_answered_at_its_deadline_while_its_check_runs(self) -> None:
        held = self.check

        class HeldCategory(str):
            def __hash__(self) -> int:  # what reading the category as a Category calls
                held.hold()
                return str.__hash__(self)

        async def handler(arguments, ctx):
            failure = ToolFailure("quota_spent", "The quota is spent.", category="dependency")
            object.__setattr__(failure.error, "category", HeldCategory("dependency"))
            raise failure

        self.registry.register(read_spec(), handler)
        result = asyncio.run(self.registry.ainvoke(ToolCall("lookup", {}), actor=READER))
        answered_while_checking = not self.check.ended.is_set()
        self.assertEqual((result.error.code if result.error else None, result.outcome), ("tool_timeout", Outcome.FAILED))
        self.assertTrue(answered_while_checking)

    def test_an_output_is_checked_whether_or_not_a_worker_of_the_pool_is_free(self) -> None:
        # The check never waits for the pool: sync handlers holding every worker delay no async call.
        registry = self.registry_with_its_one_worker_busy()
        for name, output in (("small", {"ticket_id": "T-1001", "status": "open", "age_days": 3, "owner": None}),
                             ("large", {"ticket_ids": [f"T-{n}" for n in range(500)]})):
            async def lookup(arguments, ctx, output=output):
                return output

            registry.register(read_spec(name=f"lookup_{name}", timeout_ms=5_000), lookup)
            with self.subTest(output=name):
                result = asyncio.run(registry.ainvoke(ToolCall(f"lookup_{name}", {}), actor=READER))
                self.assertEqual((result.ok, result.output), (True, output))

    def test_only_an_output_that_is_not_small_plain_json_is_handed_to_another_thread(self) -> None:
        # The common output, small plain JSON, pays no hop: it is checked on the caller's loop.
        from agent_lab.steps import run as run_step

        handed_off = []

        def counting(jobs, function, *arguments):
            handed_off.append(function)
            return run_detached(jobs, function, *arguments)

        run_detached = run_step.run_detached
        self.addCleanup(setattr, run_step, "run_detached", run_detached)
        run_step.run_detached = counting
        moment = datetime.datetime(2026, 8, 4, 9, 30, tzinfo=datetime.timezone.utc)
        outputs = {  # name: (output, handed off, what the caller gets)
            "flat": ({"ticket_id": "T-1001", "status": "open", "age_days": 3, "score": 0.5, "owner": None}, 0, None),
            "nested": ({"tickets": [{"id": f"T-{n}", "tags": ["vip"]} for n in range(10)]}, 0, None),
            "long": ({"note": "x" * 2_000}, 1, None),
            "many": ({"ids": list(range(500))}, 1, None),
            "not plain": ({"at": moment}, 1, {"at": "2026-08-04T09:30:00+00:00"}),
        }
        for name, (output, hops, answer) in outputs.items():
            async def lookup(arguments, ctx, output=output):
                return output

            self.registry.register(read_spec(name=f"lookup_{name.replace(' ', '_')}", timeout_ms=5_000), lookup)
            handed_off.clear()
            with self.subTest(output=name):
                result = asyncio.run(self.registry.ainvoke(ToolCall(f"lookup_{name.replace(' ', '_')}", {}),
                                                           actor=READER))
                self.assertEqual((result.ok, result.output), (True, answer or output))
                self.assertEqual(len(handed_off), hops)

    def test_under_invoke_another_async_tool_is_served_by_the_loop_while_an_output_is_checked(self) -> None:
        # The check of one tool's output (a large output, handler code it runs) never holds the loop the
        # registry's async tools share: held there, it kept the others waiting until the loop was judged
        # blocked and replaced (calls with a shorter deadline timed out), as if the tool itself blocked it.
        loops = {}

        async def report(arguments, ctx):
            loops["report"] = asyncio.get_running_loop()
            return self.check.output(rows=[1, 2])

        async def lookup(arguments, ctx):
            loops["lookup"] = asyncio.get_running_loop()
            return {"ticket_id": "T-1001"}

        self.registry.register(read_spec(name="report", timeout_ms=HOLD_S * 2_000), report)
        self.registry.register(read_spec(timeout_ms=HOLD_S * 1_000), lookup)
        answers: list = []
        caller = threading.Thread(target=lambda: answers.append(self.registry.invoke(ToolCall("report", {}),
                                                                                     actor=READER)))
        caller.start()
        self.addCleanup(caller.join)
        self.addCleanup(self.check.release.set)
        self.assertTrue(self.check.entered.wait(GENEROUS_S))
        other = self.registry.invoke(ToolCall("lookup", {}), actor=READER)
        answered_while_checking = not self.check.ended.is_set()
        self.assertEqual((other.ok, other.output), (True, {"ticket_id": "T-1001"}))
        self.assertTrue(answered_while_checking)
        self.assertIs(loops["lookup"], loops["report"])  # served by the same loop: it was never judged blocked
        self.check.release.set()
        caller.join()
        self.assertEqual((answers[0].ok, answers[0].output), (True, {"rows": [1, 2], "at": "2026-08-04T09:30:00+00:00"}))

    def test_checks_held_in_handler_code_hold_a_bounded_number_of_threads_and_the_rest_wait_their_turn(
            self) -> None:
        # A check stuck for good keeps its thread; each call that met it again started one more. Past
        # MAX_DETACHED (here 1) a check of the same tool waits for a thread: its caller is answered at the
        # deadline, and a write's real result still becomes its key's receipt once its check has run.
        from agent_lab import workers

        self.addCleanup(setattr, workers, "MAX_DETACHED", workers.MAX_DETACHED)
        workers.MAX_DETACHED = 1
        effects = EffectLog()
        checks = [self.check, HeldCheck()]
        checks[1].release.set()  # the second call's check ends as soon as it runs

        async def write(arguments, ctx):
            return checks[len(effects.effects)].output(**effects.record_followup(arguments))

        self.registry.register(followup_spec(timeout_ms=200), write)
        held = self.registry.invoke(followup_call(action_id="act-held"), actor=WRITER)
        self.assertEqual(held.error.code, "tool_timeout")
        self.assertTrue(self.check.entered.wait(GENEROUS_S))  # it holds the tool's one thread
        first = asyncio.run(self.registry.ainvoke(followup_call(), actor=WRITER))
        self.assertEqual((first.error.code if first.error else None, first.outcome), ("tool_timeout", Outcome.UNKNOWN))
        self.assertFalse(checks[1].entered.is_set())  # no thread was started for its check
        self.check.release.set()
        self.assertTrue(self.registry.wait_settled(GENEROUS_S))
        again = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual((again.replayed, again.ok, again.output), (True, True, {
            "followup_id": "F-2", "ticket_id": "T-1001", "at": "2026-08-04T09:30:00+00:00"}))
        self.assertEqual(len(effects.effects), 2)

    def test_checks_stuck_in_one_tools_code_hold_up_no_other_tools_checks(self) -> None:
        # The bound on checks running at once was one for the whole process: a tool whose checks stuck
        # in its own code (MAX_DETACHED calls) stopped every other tool's checks for good, in every
        # registry: their reads timed out and their writes' keys stayed in progress.
        from agent_lab import workers

        release, entered, lock = threading.Event(), [], threading.Lock()
        self.addCleanup(release.set)

        class StuckZone(datetime.tzinfo):
            def utcoffset(self, moment: object) -> datetime.timedelta:
                with lock:
                    entered.append(1)
                release.wait(60.0)
                return datetime.timedelta(0)

        async def broken(arguments, ctx):
            return {"at": datetime.datetime(2026, 8, 4, 9, 30, tzinfo=StuckZone())}

        async def report(arguments, ctx):
            return {"ids": list(range(500))}  # not small: checked off the loop

        self.registry.register(read_spec(name="broken", timeout_ms=100), broken)
        callers = [threading.Thread(target=self.registry.invoke, args=(ToolCall("broken", {}),),
                                    kwargs={"actor": READER}) for _ in range(workers.MAX_DETACHED)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        deadline = time.monotonic() + GENEROUS_S * 5
        while len(entered) < workers.MAX_DETACHED and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(len(entered), workers.MAX_DETACHED)  # every one of them stuck, each on its thread
        other = Registry()
        self.addCleanup(other.close)
        for registry in (self.registry, other):
            registry.register(read_spec(name="report", timeout_ms=GENEROUS_S * 1_000), report)
            for run in ("invoke", "ainvoke"):
                with self.subTest(registry="same" if registry is self.registry else "other", run=run):
                    result = invoke_as(run, registry, ToolCall("report", {}), READER)
                    self.assertEqual((result.ok, result.output), (True, {"ids": list(range(500))}))

    def registry_with_its_one_worker_busy(self) -> Registry:
        registry = Registry(max_workers=1)
        self.addCleanup(registry.close)
        busy, done = threading.Event(), threading.Event()

        def hog(arguments):
            busy.set()
            done.wait(HOLD_S)
            return {}

        registry.register(ToolSpec(name="hog", description="Holds its worker.", input_schema={"type": "object"},
                                   timeout_ms=HOLD_S * 1000), hog)
        caller = threading.Thread(target=registry.invoke, args=(ToolCall("hog", {}),), kwargs={"actor": READER})
        caller.start()
        self.addCleanup(caller.join)
        self.addCleanup(done.set)  # (cleanups run last first: the worker is let go, then its caller joined)
        self.assertTrue(busy.wait(GENEROUS_S))
        return registry


if __name__ == "__main__":
    unittest.main()
