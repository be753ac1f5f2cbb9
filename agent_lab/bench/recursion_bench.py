"""Recursion: the worst time a model's nesting costs, for the recursive `anyOf` of issue 8.

The schema is the reported reproducer: a definition whose two `anyOf` branches both apply the
definition again to member "x". The instance nests objects under "x" as deep as the nesting limit
allows, with the innermost "y" failing both branches, so a validator that checks each branch's
subschema anew does twice the work per level (1.3 s at 21 levels, about 300 bytes, before the
validator memoised such subschemas; 64 levels never finished). For depths 8 to 64 the worst of
several rounds of `is_valid`, `errors(limit=21)` (what the registry asks) and `errors()` is printed
in milliseconds. A depth that takes longer than `--give-up-after` seconds ends the table: deeper
ones would take longer still.

Then `uniqueItems` over integers that Python hashes alike (multiples of 2**61 - 1), as many as fit
16 KiB and 1 MiB of arguments, against the same number of ordinary integers.

Figures depend on the machine and its load; they are printed, never asserted. The unit tests in
`tests/test_validation_bounded.py` assert the structural property (work counted, not timed).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..schema import MAX_INSTANCE_DEPTH, Validator
from ._figures import json_bytes, table, worst_ms

__all__ = ["REPRODUCER", "main", "reproducer_instance"]

REPRODUCER: Dict[str, Any] = {
    "$defs": {"n": {"anyOf": [
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"const": 1}}},
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"const": 2}}},
    ]}},
    "$ref": "#/$defs/n",
}

DEPTHS = (8, 16, 24, 32, 40, 48, 56, 64)


def reproducer_instance(depth: int) -> Dict[str, Any]:
    """`depth` objects nested under "x" ({"x": {"x": ..., "y": 2}, "y": 2}), the innermost "y" 3."""
    value: Dict[str, Any] = {"y": 3}
    for _ in range(depth - 1):
        value = {"x": value, "y": 2}
    return value


def _recursion_rows(rounds: int, give_up_after: float) -> List[Tuple[str, ...]]:
    validator = Validator(REPRODUCER)
    rows: List[Tuple[str, ...]] = []
    for depth in DEPTHS:
        instance = reproducer_instance(min(depth, MAX_INSTANCE_DEPTH))
        started = time.perf_counter()
        figures = [worst_ms(lambda: validator.is_valid(instance), rounds),
                   worst_ms(lambda: validator.errors(instance, limit=21), rounds),
                   worst_ms(lambda: validator.errors(instance), rounds)]
        verdict = "valid" if validator.is_valid(instance) else "invalid"
        rows.append((str(depth), f"{json_bytes(instance):,}", verdict, *(f"{ms:,.2f}" for ms in figures)))
        if time.perf_counter() - started > give_up_after:
            rows.append((f"> {depth}", "-", "-", "not run", "not run", f"(depth {depth} took over {give_up_after:g} s)"))
            break
    return rows


def _unique_items_rows(rounds: int) -> List[Tuple[str, ...]]:
    validator = Validator({"type": "array", "uniqueItems": True})
    modulus = sys.hash_info.modulus  # Python hashes every multiple of it to 0
    rows: List[Tuple[str, ...]] = []
    for budget in (16 * 1024, 1024 * 1024):
        count = budget // len(str(budget * modulus) + ",")  # every item at most that long: fits the budget
        for label, items in (("hash alike", [index * modulus for index in range(1, count + 1)]),
                             ("ordinary", list(range(count)))):
            ms = worst_ms(lambda: validator.is_valid(items), rounds)
            rows.append((f"{budget // 1024:,} KiB", label, f"{len(items):,}", f"{json_bytes(items):,}", f"{ms:,.2f}"))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="recursion_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (the worst is kept)")
    parser.add_argument("--give-up-after", type=float, default=10.0,
                        help="seconds one depth may take before deeper ones are skipped (default 10)")
    args = parser.parse_args(argv)
    rounds = max(1, args.rounds)
    print(f"issue 8's recursive anyOf, innermost member failing; worst of {rounds} rounds, ms")
    print(table(("depth", "bytes", "verdict", "is_valid", "errors(limit=21)", "errors()"),
                 _recursion_rows(rounds, args.give_up_after)))
    print()
    print(f"uniqueItems over integers Python hashes alike vs ordinary ones; worst of {rounds} rounds, ms")
    print(table(("arguments", "integers", "count", "bytes", "is_valid"), _unique_items_rows(rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
