"""What changed between two trajectories (a baseline trial's calls and this run's): calls kept, moved,
added, removed, and arguments changed, named by JSON Pointer.

A trajectory is the sequence of proposals, each its tool and its arguments; outcomes are not part of it
(the registry decides them, and the verdict compares them on their own). The value of a tool's
idempotency-key argument is not compared, only whether it is there: a model is asked for a fresh key
for every action, so two runs that do the same thing differ there by design.

The diff pairs calls in four passes: the longest common subsequence of identical calls stays in place;
an identical call left on both sides has moved (the order changed); a call of the same tool left on
both sides, paired in order, had its arguments changed (shown pointer by pointer); what is left was
added or removed. Positions are 1-based, as a person counts calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from ..fingerprint import canonical_json
from ..jsonvalue import pointer_join
from ..lab.pointer import MISSING

__all__ = ["IDEMPOTENCY_KEY_SHOWN", "Change", "call_key", "diff_calls", "printable", "shown_value", "trajectory_key"]

IDEMPOTENCY_KEY_SHOWN = "<idempotency key>"
UNPARSEABLE = "<unparseable arguments>"
MAX_SHOWN_CHARS = 80
MAX_LCS_CELLS = 250_000  # beyond this many pairs, calls are aligned by position instead
MAX_DIFF_DEPTH = 32  # deeper than this, two values are compared (and shown) whole


@dataclass(frozen=True)
class Change:
    """One difference. `change`: moved, added, removed or arguments (one per differing pointer)."""

    change: str
    tool: str
    call: int  # the position in this run's trajectory (for removed: in the baseline's)
    baseline_call: Optional[int] = None
    pointer: Optional[str] = None
    baseline: Any = None
    run: Any = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"change": self.change, "tool": self.tool, "call": self.call}
        if self.baseline_call is not None:
            found["baseline_call"] = self.baseline_call
        if self.change == "arguments":
            found.update(pointer=self.pointer, baseline=_json_or_absent(self.baseline), run=_json_or_absent(self.run))
        elif self.change in ("added", "moved"):
            found["arguments"] = self.run
        elif self.change == "removed":
            found["arguments"] = self.baseline
        return found

    def text(self) -> str:
        tool = printable(self.tool)
        if self.change == "moved":
            return f"{tool} {shown_value(self.run)} moved from call {self.baseline_call} to call {self.call}"
        if self.change == "added":
            return f"call {self.call} {tool} added: {shown_value(self.run)}"
        if self.change == "removed":
            return f"call {self.call} {tool} of the baseline removed: {shown_value(self.baseline)}"
        where = f"call {self.call} {tool}" + (f" (baseline call {self.baseline_call})"
                                                   if self.baseline_call != self.call else "")
        place = self.pointer or "the whole arguments"
        if self.run is MISSING:
            return f"{where}: {place} removed (was {shown_value(self.baseline)})"
        if self.baseline is MISSING:
            return f"{where}: {place} added ({shown_value(self.run)})"
        return f"{where}: {place} changed from {shown_value(self.baseline)} to {shown_value(self.run)}"


def printable(name: str) -> str:
    """A name a model wrote, fit for one line of text or XML: control characters and quotes escaped as JSON
    escapes them, cut to length."""
    text = json.dumps(str(name), ensure_ascii=False)[1:-1]
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def _stable_text(value: Any) -> str:
    try:
        return canonical_json(value)
    except (ValueError, RecursionError):  # nested deeper than canonical JSON goes: still one text per value
        return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _json_or_absent(value: Any) -> Any:
    return {"absent": True} if value is MISSING else {"value": value}


def shown_value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def comparable_arguments(call: Mapping[str, Any], idempotency_keys: Mapping[str, str]) -> Any:
    """A call's arguments as the diff compares them: its idempotency key's value hidden, unreadable ones named."""
    if call.get("unparseable"):
        return UNPARSEABLE
    arguments = call.get("arguments")
    pointer = idempotency_keys.get(str(call.get("tool")))
    if pointer is None or not isinstance(arguments, dict) or "/" in pointer[1:]:
        return arguments
    name = pointer[1:].replace("~1", "/").replace("~0", "~")
    return {**arguments, name: IDEMPOTENCY_KEY_SHOWN} if name in arguments else arguments


def call_key(call: Mapping[str, Any], idempotency_keys: Mapping[str, str]) -> str:
    return _stable_text({"tool": call.get("tool"), "arguments": comparable_arguments(call, idempotency_keys)})


def trajectory_key(calls: Sequence[Mapping[str, Any]], idempotency_keys: Mapping[str, str]) -> str:
    """One string per distinct trajectory (equal strings: the same calls, in the same order)."""
    return "\n".join(call_key(call, idempotency_keys) for call in calls)


def _common_subsequence(left: Sequence[str], right: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence (by dynamic programming; positions when too large)."""
    n, m = len(left), len(right)
    if n * m > MAX_LCS_CELLS:
        return [(i, i) for i in range(min(n, m)) if left[i] == right[i]]
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if left[i] == right[j] else max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if left[i] == right[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def diff_calls(baseline: Sequence[Mapping[str, Any]], run: Sequence[Mapping[str, Any]],
               idempotency_keys: Mapping[str, str]) -> list[Change]:
    """Every change from `baseline`'s calls to `run`'s, in this run's order (removed ones last)."""
    left = [call_key(call, idempotency_keys) for call in baseline]
    right = [call_key(call, idempotency_keys) for call in run]
    kept = _common_subsequence(left, right)
    free_left = [i for i in range(len(left)) if i not in {a for a, _ in kept}]
    free_right = [j for j in range(len(right)) if j not in {b for _, b in kept}]
    changes: list[tuple[int, Change]] = []

    def tool(call: Mapping[str, Any]) -> str:
        return str(call.get("tool") or "?")

    for j in list(free_right):  # identical calls at other places: moved
        i = next((i for i in free_left if left[i] == right[j]), None)
        if i is not None:
            free_left.remove(i)
            free_right.remove(j)
            changes.append((j, Change("moved", tool(run[j]), j + 1, baseline_call=i + 1,
                                      run=comparable_arguments(run[j], idempotency_keys))))
    for j in list(free_right):  # the same tool at a free place: its arguments changed
        i = next((i for i in free_left if tool(baseline[i]) == tool(run[j])), None)
        if i is not None:
            free_left.remove(i)
            free_right.remove(j)
            for pointer, before, after in _argument_changes(comparable_arguments(baseline[i], idempotency_keys),
                                                            comparable_arguments(run[j], idempotency_keys)):
                changes.append((j, Change("arguments", tool(run[j]), j + 1, baseline_call=i + 1, pointer=pointer,
                                          baseline=before, run=after)))
    for j in free_right:
        changes.append((j, Change("added", tool(run[j]), j + 1, run=comparable_arguments(run[j], idempotency_keys))))
    removed = [Change("removed", tool(baseline[i]), i + 1, baseline=comparable_arguments(baseline[i], idempotency_keys))
               for i in free_left]
    return [change for _, change in sorted(changes, key=lambda pair: pair[0])] + removed


def _argument_changes(before: Any, after: Any, pointer: str = "", depth: int = 0) -> list[tuple[str, Any, Any]]:
    """(pointer, before, after) for every place two JSON values differ; MISSING where a side has nothing."""
    if depth < MAX_DIFF_DEPTH and isinstance(before, dict) and isinstance(after, dict):
        found = []
        for name in sorted(set(before) | set(after)):
            found += _argument_changes(before.get(name, MISSING), after.get(name, MISSING), pointer_join(pointer, name),
                                       depth + 1)
        return found
    if depth < MAX_DIFF_DEPTH and isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        found = []
        for index, (a, b) in enumerate(zip(before, after)):
            found += _argument_changes(a, b, pointer_join(pointer, index), depth + 1)
        return found
    if before is MISSING or after is MISSING:
        return [] if before is after else [(pointer, before, after)]
    return [] if _stable_text(before) == _stable_text(after) else [(pointer, before, after)]

