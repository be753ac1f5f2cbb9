"""One SQLite receipt file, stores with different lifetimes, and a wall clock stepped forward.

Each store guards its wall clock with a monotonic one and takes a forward step only once everything it
wrote before the step has expired (its ttl). On main (6dd0a37) that was each store's own ttl: a worker
with a one-hour ttl, sharing the file with a service whose receipts live a day, took the step after its
hour and then saw the service's receipts as expired, so a retry it received ran the effect again. A
step is now held as long as the longest lifetime any store on the file writes.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import unittest

from agent_lab import Actor, Registry, ToolCall, ToolSpec
from agent_lab.stores.protocol import ReceiptKey, ReservationStatus
from agent_lab.stores.sqlite import SqliteReceiptStore

FINGERPRINT = "hmac-sha256:" + "a" * 64
KEY = ReceiptKey("acme", "pay_invoice", "pay-1")
DAY = 86_400.0


class Clocks:
    """A wall clock a test steps, and a monotonic one it moves by hand (never stepped)."""

    def __init__(self) -> None:
        self.wall_at = 1_700_000_000.0
        self.monotonic_at = 1_000.0

    def wall(self) -> float:
        return self.wall_at

    def monotonic(self) -> float:
        return self.monotonic_at

    def wait(self, seconds: float) -> None:
        self.wall_at += seconds
        self.monotonic_at += seconds


class StoresOfOneFileHoldAStepForTheLongestLifetimeTest(unittest.TestCase):
    def setUp(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        self.path = os.path.join(directory.name, "receipts.sqlite3")
        self.clocks = Clocks()

    def store(self, ttl_s: float) -> SqliteReceiptStore:
        store = SqliteReceiptStore(self.path, ttl_s=ttl_s, lease_s=min(ttl_s, 300.0), clock=self.clocks.wall,
                                   monotonic=self.clocks.monotonic)
        self.addCleanup(store.close)
        return store

    def test_a_day_long_receipt_is_replayed_by_an_hour_long_store_after_a_two_day_step(self) -> None:
        service, worker = self.store(DAY), self.store(3_600.0)
        held = service.reserve(KEY, FINGERPRINT)
        self.assertTrue(service.complete(KEY, held.owner, {"ok": True}))
        self.clocks.wait(60)
        self.clocks.wall_at += 2 * DAY  # the wall clock steps forward; one minute has really passed
        self.assertIs(worker.reserve(KEY, FINGERPRINT).status, ReservationStatus.REPLAY)
        self.clocks.wait(3_601)  # past the worker's own ttl: main took the step here and ran the retry
        self.assertIs(worker.reserve(KEY, FINGERPRINT).status, ReservationStatus.REPLAY)
        self.assertIs(service.reserve(KEY, FINGERPRINT).status, ReservationStatus.REPLAY)

    def test_a_store_opened_after_the_step_holds_it_for_the_longest_lifetime_too(self) -> None:
        worker = self.store(3_600.0)
        self.clocks.wall_at += 2 * DAY
        worker.lookup(KEY)  # the worker sees the step and holds it for its hour
        service = self.store(DAY)  # a service on the same file, started after the step
        held = service.reserve(KEY, FINGERPRINT)
        self.assertTrue(service.complete(KEY, held.owner, {"ok": True}))
        self.clocks.wait(3_601)
        self.assertIs(worker.reserve(KEY, FINGERPRINT).status, ReservationStatus.REPLAY)

    def test_once_the_longest_lifetime_has_passed_the_step_is_taken_and_the_receipt_expires(self) -> None:
        service, worker = self.store(DAY), self.store(3_600.0)
        held = service.reserve(KEY, FINGERPRINT)
        self.assertTrue(service.complete(KEY, held.owner, {"ok": True}))
        self.clocks.wall_at += 2 * DAY
        worker.lookup(KEY)
        self.clocks.wait(DAY + 1)
        self.assertIs(worker.reserve(KEY, FINGERPRINT).status, ReservationStatus.RESERVED)

    def test_through_registries_a_retry_on_the_other_store_runs_the_effect_once(self) -> None:
        effects: list[str] = []
        spec = ToolSpec(name="pay_invoice", description="Pay one invoice; a retry with the same payment_id pays once.",
                        input_schema={"type": "object", "properties": {"payment_id": {"type": "string"}},
                                      "required": ["payment_id"], "additionalProperties": False},
                        required_permission=None, effect="write", idempotency_key="payment_id", timeout_ms=1_000)
        actor = Actor(id="agent-1", tenant="acme")
        registries = []
        for ttl_s in (DAY, 3_600.0):
            registry = Registry(receipts=self.store(ttl_s), late_completion_s=1.0)
            registry.register(spec, lambda arguments: effects.append(arguments["payment_id"]) or {"paid": True})
            self.addCleanup(registry.close)
            registries.append(registry)
        call = ToolCall("pay_invoice", {"payment_id": "pay-7"})
        self.assertTrue(registries[0].invoke(call, actor=actor).ok)
        self.clocks.wall_at += 2 * DAY
        registries[1].invoke(call, actor=actor)
        self.clocks.wait(3_601)
        retried = registries[1].invoke(call, actor=actor)
        self.assertTrue(retried.replayed, retried)
        self.assertEqual(effects, ["pay-7"])


@unittest.skipUnless(sys.platform.startswith("linux"), "stores share a step held in their file only where the "
                                                       "monotonic clock counts from boot for every process (Linux)")
class AStepRestoredFromTheFileIsHeldLongEnoughTest(unittest.TestCase):
    def test_a_long_lived_store_restarted_after_a_short_one_held_the_step_still_replays(self) -> None:
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        path = os.path.join(directory.name, "receipts.sqlite3")
        step = [0.0]

        def open_store(ttl_s: float) -> SqliteReceiptStore:
            store = SqliteReceiptStore(path, ttl_s=ttl_s, lease_s=ttl_s, clock=lambda: time.time() + step[0])
            self.addCleanup(store.close)
            return store

        service = open_store(DAY)
        held = service.reserve(KEY, FINGERPRINT)
        self.assertTrue(service.complete(KEY, held.owner, {"ok": True}))
        service.close()
        step[0] = 2 * DAY
        worker = open_store(0.2)
        worker.lookup(KEY)  # holds the step for 0.2 s, and keeps that in the file
        restarted = open_store(DAY)  # the service again, after the step: it takes up the step from the file
        time.sleep(0.4)  # past the worker's hold (real monotonic time: the stores share the boot's clock)
        self.assertIs(restarted.reserve(KEY, FINGERPRINT).status, ReservationStatus.REPLAY)
        self.assertIs(worker.reserve(KEY, FINGERPRINT).status, ReservationStatus.REPLAY)


if __name__ == "__main__":
    unittest.main()
