"""Step 4, deadline: the call's one deadline, and the check that nothing starts after it.

The deadline is fixed once, when the route step knows the tool: the earlier of the caller's deadline
and the start of invoke plus the tool's `timeout_ms`. Every pre-run step counts against it, every store
call waits at most until it, and it is checked again after the key is reserved and right before the
handler starts: no handler (and no application hook) starts late.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Optional

from ..execution import is_deadline, plain_deadline

if TYPE_CHECKING:  # pragma: no cover
    from ..calls import ToolResult
    from ..spec import ToolSpec
    from .state import CallState

__all__ = ["call_deadline", "check_deadline", "passed"]

logger = logging.getLogger("agent_lab.registry")

_monotonic = time.monotonic


def call_deadline(state: CallState, spec: ToolSpec) -> float:
    """The call's one deadline: the caller's (when it is a valid one) or the tool's timeout counted
    from the start of invoke, whichever comes first. A caller deadline that is not a number is left
    for the deadline step to refuse."""
    tool_deadline = state.started_monotonic + spec.timeout_ms / 1000.0
    if state.deadline is None:
        return tool_deadline
    if not is_deadline(state.deadline):
        return tool_deadline
    state.deadline = plain_deadline(state.deadline)  # its plain value: a number subclass could compare as it likes
    return min(state.deadline, tool_deadline)


def check_deadline(state: CallState) -> Optional[ToolResult]:
    """The call's deadline (the caller's, or the tool's timeout counted from the start of invoke) has
    already passed: nothing runs."""
    state.step = "deadline"
    if state.deadline is not None and not is_deadline(state.deadline):
        logger.warning("invoke() got a deadline that is not a finite number; refusing the call")
        return state.refusal("internal_error", "The caller's deadline is not a number; the tool did not run.")
    deadline = state.call_deadline
    if deadline is not None and _monotonic() >= deadline:
        return state.refusal("deadline_exceeded")
    return None


def passed(deadline: Optional[float]) -> bool:
    """Whether an absolute `time.monotonic()` deadline has passed (None: it never does)."""
    return deadline is not None and _monotonic() >= deadline
