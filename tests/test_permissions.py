"""Permissions: scopes, then a resource guard. Invisible resources answer exactly like missing ones,
and the actor only ever comes from the application."""

from __future__ import annotations

import logging
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.errors import Outcome
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec

from test_registry_fixtures import (
    GLOBEX_WRITER,
    OUTSIDER,
    READER,
    WRITER,
    ListAuditSink,
    followup_spec,
    get_ticket,
    get_ticket_spec,
    ticket_registry,
)


class ScopeTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = ticket_registry()
        self.addCleanup(self.registry.close)

    def test_an_actor_without_the_scope_is_told_the_tool_does_not_exist_before_anything_runs(self) -> None:
        # Issue 8: a tool hidden from the actor's catalog answers exactly like an unknown tool.
        result = self.registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=OUTSIDER)
        self.assertEqual((result.error.code, result.outcome), ("tool_not_found", Outcome.REJECTED))
        self.assertFalse(result.error.retryable)

    def test_a_tool_without_a_required_permission_is_open_to_every_actor(self) -> None:
        self.registry.register(ToolSpec(name="ping", description="d", input_schema={"type": "object"}),
                               lambda arguments: "pong")
        self.assertEqual(self.registry.invoke(ToolCall("ping", {}), actor=OUTSIDER).output, "pong")

    def test_catalog_with_an_actor_lists_only_the_tools_it_may_call(self) -> None:
        self.assertEqual([tool["name"] for tool in self.registry.catalog(READER)], ["get_ticket"])
        self.assertEqual([tool["name"] for tool in self.registry.catalog(OUTSIDER)], [])
        self.assertEqual([tool["name"] for tool in self.registry.catalog()],
                         ["get_ticket", "record_ticket_followup"])

    def test_catalog_exports_only_the_model_half(self) -> None:
        for tool in self.registry.catalog():
            self.assertLessEqual(set(tool), {"name", "title", "description", "input_schema", "output_schema"})


class HiddenToolTest(unittest.TestCase):
    """Issue 8, item 14: a tool outside the actor's permissions answers exactly like an unknown tool."""

    def setUp(self) -> None:
        self.audit, self.missing_audit = ListAuditSink(), ListAuditSink()
        self.with_tool = ticket_registry(audit=self.audit)
        self.without_tool = Registry(audit=self.missing_audit)
        self.without_tool.register(followup_spec(), lambda arguments: {})
        for registry in (self.with_tool, self.without_tool):
            registry.register(ToolSpec(name="get_ticket_public", description="d", input_schema={"type": "object"}),
                              lambda arguments: {})
            self.addCleanup(registry.close)

    def test_a_hidden_tool_and_a_missing_tool_give_the_same_answer_and_audit_record(self) -> None:
        for arguments in ({"ticket_id": "T-1001"}, {"ticket_id": 7}, {"unexpected": float("nan")}, "not an object"):
            with self.subTest(arguments=arguments):
                hidden = self.with_tool.invoke(ToolCall("get_ticket", arguments, call_id="c-1"), actor=OUTSIDER)
                missing = self.without_tool.invoke(ToolCall("get_ticket", arguments, call_id="c-1"), actor=OUTSIDER)
                self.assertEqual(hidden.to_model(), missing.to_model())
                self.assertEqual((hidden.outcome, hidden.fingerprint), (missing.outcome, missing.fingerprint))
                self.assertEqual(hidden.error.code, "tool_not_found")
                self.assertEqual(hidden.error.details["close_names"], ["get_ticket_public"])
                hidden_record, missing_record = self.audit.records[-1], self.missing_audit.records[-1]
                for record in (hidden_record, missing_record):
                    record.pop("duration_ms")
                self.assertEqual(hidden_record, missing_record)
                self.assertEqual(hidden_record["step"], "route")

    def test_a_hidden_tool_is_never_suggested_as_a_close_name(self) -> None:
        result = self.with_tool.invoke(ToolCall("record_ticket_folowup", {}), actor=READER)
        self.assertNotIn("record_ticket_followup", result.error.details["close_names"])
        allowed = self.with_tool.invoke(ToolCall("record_ticket_folowup", {}), actor=WRITER)
        self.assertIn("record_ticket_followup", allowed.error.details["close_names"])

    def test_the_same_tool_is_visible_and_callable_to_an_actor_with_the_scope(self) -> None:
        self.assertTrue(self.with_tool.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER).ok)


class ResourceGuardTest(unittest.TestCase):
    def setUp(self) -> None:
        self.registry = ticket_registry()
        self.addCleanup(self.registry.close)

    def read(self, ticket_id: str, actor: Actor = READER):
        return self.registry.invoke(ToolCall("get_ticket", {"ticket_id": ticket_id}), actor=actor)

    def test_the_actors_own_ticket_is_visible(self) -> None:
        self.assertEqual(self.read("T-1001").output["subject"], "Printer on fire")

    def test_another_tenants_ticket_answers_exactly_like_a_missing_one(self) -> None:
        foreign, missing = self.read("T-2001"), self.read("T-9999")
        self.assertEqual((foreign.error.code, foreign.outcome), ("not_found", Outcome.REJECTED))
        self.assertEqual(foreign.error.to_dict(), missing.error.to_dict())
        self.assertEqual(foreign.outcome, missing.outcome)
        self.assertNotIn("Globex", repr(foreign.to_model()))

    def test_the_owning_tenant_sees_it(self) -> None:
        self.assertTrue(self.read("T-2001", actor=GLOBEX_WRITER).ok)

    def test_a_guard_must_answer_true_to_allow(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(get_ticket_spec(resource_guard=lambda arguments, actor: "yes"), get_ticket)
        result = registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER)
        self.assertEqual(result.error.code, "not_found")

    def test_a_guard_that_raises_is_contained_and_nothing_runs(self) -> None:
        logging.disable(logging.CRITICAL)
        self.addCleanup(logging.disable, logging.NOTSET)
        ran: list[Any] = []

        def broken_guard(arguments, actor):
            raise LookupError("backend down")

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(get_ticket_spec(resource_guard=broken_guard), lambda arguments: ran.append(1))
        result = registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER)
        self.assertEqual((result.error.code, result.outcome), ("internal_error", Outcome.REJECTED))
        self.assertEqual(ran, [])

    def test_scopes_are_checked_before_the_guard(self) -> None:
        calls: list[Any] = []

        def counting_guard(arguments, actor):
            calls.append(actor)
            return True

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(get_ticket_spec(resource_guard=counting_guard), get_ticket)
        registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=OUTSIDER)
        self.assertEqual(calls, [])


class ActorFromApplicationTest(unittest.TestCase):
    def test_arguments_named_actor_or_tenant_change_nothing(self) -> None:
        seen: list[Any] = []

        def guard(arguments, actor):
            return actor.tenant == "acme"

        def handler(arguments, ctx):
            seen.append((ctx.actor, arguments))
            return {"tenant": ctx.actor.tenant}

        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(
            ToolSpec(name="whoami", description="d", required_permission="tickets:read", resource_guard=guard,
                     input_schema={"type": "object", "properties": {"actor": {}, "tenant": {"type": "string"}}}),
            handler,
        )
        forged = {"actor": {"id": "admin", "tenant": "acme", "permissions": ["*"]}, "tenant": "acme"}
        denied = registry.invoke(ToolCall("whoami", forged), actor=OUTSIDER)
        self.assertEqual(denied.error.code, "tool_not_found")  # issue 8: hidden, not permission_denied
        hidden = registry.invoke(ToolCall("whoami", forged), actor=GLOBEX_WRITER)
        self.assertEqual(hidden.error.code, "not_found")
        allowed = registry.invoke(ToolCall("whoami", {"tenant": "globex"}), actor=READER)
        self.assertEqual(allowed.output, {"tenant": "acme"})
        self.assertIs(seen[0][0], READER)

    def test_permissions_given_as_one_string_are_refused(self) -> None:
        with self.assertRaises(TypeError):
            Actor(id="u", tenant="t", permissions="tickets:read")

    def test_an_actor_is_made_of_plain_non_empty_strings(self) -> None:
        for options in ({"id": None}, {"tenant": 5}, {"tenant": b"acme"}, {"permissions": {"tickets:read", 7}}):
            with self.subTest(options=options), self.assertRaises(TypeError):
                Actor(**{"id": "u", "tenant": "t", **options})
        for options in ({"id": ""}, {"tenant": ""}, {"permissions": {""}}):
            with self.subTest(options=options), self.assertRaisesRegex(ValueError, "must not be empty"):
                Actor(**{"id": "u", "tenant": "t", **options})

    def test_a_tenant_no_receipt_store_can_keep_is_refused_when_the_actor_is_built(self) -> None:
        # Receipts and spent approvals are scoped by tenant; such a tenant made every keyed call an
        # internal_error at the store, far from the session that built the actor.
        for tenant in ("acme\x00globex", "acme\ud800"):
            with self.subTest(tenant=tenant), self.assertRaisesRegex(ValueError, "without NUL or lone surrogates"):
                Actor(id="u", tenant=tenant)
        self.assertEqual(Actor(id="u", tenant="acmé co").tenant, "acmé co")

    def test_a_tenant_that_claims_to_equal_every_tenant_is_just_its_own_text(self) -> None:
        class EqualsAnything(str):
            def __eq__(self, other: object) -> bool:
                return True

            __hash__ = str.__hash__

        actor = Actor(id="u", tenant=EqualsAnything("globex"), permissions={EqualsAnything("tickets:read")})
        self.assertIs(type(actor.tenant), str)
        self.assertTrue(all(type(permission) is str for permission in actor.permissions))
        self.assertNotEqual(actor.tenant, "acme")
        registry = ticket_registry()
        self.addCleanup(registry.close)
        result = registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=actor)
        self.assertEqual(result.error.code, "not_found")


if __name__ == "__main__":
    unittest.main()
