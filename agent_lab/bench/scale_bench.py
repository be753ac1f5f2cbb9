"""Scale: a registry of 10,000 distinct tools, and what building specs again costs.

The tools are distinct and shaped like real ones: each has its own name and description, an input
schema of 4 to 7 properties picked from a pool of common argument names (each with its own
description) over a pool of common leaf shapes (ids with patterns, bounded strings and integers,
enums, arrays of strings, date-time strings), `required` and `additionalProperties: false`, and an
output schema from a small pool. Measured:
  * memory per registered tool at 10,000 tools (tracemalloc: everything the registry and its specs
    allocate, divided by the tools, minus the compact JSON size of each tool's two schemas), and the
    GC-tracked objects per tool; the same for tools whose every leaf is unique (the worst case);
  * `invoke` latency (inline, a read) with 1, 100 and 10,000 tools registered, interleaved rounds;
  * `catalog()` at 10,000 tools, beside a catalog that deep-copies every schema (what it did before);
  * `ToolSpec` build time for a set of tools with empty validator caches (first) and again (repeated).

Figures depend on the machine; they are printed and reported, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
import tracemalloc
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..calls import ToolCall
from ..policy import Actor
from ..registry import Registry
from ..spec import ToolSpec
from ._figures import interleave, report, table

__all__ = ["distinct_tool", "main"]

ACTOR = Actor(id="bench-user", tenant="bench", permissions={"records:read"})

_LEAVES: List[Dict[str, Any]] = [
    {"type": "string", "pattern": "^[A-Z]{2,4}-[0-9]{1,6}$"},
    {"type": "string", "minLength": 1, "maxLength": 200},
    {"type": "string", "maxLength": 2000},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "enum": ["low", "normal", "high", "urgent"]},
    {"type": "string", "enum": ["open", "pending", "closed"]},
    {"type": "string", "enum": ["asc", "desc"]},
    {"type": "integer", "minimum": 1, "maximum": 100},
    {"type": "integer", "minimum": 0},
    {"type": "integer", "minimum": 1, "maximum": 5},
    {"type": "number", "minimum": 0},
    {"type": "boolean"},
    {"type": "array", "items": {"type": "string", "maxLength": 50}, "maxItems": 20},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9-]{1,32}$"}, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 100},
    {"type": "string", "pattern": "^[A-Za-z0-9_-]{8,64}$"},
    {"type": "string", "minLength": 3, "maxLength": 80},
]
_NAMES = ["id", "query", "title", "body", "note", "status", "priority", "limit", "offset", "cursor", "order",
          "tags", "labels", "owner", "assignee", "email", "due", "since", "until", "amount", "currency",
          "count", "enabled", "archived", "project", "team", "region", "action_id", "reason", "comment",
          "language", "timezone", "page_size", "include_closed", "customer", "account", "version", "path",
          "branch", "channel"]
_NOUNS = ["ticket", "invoice", "order", "customer", "project", "issue", "build", "deployment", "message",
          "channel", "document", "page", "user", "team", "calendar_event", "payment", "refund", "shipment",
          "product", "report", "alert", "incident", "repository", "branch", "comment", "task", "lead", "contact",
          "contract", "asset"]
_VERBS = ["get", "list", "search", "create", "update", "close", "archive", "assign", "export", "count"]
_OUTPUTS: List[Dict[str, Any]] = [
    {"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string"}},
     "required": ["id", "status"], "additionalProperties": False},
    {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object"}},
                                      "next_cursor": {"type": ["string", "null"]}}, "required": ["items"]},
    {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}}, "required": ["count"]},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "message": {"type": "string"}}},
]


def distinct_tool(index: int, *, unique_leaves: bool = False) -> Dict[str, Any]:
    """ToolSpec keyword arguments for tool number `index` (deterministic); with `unique_leaves`, every
    leaf also gets a bound of its own, so nothing compiled can be shared with another tool."""
    chooser = random.Random(index)
    noun = _NOUNS[index % len(_NOUNS)]
    verb = _VERBS[(index // len(_NOUNS)) % len(_VERBS)]
    names = chooser.sample(_NAMES, chooser.randint(4, 7))
    properties: Dict[str, Any] = {}
    for name in names:
        leaf = json.loads(json.dumps(chooser.choice(_LEAVES)))
        if unique_leaves:
            leaf["maxLength" if leaf.get("type") == "string" else "maxProperties"] = 1000 + index
        leaf["description"] = f"The {name.replace('_', ' ')} of the {noun.replace('_', ' ')} (tool {index})."
        properties[name] = leaf
    return {
        "name": f"{verb}_{noun}_{index:05d}",
        "description": f"{verb.capitalize()} {noun.replace('_', ' ')} records in system {index // 100}; "
                       f"answers with the stored record or a page of them.",
        "input_schema": {"type": "object", "properties": properties, "required": names[: chooser.randint(1, 3)],
                         "additionalProperties": False},
        "output_schema": json.loads(json.dumps(chooser.choice(_OUTPUTS))),
        "required_permission": "records:read",
    }


def _compact_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _handler(arguments: Any) -> Dict[str, Any]:
    return {"ok": True}


def _clear_shared_caches() -> None:
    from ..schema import validator_cache
    from ..schema._compiler import SHARED_KEYWORDS
    from ..schema._leaves import SHARED_LEAVES

    validator_cache.clear()
    SHARED_LEAVES.clear()
    SHARED_KEYWORDS.clear()


def registry_memory(count: int, *, unique_leaves: bool = False) -> Dict[str, Any]:
    """Build a registry of `count` distinct tools under tracemalloc; what it holds per tool."""
    arguments = [distinct_tool(index, unique_leaves=unique_leaves) for index in range(count)]
    schema_bytes = sum(_compact_bytes(tool["input_schema"]) + _compact_bytes(tool["output_schema"])
                       for tool in arguments) / count
    _clear_shared_caches()
    Registry(run_inline=True).register(ToolSpec(**distinct_tool(-1)), _handler)  # modules imported on first use
    _clear_shared_caches()
    gc.collect()
    objects_before = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    registry = Registry(run_inline=True)
    for tool in arguments:
        registry.register(ToolSpec(**tool), _handler)
    built_s = time.perf_counter() - started
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    objects = len(gc.get_objects()) - objects_before
    del arguments
    return {"registry": registry, "bytes_per_tool": (after - before) / count, "schema_bytes": schema_bytes,
            "gc_objects_per_tool": objects / count, "build_s_per_tool": built_s / count}


def _invoke_timer(registry: Registry, name: str, calls: int) -> Callable[[], float]:
    call = ToolCall(name, {"id": "AB-1"})

    def per_call() -> float:
        invoke = registry.invoke
        started = time.perf_counter()
        for _ in range(calls):
            invoke(call, actor=ACTOR)
        return (time.perf_counter() - started) / calls

    return per_call


_PROBE: Dict[str, Any] = {"name": "get_record_probe", "description": "Read one record.", "required_permission": "records:read",
          "input_schema": {"type": "object", "properties": {"id": {"type": "string", "maxLength": 20}},
                           "required": ["id"], "additionalProperties": False},
          "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}


def _registry_with(count: int, big: Optional[Registry] = None) -> Registry:
    """A registry with the probe tool and `count - 1` distinct others (or the big one, probe added)."""
    registry = big if big is not None else Registry(run_inline=True)
    if big is None:
        for index in range(count - 1):
            registry.register(ToolSpec(**distinct_tool(index)), _handler)
    registry.register(ToolSpec(**_PROBE), _handler)
    return registry


def _spec_build_timers(count: int) -> Dict[str, Callable[[], float]]:
    """First build of `count` specs with empty shared caches, and the same specs built again."""
    arguments = [distinct_tool(50_000 + index) for index in range(count)]

    def first() -> float:
        _clear_shared_caches()
        started = time.perf_counter()
        for tool in arguments:
            ToolSpec(**tool)
        return (time.perf_counter() - started) / count

    def repeated() -> float:
        for tool in arguments:  # built once, so every schema is in the cache however the rounds go
            ToolSpec(**tool)
        started = time.perf_counter()
        for tool in arguments:
            ToolSpec(**tool)
        return (time.perf_counter() - started) / count

    return {"repeated": repeated, "first": first}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="scale_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (at least 5 are reported)")
    parser.add_argument("--tools", type=int, default=10_000, help="tools in the big registry")
    parser.add_argument("--calls", type=int, default=2_000, help="invokes per round")
    args, _rest = parser.parse_known_args(argv)
    rounds = max(5, args.rounds)
    count = max(2, args.tools)

    worst = registry_memory(min(count, 1_000), unique_leaves=True)
    del worst["registry"]
    measured = registry_memory(count)
    big = measured.pop("registry")
    beyond = measured["bytes_per_tool"] - measured["schema_bytes"]
    rows = [
        (f"{count:,} distinct tools", f"{measured['bytes_per_tool']:,.0f}", f"{measured['schema_bytes']:,.0f}",
         f"{beyond:,.0f}", f"{measured['gc_objects_per_tool']:.1f}", _us(measured["build_s_per_tool"])),
        (f"{min(count, 1_000):,} tools, every leaf unique", f"{worst['bytes_per_tool']:,.0f}", f"{worst['schema_bytes']:,.0f}",
         f"{worst['bytes_per_tool'] - worst['schema_bytes']:,.0f}", f"{worst['gc_objects_per_tool']:.1f}",
         _us(worst["build_s_per_tool"])),
    ]
    print("memory per registered tool (tracemalloc; 'beyond' = bytes minus the compact JSON of its two schemas)")
    print(table(("registry", "bytes/tool", "schema text", "beyond", "GC objects/tool", "build/tool (traced)"), rows))
    report("scale.memory_per_tool", unit="bytes", ours=[beyond], target="<= 8192",
           note=f"{count} distinct tools, beyond the compact JSON of their schemas; "
                f"{measured['gc_objects_per_tool']:.0f} GC objects per tool")
    report("scale.gc_objects_per_tool", unit="objects", ours=[measured["gc_objects_per_tool"]],
           note=f"{count} distinct tools")

    registries = {"1": _registry_with(1), "100": _registry_with(100), f"{count}": _registry_with(count, big)}
    timers = {size: _invoke_timer(registry, _PROBE["name"], args.calls) for size, registry in registries.items()}
    for timer in timers.values():
        timer()  # warm up
    latency = interleave(timers, rounds)
    print(f"\ninvoke (inline read, handler included), median of {rounds} interleaved rounds")
    print(table(("tools registered", "per call"),
                [(size, _us(sorted(values)[len(values) // 2])) for size, values in latency.items()]))
    report("scale.invoke_10k_vs_1", unit="s/call", ours=latency[f"{count}"], peer=latency["1"], target="<= 1.1",
           note=f"invoke with {count} tools registered against 1 tool, same call")

    def catalog_time() -> float:
        started = time.perf_counter()
        big.catalog()
        return time.perf_counter() - started

    def copied_catalog_time() -> float:
        specs = [big.spec(name) for name in big.names()]
        started = time.perf_counter()
        [spec.model_schema() for spec in specs]
        return time.perf_counter() - started

    catalog = interleave({"catalog": catalog_time, "copied": copied_catalog_time}, rounds)
    print(f"\ncatalog() at {count:,} tools: {sorted(catalog['catalog'])[rounds // 2] * 1e3:.1f} ms "
          f"(deep-copying every schema: {sorted(catalog['copied'])[rounds // 2] * 1e3:.1f} ms)")
    report("scale.catalog_10k", unit="s/call", ours=catalog["catalog"], peer=catalog["copied"],
           note=f"catalog() at {count} tools against a catalog of deep copies (model_schema per tool)")

    builds = interleave(_spec_build_timers(20), rounds)
    print(f"\nToolSpec build, per spec: first (empty caches) {_us(sorted(builds['first'])[rounds // 2])}, "
          f"repeated {_us(sorted(builds['repeated'])[rounds // 2])}")
    report("scale.spec_rebuild_vs_first", unit="s/spec", ours=builds["repeated"], peer=builds["first"],
           note="a spec built again (validators from the shared cache) against its first build")
    for registry in registries.values():
        registry.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
