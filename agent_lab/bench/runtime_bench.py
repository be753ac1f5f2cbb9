"""Runtime overhead: what Registry.invoke costs on top of calling a handler, and receipt throughput.

Measured (each the best of several rounds, per call):
  * a read call: the handler called directly, `invoke` with `run_inline=True`, and `invoke` on the
    worker pool under a deadline (the default path);
  * replaying a stored receipt (same key, same arguments) from the in-memory and the SQLite store.

SQLite receipt throughput against raw sqlite3 is the `stores` section (store_bench.py).

Figures (issues 11 and 21), each over interleaved rounds and reported through `_figures` (`bench --json`).
The yardstick is a typical pydantic registry's overhead on the same read (a dict lookup, a permission
check, `model_validate` of an input model, the handler called with its `model_dump()`, `model_validate`
of an output model and its `model_dump()`, minus the handler called directly); they are skipped, with
the reason printed, when pydantic is not installed:
  * runtime.read_vs_pydantic (<= 1.3): invoke's overhead on the read (invoke minus the handler called
    directly; the tool is `execution="inline"`);
  * runtime.write_first_vs_pydantic_read (<= 4.5): a keyed write with a fresh key (fingerprint,
    reservation, receipt), invoke minus its handler called directly;
  * runtime.replay_vs_pydantic_read (<= 2): a whole invoke that replays a stored receipt;
  * each also as `..._instructions`: the same ratio in instructions per call, counted by valgrind's
    callgrind (`_instructions.py`; not made without valgrind, or with --no-instructions): the machine
    is shared, and instructions do not move with the load. The replay and every refusal below are
    counted that way too (`..._instructions`), against the same yardsticks.
Against invoke itself (whole calls): runtime.replay_vs_read_plus_fingerprint and
runtime.reject.<code>_vs_read_plus_fingerprint for the refusals that make the call's fingerprint
(approval_required, approval_mismatch, idempotency_conflict) are judged against a read plus one
`registry.fingerprint` of the same arguments, timed as one call (<= 1); every other refusal against a read
(runtime.reject.<code>_vs_read, <= 1). An unknown name is the `names` section's figure (10,000 tools).
runtime.pool_vs_threadpool: invoke's overhead on the worker pool (the default) against a bare
`ThreadPoolExecutor` round trip (submit a no-op, wait for its result) measured beside it.

Every timed stretch starts after a full collection (`_per_call`), so no measurement pays for a full
collection that the objects of another (the fresh writes' receipts, say) set off.

Figures depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import gc
import os
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

from ..calls import ToolCall
from ..idempotency import SqliteReceiptStore
from ..policy import Actor
from ..registry import Registry
from ..spec import ApprovalPolicy, Effect, Execution, ToolSpec
from . import _figures, _instructions

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


# -- figures: side by side, interleaved rounds ---------------------------------------------------

INLINE_READ_SPEC = dataclasses.replace(READ_SPEC, execution=Execution.INLINE)
INLINE_WRITE_SPEC = dataclasses.replace(WRITE_SPEC, execution=Execution.INLINE)
APPROVED_WRITE_SPEC = dataclasses.replace(WRITE_SPEC, name="close_ticket", approval=ApprovalPolicy.ALWAYS,
                                          execution=Execution.INLINE)
GUARDED_READ_SPEC = dataclasses.replace(READ_SPEC, name="get_guarded_ticket", execution=Execution.INLINE,
                                        resource_guard=lambda arguments, actor: arguments["ticket_id"] != "T-9999")
SMALL_BUDGET_SPEC = dataclasses.replace(READ_SPEC, name="get_ticket_small", execution=Execution.INLINE,
                                        max_input_bytes=64)


def _figure_registry() -> Registry:
    """The tools the figures call, every one inline (the pool is measured on its own)."""
    registry = Registry()
    for spec, handler in ((INLINE_READ_SPEC, get_ticket), (INLINE_WRITE_SPEC, record_followup),
                          (APPROVED_WRITE_SPEC, record_followup), (GUARDED_READ_SPEC, get_ticket),
                          (SMALL_BUDGET_SPEC, get_ticket)):
        registry.register(spec, handler)
    return registry


FINGERPRINTED = ("approval_required", "approval_mismatch", "idempotency_conflict")
"""Refusals that make the call's fingerprint (an approval binds to it; receipts are matched by it)."""


def _rejections(registry: Registry) -> dict[str, Callable[[], Any]]:
    """One invoke per refusal code, each refused at its own step (the code it answers is checked).

    Each call is built once, as the read's `READ_CALL` is, so a refusal's count holds the invoke alone."""
    other = registry.approval_for(ToolCall("close_ticket", {"ticket_id": "T-1001", "note": "x", "action_id": "a-9"}),
                                  actor=ACTOR, approver="bench")
    conflicting = ToolCall("record_ticket_followup", {"ticket_id": "T-1001", "note": "Other note.", "action_id": "a-1"})
    malformed = ToolCall("get_ticket", {"ticket_id": "X-1"})
    too_large = ToolCall("get_ticket_small", {"ticket_id": "T-1001" * 20})
    missing = ToolCall("get_guarded_ticket", {"ticket_id": "T-9999"})
    closing = ToolCall("close_ticket", {"ticket_id": "T-1001", "note": "Closing.", "action_id": "a-2"})
    cases: dict[str, Callable[[], Any]] = {
        "invalid_arguments": lambda: registry.invoke(malformed, actor=ACTOR),
        "input_too_large": lambda: registry.invoke(too_large, actor=ACTOR),
        # An Actor without the scope is answered tool_not_found (the tool is hidden from it), so the
        # permission step's own refusal is reached by an actor the application failed to authenticate.
        "permission_denied": lambda: registry.invoke(READ_CALL, actor=None),  # type: ignore[arg-type]
        "not_found": lambda: registry.invoke(missing, actor=ACTOR),
        "approval_required": lambda: registry.invoke(closing, actor=ACTOR),
        "approval_mismatch": lambda: registry.invoke(closing, actor=ACTOR, approval=other),
        "deadline_exceeded": lambda: registry.invoke(READ_CALL, actor=ACTOR, deadline=0.0),
        "idempotency_conflict": lambda: registry.invoke(conflicting, actor=ACTOR),
    }
    for code, invoke in cases.items():
        result = invoke()
        if result.error is None or result.error.code != code:
            raise AssertionError(f"the {code} case answered {result.error.code if result.error else 'ok'}")
    return cases


def _per_call(function: Callable[[], Any], calls: int) -> float:
    """Seconds per call of `function`, over `calls` calls. The collector runs first: a full collection
    that the objects of the measurement before would set off is not billed to this one, which still
    pays for the collections its own calls set off."""
    gc.collect()
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls


def _pydantic_registry() -> tuple[Optional[Callable[[str, Any, frozenset], dict[str, Any]]], str]:
    """A typical pydantic tool registry for the read tool, or None and why there is none.

    One input and one output BaseModel per tool (strict, extra fields forbidden: the schema's
    `additionalProperties: false`, its pattern and its enum), a dict of tools, a permission check,
    `model_validate` in, the handler called with `model_dump()`, `model_validate` out and
    `model_dump()`: the checks agent-lab's read path makes, minus what pydantic does not offer."""
    try:
        from typing import Literal

        from pydantic import BaseModel, ConfigDict, Field, ValidationError
    except ImportError as missing:
        return None, f"pydantic is not installed ({missing})"

    class GetTicketInput(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        ticket_id: str = Field(pattern=r"^T-[0-9]{4}$")

    class GetTicketOutput(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        ticket_id: str
        status: Literal["open", "closed"]
        subject: str

    tools: dict[str, tuple[Any, Any, Callable[[Any], Any], str]] = {
        "get_ticket": (GetTicketInput, GetTicketOutput, get_ticket, "tickets:read"),
    }

    def invoke(name: str, arguments: Any, permissions: frozenset) -> dict[str, Any]:
        tool = tools.get(name)
        if tool is None or tool[3] not in permissions:
            return {"ok": False, "error": {"code": "tool_not_found"}}
        input_model, output_model, handler, _ = tool
        try:
            checked = input_model.model_validate(arguments)
        except ValidationError as problem:
            return {"ok": False, "error": {"code": "invalid_arguments", "violations": problem.errors(include_url=False)}}
        try:
            output = handler(checked.model_dump())
        except Exception:  # noqa: BLE001
            return {"ok": False, "error": {"code": "handler_exception"}}
        try:
            returned = output_model.model_validate(output)
        except ValidationError:
            return {"ok": False, "error": {"code": "invalid_tool_output"}}
        return {"ok": True, "output": returned.model_dump()}

    return invoke, ""


def _noop() -> None:
    return None


def measure_figures(calls: int, rounds: int, *, instructions: bool = True) -> list[_figures.Figure]:
    """Report the runtime figures (see the module docstring) and print their raw times."""
    registry, pooled = _figure_registry(), _registry()
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    pydantic_invoke, missing = _pydantic_registry()
    permissions = frozenset(ACTOR.permissions)
    arguments, write_arguments = READ_CALL.arguments, WRITE_CALL.arguments
    try:
        assert registry.invoke(READ_CALL, actor=ACTOR).ok and pooled.invoke(READ_CALL, actor=ACTOR).ok
        assert registry.invoke(WRITE_CALL, actor=ACTOR).ok
        assert registry.invoke(WRITE_CALL, actor=ACTOR).replayed
        executor.submit(_noop).result()
        rejections = _rejections(registry)
        fresh_keys = iter(range(10**12))
        raw: dict[str, list[float]] = {}

        def keep(name: str, seconds: float) -> float:
            raw.setdefault(name, []).append(seconds)
            return seconds

        def whole(name: str, invoke: Callable[[], Any]) -> Callable[[], float]:
            return lambda: keep(name, _per_call(invoke, calls))

        def overhead(name: str, invoke: Callable[[], Any], handler: Callable[[], Any] = lambda: get_ticket(arguments),
                     direct: str = "read handler called directly") -> Callable[[], float]:
            def measure() -> float:
                return keep(name, _per_call(invoke, calls)) - keep(direct, _per_call(handler, calls))
            return measure

        def write_first() -> float:
            batch = [ToolCall("record_ticket_followup", {"ticket_id": "T-1001", "note": "Called back.",
                                                         "action_id": f"w-{next(fresh_keys)}"}) for _ in range(calls)]
            started = time.perf_counter()
            for call in batch:
                registry.invoke(call, actor=ACTOR)
            whole_call = keep("write, first call (fresh key)", (time.perf_counter() - started) / calls)
            return whole_call - keep("write handler called directly",
                                     _per_call(lambda: record_followup(write_arguments), calls))

        def read_then_fingerprint() -> None:  # the peer of a replay and of a fingerprinted refusal, timed as one
            registry.invoke(READ_CALL, actor=ACTOR)
            registry.fingerprint("record_ticket_followup", write_arguments)

        measurements: dict[str, Callable[[], float]] = {
            "read_overhead": overhead("read: invoke, execution=inline", lambda: registry.invoke(READ_CALL, actor=ACTOR)),
            "read": whole("read: invoke (whole call)", lambda: registry.invoke(READ_CALL, actor=ACTOR)),
            "read_plus_fingerprint": whole("read plus one registry.fingerprint (the write's arguments)",
                                           read_then_fingerprint),
            "write_first_overhead": write_first,
            "replay": whole("replay (in-memory store)", lambda: registry.invoke(WRITE_CALL, actor=ACTOR)),
            "pool_overhead": overhead("read: invoke on the worker pool",
                                      lambda: pooled.invoke(READ_CALL, actor=ACTOR, deadline=time.monotonic() + 5)),
            "threadpool": whole("ThreadPoolExecutor submit+result (no-op)", lambda: executor.submit(_noop).result()),
        }
        if pydantic_invoke is not None:
            peer = pydantic_invoke
            measurements["pydantic_overhead"] = overhead(
                "read: pydantic registry", lambda: peer("get_ticket", arguments, permissions))
        for code, invoke in rejections.items():
            measurements["reject." + code] = whole(f"refused: {code}", invoke)
        samples = _figures.interleave(measurements, rounds)
    finally:
        registry.close()
        pooled.close()
        executor.shutdown()

    figures = []
    read_plus_fingerprint = samples["read_plus_fingerprint"]
    if pydantic_invoke is None:
        print(f"runtime.*_vs_pydantic* skipped: {missing}")
    else:
        peer_overhead = samples["pydantic_overhead"]
        figures.append(_figures.report(
            "runtime.read_vs_pydantic", unit="s/call", ours=samples["read_overhead"], peer=peer_overhead,
            target="<= 1.3", note="overhead per read: invoke (execution=inline) minus the handler called directly, "
                                  "vs a pydantic registry (model_validate in and out, model_dump) minus the same call"))
        figures.append(_figures.report(
            "runtime.write_first_vs_pydantic_read", unit="s/call", ours=samples["write_first_overhead"],
            peer=peer_overhead, target="<= 4.5", note="a keyed write with a fresh key (fingerprint, reservation, "
                                                      "receipt), invoke minus its handler, vs the pydantic read's overhead"))
        figures.append(_figures.report(
            "runtime.replay_vs_pydantic_read", unit="s/call", ours=samples["replay"], peer=peer_overhead,
            target="<= 2", note="a whole invoke replaying a receipt (in-memory store) vs the pydantic read's overhead"))
        if instructions:
            figures.extend(instruction_figures(calls))
    figures.append(_figures.report(
        "runtime.replay_vs_read_plus_fingerprint", unit="s/call", ours=samples["replay"], peer=read_plus_fingerprint,
        target="<= 1", note="a replayed receipt (in-memory store) vs a read plus one registry.fingerprint, whole invokes"))
    for code in rejections:
        if code in FINGERPRINTED:
            figures.append(_figures.report(
                f"runtime.reject.{code}_vs_read_plus_fingerprint", unit="s/call", ours=samples["reject." + code],
                peer=read_plus_fingerprint, target="<= 1",
                note=f"a call refused with {code} (it makes the fingerprint) vs a read plus one fingerprint"))
        else:
            figures.append(_figures.report(
                f"runtime.reject.{code}_vs_read", unit="s/call", ours=samples["reject." + code], peer=samples["read"],
                target="<= 1", note=f"a call refused with {code} vs a read, whole invokes"))
    figures.append(_figures.report(
        "runtime.pool_vs_threadpool", unit="s/call", ours=samples["pool_overhead"], peer=samples["threadpool"],
        target="<= 2", note="invoke on the worker pool minus the handler called directly vs a bare "
                            "ThreadPoolExecutor submit+result of a no-op"))
    print(f"Raw per-call times (median of {rounds} interleaved rounds of {calls} calls)")
    width = max(len(label) for label in raw)
    for label, values in raw.items():
        values = sorted(values)
        print(f"  {label:<{width}}  {values[len(values) // 2] * 1e6:8.2f}us  (rounds {values[0] * 1e6:.2f}-{values[-1] * 1e6:.2f})")
    print()
    print(_figures.table(["figure", "target", "ratio", "spread", "rounds", "verdict"],
                         [[f.name, f.target or "", f"{f.ratio:.2f}" if f.ratio is not None else "-", f"{f.spread:.2f}",
                           str(f.rounds), f.verdict] for f in figures]))
    return figures


def instruction_measurements() -> dict[str, Callable[[], Any]]:
    """What `instruction_figures` counts (built in a child process under callgrind, see `_instructions`)."""
    registry = _figure_registry()
    pydantic_invoke, _ = _pydantic_registry()
    assert pydantic_invoke is not None
    permissions = frozenset(ACTOR.permissions)
    arguments, write_arguments = READ_CALL.arguments, WRITE_CALL.arguments
    assert registry.invoke(WRITE_CALL, actor=ACTOR).ok
    numbers = iter(range(10**12))

    def fresh_write() -> ToolCall:
        return ToolCall("record_ticket_followup", {"ticket_id": "T-1001", "note": "Called back.",
                                                   "action_id": f"w-{next(numbers)}"})

    rejections = _rejections(registry)
    return {
        "read handler called directly": lambda: get_ticket(arguments),
        "write handler called directly": lambda: record_followup(write_arguments),
        "read: invoke": lambda: registry.invoke(READ_CALL, actor=ACTOR),
        "read: pydantic registry": lambda: pydantic_invoke("get_ticket", arguments, permissions),
        "a fresh write call, made": fresh_write,
        "write, first call (fresh key), with making it": lambda: registry.invoke(fresh_write(), actor=ACTOR),
        "replay": lambda: registry.invoke(WRITE_CALL, actor=ACTOR),
        "read plus one fingerprint": lambda: (registry.invoke(READ_CALL, actor=ACTOR),
                                              registry.fingerprint("record_ticket_followup", write_arguments)),
        **{f"refused: {code}": invoke for code, invoke in rejections.items()},
    }


INSTRUCTION_CALLS = 2000
"""Calls per measurement under callgrind (enough to drown the garbage collector's share in the average)."""


def instruction_figures(calls: int) -> list[_figures.Figure]:
    """runtime.*_vs_pydantic*_instructions: the same ratios as the timed figures, in instructions per call."""
    counted, why = _instructions.count("agent_lab.bench.runtime_bench:instruction_measurements",
                                       min(calls, INSTRUCTION_CALLS))
    if counted is None:
        print(f"runtime.*_instructions not measured: {why}")
        return []
    peer = counted["read: pydantic registry"] - counted["read handler called directly"]
    read = counted["read: invoke"] - counted["read handler called directly"]
    write = (counted["write, first call (fresh key), with making it"] - counted["a fresh write call, made"]
             - counted["write handler called directly"])
    print("Instructions per call (callgrind): " + ", ".join(f"{name} {value:,.0f}" for name, value in counted.items()))
    note = "instructions per call, counted by callgrind in a child process"
    whole_read, read_plus_fingerprint = counted["read: invoke"], counted["read plus one fingerprint"]
    refusals = [
        _figures.report(f"runtime.reject.{code}_vs_read_plus_fingerprint_instructions" if code in FINGERPRINTED
                        else f"runtime.reject.{code}_vs_read_instructions", unit="instructions/call",
                        ours=[counted[f"refused: {code}"]],
                        peer=[read_plus_fingerprint if code in FINGERPRINTED else whole_read], target="<= 1", note=note)
        for code in sorted(code for code in (name.removeprefix("refused: ") for name in counted
                                             if name.startswith("refused: ")))]
    return refusals + [
        _figures.report("runtime.replay_vs_read_plus_fingerprint_instructions", unit="instructions/call",
                        ours=[counted["replay"]], peer=[read_plus_fingerprint], target="<= 1", note=note),
        _figures.report("runtime.read_vs_pydantic_instructions", unit="instructions/call", ours=[read], peer=[peer],
                        target="<= 1.3", note=note),
        _figures.report("runtime.write_first_vs_pydantic_read_instructions", unit="instructions/call", ours=[write],
                        peer=[peer], target="<= 4.5", note=note),
        _figures.report("runtime.replay_vs_pydantic_read_instructions", unit="instructions/call",
                        ours=[counted["replay"]], peer=[peer], target="<= 2", note=note),
    ]


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
    parser.add_argument("--quick", action="store_true", help="200 calls per round, for a smoke run (no callgrind)")
    parser.add_argument("--no-instructions", action="store_true",
                        help="skip the instruction counts (valgrind's callgrind, about a minute)")
    args, _unknown = parser.parse_known_args(argv)
    calls = 200 if args.quick else args.calls
    rounds = max(1, args.rounds)
    with tempfile.TemporaryDirectory() as directory:
        calls_rows = measure_read(calls, rounds) + measure_replay(directory, calls, rounds)
    print_table("Calls (best of %d rounds of %d calls)" % (rounds, calls), calls_rows, calls_rows[0][0])
    direct = calls_rows[0][1]
    print(f"  invoke overhead over a direct call: inline {(calls_rows[1][1] - direct) * 1e6:.1f}us, "
          f"worker pool + deadline {(calls_rows[2][1] - direct) * 1e6:.1f}us")
    print()
    measure_figures(calls, rounds, instructions=not (args.quick or args.no_instructions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
