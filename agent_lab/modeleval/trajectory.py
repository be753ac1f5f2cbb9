"""Trajectory constraints of a task: the calls a trial proposed, held against calls the task lists.

Four ways to hold them, named from the listed calls' side:

- `strict`: exactly the listed calls, in the listed order (one proposal per listed call, nothing else);
- `unordered`: exactly the listed calls, in any order;
- `subset`: the listed calls are among the proposals (in any order; other calls may come between);
- `superset`: every proposal is one of the listed calls (some listed calls may never come).

A listed call is a `call_match` of the task language (tool, arguments by JSON Pointer, outcome, which
defaults to `any` here: a trajectory is about what the model proposed). Listed calls may overlap (two
that both accept `get_ticket` of any id), so "each listed call matches its own proposal" is a bipartite
matching, found by augmenting paths; a greedy pairing could miss a matching that exists.

Also here: `max_calls` (a tool proposed at most N times, refused proposals included) and
`absent_arguments` (JSON Pointers no proposal of a tool may hold).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from ..lab.pointer import MISSING, resolve_pointer
from .agent import CallRecord
from .matching import call_matches

__all__ = ["absent_argument_problems", "trajectory_problem"]

MAX_SHOWN_CALLS = 8


def _fits(match: Mapping[str, Any], call: CallRecord) -> bool:
    return not call.unparseable and call_matches({**match, "outcome": match.get("outcome", "any")}, call.as_call(),
                                                 call.outcome)


def _largest_matching(listed: Sequence[Mapping[str, Any]], calls: Sequence[CallRecord]) -> dict[int, int]:
    """A largest pairing of listed calls to proposals (listed index -> call index) where each pair fits."""
    fits = [[j for j, call in enumerate(calls) if _fits(match, call)] for match in listed]
    owner: dict[int, int] = {}  # call index -> listed index

    def claim(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or claim(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(listed)):
        claim(i, set())
    return {i: j for j, i in owner.items()}


def _names(calls: Sequence[Any]) -> str:
    names = [str(call.get("tool") if isinstance(call, Mapping) else (call.tool or "?")) for call in calls]
    shown = ", ".join(names[:MAX_SHOWN_CALLS]) + (f", ... ({len(names)} in all)" if len(names) > MAX_SHOWN_CALLS else "")
    return f"[{shown}]"


def trajectory_problem(trajectory: Mapping[str, Any], calls: Sequence[CallRecord]) -> Optional[str]:
    """None when the trial's proposals fit `trajectory`, else what does not, in one sentence."""
    listed = list(trajectory["calls"])
    mode = trajectory["match"]
    expected, got = _names(listed), _names(calls)
    if mode == "strict":
        for index, (match, call) in enumerate(zip(listed, calls), start=1):
            if not _fits(match, call):
                return f"call {index} is {call.tool or '?'}, not the listed call {index} ({match['tool']}): expected {expected}, got {got}"
        if len(calls) != len(listed):
            return f"{len(calls)} call(s) where {len(listed)} are listed: expected {expected}, got {got}"
        return None
    pairs = _largest_matching(listed, calls)
    missing = [match["tool"] for i, match in enumerate(listed) if i not in pairs]
    extra = [call.tool or "?" for j, call in enumerate(calls) if j not in pairs.values()]
    if mode in ("unordered", "subset") and missing:
        return f"no proposal for listed call(s) {', '.join(missing)}: expected {expected}, got {got}"
    if mode in ("unordered", "superset") and extra:
        return f"call(s) not listed: {', '.join(extra)}: expected only {expected}, got {got}"
    return None


def absent_argument_problems(absent: Mapping[str, Sequence[str]], calls: Sequence[CallRecord]) -> list[tuple[str, str, int]]:
    """(tool, pointer, proposals holding it) for every absent argument, in the task's order."""
    found = []
    for tool, pointers in absent.items():
        mine = [call for call in calls if call.tool == tool and not call.unparseable]
        for pointer in pointers:
            found.append((tool, pointer, sum(resolve_pointer(call.arguments, pointer) is not MISSING for call in mine)))
    return found
