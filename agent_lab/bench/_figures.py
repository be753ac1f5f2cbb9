"""What the timing sections share: the worst of several rounds, a plain-text table, and figures.

A section reports each figure a target is set for with `report` (per-round values, measured side
by side with a peer through `interleave`); `bench --json` writes them in one stable shape and
`bench --compare OLD.json` reads an earlier file back and names the figures that got worse."""

from __future__ import annotations

import json
import math
import operator
import platform
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence


def json_bytes(value: object) -> int:
    """The size of `value` as compact UTF-8 JSON (how the input budget measures arguments)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def worst_ms(function: Callable[[], object], rounds: int) -> float:
    """The slowest of `rounds` calls, in milliseconds: an attack is judged by its worst case."""
    worst = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        worst = max(worst, time.perf_counter() - started)
    return worst * 1000.0


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(header, widths)).rstrip(),
             "  ".join("-" * width for width in widths)]
    lines.extend("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
    return "\n".join(lines)


# -- figures in a stable shape, for `bench --json` and `bench --compare` -------------------------

FIGURES_FORMAT = "agent-lab-bench/1"
"""The `format` of a `bench --json` file; a file of another format is not compared."""


@dataclass(frozen=True)
class Figure:
    """One measured figure. `ours` and `peer` are medians over rounds; `ratio` is the median of the
    per-round ratios ours/peer (each round measures both side by side, so a disturbed round disturbs
    both); `spread` is max - min of those ratios (of `ours` when there is no peer): how far one
    round can be from another on this machine. `better` says which way is an improvement."""

    name: str
    unit: str
    ours: float
    peer: Optional[float] = None
    ratio: Optional[float] = None
    spread: float = 0.0
    rounds: int = 1
    target: Optional[str] = None
    better: str = "lower"
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        document = {field: getattr(self, field) for field in
                    ("name", "unit", "ours", "peer", "ratio", "spread", "rounds", "target", "better", "note")}
        document["meets_target"] = self.meets_target
        return document

    @property
    def compared(self) -> float:
        """The number a later run is compared on: the ratio when there is a peer, else `ours`."""
        return self.ratio if self.ratio is not None else self.ours

    @property
    def meets_target(self) -> Optional[bool]:
        """Whether the compared number meets `target` ("<= 1.3", "< 1", ">= 2", "> 0.5"); None when there
        is no target, or one that is not such a comparison."""
        found = _TARGET.fullmatch(self.target or "")
        if found is None:
            return None
        return bool(_COMPARISONS[found.group(1)](self.compared, float(found.group(2))))

    @property
    def verdict(self) -> str:
        """How a table shows `meets_target`: "met", "MISSED" (capitals, to be seen), or "-"."""
        return {True: "met", False: "MISSED", None: "-"}[self.meets_target]


_TARGET = re.compile(r"\s*(<=|>=|<|>)\s*([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*")
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


def missed_line(figures: Sequence[Figure]) -> str:
    """One line naming every figure that misses its target (or saying that none does)."""
    judged = [figure for figure in figures if figure.meets_target is not None]
    missed = [figure.name for figure in judged if figure.meets_target is False]
    if not missed:
        return f"every figure with a target meets it ({len(judged)})"
    return f"{len(missed)} of {len(judged)} figures MISS their target: {', '.join(missed)}"


FIGURES: list[Figure] = []
"""Every figure reported in this process, in order (the front door empties it before a run)."""


def interleave(measurements: Mapping[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call every measurement once per round, rotating which goes first, so that a slow stretch of
    the machine falls on all of them alike; name -> one value per round."""
    names = list(measurements)
    values: dict[str, list[float]] = {name: [] for name in names}
    for round_number in range(max(1, rounds)):
        shift = round_number % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            values[name].append(float(measurements[name]()))
    return values


def report(
    name: str,
    *,
    unit: str,
    ours: Sequence[float],
    peer: Optional[Sequence[float]] = None,
    target: Optional[str] = None,
    better: str = "lower",
    note: str = "",
) -> Figure:
    """Record one figure from per-round values (`peer` round i measured beside `ours` round i)."""
    if not ours:
        raise ValueError(f"figure {name!r} has no rounds")
    if better not in ("lower", "higher"):
        raise ValueError("better must be 'lower' or 'higher'")
    if peer is not None and len(peer) != len(ours):
        raise ValueError(f"figure {name!r}: ours and peer need one value per round each")
    ratios = [mine / theirs for mine, theirs in zip(ours, peer) if theirs] if peer is not None else []
    spread_of = ratios if ratios else list(ours)
    figure = Figure(
        name=name,
        unit=unit,
        ours=float(statistics.median(ours)),
        peer=float(statistics.median(peer)) if peer is not None else None,
        ratio=float(statistics.median(ratios)) if ratios else None,
        spread=float(max(spread_of) - min(spread_of)),
        rounds=len(ours),
        target=target,
        better=better,
        note=note,
    )
    FIGURES.append(figure)
    return figure


def figures_document(figures: Sequence[Figure]) -> dict[str, Any]:
    """What `bench --json` writes: the figures sorted by name, and where they were measured."""
    return {
        "format": FIGURES_FORMAT,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "figures": [figure.as_json() for figure in sorted(figures, key=lambda figure: figure.name)],
    }


def read_figures(path: str) -> list[Figure]:
    """The figures of a `bench --json` file. ValueError (one line) when it is not one."""
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as problem:
        raise ValueError(f"{path}: cannot read it ({problem.strerror or problem})") from None
    except (ValueError, RecursionError):
        raise ValueError(f"{path}: not a JSON file") from None
    if not isinstance(document, dict) or document.get("format") != FIGURES_FORMAT:
        raise ValueError(f"{path}: not a `bench --json` file of format {FIGURES_FORMAT}")
    entries = document.get("figures")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: \"figures\" must be a list")
    figures = []
    for index, entry in enumerate(entries):
        try:
            figures.append(Figure(
                name=str(entry["name"]), unit=str(entry["unit"]), ours=_number(entry["ours"]),
                peer=_optional_number(entry.get("peer")), ratio=_optional_number(entry.get("ratio")),
                spread=_number(entry.get("spread", 0.0)), rounds=int(entry.get("rounds", 1)),
                target=entry.get("target"), better="higher" if entry.get("better") == "higher" else "lower",
                note=str(entry.get("note", "")),
            ))
        except (KeyError, TypeError, ValueError, OverflowError):  # (a rounds of 1e400, an ours of 10**400)
            raise ValueError(f"{path}: figure {index + 1} lacks a name, unit or number") from None
    return figures


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError("not a finite number")
    return float(value)


def _optional_number(value: Any) -> Optional[float]:
    return None if value is None else _number(value)


def regressions(old: Sequence[Figure], new: Sequence[Figure], threshold: float) -> list[tuple[Figure, Figure, float]]:
    """(old, new, relative change) for every figure, by name, that got worse by more than `threshold`
    (0.10 = 10%) on the number it is compared on. A change inside the worse spread of the two runs
    is noise, not a regression."""
    by_name = {figure.name: figure for figure in old}
    worse = []
    for figure in new:
        before = by_name.get(figure.name)
        if before is None or before.compared == 0 or (before.ratio is None) != (figure.ratio is None):
            continue
        change = (figure.compared - before.compared) / abs(before.compared)
        if figure.better == "higher":
            change = -change
        noise = max(before.spread, figure.spread) / abs(before.compared)
        if change > max(threshold, noise):
            worse.append((before, figure, change))
    return worse
