"""Call ids the registry makes, and when a call carries a fingerprint.

A call without a call id gets one that is unique within its registry and across registries. The
fingerprint is made only when something needs it: an approval, an idempotency key or an audit sink.
With an audit sink every record of a call whose arguments were read (within budget, canonical JSON)
carries it, refusals included; a read of a tool with neither approval nor key, in a registry without
an audit sink, carries none.
"""

from __future__ import annotations

import threading
import unittest

from agent_lab import Registry, ToolCall, ToolSpec
from agent_lab.errors import Outcome

from test_registry_fixtures import READER, WRITER, ListAuditSink, followup_call, followup_spec, get_ticket, get_ticket_spec


class CallIdTest(unittest.TestCase):
    def test_ids_are_unique_across_many_calls_threads_and_two_registries(self) -> None:
        registries = [Registry(), Registry()]
        ids: list[str] = []
        lock = threading.Lock()
        for registry in registries:
            self.addCleanup(registry.close)
            registry.register(get_ticket_spec(execution="inline"), get_ticket)

        def caller(registry: Registry) -> None:
            mine = [registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER).call_id
                    for _ in range(500)]
            with lock:
                ids.extend(mine)

        threads = [threading.Thread(target=caller, args=(registry,)) for registry in registries for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(len(ids), 4000)
        self.assertEqual(len(set(ids)), 4000)
        self.assertTrue(all(isinstance(call_id, str) and call_id.startswith("call_") for call_id in ids))
        prefixes = {call_id.rsplit("-", 1)[0] for call_id in ids}
        self.assertEqual(len(prefixes), 2)  # one random prefix per registry, none shared
        self.assertTrue(all(len(prefix) == len("call_") + 16 for prefix in prefixes))

    def test_a_call_id_given_by_the_caller_is_kept(self) -> None:
        registry = Registry()
        self.addCleanup(registry.close)
        registry.register(get_ticket_spec(), get_ticket)
        self.assertEqual(registry.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}, call_id="c-1"),
                                         actor=READER).call_id, "c-1")


class FingerprintOnNeedTest(unittest.TestCase):
    def setUp(self) -> None:
        self.audit = ListAuditSink()
        self.audited = Registry(audit=self.audit)
        self.plain = Registry()
        for registry in (self.audited, self.plain):
            self.addCleanup(registry.close)
            registry.register(get_ticket_spec(), get_ticket)
            registry.register(followup_spec(), lambda arguments: {"done": True})
            registry.register(followup_spec(name="close_ticket", approval="always"), lambda arguments: {"closed": True})
            registry.register(ToolSpec(name="count", description="d", input_schema={"type": "object"},
                                       max_input_bytes=64), lambda arguments: {})
            registry.register(ToolSpec(name="wide", description="d", input_schema={"type": "object"}),
                              lambda arguments: {})

    def expected(self, registry: Registry, call: ToolCall) -> str:
        return registry.fingerprint(call.name, call.arguments)

    def test_a_plain_read_without_an_audit_sink_carries_no_fingerprint(self) -> None:
        result = self.plain.invoke(ToolCall("get_ticket", {"ticket_id": "T-1001"}), actor=READER)
        self.assertTrue(result.ok)
        self.assertIsNone(result.fingerprint)

    def test_with_an_audit_sink_the_read_and_its_record_carry_it(self) -> None:
        call = ToolCall("get_ticket", {"ticket_id": "T-1001"})
        result = self.audited.invoke(call, actor=READER)
        self.assertEqual(result.fingerprint, self.expected(self.audited, call))
        self.assertEqual(self.audit.records[-1]["fingerprint"], result.fingerprint)

    def test_an_idempotency_key_or_an_approval_makes_it_without_an_audit_sink(self) -> None:
        write = followup_call()
        self.assertEqual(self.plain.invoke(write, actor=WRITER).fingerprint, self.expected(self.plain, write))
        close = ToolCall("close_ticket", followup_call().arguments)
        refused = self.plain.invoke(close, actor=WRITER)
        self.assertEqual(refused.error.code, "approval_required")
        self.assertEqual(refused.error.details["fingerprint"], self.expected(self.plain, close))
        self.assertEqual(refused.fingerprint, refused.error.details["fingerprint"])

    def test_what_a_refused_calls_audit_record_carries(self) -> None:
        cases = [
            # refused after its arguments were read: the fingerprint, to correlate it
            (ToolCall("get_ticket", {"ticket_id": "T-2001"}), "not_found", True),
            (ToolCall("get_ticket", {"ticket_id": "nope"}), "invalid_arguments", True),
            (ToolCall("close_ticket", followup_call().arguments), "approval_required", True),
            # refused before they were read, or unreadable: none
            (ToolCall("get_tickets", {"ticket_id": "T-1001"}), "tool_not_found", False),
            (ToolCall("count", {"text": "x" * 100}), "input_too_large", False),
            (ToolCall("count", {"value": float("nan")}), "invalid_arguments", False),
        ]
        for call, code, carries in cases:
            with self.subTest(code=code, tool=call.name):
                result = self.audited.invoke(call, actor=WRITER)
                self.assertEqual((result.error.code, result.outcome), (code, Outcome.REJECTED))
                record = self.audit.records[-1]
                self.assertEqual(record["error_code"], code)
                if carries:
                    self.assertEqual(record["fingerprint"], self.expected(self.audited, call))
                else:
                    self.assertIsNone(record["fingerprint"])
                self.assertEqual(result.fingerprint, record["fingerprint"])

    def test_the_audit_fingerprint_is_of_the_call_not_of_what_the_handler_did_to_its_arguments(self) -> None:
        def mutating(arguments):
            arguments["ticket_id"] = "T-9999"
            return {"ticket_id": "T-1001", "subject": "s"}

        self.audited.register(get_ticket_spec(name="get_ticket_mutating", resource_guard=None), mutating)
        call = ToolCall("get_ticket_mutating", {"ticket_id": "T-1001"})
        result = self.audited.invoke(call, actor=READER)
        self.assertTrue(result.ok, result)
        self.assertEqual(self.audit.records[-1]["fingerprint"], self.expected(self.audited, call))

    def test_an_integer_the_schema_accepts_but_canonical_json_refuses_is_still_refused(self) -> None:
        for registry in (self.plain, self.audited):
            with self.subTest(audited=registry is self.audited):
                result = registry.invoke(ToolCall("wide", {"n": 2**14001}), actor=WRITER)
                self.assertEqual(result.error.code, "invalid_arguments")
                self.assertEqual(result.error.details["violations"][0]["keyword"], "json")


class CanonicalFastPathTest(unittest.TestCase):
    """canonical_json writes a value of exact JSON types without a float as it is (no copy): the text
    and every refusal (pointer and reason) must be those of the full walk."""

    def test_the_quick_path_and_the_full_walk_agree_on_hostile_values(self) -> None:
        import json
        import random

        from agent_lab.fingerprint import NotCanonicalJSON, _escape_lone_surrogates, _plain_value, canonical_json
        from test_measured_copy import hostile_value

        def full_walk(value):
            plain = _plain_value(value, [], 0)
            return _escape_lone_surrogates(json.dumps(plain, sort_keys=True, separators=(",", ":"),
                                                      ensure_ascii=False, allow_nan=False))

        def outcome(function, value):
            try:
                return ("text", function(value))
            except NotCanonicalJSON as problem:
                return ("refused", problem.pointer, problem.reason)

        rng = random.Random(5)
        for _ in range(3000):
            value = hostile_value(rng)
            self.assertEqual(outcome(canonical_json, value), outcome(full_walk, value), value)
        deep = []
        for _ in range(70):
            deep = [deep]
        self.assertEqual(outcome(canonical_json, deep), outcome(full_walk, deep))


if __name__ == "__main__":
    unittest.main()
