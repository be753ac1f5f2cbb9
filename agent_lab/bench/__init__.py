"""`python run_lab.py bench`: measured figures, never asserted in tests.

Each section lives in its own module with a `main(argv) -> int`; this front door runs them in order.
Peers (python-jsonschema, fastjsonschema) are imported lazily by the sections and skipped when absent.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Sequence

__all__ = ["SECTIONS", "main"]

# Section name -> module that measures it.
SECTIONS = {
    "schema": "agent_lab.bench.schema_bench",
    "runtime": "agent_lab.bench.runtime_bench",
    "redos": "agent_lab.bench.redos_bench",
    "recursion": "agent_lab.bench.recursion_bench",
    "stores": "agent_lab.bench.store_bench",
    "search": "agent_lab.bench.search_bench",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="run_lab.py bench",
        description=__doc__.splitlines()[0],
        epilog="Other options go to every section run (all take --rounds; redos also takes --budget and "
        "--skip-amplification, recursion --give-up-after, so give those with --only); see "
        "`python -m agent_lab.bench.schema_bench --help`, `python -m agent_lab.bench.runtime_bench --help`, "
        "`python -m agent_lab.bench.redos_bench --help`, `python -m agent_lab.bench.recursion_bench --help` and "
        "`python -m agent_lab.bench.store_bench --help`.",
    )
    parser.add_argument(
        "--only", choices=sorted(SECTIONS), action="append", help="run only this section (repeatable)"
    )
    args, rest = parser.parse_known_args(argv)
    status = 0
    for name in args.only or list(SECTIONS):
        print(f"== {name} ==", flush=True)
        section = importlib.import_module(SECTIONS[name])
        status = max(status, section.main(rest))
        print(flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
