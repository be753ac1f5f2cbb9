"""Runtime overhead: what Registry.invoke costs on top of calling a handler, and receipt throughput.

Measured (each the best of several rounds, per call):
  * a read call: the handler called directly, `invoke` with `run_inline=True`, and `invoke` on the
    worker pool under a deadline (the default path);
  * replaying a stored receipt (same key, same arguments) from the in-memory and the SQLite store.

SQLite receipt throughput against raw sqlite3 is the `stores` section (store_bench.py).

Figures depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any, Callable, Sequence

from ..calls import ToolCall
from ..idempotency import SqliteReceiptStore
from ..policy import Actor
from ..registry import Registry
from ..spec import Effect, ToolSpec

__all__ = ["main"]

ACTOR = Actor(id="bench-user", tenant="bench", permissions={"tickets:read", "tickets:write"})

READ_SPEC = ToolSpec(
    name="get_ticket",
    description="Read one ticket.",
    input_schema={
        "type": "object",
        "properties": {"ticket_id": {"type": "string", "pattern": "^T-[0-9]{4}$"}},
        "required": ["ticket_id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"ticket_id": {"type": "string"}, "status": {"enum": ["open", "closed"]},
                       "subject": {"type": "string"}},
        "required": ["ticket_id", "status", "subject"],
        "additionalProperties": False,
    },
    required_permission="tickets:read",
)

WRITE_SPEC = ToolSpec(
    name="record_ticket_followup",
    description="Record a follow-up note.",
    input_schema={
        "type": "object",
        "properties": {"ticket_id": {"type": "string"}, "note": {"type": "string", "maxLength": 500},
                       "action_id": {"type": "string"}},
        "required": ["ticket_id", "note", "action_id"],
        "additionalProperties": False,
    },
    required_permission="tickets:write",
    effect=Effect.WRITE,
    idempotency_key="action_id",
)

READ_CALL = ToolCall("get_ticket", {"ticket_id": "T-1001"})
WRITE_CALL = ToolCall("record_ticket_followup", {"ticket_id": "T-1001", "note": "Called back.", "action_id": "a-1"})


def get_ticket(arguments: Any) -> dict[str, Any]:
    return {"ticket_id": arguments["ticket_id"], "status": "open", "subject": "Printer on fire"}


def record_followup(arguments: Any) -> dict[str, Any]:
    return {"followup_id": "F-1", "ticket_id": arguments["ticket_id"]}


def best_per_call(function: Callable[[], Any], calls: int, rounds: int) -> float:
    """Seconds per call: the best round (least disturbed by the machine) of `calls` calls."""
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        timings.append((time.perf_counter() - started) / calls)
    return min(timings)


def _registry(**options: Any) -> Registry:
    registry = Registry(**options)
    registry.register(READ_SPEC, get_ticket)
    registry.register(WRITE_SPEC, record_followup)
    return registry


def measure_read(calls: int, rounds: int) -> list[tuple[str, float]]:
    inline, pooled = _registry(run_inline=True), _registry()
    try:
        for registry in (inline, pooled):  # warm up: pool threads, cursor codec, validators
            assert registry.invoke(READ_CALL, actor=ACTOR).ok
        arguments = READ_CALL.arguments
        return [
            ("read: handler called directly", best_per_call(lambda: get_ticket(arguments), calls, rounds)),
            ("read: invoke, run_inline=True", best_per_call(lambda: inline.invoke(READ_CALL, actor=ACTOR), calls, rounds)),
            ("read: invoke, worker pool + deadline",
             best_per_call(lambda: pooled.invoke(READ_CALL, actor=ACTOR, deadline=time.monotonic() + 5), calls, rounds)),
        ]
    finally:
        inline.close()
        pooled.close()


def measure_replay(directory: str, calls: int, rounds: int) -> list[tuple[str, float]]:
    rows = []
    in_memory = _registry()
    sqlite_store = SqliteReceiptStore(os.path.join(directory, "replay.sqlite3"))
    on_sqlite = _registry(receipts=sqlite_store)
    try:
        for label, registry in (("in-memory", in_memory), ("SQLite", on_sqlite)):
            first = registry.invoke(WRITE_CALL, actor=ACTOR)
            assert first.ok and not first.replayed
            assert registry.invoke(WRITE_CALL, actor=ACTOR).replayed
            per_call = best_per_call(lambda: registry.invoke(WRITE_CALL, actor=ACTOR), calls, rounds)
            rows.append((f"replay a receipt ({label} store)", per_call))
    finally:
        in_memory.close()
        on_sqlite.close()
        sqlite_store.close()
    return rows


def print_table(title: str, rows: list[tuple[str, float]], baseline_label: str) -> None:
    """One table; the last column compares each row with the row named `baseline_label`."""
    baseline = dict(rows)[baseline_label]
    width = max(len(label) for label, _ in rows)
    print(title)
    print(f"  {'measurement':<{width}}  {'per call':>10}  {'per second':>11}  {'vs first':>8}")
    for label, seconds in rows:
        print(f"  {label:<{width}}  {seconds * 1e6:>8.1f}us  {1 / seconds:>11,.0f}  {seconds / baseline:>7.1f}x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="runtime_bench", description="Registry.invoke overhead")
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is reported (default 5)")
    parser.add_argument("--quick", action="store_true", help="200 calls per round, for a smoke run")
    args, _unknown = parser.parse_known_args(argv)
    calls = 200 if args.quick else args.calls
    rounds = max(1, args.rounds)
    with tempfile.TemporaryDirectory() as directory:
        calls_rows = measure_read(calls, rounds) + measure_replay(directory, calls, rounds)
    print_table("Calls (best of %d rounds of %d calls)" % (rounds, calls), calls_rows, calls_rows[0][0])
    direct = calls_rows[0][1]
    print(f"  invoke overhead over a direct call: inline {(calls_rows[1][1] - direct) * 1e6:.1f}us, "
          f"worker pool + deadline {(calls_rows[2][1] - direct) * 1e6:.1f}us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
