"""Registry.invoke runs its steps in one fixed order; each step answers with its own code."""

from __future__ import annotations

import time
import unittest

from agent_lab.calls import ToolCall
from agent_lab.errors import Outcome, ToolFailure
from agent_lab.policy import Approval
from agent_lab.registry import STEPS, Registry

from test_registry_fixtures import (
    OUTSIDER,
    READER,
    WRITER,
    EffectLog,
    ListAuditSink,
    followup_call,
    followup_spec,
    ticket_registry,
)


class StepOrderTest(unittest.TestCase):
    def setUp(self) -> None:
        self.effects = EffectLog()
        self.audit = ListAuditSink()
        self.registry = ticket_registry(self.effects, audit=self.audit)
        self.addCleanup(self.registry.close)

    def code_of(self, call: ToolCall, actor=WRITER, **options) -> str | None:
        result = self.registry.invoke(call, actor=actor, **options)
        return result.error.code if result.error else None

    def test_the_steps_are_named_in_design_order(self) -> None:
        self.assertEqual(
            STEPS,
            ("route", "schema", "permission", "approval", "deadline", "idempotency", "execute", "output", "record"),
        )

    def test_unknown_tool_is_reported_before_anything_else(self) -> None:
        result = self.registry.invoke(
            ToolCall("get_tickets", {"bad": float("nan")}), actor=OUTSIDER, deadline=time.monotonic() - 1
        )
        self.assertEqual(result.error.code, "tool_not_found")
        self.assertEqual(result.error.details["close_names"], [])  # nothing OUTSIDER may call is suggested
        self.assertEqual(result.outcome, Outcome.REJECTED)
        self.assertEqual(self.audit.records[-1]["step"], "route")

    def test_close_names_suggest_only_tools_the_actor_may_call(self) -> None:
        # catalog(actor) hides the write tool from a reader; a near miss must not reveal it either.
        for actor, expected in ((READER, []), (WRITER, ["record_ticket_followup"])):
            with self.subTest(actor=actor.id):
                result = self.registry.invoke(ToolCall("record_ticket_folowup", {}), actor=actor)
                self.assertEqual(result.error.details["close_names"], expected)
        self.assertEqual(self.registry.invoke(ToolCall("get_tickets", {}), actor=None).error.details["close_names"],
                         [])

    def test_unpermitted_call_with_bad_arguments_reports_tool_not_found_at_route(self) -> None:
        # Issue 8: a hidden tool's schema must not answer either (invalid_arguments would show it exists).
        self.assertEqual(self.code_of(ToolCall("get_ticket", {"ticket_id": 7}), actor=OUTSIDER), "tool_not_found")
        self.assertEqual(self.audit.records[-1]["step"], "route")

    def test_unapproved_call_without_permission_reports_tool_not_found_not_approval_required(self) -> None:
        guarded = _registry_with(followup_spec(approval="always"))
        self.addCleanup(guarded.close)
        result = guarded.invoke(followup_call(), actor=READER)
        self.assertEqual(result.error.code, "tool_not_found")  # issue 8: hidden, not permission_denied

    def test_approval_is_checked_before_the_deadline(self) -> None:
        guarded = _registry_with(followup_spec(approval="always"))
        self.addCleanup(guarded.close)
        result = guarded.invoke(followup_call(), actor=WRITER, deadline=time.monotonic() - 1)
        self.assertEqual(result.error.code, "approval_required")

    def test_approved_call_for_other_arguments_reports_approval_mismatch(self) -> None:
        guarded = _registry_with(followup_spec(approval="always"))
        self.addCleanup(guarded.close)
        approval = guarded.approval_for(followup_call(note="A different note."), actor=WRITER, approver="boss")
        result = guarded.invoke(followup_call(), actor=WRITER, approval=approval)
        self.assertEqual(result.error.code, "approval_mismatch")

    def test_passed_deadline_is_reported_before_idempotency_and_keeps_the_key_free(self) -> None:
        self.assertEqual(self.code_of(followup_call(), deadline=time.monotonic() - 0.001), "deadline_exceeded")
        self.assertEqual(self.audit.records[-1]["step"], "deadline")
        result = self.registry.invoke(followup_call(), actor=WRITER)
        self.assertTrue(result.ok)
        self.assertEqual(len(self.effects.effects), 1)

    def test_idempotency_is_checked_before_execution(self) -> None:
        self.registry.invoke(followup_call(), actor=WRITER)
        self.assertEqual(self.code_of(followup_call(note="Changed my mind.")), "idempotency_conflict")
        self.assertEqual(self.audit.records[-1]["step"], "idempotency")
        self.assertEqual(len(self.effects.effects), 1)

    def test_successful_call_reaches_record(self) -> None:
        self.assertIsNone(self.code_of(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER))
        self.assertEqual(self.audit.records[-1]["step"], "record")

    def test_handler_failure_stops_at_execute(self) -> None:
        def missing(arguments):
            raise ToolFailure("not_found", "No such ticket.")

        audit = ListAuditSink()
        registry = _registry_with(followup_spec(name="lookup", effect="read", idempotency_key=None), missing, audit=audit)
        self.addCleanup(registry.close)
        result = registry.invoke(ToolCall("lookup", followup_call().arguments), actor=WRITER)
        self.assertEqual((result.error.code, result.outcome), ("not_found", Outcome.FAILED))
        self.assertEqual(audit.records[-1]["step"], "execute")

    def test_broken_output_stops_at_output(self) -> None:
        registry = _registry_with(followup_spec(name="get_thing", effect="read", idempotency_key=None,
                                                output_schema={"type": "object", "required": ["id"]}),
                                  handler=lambda arguments: {"no_id": True})
        self.addCleanup(registry.close)
        result = registry.invoke(ToolCall("get_thing", followup_call().arguments), actor=WRITER)
        self.assertEqual(result.error.code, "invalid_tool_output")
        self.assertEqual(result.error.details["violations"][0]["keyword"], "required")

    def test_every_result_carries_call_id_tool_fingerprint_and_duration(self) -> None:
        result = self.registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}, call_id="c-9"), actor=READER)
        self.assertEqual(result.call_id, "c-9")
        self.assertEqual(result.tool, "get_ticket")
        self.assertTrue(result.fingerprint.startswith("blake2b-mac:"))
        self.assertGreater(result.duration_ms, 0.0)

    def test_refused_call_still_carries_the_fingerprint_of_json_arguments(self) -> None:
        # Issue 8: OUTSIDER no longer reaches the permission step (the tool is hidden from it); another
        # tenant's ticket is refused there, after the schema step, by the resource guard.
        result = self.registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-2001"}), actor=READER)
        self.assertEqual(result.error.code, "not_found")
        self.assertTrue(result.fingerprint.startswith("blake2b-mac:"))

    def test_one_audit_record_per_invoke_with_the_contract_fields(self) -> None:
        self.registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER)
        self.registry.invoke(ToolCall("nope", {}), actor=READER)
        self.assertEqual(len(self.audit.records), 2)
        self.assertEqual(
            set(self.audit.records[0]),
            {"call_id", "tool", "actor_id", "tenant", "fingerprint", "step", "outcome", "error_code",
             "duration_ms", "replayed", "approval_id", "receipt", "attempt"},
        )
        self.assertEqual(self.audit.records[0]["actor_id"], READER.id)
        self.assertEqual(self.audit.records[1]["error_code"], "tool_not_found")

    def test_audit_records_keep_their_own_fields_when_a_tool_redacts_arguments_of_the_same_name(self) -> None:
        # The audit record never holds arguments or output, so redaction has nothing to mask in it.
        spec = followup_spec(name="note_for_tenant", redact=("tenant", "actor_id", "tool", "api_token"))
        registry = _registry_with(spec, audit=self.audit)
        self.addCleanup(registry.close)
        registry.invoke(ToolCall("note_for_tenant", followup_call(api_token="sk-1").arguments), actor=WRITER)
        record = self.audit.records[-1]
        self.assertEqual((record["tenant"], record["actor_id"], record["tool"]),
                         (WRITER.tenant, WRITER.id, "note_for_tenant"))
        self.assertNotIn("sk-1", repr(record))


def _registry_with(spec, handler=None, **options):
    registry = Registry(**options)
    registry.register(spec, handler or EffectLog().record_followup)
    return registry


if __name__ == "__main__":
    unittest.main()
