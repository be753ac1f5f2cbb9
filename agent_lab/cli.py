"""The `run_lab.py` / `python -m agent_lab` / `agent-lab` command line: thin, one library call per subcommand.

Exit codes: 0 ok (gate passed), 1 gate failed, 2 bad input (`FILE:LINE: what is wrong` on stderr).
Default paths are relative to the current directory: run from the repository root.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["EXIT_BAD_INPUT", "EXIT_GATE_FAILED", "EXIT_OK", "build_parser", "main"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "agent-lab"
    if program == "__main__.py":
        program = "python -m agent_lab"
    parser = argparse.ArgumentParser(prog=program, description="agent-lab: safe tool calls for LLM agents.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    tool_eval = commands.add_parser("tool-eval", help="replay the tool cases through both strategies; gate on the candidate")
    tool_eval.add_argument("--cases", metavar="FILE", action="append", type=_path,
                           help="a JSONL case file (repeatable; default datasets/tool-cases.jsonl)")
    tool_eval.add_argument("--out", metavar="DIR", default="reports", type=_path,
                           help="report directory (default reports/)")
    tool_eval.add_argument("--junit", metavar="FILE", type=_path, help="where to write JUnit XML (default DIR/junit.xml)")
    tool_eval.set_defaults(run=_tool_eval)

    bench = commands.add_parser("bench", help="measure validator and runtime figures (never a gate)", add_help=False)
    bench.set_defaults(run=_bench, passes_arguments_through=True)  # agent_lab.bench parses its own options

    # Other subcommands are added below this line by their owners.
    export = commands.add_parser("export", help="print the candidate's tool catalog in a host's format (JSON list)")
    export.add_argument("--format", required=True, choices=["openai", "openai-chat", "anthropic", "mcp"],
                        help="the host: OpenAI Responses, OpenAI Chat Completions, Anthropic Messages or MCP")
    export.add_argument("--strict", action="store_true",
                        help="OpenAI strict mode: closed objects, every property required, optional ones nullable")
    export.set_defaults(run=_export)

    serve_mcp = commands.add_parser(
        "serve-mcp", help="serve the candidate's ticket tools over MCP stdio (writes answer approval_required)"
    )
    serve_mcp.add_argument("--verbose", action="store_true", help="log session events to stderr")
    serve_mcp.set_defaults(run=_serve_mcp)
    _add_model_eval_parser(commands)
    return parser


def _path(text: str) -> str:
    """An argparse type: a path must not be empty (Path("") would quietly mean the current directory)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


def _tool_eval(args: argparse.Namespace) -> int:
    from .lab.cases import CaseFileError
    from .lab.reports import ReportWriteError
    from .lab.tool_eval import DEFAULT_CASES, run_tool_eval

    try:
        evaluation = run_tool_eval(args.cases or [DEFAULT_CASES], out_dir=args.out, junit_path=args.junit)
    except CaseFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except ReportWriteError as error:
        print(f"cannot write the reports: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:  # e.g. no usable temporary directory for the replay's receipt files
        print(f"tool-eval: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        _print_summary(evaluation, args.out)
    except BrokenPipeError:  # the reader went away (`| head`): the gate's verdict still decides the exit code
        _silence_stdout()
    return EXIT_OK if evaluation.gate_passed else EXIT_GATE_FAILED


def _print_summary(evaluation: Any, out: str) -> None:
    for strategy in ("baseline", "candidate"):
        figures = evaluation.metrics[strategy]
        print(f"{strategy:9} {figures['name']:18} {figures['cases_passed']}/{figures['cases']} cases passed, "
              f"{figures['unsafe_side_effects']} unsafe and {figures['duplicate_side_effects']} duplicate side effects")
    for check in evaluation.gate:
        print(f"[{'x' if check.passed else ' '}] {check.name}: {check.detail}")
    print(f"gate {'passed' if evaluation.gate_passed else 'FAILED'}; reports in {out}")
    sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    try:
        return int(bench.main(args.passed_through))
    except SystemExit as exit_request:  # the bench parser's --help (0) or usage error (2)
        return int(exit_request.code or 0) if not isinstance(exit_request.code, str) else EXIT_BAD_INPUT


def _export(args: argparse.Namespace) -> int:
    import json

    from .adapters import StrictSchemaError, export_catalog
    from .lab import candidate

    if args.strict and args.format not in ("openai", "openai-chat"):
        print(f"export: --strict is OpenAI's strict mode; it does not apply to --format {args.format}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        tools = export_catalog(candidate.candidate_specs(), args.format, strict=args.strict)
    except StrictSchemaError as error:
        print(f"{candidate.__file__}:{_line_naming(candidate.__file__, error.tool)}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(json.dumps(tools, indent=2, ensure_ascii=False))
    return EXIT_OK


def _line_naming(path: str, tool: str | None) -> int:
    """The first line of `path` that names the tool in quotes (1 when none does), for FILE:LINE messages."""
    try:
        with open(path, encoding="utf-8") as source:
            for number, line in enumerate(source, start=1):
                if tool is not None and f'"{tool}"' in line:
                    return number
    except OSError:
        pass
    return 1


def _serve_mcp(args: argparse.Namespace) -> int:
    import logging

    from .lab.backend import TicketBackend
    from .lab.candidate import build_candidate_registry
    from .mcp import serve
    from .policy import Actor

    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format="agent-lab mcp: %(levelname)s %(message)s")
    # The server's own identity (never the client's): reads and writes for tenant acme, and no approvals,
    # so reads run and every write answers approval_required.
    actor = Actor(id="mcp-client", tenant="acme", permissions={"tickets:read", "tickets:write"})
    with build_candidate_registry(TicketBackend()) as registry:
        return serve(registry, actor=actor)


def _add_model_eval_parser(commands: Any) -> None:
    """The model-eval subcommand's options (its runner is `_model_eval`)."""
    model_eval = commands.add_parser(
        "model-eval", help="run a lab's tasks with a model (or a scripted agent) on each surface; pass^k over repeats")
    model_eval.add_argument("--lab", metavar="MODULE:ATTR", help="the lab (default: the built-in ticket lab)")
    model_eval.add_argument("--tasks", metavar="FILE", action="append", type=_path,
                            help="a JSONL task file (repeatable; default: the ticket lab's shipped tasks)")
    model_eval.add_argument("--model", metavar="SPEC", help="openai:MODEL[@BASE_URL][#KEY_ENV], openai-responses:..., "
                            "anthropic:..., or python:MODULE:ATTR (default: the scripted reference agent)")
    model_eval.add_argument("--repeats", metavar="K", type=int, default=3, help="trials per task and surface (default 3)")
    model_eval.add_argument("--split", choices=["dev", "heldout", "all"], default="all", help="which tasks (default all)")
    cassette = model_eval.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="DIR", type=_path, help="record every model exchange into DIR/cassette.jsonl")
    cassette.add_argument("--replay", metavar="DIR", type=_path, help="answer from DIR/cassette.jsonl only (no network)")
    model_eval.add_argument("--timeout", metavar="SECONDS", type=float, default=60.0, help="per request (default 60)")
    model_eval.add_argument("--attempts", metavar="N", type=int, default=4,
                            help="tries per request on 429, 5xx, timeouts and broken answers (default 4)")
    model_eval.add_argument("--out", metavar="DIR", default="reports/model-eval", type=_path,
                            help="report directory (default reports/model-eval/)")
    model_eval.add_argument("--junit", metavar="FILE", type=_path, help="where to write JUnit XML (default DIR/junit.xml)")
    model_eval.add_argument("-v", "--verbose", action="store_true", help="one line per trial on stderr")
    model_eval.set_defaults(run=_model_eval)


def _model_eval(args: argparse.Namespace) -> int:
    """Exit 0: every trial ran; 1: some trials ended in an infrastructure failure (reports say which);
    2: bad input (tasks, lab, model spec, cassette, a replayed request with no recording, report paths)."""
    from .lab.reports import ReportWriteError
    from .modeleval import labglue
    from .modeleval.cassettes import CassetteError, MissingRecording
    from .modeleval.models import ModelSpecError, UrllibTransport
    from .modeleval.runner import DEFAULT_MODEL, run_model_eval
    from .modeleval.shipped import SHIPPED_TASKS
    from .modeleval.tasks import TaskFileError
    from .redaction import redact_text

    try:
        lab = labglue.load_lab_target(args.lab or labglue.DEFAULT_LAB)
        transport = UrllibTransport(timeout_s=args.timeout, max_attempts=args.attempts)
        progress = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
        evaluation = run_model_eval(
            lab, args.tasks or [str(SHIPPED_TASKS)], out_dir=args.out, junit_path=args.junit,
            model=args.model or DEFAULT_MODEL, repeats=args.repeats, split=args.split, record=args.record,
            replay=args.replay, transport=transport, progress=progress)
    except TaskFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except MissingRecording as error:
        secrets = labglue.world_secrets(lab, labglue.open_world(lab))
        print(redact_text(f"model-eval: {error}", secrets), file=sys.stderr)
        return EXIT_BAD_INPUT
    except ReportWriteError as error:
        print(f"cannot write the reports: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (labglue.LabError, ModelSpecError, CassetteError, ValueError, OSError) as error:
        print(f"model-eval: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from .modeleval.reports import source_line

    print(f"answers from: {source_line(evaluation)}")
    for surface, splits in evaluation.metrics.items():
        figures = splits["all"]
        success = figures["task_success"]
        pass_k = figures["pass_hat_k"]
        shown = f"pass^{args.repeats} {pass_k[str(args.repeats)]:.4f}" if pass_k else "pass^k n/a"
        print(f"{surface}: {success['numerator']}/{success['denominator']} trials succeeded, {shown}, "
              f"{figures['unsafe_effects']} unsafe effect(s), {figures['infrastructure_failures']} infrastructure failure(s)")
    print(f"reports in {args.out}")
    return EXIT_GATE_FAILED if evaluation.infrastructure_failures else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]) and run one subcommand; returns the exit code."""
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown and not getattr(args, "passes_arguments_through", False):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exit_request:  # argparse's own usage errors (2) and --help (0)
        return int(exit_request.code or 0) if not isinstance(exit_request.code, str) else EXIT_BAD_INPUT
    args.passed_through = unknown
    try:
        return int(args.run(args))
    except BrokenPipeError:  # the reader went away (`export ... | head`): not our failure, no traceback
        _silence_stdout()
        return EXIT_OK


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise into the closed pipe."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    raise SystemExit(main())
