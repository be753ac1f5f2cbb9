"""Whether a failed call should be retried automatically.

`ToolError.retryable` is information ("the same call may succeed later"), not a switch: whether a
retry is *safe* depends on the tool's effect, on whether the first attempt may have taken effect,
on the idempotency key that would make a repeat harmless, on the tool's retry policy and on the
attempt budget. `should_retry` puts those together in one place.
"""

from __future__ import annotations

from .calls import ToolResult
from .errors import Category, Outcome, ToolError
from .spec import RetryPolicy, ToolSpec

__all__ = ["should_retry"]


def should_retry(result: ToolResult, spec: ToolSpec, attempt: int, budget: int) -> bool:
    """True when calling the same tool again with the same arguments is both useful and safe.

    `attempt` is the 1-based number of the attempt that produced `result`; `budget` is the total
    number of attempts allowed (so `budget=3` means at most two retries). The first matching row wins:

    ==  ==========================  =========================  ================================  =========  ======
    #   result                      tool                       error                             policy     retry?
    ==  ==========================  =========================  ================================  =========  ======
    1   any                         any                        any (attempt >= budget)           any        no
    2   succeeded (or ok)           any                        -                                 any        no
    3   no error attached           any                        -                                 any        no
    4   replayed                    any                        any                               any        no
    5   rejected / failed           any                        dependency (timeout, unavailable) never      no
    6   rejected / failed           any                        dependency, retryable             transient  yes
    7   rejected / failed           any                        other category, retryable         any        yes
    8   rejected / failed           any                        not retryable                     any        no
    9   unknown                     read                       as rows 5-8 (a read has no effect)
    10  unknown                     write/destructive, no key  any                               any        no
    11  unknown                     write/destructive, key     any                               never      no
    12  unknown                     write/destructive, key     dependency, retryable or not      transient  yes
    13  unknown                     write/destructive, key     other category, retryable         transient  yes
    14  unknown                     write/destructive, key     other category, not retryable     transient  no
    ==  ==========================  =========================  ================================  =========  ======

    Why: a known outcome (rows 5-8) means nothing happened, so only usefulness matters: the error's
    `retryable`, except that transient dependency errors (category dependency: `tool_timeout`,
    `unavailable`) are retried only for tools whose `retry_policy` is transient; that policy is the
    tool author's say on repeating calls to a slow or flaky dependency. An unknown outcome of a write
    may have taken effect, so it is retried only under an idempotency key and a transient policy
    (rows 10-14): the registry then replays the first result or answers `idempotency_in_progress`,
    never a second effect. A timed-out write is reported as not retryable (blind retries are unsafe),
    which the key overrides (row 12); an unexpected crash of unknown effect is not worth repeating
    (row 14). A replayed result (row 4) would only be replayed again.

    Raises ValueError for an attempt below 1 or a negative budget.
    """
    _check_counts(attempt, budget)
    if attempt >= budget:
        return False
    if result.ok or result.outcome is Outcome.SUCCEEDED or result.error is None:
        return False
    if result.replayed:
        return False
    if result.outcome is Outcome.UNKNOWN and spec.writes:
        return _unknown_write_may_repeat(result.error, spec)
    return _failure_worth_repeating(result.error, spec)


def _failure_worth_repeating(error: ToolError, spec: ToolSpec) -> bool:
    """Rows 5-9: nothing happened, so retry what may succeed now, dependencies only if the policy allows."""
    if error.category is Category.DEPENDENCY and spec.retry_policy is not RetryPolicy.TRANSIENT:
        return False
    return error.retryable


def _unknown_write_may_repeat(error: ToolError, spec: ToolSpec) -> bool:
    """Rows 10-14: the effect may have happened, so only an idempotency key makes a repeat safe."""
    if spec.idempotency_key is None or spec.retry_policy is not RetryPolicy.TRANSIENT:
        return False
    return error.category is Category.DEPENDENCY or error.retryable


def _check_counts(attempt: int, budget: int) -> None:
    for name, value, least in (("attempt", attempt, 1), ("budget", budget, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"should_retry: {name} must be an int of at least {least}")
