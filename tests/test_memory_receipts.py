"""The in-memory store keeps a receipt's record as a value, not as text: it must still replay exactly
what the canonical text would give back, and no reader (of the store or of a replayed result) may be
able to change what later replays see."""

from __future__ import annotations

import json
import unittest

from agent_lab import Actor, Registry, ToolCall, ToolSpec
from agent_lab.fingerprint import NotCanonicalJSON
from agent_lab.idempotency import InMemoryReceiptStore, ReceiptKey
from agent_lab.stores import _rules as rules

KEY = ReceiptKey("tenant-a", "record_followup", "action-1")
FINGERPRINT = "hmac-sha256:" + "0" * 64

RECORDS = [
    {"ok": True, "outcome": "succeeded", "tool": "t", "output": {"b": 1, "a": "x"}, "error": None, "fingerprint": None},
    {"z": [1, {"y": [], "x": {}}], "a": {"c": {"e": [[1], [2, {"f": None}]]}, "b": True}},
    {"floats": [1.0, -0.0, 0.5, 1e20, 2.5e-7], "big": 2**60, "text": "caf\u00e9 \ud800"},
    {},
    {"flat": [1, "a", None, False], "empty": []},
]


class StrSubclass(str):
    pass


class KeptRecordsTest(unittest.TestCase):
    def test_a_kept_record_reads_back_exactly_as_its_canonical_text_parses(self) -> None:
        for record in RECORDS + [{StrSubclass("k"): StrSubclass("v")}]:
            with self.subTest(record=record):
                expected = json.loads(rules.record_text(record))
                got = rules.copy_record(rules.record_value(record))
                self.assertEqual(got, expected)
                self.assertEqual(json.dumps(got), json.dumps(expected))  # same key order, same types
                self.assertEqual(_types(got), _types(expected))

    def test_a_record_that_is_not_canonical_json_is_refused_as_the_text_refuses_it(self) -> None:
        for record in ({"a": (1, 2)}, {"a": float("nan")}, {1: "x"}, {"a": {"b": object()}}):
            with self.subTest(record=record):
                with self.assertRaises(NotCanonicalJSON):
                    rules.record_text(record)
                with self.assertRaises(NotCanonicalJSON):
                    rules.record_value(record)

    def test_every_reader_gets_its_own_copy_at_every_depth(self) -> None:
        store = InMemoryReceiptStore()
        owner = store.reserve(KEY, FINGERPRINT).owner
        assert owner is not None
        self.assertTrue(store.complete(KEY, owner, RECORDS[1]))
        first = store.reserve(KEY, FINGERPRINT).record
        assert first is not None
        first["z"][1]["y"].append("mutated")
        first["a"]["c"]["e"][1].append("mutated")
        first["a"]["b"] = False
        first["new"] = 1
        looked_up = store.lookup(KEY)
        assert looked_up is not None and looked_up.record is not None
        looked_up.record["z"].clear()
        self.assertEqual(store.reserve(KEY, FINGERPRINT).record, json.loads(rules.record_text(RECORDS[1])))
        for container in _containers(store.reserve(KEY, FINGERPRINT).record):
            self.assertIn(type(container), (dict, list))  # plain values: the kept form never leaks

    def test_the_record_given_to_complete_can_change_afterwards_without_changing_the_receipt(self) -> None:
        store = InMemoryReceiptStore()
        record = {"output": {"tags": ["a"]}}
        owner = store.reserve(KEY, FINGERPRINT).owner
        assert owner is not None
        store.complete(KEY, owner, record)
        record["output"]["tags"].append("b")
        self.assertEqual(store.reserve(KEY, FINGERPRINT).record, {"output": {"tags": ["a"]}})


WRITE_SPEC = ToolSpec(
    name="add_tags",
    description="Add tags.",
    input_schema={"type": "object", "properties": {"action_id": {"type": "string"}}, "required": ["action_id"]},
    required_permission="tags:write",
    effect="write",
    idempotency_key="action_id",
    execution="inline",
)


class ExpiredEntriesTest(unittest.TestCase):
    def test_a_stream_of_new_keys_does_not_keep_their_expired_receipts(self) -> None:
        # Every call brings its own key (the usual agent: one action, one key); each receipt expires
        # after 100 calls. The store's own sweeps must keep up: what a purge still finds expired is
        # at most about one sweep interval's worth, not every key the store ever saw.
        now = [1000.0]
        store = InMemoryReceiptStore(ttl_s=10, lease_s=5, clock=lambda: now[0], monotonic=lambda: now[0])
        record = {"ok": True, "outcome": "succeeded", "tool": "t", "output": None, "error": None, "fingerprint": None}
        calls = 20000
        for number in range(calls):
            key = ReceiptKey("tenant-a", "record_followup", f"action-{number}")
            reservation = store.reserve(key, FINGERPRINT, timeout_s=1.0)
            assert reservation.owner is not None
            self.assertTrue(store.complete(key, reservation.owner, record))
            now[0] += 0.1
        left_behind = store.purge(limit=calls)
        self.assertLessEqual(left_behind, 2 * 1024, f"{left_behind} expired receipts of {calls} were never swept")


class ReplayedResultsTest(unittest.TestCase):
    def test_a_replayed_result_cannot_alter_the_receipt_later_replays_see(self) -> None:
        actor = Actor(id="u", tenant="t", permissions={"tags:write"})
        effects = []

        def add_tags(arguments: dict) -> dict:
            effects.append(arguments["action_id"])
            return {"tags": ["a", "b"], "owner": {"id": "u"}}

        with Registry() as registry:
            registry.register(WRITE_SPEC, add_tags)
            call = ToolCall("add_tags", {"action_id": "a-1"})
            first = registry.invoke(call, actor=actor)
            first.output["tags"].append("from the first caller")
            replay = registry.invoke(call, actor=actor)
            self.assertTrue(replay.replayed)
            self.assertEqual(replay.output, {"owner": {"id": "u"}, "tags": ["a", "b"]})
            replay.output["tags"].append("from a replay")
            replay.output["owner"]["id"] = "someone else"
            again = registry.invoke(call, actor=actor)
            self.assertEqual(again.output, {"owner": {"id": "u"}, "tags": ["a", "b"]})
            self.assertEqual((again.ok, again.outcome.value, again.fingerprint), (True, "succeeded", first.fingerprint))
            self.assertEqual(effects, ["a-1"])


def _types(value: object) -> object:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__


def _containers(value: object) -> list:
    found = []
    if isinstance(value, (dict, list)):
        found.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            found.extend(_containers(item))
    return found


if __name__ == "__main__":
    unittest.main()


class QuickConstructionsTest(unittest.TestCase):
    """The write path builds a few frozen objects without their dataclass constructors; each must be
    the very object the constructor would have made, and refuse what the constructor refuses."""

    def test_an_error_from_the_catalogue_equals_one_built_field_by_field(self) -> None:
        from agent_lab.errors import CATALOGUE, NextAction, ToolError

        for code, entry in CATALOGUE.items():
            with self.subTest(code=code):
                quick = ToolError.from_code(code, details={"a": 1})
                built = ToolError(code=code, category=entry.category, message=entry.summary,
                                  retryable=entry.retryable, next_action=entry.next_action, details={"a": 1})
                self.assertEqual(quick, built)
                self.assertEqual(hash(quick.code), hash(built.code))
        given = ToolError.from_code("tool_timeout", "Slow.", retryable=True, next_action=NextAction.RETRY)
        self.assertEqual((given.message, given.retryable, given.next_action, dict(given.details)),
                         ("Slow.", True, NextAction.RETRY, {}))
        with self.assertRaises(Exception):
            given.code = "other"  # type: ignore[misc]

    def test_a_replayed_failure_equals_the_result_rebuilt_from_its_record(self) -> None:
        from agent_lab import ToolFailure
        from agent_lab.calls import ToolResult

        actor = Actor(id="u", tenant="t", permissions={"tags:write"})

        def refuse(arguments: dict) -> dict:
            raise ToolFailure("ticket_closed", "The ticket is closed.", category="conflict", details={"state": "closed"})

        with Registry() as registry:
            registry.register(WRITE_SPEC, refuse)
            call = ToolCall("add_tags", {"action_id": "a-1"})
            first = registry.invoke(call, actor=actor)
            replay = registry.invoke(call, actor=actor)
            self.assertTrue(replay.replayed)
            self.assertEqual((first.outcome.value, first.error.code if first.error else None), ("failed", "ticket_closed"))
            rebuilt = ToolResult.from_record(first.to_record(), replayed=True, call_id=replay.call_id)
            self.assertEqual(replay.to_model(), rebuilt.to_model())
            self.assertEqual((replay.error, replay.outcome, replay.fingerprint), (rebuilt.error, rebuilt.outcome,
                                                                                  rebuilt.fingerprint))

    def test_receipt_keys_are_scoped_by_tenant_whatever_text_the_tenant_is(self) -> None:
        effects = []

        def add_tags(arguments: dict) -> dict:
            effects.append(arguments["action_id"])
            return {"n": len(effects)}

        store = InMemoryReceiptStore()
        with Registry(receipts=store) as registry:
            registry.register(WRITE_SPEC, add_tags)
            call = ToolCall("add_tags", {"action_id": "a-1"})
            for tenant in ("acme", "acmé", "ac me"):
                actor = Actor(id="u", tenant=tenant, permissions={"tags:write"})
                first = registry.invoke(call, actor=actor)
                again = registry.invoke(call, actor=actor)
                self.assertEqual((first.replayed, again.replayed, again.output), (False, True, first.output))
                lookup = store.lookup(ReceiptKey(tenant, "add_tags", "a-1"))
                assert lookup is not None
                self.assertEqual(lookup.record["output"], first.output)  # under the class's own key
            self.assertEqual(effects, ["a-1", "a-1", "a-1"])  # once per tenant, never across tenants
            with self.assertRaisesRegex(ValueError, "Actor.tenant must be text without NUL"):
                Actor(id="u", tenant="a\x00b", permissions={"tags:write"})  # no store could scope it
            self.assertEqual(len(effects), 3)

    def test_a_hold_never_shows_its_owner_token(self) -> None:
        from agent_lab.leases import KeyHolder

        holder = KeyHolder(InMemoryReceiptStore(), late_completion_s=1.0, renew_every_s=None)
        try:
            hold = holder.hold(KEY, FINGERPRINT, "secret-owner-token", writes=True, tool="t")
            self.assertNotIn("secret-owner-token", repr(hold))
        finally:
            holder.close(store_closed=True)
