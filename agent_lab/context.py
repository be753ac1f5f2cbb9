"""The per-call context a handler may accept as its second argument."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .cursor import CursorCodec
    from .policy import Actor, Approval

__all__ = ["CallContext"]


@dataclass(frozen=True, kw_only=True)
class CallContext:
    """What a handler may know about the call it serves.

    `deadline` is an absolute `time.monotonic()` value (None: no deadline). A sync handler that can stop
    early should check `remaining()` or `cancelled()`; the caller stops waiting at the deadline either way.
    """

    call_id: str
    tool: str
    actor: Actor
    deadline: float | None = None
    approval: Approval | None = None
    cursors: CursorCodec | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def remaining(self) -> float:
        """Seconds left before the deadline (infinity when there is none, never negative)."""
        if self.deadline is None:
            return math.inf
        return max(0.0, self.deadline - time.monotonic())

    def cancelled(self) -> bool:
        """True once the caller has stopped waiting (deadline passed or the call was cancelled)."""
        return self.cancel_event.is_set() or self.remaining() == 0.0
