"""A receipt store that fails on cue: the store faults of the lab's fault markers, for real.

`FaultInjectingStore` passes every call of the `ReceiptStore` protocol to the store it wraps (memory,
SQLite or PostgreSQL), except those its `FaultPlan` says to refuse: the next N reservations
(`{"do": "store_unavailable", "times": N}`) or the next N completions (`{"do": "fail_receipt_writes",
"times": N}`; `complete` or `complete_unknown`) raise `ReceiptStoreUnavailable`, exactly what a locked,
unreachable or failing store raises, and change nothing. The registry then does what it does with such
a store: it refuses the call before any effect (`receipt_store_unavailable`), or keeps the key and
retries the receipt in the background, and gives the key up as `unknown` (never free) when the retries
fail too.

In a crash child (`agent_lab.lab.crash`) the plan's `crash_on_complete` (a function to call first: the
child's last words to the replay) makes `complete` kill the process with SIGKILL before the receipt is
written: the handler has run, its effect has happened, and nothing the process meant to do after that
happens.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable, List, Mapping, Optional

from ..stores.protocol import Lapse, ReceiptKey, ReceiptStore, ReceiptStoreUnavailable, Reservation

__all__ = ["FaultInjectingStore", "FaultPlan", "die"]


class FaultPlan:
    """What the stores of one replay refuse next; shared by every store the replay opens (a restart's
    too), so a fault armed before a step lands on the call that step makes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refusals = {"reserve": 0, "complete": 0}
        self.refused = {"reserve": 0, "complete": 0}  # what was refused so far, for the reports
        self.crash_on_complete: Optional[Callable[[], None]] = None

    def refuse(self, operation: str, times: int) -> None:
        """Refuse the next `times` calls of `operation` ("reserve" or "complete")."""
        with self._lock:
            self._refusals[operation] += times

    def take(self, operation: str) -> bool:
        """Whether this call of `operation` is refused (counting it if so)."""
        with self._lock:
            if self._refusals[operation] <= 0:
                return False
            self._refusals[operation] -= 1
            self.refused[operation] += 1
            return True


class FaultInjectingStore:
    """`inner`, with the refusals `plan` asks for (see the module docstring)."""

    def __init__(self, inner: ReceiptStore, plan: FaultPlan) -> None:
        self.inner = inner
        self.plan = plan

    @property
    def lease_s(self) -> float:
        return self.inner.lease_s

    @property
    def fingerprint_key(self) -> bytes:
        return self.inner.fingerprint_key

    def reserve(self, key: ReceiptKey, fingerprint: str, *, lapse: Lapse = Lapse.UNKNOWN,
                timeout_s: Optional[float] = None) -> Reservation:
        if self.plan.take("reserve"):
            raise ReceiptStoreUnavailable("the receipt store is unavailable (a fault the case injected)")
        return self.inner.reserve(key, fingerprint, lapse=lapse, timeout_s=timeout_s)

    def renew(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        return self.inner.renew(key, owner, timeout_s=timeout_s)

    def complete(self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *,
                 timeout_s: Optional[float] = None) -> bool:
        if self.plan.crash_on_complete is not None:
            self.plan.crash_on_complete()
            die()
        if self.plan.take("complete"):
            raise ReceiptStoreUnavailable("the receipt could not be written (a fault the case injected)")
        return self.inner.complete(key, owner, record, timeout_s=timeout_s)

    def complete_unknown(self, key: ReceiptKey, owner: str, record: Mapping[str, Any], *,
                         timeout_s: Optional[float] = None) -> bool:
        """A completion like `complete` (the same faults); the inner store's own, or its `complete`
        when it has none (as the registry falls back)."""
        if self.plan.crash_on_complete is not None:
            self.plan.crash_on_complete()
            die()
        if self.plan.take("complete"):
            raise ReceiptStoreUnavailable("the receipt could not be written (a fault the case injected)")
        complete_unknown = getattr(self.inner, "complete_unknown", None)
        if callable(complete_unknown):
            return bool(complete_unknown(key, owner, record, timeout_s=timeout_s))
        return self.inner.complete(key, owner, record, timeout_s=timeout_s)

    def keep(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None,
             until_resolved: bool = False) -> bool:
        keep = getattr(self.inner, "keep", None)
        if not callable(keep):
            return False
        if until_resolved:
            return bool(keep(key, owner, timeout_s=timeout_s, until_resolved=True))
        return bool(keep(key, owner, timeout_s=timeout_s))

    def let_expire(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        let_expire = getattr(self.inner, "let_expire", None)
        return bool(let_expire(key, owner, timeout_s=timeout_s)) if callable(let_expire) else False

    def release(self, key: ReceiptKey, owner: str, *, timeout_s: Optional[float] = None) -> bool:
        return self.inner.release(key, owner, timeout_s=timeout_s)

    def resolve(self, key: ReceiptKey, fingerprint: str, *, record: Optional[Mapping[str, Any]],
                timeout_s: Optional[float] = None) -> bool:
        return self.inner.resolve(key, fingerprint, record=record, timeout_s=timeout_s)

    def lookup(self, key: ReceiptKey, *, timeout_s: Optional[float] = None) -> Optional[Reservation]:
        return self.inner.lookup(key, timeout_s=timeout_s)

    def unresolved(self, *, limit: int = 100, timeout_s: Optional[float] = None) -> List[ReceiptKey]:
        return self.inner.unresolved(limit=limit, timeout_s=timeout_s)

    def purge(self, *, limit: int = 1000, timeout_s: Optional[float] = None) -> int:
        return self.inner.purge(limit=limit, timeout_s=timeout_s)

    def consume_approval(self, tenant: str, approval_id: str, *, expires_at: float, now: Optional[float] = None,
                         timeout_s: Optional[float] = None) -> Optional[bool]:
        return self.inner.consume_approval(tenant, approval_id, expires_at=expires_at, now=now, timeout_s=timeout_s)

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"FaultInjectingStore({self.inner!r})"


def die() -> None:
    """SIGKILL this process: no handler, no `finally`, no flush runs (what a killed worker leaves)."""
    os.kill(os.getpid(), signal.SIGKILL)
    while True:  # pragma: no cover - the signal is delivered before kill() returns to a single-threaded
        time.sleep(1)  # process, and within moments to this one
