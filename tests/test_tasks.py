"""Long-running calls as tasks (`ToolSpec(task_support=...)`, `Registry.invoke(..., as_task=True)`).

What a caller relies on: a task tool's call that passes every check answers `accepted` with a task id
and runs in the background; a retry under the same key finds the same task and never runs the tool
again; the task reads working, then completed or failed with its result; a cancel before the call
started stops it, and one after it started says so instead of claiming "cancelled"; another tenant's
or actor's task reads like an unknown one; the state survives a restart on a SQLite store, and a task
whose host died reads failed with its effect unknown, never working forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from pathlib import Path
from typing import Any

from agent_lab import Actor, Approval, InMemoryReceiptStore, Outcome, Registry, SqliteReceiptStore, ToolCall, ToolSpec
from agent_lab.adapters import mcp_tool
from agent_lab.stores import ReceiptKey, ReceiptStoreUnavailable
from agent_lab.tasks import TASK_ENTRY, TASK_GATE, TaskState

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 30.0  # a hang guard, never a timing assertion
ANA = Actor(id="ana", tenant="acme", permissions={"reports"})
BOB = Actor(id="bob", tenant="acme", permissions={"reports"})
GLOBEX_ANA = Actor(id="ana", tenant="globex", permissions={"reports"})

EXPORT_SCHEMA = {"type": "object", "properties": {"rows": {"type": "integer"}, "request_id": {"type": "string"}},
                 "required": ["rows", "request_id"], "additionalProperties": False}


def export_spec(**overrides: Any) -> ToolSpec:
    options: dict[str, Any] = dict(name="export_report", description="Exports a report (slow).",
                                   input_schema=EXPORT_SCHEMA, required_permission="reports", effect="write",
                                   idempotency_key="request_id", task_support="optional", timeout_ms=20_000)
    options.update(overrides)
    return ToolSpec(**options)


class Exporter:
    """A slow write that counts its runs; it finishes when the test lets it."""

    def __init__(self) -> None:
        self.runs: list[dict] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, arguments: dict) -> dict:
        self.runs.append(arguments)
        self.started.set()
        if not self.release.wait(WAIT_S):
            raise RuntimeError("the test never released the export")
        if arguments["rows"] < 0:
            raise ValueError("no negative reports")
        return {"exported": arguments["rows"]}


def wait_ended(registry: Registry, task_id: str, actor: Actor = ANA) -> Any:
    give_up = time.monotonic() + WAIT_S
    while time.monotonic() < give_up:
        status = registry.task(task_id, actor=actor)
        if status is not None and status.status.terminal:
            return status
        time.sleep(0.02)
    raise AssertionError("the task never ended")


class TaskTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.exporter = Exporter()
        self.registry = Registry()
        self.registry.register(export_spec(), self.exporter)
        self.addCleanup(self.registry.close)
        self.addCleanup(self.exporter.release.set)

    def start(self, rows: int = 3, key: str = "r-1", actor: Actor = ANA, **options: Any) -> Any:
        return self.registry.invoke(ToolCall("export_report", {"rows": rows, "request_id": key}), actor=actor,
                                    as_task=True, **options)


class AcceptedTest(TaskTestCase):
    def test_a_task_call_answers_accepted_with_a_task_id_and_reads_working_then_completed(self) -> None:
        result = self.start()
        self.assertTrue(result.ok)
        self.assertIs(result.outcome, Outcome.ACCEPTED)
        task_id = result.output["task_id"]
        self.assertEqual(result.to_model(), {"ok": True, "outcome": "accepted", "output": {"task_id": task_id}})
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        working = self.registry.task(task_id, actor=ANA)
        self.assertIs(working.status, TaskState.WORKING)
        self.assertIsNone(working.result)
        self.exporter.release.set()
        done = wait_ended(self.registry, task_id)
        self.assertIs(done.status, TaskState.COMPLETED)
        self.assertIs(done.result.outcome, Outcome.SUCCEEDED)
        self.assertEqual(done.result.output, {"exported": 3})
        self.assertEqual(done.to_dict()["result"], {"ok": True, "outcome": "succeeded", "output": {"exported": 3}})

    def test_a_failing_call_ends_the_task_failed_with_the_tools_error(self) -> None:
        task_id = self.start(rows=-1).output["task_id"]
        self.exporter.release.set()
        done = wait_ended(self.registry, task_id)
        self.assertIs(done.status, TaskState.FAILED)
        self.assertEqual(done.result.error.code, "handler_exception")

    def test_without_as_task_an_optional_tool_runs_while_the_caller_waits(self) -> None:
        self.exporter.release.set()
        result = self.registry.invoke(ToolCall("export_report", {"rows": 2, "request_id": "r-9"}), actor=ANA)
        self.assertIs(result.outcome, Outcome.SUCCEEDED)
        self.assertEqual(result.output, {"exported": 2})

    def test_a_required_tool_is_always_a_task_and_a_forbidden_one_never(self) -> None:
        self.registry.register(export_spec(name="always_task", task_support="required"), self.exporter)
        self.registry.register(export_spec(name="never_task", task_support="forbidden"), self.exporter)
        self.exporter.release.set()
        always = self.registry.invoke(ToolCall("always_task", {"rows": 1, "request_id": "a"}), actor=ANA)
        never = self.registry.invoke(ToolCall("never_task", {"rows": 1, "request_id": "b"}), actor=ANA, as_task=True)
        self.assertIs(always.outcome, Outcome.ACCEPTED)
        self.assertIs(never.outcome, Outcome.SUCCEEDED)

    def test_every_check_before_idempotency_still_refuses_and_nothing_is_accepted(self) -> None:
        bad = self.registry.invoke(ToolCall("export_report", {"rows": "many", "request_id": "r"}), actor=ANA,
                                   as_task=True)
        self.assertEqual(bad.error.code, "invalid_arguments")
        outsider = Actor(id="eve", tenant="acme", permissions=set())
        hidden = self.registry.invoke(ToolCall("export_report", {"rows": 1, "request_id": "r"}), actor=outsider,
                                      as_task=True)
        self.assertEqual(hidden.error.code, "tool_not_found")
        self.assertEqual(self.exporter.runs, [])
        self.assertEqual(self.registry.tasks(actor=ANA), [])

    def test_an_approval_is_checked_before_the_task_is_accepted(self) -> None:
        self.registry.register(export_spec(name="approved_export", approval="always"), self.exporter)
        call = ToolCall("approved_export", {"rows": 1, "request_id": "ap-1"})
        self.assertEqual(self.registry.invoke(call, actor=ANA, as_task=True).error.code, "approval_required")
        approval = self.registry.approval_for(call, actor=ANA, approver="lead")
        self.assertIsInstance(approval, Approval)
        self.assertIs(self.registry.invoke(call, actor=ANA, approval=approval, as_task=True).outcome, Outcome.ACCEPTED)

    def test_the_tool_lists_its_task_support_as_mcp_execution(self) -> None:
        self.assertEqual(mcp_tool(export_spec())["execution"], {"taskSupport": "optional"})
        self.assertNotIn("execution", mcp_tool(export_spec(task_support="forbidden")))
        self.assertEqual(export_spec().runtime_contract()["task_support"], "optional")
        with self.assertRaisesRegex(ValueError, "task_support must be one of: forbidden, optional, required"):
            export_spec(task_support="sometimes")


class AsyncCallerTest(TaskTestCase):
    def test_ainvoke_accepts_a_task_as_invoke_does(self) -> None:
        import asyncio

        self.exporter.release.set()
        result = asyncio.run(self.registry.ainvoke(ToolCall("export_report", {"rows": 7, "request_id": "a-1"}),
                                                   actor=ANA, as_task=True))
        self.assertIs(result.outcome, Outcome.ACCEPTED)
        self.assertEqual(wait_ended(self.registry, result.output["task_id"]).result.output, {"exported": 7})


class GracefulStopTest(TaskTestCase):
    def test_close_with_wait_lets_running_tasks_record_their_results(self) -> None:
        store = InMemoryReceiptStore()
        registry = Registry(receipts=store)
        registry.register(export_spec(), self.exporter)
        task_id = registry.invoke(ToolCall("export_report", {"rows": 2, "request_id": "g-1"}), actor=ANA,
                                  as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        threading.Timer(0.1, self.exporter.release.set).start()
        registry.close(wait=True)
        reader = Registry(receipts=store)
        self.addCleanup(reader.close)
        reader.register(export_spec(), self.exporter)
        self.assertIs(reader.task(task_id, actor=ANA).status, TaskState.COMPLETED)


class SameKeyTest(TaskTestCase):
    def test_a_retry_under_the_same_key_finds_the_same_task_and_the_tool_runs_once(self) -> None:
        first = self.start()
        retries = [self.start() for _ in range(5)]
        self.assertEqual({retry.output["task_id"] for retry in retries}, {first.output["task_id"]})
        self.assertTrue(all(retry.replayed and retry.outcome is Outcome.ACCEPTED for retry in retries))
        self.exporter.release.set()
        wait_ended(self.registry, first.output["task_id"])
        after = self.start()  # also once it ended
        self.assertEqual(after.output["task_id"], first.output["task_id"])
        self.assertEqual(len(self.exporter.runs), 1)

    def test_a_store_whose_receipts_expire_before_a_task_ends_is_refused_when_the_tool_is_registered(self) -> None:
        # A task's key holds its `accepted` receipt from acceptance on: with a 1 s ttl and a 2 s run, the
        # same key retried after 1.5 s started a second run beside the first.
        registry = Registry(receipts=InMemoryReceiptStore(ttl_s=1, lease_s=60))
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "ttl_s \\(1 s\\) is shorter than the run of a task"):
            registry.register(export_spec(timeout_ms=2_000), Exporter())
        registry.register(export_spec(timeout_ms=2_000, task_support="forbidden"), Exporter())  # no task: held

    def test_the_same_key_with_other_arguments_is_a_conflict_not_a_second_task(self) -> None:
        self.start(rows=3)
        other = self.start(rows=4)
        self.assertEqual(other.error.code, "idempotency_conflict")
        self.exporter.release.set()
        self.assertTrue(self.registry.wait_tasks(WAIT_S))
        self.assertEqual(len(self.exporter.runs), 1)
        self.assertEqual(len(self.registry.tasks(actor=ANA)), 1)


class RenewalCountingStore(InMemoryReceiptStore):
    """Counts the renewals of task entries' leases, and lets a test wait for the next ones."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.renewals = 0
        self._renewed = threading.Condition()

    def renew(self, key: Any, owner: str, **options: Any) -> bool:
        answer = super().renew(key, owner, **options)
        if key.tool == TASK_ENTRY:
            with self._renewed:
                self.renewals += 1
                self._renewed.notify_all()
        return answer

    def renewed_twice_more(self) -> bool:
        """Two more renewals from now: the second (and the `keep` before it) began after this call."""
        with self._renewed:
            seen = self.renewals
            return self._renewed.wait_for(lambda: self.renewals >= seen + 2, WAIT_S)


class OverrunTest(TaskTestCase):
    def test_a_task_whose_handler_overruns_its_deadline_keeps_its_key_until_the_handler_returns(self) -> None:
        # The key's `accepted` receipt had its ttl from acceptance, and nothing held the key once the
        # run stopped waiting at its deadline: with the handler still running past the ttl, the same key
        # started a second run beside the first (reproduced with a 2 s ttl and a handler running 4 s).
        from store_conformance import FakeClock

        clock = FakeClock()
        store = RenewalCountingStore(ttl_s=10, lease_s=10, clock=clock, monotonic=clock.monotonic)
        registry = Registry(receipts=store, late_completion_s=0, renew_every_s=0.05)
        self.addCleanup(registry.close)
        registry.register(export_spec(timeout_ms=100), self.exporter)  # it ignores its deadline
        call = ToolCall("export_report", {"rows": 3, "request_id": "o-1"})
        task_id = registry.invoke(call, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        for _ in range(4):  # 24 s of the store's time: well past the receipt's ttl from acceptance
            clock.advance(6)
            self.assertTrue(store.renewed_twice_more(), "nothing holds the task while its handler runs")
        retry = registry.invoke(call, actor=ANA, as_task=True)
        self.assertEqual((retry.output, retry.replayed), ({"task_id": task_id}, True))
        self.assertIs(registry.task(task_id, actor=ANA).status, TaskState.WORKING)  # it does run
        self.exporter.release.set()
        done = wait_ended(registry, task_id)
        self.assertEqual((done.status, done.result.output), (TaskState.COMPLETED, {"exported": 3}))  # what it did
        self.assertEqual(registry.invoke(call, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertEqual(len(self.exporter.runs), 1)

    def test_wait_tasks_waits_for_a_handler_that_overran_its_deadline_and_then_finds_it_ended(self) -> None:
        registry = Registry(late_completion_s=0)
        self.addCleanup(registry.close)
        registry.register(export_spec(timeout_ms=100), self.exporter)  # it ignores its deadline
        task_id = registry.invoke(ToolCall("export_report", {"rows": 2, "request_id": "w-1"}), actor=ANA,
                                  as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        with self.assertLogs("agent_lab.leases", "WARNING") as logged:
            self.assertFalse(registry.wait_tasks(1.0))  # past its deadline, the handler still runs: so does the task
        self.assertIn("a task of tool 'export_report'", logged.output[0])
        self.assertIn("it reads working until its handler returns", logged.output[0])
        self.assertIs(registry.task(task_id, actor=ANA).status, TaskState.WORKING)
        self.exporter.release.set()
        self.assertTrue(registry.wait_tasks(WAIT_S))
        self.assertIs(registry.task(task_id, actor=ANA).status, TaskState.COMPLETED)  # ended means recorded

    def test_a_store_that_cannot_keep_a_tasks_receipt_in_time_is_refused_when_the_tool_is_registered(self) -> None:
        registry = Registry(receipts=InMemoryReceiptStore(ttl_s=30, lease_s=60), renew_every_s=20, late_completion_s=0)
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "at most half the receipt store's ttl_s"):
            registry.register(export_spec(timeout_ms=2_000), Exporter())


class GateHeldStore(InMemoryReceiptStore):
    """A store on which the run's `start` at the gate waits until the test lets it through: the
    moment between accepting a task and starting its call, held open on cue."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.at_gate = threading.Event()
        self.let_through = threading.Event()

    def reserve(self, key: Any, fingerprint: str, **options: Any) -> Any:
        if key.tool == TASK_GATE and fingerprint == "start":
            self.at_gate.set()
            self.let_through.wait(WAIT_S)
        return super().reserve(key, fingerprint, **options)


class CancelHalfWayStore(GateHeldStore):
    """A store on which a cancel that reserved the gate waits before completing it, on cue: the gate
    is then the cancel's, though a reader does not see whose yet."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.cancel_half_way = threading.Event()
        self.finish_cancel = threading.Event()

    def complete(self, key: Any, owner: str, record: Any, **options: Any) -> Any:
        if key.tool == TASK_GATE and record == {"gate": "cancel"}:
            self.cancel_half_way.set()
            self.finish_cancel.wait(WAIT_S)
        return super().complete(key, owner, record, **options)


class CancelTest(TaskTestCase):
    def held_at_the_gate(self, store: GateHeldStore, request_id: str) -> tuple:
        """(registry, task id): an export accepted as a task on `store`, its run held at the gate."""
        registry = Registry(receipts=store)
        self.addCleanup(registry.close)
        registry.register(export_spec(), self.exporter)
        task_id = registry.invoke(ToolCall("export_report", {"rows": 1, "request_id": request_id}), actor=ANA,
                                  as_task=True).output["task_id"]
        self.assertTrue(store.at_gate.wait(WAIT_S))
        return registry, task_id

    def test_a_cancel_before_the_call_started_stops_it_and_the_tool_never_runs(self) -> None:
        store = GateHeldStore()
        registry, task_id = self.held_at_the_gate(store, "c-1")
        cancelled = registry.cancel_task(task_id, actor=ANA)
        self.assertEqual(cancelled.cancel, "cancelled")
        self.assertIs(cancelled.status, TaskState.CANCELLED)
        store.let_through.set()
        self.assertTrue(registry.wait_tasks(WAIT_S))
        final = registry.task(task_id, actor=ANA)
        self.assertIs(final.status, TaskState.CANCELLED)
        self.assertEqual(final.result.error.code, "task_cancelled")
        self.assertIs(final.result.outcome, Outcome.REJECTED)
        self.assertEqual(self.exporter.runs, [])

    def test_a_cancel_after_the_call_started_says_too_late_and_the_effect_is_reported(self) -> None:
        task_id = self.start().output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        answer = self.registry.cancel_task(task_id, actor=ANA)
        self.assertEqual(answer.cancel, "too_late")
        self.assertIs(answer.status, TaskState.WORKING)  # never "cancelled": the call goes on
        self.exporter.release.set()
        done = wait_ended(self.registry, task_id)
        self.assertIs(done.status, TaskState.COMPLETED)
        self.assertEqual(done.result.output, {"exported": 3})

    def test_a_cancel_after_the_effect_committed_says_ended_with_the_completed_result(self) -> None:
        self.exporter.release.set()
        task_id = self.start().output["task_id"]
        wait_ended(self.registry, task_id)
        answer = self.registry.cancel_task(task_id, actor=ANA)
        self.assertEqual(answer.cancel, "ended")
        self.assertIs(answer.status, TaskState.COMPLETED)
        self.assertEqual(answer.result.output, {"exported": 3})

    def test_a_run_that_loses_the_gate_to_a_cancel_half_way_ends_cancelled_as_its_cancel_said(self) -> None:
        store = CancelHalfWayStore()
        registry, task_id = self.held_at_the_gate(store, "h-1")
        answers = []
        canceller = threading.Thread(target=lambda: answers.append(registry.cancel_task(task_id, actor=ANA)))
        canceller.start()
        self.addCleanup(canceller.join, WAIT_S)
        self.addCleanup(store.finish_cancel.set)
        self.assertTrue(store.cancel_half_way.wait(WAIT_S))
        store.let_through.set()  # the run's start finds the gate reserved by the cancel, not yet completed
        self.assertTrue(registry.wait_tasks(WAIT_S))
        store.finish_cancel.set()
        canceller.join(WAIT_S)
        self.assertEqual(answers[0].cancel, "cancelled")
        self.assertIs(registry.task(task_id, actor=ANA).status, TaskState.CANCELLED)
        self.assertEqual(self.exporter.runs, [])

    def test_cancels_racing_the_start_end_one_way_only(self) -> None:
        """Many tasks, each cancelled while its run takes the gate: each ends cancelled with no run, or
        ran (and then its cancel said too_late or ended) — never both, never neither."""
        self.exporter.release.set()
        answers = {}
        for index in range(20):
            task_id = self.start(key=f"race-{index}").output["task_id"]
            answers[task_id] = self.registry.cancel_task(task_id, actor=ANA).cancel
        self.assertTrue(self.registry.wait_tasks(WAIT_S))
        ran = 0
        for task_id, cancel in answers.items():
            final = self.registry.task(task_id, actor=ANA)
            if cancel == "cancelled":
                self.assertIs(final.status, TaskState.CANCELLED)
            else:
                self.assertIn(cancel, ("too_late", "ended"))
                self.assertIs(final.status, TaskState.COMPLETED)
                ran += 1
        self.assertEqual(len(self.exporter.runs), ran)


class LostHostStore:
    """One host's way to a shared store, which it can lose for good on cue (`lost`): from then on its
    every call fails, as a killed host's would never come."""

    def __init__(self, inner: InMemoryReceiptStore) -> None:
        self.inner = inner
        self.lost = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*arguments: Any, **options: Any) -> Any:
            if self.lost:
                raise ReceiptStoreUnavailable("this host lost the store")
            return attribute(*arguments, **options)

        return call


class KeepFailsOnceStore(InMemoryReceiptStore):
    """A store whose first keep-until-resolved fails, as a store that is briefly out of reach does."""

    failed = False

    def keep(self, key: Any, owner: str, *, timeout_s: Any = None, until_resolved: bool = False) -> bool:
        if until_resolved and not self.failed:
            self.failed = True
            raise ReceiptStoreUnavailable("the store did not answer in time")
        return super().keep(key, owner, timeout_s=timeout_s, until_resolved=until_resolved)


class OlderKeepStore(InMemoryReceiptStore):
    """A store of one's own whose keep() predates until_resolved."""

    def keep(self, key: Any, owner: str, *, timeout_s: Any = None) -> bool:  # type: ignore[override]
        return super().keep(key, owner, timeout_s=timeout_s)


class LapsedEntryTest(TaskTestCase):
    def test_a_task_whose_host_died_mid_call_reads_may_have_run_however_long_after(self) -> None:
        # The run's `start` at the gate was a receipt with the store's ttl, the dead host's entry unknown for
        # ever: read after the ttl, the gate looked never taken, and a reader told the caller "did not run;
        # call it again" of a call that had taken effect (the rule meant to cover it compared the hosts'
        # wall clocks: a creating host whose clock led by half the ttl defeated it).
        from store_conformance import FakeClock

        clock = FakeClock()
        shared = InMemoryReceiptStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        dying, reader = LostHostStore(shared), Registry(receipts=shared, late_completion_s=0)
        host = Registry(receipts=dying, late_completion_s=0)
        self.addCleanup(host.close)
        self.addCleanup(reader.close)
        self.addCleanup(self.exporter.release.set)
        for registry in (host, reader):
            registry.register(export_spec(), self.exporter)
        task_id = host.invoke(ToolCall("export_report", {"rows": 1, "request_id": "d-1"}), actor=ANA,
                              as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))  # the effect is under way
        dying.lost = True  # and its host is gone
        clock.advance(24 * 3600)  # a day later: the lease lapsed long ago, and any receipt's ttl passed
        status = reader.task(task_id, actor=ANA)
        self.assertEqual((status.status, status.result.error.code, status.result.outcome),
                         (TaskState.FAILED, "task_interrupted", Outcome.UNKNOWN))
        self.assertIn("may have", status.result.error.message)

    def on_a_clock_moved_by_hand(self) -> tuple:
        """(clock, store, registry): the export tool's registry on an in-memory store (ttl 60 s, lease
        30 s) whose time the test moves."""
        from store_conformance import FakeClock

        clock = FakeClock()
        store = InMemoryReceiptStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        registry = Registry(receipts=store, late_completion_s=0)
        self.addCleanup(registry.close)
        registry.register(export_spec(), self.exporter)
        return clock, store, registry

    def test_a_started_tasks_gate_is_never_listed_as_unresolved_and_expires_with_the_task(self) -> None:
        # Listed, it invited a hand to resolve it; resolved, a reader said "did not run" of a task whose
        # host died mid-call (reproduced by review).
        clock, store, registry = self.on_a_clock_moved_by_hand()
        task_id = registry.invoke(ToolCall("export_report", {"rows": 1, "request_id": "k-1"}), actor=ANA,
                                  as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        gate = ReceiptKey(ANA.tenant, TASK_GATE, task_id)
        self.assertEqual(store.lookup(gate).fingerprint, "start")
        self.assertNotIn(gate, store.unresolved())
        self.exporter.release.set()
        self.assertTrue(registry.wait_tasks(WAIT_S))
        clock.advance(61)
        self.assertIsNone(store.lookup(gate))  # ended: it expired with the task's receipts

    def test_a_write_task_whose_outcome_is_unknown_keeps_its_key_until_it_is_resolved(self) -> None:
        # Its key's `accepted` receipt expired with the ttl, and the same key started the effect again
        # (reproduced by review: 2 effects), while a plain write's unknown receipt is kept until resolved.
        clock, store, registry = self.on_a_clock_moved_by_hand()
        self.exporter.release.set()
        call = ToolCall("export_report", {"rows": -1, "request_id": "u-1"})  # the export raises: it may have run
        task_id = registry.invoke(call, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(registry.wait_tasks(WAIT_S))
        self.assertEqual(registry.task(task_id, actor=ANA).result.outcome, Outcome.UNKNOWN)
        clock.advance(24 * 3600)
        self.assertEqual(registry.invoke(call, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertEqual(len(self.exporter.runs), 1)
        self.assertIn(ReceiptKey(ANA.tenant, "export_report", "u-1"), store.unresolved())
        self.assertTrue(registry.resolve_unknown("export_report", "u-1", tenant=ANA.tenant, happened=False))
        self.assertNotEqual(registry.invoke(call, actor=ANA, as_task=True).output, {"task_id": task_id})

    def test_a_store_that_fails_once_at_the_tasks_end_still_keeps_its_key_until_resolved(self) -> None:
        store = KeepFailsOnceStore()
        registry = Registry(receipts=store, late_completion_s=0)
        self.addCleanup(registry.close)
        registry.register(export_spec(), self.exporter)
        self.exporter.release.set()
        registry.invoke(ToolCall("export_report", {"rows": -1, "request_id": "f-1"}), actor=ANA, as_task=True)
        self.assertTrue(registry.wait_tasks(WAIT_S))
        self.assertIn(ReceiptKey(ANA.tenant, "export_report", "f-1"), store.unresolved())

    def test_a_store_whose_keep_cannot_keep_a_key_until_resolved_is_refused_for_a_write_task(self) -> None:
        registry = Registry(receipts=OlderKeepStore(), late_completion_s=0)
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "takes no until_resolved"):
            registry.register(export_spec(), self.exporter)
        registry.register(export_spec(task_support="forbidden"), self.exporter)  # without tasks it is fine

    def test_a_task_read_as_never_started_never_starts_when_its_host_reaches_the_store_again(self) -> None:
        # What a reader sees of a host that lost the store for longer than the lease (its renewals and
        # its start at the gate held up) is what it sees of a dead one: the entry lapsed, nobody at the
        # gate. It was told "did not run; call it again", and the run then started all the same when
        # the store came back (reproduced: a client following the advice had two effects).
        from store_conformance import FakeClock

        clock = FakeClock()
        store = GateHeldStore(lease_s=60, clock=clock, monotonic=clock.monotonic)
        registry = Registry(receipts=store, late_completion_s=0)
        self.addCleanup(registry.close)
        registry.register(export_spec(), self.exporter)
        self.exporter.release.set()
        task_id = registry.invoke(ToolCall("export_report", {"rows": 1, "request_id": "p-1"}), actor=ANA,
                                  as_task=True).output["task_id"]
        self.assertTrue(store.at_gate.wait(WAIT_S))
        clock.advance(61)  # no renewal reached the store: the entry lapsed
        told = registry.task(task_id, actor=ANA)
        self.assertEqual((told.status, told.result.error.code), (TaskState.FAILED, "task_interrupted"))
        self.assertIs(told.result.outcome, Outcome.REJECTED)  # "the tool did not run; call it again"
        store.let_through.set()  # the store is back for the run
        self.assertTrue(registry.wait_tasks(WAIT_S))
        self.assertEqual(self.exporter.runs, [])  # so it never runs: what the reader was told stays true
        final = registry.task(task_id, actor=ANA)
        self.assertEqual((final.status, final.result.outcome), (TaskState.FAILED, Outcome.REJECTED))


class DiesAtNoticeStore(LostHostStore):
    """A `LostHostStore` that also keeps its run at the task's gate until the test lets it through (its
    `start` is then sent as the store comes back)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.at_gate = threading.Event()
        self.let_through = threading.Event()

    def reserve(self, key: Any, fingerprint: str, **options: Any) -> Any:
        if key.tool == TASK_GATE and fingerprint == "start":
            self.at_gate.set()
            self.let_through.wait(WAIT_S)
        elif self.lost:
            raise ReceiptStoreUnavailable("this host lost the store")
        return self.inner.reserve(key, fingerprint, **options)


class NoCompleteUnknownStore:
    """A store of one's own with keep(until_resolved) but no complete_unknown."""

    def __init__(self) -> None:
        self.inner = InMemoryReceiptStore()

    def __getattr__(self, name: str) -> Any:
        if name == "complete_unknown":
            raise AttributeError(name)
        return getattr(self.inner, name)


class SettleHeldStore(GateHeldStore):
    """A `GateHeldStore` on which the first store call a task's run makes to settle its key's `accepted`
    (whichever it is) waits until the test lets it through: the run descheduled right before it."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.at_settle = threading.Event()
        self.settle = threading.Event()

    def held(self, key: Any) -> None:
        if key.tool == "export_report" and threading.current_thread().name.startswith("agent-lab-task") \
                and not self.at_settle.is_set():
            self.at_settle.set()
            self.settle.wait(WAIT_S)

    def resolve(self, key: Any, fingerprint: str, **options: Any) -> Any:
        self.held(key)
        return super().resolve(key, fingerprint, **options)

    def let_expire(self, key: Any, owner: str, **options: Any) -> Any:
        self.held(key)
        return super().let_expire(key, owner, **options)


class InterruptLateStore:
    """Another host's way to `inner`, on which a reader's `interrupt` at a task's gate waits until the
    test lets it through (it saw nobody at the gate, and goes to take it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.at_interrupt = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reserve(self, key: Any, fingerprint: str, **options: Any) -> Any:
        if key.tool == TASK_GATE and fingerprint == "interrupt":
            self.at_interrupt.set()
            self.go.wait(WAIT_S)
        return self.inner.reserve(key, fingerprint, **options)


class NoLetExpireStore:
    """A store of one's own with complete_unknown and keep(until_resolved) but no let_expire."""

    def __init__(self) -> None:
        self.inner = InMemoryReceiptStore()

    def __getattr__(self, name: str) -> Any:
        if name == "let_expire":
            raise AttributeError(name)
        return getattr(self.inner, name)


class KeyAfterTheHostDiedTest(TaskTestCase):
    """One key, one effect, even when the host running a write task dies before the task ends."""

    KEY = ReceiptKey(ANA.tenant, "export_report", "x-1")
    CALL = ToolCall("export_report", {"rows": 1, "request_id": "x-1"})

    def two_hosts(self, host_store: Any, shared: Any) -> tuple:
        """(host, other): registries with the export tool, the first on `host_store` (its way to
        `shared`), the second on `shared` itself."""
        host, other = Registry(receipts=host_store, late_completion_s=0), Registry(receipts=shared, late_completion_s=0)
        self.addCleanup(host.close)
        self.addCleanup(other.close)
        self.addCleanup(self.exporter.release.set)  # (first: the dead host's handler returns to nothing)
        for registry in (host, other):
            registry.register(export_spec(), self.exporter)
        return host, other

    def on_one_sqlite_file(self, clock: Any) -> tuple:
        """(dying, shared): two stores on one SQLite file (ttl 60 s, lease 30 s) on `clock`, the first
        wrapped so that its host can die."""
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        path = os.path.join(directory.name, "receipts.sqlite3")
        stores = [SqliteReceiptStore(path, ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
                  for _ in range(2)]
        for store in stores:
            self.addCleanup(store.close)
        return LostHostStore(stores[0]), stores[1]  # type: ignore[arg-type]

    def test_a_write_task_whose_host_died_mid_call_keeps_its_key_however_long_after(self) -> None:
        # Its key's `accepted` receipt was kept for the ttl from each renewal of its task's lease: a host
        # that died mid-call renewed it no more, and a ttl later the same key, sent to another host,
        # started the effect a second time (reproduced: 2 effects for one key).
        from store_conformance import FakeClock

        clock = FakeClock()
        dying, shared = self.on_one_sqlite_file(clock)
        host, other = self.two_hosts(dying, shared)
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))  # the effect is under way
        dying.lost = True  # and its host is gone
        clock.advance(24 * 3600)  # a day later: every lease and every ttl passed
        retry = other.invoke(self.CALL, actor=ANA, as_task=True)
        self.assertEqual((retry.output, retry.replayed), ({"task_id": task_id}, True))  # the same task, never a run
        self.assertEqual(len(self.exporter.runs), 1)
        status = other.task(task_id, actor=ANA)
        self.assertEqual((status.status, status.result.outcome), (TaskState.FAILED, Outcome.UNKNOWN))
        self.assertIn(self.KEY, shared.unresolved())  # waiting for the application, as a plain write's would
        self.assertTrue(other.resolve_unknown("export_report", "x-1", tenant=ANA.tenant, happened=True,
                                              output={"exported": 1}))
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"exported": 1})
        self.assertEqual(len(self.exporter.runs), 1)

    def test_a_key_whose_task_still_runs_is_never_resolved(self) -> None:
        # Kept until resolved from its acceptance, the key is listed while its call runs: a hand that said
        # "did not happen" then would let the same key start a second run beside the first.
        shared = InMemoryReceiptStore(ttl_s=60, lease_s=30)
        host, other = self.two_hosts(shared, shared)
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        self.assertIn(self.KEY, shared.unresolved())
        for registry in (other, host):  # another host sees its lease live; its own host holds it
            self.assertFalse(registry.resolve_unknown("export_report", "x-1", tenant=ANA.tenant, happened=False))
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.exporter.release.set()
        self.assertTrue(host.wait_tasks(WAIT_S))
        self.assertEqual(len(self.exporter.runs), 1)
        self.assertNotIn(self.KEY, shared.unresolved())  # ended: a receipt like any, kept for the ttl

    def test_a_key_resolved_as_not_happened_never_lets_its_task_start_later(self) -> None:
        # A host that accepted the task and lost the store at its gate reads, elsewhere, as one that died
        # before its call started: its key is kept (nobody can tell from the key), and a hand resolves it
        # "did not happen". The gate is taken first, so the host, back, never starts the call.
        from store_conformance import FakeClock

        clock = FakeClock()
        shared = InMemoryReceiptStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        cut_off = DiesAtNoticeStore(shared)
        host, other = self.two_hosts(cut_off, shared)
        self.exporter.release.set()
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(cut_off.at_gate.wait(WAIT_S))
        cut_off.lost = True
        clock.advance(24 * 3600)
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertTrue(other.resolve_unknown("export_report", "x-1", tenant=ANA.tenant, happened=False))
        cut_off.lost = False
        cut_off.let_through.set()  # the host reaches the store again
        self.assertTrue(host.wait_tasks(WAIT_S))
        self.assertEqual(self.exporter.runs, [])
        again = other.invoke(self.CALL, actor=ANA, as_task=True)  # the key is free: the call runs, once
        self.assertNotEqual(again.output, {"task_id": task_id})
        self.assertTrue(other.wait_tasks(WAIT_S))
        self.assertEqual(len(self.exporter.runs), 1)

    def test_a_key_is_never_resolved_when_its_task_starts_as_its_gate_is_taken(self) -> None:
        # resolve_unknown found the task's entry lapsed and nobody at the gate, and went to take it; its host,
        # back just then, took it first and started the call. The lost gate was ignored: the key was resolved
        # "did not happen" (true when asked) while the call ran, and the same key ran it again (reproduced
        # by review: 2 effects).
        from store_conformance import FakeClock

        clock = FakeClock()
        shared = InMemoryReceiptStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        cut_off, late = DiesAtNoticeStore(shared), InterruptLateStore(shared)
        host, other = self.two_hosts(cut_off, late)
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(cut_off.at_gate.wait(WAIT_S))
        cut_off.lost = True
        clock.advance(61)  # the entry lapsed, nobody at the gate
        answers: list = []
        resolving = threading.Thread(target=lambda: answers.append(
            other.resolve_unknown("export_report", "x-1", tenant=ANA.tenant, happened=False)))
        resolving.start()
        self.assertTrue(late.at_interrupt.wait(WAIT_S))
        cut_off.lost = False
        cut_off.let_through.set()  # the host is back and starts the call
        self.assertTrue(self.exporter.started.wait(WAIT_S))
        late.go.set()
        resolving.join(WAIT_S)
        self.assertEqual(answers, [False])
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.exporter.release.set()
        self.assertTrue(host.wait_tasks(WAIT_S))
        self.assertEqual(len(self.exporter.runs), 1)

    def test_a_write_task_that_ended_lets_its_key_expire_with_the_ttl(self) -> None:
        # Completed, failed with no effect, or cancelled before its call started: its key replays the task
        # for the ttl, then is free, as before it was kept until its run ended.
        from agent_lab import ToolFailure
        from store_conformance import FakeClock

        def refuse(arguments: dict) -> dict:
            if arguments["rows"] == 0:
                raise ToolFailure("conflict", "Nothing to export.")
            return self.exporter(arguments)

        clock = FakeClock()
        store = GateHeldStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        store.let_through.set()
        registry = Registry(receipts=store, late_completion_s=0)
        self.addCleanup(registry.close)
        registry.register(export_spec(), refuse)
        self.exporter.release.set()
        calls = {"done": ToolCall("export_report", {"rows": 2, "request_id": "e-1"}),
                 "failed": ToolCall("export_report", {"rows": 0, "request_id": "e-2"})}
        ended = {name: registry.invoke(call, actor=ANA, as_task=True).output["task_id"] for name, call in calls.items()}
        self.assertTrue(registry.wait_tasks(WAIT_S))
        store.let_through.clear()
        store.at_gate.clear()
        calls["cancelled"] = ToolCall("export_report", {"rows": 3, "request_id": "e-3"})
        ended["cancelled"] = registry.invoke(calls["cancelled"], actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(store.at_gate.wait(WAIT_S))
        self.assertEqual(registry.cancel_task(ended["cancelled"], actor=ANA).cancel, "cancelled")
        store.let_through.set()
        self.assertTrue(registry.wait_tasks(WAIT_S))
        self.assertEqual([registry.task(ended[name], actor=ANA).status for name in calls],
                         [TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELLED])
        self.assertEqual(store.unresolved(), [])
        for name, call in calls.items():
            self.assertEqual(registry.invoke(call, actor=ANA, as_task=True).output, {"task_id": ended[name]})
        clock.advance(61)
        for name, call in calls.items():  # free: a new task each
            self.assertNotEqual(registry.invoke(call, actor=ANA, as_task=True).output, {"task_id": ended[name]})
        self.assertTrue(registry.wait_tasks(WAIT_S))

    def test_a_task_that_ended_never_lets_a_later_task_of_its_key_expire(self) -> None:
        # A cancelled task's run let its key expire by resolving what a lookup found. Between the two, its
        # key was resolved "did not happen" (true: the tool never ran) and the same key accepted a new task
        # elsewhere: the old run's resolve settled the new task's `accepted` (same fingerprint, kept until
        # resolved) with the old record and the ttl. The new task's host died mid-call, and a ttl later the
        # same key ran the effect again (reproduced: 2 effects, on memory, SQLite, PostgreSQL, the fault store).
        from store_conformance import FakeClock

        clock = FakeClock()
        shared = SettleHeldStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        dying = LostHostStore(shared)
        host, other = self.two_hosts(shared, dying)
        first = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(shared.at_gate.wait(WAIT_S))
        self.assertEqual(other.cancel_task(first, actor=ANA).cancel, "cancelled")
        shared.let_through.set()
        self.assertTrue(shared.at_settle.wait(WAIT_S))  # the run ended cancelled; about to let its key expire
        self.assertIs(other.task(first, actor=ANA).status, TaskState.CANCELLED)
        self.assertTrue(other.resolve_unknown("export_report", "x-1", tenant=ANA.tenant, happened=False))
        second = other.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(self.exporter.started.wait(WAIT_S))  # the effect is under way
        dying.lost = True  # and its host is gone
        shared.settle.set()
        self.assertTrue(host.wait_tasks(WAIT_S))  # the cancelled task's run has ended
        clock.advance(24 * 3600)
        retry = host.invoke(self.CALL, actor=ANA, as_task=True)
        self.assertEqual((retry.output, retry.replayed), ({"task_id": second}, True))  # the same task, never a run
        self.assertEqual(len(self.exporter.runs), 1)
        self.assertIn(self.KEY, shared.unresolved())

    def test_a_store_without_complete_unknown_is_refused_for_a_write_task(self) -> None:
        registry = Registry(receipts=NoCompleteUnknownStore(), late_completion_s=0)  # type: ignore[arg-type]
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "no complete_unknown"):
            registry.register(export_spec(), self.exporter)
        registry.register(export_spec(task_support="forbidden"), self.exporter)  # without tasks it is fine

    def test_a_store_without_let_expire_is_refused_for_a_write_task(self) -> None:
        registry = Registry(receipts=NoLetExpireStore(), late_completion_s=0)  # type: ignore[arg-type]
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "no let_expire"):
            registry.register(export_spec(), self.exporter)
        registry.register(export_spec(task_support="forbidden"), self.exporter)  # without tasks it is fine
        registry.register(export_spec(name="read_report", effect="read"), self.exporter)  # a read task is fine


class AcceptedOnCueStore:
    """One host's way to a shared store on which storing a write task's `accepted` (its key's
    `complete_unknown`) fails on cue: its first `fails` attempts raise, as a store that did not answer in
    time does (`lands`: having stored it all the same, its answer lost); a later attempt (the lease
    keeper's retry) waits until the test lets it through (`at_retry`, `let_retry`)."""

    def __init__(self, inner: Any, *, fails: float, lands: bool = False) -> None:
        self.inner, self.fails, self.lands = inner, fails, lands
        self.attempts = 0
        self.at_retry = threading.Event()
        self.let_retry = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def complete_unknown(self, key: Any, owner: str, record: Any, **options: Any) -> Any:
        if key.tool != "export_report":
            return self.inner.complete_unknown(key, owner, record, **options)
        self.attempts += 1
        if self.attempts > 1:
            self.at_retry.set()
            self.let_retry.wait(WAIT_S)
        if self.attempts <= self.fails:
            if self.lands:
                self.inner.complete_unknown(key, owner, record, **options)
            raise ReceiptStoreUnavailable("the store did not answer in time")
        return self.inner.complete_unknown(key, owner, record, **options)


class StartAfterAcceptedTest(TaskTestCase):
    """A write task's call starts only once its key's `accepted` is stored: a key that lapsed without it
    names no task, so it is resolved "did not happen" with nothing asking the task."""

    CALL = ToolCall("export_report", {"rows": 1, "request_id": "a-1"})

    def two_hosts(self, *, fails: float, lands: bool = False) -> tuple:
        """(clock, cut, host, other): the export tool on two registries sharing one in-memory store (ttl
        60 s, lease 30 s) on `clock`, the host's way to it an `AcceptedOnCueStore` (`cut`)."""
        from store_conformance import FakeClock

        clock = FakeClock()
        shared = InMemoryReceiptStore(ttl_s=60, lease_s=30, clock=clock, monotonic=clock.monotonic)
        cut = AcceptedOnCueStore(shared, fails=fails, lands=lands)
        host = Registry(receipts=cut, late_completion_s=0)  # type: ignore[arg-type]
        other = Registry(receipts=shared, late_completion_s=0)
        for registry in (host, other):
            self.addCleanup(registry.close)
            registry.register(export_spec(), self.exporter)
        self.addCleanup(cut.let_retry.set)
        return clock, cut, host, other

    def test_a_task_whose_accepted_could_not_be_stored_never_starts_and_its_key_runs_once(self) -> None:
        # The caller was answered `accepted` and the run started although the receipt never reached the
        # store (the caller's attempt and the keeper's retries failed): the key lapsed to `unknown` naming
        # no task, was resolved "did not happen" while the task ran, and ran again (reproduced by review:
        # 2 effects for one key, on memory and SQLite).
        clock, cut, host, other = self.two_hosts(fails=float("inf"))
        cut.let_retry.set()
        self.exporter.release.set()
        accepted = host.invoke(self.CALL, actor=ANA, as_task=True)
        self.assertIs(accepted.outcome, Outcome.ACCEPTED)  # the caller's answer (its receipt pending)
        task_id = accepted.output["task_id"]
        self.assertTrue(host.wait_tasks(WAIT_S))  # the keeper gave up: the run ended
        self.assertEqual(self.exporter.runs, [])
        status = other.task(task_id, actor=ANA)
        self.assertEqual((status.status, status.result.error.code, status.result.outcome),
                         (TaskState.FAILED, "task_interrupted", Outcome.REJECTED))  # "did not run", and true
        clock.advance(31)  # the key's lease lapsed: unknown, with no receipt naming the task
        self.assertTrue(other.resolve_unknown("export_report", "a-1", tenant=ANA.tenant, happened=False))
        self.assertNotEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertTrue(other.wait_tasks(WAIT_S))
        self.assertEqual(len(self.exporter.runs), 1)

    def test_a_task_whose_accepted_is_stored_by_a_retry_runs_once(self) -> None:
        # The first attempt stored it and its answer was lost: the keeper's retry confirms it (a completion
        # that landed is recognised by its owner), and the task runs.
        _, cut, host, other = self.two_hosts(fails=1, lands=True)
        cut.let_retry.set()
        self.exporter.release.set()
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(host.wait_tasks(WAIT_S))
        self.assertIs(other.task(task_id, actor=ANA).status, TaskState.COMPLETED)
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertEqual(len(self.exporter.runs), 1)

    def test_a_cancel_while_the_accepted_is_being_stored_stops_the_call(self) -> None:
        _, cut, host, other = self.two_hosts(fails=1)
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(cut.at_retry.wait(WAIT_S))  # the keeper's retry is under way; the run waits for it
        self.assertEqual(other.cancel_task(task_id, actor=ANA).cancel, "cancelled")
        cut.let_retry.set()
        self.assertTrue(host.wait_tasks(WAIT_S))
        self.assertEqual(self.exporter.runs, [])
        self.assertIs(other.task(task_id, actor=ANA).status, TaskState.CANCELLED)
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})

    def test_a_registry_closed_while_the_accepted_is_being_stored_never_starts_the_call(self) -> None:
        # Closed, its keeper retries that receipt no more: whether it lands is nobody's to confirm.
        _, cut, host, other = self.two_hosts(fails=1)
        task_id = host.invoke(self.CALL, actor=ANA, as_task=True).output["task_id"]
        self.assertTrue(cut.at_retry.wait(WAIT_S))
        host.close()
        self.assertTrue(host.wait_tasks(WAIT_S))
        cut.let_retry.set()  # the retry under way lands after all: the key replays a task that never ran
        self.assertTrue(host.wait_settled(WAIT_S))
        self.assertEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertEqual(self.exporter.runs, [])
        status = other.task(task_id, actor=ANA)
        self.assertEqual((status.status, status.result.outcome), (TaskState.FAILED, Outcome.REJECTED))
        self.assertTrue(other.resolve_unknown("export_report", "a-1", tenant=ANA.tenant, happened=False))
        self.exporter.release.set()
        self.assertNotEqual(other.invoke(self.CALL, actor=ANA, as_task=True).output, {"task_id": task_id})
        self.assertTrue(other.wait_tasks(WAIT_S))
        self.assertEqual(len(self.exporter.runs), 1)


class IsolationTest(TaskTestCase):
    def test_another_tenants_or_actors_task_reads_and_cancels_like_an_unknown_one(self) -> None:
        task_id = self.start().output["task_id"]
        for stranger in (BOB, GLOBEX_ANA):
            self.assertIsNone(self.registry.task(task_id, actor=stranger))
            self.assertIsNone(self.registry.cancel_task(task_id, actor=stranger))
            self.assertEqual(self.registry.tasks(actor=stranger), [])
        self.assertIsNone(self.registry.task("task-" + "0" * 32, actor=ANA))
        for odd in ("", "../../etc", "task-" + "x" * 200, "task-\x00", 7):
            self.assertIsNone(self.registry.task(odd, actor=ANA))  # type: ignore[arg-type]
        self.exporter.release.set()
        self.assertIs(wait_ended(self.registry, task_id).status, TaskState.COMPLETED)  # the strangers' cancels did nothing

    def test_an_actor_whose_permission_was_taken_away_reads_its_tasks_of_that_tool_like_unknown_ones(self) -> None:
        # A task's result is its tool's output: once the tool is hidden from the actor (a retry of the very
        # call answers tool_not_found), its tasks are too, as they are to a stranger (the revoked actor could
        # read the finished export, its tool's name, list it and cancel it).
        task_id = self.start().output["task_id"]
        revoked = Actor(id=ANA.id, tenant=ANA.tenant, permissions=set())
        self.assertIsNone(self.registry.cancel_task(task_id, actor=revoked))
        self.exporter.release.set()
        self.assertIs(wait_ended(self.registry, task_id).status, TaskState.COMPLETED)  # its cancel did nothing
        self.assertEqual(self.start(actor=revoked).error.code, "tool_not_found")
        self.assertIsNone(self.registry.task(task_id, actor=revoked))
        self.assertEqual(self.registry.tasks(actor=revoked), [])
        self.assertEqual(self.registry.task(task_id, actor=ANA).result.output, {"exported": 3})  # given back, seen again

    def test_a_guessed_key_of_another_tenant_starts_its_own_task(self) -> None:
        mine = self.start(key="shared-key").output["task_id"]
        theirs = self.start(key="shared-key", actor=GLOBEX_ANA).output["task_id"]
        self.assertNotEqual(mine, theirs)


class RestartTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")

    def test_a_task_that_ended_before_a_restart_reads_completed_with_its_result_after_it(self) -> None:
        exporter = Exporter()
        exporter.release.set()
        store = SqliteReceiptStore(self.path)
        before = Registry(receipts=store)
        before.register(export_spec(), exporter)
        task_id = before.invoke(ToolCall("export_report", {"rows": 5, "request_id": "r-1"}), actor=ANA,
                                as_task=True).output["task_id"]
        self.assertTrue(before.wait_tasks(WAIT_S))
        before.close()
        store.close()
        store = SqliteReceiptStore(self.path)
        self.addCleanup(store.close)
        after = Registry(receipts=store)
        self.addCleanup(after.close)
        after.register(export_spec(), exporter)
        done = after.task(task_id, actor=ANA)
        self.assertIs(done.status, TaskState.COMPLETED)
        self.assertEqual(done.result.output, {"exported": 5})
        again = after.invoke(ToolCall("export_report", {"rows": 5, "request_id": "r-1"}), actor=ANA, as_task=True)
        self.assertEqual(again.output["task_id"], task_id)
        self.assertEqual(len(exporter.runs), 1)

    def test_a_task_whose_process_was_killed_mid_call_reads_failed_with_its_effect_unknown(self) -> None:
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import sys, threading
            sys.path.insert(0, {str(ROOT)!r})
            sys.path.insert(0, {str(ROOT / 'tests')!r})
            from agent_lab import Registry, SqliteReceiptStore, ToolCall
            from test_tasks import ANA, export_spec
            started = threading.Event()
            def hang(arguments):
                started.set()
                threading.Event().wait(600)
            registry = Registry(receipts=SqliteReceiptStore({self.path!r}, lease_s=4), late_completion_s=0)
            registry.register(export_spec(timeout_ms=4000), hang)
            result = registry.invoke(ToolCall("export_report", {{"rows": 1, "request_id": "k"}}), actor=ANA,
                                     as_task=True)
            started.wait(60)
            print(result.output["task_id"], flush=True)
            threading.Event().wait(600)
            """)], stdout=subprocess.PIPE, text=True)
        try:
            task_id = child.stdout.readline().strip()
        finally:
            child.kill()
            child.wait(WAIT_S)
            child.stdout.close()
        self.assertTrue(task_id.startswith("task-"), task_id)
        store = SqliteReceiptStore(self.path, lease_s=4)
        self.addCleanup(store.close)
        reader = Registry(receipts=store, late_completion_s=0)
        self.addCleanup(reader.close)
        reader.register(export_spec(timeout_ms=4000), lambda arguments: {"exported": 0})
        final = wait_ended(reader, task_id)
        self.assertIs(final.status, TaskState.FAILED)
        self.assertEqual(final.result.error.code, "task_interrupted")
        self.assertIs(final.result.outcome, Outcome.UNKNOWN)  # it started: the export may have happened
        retry = reader.invoke(ToolCall("export_report", {"rows": 1, "request_id": "k"}), actor=ANA, as_task=True)
        self.assertEqual(retry.output["task_id"], task_id)  # the same task: never a second run


class BoundTest(TaskTestCase):
    def test_tasks_beyond_the_bound_are_refused_to_retry_later_and_never_run(self) -> None:
        from agent_lab import tasks

        original = tasks.MAX_RUNNING_TASKS
        import agent_lab.steps.task as task_step

        task_step.MAX_RUNNING_TASKS = 2
        self.addCleanup(setattr, task_step, "MAX_RUNNING_TASKS", original)
        accepted = [self.start(key=f"b-{index}") for index in range(2)]
        refused = self.start(key="b-2")
        self.assertTrue(all(result.outcome is Outcome.ACCEPTED for result in accepted))
        self.assertEqual(refused.error.code, "too_many_tasks")
        self.assertTrue(refused.error.retryable)
        self.exporter.release.set()
        self.assertTrue(self.registry.wait_tasks(WAIT_S))
        self.assertIs(self.start(key="b-2").outcome, Outcome.ACCEPTED)  # the key was freed by the refusal


if __name__ == "__main__":
    unittest.main()
