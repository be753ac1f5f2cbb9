"""The receipt store conformance suite: what every ReceiptStore promises, written once.

A store's test case mixes in `ReceiptStoreConformance` and says how to build the store and how to make
it busy (see the hooks below); tests/test_receipt_stores.py runs it against the in-memory and SQLite
stores, and a new store (PostgreSQL) runs the same suite. Time is a `FakeClock` the tests move by hand,
so leases and ttls are tested without sleeping. Durable stores also run `DurableStoreConformance`.

Not collected on its own (the file name does not start with "test").
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, ContextManager, Optional

from agent_lab.stores import (
    Lapse,
    ReceiptKey,
    ReceiptStore,
    ReceiptStoreUnavailable,
    Reservation,
    ReservationStatus,
)

TTL_S = 100.0
LEASE_S = 10.0
KEY = ReceiptKey("tenant-a", "record_followup", "action-1")
OTHER_KEY = ReceiptKey("tenant-a", "record_followup", "action-2")
FIRST = "hmac-sha256:" + "1" * 64
SECOND = "hmac-sha256:" + "2" * 64
RECORD = {"ok": True, "outcome": "succeeded", "output": {"followup_id": "F-1", "note": "Zoë ☎", "tags": ["a", "b"]}}
OTHER_RECORD = {"ok": True, "outcome": "succeeded", "output": {"followup_id": "F-2"}}
UNKNOWN_RECORD = {"ok": False, "outcome": "unknown", "error": {"code": "handler_exception"}}
FINGERPRINT_KEY = b"conformance fingerprint key 0123"
BUSY_TIMEOUT_S = 0.05  # how long a call may wait on a busy store in the tests
PATIENCE_S = 30.0  # a hang guard, never a timing assertion


def random_text(length: int, *, seed: int) -> str:
    """`length` characters no compressor can shorten much (letters of several scripts, drawn at random)."""
    import random

    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_éüçñøåßžčΩλπ☎✓日本語"
    chooser = random.Random(seed)
    return "".join(chooser.choice(alphabet) for _ in range(length))


class FakeClock:
    """A wall clock and a monotonic clock the test moves by hand, so expiry is tested without sleeping.
    Give a store both (`clock=clock, monotonic=clock.monotonic`): `advance` is time passing (both move),
    `step` is the wall clock being set (the monotonic one does not move)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.elapsed = 0.0  # what the monotonic clock reads

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.elapsed += seconds

    def step(self, seconds: float) -> None:
        self.now += seconds


class ReceiptStoreConformance:
    """Mixed into a unittest.TestCase. Hooks a store's test case provides:

    * `make_store(clock, *, ttl_s=TTL_S, lease_s=LEASE_S, fingerprint_key=None)`: a new store (for a
      durable store: on the same storage every time, so a second store is "another process");
    * `busy_store(store)`: a context manager during which the store cannot answer (another writer
      holds its lock), so every call must give up within its `timeout_s`;
    * `use_new_storage()`: later `make_store` calls open new, empty storage (a no-op for memory).
    """

    def make_store(self, clock: FakeClock, **options: Any) -> Any:
        raise NotImplementedError

    def use_new_storage(self) -> None:
        pass

    def busy_store(self, store: Any) -> ContextManager[None]:
        raise NotImplementedError

    def setUp(self) -> None:
        self.clock = FakeClock()
        self.store = self.make_store(self.clock)
        self.addCleanup(self.store.close)

    # -- helpers ------------------------------------------------------------------------------

    def assertStatus(self, reservation: Optional[Reservation], status: ReservationStatus, fingerprint_held: str) -> None:
        self.assertIsInstance(reservation, Reservation)
        assert reservation is not None
        self.assertIs(reservation.status, status)
        self.assertEqual(reservation.fingerprint, fingerprint_held)
        if status is not ReservationStatus.RESERVED:
            self.assertIsNone(reservation.owner)  # only the holder ever learns the owner token

    def reserve(self, fingerprint: str = FIRST, *, key: ReceiptKey = KEY, lapse: Lapse = Lapse.UNKNOWN) -> str:
        """Reserve `key` and return the owner token."""
        reservation = self.store.reserve(key, fingerprint, lapse=lapse)
        self.assertStatus(reservation, ReservationStatus.RESERVED, fingerprint)
        self.assertIsInstance(reservation.owner, str)
        return reservation.owner

    def completed(self, record: Any = RECORD, fingerprint: str = FIRST, *, key: ReceiptKey = KEY) -> str:
        owner = self.reserve(fingerprint, key=key)
        self.assertTrue(self.store.complete(key, owner, record))
        return owner

    # -- shape --------------------------------------------------------------------------------

    def test_the_store_satisfies_the_receipt_store_protocol(self) -> None:
        self.assertIsInstance(self.store, ReceiptStore)
        self.assertEqual(self.store.lease_s, LEASE_S)
        self.assertIsInstance(self.store.fingerprint_key, bytes)
        self.assertGreaterEqual(len(self.store.fingerprint_key), 16)

    def test_a_given_fingerprint_key_is_the_stores_key(self) -> None:
        self.use_new_storage()
        keyed = self.make_store(self.clock, fingerprint_key=FINGERPRINT_KEY)
        self.addCleanup(keyed.close)
        self.assertEqual(keyed.fingerprint_key, FINGERPRINT_KEY)

    # -- reserve ------------------------------------------------------------------------------

    def test_a_free_key_is_reserved_for_the_caller_with_an_owner_token(self) -> None:
        reservation = self.store.reserve(KEY, FIRST)
        self.assertStatus(reservation, ReservationStatus.RESERVED, FIRST)
        self.assertRegex(reservation.owner, r"^\S{16,}$")
        self.assertNotIn(reservation.owner, repr(reservation))

    def test_every_reservation_gets_a_new_owner_token(self) -> None:
        first = self.reserve()
        self.assertTrue(self.store.release(KEY, first))
        self.assertNotEqual(self.reserve(), first)

    def test_the_same_call_while_in_flight_is_in_progress(self) -> None:
        self.reserve()
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.IN_PROGRESS, FIRST)
        self.assertIsNone(answer.record)

    def test_other_arguments_while_in_flight_conflict(self) -> None:
        self.reserve()
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)

    def test_the_same_call_after_completion_replays_the_identical_record(self) -> None:
        self.completed()
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    def test_other_arguments_after_completion_conflict_without_revealing_the_record(self) -> None:
        self.completed()
        answer = self.store.reserve(KEY, SECOND)
        self.assertStatus(answer, ReservationStatus.CONFLICT, FIRST)
        self.assertIsNone(answer.record)

    def test_a_replayed_record_cannot_be_corrupted_by_its_reader(self) -> None:
        self.completed()
        self.store.reserve(KEY, FIRST).record["output"]["tags"].append("mutated")
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)

    def test_a_record_is_stored_as_canonical_json(self) -> None:
        self.completed({"output": {"count": 3.0, "ratio": 0.5}})
        self.assertEqual(self.store.reserve(KEY, FIRST).record, {"output": {"count": 3, "ratio": 0.5}})

    def test_a_record_that_is_not_json_is_refused_and_nothing_is_stored(self) -> None:
        from agent_lab.fingerprint import NotCanonicalJSON

        owner = self.reserve()
        with self.assertRaises(NotCanonicalJSON):
            self.store.complete(KEY, owner, {"output": float("nan")})
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)

    def test_racing_threads_get_exactly_one_reservation(self) -> None:
        start = threading.Barrier(16)
        answers: list = []

        def contend() -> None:
            start.wait(timeout=PATIENCE_S)
            answers.append(self.store.reserve(KEY, FIRST).status)

        threads = [threading.Thread(target=contend) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=PATIENCE_S)
        self.assertEqual(len(answers), 16)
        self.assertEqual(answers.count(ReservationStatus.RESERVED), 1)
        self.assertEqual(answers.count(ReservationStatus.IN_PROGRESS), 15)

    # -- release ------------------------------------------------------------------------------

    def test_release_by_the_owner_frees_the_key_for_a_corrected_retry(self) -> None:
        owner = self.reserve()
        self.assertTrue(self.store.release(KEY, owner))
        self.assertIsNone(self.store.lookup(KEY))
        self.reserve(SECOND)

    def test_release_with_another_owner_token_leaves_the_reservation(self) -> None:
        self.reserve()
        self.assertFalse(self.store.release(KEY, "not-the-owner-token"))
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)

    def test_release_never_drops_a_completed_receipt(self) -> None:
        owner = self.completed()
        self.assertFalse(self.store.release(KEY, owner))
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    def test_release_of_a_free_key_is_harmless(self) -> None:
        self.assertFalse(self.store.release(KEY, "no-owner"))
        self.assertIsNone(self.store.lookup(KEY))

    # -- leases: a lapse never frees a write's key --------------------------------------------

    def test_a_reservation_holds_until_its_lease_ends(self) -> None:
        self.reserve()
        self.clock.advance(LEASE_S - 0.5)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)

    def test_a_lapsed_write_reservation_is_unknown_and_never_reserved_again(self) -> None:
        self.reserve(lapse=Lapse.UNKNOWN)
        self.clock.advance(LEASE_S)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.UNKNOWN, FIRST)
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.UNKNOWN, FIRST)

    def test_an_unknown_key_stays_unknown_past_any_ttl_until_resolved(self) -> None:
        self.reserve()
        for _ in range(3):
            self.clock.advance(TTL_S * 10)
            for index in range(70):  # enough reserves elsewhere for any periodic purge to run
                self.reserve(key=ReceiptKey(KEY.tenant, KEY.tool, f"other-{self.clock.now}-{index}"),
                             lapse=Lapse.TAKEOVER)
            self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.UNKNOWN, FIRST)

    def test_the_reservation_is_unknown_by_default(self) -> None:
        self.assertTrue(self.store.reserve(KEY, FIRST).owner)
        self.clock.advance(LEASE_S)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.UNKNOWN, FIRST)

    def test_a_lapsed_read_reservation_is_taken_over_with_a_new_owner(self) -> None:
        stale = self.reserve(lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)
        self.assertIsNone(self.store.lookup(KEY))
        fresh = self.reserve(SECOND, lapse=Lapse.TAKEOVER)
        self.assertNotEqual(fresh, stale)

    def test_a_receipt_replays_until_its_ttl_ends(self) -> None:
        self.completed()
        self.clock.advance(TTL_S - 0.5)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    def test_an_expired_receipt_is_treated_as_absent(self) -> None:
        self.completed()
        self.clock.advance(TTL_S)
        self.assertIsNone(self.store.lookup(KEY))
        self.reserve(SECOND)

    def test_the_receipt_ttl_counts_from_completion_not_from_reservation(self) -> None:
        owner = self.reserve()
        self.clock.advance(LEASE_S - 1)
        self.store.complete(KEY, owner, RECORD)
        self.clock.advance(TTL_S - 1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    # -- keep ---------------------------------------------------------------------------------

    def test_keep_holds_a_receipt_its_holder_completed_for_the_ttl_from_now(self) -> None:
        # What keeps a task's `accepted` receipt while the task's call still runs: without it the key
        # was free once the ttl from acceptance had passed, and the same key started a second run.
        owner = self.completed()
        for _ in range(3):
            self.clock.advance(TTL_S - 1)
            self.assertIs(self.store.keep(KEY, owner), True)
        self.clock.advance(TTL_S - 1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)
        self.clock.advance(1)
        self.assertIsNone(self.store.lookup(KEY))  # then it expires as any receipt does

    def test_keep_never_shortens_a_receipt_nor_acts_for_anyone_but_its_holder(self) -> None:
        owner = self.completed()
        self.assertIs(self.store.keep(KEY, "not-the-owner"), False)
        self.assertIs(self.store.keep(OTHER_KEY, owner), False)  # nothing there
        in_flight = self.reserve(key=OTHER_KEY)
        self.assertIs(self.store.keep(OTHER_KEY, in_flight), False)  # a reservation is renewed, not kept
        self.clock.advance(TTL_S)
        self.assertIs(self.store.keep(KEY, owner), False)  # expired: it may have been read as free already
        self.assertIsNone(self.store.lookup(KEY))

    def test_keep_until_resolved_turns_a_holders_receipt_into_one_that_waits_for_resolve(self) -> None:
        # A write task that ended with its outcome unknown: its key's `accepted` receipt replays until the
        # application resolves it, as a plain write's receipt of unknown outcome does.
        owner = self.completed()
        self.assertIs(self.store.keep(KEY, "not-the-owner", until_resolved=True), False)
        self.assertIs(self.store.keep(KEY, owner, until_resolved=True), True)
        self.clock.advance(10 * TTL_S)
        self.assertEqual(self.store.purge(), 0)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)
        self.assertEqual(self.store.unresolved(), [KEY])
        self.assertIs(self.store.resolve(KEY, FIRST, record=None), True)
        self.assertIsNone(self.store.lookup(KEY))

    def test_let_expire_gives_its_holders_kept_receipt_the_ttl_from_now(self) -> None:
        # A write task that ended: its key's `accepted`, kept until resolved while its call could run,
        # replays for the ttl from the run's end, then the key is free.
        owner = self.reserve()
        self.assertTrue(self.store.complete_unknown(KEY, owner, RECORD))
        self.clock.advance(10 * TTL_S)
        self.assertIs(self.store.let_expire(KEY, "not-the-owner"), False)
        self.assertIs(self.store.let_expire(KEY, owner), True)
        self.assertEqual(self.store.unresolved(), [])
        self.clock.advance(TTL_S - 1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)
        self.assertIs(self.store.let_expire(KEY, owner), False)  # once: it expires as any receipt does
        self.clock.advance(1)
        self.assertIsNone(self.store.lookup(KEY))

    def test_let_expire_never_acts_on_a_receipt_its_holder_no_longer_holds(self) -> None:
        # Resolved "did not happen" and reserved again by another call, the key is that call's: the first
        # holder letting it expire would end the second's receipt of unknown outcome with the ttl.
        first = self.reserve()
        self.assertTrue(self.store.complete_unknown(KEY, first, RECORD))
        self.assertIs(self.store.resolve(KEY, FIRST, record=None), True)
        second = self.reserve()
        self.assertTrue(self.store.complete_unknown(KEY, second, OTHER_RECORD))
        self.assertIs(self.store.let_expire(KEY, first), False)
        self.clock.advance(10 * TTL_S)
        self.assertEqual(self.store.unresolved(), [KEY])
        self.assertEqual(self.store.lookup(KEY).record, OTHER_RECORD)
        in_flight = self.reserve(key=OTHER_KEY)
        self.assertIs(self.store.let_expire(OTHER_KEY, in_flight), False)  # a reservation is not a receipt
        completed = self.completed(key=ReceiptKey(KEY.tenant, KEY.tool, "action-3"))
        self.assertIs(self.store.let_expire(ReceiptKey(KEY.tenant, KEY.tool, "action-3"), completed), False)

    def test_a_tasks_gate_is_never_listed_as_unresolved(self) -> None:
        # A started task's gate is kept until its run ends; a hand that resolved it would let a reader say
        # "did not run" of a task whose host died mid-call.
        gate = ReceiptKey(KEY.tenant, "agent_lab/task-gate", "task-1")
        owner = self.reserve("start", key=gate)
        self.assertTrue(self.store.complete_unknown(gate, owner, {"gate": "start"}))
        self.assertEqual(self.store.unresolved(), [])
        self.assertStatus(self.store.lookup(gate), ReservationStatus.REPLAY, "start")

    # -- renew --------------------------------------------------------------------------------

    def test_renewing_keeps_a_long_call_in_progress_past_its_first_lease(self) -> None:
        owner = self.reserve()
        for _ in range(5):
            self.clock.advance(LEASE_S - 1)
            self.assertTrue(self.store.renew(KEY, owner))
        self.clock.advance(LEASE_S - 1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)

    def test_renewal_by_another_owner_token_is_refused(self) -> None:
        self.reserve()
        self.assertFalse(self.store.renew(KEY, "not-the-owner-token"))
        self.clock.advance(LEASE_S)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.UNKNOWN, FIRST)

    def test_a_live_owner_may_renew_a_lapsed_lease_nobody_took_over(self) -> None:
        owner = self.reserve()
        self.clock.advance(LEASE_S + 1)
        self.assertTrue(self.store.renew(KEY, owner))
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.IN_PROGRESS, FIRST)

    def test_a_taken_over_owner_can_no_longer_renew(self) -> None:
        stale = self.reserve(lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)
        self.reserve(SECOND, lapse=Lapse.TAKEOVER)
        self.assertFalse(self.store.renew(KEY, stale))
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, SECOND)

    def test_a_completed_receipt_cannot_be_renewed(self) -> None:
        owner = self.completed()
        self.assertFalse(self.store.renew(KEY, owner))

    # -- complete and fencing -----------------------------------------------------------------

    def test_a_late_completion_by_the_owner_after_its_lease_still_stores_its_result(self) -> None:
        owner = self.reserve()
        self.clock.advance(LEASE_S * 3)
        self.assertTrue(self.store.complete(KEY, owner, RECORD))
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    def test_a_stale_owners_completion_after_a_takeover_is_refused(self) -> None:
        stale = self.reserve(lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)
        fresh = self.reserve(SECOND, lapse=Lapse.TAKEOVER)
        self.assertFalse(self.store.complete(KEY, stale, RECORD))
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, SECOND)
        self.assertTrue(self.store.complete(KEY, fresh, OTHER_RECORD))
        self.assertEqual(self.store.reserve(KEY, SECOND).record, OTHER_RECORD)
        self.assertFalse(self.store.complete(KEY, stale, RECORD))
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.CONFLICT, SECOND)

    def test_a_stale_owners_completion_after_the_key_was_resolved_is_refused(self) -> None:
        stale = self.reserve()
        self.clock.advance(LEASE_S)
        self.assertTrue(self.store.resolve(KEY, FIRST, record=None))
        fresh = self.reserve()
        self.assertFalse(self.store.complete(KEY, stale, RECORD))
        self.assertFalse(self.store.release(KEY, stale))
        self.assertTrue(self.store.complete(KEY, fresh, OTHER_RECORD))
        self.assertEqual(self.store.reserve(KEY, FIRST).record, OTHER_RECORD)

    def test_a_second_completion_keeps_the_first_receipt(self) -> None:
        owner = self.completed()
        self.assertFalse(self.store.complete(KEY, owner, OTHER_RECORD))
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)

    def test_a_completion_repeated_by_its_owner_with_the_same_record_is_stored_once_not_fenced(self) -> None:
        owner = self.reserve()
        self.assertTrue(self.store.complete(KEY, owner, RECORD))
        self.clock.advance(TTL_S - 1)
        self.assertIs(self.store.complete(KEY, owner, RECORD), True)  # its first answer was lost: a retry
        self.assertIs(self.store.complete(KEY, owner, OTHER_RECORD), False)  # never another record
        self.assertIs(self.store.complete(KEY, "not-the-owner-token", RECORD), False)
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)
        self.clock.advance(1)  # the ttl counts from the first completion, not from its repeat
        self.assertIsNone(self.store.lookup(KEY))

    def test_a_resolved_receipt_is_nobodys_to_complete_again(self) -> None:
        owner = self.reserve()
        self.clock.advance(LEASE_S)
        self.assertTrue(self.store.resolve(KEY, FIRST, record=RECORD))
        self.assertIs(self.store.complete(KEY, owner, RECORD), False)  # fenced: the application settled it

    def test_a_completion_without_a_reservation_is_refused(self) -> None:
        self.assertFalse(self.store.complete(KEY, "made-up-owner", RECORD))
        self.assertIsNone(self.store.lookup(KEY))

    def test_a_completion_with_another_owner_token_is_refused(self) -> None:
        self.reserve()
        self.assertFalse(self.store.complete(KEY, "not-the-owner-token", RECORD))
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, FIRST)

    # -- resolve ------------------------------------------------------------------------------

    def test_resolving_an_unknown_key_as_happened_replays_the_given_record(self) -> None:
        self.reserve()
        self.clock.advance(LEASE_S)
        self.assertTrue(self.store.resolve(KEY, FIRST, record=RECORD))
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)

    def test_resolving_an_unknown_key_as_not_happened_frees_it(self) -> None:
        self.reserve()
        self.clock.advance(LEASE_S)
        self.assertTrue(self.store.resolve(KEY, FIRST, record=None))
        self.assertIsNone(self.store.lookup(KEY))
        self.reserve(SECOND)

    def test_only_an_unknown_key_for_its_own_fingerprint_can_be_resolved(self) -> None:
        self.assertFalse(self.store.resolve(KEY, FIRST, record=None))  # free
        owner = self.reserve()
        self.assertFalse(self.store.resolve(KEY, FIRST, record=RECORD))  # still in progress
        self.clock.advance(LEASE_S)
        self.assertFalse(self.store.resolve(KEY, SECOND, record=None))  # other arguments
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.UNKNOWN, FIRST)
        self.assertTrue(self.store.complete(KEY, owner, RECORD))
        self.assertFalse(self.store.resolve(KEY, FIRST, record=None))  # completed
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.REPLAY, FIRST)

    def test_a_taken_over_read_is_never_unknown(self) -> None:
        self.reserve(lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)
        self.assertFalse(self.store.resolve(KEY, FIRST, record=None))
        self.assertEqual(self.store.unresolved(), [])

    def test_unresolved_lists_the_unknown_keys_in_order_up_to_the_limit(self) -> None:
        keys = [ReceiptKey("tenant-a", "record_followup", f"action-{index}") for index in (3, 1, 2)]
        for key in keys:
            self.reserve(key=key)
        self.reserve(key=ReceiptKey("tenant-a", "record_followup", "a-read"), lapse=Lapse.TAKEOVER)
        self.completed(key=ReceiptKey("tenant-a", "record_followup", "a-done"))
        self.assertEqual(self.store.unresolved(), [])  # all still within their lease
        self.clock.advance(LEASE_S)
        ordered = sorted(keys, key=lambda key: key.key)
        self.assertEqual(self.store.unresolved(), ordered)
        self.assertEqual(self.store.unresolved(limit=2), ordered[:2])
        with self.assertRaises(ValueError):
            self.store.unresolved(limit=0)

    # -- receipts of unknown outcome (complete_unknown) ------------------------------------

    def completed_unknown(self, fingerprint: str = FIRST, *, key: ReceiptKey = KEY) -> str:
        owner = self.reserve(fingerprint, key=key)
        self.assertIs(self.store.complete_unknown(key, owner, UNKNOWN_RECORD), True)
        return owner

    def test_a_receipt_of_unknown_outcome_replays_past_any_ttl_and_is_never_purged(self) -> None:
        self.completed_unknown()
        for _ in range(3):
            self.clock.advance(TTL_S * 10)
            for index in range(70):  # enough reserves elsewhere for any periodic purge to run
                self.reserve(key=ReceiptKey(KEY.tenant, KEY.tool, f"other-{self.clock.now}-{index}"),
                             lapse=Lapse.TAKEOVER)
            self.store.purge()
            answer = self.store.reserve(KEY, FIRST)
            self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
            self.assertEqual(answer.record, UNKNOWN_RECORD)
            self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)
            self.assertStatus(self.store.lookup(KEY), ReservationStatus.REPLAY, FIRST)
            self.assertEqual(self.store.unresolved(), [KEY])

    def test_unresolved_lists_receipts_of_unknown_outcome_beside_lapsed_writes(self) -> None:
        lapsed, replayed = ReceiptKey(KEY.tenant, KEY.tool, "b-lapsed"), ReceiptKey(KEY.tenant, KEY.tool, "a-raised")
        self.reserve(key=lapsed)
        self.completed_unknown(key=replayed)
        self.completed(key=ReceiptKey(KEY.tenant, KEY.tool, "c-done"))
        self.assertEqual(self.store.unresolved(), [replayed])  # listed at once: nothing will change it
        self.clock.advance(LEASE_S)
        self.assertEqual(self.store.unresolved(), [replayed, lapsed])
        self.assertEqual(self.store.unresolved(limit=1), [replayed])

    def test_resolving_a_receipt_of_unknown_outcome_as_happened_replays_the_given_record_for_the_ttl(self) -> None:
        owner = self.completed_unknown()
        self.clock.advance(TTL_S * 3)
        self.assertFalse(self.store.resolve(KEY, SECOND, record=RECORD))  # other arguments
        self.assertTrue(self.store.resolve(KEY, FIRST, record=RECORD))
        self.assertEqual(self.store.reserve(KEY, FIRST).record, RECORD)
        self.assertEqual(self.store.unresolved(), [])
        self.assertFalse(self.store.resolve(KEY, FIRST, record=None))  # settled: no longer unknown
        self.assertIs(self.store.complete_unknown(KEY, owner, UNKNOWN_RECORD), False)  # nor its holder's again
        self.clock.advance(TTL_S - 1)
        self.assertEqual(self.store.lookup(KEY).record, RECORD)
        self.clock.advance(1)  # the resolved receipt's ttl counts from its resolution
        self.assertIsNone(self.store.lookup(KEY))

    def test_resolving_a_receipt_of_unknown_outcome_as_not_happened_frees_the_key(self) -> None:
        self.completed_unknown()
        self.assertTrue(self.store.resolve(KEY, FIRST, record=None))
        self.assertIsNone(self.store.lookup(KEY))
        self.assertEqual(self.store.unresolved(), [])
        self.reserve(SECOND)

    def test_complete_unknown_is_fenced_and_repeatable_as_complete_is(self) -> None:
        self.assertFalse(self.store.complete_unknown(KEY, "made-up-owner", UNKNOWN_RECORD))
        self.assertIsNone(self.store.lookup(KEY))
        owner = self.reserve()
        self.assertFalse(self.store.complete_unknown(KEY, "not-the-owner-token", UNKNOWN_RECORD))
        self.assertIs(self.store.complete_unknown(KEY, owner, UNKNOWN_RECORD), True)
        self.assertIs(self.store.complete_unknown(KEY, owner, UNKNOWN_RECORD), True)  # its first answer was lost
        self.assertIs(self.store.complete_unknown(KEY, owner, RECORD), False)  # never another record
        self.assertIs(self.store.complete(KEY, owner, RECORD), False)
        self.assertIs(self.store.renew(KEY, owner), False)
        self.assertIs(self.store.release(KEY, owner), False)
        self.assertEqual(self.store.reserve(KEY, FIRST).record, UNKNOWN_RECORD)

    def test_a_completed_receipt_is_not_turned_into_one_of_unknown_outcome(self) -> None:
        owner = self.completed()
        self.assertIs(self.store.complete_unknown(KEY, owner, UNKNOWN_RECORD), False)
        self.assertEqual(self.store.unresolved(), [])
        self.clock.advance(TTL_S)
        self.assertIsNone(self.store.lookup(KEY))

    # -- lookup -------------------------------------------------------------------------------

    def test_lookup_of_an_unknown_key_is_none_and_reserves_nothing(self) -> None:
        self.assertIsNone(self.store.lookup(KEY))
        self.reserve()

    def test_lookup_reports_an_in_flight_call(self) -> None:
        self.reserve()
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, FIRST)

    def test_lookup_reports_a_completed_receipt_with_its_record(self) -> None:
        self.completed()
        answer = self.store.lookup(KEY)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)
        self.assertEqual(answer.record, RECORD)

    # -- long keys ----------------------------------------------------------------------------

    def test_long_keys_and_tenants_that_do_not_compress_are_stored_replayed_listed_and_resolved(self) -> None:
        long_text = random_text(3000, seed=17)  # far over PostgreSQL's 2,704-byte btree row; incompressible
        keys = [ReceiptKey(KEY.tenant, KEY.tool, long_text), ReceiptKey(random_text(3000, seed=18), KEY.tool, "k"),
                ReceiptKey(KEY.tenant, KEY.tool, "~sha256:" + "0" * 64)]  # shaped like a stored digest
        done, unknown, read = keys
        self.completed(key=done)
        self.assertEqual(self.store.reserve(done, FIRST).record, RECORD)
        self.assertStatus(self.store.reserve(done, SECOND), ReservationStatus.CONFLICT, FIRST)
        owner = self.reserve(key=unknown)
        self.assertTrue(self.store.renew(unknown, owner))
        self.reserve(key=read, lapse=Lapse.TAKEOVER)
        self.assertIsNone(self.store.lookup(ReceiptKey(KEY.tenant, KEY.tool, long_text[:-1])))  # its own key only
        self.clock.advance(LEASE_S)
        self.assertEqual(self.store.unresolved(), [unknown])  # listed by its whole text
        self.assertTrue(self.store.resolve(unknown, FIRST, record=OTHER_RECORD))
        self.assertEqual(self.store.lookup(unknown).record, OTHER_RECORD)
        self.assertIsNone(self.store.lookup(read))
        long_id = random_text(3000, seed=19)
        self.assertIs(self.store.consume_approval(long_text, long_id, expires_at=self.clock.now + 60), True)
        self.assertIs(self.store.consume_approval(long_text, long_id, expires_at=self.clock.now + 60), False)
        self.assertIs(self.store.consume_approval(long_text, long_id[:-1], expires_at=self.clock.now + 60), True)

    # -- isolation ----------------------------------------------------------------------------

    def test_one_tenant_never_sees_another_tenants_receipt(self) -> None:
        self.completed()
        other_tenant = ReceiptKey("tenant-b", KEY.tool, KEY.key)
        self.assertIsNone(self.store.lookup(other_tenant))
        self.reserve(key=other_tenant)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)

    def test_the_same_key_on_another_tool_is_a_different_receipt(self) -> None:
        self.reserve()
        self.reserve(SECOND, key=ReceiptKey(KEY.tenant, "close_ticket", KEY.key))

    # -- timeouts -----------------------------------------------------------------------------

    def test_a_busy_store_gives_up_within_the_timeout_and_changes_nothing(self) -> None:
        owner = self.reserve()
        with self.busy_store(self.store):
            for name, call in (
                ("reserve", lambda: self.store.reserve(ReceiptKey("t", "tool", "other"), FIRST, timeout_s=BUSY_TIMEOUT_S)),
                ("complete", lambda: self.store.complete(KEY, owner, RECORD, timeout_s=BUSY_TIMEOUT_S)),
                ("renew", lambda: self.store.renew(KEY, owner, timeout_s=BUSY_TIMEOUT_S)),
                ("release", lambda: self.store.release(KEY, owner, timeout_s=BUSY_TIMEOUT_S)),
                ("resolve", lambda: self.store.resolve(KEY, FIRST, record=None, timeout_s=BUSY_TIMEOUT_S)),
            ):
                with self.subTest(call=name), self.assertRaises(ReceiptStoreUnavailable):
                    call()
            with self.subTest(call="a past deadline"), self.assertRaises(ReceiptStoreUnavailable):
                self.store.reserve(ReceiptKey("t", "tool", "late"), FIRST, timeout_s=0)
        self.assertIsNone(self.store.lookup(ReceiptKey("t", "tool", "other")))
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.IN_PROGRESS, FIRST)
        self.assertTrue(self.store.complete(KEY, owner, RECORD))

    def test_a_call_waits_for_a_store_that_becomes_free_within_its_timeout(self) -> None:
        answers: list = []
        with self.busy_store(self.store):
            waiter = threading.Thread(target=lambda: answers.append(
                self.store.reserve(KEY, FIRST, timeout_s=PATIENCE_S).status))
            waiter.start()
            time.sleep(0.05)  # let the waiter meet the busy store (it must wait, not fail)
        waiter.join(PATIENCE_S)
        self.assertEqual(answers, [ReservationStatus.RESERVED])

    def test_a_timeout_must_be_a_number_of_seconds(self) -> None:
        for bad in ("1", float("nan"), True):
            with self.subTest(timeout_s=bad), self.assertRaises(ValueError):
                self.store.reserve(KEY, FIRST, timeout_s=bad)

    # -- construction -------------------------------------------------------------------------

    def test_durations_must_be_positive_finite_seconds(self) -> None:
        for bad in (0, -1, float("nan"), float("inf"), True, "10"):
            with self.subTest(ttl_s=bad), self.assertRaises(ValueError):
                self.make_store(self.clock, ttl_s=bad)
            with self.subTest(lease_s=bad), self.assertRaises(ValueError):
                self.make_store(self.clock, lease_s=bad)

    def test_a_lapse_must_be_unknown_or_takeover(self) -> None:
        with self.assertRaises(ValueError):
            self.store.reserve(KEY, FIRST, lapse="free")

    def test_closing_twice_is_harmless(self) -> None:
        self.store.close()
        self.store.close()

    def test_a_closed_store_refuses_to_work(self) -> None:
        self.store.close()
        with self.assertRaises(ValueError):
            self.store.reserve(KEY, FIRST)


class ClockStepConformance:
    """The store's wall clock is set (`FakeClock.step`) while its monotonic clock runs on: nothing may
    expire sooner than the time that really passed. Mixed in next to ReceiptStoreConformance, for a
    store whose `make_store` passes `monotonic=clock.monotonic`."""

    def test_a_wall_clock_stepped_forward_past_the_ttl_expires_no_receipt_and_lapses_no_lease(self) -> None:
        self.completed()
        running = ReceiptKey(KEY.tenant, KEY.tool, "running")
        self.reserve(key=running)
        self.clock.step(TTL_S * 10 + 1)  # a day, a year: more than any ttl
        answer = self.store.reserve(KEY, FIRST)
        self.assertStatus(answer, ReservationStatus.REPLAY, FIRST)  # never a second run
        self.assertEqual(answer.record, RECORD)
        self.assertStatus(self.store.reserve(KEY, SECOND), ReservationStatus.CONFLICT, FIRST)
        self.assertStatus(self.store.lookup(running), ReservationStatus.IN_PROGRESS, FIRST)
        self.assertEqual(self.store.unresolved(), [])
        self.assertFalse(self.store.resolve(running, FIRST, record=None))
        self.assertEqual(self.store.purge(), 0)
        self.clock.advance(LEASE_S)  # each lapses when its own time has passed
        self.assertStatus(self.store.lookup(running), ReservationStatus.UNKNOWN, FIRST)
        self.clock.advance(TTL_S - LEASE_S)
        self.assertIsNone(self.store.lookup(KEY))

    def test_a_wall_clock_stepped_back_never_shortens_a_receipt(self) -> None:
        self.completed()
        self.clock.step(-TTL_S * 10)
        self.clock.advance(TTL_S - 1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)
        key = ReceiptKey(KEY.tenant, KEY.tool, "after-the-step")
        self.completed(key=key)  # written on the clock as it reads now: replays for its whole ttl
        self.clock.advance(TTL_S - 1)
        self.assertStatus(self.store.lookup(key), ReservationStatus.REPLAY, FIRST)

    def test_a_forward_step_is_taken_once_everything_written_before_it_has_expired(self) -> None:
        self.completed()
        self.clock.step(TTL_S * 10)
        after_step = ReceiptKey(KEY.tenant, KEY.tool, "after-the-step")
        self.reserve(key=after_step, lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S)  # the step is held: a lease written since lasts longer, never shorter
        self.assertStatus(self.store.lookup(after_step), ReservationStatus.IN_PROGRESS, FIRST)
        self.clock.advance(TTL_S - LEASE_S)  # the ttl has passed since the step: the store takes it
        self.assertIsNone(self.store.lookup(KEY))
        self.assertIsNone(self.store.lookup(after_step))
        later = ReceiptKey(KEY.tenant, KEY.tool, "later")
        self.reserve(key=later, lapse=Lapse.TAKEOVER)
        self.clock.advance(LEASE_S - 1)
        self.assertStatus(self.store.lookup(later), ReservationStatus.IN_PROGRESS, FIRST)
        self.clock.advance(1)  # leases and ttls are their own length again
        self.assertIsNone(self.store.lookup(later))


    def test_a_forward_step_after_a_month_of_use_is_held_as_one_after_a_minute_is(self) -> None:
        # The drift a store takes as it comes is counted from its recent readings, never from when it
        # opened: a month of it (SLEW of 30 days is 43 minutes) made a step ten ttls long look like drift,
        # and the receipt written just before it expired at once.
        self.completed(key=ReceiptKey(KEY.tenant, KEY.tool, "on-the-first-day"))
        self.clock.advance(30 * 86_400)
        self.completed()
        self.clock.step(TTL_S * 10)
        self.clock.advance(1)
        self.assertStatus(self.store.reserve(KEY, FIRST), ReservationStatus.REPLAY, FIRST)  # never a second run
        self.clock.advance(TTL_S - 2)
        self.assertStatus(self.store.lookup(KEY), ReservationStatus.REPLAY, FIRST)


class DurableStoreConformance:
    """For stores that outlive a process: `make_store` opens the same storage again."""

    def reopen(self) -> Any:
        self.store.close()
        reopened = self.make_store(self.clock)
        self.addCleanup(reopened.close)
        return reopened

    def test_a_receipt_replays_after_a_restart(self) -> None:
        owner = self.store.reserve(KEY, FIRST).owner
        self.store.complete(KEY, owner, RECORD)
        answer = self.reopen().reserve(KEY, FIRST)
        self.assertEqual((answer.status, answer.record), (ReservationStatus.REPLAY, RECORD))

    def test_an_in_flight_reservation_survives_a_restart_then_lapses_to_unknown(self) -> None:
        self.store.reserve(KEY, FIRST)
        reopened = self.reopen()
        self.assertIs(reopened.reserve(KEY, FIRST).status, ReservationStatus.IN_PROGRESS)
        self.clock.advance(LEASE_S)
        self.assertIs(reopened.reserve(KEY, FIRST).status, ReservationStatus.UNKNOWN)
        self.assertEqual(reopened.unresolved(), [KEY])

    def test_a_receipt_of_unknown_outcome_is_kept_and_listed_after_a_restart(self) -> None:
        owner = self.store.reserve(KEY, FIRST).owner
        self.assertTrue(self.store.complete_unknown(KEY, owner, UNKNOWN_RECORD))
        reopened = self.reopen()
        self.clock.advance(TTL_S * 10)
        self.assertEqual(reopened.reserve(KEY, FIRST).record, UNKNOWN_RECORD)
        self.assertEqual(reopened.unresolved(), [KEY])
        self.assertTrue(reopened.resolve(KEY, FIRST, record=None))
        self.assertIsNone(reopened.lookup(KEY))

    def test_an_owner_token_still_completes_after_a_restart(self) -> None:
        owner = self.store.reserve(KEY, FIRST).owner
        reopened = self.reopen()
        self.assertTrue(reopened.complete(KEY, owner, RECORD))
        self.assertEqual(reopened.reserve(KEY, FIRST).record, RECORD)

    def test_two_stores_on_one_storage_see_each_others_receipts(self) -> None:
        second = self.make_store(self.clock)
        self.addCleanup(second.close)
        owner = self.store.reserve(KEY, FIRST).owner
        self.assertIs(second.reserve(KEY, FIRST).status, ReservationStatus.IN_PROGRESS)
        self.assertTrue(self.store.complete(KEY, owner, RECORD))
        self.assertEqual(second.reserve(KEY, FIRST).record, RECORD)

    def test_the_fingerprint_key_is_the_same_after_a_restart_and_for_every_store(self) -> None:
        key = self.store.fingerprint_key
        second = self.make_store(self.clock)
        self.addCleanup(second.close)
        self.assertEqual(second.fingerprint_key, key)
        self.assertEqual(self.reopen().fingerprint_key, key)


@contextlib.contextmanager
def holding(lock: Any):
    """Hold a threading lock for the duration (the in-memory store's way of being busy)."""
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


APPROVAL_TTL_S = 60.0


class PurgeAndApprovalConformance:
    """`purge()` and the ledger of spent single-use approvals (`consume_approval`): mixed in next to
    ReceiptStoreConformance (it uses its helpers and hooks)."""

    def key(self, name: str) -> ReceiptKey:
        return ReceiptKey(KEY.tenant, KEY.tool, name)

    def spend(self, approval_id: str = "apr-1", *, tenant: str = "tenant-a", **options: Any) -> bool:
        return self.store.consume_approval(tenant, approval_id, expires_at=self.clock.now + APPROVAL_TTL_S, **options)

    # -- purge --------------------------------------------------------------------------------

    def test_purge_deletes_expired_receipts_and_lapsed_reads_but_never_an_unknown_or_live_key(self) -> None:
        self.completed(key=self.key("old-receipt"))
        self.reserve(key=self.key("old-read"), lapse=Lapse.TAKEOVER)
        self.reserve(key=self.key("old-write"), lapse=Lapse.UNKNOWN)
        self.clock.advance(TTL_S)
        self.reserve(key=self.key("running"))
        self.completed(key=self.key("new-receipt"))
        self.assertEqual(self.store.purge(), 2)
        self.assertEqual(self.store.purge(), 0)
        self.assertStatus(self.store.lookup(self.key("old-write")), ReservationStatus.UNKNOWN, FIRST)
        self.assertStatus(self.store.lookup(self.key("running")), ReservationStatus.IN_PROGRESS, FIRST)
        self.assertStatus(self.store.lookup(self.key("new-receipt")), ReservationStatus.REPLAY, FIRST)
        self.assertEqual(self.store.unresolved(), [self.key("old-write")])
        self.reserve(SECOND, key=self.key("old-receipt"))  # a purged key is free

    def test_purge_deletes_at_most_limit_entries_per_call(self) -> None:
        for index in range(5):
            self.completed(key=self.key(f"receipt-{index}"))
        self.clock.advance(TTL_S)
        self.assertEqual(self.store.purge(limit=2), 2)
        self.assertEqual(self.store.purge(limit=2), 2)
        self.assertEqual(self.store.purge(), 1)
        with self.assertRaises(ValueError):
            self.store.purge(limit=0)

    def test_a_busy_store_purges_nothing_and_gives_up_within_the_timeout(self) -> None:
        self.completed()
        self.clock.advance(TTL_S)
        with self.busy_store(self.store), self.assertRaises(ReceiptStoreUnavailable):
            self.store.purge(timeout_s=BUSY_TIMEOUT_S)
        self.assertEqual(self.store.purge(), 1)

    # -- takeovers under contention -----------------------------------------------------------

    def race_for(self, fingerprint: str, *, lapse: Lapse) -> list:
        """16 threads reserve KEY at once; the statuses they got."""
        start = threading.Barrier(16)
        answers: list = []

        def contend() -> None:
            start.wait(timeout=PATIENCE_S)
            answers.append(self.store.reserve(KEY, fingerprint, lapse=lapse, timeout_s=PATIENCE_S).status)

        threads = [threading.Thread(target=contend) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=PATIENCE_S)
        return answers

    def test_racing_threads_take_over_a_lapsed_read_exactly_once(self) -> None:
        self.reserve(lapse=Lapse.TAKEOVER)
        for round_number in range(5):  # each round's winner lapses in turn and is taken over by one other
            self.clock.advance(LEASE_S)
            with self.subTest(round=round_number):
                answers = self.race_for(FIRST, lapse=Lapse.TAKEOVER)
                self.assertEqual(answers.count(ReservationStatus.RESERVED), 1)
                self.assertEqual(answers.count(ReservationStatus.IN_PROGRESS), 15)

    def test_racing_threads_reserve_a_key_whose_receipt_expired_exactly_once(self) -> None:
        self.completed()
        self.clock.advance(TTL_S)
        answers = self.race_for(SECOND, lapse=Lapse.UNKNOWN)
        self.assertEqual(answers.count(ReservationStatus.RESERVED), 1)
        self.assertEqual(answers.count(ReservationStatus.IN_PROGRESS), 15)

    # -- single-use approvals -----------------------------------------------------------------

    def test_an_approval_is_spent_by_its_first_use_only(self) -> None:
        self.assertIs(self.spend(), True)
        self.assertIs(self.spend(), False)
        self.assertIs(self.spend(), False)
        self.assertIs(self.spend("apr-2"), True)

    def test_approvals_are_spent_per_tenant(self) -> None:
        self.assertIs(self.spend(tenant="tenant-a"), True)
        self.assertIs(self.spend(tenant="tenant-b"), True)
        self.assertIs(self.spend(tenant="tenant-b"), False)

    def test_racing_threads_spend_an_approval_exactly_once(self) -> None:
        start = threading.Barrier(16)
        answers: list = []

        def contend() -> None:
            start.wait(timeout=PATIENCE_S)
            answers.append(self.spend(timeout_s=PATIENCE_S))

        threads = [threading.Thread(target=contend) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=PATIENCE_S)
        self.assertEqual(sorted(answers), [False] * 15 + [True])

    def test_a_spent_approval_is_remembered_past_its_expiry_for_the_receipt_ttl(self) -> None:
        self.assertIs(self.spend(), True)
        self.clock.advance(APPROVAL_TTL_S + TTL_S - 1)
        self.assertEqual(self.store.purge(), 0)
        self.assertIs(self.spend(), False)
        self.clock.advance(1)
        self.assertEqual(self.store.purge(), 1)

    def spend_by(self, offset_s: float, expires_at: float) -> Any:
        """Spend "apr-1" as a registry whose clock reads the store's plus `offset_s` (negative: it lags)."""
        return self.store.consume_approval("tenant-a", "apr-1", expires_at=expires_at, now=self.clock.now + offset_s)

    def test_a_spent_approval_is_kept_while_a_lagging_checking_clock_still_takes_it_for_valid(self) -> None:
        lag_s = TTL_S - 10  # the registry's clock is behind the store's, within the store's ttl
        expires_at = self.clock.now - lag_s + 300  # valid for 300 s by the clock that checks it
        self.assertIs(self.spend_by(-lag_s, expires_at), True)
        self.clock.advance(299)  # still valid by the checking clock: never forgotten meanwhile
        self.assertEqual(self.store.purge(), 0)
        self.assertIs(self.spend_by(-lag_s, expires_at), False)
        self.clock.advance(1 + TTL_S)  # expired there, and the margin has passed
        self.assertEqual(self.store.purge(), 1)

    def test_a_use_by_a_leading_clock_is_kept_until_the_approval_has_expired_on_the_stores_clock_too(self) -> None:
        lead_s = TTL_S + 150  # the spender's clock is ahead of the store's by more than the ttl
        expires_at = self.clock.now + 300  # valid for 300 s by the store's clock (and by one in step with it)
        self.assertIs(self.spend_by(lead_s, expires_at), True)
        self.clock.advance(299)  # expired by the spender's clock long ago, still valid by the store's
        self.assertEqual(self.store.purge(), 0)
        self.assertIs(self.spend_by(0, expires_at), False)  # a registry in step with the store finds it used
        self.clock.advance(1 + TTL_S)
        self.assertEqual(self.store.purge(), 1)

    def test_a_clock_that_lags_the_stores_by_more_than_the_ttl_spends_nothing(self) -> None:
        expires_at = self.clock.now + 300
        self.assertIsNone(self.spend_by(-TTL_S - 1, expires_at))  # refused: its use could be forgotten too soon
        self.assertIs(self.spend_by(-TTL_S, expires_at), True)  # nothing was spent by the refusal
        self.assertIsNone(self.spend_by(-TTL_S - 1, expires_at))  # refused, not "used before"

    def test_the_clock_reading_given_with_an_approval_must_be_a_finite_number(self) -> None:
        for now in (float("nan"), float("inf"), True, "1"):
            with self.subTest(now=now), self.assertRaises(ValueError):
                self.store.consume_approval("tenant-a", "apr-1", expires_at=self.clock.now + 60, now=now)
        self.assertIs(self.spend(), True)

    def test_a_busy_store_spends_no_approval_and_gives_up_within_the_timeout(self) -> None:
        with self.busy_store(self.store), self.assertRaises(ReceiptStoreUnavailable):
            self.spend(timeout_s=BUSY_TIMEOUT_S)
        self.assertIs(self.spend(), True)

    def test_an_approval_to_spend_must_be_storable_text_with_a_finite_expiry(self) -> None:
        for tenant, approval_id in (("", "apr-1"), ("tenant-a", ""), ("tenant-a", "apr-\x00"), ("tenant-a", "\ud800")):
            with self.subTest(tenant=tenant, approval_id=approval_id), self.assertRaises(ValueError):
                self.store.consume_approval(tenant, approval_id, expires_at=self.clock.now)
        for expires_at in (float("nan"), float("inf"), True, "1"):
            with self.subTest(expires_at=expires_at), self.assertRaises(ValueError):
                self.store.consume_approval("tenant-a", "apr-1", expires_at=expires_at)
        self.assertIs(self.spend(), True)  # nothing was spent by the refused calls


class DurableApprovalConformance:
    """For stores that outlive a process: a spent approval stays spent for every store on the storage."""

    def test_a_spent_approval_stays_spent_after_a_restart_and_for_another_store(self) -> None:
        expires_at = self.clock.now + APPROVAL_TTL_S
        self.assertIs(self.store.consume_approval("tenant-a", "apr-1", expires_at=expires_at), True)
        second = self.make_store(self.clock)
        self.addCleanup(second.close)
        self.assertIs(second.consume_approval("tenant-a", "apr-1", expires_at=expires_at), False)
        self.assertIs(self.reopen().consume_approval("tenant-a", "apr-1", expires_at=expires_at), False)


class TaskStoreConformance:
    """Tasks (`agent_lab.tasks`) kept with the store's own operations: the same on every store.

    Mixed in next to `ReceiptStoreConformance` (it uses its `store`, `clock` and `make_store`)."""

    store: Any
    clock: FakeClock

    def book(self, store: Any = None) -> Any:
        from agent_lab.tasks import TaskBook

        return TaskBook(self.store if store is None else store)

    def finished(self, result_ok: bool = True) -> Any:
        from agent_lab.calls import ToolResult
        from agent_lab.errors import Outcome

        return ToolResult(ok=result_ok, outcome=Outcome.SUCCEEDED, tool="export_report", output={"rows": 3})

    def test_a_task_is_working_then_completed_with_its_result_for_its_actor_only(self) -> None:
        from agent_lab.tasks import TaskState

        book = self.book()
        task_id, description, owner = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        working = book.status("tenant-a", "ana", task_id)
        self.assertIs(working.status, TaskState.WORKING)
        self.assertEqual(working.tool, "export_report")
        self.assertIsNone(working.result)
        for tenant, actor in (("tenant-b", "ana"), ("tenant-a", "bob")):
            self.assertIsNone(book.status(tenant, actor, task_id))  # like an unknown task
        self.assertIs(self.store.complete(ReceiptKey("tenant-a", "agent_lab/task", task_id), owner,
                                          book.final_record(TaskState.COMPLETED, self.finished())), True)
        done = book.status("tenant-a", "ana", task_id)
        self.assertIs(done.status, TaskState.COMPLETED)
        self.assertEqual(done.result.output, {"rows": 3})
        self.assertIsNone(book.status("tenant-a", "ana", "task-" + "0" * 32))

    def test_the_gate_goes_to_whoever_comes_first_and_a_cancel_that_won_reads_cancelled(self) -> None:
        from agent_lab.tasks import TaskState

        book = self.book()
        started, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        self.assertEqual(book.take_gate("tenant-a", started, "start", timeout_s=PATIENCE_S), "won")
        self.assertEqual(book.take_gate("tenant-a", started, "cancel", timeout_s=PATIENCE_S), "lost")
        self.assertIs(book.status("tenant-a", "ana", started).status, TaskState.WORKING)
        cancelled, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        self.assertEqual(book.take_gate("tenant-a", cancelled, "cancel", timeout_s=PATIENCE_S), "won")
        self.assertEqual(book.take_gate("tenant-a", cancelled, "start", timeout_s=PATIENCE_S), "lost")
        status = book.status("tenant-a", "ana", cancelled)
        self.assertIs(status.status, TaskState.CANCELLED)
        self.assertEqual(status.result.error.code, "task_cancelled")

    def test_a_task_whose_host_died_reads_failed_with_its_effect_unknown_never_working(self) -> None:
        from agent_lab.errors import Outcome
        from agent_lab.tasks import TaskState

        book = self.book()
        started, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        book.take_gate("tenant-a", started, "start", timeout_s=PATIENCE_S)
        never_started, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        self.clock.advance(LEASE_S + 1)  # nobody renewed the entries: their host is gone
        status = book.status("tenant-a", "ana", started)
        self.assertIs(status.status, TaskState.FAILED)
        self.assertEqual(status.result.error.code, "task_interrupted")
        self.assertIs(status.result.outcome, Outcome.UNKNOWN)
        status = book.status("tenant-a", "ana", never_started)
        self.assertIs(status.status, TaskState.FAILED)
        self.assertIs(status.result.outcome, Outcome.REJECTED)  # it never started: certainly no effect

    def test_a_task_read_as_never_started_can_never_start_after_it(self) -> None:
        # A lapse is also what a live host that lost the store for longer than the lease looks like: its
        # run, reaching the gate once the store is back, must find it taken, or "did not run; call it
        # again" would be followed by the run, and a client that called again would have two effects.
        from agent_lab.errors import Outcome
        from agent_lab.tasks import TaskState

        book = self.book()
        task_id, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        self.clock.advance(LEASE_S + 1)
        told = book.status("tenant-a", "ana", task_id)
        self.assertIs(told.result.outcome, Outcome.REJECTED)
        self.assertEqual(book.take_gate("tenant-a", task_id, "start", timeout_s=PATIENCE_S), "lost")
        self.assertEqual(book.take_gate("tenant-a", task_id, "cancel", timeout_s=PATIENCE_S), "lost")
        again = book.status("tenant-a", "ana", task_id)
        self.assertEqual((again.status, again.result.outcome), (TaskState.FAILED, Outcome.REJECTED))

    def test_a_task_that_died_mid_call_still_reads_as_may_have_run_once_its_gate_expired(self) -> None:
        # The gate is a receipt with the store's ttl; the unknown entry is kept for good. Read once the
        # gate had expired, a task killed mid-call said "the tool did not run; call it again".
        from unittest import mock

        from agent_lab.errors import Outcome

        book = self.book()
        task_id, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        self.assertEqual(book.take_gate("tenant-a", task_id, "start", timeout_s=PATIENCE_S), "won")
        self.clock.advance(TTL_S + LEASE_S)
        with mock.patch("agent_lab.tasks.time.time", return_value=time.time() + TTL_S + LEASE_S):
            self.assertIs(book.status("tenant-a", "ana", task_id).result.outcome, Outcome.UNKNOWN)

    def test_a_lapsed_task_whose_run_took_the_gate_reads_as_may_have_run(self) -> None:
        from agent_lab.errors import Outcome

        book = self.book()
        task_id, _, _ = book.open("tenant-a", "ana", "export_report", True, timeout_s=PATIENCE_S)
        self.clock.advance(LEASE_S + 1)
        self.assertEqual(book.take_gate("tenant-a", task_id, "start", timeout_s=PATIENCE_S), "won")  # back, first
        self.assertIs(book.status("tenant-a", "ana", task_id).result.outcome, Outcome.UNKNOWN)
