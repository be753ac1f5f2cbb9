"""The clocks of one replay: still, so reports are reproducible, until a case's step moves them.

A replay pins the wall clock at `LAB_NOW` (the registry reads it for approvals and cursors, the receipt
store for leases and receipt lifetimes) and gives the store a monotonic clock pinned at `LAB_MONOTONIC`.
Two marker steps move them, as the real clocks move:

- time passing (`{"do": "lapse_lease"}` lets a store's lease run out) moves both by the same amount;
- a wall-clock step (`{"do": "clock_step", "seconds": N}`: an operator, NTP or a resumed virtual machine
  setting the clock) moves the wall clock alone, forwards or backwards; the monotonic clock never steps.

Every store of the replay (also one a crash child opens, given `wall()` and `monotonic()` as they read
when it starts) reads these, so what a step does is what the stores' own step guard makes of it.
"""

from __future__ import annotations

import math
import threading

__all__ = ["LAB_MONOTONIC", "LAB_NOW", "LabClocks"]

LAB_NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the wall clock of every replay, until a step moves it
LAB_MONOTONIC = 1_000_000.0  # the stores' monotonic clock, likewise
MAX_MOVE_S = 10 * 366 * 86400.0  # one move of ten years at most: far past any lease or receipt lifetime


class LabClocks:
    """A wall clock and a monotonic clock that stand still unless moved (thread-safe to read)."""

    def __init__(self, *, wall: float = LAB_NOW, monotonic: float = LAB_MONOTONIC) -> None:
        self._wall = float(wall)
        self._monotonic = float(monotonic)
        self._lock = threading.Lock()

    def wall(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._monotonic

    def time_passes(self, seconds: float) -> None:
        """`seconds` pass: both clocks move on by them."""
        seconds = _checked(seconds)
        if seconds < 0:
            raise ValueError("time only passes forwards")
        with self._lock:
            self._wall += seconds
            self._monotonic += seconds

    def step_wall_clock(self, seconds: float) -> None:
        """The wall clock is set `seconds` later (earlier, when negative); no time passes."""
        seconds = _checked(seconds)
        with self._lock:
            self._wall += seconds


def _checked(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or abs(seconds) > MAX_MOVE_S:
        raise ValueError(f"a clock moves by a finite number of seconds, at most {MAX_MOVE_S:g}")
    return float(seconds)
