"""Declared versus observed effects: which calls changed the world, and whether their tools said they would.

Hosts skip a confirmation because a tool says it only reads (MCP `readOnlyHint`), and retry freely
because it says a repeat changes nothing (`idempotentHint`, an idempotency key). The lab checks those
words against the world. During a replay it reads the world's effects (`Lab.effects`) before and after
every delivery, and once operations have settled, and keeps each change with the deliveries whose
handlers may have been running meanwhile (`EffectObserver`). When the replay is over, deliveries that
did not run a handler (refused, answered from a receipt) are struck off, and each change is pinned on
the tool of the deliveries left (`effect_findings`):

- AL801 (`declared-read-but-wrote`): a tool declared read (`ToolSpec.effect` read, or a server's
  `readOnlyHint: true` on an imported tool) whose calls changed the world;
- AL802 (`idempotent-but-repeated`): a tool declared idempotent (an idempotency key, or
  `idempotentHint: true`) whose deliveries under one key (its key's value; the whole arguments for a
  hint without a key) changed the world in two separate runs, or added the same record twice.

A change while calls of several tools ran is pinned on none of them, except that it is counted against
reads when every one of those tools declared read. A change seen when no handler was running (a tool
that writes later, from a thread of its own) goes to the calls since operations last settled, and is
likewise counted against reads when all of them declared read. So an honest tool is never blamed alone;
a lying one is caught whenever its calls ran without a writing tool's beside them, as most cases' do.
`destructiveHint` cannot be checked this way: a record says that the world changed, not whether the
change can be undone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..fingerprint import canonical_json
from ..spec import Effect

__all__ = ["READ_BUT_WROTE", "REPEATED_UNDER_KEY", "CallFacts", "Change", "Declaration", "EffectFinding",
           "EffectObserver", "declaration", "effect_findings", "ran_handler"]

READ_BUT_WROTE = "AL801"
REPEATED_UNDER_KEY = "AL802"
ANSWERED_FROM_KEY = frozenset({"outcome_unknown"})  # outcome unknown, yet no handler of this call ran


@dataclass(frozen=True)
class Declaration:
    """What a tool says of its effects: how it says it only reads, how it says a repeat is harmless
    (None: it does not), and the argument that carries its idempotency key."""

    read: Optional[str] = None
    idempotent: Optional[str] = None
    key: Optional[str] = None


def declaration(spec: Any) -> Declaration:
    """The declaration of a ToolSpec: its runtime half, and for an imported tool the server's own hints."""
    hints = _hints(spec)
    read = [how for how, says in (("effect read", spec.effect is Effect.READ),
                                  ("readOnlyHint true", hints.get("readOnlyHint") is True)) if says]
    idempotent = [how for how, says in ((f"idempotency_key {spec.idempotency_key!r}", spec.idempotency_key is not None),
                                        ("idempotentHint true", hints.get("idempotentHint") is True)) if says]
    return Declaration(read=" and ".join(read) or None, idempotent=" and ".join(idempotent) or None,
                       key=spec.idempotency_key)


def _hints(spec: Any) -> Mapping[str, Any]:
    provenance = getattr(spec, "provenance", None)
    return dict(getattr(provenance, "hints", ()) or ())


@dataclass(frozen=True)
class Change:
    """How the world changed between two readings (records as canonical JSON), the deliveries that may
    have been running meanwhile (`calls`), and every delivery since operations last settled (`window`:
    a handler may have left a thread of its own writing after it returned)."""

    added: tuple[str, ...]
    removed: int
    calls: frozenset[int]
    window: frozenset[int] = frozenset()

    @property
    def size(self) -> int:
        return len(self.added) + self.removed


class EffectObserver:
    """Reads the world at each step boundary and keeps every change with the deliveries in flight.
    Used from the replay's own thread only (background calls never call it)."""

    def __init__(self, read: Callable[[], Sequence[Any]]) -> None:
        self._read = read
        self._last = Counter(canonical_json(record) for record in read())
        self._running: set[int] = set()
        self._window: set[int] = set()
        self.changes: list[Change] = []

    def mark(self) -> None:
        """Read the world; a change since the last reading goes to the deliveries running meanwhile."""
        now = Counter(canonical_json(record) for record in self._read())
        added, removed = now - self._last, self._last - now
        if added or removed:
            self.changes.append(Change(tuple(sorted(added.elements())), sum(removed.values()),
                                       frozenset(self._running), frozenset(self._window)))
        self._last = now

    def start(self, index: int) -> None:
        """Delivery `index` is about to start."""
        self.mark()
        self._running.add(index)
        self._window.add(index)

    def end(self, index: int) -> None:
        """Delivery `index` has returned and its handler is done."""
        self.mark()
        self._running.discard(index)

    def end_all(self) -> None:
        """Everything settled: no handler runs any more."""
        self.mark()
        self._running.clear()
        self._window.clear()


@dataclass(frozen=True)
class CallFacts:
    """What the findings need of one delivery: its tool and its declaration (None: no such tool), the
    key it ran under, and whether its handler ran (or may have)."""

    tool: str
    declared: Optional[Declaration]
    key: Optional[str]
    ran: bool


def ran_handler(view: Mapping[str, Any]) -> bool:
    """Whether the delivery's handler ran (or may have), from what the model was shown: a crashed or
    unanswered delivery may have; a refusal, a replay and an `outcome_unknown` answer did not."""
    if "crashed" in view or "unanswered" in view:
        return True
    error = view.get("error") or {}
    return view.get("outcome") in ("succeeded", "failed", "unknown", "accepted") and not view.get("replayed") \
        and error.get("code") not in ANSWERED_FROM_KEY


def call_key(declared: Declaration, arguments: Any) -> Optional[str]:
    """The key a delivery runs under, for a tool declared idempotent: its key's value, or (a hint without
    a key) its whole arguments."""
    if declared.idempotent is None:
        return None
    if declared.key is not None:
        value = arguments.get(declared.key) if isinstance(arguments, dict) else None
        return value if isinstance(value, str) else None
    try:
        return canonical_json(arguments)
    except ValueError:
        return None


@dataclass(frozen=True)
class EffectFinding:
    """A tool whose calls did to the world what it declared they would not (rule AL801 or AL802):
    `message` says what it declared and what happened, `calls` which deliveries of the case did it."""

    rule: str
    tool: str
    message: str
    calls: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "tool": self.tool, "message": self.message, "calls": list(self.calls)}

    def __str__(self) -> str:
        return f"{self.message} (call(s) {_listed(self.calls)})"


def effect_findings(changes: Iterable[Change], facts: Mapping[int, CallFacts]) -> tuple[EffectFinding, ...]:
    """The findings of one replay (see the module docstring), by tool in order of first call, then rule."""
    read_changes: dict[str, list[tuple[int, frozenset[int]]]] = {}
    keyed: dict[tuple[str, str], list[tuple[Change, frozenset[int]]]] = {}
    for change in changes:
        runners = frozenset(index for index in change.calls if index in facts and facts[index].ran)
        # No call was running: the change is a late one of a call since the world last settled, if any.
        readers = runners or frozenset(index for index in change.window if index in facts and facts[index].ran)
        declared = [facts[index].declared for index in readers]
        if readers and all(item is not None and item.read is not None for item in declared):
            for tool in {facts[index].tool for index in readers}:
                read_changes.setdefault(tool, []).append((change.size, readers))
        keys = {(facts[index].tool, facts[index].key) for index in runners}
        if len(keys) == 1:
            tool, key = next(iter(keys))
            if key is not None:
                keyed.setdefault((tool, key), []).append((change, runners))
    found = [_read_finding(tool, entries, facts) for tool, entries in read_changes.items()]
    found += [finding for (tool, _), entries in keyed.items()
              for finding in [_repeat_finding(tool, entries, facts)] if finding is not None]
    order = {facts[index].tool: index for index in sorted(facts, reverse=True)}
    return tuple(sorted(found, key=lambda finding: (order.get(finding.tool, 0), finding.rule, finding.calls)))


def _read_finding(tool: str, entries: list[tuple[int, frozenset[int]]],
                  facts: Mapping[int, CallFacts]) -> EffectFinding:
    calls = tuple(sorted({index for _, runners in entries for index in runners if facts[index].tool == tool}))
    declared = next(facts[index].declared for index in calls)
    size = sum(count for count, _ in entries)
    others = sorted({facts[index].tool for _, runners in entries for index in runners} - {tool})
    alongside = f"; read-only {', '.join(others)} ran too, so one of them did" if others else ""
    return EffectFinding(READ_BUT_WROTE, tool,
                         f"{tool} is declared read-only ({declared.read if declared else 'read'}), but the world "
                         f"changed while only read-only calls ran ({size} record(s) added or removed{alongside})",
                         calls)


def _repeat_finding(tool: str, entries: list[tuple[Change, frozenset[int]]],
                    facts: Mapping[int, CallFacts]) -> Optional[EffectFinding]:
    added = Counter(text for change, _ in entries for text in change.added)
    repeated = sum(count - 1 for count in added.values() if count > 1)
    if len(entries) < 2 and not repeated:
        return None
    calls = tuple(sorted({index for _, runners in entries for index in runners}))
    declared = facts[calls[0]].declared
    how = declared.idempotent if declared is not None else "idempotent"
    if len(entries) < 2:
        what = f"added {repeated} repeated record(s) in one run"
    else:
        what = f"changed the world in {len(entries)} separate runs" + (
            f", {repeated} record(s) repeated" if repeated else "")
    return EffectFinding(REPEATED_UNDER_KEY, tool,
                         f"{tool} is declared idempotent ({how}), but its deliveries under one key {what}", calls)


def _listed(calls: Sequence[int]) -> str:
    return ", ".join(map(str, calls))
