"""The `run_lab.py` / `python -m agent_lab` / `agent-lab` command line: thin, one library call per subcommand.

Exit codes: 0 ok (gate passed), 1 gate failed, 2 bad input (`FILE:LINE: what is wrong` on stderr).
Default paths are relative to the current directory: run from the repository root.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["EXIT_BAD_INPUT", "EXIT_GATE_FAILED", "EXIT_OK", "build_parser", "main"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run_lab.py", description="agent-lab: safe tool calls for LLM agents.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    tool_eval = commands.add_parser("tool-eval", help="replay the tool cases through both strategies; gate on the candidate")
    tool_eval.add_argument("--cases", metavar="FILE", action="append",
                           help="a JSONL case file (repeatable; default datasets/tool-cases.jsonl)")
    tool_eval.add_argument("--out", metavar="DIR", default="reports", help="report directory (default reports/)")
    tool_eval.add_argument("--junit", metavar="FILE", help="where to write JUnit XML (default DIR/junit.xml)")
    tool_eval.set_defaults(run=_tool_eval)

    bench = commands.add_parser("bench", help="measure validator and runtime figures (never a gate)", add_help=False)
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(run=_bench)

    # Other subcommands are added below this line by their owners.
    return parser


def _tool_eval(args: argparse.Namespace) -> int:
    from .lab.cases import CaseFileError
    from .lab.tool_eval import DEFAULT_CASES, run_tool_eval

    try:
        evaluation = run_tool_eval(args.cases or [DEFAULT_CASES], out_dir=args.out, junit_path=args.junit)
    except CaseFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"{error.filename or args.out}:1: cannot write the reports ({error.strerror or type(error).__name__})",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    for strategy in ("baseline", "candidate"):
        figures = evaluation.metrics[strategy]
        print(f"{strategy:9} {figures['name']:18} {figures['cases_passed']}/{figures['cases']} cases passed, "
              f"{figures['unsafe_side_effects']} unsafe and {figures['duplicate_side_effects']} duplicate side effects")
    for check in evaluation.gate:
        print(f"[{'x' if check.passed else ' '}] {check.name}: {check.detail}")
    print(f"gate {'passed' if evaluation.gate_passed else 'FAILED'}; reports in {args.out}")
    return EXIT_OK if evaluation.gate_passed else EXIT_GATE_FAILED


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    return int(bench.main(args.bench_args))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]) and run one subcommand; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse's own usage errors (2) and --help (0)
        return int(exit_request.code or 0) if not isinstance(exit_request.code, str) else EXIT_BAD_INPUT
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
