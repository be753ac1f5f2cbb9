"""The fault markers of a case: their names, what each does, and what a list of steps may ask of them.

Faults are marker steps (`{"do": ...}`), each done for real during the replay, never simulated in the
grader (see README "Fault cases"):

- `crash_after_effect`: the next call runs in a child process, SIGKILLed right after its handler ran,
  before its receipt is written (for a call without a key, before its answer leaves the process); the
  replay goes on with a fresh registry over the same receipts and world (`agent_lab.lab.crash`);
- `fail_receipt_writes` with `times`: the receipt store refuses the next N receipt writes (`complete`);
- `store_unavailable` with `times`: the receipt store refuses the next N reservations (`reserve`);
- `lapse_lease`: the worker holding the leases stalls past them: the clocks move on by the store's lease
  plus a second, and the next calls go to another worker (a fresh registry on the same receipts and
  world) while the stalled one's handlers go on;
- `clock_step` with `seconds`: the wall clock (the registry's and the store's) steps by N seconds,
  backwards when negative; no time passes;
- `deliver_twice`: the next call is delivered twice at once, from two threads released together;
- `redeliver` (with `approval`): the latest call is delivered again, unchanged (the same call id and
  arguments), as a retry or a resumed run does; with `approval`, it carries a person's approval of
  exactly that call (a run resumed after `approval_required`);
- `resolve` with `happened` (and `output`): a person settles the latest call's idempotency key
  (`Registry.resolve_unknown`): not a fault, the repair after one.

`crash_after_effect` and `deliver_twice` arm the delivery that comes next (a call, or a `redeliver`),
which must be the next step; `redeliver` is a delivery itself, so it counts as a call in `expected`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = [
    "ARMING_MARKERS",
    "CRASH",
    "FAULT_MARKERS",
    "REDELIVER",
    "RESOLVE",
    "TWICE",
    "deliveries",
    "delivers",
    "fault_markers",
    "signed_seconds",
]

CRASH = "crash_after_effect"
TWICE = "deliver_twice"
REDELIVER = "redeliver"
RESOLVE = "resolve"
FAIL_RECEIPT_WRITES = "fail_receipt_writes"
STORE_UNAVAILABLE = "store_unavailable"
LAPSE_LEASE = "lapse_lease"
CLOCK_STEP = "clock_step"
ARMING_MARKERS = (CRASH, TWICE)  # they apply to the next delivery
# Markers that put a fault in the case (a `resolve` is a person's repair, not a fault).
FAULT_MARKERS = (CRASH, FAIL_RECEIPT_WRITES, STORE_UNAVAILABLE, LAPSE_LEASE, CLOCK_STEP, TWICE, REDELIVER)


def delivers(step: Mapping[str, Any]) -> bool:
    """Whether the step delivers a call (a call step, or a `redeliver` marker)."""
    return "tool" in step or step.get("do") == REDELIVER


def deliveries(steps: Sequence[Mapping[str, Any]]) -> int:
    """How many results the steps produce: one per delivery, two for a delivery armed by `deliver_twice`."""
    count = 0
    twice = False
    for step in steps:
        if step.get("do") == TWICE:
            twice = True
        elif delivers(step):
            count += 2 if twice else 1
            twice = False
    return count


def fault_markers(steps: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The fault markers among `steps`, in order (with their parameter: `fail_receipt_writes×2`)."""
    found = []
    for step in steps:
        marker = step.get("do")
        if marker == CLOCK_STEP:
            found.append(f"{marker} {signed_seconds(step['seconds'])}")
        elif "times" in step:
            found.append(f"{marker} ×{step['times']}")
        elif marker in FAULT_MARKERS:
            found.append(marker)
    return tuple(found)


def signed_seconds(seconds: Any) -> str:
    """A clock step as reports show it: "+86401 s", "-0.5 s"."""
    value = float(seconds)
    text = f"{value:+g}" if value != int(value) else f"{int(value):+d}"
    return f"{text} s"
