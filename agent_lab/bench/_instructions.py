"""Instructions per call, counted by valgrind's callgrind, beside a section's timings.

On a shared machine wall time moves with everything else that runs; the instructions a call executes do
not (within a few hundred, from the garbage collector and the allocator). `count` runs a child Python
under callgrind that builds the measurements (`factory`, "module:function" returning name -> callable),
runs each `calls` times and calls `sys.getrecursionlimit()` between them: callgrind dumps its counters
on entering that C function (`--dump-before`), so each dump holds one measurement's loop. Valgrind is
not a dependency: without it (or a Python whose symbols it cannot see) the counts are simply not made.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Optional, Sequence

__all__ = ["count"]

MARKER_FUNCTION = "sys_getrecursionlimit"
"""The C function (CPython's `sys.getrecursionlimit`) whose entry marks the end of a measurement."""

CHILD_TIMEOUT_S = 900.0
"""A child that has not finished in this long is stopped (callgrind runs code some 50 times slower)."""


def count(factory: str, calls: int) -> tuple[Optional[dict[str, float]], str]:
    """Instructions per call of each measurement `factory` builds (the loop's own cost taken off), or
    None and why there are none."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None, "valgrind is not on PATH"
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "callgrind.out")
        command = [valgrind, "--tool=callgrind", f"--dump-before={MARKER_FUNCTION}", f"--callgrind-out-file={out}",
                   sys.executable, "-m", "agent_lab.bench._instructions", factory, str(calls)]
        try:
            done = subprocess.run(command, cwd=directory, env=environment, capture_output=True, text=True,
                                  timeout=CHILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as problem:
            return None, f"callgrind did not finish ({type(problem).__name__})"
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return None, f"the measured child failed under callgrind (exit {done.returncode})"
        names = lines[-1].split("\t")
        totals = [_total(path) for path in sorted(glob.glob(out + ".*"), key=_dump_number)]
        if len(totals) < len(names):
            return None, f"callgrind made {len(totals)} dumps for {len(names)} loops ({MARKER_FUNCTION} not seen?)"
    per_call = {name: total / calls for name, total in zip(names, totals[-len(names):])}
    loop = per_call.pop("empty loop")
    return {name: value - loop for name, value in per_call.items()}, ""


def _dump_number(path: str) -> int:
    suffix = path.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else -1


def _total(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as dump:
        for line in dump:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    return 0


def _child(argv: Sequence[str]) -> int:
    """In the child: build the measurements, warm each up, then run each loop between two markers."""
    factory, calls = argv[0], int(argv[1])
    module, _, function = factory.partition(":")
    measurements: dict[str, Callable[[], object]] = {"empty loop": lambda: None}
    measurements.update(getattr(importlib.import_module(module), function)())
    for measure in measurements.values():
        for _ in range(calls):
            measure()
    sys.getrecursionlimit()
    for measure in measurements.values():
        for _ in range(calls):
            measure()
        sys.getrecursionlimit()
    print("\t".join(measurements))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
