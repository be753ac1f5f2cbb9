"""Runtime overhead: what Registry.invoke costs on top of calling a handler, and receipt throughput.

Measured (each the best of several rounds, per call):
  * a read call: the handler called directly, `invoke` with `run_inline=True`, and `invoke` on the
    worker pool under a deadline (the default path);
  * replaying a stored receipt (same key, same arguments) from the in-memory and the SQLite store;
  * SQLite receipts per second (reserve + complete, each its own transaction) against raw sqlite3
    with the same table and index, WAL journal and the same `synchronous` level: one INSERT per receipt, and
    an INSERT plus an UPDATE per receipt (the same two transactions the store runs).

Figures depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from typing import Any, Callable, Sequence

from ..calls import ToolCall
from ..idempotency import ReceiptKey, SqliteReceiptStore, fingerprint
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


def measure_sqlite(directory: str, receipts: int, synchronous: str, rounds: int) -> list[tuple[str, float]]:
    """Seconds per receipt, best of `rounds` runs, each on a fresh file."""
    record = {"ok": True, "outcome": "succeeded", "tool": "record_ticket_followup",
              "output": {"followup_id": "F-1", "ticket_id": "T-1001"}, "error": None, "fingerprint": "sha256:0"}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    timings: dict[str, list[float]] = {"store": [], "one": [], "two": []}
    for round_number in range(rounds):
        def fresh(name: str) -> str:
            return os.path.join(directory, f"{name}-{round_number}.sqlite3")

        timings["store"].append(_store_sqlite(fresh("store"), receipts, synchronous, record))
        timings["one"].append(_raw_sqlite(fresh("raw1"), receipts, synchronous, text, two_steps=False))
        timings["two"].append(_raw_sqlite(fresh("raw2"), receipts, synchronous, text, two_steps=True))
    return [
        (f"SqliteReceiptStore reserve+complete (synchronous={synchronous})", min(timings["store"]) / receipts),
        (f"raw sqlite3: 1 INSERT per receipt (synchronous={synchronous})", min(timings["one"]) / receipts),
        (f"raw sqlite3: INSERT + UPDATE per receipt (synchronous={synchronous})", min(timings["two"]) / receipts),
    ]


def _store_sqlite(path: str, receipts: int, synchronous: str, record: dict[str, Any]) -> float:
    store = SqliteReceiptStore(path, synchronous=synchronous)
    call_fingerprint = fingerprint(WRITE_CALL.name, WRITE_CALL.arguments, key=store.fingerprint_key)
    try:
        started = time.perf_counter()
        for index in range(receipts):
            key = ReceiptKey("bench", "record_ticket_followup", f"k-{index}")
            owner = store.reserve(key, call_fingerprint).owner
            assert owner is not None
            store.complete(key, owner, record)
        return time.perf_counter() - started
    finally:
        store.close()


def _raw_sqlite(path: str, receipts: int, synchronous: str, text: str, *, two_steps: bool) -> float:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(f"PRAGMA synchronous = {synchronous}")
        connection.execute(
            "CREATE TABLE receipts (tenant TEXT NOT NULL, tool TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT"
            " NOT NULL, state TEXT NOT NULL, record TEXT, expires_at REAL NOT NULL, PRIMARY KEY (tenant, tool, key))"
            " WITHOUT ROWID"
        )
        connection.execute("CREATE INDEX receipts_by_expiry ON receipts (expires_at)")  # as the store has
        insert = "INSERT INTO receipts VALUES (?, ?, ?, ?, ?, ?, ?)"
        update = "UPDATE receipts SET state = 'completed', record = ? WHERE tenant = ? AND tool = ? AND key = ?"
        started = time.perf_counter()
        for index in range(receipts):
            key = f"k-{index}"
            if two_steps:
                connection.execute(insert, ("bench", "tool", key, "sha256:0", "in_flight", None, 1e12))
                connection.execute(update, (text, "bench", "tool", key))
            else:
                connection.execute(insert, ("bench", "tool", key, "sha256:0", "completed", text, 1e12))
        return time.perf_counter() - started
    finally:
        connection.close()


def print_table(title: str, rows: list[tuple[str, float]], baseline_label: str) -> None:
    """One table; the last column compares each row with the row named `baseline_label`."""
    baseline = dict(rows)[baseline_label]
    width = max(len(label) for label, _ in rows)
    print(title)
    print(f"  {'measurement':<{width}}  {'per call':>10}  {'per second':>11}  {'vs first':>8}")
    for label, seconds in rows:
        print(f"  {label:<{width}}  {seconds * 1e6:>8.1f}us  {1 / seconds:>11,.0f}  {seconds / baseline:>7.1f}x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="runtime_bench", description="Registry.invoke overhead and receipts")
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is reported (default 5)")
    parser.add_argument("--receipts", type=int, default=2000, help="SQLite receipts to write (default 2000)")
    parser.add_argument("--synchronous", default="NORMAL", choices=["OFF", "NORMAL", "FULL"],
                        help="SQLite synchronous level for both the store and raw sqlite3 (default NORMAL)")
    parser.add_argument("--quick", action="store_true", help="200 calls and 200 receipts per round, for a smoke run")
    args, _unknown = parser.parse_known_args(argv)
    calls, receipts = (200, 200) if args.quick else (args.calls, args.receipts)
    rounds = max(1, args.rounds)
    with tempfile.TemporaryDirectory() as directory:
        calls_rows = measure_read(calls, rounds) + measure_replay(directory, calls, rounds)
        receipt_rows = measure_sqlite(directory, receipts, args.synchronous, rounds)
    print_table("Calls (best of %d rounds of %d calls)" % (rounds, calls), calls_rows, calls_rows[0][0])
    direct = calls_rows[0][1]
    print(f"  invoke overhead over a direct call: inline {(calls_rows[1][1] - direct) * 1e6:.1f}us, "
          f"worker pool + deadline {(calls_rows[2][1] - direct) * 1e6:.1f}us")
    print()
    print_table(f"Receipts (best of {rounds} rounds of {receipts} keys, WAL, synchronous={args.synchronous})", receipt_rows, receipt_rows[1][0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
