"""Approvals are bound to one exact call by one actor: tool, argument fingerprint, the actor's id and
tenant; they expire; they never replace a permission."""

from __future__ import annotations

import dataclasses
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.context import CallContext
from agent_lab.errors import NextAction, Outcome
from agent_lab.policy import Actor, Approval
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import (
    GLOBEX_WRITER,
    READER,
    WRITER,
    EffectLog,
    ListAuditSink,
    followup_call,
    followup_spec,
)

NOW = 1_000_000.0


class EqualsAnything(str):
    """A string that claims to equal every other value (a forged approval field)."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True


class ApprovalTest(unittest.TestCase):
    def setUp(self) -> None:
        self.now = NOW
        self.effects = EffectLog()
        self.audit = ListAuditSink()
        self.contexts: list[CallContext] = []
        self.registry = Registry(clock=lambda: self.now, audit=self.audit)
        self.addCleanup(self.registry.close)

        def handler(arguments, ctx):
            self.contexts.append(ctx)
            return self.effects.record_followup(arguments)

        self.registry.register(followup_spec(approval="always"), handler)

    def approve(self, call: ToolCall, actor=WRITER, ttl_s: float = 60.0) -> Approval:
        return self.registry.approval_for(call, actor=actor, approver="manager-7", ttl_s=ttl_s, now=self.now)

    def test_a_call_without_approval_is_refused_with_what_a_person_needs_to_approve_it(self) -> None:
        call = followup_call(api_token="sk-secret-token")
        result = self.registry.invoke(call, actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("approval_required", Outcome.REJECTED))
        self.assertEqual(result.error.next_action, NextAction.REQUEST_APPROVAL)
        details = result.error.details
        self.assertEqual(details["tool"], "record_ticket_followup")
        self.assertEqual(details["fingerprint"], self.registry.fingerprint(call.name, call.arguments))
        self.assertEqual(
            details["summary"],
            "record_ticket_followup(ticket_id='T-1001', note='Called the customer back.', action_id='act-1', "
            "api_token=[redacted])",
        )
        self.assertNotIn("sk-secret-token", repr(result.to_model()))
        self.assertEqual(self.effects.effects, [])

    def test_the_summary_cuts_long_values(self) -> None:
        result = self.registry.invoke(followup_call(note="x" * 400), actor=WRITER)
        summary = result.error.details["summary"]
        self.assertIn("note='" + "x" * 40 + "…'", summary)
        self.assertLess(len(summary), 200)

    def test_an_approval_for_exactly_this_call_lets_it_run_and_is_audited(self) -> None:
        call = followup_call()
        approval = self.approve(call)
        result = self.registry.invoke(call, actor=WRITER, approval=approval)
        self.assertTrue(result.ok)
        self.assertIs(self.contexts[0].approval, approval)
        self.assertEqual(self.audit.records[-1]["approval_id"], approval.approval_id)
        self.assertEqual(len(self.effects.effects), 1)

    def test_an_approval_for_other_arguments_is_a_mismatch(self) -> None:
        approval = self.approve(followup_call(note="Refund 10 EUR."))
        result = self.registry.invoke(followup_call(note="Refund 10000 EUR."), actor=WRITER, approval=approval)
        self.assertEqual((result.error.code, result.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_an_approval_for_another_tool_is_a_mismatch(self) -> None:
        other = ToolCall("delete_ticket", followup_call().arguments)
        result = self.registry.invoke(followup_call(), actor=WRITER, approval=self.approve(other))
        self.assertEqual(result.error.code, "approval_mismatch")

    def test_an_approval_for_another_tenant_is_a_mismatch(self) -> None:
        approval = self.approve(followup_call(), actor=GLOBEX_WRITER)
        result = self.registry.invoke(followup_call(), actor=WRITER, approval=approval)
        self.assertEqual(result.error.code, "approval_mismatch")

    def test_an_approval_for_another_actor_of_the_same_tenant_is_a_mismatch(self) -> None:
        # Issue 20, item 10: agent-1's approval was used by agent-2-untrusted of the same tenant.
        agent_1 = Actor(id="agent-1", tenant="acme", permissions=WRITER.permissions)
        agent_2 = Actor(id="agent-2-untrusted", tenant="acme", permissions=WRITER.permissions)
        approval = self.approve(followup_call(), actor=agent_1)
        self.assertEqual((approval.actor_id, approval.tenant), ("agent-1", "acme"))
        result = self.registry.invoke(followup_call(), actor=agent_2, approval=approval)
        self.assertEqual((result.error.code, result.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertEqual(result.error.next_action, NextAction.REQUEST_APPROVAL)
        self.assertEqual(self.effects.effects, [])
        self.assertTrue(self.registry.invoke(followup_call(), actor=agent_1, approval=approval).ok)
        self.assertEqual(len(self.effects.effects), 1)

    def test_an_approval_whose_actor_field_compares_equal_to_anything_names_no_other_actor(self) -> None:
        approval = self.approve(followup_call())
        intruder = Actor(id="agent-2-untrusted", tenant="acme", permissions=WRITER.permissions)
        for forged in (dataclasses.replace(approval, actor_id=EqualsAnything("u-writer")), approval):
            if forged is approval:
                object.__setattr__(approval, "actor_id", EqualsAnything("u-writer"))
            with self.subTest(changed_after_it_was_built=forged is approval):
                result = self.registry.invoke(followup_call(), actor=intruder, approval=forged)
                self.assertEqual((result.error.code, result.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_something_that_is_not_an_approval_is_a_mismatch(self) -> None:
        for fake in (True, "approved", {"approval_id": "apr_1"}):
            with self.subTest(fake=fake):
                result = self.registry.invoke(followup_call(), actor=WRITER, approval=fake)
                self.assertEqual(result.error.code, "approval_mismatch")

    def test_an_expired_approval_is_refused_by_the_registry_clock(self) -> None:
        approval = self.approve(followup_call(), ttl_s=30)
        self.now += 31
        result = self.registry.invoke(followup_call(), actor=WRITER, approval=approval)
        self.assertEqual((result.error.code, result.outcome), ("approval_expired", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_an_approval_never_substitutes_for_a_permission(self) -> None:
        # Issue 8: a tool outside the actor's permissions answers like one that does not exist.
        approval = self.approve(followup_call(), actor=READER)
        result = self.registry.invoke(followup_call(), actor=READER, approval=approval)
        self.assertEqual(result.error.code, "tool_not_found")
        self.assertEqual(self.effects.effects, [])

    def test_equivalent_arguments_keep_the_approval_valid(self) -> None:
        approval = self.approve(followup_call())
        reordered = ToolCall("record_ticket_followup", dict(reversed(list(followup_call().arguments.items()))))
        self.assertTrue(self.registry.invoke(reordered, actor=WRITER, approval=approval).ok)

    def test_an_approval_whose_fields_compare_equal_to_anything_does_not_match_other_arguments(self) -> None:
        approval = self.approve(followup_call(note="Refund 10 EUR."))
        forged = dataclasses.replace(approval, fingerprint=EqualsAnything(approval.fingerprint),
                                     tenant=EqualsAnything("acme"), tool=EqualsAnything("x"))
        result = self.registry.invoke(followup_call(note="Refund 10000 EUR."), actor=WRITER, approval=forged)
        self.assertEqual((result.error.code, result.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_an_approval_changed_after_it_was_built_is_checked_again_when_used(self) -> None:
        # The constructor checks every field, but object.__setattr__ (or an unpickled, edited state)
        # changes a frozen dataclass afterwards: the registry must not trust what it no longer checks.
        approval = self.approve(followup_call(note="Refund 10 EUR."))
        object.__setattr__(approval, "fingerprint", EqualsAnything(approval.fingerprint))
        other_arguments = self.registry.invoke(followup_call(note="Refund 10000 EUR."), actor=WRITER, approval=approval)
        self.assertEqual((other_arguments.error.code, other_arguments.outcome), ("approval_mismatch", Outcome.REJECTED))
        approval = self.approve(followup_call())
        object.__setattr__(approval, "tenant", EqualsAnything("acme"))
        other_tenant = self.registry.invoke(followup_call(), actor=GLOBEX_WRITER, approval=approval)
        self.assertEqual((other_tenant.error.code, other_tenant.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_an_approval_whose_expiry_was_changed_to_never_expire_is_refused(self) -> None:
        for expires_at in (float("nan"), float("inf"), None, "2999-01-01"):
            with self.subTest(expires_at=expires_at):
                approval = self.approve(followup_call(), ttl_s=30)
                object.__setattr__(approval, "expires_at", expires_at)
                self.now += 31  # past the expiry it was built with
                result = self.registry.invoke(followup_call(), actor=WRITER, approval=approval)
                self.assertFalse(result.ok)
                self.assertEqual(result.outcome, Outcome.REJECTED)
        self.assertEqual(self.effects.effects, [])

    def test_a_subclass_cannot_answer_for_its_fields_with_properties(self) -> None:
        class Forged(Approval):
            fingerprint = property(lambda self: EqualsAnything("x"), lambda self, value: None)  # type: ignore[assignment]

        forged = Forged(approval_id="apr_forged", tool="record_ticket_followup", fingerprint="nothing",
                        tenant="acme", actor_id="u-writer", approver="nobody", expires_at=NOW + 60)
        result = self.registry.invoke(followup_call(note="Refund 10000 EUR."), actor=WRITER, approval=forged)
        self.assertEqual((result.error.code, result.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertEqual(self.effects.effects, [])

    def test_a_policy_hook_that_changes_its_arguments_cannot_run_what_was_not_approved(self) -> None:
        # The resource guard and the approval condition are shown the arguments; what they do to them
        # must not reach the handler, or the approved fingerprint (made before them, for the audit
        # record) no longer describes what runs.
        def rewrite(arguments: Any) -> bool:
            arguments["note"] = "Refund 10000 EUR."
            return True

        hooks = {"resource_guard": lambda arguments, actor: rewrite(arguments),
                 "approval": "conditional", "approval_condition": rewrite}
        for hook in ("resource_guard", "approval_condition"):
            with self.subTest(hook=hook):
                effects = EffectLog()
                registry = Registry(clock=lambda: self.now, audit=ListAuditSink())
                self.addCleanup(registry.close)
                options = {"approval": hooks["approval"], hook: hooks[hook]} if hook == "approval_condition" else {
                    "approval": "always", hook: hooks[hook]}
                registry.register(followup_spec(**options), lambda arguments: effects.record_followup(arguments))
                call = followup_call(note="Refund 10 EUR.")
                approval = registry.approval_for(call, actor=WRITER, approver="manager-7", now=self.now)
                result = registry.invoke(call, actor=WRITER, approval=approval)
                self.assertTrue(result.ok, result)
                self.assertEqual([effect["note"] for effect in effects.effects], ["Refund 10 EUR."])

    def test_an_approval_without_a_finite_expiry_or_with_non_string_fields_cannot_be_built(self) -> None:
        approval = self.approve(followup_call())
        for expires_at in (float("nan"), float("inf"), "2030-01-01", None, True):
            with self.subTest(expires_at=expires_at), self.assertRaisesRegex(ValueError, "expires_at"):
                dataclasses.replace(approval, expires_at=expires_at)
        for name in ("approval_id", "tool", "fingerprint", "tenant", "actor_id", "approver"):
            for value in (None, 7, b"acme", AlwaysEqual()):
                with self.subTest(field=name, value=value), self.assertRaisesRegex(TypeError, name):
                    dataclasses.replace(approval, **{name: value})

    def test_approval_ttl_must_be_a_positive_number(self) -> None:
        for ttl in (0, -5, True, "60", float("nan"), float("inf")):
            with self.subTest(ttl=ttl), self.assertRaisesRegex(ValueError, "ttl_s must be a positive number"):
                Approval.for_call(followup_call(), actor=WRITER, approver="m", registry=self.registry, ttl_s=ttl)


class SingleUseApprovalOfAnotherActorTest(unittest.TestCase):
    def test_another_actor_presenting_a_single_use_approval_neither_runs_nor_spends_it(self) -> None:
        effects = EffectLog()
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(followup_spec(approval="always", single_use_approval=True), effects.record_followup)
        intruder = Actor(id="agent-2-untrusted", tenant=WRITER.tenant, permissions=WRITER.permissions)
        approval = registry.approval_for(followup_call(), actor=WRITER, approver="manager-7")
        refused = registry.invoke(followup_call(), actor=intruder, approval=approval)
        self.assertEqual((refused.error.code, refused.outcome), ("approval_mismatch", Outcome.REJECTED))
        self.assertTrue(registry.invoke(followup_call(), actor=WRITER, approval=approval).ok)  # still unspent
        self.assertEqual(len(effects.effects), 1)


class ApprovalPolicyTest(unittest.TestCase):
    def registry_with(self, **spec_options: Any) -> Registry:
        registry = Registry()
        self.addCleanup(registry.close)
        spec = ToolSpec(
            name="refund",
            description="Refund an amount.",
            input_schema={"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
            required_permission="tickets:write",
            **spec_options,
        )
        registry.register(spec, lambda arguments: {"refunded": arguments["amount"]})
        return registry

    def test_conditional_approval_applies_only_when_the_condition_holds(self) -> None:
        registry = self.registry_with(approval="conditional", approval_condition=lambda arguments: arguments["amount"] > 100)
        self.assertTrue(registry.invoke(ToolCall("refund", {"amount": 20}), actor=WRITER).ok)
        large = registry.invoke(ToolCall("refund", {"amount": 500}), actor=WRITER)
        self.assertEqual(large.error.code, "approval_required")
        approval = registry.approval_for(ToolCall("refund", {"amount": 500}), actor=WRITER, approver="m")
        self.assertTrue(registry.invoke(ToolCall("refund", {"amount": 500}), actor=WRITER, approval=approval).ok)

    def test_never_ignores_an_approval(self) -> None:
        registry = self.registry_with(approval="never")
        stale = registry.approval_for(ToolCall("refund", {"amount": 1}), actor=WRITER, approver="m")
        self.assertTrue(registry.invoke(ToolCall("refund", {"amount": 2}), actor=WRITER, approval=stale).ok)

    def test_a_condition_that_raises_is_contained(self) -> None:
        import logging

        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        registry = self.registry_with(approval="conditional", approval_condition=lambda arguments: 1 / 0)
        result = registry.invoke(ToolCall("refund", {"amount": 5}), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))


class BrokenClockTest(unittest.TestCase):
    """Issue 8, item 14: a clock that reads NaN, an infinity or no number fails closed, never open."""

    def setUp(self) -> None:
        self.effects = EffectLog()
        self.reading: Any = NOW
        self.registry = Registry(clock=self.clock)
        self.addCleanup(self.registry.close)
        self.registry.register(followup_spec(approval="always"), self.effects.record_followup)
        self.approval = self.registry.approval_for(followup_call(), actor=WRITER, approver="m", ttl_s=60, now=NOW)

    def clock(self) -> Any:
        if isinstance(self.reading, BaseException):
            raise self.reading
        return self.reading

    def test_an_approved_call_is_refused_when_the_clock_is_not_a_finite_number(self) -> None:
        import logging

        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        for reading in (float("nan"), float("-inf"), float("inf"), None, "soon", True, 10**400, RuntimeError("ntp")):
            with self.subTest(reading=reading):
                self.reading = reading
                result = self.registry.invoke(followup_call(), actor=WRITER, approval=self.approval)
                self.assertIn(result.error.code if result.error else None, ("approval_expired", "internal_error"))
                self.assertEqual(result.outcome, Outcome.REJECTED)
        self.assertEqual(self.effects.effects, [])
        self.reading = NOW + 1  # and a working clock lets the same approval through
        self.assertTrue(self.registry.invoke(followup_call(), actor=WRITER, approval=self.approval).ok)

    def test_an_approval_counts_as_expired_at_a_time_that_is_not_a_finite_number(self) -> None:
        for now in (float("nan"), float("inf"), float("-inf"), None, "0", 10**400):
            with self.subTest(now=now):
                self.assertTrue(self.approval.expired(now))  # type: ignore[arg-type]
        self.assertFalse(self.approval.expired(NOW))
        self.assertTrue(self.approval.expired(NOW + 60))

    def test_an_approval_is_never_issued_for_a_time_or_ttl_that_is_not_a_finite_number(self) -> None:
        bad_times = (float("nan"), float("inf"), "now", True, 10**400)
        for now in bad_times:
            with self.subTest(now=now), self.assertRaises(ValueError):
                Approval.for_call(followup_call(), actor=WRITER, approver="m", registry=self.registry, now=now)  # type: ignore[arg-type]
        for ttl_s in (float("nan"), float("inf"), 0, -1, True, "60", 10**400):
            with self.subTest(ttl_s=ttl_s), self.assertRaises(ValueError):
                Approval.for_call(followup_call(), actor=WRITER, approver="m", registry=self.registry, ttl_s=ttl_s)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):  # finite each, but their sum is not
            Approval.for_call(followup_call(), actor=WRITER, approver="m", registry=self.registry, now=1.7e308, ttl_s=1e308)
        for expires_at in (float("nan"), float("inf"), 10**400, None, True):
            with self.subTest(expires_at=expires_at), self.assertRaises(ValueError):
                dataclasses.replace(self.approval, expires_at=expires_at)


if __name__ == "__main__":
    unittest.main()
