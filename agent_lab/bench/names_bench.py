"""Unknown tool names at 10,000 tools: how long `invoke` takes to answer `tool_not_found` with close
names, through the name index (agent_lab/names.py), against the scan it replaced (difflib over
every tool the actor may call, as `_close_names` did).

Each round asks every misspelled name once through `Registry.invoke` (the route step, the index and
the refusal) and reports the median and the worst, naming the worst name (the one slowest in most
rounds); the scan is timed on a few of the same names in the same round. Figures:
`scale.unknown_name_ms_10k` (median ms per unknown name, target <= 1) and
`scale.unknown_name_vs_scan_10k` (the index's time over the scan's, names asked by both).

Figures depend on the machine; they are printed, never asserted.
"""

from __future__ import annotations

import argparse
import difflib
import random
import statistics
import time
from typing import List, Optional, Sequence

from ..calls import ToolCall
from ..policy import Actor
from ..registry import MAX_CLOSE_NAMES, Registry
from ..spec import ToolSpec
from . import _figures

__all__ = ["main"]

ACTOR = Actor(id="bench-user", tenant="bench", permissions={"bench:use"})
SERVICES = ["ticket", "invoice", "customer", "order", "shipment", "refund", "account", "user", "product", "catalog",
            "payment", "subscription", "report", "audit", "inventory", "warehouse", "calendar", "meeting", "email",
            "document"]
VERBS = ["get", "list", "create", "update", "delete", "search", "close", "open", "assign", "archive", "restore",
         "export", "import", "sync", "validate", "approve", "reject", "merge", "split", "tag", "untag", "notify",
         "schedule", "cancel", "refresh"]
OBJECTS = ["details", "status", "notes", "history", "owner", "tags", "items", "lines", "summary", "metadata",
           "attachments", "comments", "links", "events", "totals", "permissions", "settings", "labels", "contacts",
           "fields"]


def tool_names(count: int) -> List[str]:
    """`count` names shaped like a large API surface: service_verb_object (20 x 25 x 20 = 10,000)."""
    names = [f"{service}_{verb}_{thing}" for service in SERVICES for verb in VERBS for thing in OBJECTS]
    return names[:count] if count <= len(names) else names + [f"tool_{index}" for index in range(count - len(names))]


def misspell(names: List[str], count: int, seed: int = 1) -> List[str]:
    """Typos: a letter dropped, doubled, swapped or replaced, the end cut off."""
    chooser = random.Random(seed)
    words: List[str] = []
    while len(words) < count:
        name = chooser.choice(names)
        at = chooser.randrange(len(name) - 1)
        kind = chooser.randrange(5)
        word = (name[:at] + name[at + 1:], name[:at] + name[at] + name[at:],
                name[:at] + name[at + 1] + name[at] + name[at + 2:],
                name[:at] + chooser.choice("abcdefghijklmnopqrstuvwxyz") + name[at + 1:],
                name[:max(3, len(name) - chooser.randrange(1, 6))])[kind]
        if word not in names:
            words.append(word)
    return words


def build_registry(names: List[str]) -> Registry:
    registry = Registry(run_inline=True)
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": False}
    for name in names:
        registry.register(ToolSpec(name=name, description="A tool.", input_schema=schema,
                                   required_permission="bench:use"), _handler)
    return registry


def _handler(arguments: object) -> dict:
    return {}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="names_bench", description="Close names for unknown tool names at scale")
    parser.add_argument("--tools", type=int, default=10_000, help="registered tools (default 10000)")
    parser.add_argument("--names", type=int, default=200, help="misspelled names asked per round (default 200)")
    parser.add_argument("--scanned", type=int, default=4, help="of those, asked of the scan per round (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--quick", action="store_true", help="1,000 tools, 20 names, 1 round: a smoke run")
    args, _unknown = parser.parse_known_args(argv)
    tools, asked, rounds = (1000, 20, 1) if args.quick else (max(1, args.tools), max(1, args.names), max(1, args.rounds))
    scanned = max(1, min(args.scanned, asked))
    names = tool_names(tools)
    started = time.perf_counter()
    registry = build_registry(names)
    built_s = time.perf_counter() - started
    words = misspell(names, asked)
    try:
        for word in words:  # warm up: the index's bit sets are built on first use
            registry.invoke(ToolCall(word, {}), actor=ACTOR)
        medians: List[float] = []
        worsts: List[float] = []
        slowest: List[str] = []
        ours_same: List[float] = []
        scans: List[float] = []

        def index_round() -> float:
            timings = []
            for word in words:
                begun = time.perf_counter()
                result = registry.invoke(ToolCall(word, {}), actor=ACTOR)
                timings.append((time.perf_counter() - begun) * 1000.0)
                assert result.error is not None and result.error.code == "tool_not_found"
            medians.append(statistics.median(timings))
            worsts.append(max(timings))
            slowest.append(words[timings.index(worsts[-1])])
            ours_same.append(statistics.mean(timings[:scanned]))
            return medians[-1]

        def scan_round() -> float:
            timings = []
            for word in words[:scanned]:
                begun = time.perf_counter()
                visible = [name for name in registry.names() if ACTOR.may(registry.spec(name).required_permission)]
                difflib.get_close_matches(word, visible, n=MAX_CLOSE_NAMES)
                timings.append((time.perf_counter() - begun) * 1000.0)
            scans.append(statistics.mean(timings))
            return scans[-1]

        _figures.interleave({"index": index_round, "scan": scan_round}, rounds)
    finally:
        registry.close()
    _figures.report("scale.unknown_name_ms_10k", unit="ms", ours=medians, target="<= 1", better="lower",
                    note=f"median over {asked} misspelled names per round, invoke -> tool_not_found, {tools} tools")
    _figures.report("scale.unknown_name_vs_scan_10k", unit="ms", ours=ours_same, peer=scans, better="lower",
                    note=f"index against difflib over every visible tool, {scanned} names per round, {tools} tools")
    worst_name = max(set(slowest), key=lambda name: (slowest.count(name), name))
    print(f"Unknown tool names at {tools:,} tools (registering them took {built_s:.1f} s; "
          f"{rounds} rounds of {asked} misspelled names)")
    print(_figures.table(
        ("measurement", "median", "worst round"),
        [("invoke -> tool_not_found, median per name (index)", f"{statistics.median(medians):.3f} ms",
          f"{max(medians):.3f} ms"),
         ("invoke -> tool_not_found, worst name (index)", f"{statistics.median(worsts):.3f} ms",
          f"{max(worsts):.3f} ms"),
         (f"  the worst name (slowest in {slowest.count(worst_name)} of {rounds} rounds): {worst_name!r}", "", ""),
         (f"difflib scan of every visible tool ({scanned} names)", f"{statistics.median(scans):.1f} ms",
          f"{max(scans):.1f} ms")]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
