"""The keys a registry holds while their calls run, and the one thread that keeps their leases.

A call that reserved an idempotency key holds it until its outcome reaches the store. While it does:

* this process answers for the key itself (``in_progress`` / ``conflict``), whatever the store's lease
  says, so a second run of the same action can never start here;
* one lease-keeper thread per registry (not one per call) renews the store's lease of every held key,
  so other processes sharing the store see the key in progress, not lapsed; it runs while keys are
  held, and ends after `KEEPER_IDLE_S` without any (a registry nobody closes leaves no thread behind);
* a sync write that overruns its deadline keeps running on its worker (a thread cannot be stopped); for
  a bounded late-completion window the key answers ``in_progress`` here, and after it ``unknown`` (the
  caller should look the effect up). But as long as the handler still runs, the keeper keeps renewing
  the store's lease, even after the registry is closed: every other process sees the key in progress,
  and nobody, here or elsewhere, can resolve it as "did not happen" while it may still take effect.
  When the handler returns, its real result is stored under its owner token; if the process dies
  first, the lease lapses and the key is ``unknown`` everywhere until the application resolves it;
* a hold may keep a receipt alive beside its own lease (``keeps``: an accepted task's entry keeps the
  key's ``accepted`` receipt, see `agent_lab.steps.task`): each renewal also ``keep``s that receipt for
  the store's ttl from then, so the key replays the task for as long as its call may run, past any
  deadline, and for the ttl after; a write task's is kept until resolved anyway (its run lets it
  expire when it ends), so a process that dies leaves it held, never free;
* storing the outcome (``complete`` or ``release``) that fails is retried by the keeper a bounded number
  of times; if it never succeeds the key stays ``unknown``, never free. Here in-process until the store's
  lease has surely lapsed, after that in the store itself (a lapsed write reservation is unknown there).

A store refusing a renewal or a completion (the owner token no longer holds the key: a read taken over
after a lapse, or a key the application resolved meanwhile) is *fencing*: the stale holder changes
nothing, and a warning is logged (naming the tool, never the key or the record).
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from typing import Any, Callable, List, Mapping, Optional, Tuple

from .stores.protocol import ReceiptKey, ReceiptStore

__all__ = [
    "LATE_COMPLETION_WINDOW_S",
    "RECEIPT_RETRY_ATTEMPTS",
    "RECEIPT_RETRY_PAUSE_S",
    "RECEIPT_RETRY_TIMEOUT_S",
    "RENEW_FRACTION",
    "Hold",
    "HoldState",
    "KeyHolder",
    "ReceiptNote",
]

logger = logging.getLogger("agent_lab.leases")

LATE_COMPLETION_WINDOW_S = 30.0
"""How long past its deadline a sync write that is still running keeps its key held (default of
``Registry(late_completion_s=...)``). After it the key is ``unknown`` until resolved."""

RENEW_FRACTION = 3
"""The keeper renews every held lease this many times per lease (every ``lease_s / 3`` seconds), so
one late or failed renewal still leaves two chances before the lease would lapse."""

RECEIPT_RETRY_ATTEMPTS = 5
"""How many more times the keeper tries to store an outcome whose first attempt failed."""

RECEIPT_RETRY_PAUSE_S = 0.2
"""The pause between two of those attempts."""

RECEIPT_RETRY_TIMEOUT_S = 2.0
"""How long one background store call (a retry, a renewal, a late completion) may wait."""

KEEPER_IDLE_S = 10.0
"""A keeper thread that has had no held key for this long ends, and the next held key starts another.
The thread holds its registry's key holder (and through it the store): without this, a registry
dropped without `close()` kept a thread, and everything it reaches, for the life of the process."""

_PROCESS_EXITS = (KeyboardInterrupt, SystemExit)


def _address(key: ReceiptKey) -> tuple[str, str, str]:
    """Where a key is held: its three fields as a plain tuple (hashed in C)."""
    return (key.tenant, key.tool, key.key)


class HoldState(str, enum.Enum):
    RUNNING = "running"  # the handler runs within its deadline (or has not settled yet)
    LATE = "late"  # the caller stopped waiting; the handler still runs, within the late window
    SETTLING = "settling"  # the handler is done; storing its outcome failed and is being retried
    UNKNOWN = "unknown"  # given up: the key answers outcome_unknown (renewed while its handler still runs)


class ReceiptNote(str, enum.Enum):
    """What became of a call's receipt, for its audit record."""

    STORED = "stored"  # the result record is the key's receipt
    RELEASED = "released"  # the key is free again (the call had no effect)
    REFUSED = "refused"  # fenced: the key no longer belonged to this call (taken over or resolved)
    PENDING = "pending"  # the store failed; the keeper retries, and the key is unknown if it never succeeds
    LATE = "late"  # the handler is still running; its receipt is stored when (if) it finishes in time

    def __str__(self) -> str:
        return self.value


class Hold:
    """One key held by one call. Mutable; changed under the holder's lock only.

    A plain class with class-level defaults (one is made per write; a dataclass setting all its
    fields costs several times as much): a call sets what it knows, the keeper the rest when needed."""

    state: HoldState = HoldState.RUNNING
    late_until: float = math.inf  # monotonic: end of the late-completion window (LATE)
    unknown_until: float = 0.0  # monotonic: when the store's lease has surely lapsed (UNKNOWN)
    pending: Optional[Mapping[str, Any]] = None  # SETTLING: the record to store (None: release the key)
    pending_unknown: bool = False  # SETTLING: that record is of unknown outcome (`complete_unknown`)
    attempts_left: int = 0
    next_attempt: float = 0.0
    renew_at: float = math.inf  # monotonic: when the keeper renews the store's lease next
    fenced: bool = False  # a renewal found the key no longer ours
    still_running: bool = False  # UNKNOWN after the late window: its handler has not returned yet (renewed)
    dropped: bool = False  # settled or let go: no longer held
    stored: bool = False  # its record is the key's receipt: the store said so (read by `wait_stored`)
    keeps: Optional[Tuple[ReceiptKey, str]] = None  # a receipt (and its completer's owner token) kept with the lease
    task = False  # the entry of an accepted task, not a call's idempotency key (what a log line calls it)

    def __init__(self, key: ReceiptKey, fingerprint: str, owner: str, writes: bool, tool: str,
                 renew_at: float = math.inf) -> None:
        self.key = key
        self.address = (key.tenant, key.tool, key.key)  # `_address`, without the call: one per write
        self.fingerprint = fingerprint
        self.owner = owner
        self.writes = writes
        self.tool = tool
        self.renew_at = renew_at

    def __repr__(self) -> str:  # the owner token is a capability: never in a log
        return f"Hold(tool={self.tool!r}, state={self.state.value!r}, writes={self.writes})"


class KeyHolder:
    """The keys one registry holds, and the lease keeper thread (started on first use)."""

    def __init__(self, store: ReceiptStore, *, late_completion_s: float, renew_every_s: Optional[float]) -> None:
        self._store = store
        # Optional in the protocol: a store of the application's own without it gets `complete` (its
        # receipt of unknown outcome then expires with the ttl, as before stores had it).
        complete_unknown = getattr(store, "complete_unknown", None)
        self._complete_unknown = complete_unknown if callable(complete_unknown) else None
        self._late_completion_s = late_completion_s
        lease_s = getattr(store, "lease_s", None)
        self._lease_s = float(lease_s) if isinstance(lease_s, (int, float)) else 0.0
        ttl_s = getattr(store, "ttl_s", None)
        if renew_every_s is None:
            renew_every_s = self._lease_s / RENEW_FRACTION if self._lease_s > 0 else math.inf
            if isinstance(ttl_s, (int, float)) and ttl_s > 0:  # a kept receipt (`keeps`) must not expire between two
                renew_every_s = min(renew_every_s, ttl_s / RENEW_FRACTION)
        elif self._lease_s > 0 and renew_every_s > self._lease_s / 2:
            # Renewed less often, a lease lapses while its handler still runs past the late-completion
            # window: a write's key is then `outcome_unknown`, which another process may resolve as "did
            # not happen" and run again while this handler is still about to take effect.
            raise ValueError(f"renew_every_s ({renew_every_s:g} s) must be at most half the receipt store's lease_s "
                             f"({self._lease_s:g} s), so a renewal that fails or comes late leaves another in time")
        self._renew_every_s = renew_every_s
        # Keyed by the plain (tenant, tool, key) tuple, not the ReceiptKey: a frozen dataclass hashes in
        # Python code (about 1,700 instructions), and every keyed call looks its key up here.
        self._holds: dict[tuple[str, str, str], Hold] = {}
        self.held: Mapping[tuple[str, str, str], Hold] = self._holds  # read-only outside: empty means `answer` says None
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the keeper: a timer moved earlier, or closing
        self._settled = threading.Condition(self._lock)  # wait_settled: a hold was settled or given up
        self._settled_waiters = 0  # callers inside wait_settled: only then is a settled hold announced
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self._store_closed = False

    @property
    def renew_every_s(self) -> float:
        """How often the keeper renews a held lease (and keeps a hold's receipt)."""
        return self._renew_every_s

    # -- what the registry asks --------------------------------------------------------------

    def answer(self, key: ReceiptKey, fingerprint: str) -> Optional[str]:
        """The error code for a call under a key this process holds, or None (ask the store)."""
        if not self._holds:
            return None
        with self._lock:
            hold = self._holds.get((key.tenant, key.tool, key.key))  # `_address`, inline
            if hold is None:
                return None
            if hold.state is HoldState.UNKNOWN:
                if not hold.still_running and time.monotonic() >= hold.unknown_until:  # the store's lease lapsed
                    self._drop_locked(hold)
                    return None
                return "outcome_unknown" if hold.fingerprint == fingerprint else "idempotency_conflict"
            return "idempotency_in_progress" if hold.fingerprint == fingerprint else "idempotency_conflict"

    def hold(self, key: ReceiptKey, fingerprint: str, owner: str, *, writes: bool, tool: str,
             keeps: Optional[Tuple[ReceiptKey, str]] = None, task: bool = False) -> Hold:
        """Hold a key just reserved in the store, and keep its lease renewed until it is settled (and
        the receipt `keeps` names with it, see the module)."""
        hold = Hold(key, fingerprint, owner, writes, tool, time.monotonic() + self._renew_every_s)
        if keeps is not None:
            hold.keeps = keeps
        if task:
            hold.task = True
        with self._lock:  # no wake-up: the keeper looks at least every renew_every_s, soon enough
            self._holds[hold.address] = hold
            if self._thread is None or not self._thread.is_alive():  # never started, or died (see `_keep`)
                self._thread = None
                self._start_keeper_locked()
        return hold

    def run_late(self, hold: Hold) -> None:
        """The caller stopped waiting for a handler that still runs: hold the key for the late window."""
        with self._lock:
            if hold.state is HoldState.RUNNING:
                hold.state = HoldState.LATE
                hold.late_until = time.monotonic() + self._late_completion_s
                self._wake.notify_all()

    def settle(self, hold: Hold, record: Optional[Mapping[str, Any]], *, timeout_s: float,
               unknown_outcome: bool = False) -> ReceiptNote:
        """Store the call's result record (or, for None, free the key) under the hold's owner token.
        `unknown_outcome`: the record is of a write whose effect may have happened; the store keeps it
        until the application resolves it (`complete_unknown`, where the store has it).

        Tried once here; if the store fails, the keeper retries in the background and the note says
        PENDING. Never raises for a store failure.
        """
        note = self._attempt(hold, record, timeout_s, unknown_outcome=unknown_outcome)
        if note is not None:
            if hold.still_running:
                with self._lock:
                    hold.still_running = False
            return note
        with self._lock:
            # A late handler's key stays unresolvable (still_running) until its outcome was tried in the
            # store, and then it is SETTLING: resolve_unknown cannot free a key whose effect just happened.
            hold.still_running = False
            if self._holds.get(hold.address) is hold:
                hold.state = HoldState.SETTLING
                hold.pending = record
                hold.pending_unknown = unknown_outcome
                hold.attempts_left = RECEIPT_RETRY_ATTEMPTS
                hold.next_attempt = time.monotonic() + RECEIPT_RETRY_PAUSE_S
                self._wake.notify_all()
        return ReceiptNote.PENDING

    def let_go(self, hold: Optional[Hold]) -> None:
        """Stop holding a key without settling it (the process is stopping): its lease will lapse."""
        if hold is not None:
            with self._lock:
                self._drop_locked(hold)

    def give_up(self, hold: Optional[Hold], why: str) -> None:
        """Stop working on a key whose outcome this process cannot store (see `_give_up_locked`)."""
        if hold is not None:
            with self._lock:
                self._give_up_locked(hold, why)

    def owner_of_unknown(self, key: ReceiptKey) -> Optional[Hold]:
        """The hold of ``key`` if this process gave up on it (its owner token still holds the store's row).
        Its ``still_running`` says that its handler has not returned yet (the late window ended first)."""
        with self._lock:
            hold = self._holds.get(_address(key))
            return hold if hold is not None and hold.state is HoldState.UNKNOWN else None

    def wait_settled(self, timeout_s: Optional[float]) -> bool:
        """Wait until no held key is still running, late or settling; False if `timeout_s` ran out."""
        with self._lock:
            return self._wait_until(lambda: all(hold.state is HoldState.UNKNOWN for hold in self._holds.values()),
                                    timeout_s)

    def wait_stored(self, hold: Hold, timeout_s: float) -> bool:
        """Wait until `hold`'s record is stored (True), or is not going to be by this process (False):
        released, refused, given up as unknown, let go, still pending when the holder was closed (the
        keeper no longer retries it), or `timeout_s` ran out. Woken when the hold settles, not polled: a
        record the store took at once answers at once. False never says "not stored" for certain (an
        answer lost may have landed): only that nobody here can say it was."""
        with self._lock:
            return self._wait_until(lambda: hold.dropped or hold.state is HoldState.UNKNOWN or self._closed,
                                    timeout_s) and hold.stored

    def _wait_until(self, settled: Callable[[], bool], timeout_s: Optional[float]) -> bool:
        """Under the lock: wait, woken as holds settle, until `settled()`; False if `timeout_s` ran out first."""
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        while not settled():
            left = None if give_up is None else give_up - time.monotonic()
            if left is not None and left <= 0:
                return False
            self._settled_waiters += 1
            try:
                self._settled.wait(left)
            finally:
                self._settled_waiters -= 1
        return True

    def close(self, *, store_closed: bool) -> None:
        """Stop the keeper. `store_closed`: the store closes too, so later outcomes have nowhere to go
        (a late handler finishing after this is not worth a warning).

        A handler that still runs keeps its lease renewed after this (see `_runs`): the keeper goes on,
        in the background, until the last such handler has returned; the store must stay open that long.
        """
        with self._lock:
            self._closed = True
            self._store_closed = store_closed
            self._wake.notify_all()
            self._settled.notify_all()  # `wait_stored`: a record still pending is retried no more
            if not store_closed and any(_runs(hold) for hold in self._holds.values()):
                return  # the keeper ends by itself once they are done (never waited for here)
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    # -- storing an outcome ------------------------------------------------------------------

    def _attempt(self, hold: Hold, record: Optional[Mapping[str, Any]], timeout_s: float, *,
                 retry: bool = False, unknown_outcome: bool = False) -> Optional[ReceiptNote]:
        """One try at storing the outcome; None when the store failed (its answer is unknown: the change
        may have landed, so a retry must be one the store can recognise, see `complete`)."""
        if self._store_closed:
            with self._lock:
                self._drop_locked(hold)
            return ReceiptNote.PENDING
        try:
            if record is None:
                done = self._store.release(hold.key, hold.owner, timeout_s=timeout_s)
            elif unknown_outcome and self._complete_unknown is not None:
                done = self._complete_unknown(hold.key, hold.owner, record, timeout_s=timeout_s)
            else:
                done = self._store.complete(hold.key, hold.owner, record, timeout_s=timeout_s)
        except _PROCESS_EXITS:
            raise
        except BaseException as exception:  # noqa: BLE001 - a store failure must not reach the caller
            logger.warning("receipt store failed to %s a key of tool %r: %s",
                           "release" if record is None else "complete", hold.tool, type(exception).__name__)
            return None
        with self._lock:
            if done is True and record is not None:
                hold.stored = True
            self._drop_locked(hold)
        if done is not True:
            if retry and record is None:  # a release has nothing to recognise itself by once it landed
                logger.info("the key of a call of tool %r was no longer held by it when its release was retried: "
                            "an earlier attempt whose answer was lost freed it, or it was taken over or resolved",
                            hold.tool)
            else:  # a completion that landed is recognised by its owner (True): this one never did
                logger.warning("receipt store refused the outcome of a call of tool %r: its key was taken over or "
                               "resolved while it ran (fenced by the owner token); the store keeps what came after",
                               hold.tool)
            return ReceiptNote.REFUSED
        return ReceiptNote.RELEASED if record is None else ReceiptNote.STORED

    def _give_up_locked(self, hold: Hold, why: str) -> None:
        """The key's outcome cannot be known here: answer unknown until the store's lease has lapsed
        (from then on the store answers unknown itself). A read has nothing to protect: just drop it."""
        if self._holds.get(hold.address) is not hold:
            return
        if not hold.writes:
            self._drop_locked(hold)
            return
        hold.state = HoldState.UNKNOWN
        hold.pending = None
        hold.unknown_until = time.monotonic() + self._lease_s
        self._wake.notify_all()
        self._settled.notify_all()
        if hold.task:
            logger.warning("a task of tool %r %s; it reads %s", hold.tool, why,
                           "working until its handler returns" if hold.still_running else
                           "failed (task_interrupted, may have run) once its lease lapses")
        elif hold.still_running:
            logger.warning("a call of tool %r %s; its idempotency key answers outcome_unknown here and stays in "
                           "progress for other processes until the handler returns", hold.tool, why)
        else:
            logger.warning("a call of tool %r %s; its idempotency key is unknown until the application resolves it",
                           hold.tool, why)

    def _drop_locked(self, hold: Hold) -> None:
        if self._holds.get(hold.address) is hold:
            del self._holds[hold.address]
        hold.dropped = True
        if self._settled_waiters:  # notify_all is Python code; every write drops a hold
            self._settled.notify_all()

    # -- the keeper thread -------------------------------------------------------------------

    def _start_keeper_locked(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._keep, name="agent-lab-lease-keeper", daemon=True)
            self._thread.start()

    def _keep(self) -> None:
        """Renew leases, end late windows, retry failed outcomes, expire unknown holds; until closed,
        or until no key has been held for `KEEPER_IDLE_S` (the next `hold` starts another keeper)."""
        idle_since: Optional[float] = None
        while True:
            with self._lock:
                if self._closed and not self._keeps_running_holds_locked():
                    return
                now = time.monotonic()
                if self._holds:  # (a settled key does not wake the keeper: it looks again within KEEPER_IDLE_S)
                    idle_since = None
                    wait_s = min(self._next_wakeup_locked() - now, self._renew_every_s, KEEPER_IDLE_S)
                else:
                    if idle_since is None:
                        idle_since = now
                    elif now - idle_since >= KEEPER_IDLE_S:
                        if self._thread is threading.current_thread():
                            self._thread = None  # (under the lock: `hold` sees it and starts another)
                        return
                    wait_s = min(idle_since + KEEPER_IDLE_S - now, self._renew_every_s)
                if wait_s > 0:
                    self._wake.wait(min(wait_s, threading.TIMEOUT_MAX))
                if self._closed and not self._keeps_running_holds_locked():
                    return
                now = time.monotonic()
                holds = list(self._holds.values())
                if self._closed:  # only the leases of handlers that still run are kept
                    holds = [hold for hold in holds if _runs(hold)]
            for hold in holds:
                try:
                    self._tend(hold, now)
                except BaseException as exception:  # noqa: BLE001 - the keeper must outlive any one key
                    # Even SystemExit or KeyboardInterrupt: raised in this thread (by a store call) they
                    # would only end the keeper, never the process, and every lease and late window with it.
                    logger.warning("lease keeper failed on a key of tool %r: %s", hold.tool, type(exception).__name__)

    def _keeps_running_holds_locked(self) -> bool:
        """After `close`: whether a handler still runs under a held key (its lease must stay renewed)."""
        return not self._store_closed and any(_runs(hold) for hold in self._holds.values())

    def _next_wakeup_locked(self) -> float:
        wakeup = math.inf
        for hold in self._holds.values():
            if hold.state is HoldState.UNKNOWN:
                if hold.still_running:  # kept, and renewed, until its handler returns
                    wakeup = min(wakeup, hold.renew_at)
                else:
                    wakeup = min(wakeup, hold.unknown_until)
                continue
            wakeup = min(wakeup, hold.renew_at)
            if hold.state is HoldState.LATE:
                wakeup = min(wakeup, hold.late_until)
            elif hold.state is HoldState.SETTLING:
                wakeup = min(wakeup, hold.next_attempt)
        return wakeup

    def _tend(self, hold: Hold, now: float) -> None:
        state = hold.state
        if state is HoldState.UNKNOWN:
            if hold.still_running:  # its handler has not returned: other processes must see it running
                if now >= hold.renew_at:
                    hold.renew_at = now + self._renew_every_s
                    self._renew(hold)
            elif now >= hold.unknown_until:
                with self._lock:
                    self._drop_locked(hold)
            return
        if state is HoldState.LATE and now >= hold.late_until:
            with self._lock:
                if hold.state is HoldState.LATE:
                    # Kept (answering unknown here) and renewed until the handler returns: resolving the
                    # key as "did not happen" meanwhile, here or on another host, would run it twice.
                    hold.still_running = True
                    self._give_up_locked(hold, "is still running after its late-completion window")
            if hold.still_running and now >= hold.renew_at:
                hold.renew_at = now + self._renew_every_s
                self._renew(hold)
            return
        if state is HoldState.SETTLING and now >= hold.next_attempt:
            self._retry(hold)
            if hold.state is not HoldState.SETTLING:
                return
        if now >= hold.renew_at:
            hold.renew_at = now + self._renew_every_s
            self._renew(hold)

    def _retry(self, hold: Hold) -> None:
        if self._attempt(hold, hold.pending, RECEIPT_RETRY_TIMEOUT_S, retry=True,
                         unknown_outcome=hold.pending_unknown) is not None:
            return
        with self._lock:
            hold.attempts_left -= 1
            if hold.attempts_left <= 0:
                self._give_up_locked(hold, f"could not confirm that its outcome was stored after "
                                           f"{RECEIPT_RETRY_ATTEMPTS + 1} attempts")
            else:
                hold.next_attempt = time.monotonic() + RECEIPT_RETRY_PAUSE_S

    def _renew(self, hold: Hold) -> None:
        if hold.keeps is not None:
            self._keep_receipt(hold, hold.keeps)
        try:
            kept = self._store.renew(hold.key, hold.owner, timeout_s=RECEIPT_RETRY_TIMEOUT_S)
        except _PROCESS_EXITS:
            raise
        except BaseException as exception:  # noqa: BLE001 - the next renewal may succeed
            logger.warning("receipt store failed to renew a lease of tool %r: %s", hold.tool, type(exception).__name__)
            return
        if kept is not True and not hold.fenced and not hold.dropped:
            hold.fenced = True
            logger.warning("the lease of a running call of tool %r was taken over or resolved elsewhere; "
                           "its outcome will not be stored (fenced by the owner token)", hold.tool)

    def _keep_receipt(self, hold: Hold, keeps: Tuple[ReceiptKey, str]) -> None:
        """Keep the receipt a hold keeps for the store's ttl from now. False (not kept) is no alarm: its
        completion may still be pending, or the key was resolved; the next renewal asks again."""
        keep = getattr(self._store, "keep", None)
        if not callable(keep):  # a store without `keep` is refused where it matters (check_store_covers)
            return
        try:
            keep(keeps[0], keeps[1], timeout_s=RECEIPT_RETRY_TIMEOUT_S)
        except _PROCESS_EXITS:
            raise
        except BaseException as exception:  # noqa: BLE001 - the next renewal may succeed
            logger.warning("receipt store failed to keep a receipt of tool %r: %s", hold.tool, type(exception).__name__)

    def holds(self) -> List[Hold]:
        """A snapshot of the held keys (for tests and diagnostics)."""
        with self._lock:
            return list(self._holds.values())


def _runs(hold: Hold) -> bool:
    """Whether the hold's handler may still be running (its lease must then be kept alive)."""
    return hold.state is HoldState.RUNNING or hold.state is HoldState.LATE or hold.still_running
