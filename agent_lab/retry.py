"""Whether a failed call should be retried automatically, and a runner that does it.

`ToolError.retryable` is information ("the same call may succeed later"), not a switch: whether a
retry is *safe* depends on the tool's effect, on whether the first attempt may have taken effect,
on the idempotency key that would make a repeat harmless, on the tool's retry policy and on the
attempt budget. `should_retry` puts those together in one place; `Retrier` acts on it: it repeats
exactly the call `should_retry` allows, the same arguments (so the same idempotency key) each time,
waits as its backoff and the error's `retry_after_s` say, stops at one deadline for the whole
sequence, and tells the audit which attempt each invoke was.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from .calls import ToolCall, ToolResult
from .errors import Category, Outcome, ToolError
from .execution import plain_json_copy
from .policy import Actor, Approval
from .steps.state import MAX_ARGUMENT_COPY_DEPTH
from .spec import RetryPolicy, ToolSpec

__all__ = ["RETRY_AFTER_DETAIL", "Backoff", "Retrier", "invoke_with_retries", "should_retry"]

RETRY_AFTER_DETAIL = "retry_after_s"
"""The `ToolError.details` entry in which a tool says how long to wait before the same call may succeed
(seconds, a finite number >= 0), as an HTTP server says `Retry-After`: a handler raises
`ToolFailure("unavailable", details={"retry_after_s": 2})`."""


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


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """How long to wait before attempt n+1: `first_s * factor**(n-1)`, at most `max_s`, less a random
    part of up to `jitter` of it (0: exact; 0.5: between half and all of it), so that many callers
    that failed together do not all come back at the same moment. Never longer than the formula says."""

    first_s: float = 0.2
    factor: float = 2.0
    max_s: float = 5.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        for name in ("first_s", "factor", "max_s", "jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"Backoff.{name} must be a finite number >= 0")
        if self.jitter > 1:
            raise ValueError("Backoff.jitter must be between 0 and 1 (a fraction of the delay)")

    def delay(self, attempt: int, draw: float) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based); `draw` is a random number in [0, 1)."""
        try:
            base = min(self.max_s, self.first_s * self.factor ** (attempt - 1))
        except OverflowError:
            base = self.max_s
        return base * (1.0 - self.jitter * draw)


class Retrier:
    """Runs one proposed call through `Registry.invoke` until it succeeds or may not be repeated.

    Each attempt is the same `ToolCall` (same arguments, so the same idempotency key: a write that
    already ran is replayed by the registry, never run again) with `attempt=n` in its audit record; a
    call without a call id gets one for the whole sequence, so its attempts share it in the audit. The
    arguments are copied once, before the first attempt (the registry's own copy walk,
    `plain_json_copy`), so a caller that changes its dict between attempts changes neither the call
    nor its key.
    After a failed attempt, `should_retry` decides from the result, the tool's spec and the budget;
    then the runner waits the longer of its backoff and the error's `retry_after_s`. It stops, and
    returns the last result as it is, when:

    * `should_retry` says no: a success, a replay, a refusal a retry cannot fix, and above all a write
      whose outcome is unknown without an idempotency key and a transient retry policy (it may have
      taken effect; `outcome_unknown` from a lapsed lease is never retried: look it up first);
    * `attempts` invokes were made;
    * the wait would end past the sequence's deadline (`timeout_s` from the first attempt, or the
      `deadline` passed to `invoke`, whichever is earlier), or a tool asks for a wait longer than
      `max_retry_after_s`. Every attempt is given what is left of that deadline as its own.

    It never raises for anything a call, a handler, the clock or `sleep` does: whatever happens, the
    answer is a `ToolResult` (KeyboardInterrupt and SystemExit pass, as in `invoke`). `clock` (a
    monotonic reading in seconds; `deadline` is one of its readings), `sleep`, `async_sleep` and
    `draw` (a random number in [0, 1), for jitter) are injectable for tests.
    """

    def __init__(
        self,
        *,
        attempts: int = 3,
        backoff: Backoff = Backoff(),
        timeout_s: Optional[float] = None,
        max_retry_after_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
        async_sleep: Optional[Callable[[float], Awaitable[Any]]] = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError("attempts must be an int of at least 1 (the first call counts)")
        if not isinstance(backoff, Backoff):
            raise TypeError("backoff must be a Backoff")
        for name, value in (("timeout_s", timeout_s), ("max_retry_after_s", max_retry_after_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise ValueError(f"{name} must be a finite number of seconds >= 0")
        self.attempts = attempts
        self.backoff = backoff
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self._clock = clock
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._draw = draw

    def invoke(self, registry: Any, call: ToolCall, *, actor: Actor, approval: Optional[Approval] = None,
               deadline: Optional[float] = None) -> ToolResult:
        """Run `call` with retries (see the class). `deadline`: a reading of `clock` the whole sequence ends by."""
        sequence_deadline = self._sequence_deadline(deadline)
        call = _own_call(call)
        attempt = 1
        while True:
            result = registry.invoke(call, actor=actor, approval=approval,
                                     deadline=self._attempt_deadline(sequence_deadline), attempt=attempt)
            wait_s = self._wait_before_next(registry, call, result, attempt, sequence_deadline)
            if wait_s is None or not self._slept(wait_s):
                return result
            attempt += 1

    async def ainvoke(self, registry: Any, call: ToolCall, *, actor: Actor, approval: Optional[Approval] = None,
                      deadline: Optional[float] = None) -> ToolResult:
        """`invoke` for asyncio callers: `Registry.ainvoke` for each attempt, `asyncio.sleep` between them
        (or `async_sleep`). A cancellation of the caller propagates, as from `ainvoke`."""
        import asyncio  # here: a process that never awaits a tool never pays for it

        sleep = self._async_sleep if self._async_sleep is not None else asyncio.sleep
        sequence_deadline = self._sequence_deadline(deadline)
        call = _own_call(call)
        attempt = 1
        while True:
            result = await registry.ainvoke(call, actor=actor, approval=approval,
                                            deadline=self._attempt_deadline(sequence_deadline), attempt=attempt)
            wait_s = self._wait_before_next(registry, call, result, attempt, sequence_deadline)
            if wait_s is None:
                return result
            try:
                await sleep(wait_s)
            except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
                raise
            except BaseException:  # noqa: BLE001 - a sleep that fails ends the sequence, never the caller
                return result
            attempt += 1

    # -- the decisions -------------------------------------------------------------------------------

    def _now(self) -> Optional[float]:
        """The clock's reading, or None when it gives no finite number (then nothing is waited for)."""
        try:
            now = self._clock()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001
            return None
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            return None
        return float(now)

    def _sequence_deadline(self, deadline: Any) -> Optional[float]:
        candidates = []
        if deadline is not None:
            if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not math.isfinite(deadline):
                return -math.inf  # a deadline that is not a number: fail closed (the registry refuses the call)
            candidates.append(float(deadline))
        if self.timeout_s is not None:
            now = self._now()
            candidates.append(-math.inf if now is None else now + self.timeout_s)
        return min(candidates) if candidates else None

    def _attempt_deadline(self, sequence_deadline: Optional[float]) -> Optional[float]:
        """The sequence's deadline as `Registry.invoke` reads one (an absolute `time.monotonic()` time),
        whatever clock the runner keeps: what is left of it, from now."""
        if sequence_deadline is None:
            return None
        now = self._now()
        left = 0.0 if now is None else max(0.0, sequence_deadline - now)
        return time.monotonic() + left

    def _wait_before_next(self, registry: Any, call: ToolCall, result: ToolResult, attempt: int,
                          sequence_deadline: Optional[float]) -> Optional[float]:
        """Seconds to wait before attempt `attempt + 1`, or None to stop with `result`."""
        try:
            spec = registry.spec(call.name)
            if not isinstance(spec, ToolSpec) or not should_retry(result, spec, attempt, self.attempts):
                return None
            wait_s = self.backoff.delay(attempt, _unit_draw(self._draw))
            asked_s = retry_after(result.error)
            if asked_s is not None:
                if asked_s > self.max_retry_after_s:
                    return None
                wait_s = max(wait_s, asked_s)
            if sequence_deadline is not None:
                now = self._now()
                if now is None or now + wait_s >= sequence_deadline:
                    return None
            return wait_s
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001 - no spec (a call the registry refused), a broken hook: stop
            return None

    def _slept(self, seconds: float) -> bool:
        try:
            self._sleep(seconds)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001 - a sleep that fails ends the sequence, never the caller
            return False
        return True


def invoke_with_retries(registry: Any, call: ToolCall, *, actor: Actor, approval: Optional[Approval] = None,
                        attempts: int = 3, backoff: Backoff = Backoff(), timeout_s: Optional[float] = None) -> ToolResult:
    """`Retrier(attempts=..., backoff=..., timeout_s=...).invoke(registry, call, actor=..., approval=...)`."""
    return Retrier(attempts=attempts, backoff=backoff, timeout_s=timeout_s).invoke(
        registry, call, actor=actor, approval=approval)


def _own_call(call: ToolCall) -> ToolCall:
    """`call` as every attempt sends it: its arguments copied once, as the registry's schema step copies
    them (`plain_json_copy`: plain dicts, lists, str, int and float; a value that is not JSON is kept as
    it is, for the schema step to refuse, and so is anything nested deeper than the step accepts), and
    one call id for all its attempts when it came without one. A copy that fails (an object whose own
    code raises when it is looked at) leaves the arguments as they are: the registry answers them."""
    if not isinstance(call, ToolCall):
        return call  # the registry refuses it, once
    arguments = call.arguments
    try:
        arguments = plain_json_copy(arguments, MAX_ARGUMENT_COPY_DEPTH)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - the caller's object raised; invoke refuses it without raising
        pass
    return ToolCall(call.name, arguments, call_id=call.call_id or "retry_" + secrets.token_hex(8))


def retry_after(error: Optional[ToolError]) -> Optional[float]:
    """The wait a tool asked for in `error.details["retry_after_s"]`, if it is a finite number >= 0."""
    if error is None:
        return None
    value = error.details.get(RETRY_AFTER_DETAIL)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _unit_draw(draw: Callable[[], float]) -> float:
    """`draw()` clamped to [0, 1]; anything else counts as 0 (no jitter)."""
    value = draw()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return 0.0
    return float(value)
