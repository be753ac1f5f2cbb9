"""A registry gives new calls keyed-BLAKE2b fingerprints; what was stored or approved under the older
HMAC-SHA-256 scheme still matches its call, in the scheme its prefix names, and nothing else.

A receipt written before the change (by an older process sharing the store) must replay, never run the
handler a second time; a different call under its key is still a conflict; an approval a person gave
under the older scheme still approves exactly its call."""

from __future__ import annotations

import random
import unittest
from typing import Any

from agent_lab.calls import ToolCall
from agent_lab.execution import measured_copy
from agent_lab.fingerprint import BLAKE2B_PREFIX, FINGERPRINT_PREFIX, Blake2bFingerprinter, fingerprint
from agent_lab.policy import Actor, Approval
from agent_lab.registry import Registry
from agent_lab.spec import ToolSpec
from agent_lab.stores import InMemoryReceiptStore, Lapse, ReceiptKey

KEY = b"a fingerprint key of thirty-two!"
WRITER = Actor(id="u-1", tenant="acme", permissions={"notes:write"})
SPEC = ToolSpec(
    name="add_note",
    description="Add a note.",
    input_schema={"type": "object", "properties": {"note": {"type": "string"}, "action_id": {"type": "string"},
                                                   "weight": {"type": "number"}},
                  "required": ["note", "action_id"], "additionalProperties": False},
    required_permission="notes:write",
    effect="write",
    idempotency_key="action_id",
    execution="inline",
)
ARGUMENTS = {"note": "Called back.", "action_id": "act-1", "weight": 2.0}  # 2.0: the float is written 2


class SchemesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.store = InMemoryReceiptStore(fingerprint_key=KEY)
        self.ran: list[Any] = []
        self.registry = Registry(receipts=self.store)
        self.addCleanup(self.registry.close)
        self.registry.register(SPEC, self.add_note)

    def add_note(self, arguments: Any) -> dict[str, Any]:
        self.ran.append(arguments["note"])
        return {"note_id": len(self.ran)}

    def store_older_receipt(self, arguments: dict[str, Any], output: Any) -> str:
        """What an older process sharing the store left: a receipt under the HMAC-SHA-256 fingerprint."""
        older = fingerprint(SPEC.name, arguments, key=KEY)
        key = ReceiptKey(WRITER.tenant, SPEC.name, arguments["action_id"])
        held = self.store.reserve(key, older, lapse=Lapse.UNKNOWN)
        record = {"ok": True, "outcome": "succeeded", "tool": SPEC.name, "output": output, "error": None,
                  "fingerprint": older}
        self.assertTrue(self.store.complete(key, held.owner, record))
        return older

    def test_new_calls_carry_keyed_blake2b_fingerprints_of_the_stores_key(self) -> None:
        result = self.registry.invoke(ToolCall(SPEC.name, ARGUMENTS), actor=WRITER)
        self.assertTrue(result.fingerprint.startswith(BLAKE2B_PREFIX))
        self.assertEqual(result.fingerprint, Blake2bFingerprinter(KEY).fingerprint(SPEC.name, ARGUMENTS))
        self.assertEqual(result.fingerprint, self.registry.fingerprint(SPEC.name, ARGUMENTS))
        self.assertNotEqual(result.fingerprint.split(":")[1], fingerprint(SPEC.name, ARGUMENTS, key=KEY).split(":")[1])

    def test_a_receipt_stored_under_the_older_scheme_replays_and_the_handler_does_not_run(self) -> None:
        older = self.store_older_receipt(ARGUMENTS, {"note_id": 41})
        replay = self.registry.invoke(ToolCall(SPEC.name, {**ARGUMENTS, "weight": 2}), actor=WRITER)  # 2 == 2.0
        self.assertTrue(replay.replayed, replay)
        self.assertEqual((replay.output, replay.fingerprint, self.ran), ({"note_id": 41}, older, []))

    def test_other_arguments_under_an_older_receipts_key_are_still_a_conflict(self) -> None:
        self.store_older_receipt(ARGUMENTS, {"note_id": 41})
        other = self.registry.invoke(ToolCall(SPEC.name, {**ARGUMENTS, "note": "Something else."}), actor=WRITER)
        self.assertEqual((other.error.code, self.ran), ("idempotency_conflict", []))

    def test_an_older_reservation_still_running_answers_in_progress(self) -> None:
        key = ReceiptKey(WRITER.tenant, SPEC.name, "act-1")
        self.store.reserve(key, fingerprint(SPEC.name, ARGUMENTS, key=KEY), lapse=Lapse.UNKNOWN)
        answer = self.registry.invoke(ToolCall(SPEC.name, ARGUMENTS), actor=WRITER)
        self.assertEqual((answer.error.code, self.ran), ("idempotency_in_progress", []))

    def test_an_unkeyed_or_unknown_scheme_matches_nothing(self) -> None:
        key = ReceiptKey(WRITER.tenant, SPEC.name, "act-1")
        held = self.store.reserve(key, "sha256:" + "0" * 64, lapse=Lapse.UNKNOWN)
        self.store.complete(key, held.owner, {"ok": True, "outcome": "succeeded", "tool": SPEC.name,
                                              "output": {"note_id": 1}, "error": None})
        self.assertEqual(self.registry.invoke(ToolCall(SPEC.name, ARGUMENTS), actor=WRITER).error.code,
                         "idempotency_conflict")

    def test_an_approval_made_under_the_older_scheme_approves_exactly_its_call(self) -> None:
        registry = Registry(receipts=self.store)
        self.addCleanup(registry.close)
        registry.register(ToolSpec(**{**{f: getattr(SPEC, f) for f in ("name", "description", "input_schema",
                                                                       "required_permission", "effect",
                                                                       "idempotency_key", "execution")},
                                      "approval": "always"}), self.add_note)

        class OlderRegistry:  # what an older process's approval_for bound the approval to
            def fingerprint(self, tool: str, arguments: Any) -> str:
                return fingerprint(tool, arguments, key=KEY)

        call = ToolCall(SPEC.name, ARGUMENTS)
        approval = Approval.for_call(call, actor=WRITER, approver="lead", registry=OlderRegistry())
        self.assertTrue(approval.fingerprint.startswith(FINGERPRINT_PREFIX))
        other = ToolCall(SPEC.name, {**ARGUMENTS, "note": "Something else.", "action_id": "act-2"})
        self.assertEqual(registry.invoke(other, actor=WRITER, approval=approval).error.code, "approval_mismatch")
        self.assertTrue(registry.invoke(call, actor=WRITER, approval=approval).ok)
        self.assertEqual(self.ran, ["Called back."])


class ExactFingerprintTest(unittest.TestCase):
    """The schema step fingerprints a float-free copy it proved canonical without the canonical walk
    (`fingerprint_exact`); an approval made with `registry.fingerprint` (the full walk) must still match."""

    def test_the_shortcut_gives_the_full_walks_fingerprint_for_every_copy_it_is_taken_for(self) -> None:
        rng = random.Random(7)
        scalars = ["", "a", "é\u2028", "\ud800", "\x00\x1f\"\\", 0, -1, 2**63, 2**64, True, False, None, 1.0, -0.0, 2.5]

        def value(depth: int = 0) -> Any:
            roll = rng.random()
            if depth < 4 and roll < 0.25:
                return {rng.choice(["b", "a", "é", "\ud800", "~/"]) + str(rng.randint(0, 3)): value(depth + 1)
                        for _ in range(rng.randint(0, 4))}
            if depth < 4 and roll < 0.4:
                return [value(depth + 1) for _ in range(rng.randint(0, 3))]
            return rng.choice(scalars)

        fingerprinter = Blake2bFingerprinter(KEY)
        taken = 0
        for _ in range(3000):
            arguments = {"x": value(), "y": value()}
            copy, plain, bound, floats = measured_copy(arguments, 33, 10**6)
            if plain and bound is not None and not floats:
                taken += 1
                self.assertEqual(fingerprinter.fingerprint_exact("t", copy), fingerprinter.fingerprint("t", copy))
        self.assertGreater(taken, 500)


if __name__ == "__main__":
    unittest.main()
