"""What the timing sections share: the worst of several rounds, and a plain-text table."""

from __future__ import annotations

import json
import time
from typing import Callable, Sequence


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
