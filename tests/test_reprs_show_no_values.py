"""A repr never shows an argument value it cannot prove harmless (issue 20, item 14).

`repr(ToolCall(...))` showed `password='hunter2-...'`: a call does not know which of its fields its tool
redacts, so its repr shows the argument keys only. The objects that carry a call or its arguments
(the result, the approval, the handler's context, the audit record, model-eval's and tool-eval's call
records, a model turn, an HTTP request to a model) are checked the same way, each holding a secret
that a redacted field carried.
"""

from __future__ import annotations

import secrets
import unittest
from typing import Any

from agent_lab import Actor, Registry, ToolCall, ToolSpec
from agent_lab.audit import MemoryAuditSink
from agent_lab.calls import MAX_REPR_KEYS, InvalidJSONArguments
from agent_lab.lab.replay import CallRun
from agent_lab.modeleval.agent import CallRecord
from agent_lab.modeleval.models.http import HttpRequest
from agent_lab.modeleval.transcript import ModelTurn, ProposedCall

ACTOR = Actor(id="agent-1", tenant="acme", permissions={"accounts.write"})


class ToolCallReprTest(unittest.TestCase):
    def test_a_tool_calls_repr_shows_its_keys_and_never_its_values(self) -> None:
        password = "hunter2-" + secrets.token_hex(8)
        call = ToolCall("login", {"user": "ann", "password": password}, "call-1")
        for shown in (repr(call), str(call), f"{call}", repr([call])):
            self.assertNotIn(password, shown)
            self.assertNotIn("hunter2", shown)
            self.assertNotIn("ann", shown)
        self.assertEqual(repr(call), "ToolCall(name='login', arguments={'user': ..., 'password': ...}, call_id='call-1')")

    def test_arguments_that_are_not_a_plain_dict_show_their_type_and_no_code_of_theirs_runs(self) -> None:
        class Hostile(dict):
            def keys(self) -> Any:
                raise AssertionError("repr read a Mapping subclass")

            def __iter__(self) -> Any:
                raise AssertionError("repr read a Mapping subclass")

        self.assertEqual(repr(ToolCall("t", Hostile(pin="4821"))), "ToolCall(name='t', arguments=<Hostile>, call_id=None)")
        self.assertEqual(repr(ToolCall("t", ["4821"])), "ToolCall(name='t', arguments=<list>, call_id=None)")
        self.assertEqual(repr(ToolCall("t", "pin 4821")), "ToolCall(name='t', arguments=<str>, call_id=None)")
        self.assertIn("InvalidJSONArguments('not JSON')", repr(ToolCall("t", InvalidJSONArguments("not JSON", 4))))

    def test_long_names_and_many_keys_are_cut(self) -> None:
        call = ToolCall("n" * 500, {f"k{number}": number for number in range(MAX_REPR_KEYS + 5)}, "i" * 500)
        shown = repr(call)
        self.assertLess(len(shown), 600)
        self.assertIn("... 5 more", shown)


class ObjectsCarryingACallTest(unittest.TestCase):
    def test_reprs_of_results_approvals_contexts_audit_records_and_call_records_show_no_redacted_value(self) -> None:
        password = "hunter2-" + secrets.token_hex(8)
        contexts: list[Any] = []

        def change_password(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
            contexts.append(ctx)
            return {"changed": True}

        audit = MemoryAuditSink()
        registry = Registry(audit=audit)
        self.addCleanup(registry.close)
        registry.register(ToolSpec(
            name="change_password", description="Change an account's password.", effect="write",
            input_schema={"type": "object", "properties": {"action_id": {"type": "string"},
                                                           "password": {"type": "string"}},
                          "required": ["action_id", "password"], "additionalProperties": False},
            required_permission="accounts.write", idempotency_key="action_id", approval="always",
            redact=("password",)), change_password)
        call = ToolCall("change_password", {"action_id": "a-1", "password": password}, "call-1")
        refused = registry.invoke(call, actor=ACTOR)
        approval = registry.approval_for(call, actor=ACTOR, approver="lead")
        ran = registry.invoke(call, actor=ACTOR, approval=approval)
        self.assertEqual((refused.error.code, ran.ok, len(contexts)), ("approval_required", True, 1))
        shown = {
            "ToolCall": call, "ToolResult (refused)": refused, "ToolResult (ran)": ran, "Approval": approval,
            "CallContext": contexts[0], "audit records": audit.records,
            "CallRecord": CallRecord(step=0, call_id="call-1", tool=call.name, host_name=call.name,
                                     arguments=call.arguments, unparseable=False, known_tool=True, schema_valid=True,
                                     injected=None, approval=None, view=ran.to_model()),
            "CallRun": CallRun(index=0, call_id="call-1", tool=call.name, arguments=call.arguments, approved=True,
                               view=ran.to_model(), leaked_secret=False),
            "ModelTurn": ModelTurn(text="", calls=(ProposedCall(call, call.name),),
                                   raw={"tool_calls": [{"arguments": f'{{"password": "{password}"}}'}]}),
            "HttpRequest": HttpRequest(base_url="http://127.0.0.1:1", path="/v1", body={"messages": [
                {"tool_calls": [{"arguments": {"password": password}}]}]}),
        }
        for name, value in shown.items():
            with self.subTest(object=name):
                self.assertNotIn(password, repr(value))
                self.assertNotIn("hunter2", str(value))


if __name__ == "__main__":
    unittest.main()
