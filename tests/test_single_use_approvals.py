"""Single-use approvals (`ToolSpec(single_use_approval=True)`): an approval lets the tool run once.

It is spent in the receipt store, right after the idempotency key is reserved and before the handler
starts, so every registry sharing the store sees one use; a call answered from its key (a replay, a
call still in progress) or refused before that point leaves it unspent. Reuse is `approval_used`.
"""

from __future__ import annotations

import os
import tempfile
import threading
import unittest
from typing import Any

from agent_lab import ToolFailure
from agent_lab.errors import NextAction, Outcome
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec
from agent_lab.stores import InMemoryReceiptStore, ReceiptKey, ReceiptStoreUnavailable, SqliteReceiptStore

from test_registry_fixtures import WRITER, EffectLog, ListAuditSink, followup_call, followup_spec

PATIENCE_S = 30.0


def once(**overrides: Any) -> ToolSpec:
    """The follow-up tool, needing a single-use approval for every call."""
    return followup_spec(approval="always", single_use_approval=True, **overrides)


class SingleUseApprovalTest(unittest.TestCase):
    def setUp(self) -> None:
        self.effects = EffectLog()
        self.audit = ListAuditSink()
        self.store = InMemoryReceiptStore()
        self.registry = self.make_registry(self.store)

    def make_registry(self, store: Any, spec: ToolSpec | None = None, handler: Any = None) -> Registry:
        registry = Registry(receipts=store, audit=self.audit)
        self.addCleanup(registry.close)
        registry.register(spec or once(idempotency_key=None), handler or self.effects.record_followup)
        return registry

    def approve(self, call, registry: Registry | None = None):
        return (registry or self.registry).approval_for(call, actor=WRITER, approver="manager-7", ttl_s=60)

    # -- the option ---------------------------------------------------------------------------

    def test_the_option_needs_a_policy_that_asks_for_approval_and_is_a_bool(self) -> None:
        with self.assertRaisesRegex(ValueError, "single_use_approval"):
            followup_spec(single_use_approval=True)  # approval="never"
        with self.assertRaisesRegex(ValueError, "single_use_approval"):
            followup_spec(approval="always", single_use_approval=1)
        spec = followup_spec(approval="conditional", approval_condition=lambda arguments: True, single_use_approval=True)
        self.assertTrue(spec.runtime_contract()["single_use_approval"])
        self.assertFalse(followup_spec(approval="always").runtime_contract()["single_use_approval"])

    def test_a_store_without_an_approval_ledger_is_refused_at_registration(self) -> None:
        class NoLedger(InMemoryReceiptStore):
            consume_approval = None  # type: ignore[assignment]

        registry = Registry(receipts=NoLedger())
        self.addCleanup(registry.close)
        with self.assertRaisesRegex(ValueError, "approval ledger"):
            registry.register(once(), self.effects.record_followup)
        registry.register(followup_spec(approval="always"), self.effects.record_followup)  # reusable: fine

    # -- one run per approval -----------------------------------------------------------------

    def test_an_approval_runs_a_tool_without_an_idempotency_key_once(self) -> None:
        call = followup_call()
        approval = self.approve(call)
        first = self.registry.invoke(call, actor=WRITER, approval=approval)
        second = self.registry.invoke(call, actor=WRITER, approval=approval)
        self.assertTrue(first.ok)
        self.assertEqual((second.error.code, second.outcome), ("approval_used", Outcome.REJECTED))
        self.assertEqual(second.error.next_action, NextAction.REQUEST_APPROVAL)
        self.assertFalse(second.error.retryable)
        self.assertEqual(second.error.details["fingerprint"], self.registry.fingerprint(call.name, call.arguments))
        self.assertEqual(len(self.effects.effects), 1)
        self.assertEqual([record["error_code"] for record in self.audit.records], [None, "approval_used"])
        self.assertEqual({record["approval_id"] for record in self.audit.records}, {approval.approval_id})
        self.assertTrue(self.registry.invoke(call, actor=WRITER, approval=self.approve(call)).ok)  # a new one runs
        self.assertEqual(len(self.effects.effects), 2)

    def test_without_the_option_an_approval_is_reusable_until_it_expires(self) -> None:
        registry = self.make_registry(InMemoryReceiptStore(), followup_spec(approval="always", idempotency_key=None))
        call = followup_call()
        approval = self.approve(call, registry)
        for _ in range(3):
            self.assertTrue(registry.invoke(call, actor=WRITER, approval=approval).ok)
        self.assertEqual(len(self.effects.effects), 3)

    def test_threads_racing_with_one_approval_run_the_tool_once(self) -> None:
        call = followup_call()
        approval = self.approve(call)
        start = threading.Barrier(8)
        codes: list = []

        def contend() -> None:
            start.wait(PATIENCE_S)
            result = self.registry.invoke(call, actor=WRITER, approval=approval)
            codes.append(None if result.ok else result.error.code)

        threads = [threading.Thread(target=contend) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(PATIENCE_S)
        self.assertEqual(sorted(codes, key=str), [None] + ["approval_used"] * 7)
        self.assertEqual(len(self.effects.effects), 1)

    # -- keyed tools: answers from the key spend nothing ---------------------------------------

    def test_a_retry_of_a_keyed_call_replays_its_receipt_instead_of_refusing_the_approval(self) -> None:
        registry = self.make_registry(InMemoryReceiptStore(), once())
        call = followup_call()
        approval = self.approve(call, registry)
        first = registry.invoke(call, actor=WRITER, approval=approval)
        again = registry.invoke(call, actor=WRITER, approval=approval)
        self.assertTrue(again.ok)
        self.assertTrue(again.replayed)
        self.assertEqual(again.output, first.output)
        self.assertEqual(len(self.effects.effects), 1)

    def test_a_call_answered_in_progress_leaves_the_approval_unspent(self) -> None:
        store = InMemoryReceiptStore()
        registry = self.make_registry(store, once())
        call = followup_call()
        held = store.reserve(ReceiptKey(WRITER.tenant, call.name, "act-1"), registry.fingerprint(call.name, call.arguments))
        approval = self.approve(call, registry)
        busy = registry.invoke(call, actor=WRITER, approval=approval)
        self.assertEqual(busy.error.code, "idempotency_in_progress")
        store.release(ReceiptKey(WRITER.tenant, call.name, "act-1"), held.owner)
        self.assertTrue(registry.invoke(call, actor=WRITER, approval=approval).ok)
        self.assertEqual(len(self.effects.effects), 1)

    def test_a_keyed_call_that_ran_and_failed_has_spent_its_approval(self) -> None:
        attempts: list = []

        def flaky(arguments):
            attempts.append(arguments)
            if len(attempts) == 1:
                raise ToolFailure("unavailable", "The ticket service is down.")
            return self.effects.record_followup(arguments)

        registry = self.make_registry(InMemoryReceiptStore(), once(), flaky)
        call = followup_call()
        approval = self.approve(call, registry)
        failed = registry.invoke(call, actor=WRITER, approval=approval)
        self.assertEqual((failed.error.code, failed.error.retryable), ("unavailable", True))
        reused = registry.invoke(call, actor=WRITER, approval=approval)
        self.assertEqual(reused.error.code, "approval_used")
        fresh = registry.invoke(call, actor=WRITER, approval=self.approve(call, registry))
        self.assertTrue(fresh.ok)  # the refusal released the key: a new approval runs the same action
        self.assertEqual((len(attempts), len(self.effects.effects)), (2, 1))

    def test_a_call_refused_before_the_ledger_leaves_the_approval_unspent(self) -> None:
        call = followup_call()
        approval = self.approve(call)
        wrong = self.registry.invoke(followup_call(note="Something else."), actor=WRITER, approval=approval)
        self.assertEqual(wrong.error.code, "approval_mismatch")
        self.assertTrue(self.registry.invoke(call, actor=WRITER, approval=approval).ok)

    def test_a_conditional_approval_that_is_not_needed_spends_nothing(self) -> None:
        spec = followup_spec(approval="conditional", approval_condition=lambda arguments: "refund" in arguments["note"],
                             single_use_approval=True, idempotency_key=None)
        registry = self.make_registry(InMemoryReceiptStore(), spec)
        for _ in range(2):
            self.assertTrue(registry.invoke(followup_call(), actor=WRITER).ok)
        refund = followup_call(note="Issue a refund.")
        approval = self.approve(refund, registry)
        self.assertTrue(registry.invoke(refund, actor=WRITER, approval=approval).ok)
        self.assertEqual(registry.invoke(refund, actor=WRITER, approval=approval).error.code, "approval_used")

    # -- the ledger's store ---------------------------------------------------------------------

    def test_a_ledger_that_cannot_answer_runs_nothing_and_spends_nothing(self) -> None:
        class LedgerDown(InMemoryReceiptStore):
            down = True

            def consume_approval(self, *args: Any, **kwargs: Any) -> bool:
                if self.down:
                    raise ReceiptStoreUnavailable("the database is restarting")
                return super().consume_approval(*args, **kwargs)

        store = LedgerDown()
        registry = self.make_registry(store, once())
        call = followup_call()
        approval = self.approve(call, registry)
        with self.assertLogs("agent_lab.registry", "WARNING"):
            refused = registry.invoke(call, actor=WRITER, approval=approval)
        self.assertEqual((refused.error.code, refused.outcome, refused.error.retryable),
                         ("receipt_store_unavailable", Outcome.REJECTED, True))
        self.assertEqual(self.effects.effects, [])
        self.assertIsNone(store.lookup(ReceiptKey(WRITER.tenant, call.name, "act-1")))  # the key was released
        store.down = False
        self.assertTrue(registry.invoke(call, actor=WRITER, approval=approval).ok)

    def test_registries_on_two_stores_of_one_sqlite_file_share_the_ledger_as_two_processes_would(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "receipts.sqlite3")
            first_store, second_store = SqliteReceiptStore(path), SqliteReceiptStore(path)
            self.addCleanup(second_store.close)
            self.addCleanup(first_store.close)
            first = self.make_registry(first_store)
            second = self.make_registry(second_store)
            call = followup_call()
            approval = self.approve(call, first)
            self.assertTrue(first.invoke(call, actor=WRITER, approval=approval).ok)
            self.assertEqual(second.invoke(call, actor=WRITER, approval=approval).error.code, "approval_used")
        self.assertEqual(len(self.effects.effects), 1)


class HostClocksTest(unittest.TestCase):
    """Registries whose clocks disagree with their shared store's: a single-use approval still runs at
    most once, however the store's clock and theirs differ."""

    def setUp(self) -> None:
        self.store_now = [1_000_000.0]
        self.store = InMemoryReceiptStore(ttl_s=1, clock=lambda: self.store_now[0], monotonic=lambda: self.store_now[0])
        self.effects = EffectLog()

    def registry_off_by(self, offset_s: float) -> Registry:
        registry = Registry(receipts=self.store, clock=lambda: self.store_now[0] + offset_s)
        self.addCleanup(registry.close)
        registry.register(once(idempotency_key=None), self.effects.record_followup)
        return registry

    def test_an_approval_spent_by_a_host_whose_clock_leads_is_never_taken_again_by_one_in_step(self) -> None:
        ahead, in_step = self.registry_off_by(+5), self.registry_off_by(0)  # 5 s ahead, more than the ttl
        call = followup_call()
        approval = in_step.approval_for(call, actor=WRITER, approver="manager-7", ttl_s=10)
        self.assertIsNone(ahead.invoke(call, actor=WRITER, approval=approval).error)
        answers = []
        for _ in range(10):  # a retry every second for as long as the approval is valid on the host in step
            self.store_now[0] += 1
            error = in_step.invoke(call, actor=WRITER, approval=approval).error
            answers.append("ran" if error is None else error.code)
        self.assertEqual(answers, ["approval_used"] * 9 + ["approval_expired"])
        self.assertEqual(len(self.effects.effects), 1)

    def test_a_host_whose_clock_lags_the_store_by_more_than_its_ttl_spends_no_approval(self) -> None:
        lagging, in_step = self.registry_off_by(-5), self.registry_off_by(0)
        call = followup_call()
        approval = in_step.approval_for(call, actor=WRITER, approver="manager-7", ttl_s=10)
        with self.assertLogs("agent_lab.registry", "WARNING") as logged:
            refused = lagging.invoke(call, actor=WRITER, approval=approval)
        self.assertIn("clock lags", logged.output[0])
        self.assertEqual(refused.error.code, "internal_error")
        self.assertIn("clock lags", refused.error.message)
        self.assertEqual(self.effects.effects, [])
        self.assertIsNone(in_step.invoke(call, actor=WRITER, approval=approval).error)  # it was not spent
        self.assertEqual(len(self.effects.effects), 1)

    def test_a_host_whose_clock_lags_within_the_ttl_runs_an_approved_call_once(self) -> None:
        lagging = self.registry_off_by(-0.5)
        call = followup_call()
        approval = lagging.approval_for(call, actor=WRITER, approver="manager-7", ttl_s=10)
        answers = []
        for _ in range(11):
            answers.append(lagging.invoke(call, actor=WRITER, approval=approval).error)
            self.store_now[0] += 1
        self.assertEqual(["ran" if error is None else error.code for error in answers],
                         ["ran"] + ["approval_used"] * 9 + ["approval_expired"])
        self.assertEqual(len(self.effects.effects), 1)


if __name__ == "__main__":
    unittest.main()
