"""The contract gate as CI runs it: `run_lab.py tool-eval` in a child process, timed from outside.

Three figures, over interleaved rounds (printed, never asserted):
- `gate.wall_s`: wall time of `tool-eval --out TMP` on this checkout's shipped cases, start-up included.
- `gate.wall_vs_longest_case`: that wall time over the longest single case run alone the same way
  (`tool-eval --cases ONE.jsonl`): how close running the cases together comes to the floor that the
  slowest one sets. Every case is timed alone once to find the slowest few; each round times those again.
- `gate.cpu_vs_base`: the child's CPU time (user + system, `getrusage(RUSAGE_CHILDREN)` deltas) over
  that of an older checkout (`--against PATH`: the reference is 1251b3d, target <= 0.6), both running
  the cases the older checkout shipped (the same work: each is still shipped, under the same id; this
  checkout runs them as it ships them now, since the case format has moved on), the runs
  alternating which goes first: the median of the per-round ratios and their spread, over at least
  `MIN_ROUNDS` rounds. `gate.cpu_own_cases_vs_base` (no target) is this checkout on its own shipped
  cases against the same base run: what the cases added since (fault cases run crash children) cost.
  Without `--against` both are skipped.

Each figure is printed with its target and whether its median met it ("met" or "MISSED"). Only the CPU
figure has one (issue 21's, which replaced the wall targets of issue 11: the fault cases since added
run crash children, so the wall time is theirs more than the gate's).

Every child gets the same environment: bytecode is cached under one temporary PYTHONPYCACHEPREFIX
(a checkout may be read-only, and PYTHONDONTWRITEBYTECODE is dropped) and each command runs once
before the rounds, so the figures measure the gate, not compiling its source.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from . import _figures
from ..lab.paths import resolved

__all__ = ["main"]

CHECKOUT = Path(__file__).resolve().parents[2]  # the directory holding run_lab.py and agent_lab/
DEFAULT_ROUNDS = 5
MIN_ROUNDS = 5  # fewer rounds say too little on a shared machine: --rounds below this is raised to it
CPU_TARGET = "<= 0.6"  # tool-eval CPU against the 1251b3d reference (issue 21)
LONGEST_CANDIDATES = 3  # cases re-timed alone each round (the slowest of the first pass)
SHIPPED_CASES = Path("datasets") / "tool-cases.jsonl"


class _Runner:
    """Runs `run_lab.py tool-eval` of one checkout in a child process and measures it."""

    def __init__(self, checkout: Path, scratch: Path, environment: dict[str, str]) -> None:
        self.checkout = checkout
        self.scratch = scratch
        self.environment = environment

    def run(self, *arguments: str) -> tuple[float, float]:
        """(wall seconds, CPU seconds) of one `tool-eval` run; RuntimeError unless the gate passed."""
        out = tempfile.mkdtemp(prefix="out-", dir=self.scratch)
        command = [sys.executable, str(self.checkout / "run_lab.py"), "tool-eval", "--out", out, *arguments]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=self.checkout, env=self.environment, capture_output=True, text=True,
                              check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"{self.checkout}: tool-eval {' '.join(arguments)} exited {done.returncode}: {last[0]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu


def _child_environment(pycache: Path) -> dict[str, str]:
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment["PYTHONPYCACHEPREFIX"] = str(pycache)
    return environment


def _single_case_files(checkout: Path, directory: Path) -> list[tuple[str, Path]]:
    """One file per case of the checkout's shipped cases: (case id, path)."""
    files: list[tuple[str, Path]] = []
    for line in (checkout / SHIPPED_CASES).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        case_id = str(json.loads(line)["case_id"])
        path = directory / f"{len(files):03d}.jsonl"
        path.write_text(line + "\n", encoding="utf-8")
        files.append((case_id, path))
    return files


def _cases_shipped_by(base: Path, checkout: Path, path: Path) -> Path:
    """`path`, written with this checkout's shipped cases whose ids the base checkout shipped too."""
    def ids(lines: list[str]) -> list[str]:
        return [str(json.loads(line)["case_id"]) for line in lines]

    base_lines = [line for line in (base / SHIPPED_CASES).read_text(encoding="utf-8").splitlines() if line.strip()]
    our_lines = [line for line in (checkout / SHIPPED_CASES).read_text(encoding="utf-8").splitlines() if line.strip()]
    wanted = set(ids(base_lines))
    kept = [line for line, case_id in zip(our_lines, ids(our_lines)) if case_id in wanted]
    if len(kept) != len(wanted):
        raise RuntimeError(f"{len(wanted) - len(kept)} of the base's {len(wanted)} cases are no longer shipped")
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_lab.py bench --only gate", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=f"interleaved rounds (default {DEFAULT_ROUNDS})")
    parser.add_argument("--against", metavar="PATH", help="an older checkout to compare CPU time with "
                        "(e.g. today's main); without it gate.cpu_vs_base is skipped")
    args, _ = parser.parse_known_args(argv)
    rounds = max(MIN_ROUNDS, args.rounds)
    if rounds != args.rounds:
        print(f"--rounds {args.rounds}: raised to {MIN_ROUNDS}, the fewest this section reports on")
    against = resolved(args.against) if args.against else None  # a link loop: "no run_lab.py there"
    if against is not None and not (against / "run_lab.py").is_file():
        print(f"--against {args.against}: no run_lab.py there (a checkout of agent-lab is needed)")
        return 2
    with tempfile.TemporaryDirectory(prefix="agent-lab-gate-bench-") as temporary:
        scratch = Path(temporary)
        environment = _child_environment(scratch / "pycache")
        ours = _Runner(CHECKOUT, scratch, environment)
        base = _Runner(against, scratch, environment) if against is not None else None
        try:
            return _measure(ours, base, scratch, rounds)
        except RuntimeError as problem:
            print(f"gate bench: {problem}")
            return 1


def _measure(ours: _Runner, base: _Runner | None, scratch: Path, rounds: int) -> int:
    ours.run()  # warm-up: byte-compile into the shared cache
    if base is not None:
        base.run()
    cases_dir = scratch / "cases"
    cases_dir.mkdir()
    singles = _single_case_files(ours.checkout, cases_dir)
    alone = sorted(((ours.run("--cases", str(path))[0], case_id, path) for case_id, path in singles), reverse=True)
    print(f"{len(singles)} cases, each run alone once; the slowest:")
    print(_figures.table(("case", "wall alone"), [(case_id, f"{wall:.3f} s") for wall, case_id, _ in alone[:5]]))
    slowest = alone[:LONGEST_CANDIDATES]

    walls: dict[str, list[float]] = {"ours": [], "base": []}
    longest: list[float] = []

    def measure(name: str, runner: _Runner) -> Any:
        def once() -> float:
            wall, cpu = runner.run()
            walls[name].append(wall)
            return cpu
        return once

    def longest_alone() -> float:
        longest.append(max(ours.run("--cases", str(path))[0] for _, _, path in slowest))
        return longest[-1]

    measurements = {"ours": measure("ours", ours), "longest": longest_alone}
    if base is not None:
        base_cases = str(_cases_shipped_by(base.checkout, ours.checkout, scratch / "base-cases.jsonl"))
        measurements["base"] = measure("base", base)
        measurements["ours on the base's cases"] = lambda: ours.run("--cases", base_cases)[1]
    cpu = _figures.interleave(measurements, rounds)

    verdicts = [
        # No wall targets: issue 11's (1.5 s, 1.5x the longest case) were replaced by issue 21's CPU target.
        _figures.report("gate.wall_s", unit="s", ours=walls["ours"],
                        note="run_lab.py tool-eval on the shipped cases, child process, start-up included"),
        _figures.report("gate.wall_vs_longest_case", unit="s", ours=walls["ours"], peer=longest,
                        note="peer: the slowest single case run alone the same way (tool-eval --cases ONE.jsonl)"),
    ]
    rows = [("tool-eval wall", f"{_median(walls['ours']):.3f} s", _span(walls["ours"])),
            ("tool-eval CPU", f"{_median(cpu['ours']):.3f} s", _span(cpu["ours"])),
            ("longest case alone, wall", f"{_median(longest):.3f} s", _span(longest))]
    if base is not None:
        same = cpu["ours on the base's cases"]
        verdicts.append(_figures.report(
            "gate.cpu_vs_base", unit="s CPU", ours=same, peer=cpu["base"], target=CPU_TARGET,
            note=f"child CPU (user+system) against {base.checkout}, both on its shipped cases"))
        verdicts.append(_figures.report(
            "gate.cpu_own_cases_vs_base", unit="s CPU", ours=cpu["ours"], peer=cpu["base"],
            note=f"child CPU against {base.checkout}, each on its own shipped cases"))
        rows += [("tool-eval CPU on the base's cases", f"{_median(same):.3f} s", _span(same)),
                 ("base tool-eval wall", f"{_median(walls['base']):.3f} s", _span(walls["base"])),
                 ("base tool-eval CPU", f"{_median(cpu['base']):.3f} s", _span(cpu["base"]))]
    else:
        print("gate.cpu_vs_base skipped: no --against PATH (an older checkout to compare with) was given")
    print(f"medians over {rounds} interleaved rounds (min..max):")
    print(_figures.table(("measured", "median", "range"), rows))
    print(_figures.table(("figure", "median", "spread", "rounds", "target", "verdict"),
                         [(figure.name, f"{_compared(figure):.3f}", f"{figure.spread:.3f}", str(figure.rounds),
                           figure.target or "-", _verdict(figure)) for figure in verdicts]))
    return 0


def _compared(figure: _figures.Figure) -> float:
    """What the target is about: the median ratio for a figure with a peer, else the median itself."""
    return figure.ratio if figure.ratio is not None else figure.ours


def _verdict(figure: _figures.Figure) -> str:
    """"met" or "MISSED" for a target "<= X" (the median against X), "-" for no target."""
    if not figure.target or not figure.target.startswith("<="):
        return "-"
    limit = float(figure.target[2:])
    return "met" if _compared(figure) <= limit else f"MISSED (by {_compared(figure) - limit:.3f})"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _span(values: Sequence[float]) -> str:
    return f"{min(values):.3f}..{max(values):.3f} s"


if __name__ == "__main__":
    raise SystemExit(main())
