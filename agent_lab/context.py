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

_CANCEL_EVENT_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class CallContext:
    """What a handler may know about the call it serves.

    `deadline` is an absolute `time.monotonic()` value (None: no deadline). `cursors` issues and reads
    page cursors bound to this tool and the actor's tenant (see `agent_lab.cursor`). A sync handler that can stop
    early should check `remaining()` or `cancelled()`; the caller stops waiting at the deadline either way.
    """

    call_id: str
    tool: str
    actor: Actor
    deadline: float | None = None
    approval: Approval | None = None
    cursors: CursorCodec | None = None
    # Made on first use: most calls finish without anyone waiting on it, and an Event costs about
    # as much to build as a tenth of a whole invoke.
    _cancel_event: threading.Event | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def _fast(cls, call_id: str, tool: str, actor: Actor, deadline: float | None, approval: Approval | None,
              cursors: CursorCodec | None) -> CallContext:
        """`CallContext(...)` for the registry, which makes one for every handler that takes it: the same
        object, built without the frozen dataclass's one `object.__setattr__` per field."""
        ctx = object.__new__(cls)
        ctx.__dict__.update(call_id=call_id, tool=tool, actor=actor, deadline=deadline, approval=approval,
                            cursors=cursors, _cancel_event=None)
        return ctx

    @property
    def cancel_event(self) -> threading.Event:
        """Set once the caller has stopped waiting; a handler may `wait()` on it instead of sleeping."""
        event = self._cancel_event
        if event is None:
            with _CANCEL_EVENT_LOCK:  # the handler's thread and the caller's may both ask first
                event = self._cancel_event
                if event is None:
                    event = threading.Event()
                    object.__setattr__(self, "_cancel_event", event)
        return event

    def remaining(self) -> float:
        """Seconds left before the deadline (infinity when there is none, never negative)."""
        if self.deadline is None:
            return math.inf
        return max(0.0, self.deadline - time.monotonic())

    def cancelled(self) -> bool:
        """True once the caller has stopped waiting (deadline passed or the call was cancelled)."""
        event = self._cancel_event
        return (event is not None and event.is_set()) or self.remaining() == 0.0
