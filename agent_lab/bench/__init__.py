"""`python run_lab.py bench`: measured figures, never asserted in tests.

Each section lives in its own module with a `main(argv) -> int`; this front door runs them in order.
Peers (python-jsonschema, fastjsonschema, pydantic, ...) are imported lazily by the sections and
skipped when absent. Figures a target is set for are reported through `agent_lab.bench._figures`:
`--json FILE` writes them in one stable shape (name, unit, ours, peer, ratio, spread, ...), and
`--compare OLD.json` prints those that got worse than in an earlier file (exit 1 if any did).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Sequence

from . import _figures

__all__ = ["SECTIONS", "main"]

# Section name -> module that measures it.
SECTIONS = {
    "schema": "agent_lab.bench.schema_bench",
    "runtime": "agent_lab.bench.runtime_bench",
    "redos": "agent_lab.bench.redos_bench",
    "recursion": "agent_lab.bench.recursion_bench",
    "stores": "agent_lab.bench.store_bench",
    "search": "agent_lab.bench.search_bench",
    "gate": "agent_lab.bench.gate_bench",
    "scale": "agent_lab.bench.scale_bench",
    "names": "agent_lab.bench.names_bench",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="run_lab.py bench",
        description=__doc__.splitlines()[0],
        epilog="Other options go to every section run (all take --rounds; redos also takes --budget and "
        "--skip-amplification, recursion --give-up-after, so give those with --only); see "
        "`python -m agent_lab.bench.<section>_bench --help` for each section's own options.",
    )
    parser.add_argument(
        "--only", type=_sections, action="extend", metavar="SECTION[,SECTION...]",
        help=f"run only these sections, in the order given (repeatable; one of {', '.join(sorted(SECTIONS))})"
    )
    parser.add_argument("--json", metavar="FILE", help="write the reported figures to FILE (JSON, stable shape)")
    parser.add_argument("--compare", metavar="OLD", help="compare the figures with an earlier --json file; "
                        "exit 1 if one got worse by more than --threshold")
    parser.add_argument("--threshold", type=float, default=0.10, metavar="FRACTION",
                        help="how much worse counts as a regression for --compare (default 0.10 = 10%%)")
    args, rest = parser.parse_known_args(argv)
    if not 0 <= args.threshold < 100:
        parser.error("--threshold must be a fraction >= 0, e.g. 0.1")
    old = None
    if args.compare:
        try:
            old = _figures.read_figures(args.compare)
        except ValueError as problem:
            parser.exit(2, f"run_lab.py bench: {problem}\n")
    del _figures.FIGURES[:]
    status = 0
    for name in dict.fromkeys(args.only or SECTIONS):  # each section once, in the order first named
        print(f"== {name} ==", flush=True)
        section = importlib.import_module(SECTIONS[name])
        status = max(status, section.main(rest))
        print(flush=True)
    figures = list(_figures.FIGURES)
    if figures:
        print(_figures_table(figures))
        print(_figures.missed_line(figures))
    if args.json:
        try:
            _write_json(args.json, _figures.figures_document(figures))
        except OSError as problem:
            print(f"run_lab.py bench: cannot write {args.json}: {problem.strerror or problem}", file=sys.stderr)
            return 2
        print(f"\nwrote {len(figures)} figures to {args.json}")
    if old is not None:
        worse = _figures.regressions(old, figures, args.threshold)
        print(f"\ncompared with {args.compare}: {len(worse)} figure(s) worse by more than {args.threshold:.0%} "
              "(and more than either run's spread)")
        for before, after, change in worse:
            print(f"  {after.name}: {before.compared:.4g} -> {after.compared:.4g} ({change:+.0%} worse)")
        if worse:
            status = max(status, 1)
    return status


def _sections(text: str) -> list[str]:
    """`--only`'s value: one section or several, comma-separated (`runtime,names,stores,gate`)."""
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"no section {', '.join(map(repr, unknown))} (choose from "
                                         f"{', '.join(sorted(SECTIONS))})")
    return names


def _figures_table(figures: Sequence[_figures.Figure]) -> str:
    rows = []
    for figure in figures:
        rows.append((
            figure.name,
            f"{figure.ours:.4g} {figure.unit}",
            "-" if figure.peer is None else f"{figure.peer:.4g}",
            "-" if figure.ratio is None else f"{figure.ratio:.3f}",
            f"{figure.spread:.3g}",
            str(figure.rounds),
            figure.target or "-",
            figure.verdict,
        ))
    return ("Figures (medians over rounds; ratio = median of per-round ours/peer; the target is on the ratio, "
            "or on ours without a peer)\n" + _figures.table(
                ("figure", "ours", "peer", "ratio", "spread", "rounds", "target", "verdict"), rows))


def _write_json(path: str, document: object) -> None:
    """Written to a temporary name beside `path`, then renamed: never half a file."""
    from ..atomicfile import write_text

    write_text(path, json.dumps(document, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
