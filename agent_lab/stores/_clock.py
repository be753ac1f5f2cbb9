"""How a store reads the time: its wall clock, guarded against steps by a monotonic clock.

Expiry times are absolute wall-clock seconds (they outlive the process, and other processes read them),
so a store needs a wall clock. But a wall clock can step: an operator sets it, a virtual machine resumes,
NTP corrects a large offset. A forward step longer than a receipt's ttl made every receipt look expired,
and a retry ran its effect again. So a store reads the time through a `StepGuard`:

* the *floor* is the wall clock as it read at an anchor, moved on by the monotonic clock since then
  (`anchor + monotonic()`); the monotonic clock never steps;
* an entry counts as expired only when the wall clock and the floor both say so (every check uses
  `min(wall, floor)`), and every expiry written counts from the later of the two (`max(wall, floor)`);
* the wall clock may drift from the anchor by less than `STEP_S` plus `SLEW` of the time passed since
  the band's base was set (the two clocks are read one after the other; NTP slews the wall clock by at
  most 500 ppm): that is taken as it comes, and the anchor follows it. Beyond that band it has stepped.
  The base is moved up to the anchor, whenever that narrows the band, by a reading at least `REBASE_S`
  after the last move: the drift allowed is counted from recent use, never from when the store opened
  (counted from the first reading, a store in use for 30 days took a 43-minute step as drift). A
  backward step is taken at once: it only makes entries live longer. A forward step is taken only
  after `hold_s` (the store's longest lifetime: its ttl or its lease) has passed on the monotonic
  clock, when everything written before the step has expired by the floor anyway; until then entries
  live longer by the step, never shorter. So an entry expires early by less than `STEP_S` plus `SLEW`
  of its lifetime and `REBASE_S`, whatever the wall clock does, and lives longer than its time by at
  most the step.

A store keeps its guard for as long as it is open. The SQLite store also keeps the guard's state in its
file for the current boot (the anchor, and a step it holds), so a store opened after a step (a restarted
process) still counts from before it, and takes the step at the same moment as the others (see
`boot_identity`); a store opened after a reboot, and the in-memory and PostgreSQL stores when they open,
take the wall clock as they find it.

Stores that share their entries hold a step as long as the longest lifetime any of them writes
(`hold_at_least`): the SQLite store keeps that hold in its file too, and looks at it again before it
takes a step, so a store with a one-hour ttl never sees a one-day receipt that another store on the same
file wrote before the step as expired.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Callable, Optional, Tuple

__all__ = ["REBASE_S", "STEP_S", "StepGuard", "boot_identity", "system_monotonic"]

STEP_S = 1.0
"""How far the wall clock may move against the monotonic clock (plus `SLEW`) without being a step."""

SLEW = 0.001
"""How fast (seconds a second) the wall clock may drift from the monotonic one without being a step."""

REBASE_S = 10.0
"""How often (monotonic seconds, at most) a reading moves the band's base up to the anchor. A store that
keeps the guard's state in its file saves it then, so a process that opens the file later counts from
there too: at most one more small write this often."""


def _choose_system_monotonic() -> Callable[[], float]:
    """CLOCK_BOOTTIME where there is one (Linux): the same for every process of a boot, and counting
    the time the machine slept (so a suspend is not a step); elsewhere `time.monotonic`."""
    boot_clock = getattr(time, "CLOCK_BOOTTIME", None)
    if boot_clock is not None:
        boot_time = functools.partial(time.clock_gettime, boot_clock)  # no Python frame: read on every call
        try:
            boot_time()
            return boot_time
        except OSError:
            pass
    return time.monotonic


system_monotonic: Callable[[], float] = _choose_system_monotonic()
"""The monotonic clock a store uses unless it is given one."""


def boot_identity() -> Optional[str]:
    """An id of the running boot, when `system_monotonic` counts from it for every process (Linux):
    then an anchor stored with it stays valid for every process until the next reboot. None elsewhere."""
    if system_monotonic is time.monotonic:
        return None
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            identity = file.read().strip()
    except (OSError, ValueError):
        return None
    return identity if identity and " " not in identity else None


class StepGuard:
    """The (check, stamp) times of a store: `check` to decide what has expired, `stamp` to count new
    expiries from. Not thread-safe: a store calls it under its own lock (or wraps it in one).

    `wall` and `monotonic` are read one after the other by `times`; `observe` takes a wall reading made
    elsewhere (the database's clock) with the monotonic time it was received at. `offset` is the anchor
    (wall minus monotonic); None until the first reading. A store whose monotonic clock every process
    shares (the boot's) can keep the guard's state (`saved`, `restore`) for processes that come later:
    after a step is taken, or one is held, `changed` is True until the store clears it."""

    __slots__ = ("_wall", "_monotonic", "_hold_s", "offset", "_base", "_base_at", "_pending_until",
                 "_pending_offset", "_pending_since", "changed")

    def __init__(self, wall: Callable[[], float], monotonic: Callable[[], float], hold_s: float) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._hold_s = hold_s
        self.offset: Optional[float] = None  # the anchor: where the floor is (floor = offset + monotonic)
        self._base = 0.0  # the anchor as last set by a step (or the first reading): the band is around it
        self._base_at = 0.0  # monotonic: when
        self._pending_until: Optional[float] = None  # monotonic: when a forward step will be taken
        self._pending_offset = 0.0  # the offset that step leads to
        self._pending_since: Optional[float] = None  # monotonic: when this guard first held it (None: unknown)
        self.changed = False

    @property
    def hold_s(self) -> float:
        """How long a forward step is held before it is taken (the longest lifetime of what was written)."""
        return self._hold_s

    def hold_at_least(self, hold_s: float) -> None:
        """Hold forward steps for at least `hold_s` from now on, and the step held now (if any) until
        `hold_s` after it was first held here (after now, for one restored from another process).

        Stores that share their entries (one SQLite file) must all hold a step as long as the longest
        lifetime any of them writes: a store with a one-hour ttl that took a step after an hour would
        see another store's one-day receipts, written before the step, as expired."""
        if hold_s > self._hold_s:
            self._hold_s = hold_s
        if self._pending_until is not None:
            if self._pending_since is None:
                self._pending_since = self._monotonic()
            until = self._pending_since + self._hold_s
            if until > self._pending_until:
                self._pending_until = until
                self.changed = True

    def step_due(self) -> bool:
        """Whether a held forward step would be taken at the next reading: the moment a store whose
        entries others share asks them whether one needs it held longer (`hold_at_least`)."""
        return self._pending_until is not None and self._monotonic() >= self._pending_until

    def saved(self) -> str:
        """The guard's state as text, for `restore` in another process of the same boot."""
        pending = "-" if self._pending_until is None else f"{self._pending_offset!r} {self._pending_until!r}"
        return f"{self.offset!r} {self._base!r} {self._base_at!r} {pending}"

    def restore(self, text: str) -> bool:
        """Take up a state `saved` by another process (False, changing nothing, for text it cannot read)."""
        parts = text.split()
        try:
            numbers = [float(part) for part in parts[:3] + parts[4:5] if part != "-"]
            if len(parts) == 4 and parts[3] == "-":
                pending = None
            elif len(parts) == 5:
                pending = (float(parts[3]), float(parts[4]))
            else:
                return False
        except ValueError:
            return False
        if not all(math.isfinite(number) for number in numbers):
            return False
        self.offset, self._base, self._base_at = float(parts[0]), float(parts[1]), float(parts[2])
        self._pending_offset, self._pending_until = pending if pending is not None else (0.0, None)
        self._pending_since = None  # held by another process since a moment this one does not know
        return True

    def times(self) -> Tuple[float, float]:
        """(check, stamp) now. The monotonic clock is read first: a pause between the two readings can
        only look like a forward step, which is never taken early."""
        monotonic_now = self._monotonic()
        wall_now = self._wall()
        anchor = self.offset
        if anchor is not None and self._pending_until is None:  # `observe`'s common case, written out
            offset = wall_now - monotonic_now  # (NaN fails both tests below and goes to `observe`)
            since_base = monotonic_now - self._base_at
            if anchor <= offset <= self._base + STEP_S + SLEW * since_base:
                self.offset = offset
                if since_base >= REBASE_S:
                    self._rebase(monotonic_now)
                return wall_now, wall_now
            if anchor - STEP_S <= offset < anchor:
                if since_base >= REBASE_S:
                    self._rebase(monotonic_now)
                return wall_now, anchor + monotonic_now
        return self.observe(wall_now, monotonic_now)

    def observe(self, wall_now: float, monotonic_now: float) -> Tuple[float, float]:
        """(check, stamp) for a wall-clock reading taken at `monotonic_now`."""
        if not (math.isfinite(wall_now) and math.isfinite(monotonic_now)):
            raise ValueError("the store's clocks must return finite numbers of seconds")
        offset = wall_now - monotonic_now
        anchor = self.offset
        if anchor is None or offset < anchor - STEP_S:  # a first reading, or a backward step: take it
            self._take(offset, monotonic_now)
        elif offset <= self._base + STEP_S + SLEW * (monotonic_now - self._base_at):  # within the band
            self._pending_until = self._pending_since = None
            if offset > anchor:
                self.offset = offset
            if monotonic_now - self._base_at >= REBASE_S:
                self._rebase(monotonic_now)
        elif self._pending_until is None or abs(offset - self._pending_offset) > STEP_S:
            self._pending_until = monotonic_now + self._hold_s  # a new forward step: hold it
            self._pending_offset = offset
            self._pending_since = monotonic_now
            self.changed = True
        elif monotonic_now >= self._pending_until:  # held long enough: all older entries have expired
            self._take(offset, monotonic_now)
        floor = offset if self.offset is None else self.offset  # (never None here: set above)
        floor += monotonic_now
        return min(wall_now, floor), max(wall_now, floor)

    def floor(self, monotonic_now: float) -> float:
        """The wall clock as the anchor says it reads at `monotonic_now` (-inf before any reading)."""
        return -math.inf if self.offset is None else self.offset + monotonic_now

    def _rebase(self, monotonic_now: float) -> None:
        """Move the band's base up to the anchor at `monotonic_now`, if that narrows the band from here on
        (it does unless the anchor moved up faster than `SLEW` since the base was set). The band then
        allows `STEP_S` plus `SLEW` of the time since now: what a store in use for a month allows is no
        more than what one opened a moment ago does. Marked changed, for a store that keeps the state."""
        anchor = self.offset
        if anchor is not None and anchor - SLEW * monotonic_now < self._base - SLEW * self._base_at:
            self._base = anchor
            self._base_at = monotonic_now
            self.changed = True

    def _take(self, offset: float, monotonic_now: float) -> None:
        self.changed = self.offset is not None
        self.offset = self._base = offset
        self._base_at = monotonic_now
        self._pending_until = None
        self._pending_since = None
