"""The fingerprint is keyed (issue 8, item 4): a low-entropy redacted value cannot be recovered from
anything a model, an audit line, a result or a receipt shows; the key lives with the receipt store, so
fingerprints and approvals hold across registries, restarts and processes sharing it."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import tempfile
import unittest
from typing import Any

from agent_lab.audit import JsonlAuditSink, read_audit_file
from agent_lab.calls import ToolCall
from agent_lab.fingerprint import canonical_json, fingerprint, new_fingerprint_key
from agent_lab.policy import Actor
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec
from agent_lab.stores import InMemoryReceiptStore, SqliteReceiptStore

PIN = "4821"
ACTOR = Actor(id="agent-1", tenant="acme", permissions={"doors:open"})
PATIENCE_S = 60.0


def unlock_spec() -> ToolSpec:
    return ToolSpec(
        name="unlock_door",
        description="Unlock a door with its PIN.",
        input_schema={
            "type": "object",
            "properties": {
                "door_id": {"type": "string"},
                "pin": {"type": "string", "pattern": "^[0-9]{4}$"},
                "action_id": {"type": "string"},
            },
            "required": ["door_id", "pin", "action_id"],
            "additionalProperties": False,
        },
        required_permission="doors:open",
        effect="write",
        approval="always",
        idempotency_key="action_id",
        redact=("pin",),
    )


def unlock_arguments(pin: str) -> dict[str, Any]:
    return {"door_id": "D-7", "pin": pin, "action_id": "act-1"}


def every_pin() -> list[str]:
    return [f"{number:04d}" for number in range(10_000)]


def unkeyed(tool: str, arguments: Any) -> str:
    """The fingerprint as it was before it was keyed: SHA-256 of the canonical text."""
    text = canonical_json({"tool": tool, "arguments": arguments})
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class RedactedPinTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.audit_path = os.path.join(directory.name, "audit.jsonl")
        self.receipts_path = os.path.join(directory.name, "receipts.sqlite3")
        self.store = SqliteReceiptStore(self.receipts_path)
        self.addCleanup(self.store.close)
        self.audit = JsonlAuditSink(self.audit_path)
        self.registry = Registry(receipts=self.store, audit=self.audit)
        self.addCleanup(self.registry.close)
        self.registry.register(unlock_spec(), lambda arguments: {"unlocked": arguments["door_id"]})

    def observed_fingerprints(self) -> set[str]:
        """Every fingerprint a model, an operator or a reader of receipts gets to see."""
        call = ToolCall("unlock_door", unlock_arguments(PIN))
        refused = self.registry.invoke(call, actor=ACTOR)
        self.assertEqual(refused.error.code, "approval_required")
        approval = self.registry.approval_for(call, actor=ACTOR, approver="guard")
        done = self.registry.invoke(call, actor=ACTOR, approval=approval)
        self.assertTrue(done.ok, done)
        self.audit.close()
        seen = {refused.error.details["fingerprint"], refused.fingerprint, done.fingerprint, approval.fingerprint}
        seen.update(record["fingerprint"] for record in read_audit_file(self.audit_path))
        with sqlite3.connect(self.receipts_path) as connection:
            for column, record in connection.execute("SELECT fingerprint, record FROM receipts"):
                seen.update((column, json.loads(record)["fingerprint"]))
        connection.close()
        shown = json.dumps([refused.to_model(), done.to_model(), repr(done)])
        for random_hex in (*(seen - {None}), refused.call_id, done.call_id):  # may hold any four digits by chance
            shown = shown.replace(random_hex, "")
        self.assertNotIn(PIN, shown)
        self.assertEqual(len(seen - {None}), 1)  # one call, one fingerprint, shown in all those places
        return seen

    def test_a_redacted_four_digit_pin_cannot_be_recovered_from_any_fingerprint_without_the_key(self) -> None:
        seen = self.observed_fingerprints()
        guessed_keys = [b"\0" * 32, new_fingerprint_key(), b"agent-lab fingerprint key 000000"]
        recovered = [
            pin for pin in every_pin()
            if unkeyed("unlock_door", unlock_arguments(pin)) in seen
            or any(fingerprint("unlock_door", unlock_arguments(pin), key=key) in seen for key in guessed_keys)
        ]
        self.assertEqual(recovered, [])

    def test_the_brute_force_would_find_the_pin_with_the_key(self) -> None:
        seen = self.observed_fingerprints()  # so the test above can fail: the right key finds it at once
        found = [pin for pin in every_pin() if self.registry.fingerprint("unlock_door", unlock_arguments(pin)) in seen]
        self.assertEqual(found, [PIN])


def open_and_report_key(path: str, start, keys) -> None:
    """A spawned process opening (maybe creating) the receipt file at the same moment as others."""
    start.wait(PATIENCE_S)
    store = SqliteReceiptStore(path)
    keys.put(store.fingerprint_key.hex())
    store.close()


class SharedFingerprintKeyTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")

    def registry_on_file(self) -> Registry:
        store = SqliteReceiptStore(self.path)
        registry = Registry(receipts=store)
        self.addCleanup(store.close)
        self.addCleanup(registry.close)
        registry.register(unlock_spec(), lambda arguments: {"unlocked": arguments["door_id"]})
        return registry

    def test_processes_opening_a_new_file_at_once_agree_on_one_fingerprint_key(self) -> None:
        context = multiprocessing.get_context("spawn")
        start, keys = context.Event(), context.Queue()
        children = [context.Process(target=open_and_report_key, args=(self.path, start, keys)) for _ in range(4)]
        for child in children:
            child.start()
        start.set()
        reported = [keys.get(timeout=PATIENCE_S) for _ in children]
        for child in children:
            child.join(PATIENCE_S)
            self.assertEqual(child.exitcode, 0)
        self.assertEqual(len(set(reported)), 1, reported)
        self.assertEqual(self.registry_on_file().receipts.fingerprint_key.hex(), reported[0])

    def test_fingerprints_stay_the_same_across_registries_and_restarts_of_one_file(self) -> None:
        arguments = unlock_arguments(PIN)
        first = self.registry_on_file().fingerprint("unlock_door", arguments)
        self.assertEqual(self.registry_on_file().fingerprint("unlock_door", arguments), first)
        self.assertNotEqual(Registry().fingerprint("unlock_door", arguments), first)

    def test_an_approval_binds_to_the_store_key_valid_on_every_registry_sharing_it(self) -> None:
        call = ToolCall("unlock_door", unlock_arguments(PIN))
        approval = self.registry_on_file().approval_for(call, actor=ACTOR, approver="guard")
        self.assertTrue(self.registry_on_file().invoke(call, actor=ACTOR, approval=approval).ok)
        elsewhere = Registry(receipts=InMemoryReceiptStore())  # another key: the approval means nothing there
        self.addCleanup(elsewhere.close)
        elsewhere.register(unlock_spec(), lambda arguments: {"unlocked": arguments["door_id"]})
        self.assertEqual(elsewhere.invoke(call, actor=ACTOR, approval=approval).error.code, "approval_mismatch")

    def test_an_approval_cannot_be_made_without_the_registry(self) -> None:
        from agent_lab.policy import Approval

        with self.assertRaises(TypeError):
            Approval.for_call(ToolCall("unlock_door", unlock_arguments(PIN)), actor=ACTOR, approver="guard")  # type: ignore[call-arg]


if __name__ == "__main__":
    unittest.main()
