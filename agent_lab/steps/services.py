"""What every step of a call may use: one `Services` per registry.

The steps are plain functions of the call's state (`agent_lab.steps.state.CallState`); what they share
across calls (the receipt store and the keys this process holds in it, the fingerprint key, the worker
pool and the event-loop thread, the audit sink, the clock, the page-cursor codec) lives here, built
once by `Registry.__init__` and reached from a call as `state.services`. Nothing here decides anything
about a call.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any, Callable, Optional

from ..audit import AuditSink
from ..calls import CallIds
from ..execution import LoopThread, WorkerPool
from ..fingerprint import Blake2bFingerprinter, Fingerprinter, new_fingerprint_key
from ..leases import KeyHolder
from ..stores import InMemoryReceiptStore, ReceiptStore
from ..workers import DetachedJobs

__all__ = ["Services"]


class Services:
    """The registry's shared machinery, as the steps see it. Internal; one per registry."""

    def __init__(
        self,
        *,
        receipts: Optional[ReceiptStore],
        audit: Optional[AuditSink],
        max_workers: int,
        cursor_secret: Optional[bytes],
        cursor_lifetime_s: Optional[float],
        clock: Callable[[], float],
        run_inline: bool,
        late_completion_s: float,
        renew_every_s: Optional[float],
    ) -> None:
        self.owns_receipts = receipts is None
        self.receipts: ReceiptStore = InMemoryReceiptStore() if receipts is None else receipts
        # The store holds the key fingerprints are made with, so every registry on one durable store
        # fingerprints a call alike; a store that has none gives this registry a random key.
        stored_key = getattr(self.receipts, "fingerprint_key", None)
        self.fingerprint_key: bytes = stored_key if stored_key is not None else new_fingerprint_key()
        self.fingerprints: Fingerprinter = Blake2bFingerprinter(self.fingerprint_key)  # new calls' scheme
        self.late_completion_s = float(late_completion_s)
        self.holder = KeyHolder(self.receipts, late_completion_s=self.late_completion_s, renew_every_s=renew_every_s)
        self.audit = audit
        self.pool = WorkerPool(max_workers)
        self.loop_thread = LoopThread()
        self.clock = clock
        self.run_inline = bool(run_inline)
        self.call_ids = CallIds()
        self.closed = False
        self._cursor_secret = bytes(cursor_secret) if cursor_secret is not None else None
        self._cursor_lifetime_s = cursor_lifetime_s
        self._cursors: Any = None
        self._tasks: Any = None
        self._detached: dict[str, DetachedJobs] = {}
        self._lock = threading.Lock()

    def detached(self, tool: str) -> DetachedJobs:
        """The output checks of `tool`'s async handler run off its loop (`agent_lab.steps.run`), bounded per
        tool: checks stuck in one tool's code never hold up another tool's (see `DetachedJobs`)."""
        jobs = self._detached.get(tool)
        if jobs is None:
            with self._lock:
                jobs = self._detached.setdefault(tool, DetachedJobs())
        return jobs

    @property
    def has_tasks(self) -> bool:
        """Whether a task was ever accepted here (without making the runner)."""
        return self._tasks is not None

    @property
    def tasks(self) -> Any:
        """The `TaskRunner` (`agent_lab.steps.task`) of the calls accepted as tasks, made on first use."""
        if self._tasks is None:
            from .task import TaskRunner

            with self._lock:
                if self._tasks is None:
                    self._tasks = TaskRunner(self)
        return self._tasks

    @property
    def cursors(self) -> Any:
        """The `CursorCodec` handlers use (via `ctx.cursors`), made on first use."""
        if self._cursors is None:
            from ..cursor import DEFAULT_CURSOR_LIFETIME_S, CursorCodec

            lifetime_s = DEFAULT_CURSOR_LIFETIME_S if self._cursor_lifetime_s is None else self._cursor_lifetime_s
            codec = CursorCodec(self._cursor_secret if self._cursor_secret is not None else secrets.token_bytes(32),
                                lifetime_s=lifetime_s, clock=self.clock)
            with self._lock:
                if self._cursors is None:
                    self._cursors = codec
        return self._cursors
