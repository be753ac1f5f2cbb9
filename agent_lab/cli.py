"""The `run_lab.py` / `python -m agent_lab` / `agent-lab` command line: thin, one library call per subcommand.

Exit codes: 0 ok (gate passed), 1 gate failed, 2 bad input (`FILE:LINE: what is wrong`, or
`MODULE:ATTR: what is wrong` for a lab, on stderr; never a traceback). Code under test never decides
the exit code: a handler's `sys.exit` is a failed call, a lab hook's a broken lab; only a real Ctrl-C
stops a command (see `agent_lab.interrupts`). Paths are relative to the
current directory, whose `pyproject.toml` may configure the lab in `[tool.agent-lab]`; with no lab
configured, the built-in ticket lab and its shipped cases run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

__all__ = ["EXIT_BAD_INPUT", "EXIT_GATE_FAILED", "EXIT_OK", "build_parser", "main", "run"]

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports a command it stopped
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM)
COMMANDS = ("tool-eval", "bench", "export", "serve-mcp", "inspect", "model-eval", "lint", "lock", "catalog-cost",
            "docs")
"""Every command's name, as `build_parser` adds them (a test holds the two to each other)."""
SOURCES = "--lab MODULE:ATTR or path/to/file.py:ATTR (a Lab); --registry the same (a Registry or a function returning one)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser, every command's; with `only` (a command's name), that command's alone.

    `main` parses one command, and building the dozen parsers it does not use cost about 2 ms of every
    run (`tool-eval` in CI, say). What `only` leaves out is never consulted when that command is the
    first argument: its options, usage and messages are the same, since a command's usage names only
    the program and the command. Without `only` (no command, `--help`, a mistyped name) all are built."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "agent-lab"
    if program == "__main__.py":
        program = "python -m agent_lab"
    parser = argparse.ArgumentParser(prog=program, description="agent-lab: safe tool calls for LLM agents.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    commands: Any = subparsers if only is None else _OneCommand(subparsers, only)

    tool_eval = commands.add_parser(
        "tool-eval", help="replay a lab's cases on each of its surfaces; gate on the candidates",
        description="Replay a lab's cases on each of its surfaces, write the reports, and gate on the candidates. "
                    "Defaults come from [tool.agent-lab] in ./pyproject.toml; flags beat it.")
    source = tool_eval.add_mutually_exclusive_group()
    source.add_argument("--lab", metavar="MODULE:ATTR", type=_text,
                        help="the lab (MODULE:ATTR or path/to/file.py:ATTR; default: the built-in ticket lab)")
    _add_server_options(tool_eval, source, lock=True)
    tool_eval.add_argument("--cases", metavar="FILE", action="append", type=_path,
                           help="a JSONL case file (repeatable; default: the lab's own cases)")
    tool_eval.add_argument("--out", metavar="DIR", type=_path, help="report directory (default reports/)")
    tool_eval.add_argument("--junit", metavar="FILE", type=_path, help="where to write JUnit XML (default DIR/junit.xml)")
    tool_eval.add_argument("-j", "--jobs", metavar="N", type=_jobs,
                           help="replay N cases at once (default: [tool.agent-lab] jobs, else the core count + 4; "
                                "1: one at a time); the reports are the same whatever N is")
    tool_eval.add_argument("-v", "--verbose", action="store_true",
                           help="one progress line per case on stderr (also when stderr is a terminal)")
    split = tool_eval.add_mutually_exclusive_group()
    split.add_argument("--shard", metavar="I/N", type=_shard,
                       help="run only shard I of N of the cases (a CI matrix job); DIR also gets tool-shard.json")
    split.add_argument("--merge", metavar="DIR", nargs="+", type=_path,
                       help="write one run's reports from the --out directories of all N shards (no case runs)")
    tool_eval.set_defaults(run=_tool_eval)

    bench = commands.add_parser("bench", help="measure validator and runtime figures (never a gate)", add_help=False)
    bench.set_defaults(run=_bench, passes_arguments_through=True)  # agent_lab.bench parses its own options

    # Other subcommands are added below this line by their owners.
    export = commands.add_parser("export", help="print a surface's tool catalog in a host's format (JSON list)")
    _add_source_options(export)
    export.add_argument("--format", required=True, choices=["openai", "openai-chat", "anthropic", "mcp"],
                        help="the host: OpenAI Responses, OpenAI Chat Completions, Anthropic Messages or MCP")
    export.add_argument("--strict", action="store_true",
                        help="OpenAI strict mode: closed objects, every property required, optional ones nullable")
    export.set_defaults(run=_export)

    serve_mcp = commands.add_parser(
        "serve-mcp", help="serve a surface's tools over MCP stdio or Streamable HTTP (default: the built-in lab's candidate)"
    )
    _add_source_options(serve_mcp, servers=False)
    serve_mcp.add_argument("--actor-id", metavar="ID", type=_text, help="who every call runs as (default mcp-client)")
    serve_mcp.add_argument("--tenant", metavar="TENANT", type=_text,
                           help="the actor's tenant (default: the lab's actor, else 'default')")
    serve_mcp.add_argument("--permission", metavar="SCOPE", action="append", type=_text,
                           help="a permission the actor holds (repeatable; default: the lab's actor, else every "
                                "permission the tools require)")
    serve_mcp.add_argument("--verbose", action="store_true", help="log session events to stderr")
    _add_gateway_options(serve_mcp)
    _add_http_options(serve_mcp)
    serve_mcp.set_defaults(run=_serve_mcp)

    inspect = commands.add_parser("inspect", help="list each tool's runtime contract (a table, or --json)")
    _add_source_options(inspect, lock=True)
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inspect.set_defaults(run=_inspect)
    _add_model_eval_parser(commands)
    _add_lint_commands(commands)

    docs = commands.add_parser("docs", help="list the reference topics, or print one (agent-lab docs TOPIC)")
    docs.add_argument("topic", metavar="TOPIC", nargs="?", help="a topic name, as the list shows it")
    docs.set_defaults(run=_docs)
    return parser


class _OneCommand:
    """The subparsers of `build_parser(only=NAME)`: adds command NAME; any other command's parser is an
    `_Unbuilt`, so the code that describes its options runs without building anything."""

    def __init__(self, subparsers: Any, name: str) -> None:
        self.subparsers = subparsers
        self.name = name

    def add_parser(self, name: str, **options: Any) -> Any:
        return self.subparsers.add_parser(name, **options) if name == self.name else _Unbuilt()


class _Unbuilt:
    """Stands for a parser (or an option group of one) nobody will use: every method call is accepted
    and ignored, and answers another `_Unbuilt` (what `add_mutually_exclusive_group` would answer)."""

    def __getattr__(self, name: str) -> Any:
        return self._ignored

    def _ignored(self, *arguments: Any, **options: Any) -> _Unbuilt:
        return self


def _command_named_first(argv: Sequence[str]) -> str | None:
    """The command `argv` names, when its first argument is exactly one (what argparse would pick)."""
    first = argv[0] if argv else None
    return first if first in COMMANDS else None


def _docs(args: argparse.Namespace) -> int:
    from .docs import UnknownTopic, read_topic, topics

    if args.topic is None:
        listed = topics()
        width = max((len(topic.name) for topic in listed), default=0)
        for topic in listed:
            print(f"{topic.name.ljust(width)}  {topic.summary}")
        return EXIT_OK
    try:
        text = read_topic(args.topic)
    except UnknownTopic as error:
        return _problem(str(error))
    sys.stdout.write(text)
    return EXIT_OK


def _add_source_options(command: argparse.ArgumentParser, *, surface_default: str = "its one candidate",
                        servers: bool = True, lock: bool = False) -> None:
    source = command.add_mutually_exclusive_group()
    source.add_argument("--lab", metavar="MODULE:ATTR", type=_text,
                        help="a Lab (MODULE:ATTR or path/to/file.py:ATTR; default: [tool.agent-lab] lab, else the built-in lab)")
    source.add_argument("--registry", metavar="MODULE:ATTR", type=_text,
                        help="a Registry, or a zero-argument function returning one")
    if servers:
        _add_server_options(command, source, lock=lock)
    command.add_argument("--surface", metavar="NAME", type=_text,
                         help=f"which surface of the lab (default: {surface_default})")


def _add_server_options(command: argparse.ArgumentParser, source: Any, *, lock: bool = False) -> None:
    source.add_argument("--mcp", metavar="SERVER", action="append", type=_text,
                        help="an MCP server: a quoted command line, or an http(s):// URL (#VAR names the environment "
                             "variable holding its bearer token); repeatable. Default: [tool.agent-lab] mcp")
    command.add_argument("--policy", metavar="FILE", type=_path,
                         help="the policy for the servers' tools, TOML or JSON (default: [tool.agent-lab] policy; "
                              "without one every tool gets the strictest defaults)")
    if lock:
        command.add_argument("--lock", metavar="FILE", type=_path,
                             help="check the servers' tools against this contract lockfile (written by `lock`): a "
                                  "tool that drifted from it, or that it does not hold, is refused at every call "
                                  "(tool_contract_changed). Default: [tool.agent-lab] lock")


def _add_gateway_options(command: argparse.ArgumentParser) -> None:
    """serve-mcp as a contract gateway in front of MCP servers (agent_lab.gateway)."""
    command.add_argument("--upstream", metavar="SERVER", action="append", type=_text,
                         help="serve this MCP server's tools through the registry's checks (as --mcp takes it: a "
                              "quoted command line or an http(s):// URL); repeatable, tools namespaced SERVER.name "
                              "when two servers list one name")
    command.add_argument("--policy", metavar="FILE", type=_path,
                         help="with --upstream: the policy for the upstream tools, TOML or JSON (without one every "
                              "tool gets the strictest defaults)")
    command.add_argument("--lock", metavar="FILE", type=_path,
                         help="with --upstream: refuse every call of a tool that drifted from this contract "
                              "lockfile, or that it does not hold (tool_contract_changed)")
    command.add_argument("--receipts", metavar="STORE", type=_text,
                         help="with --upstream: where idempotency receipts and spent approvals live: memory "
                              "(default), sqlite:PATH, or a postgresql:// DSN")


def _add_http_options(command: argparse.ArgumentParser) -> None:
    """serve-mcp over Streamable HTTP instead of stdio (agent_lab.mcp_http)."""
    command.add_argument("--http", metavar="[HOST:]PORT", type=_text,
                         help="serve over Streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST default "
                              "127.0.0.1; PORT 0 picks a free one); the URL is printed on stderr")
    command.add_argument("--allow-origin", metavar="ORIGIN", action="append", type=_text,
                         help="with --http: a browser Origin allowed besides loopback ones (repeatable), e.g. "
                              "https://app.example.com")
    command.add_argument("--http-token-env", metavar="NAME", type=_text,
                         help="with --http: require 'Authorization: Bearer TOKEN', TOKEN read from the environment "
                              "variable NAME")


def _http_settings(args: argparse.Namespace) -> Any:
    """(host, port, token, origins) for --http, None for stdio; HttpServeError for a bad setting."""
    if args.http is None:
        for flag in ("allow_origin", "http_token_env"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} applies to --http")
        return None
    from .mcp_http import parse_listen, token_from_env

    host, port = parse_listen(args.http)
    token = token_from_env(args.http_token_env) if args.http_token_env is not None else None
    return host, port, token, tuple(args.allow_origin or ())


def _serve_over_http(registry: Any, actor: Any, settings: Any, *, gateway: bool) -> int:
    """serve-mcp --http: the bound URL is one line on stderr; a non-loopback address without a token is
    served (it was asked for explicitly) with a warning."""
    from .mcp_http import LOOPBACK_HOSTS, HttpServeError, McpHttpServer, gateway_http_server, run_http_server

    host, port, token, origins = settings
    if host not in LOOPBACK_HOSTS and token is None:
        print(f"agent-lab mcp: warning: serving on {host}, not loopback, without --http-token-env: anyone who can "
              "reach it can call the tools", file=sys.stderr)
    try:
        if gateway:
            server = gateway_http_server(registry, actor=actor, host=host, port=port, token=token,
                                         allowed_origins=origins)
        else:
            server = McpHttpServer(registry, actor=actor, host=host, port=port, token=token, allowed_origins=origins)
    except HttpServeError as error:
        return _problem(f"serve-mcp: {error}")
    return run_http_server(server, on_ready=lambda url: print(f"agent-lab mcp: serving on {url}", file=sys.stderr,
                                                               flush=True))


def _path(text: str) -> str:
    """An argparse type: a path must not be empty (Path("") would quietly mean the current directory)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


def _jobs(text: str) -> int:
    """An argparse type: a whole number of replays at once, at least 1."""
    try:
        jobs = int(text, 10)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1 (1: one case at a time)")
    return jobs


def _shard(text: str) -> Any:
    """An argparse type: I/N, shard I (1-based) of N."""
    from .lab.shards import Shard, ShardError

    try:
        return Shard.parse(text)
    except ShardError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _text(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty value")
    return text


def _problem(message: str) -> int:
    print(message, file=sys.stderr)
    return EXIT_BAD_INPUT


# -- tool-eval ---------------------------------------------------------------------------------------


def _tool_eval(args: argparse.Namespace) -> int:
    from .lab.cases import CaseFileError
    from .lab.definition import LabError
    from .lab.reports import ReportWriteError
    from .lab.settings import ConfigError, tool_eval_settings
    from .lab.tool_eval import run_tool_eval

    if args.merge:
        return _tool_eval_merge(args)
    try:
        settings = tool_eval_settings(lab=args.lab, cases=args.cases, out=args.out, junit=args.junit, jobs=args.jobs,
                                      mcp=args.mcp, policy=args.policy, lock=args.lock)
        lab = settings.load_lab()
        case_files = settings.case_files(lab)
        if settings.set_aside:  # never silently: another lab's cases would fail this one's, or pass vacuously
            print(f"tool-eval: running the lab's own case files; {settings.set_aside_note}", file=sys.stderr)
    except (ConfigError, LabError) as error:
        return _problem(str(error))
    progress = _progress_printer() if args.verbose or _is_terminal(sys.stderr) else None
    try:
        evaluation = run_tool_eval(case_files, out_dir=settings.out, junit_path=settings.junit, lab=lab,
                                   progress=progress, lint_config=settings.lint, jobs=settings.jobs, shard=args.shard)
    except CaseFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except LabError as error:
        return _problem(f"{settings.lab_name}: {error}")
    except ReportWriteError as error:
        return _problem(f"cannot write the reports: {error}")
    except OSError as error:  # e.g. no usable temporary directory for the replay's receipt files
        return _problem(f"tool-eval: {error}")
    try:
        _print_summary(evaluation, settings.out)
    except BrokenPipeError:  # the reader went away (`| head`): the gate's verdict still decides the exit code
        _silence_stdout()
    return EXIT_OK if evaluation.gate_passed else EXIT_GATE_FAILED


def _tool_eval_merge(args: argparse.Namespace) -> int:
    """`tool-eval --merge DIR...`: the shards' parts checked and put together; no lab is loaded."""
    from .lab.reports import ReportWriteError
    from .lab.settings import ConfigError, tool_eval_settings
    from .lab.shards import ShardError
    from .lab.tool_eval import merge_tool_eval

    given = [option for option, value in (("--lab", args.lab), ("--mcp", args.mcp), ("--policy", args.policy),
                                          ("--lock", args.lock), ("--cases", args.cases), ("--jobs", args.jobs))
             if value is not None]
    if given:
        verb = "belongs" if len(given) == 1 else "belong"
        return _problem(f"tool-eval --merge: {', '.join(given)} {verb} to the shards' runs, not to the merge")
    try:
        settings = tool_eval_settings(out=args.out, junit=args.junit)
        evaluation = merge_tool_eval(args.merge, out_dir=settings.out, junit_path=settings.junit)
    except (ConfigError, ShardError) as error:
        return _problem(str(error))
    except ReportWriteError as error:
        return _problem(f"cannot write the reports: {error}")
    try:
        _print_summary(evaluation, settings.out)
    except BrokenPipeError:
        _silence_stdout()
    return EXIT_OK if evaluation.gate_passed else EXIT_GATE_FAILED


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _progress_printer() -> Any:
    from .lab.tool_eval import progress_line

    def report(case: Any, results: Any) -> None:
        print(progress_line(case, results), file=sys.stderr, flush=True)

    return report


def _print_summary(evaluation: Any, out: str) -> None:
    for surface in evaluation.surfaces:
        figures = evaluation.metrics[surface.name]
        not_run = f", {figures['cases_not_run']} not run" if figures["cases_not_run"] else ""
        print(evaluation.mask.text(
            f"{surface.role:9} {surface.name:18} {figures['cases_passed']}/{figures['cases']} cases passed{not_run}, "
            f"{figures['unsafe_side_effects']} unsafe and {figures['duplicate_side_effects']} duplicate side effects"))
    for check in evaluation.gate:
        print(evaluation.mask.text(f"[{'x' if check.passed else ' '}] {check.name}: {check.detail}"))
    print(evaluation.mask.text(f"gate {'passed' if evaluation.gate_passed else 'FAILED'}; reports in {out}"))
    sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    try:
        return int(bench.main(args.passed_through))
    except SystemExit as exit_request:  # the bench parser's --help (0) or usage error (2)
        return int(exit_request.code or 0) if not isinstance(exit_request.code, str) else EXIT_BAD_INPUT


# -- export, serve-mcp, inspect: one surface or registry -----------------------------------------------


def _source(args: argparse.Namespace) -> Any:
    """The command's LabSource: its flags over the project's [tool.agent-lab] (ConfigError otherwise)."""
    from .lab.settings import lab_source, project_table

    return lab_source(project_table(), lab=args.lab, mcp=getattr(args, "mcp", None),
                      policy=getattr(args, "policy", None), lock=getattr(args, "lock", None))


def _open_surfaces(args: argparse.Namespace, *, every: bool = False, candidates: bool = False,
                   lock: str | None = None) -> list[Any]:
    """The registries the command works on (raises ConfigError or LabError with a one-line message):
    `--registry`; else `--surface` of the lab; else every surface (`every`), every candidate
    (`candidates`) or the one candidate of the lab. Servers' tools are checked against `lock`."""
    from .lab.definition import LabError
    from .lab.inspection import open_lab_surfaces, open_registry
    from .lab.loader import BUILTIN_LAB, default_lab, load_lab

    if args.registry is not None:
        if args.surface is not None:
            raise LabError("--surface names a surface of a lab; it does not apply to --registry")
        return [open_registry(args.registry)]
    reference, servers, policy, _ = _source(args)
    if servers:
        from .mcp_client.surfaces import open_server_surfaces

        if args.surface is not None:
            raise LabError("--surface names a surface of a lab; it does not apply to MCP servers")
        return open_server_surfaces(servers, policy=policy, lock=lock)
    lab = default_lab() if reference is None else load_lab(reference)
    try:
        return open_lab_surfaces(lab, args.surface, every=every, candidates=candidates)
    except LabError as error:
        raise LabError(f"{reference or BUILTIN_LAB}: {error}") from None


def _export(args: argparse.Namespace) -> int:
    import json

    from .adapters import ExportSchemaError, export_catalog
    from .lab.definition import LabError
    from .lab.inspection import source_line
    from .lab.settings import ConfigError

    if args.strict and args.format not in ("openai", "openai-chat"):
        return _problem(f"export: --strict is OpenAI's strict mode; it does not apply to --format {args.format}")
    try:
        [surface] = _open_surfaces(args)
    except (ConfigError, LabError) as error:
        return _problem(str(error))
    with surface.registry as registry:
        specs = [registry.spec(name) for name in registry.names()]
    try:
        tools = export_catalog(specs, args.format, strict=args.strict)
    except ExportSchemaError as error:  # (StrictSchemaError is one)
        return _problem(f"{source_line(surface.source_file, error.tool) or surface.name}: {error}")
    print(json.dumps(tools, indent=2, ensure_ascii=False))
    return EXIT_OK


def _serve_mcp(args: argparse.Namespace) -> int:
    import logging

    from .lab.definition import LabError
    from .lab.inspection import default_actor
    from .lab.settings import ConfigError
    from .mcp import serve
    from .policy import Actor

    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format="agent-lab mcp: %(levelname)s %(message)s")
    try:
        http = _http_settings(args)
    except ValueError as error:  # (HttpServeError is one)
        return _problem(f"serve-mcp: {error}")
    if args.upstream:
        return _serve_gateway(args, http)
    for flag in ("policy", "lock", "receipts"):
        if getattr(args, flag) is not None:
            return _problem(f"serve-mcp: --{flag} applies to --upstream servers")
    try:
        [surface] = _open_surfaces(args)
    except (ConfigError, LabError) as error:
        return _problem(str(error))
    with surface.registry as registry:
        # The server's own identity (never the client's): flags, else the lab's actor, else every
        # permission the tools need in tenant "default". It holds no approvals: writes that need one
        # answer approval_required.
        actor = default_actor(registry, surface.lab)
        if args.actor_id or args.tenant or args.permission is not None:
            actor = Actor(id=args.actor_id or actor.id, tenant=args.tenant or actor.tenant,
                          permissions=set(args.permission) if args.permission is not None else actor.permissions)
        if http is not None:
            return _serve_over_http(registry, actor, http, gateway=False)
        return serve(registry, actor=actor)


def _serve_gateway(args: argparse.Namespace, http: Any = None) -> int:
    """serve-mcp --upstream: the upstreams' tools through the registry, as the configured actor. The
    actor holds the permissions named with --permission, else every permission the tools require."""
    from .gateway import GatewayError, open_gateway, serve_gateway
    from .lockfile import LockfileError
    from .mcp_client.tool_policy import PolicyError
    from .mcp_client.wire import McpError
    from .policy import Actor

    if args.lab is not None or args.registry is not None or args.surface is not None:
        return _problem("serve-mcp: --upstream serves MCP servers; it does not combine with --lab, --registry "
                        "or --surface")
    try:
        registry = open_gateway(args.upstream, policy=args.policy, lock=args.lock, receipts=args.receipts)
    except (GatewayError, PolicyError, LockfileError, ValueError) as error:
        return _problem(f"serve-mcp: {error}")
    except McpError as error:
        return _problem(f"serve-mcp: an upstream could not be opened: {error}")
    with registry:
        permissions = set(args.permission) if args.permission is not None else \
            {registry.spec(name).required_permission for name in registry.names()}
        actor = Actor(id=args.actor_id or "mcp-client", tenant=args.tenant or "default", permissions=permissions)
        if http is not None:
            return _serve_over_http(registry, actor, http, gateway=True)
        return serve_gateway(registry, actor=actor)


def _add_model_eval_parser(commands: Any) -> None:
    """The model-eval subcommand's options (its runner is `_model_eval`)."""
    model_eval = commands.add_parser(
        "model-eval", help="run a lab's tasks with a model (or a scripted agent) on each surface; pass^k over repeats")
    source = model_eval.add_mutually_exclusive_group()
    source.add_argument("--lab", metavar="MODULE:ATTR", help="the lab (default: lab in [tool.agent-lab] of "
                        "./pyproject.toml, else the built-in ticket lab)")
    _add_server_options(model_eval, source, lock=True)
    model_eval.add_argument("--tasks", metavar="FILE", action="append", type=_path,
                            help="a JSONL task file (repeatable; default: the built-in ticket lab's shipped tasks, "
                            "for that lab only)")
    model_eval.add_argument("--model", metavar="SPEC", help="openai:MODEL[@BASE_URL][#KEY_ENV], openai-responses:..., "
                            "anthropic:..., or python:MODULE:ATTR (default: the scripted reference agent)")
    model_eval.add_argument("--repeats", metavar="K", type=int, default=3, help="trials per task and surface (default 3)")
    model_eval.add_argument("--split", choices=["dev", "heldout", "all"], default="all", help="which tasks (default all)")
    cassette = model_eval.add_mutually_exclusive_group()
    cassette.add_argument("--record", metavar="DIR", type=_path, help="record every model exchange into DIR/cassette.jsonl")
    cassette.add_argument("--replay", metavar="DIR", type=_path, help="answer from DIR/cassette.jsonl only (no network)")
    model_eval.add_argument("--timeout", metavar="SECONDS", type=float, default=60.0,
                            help="per attempt, for the whole exchange: connect, headers, body (default 60)")
    model_eval.add_argument("--attempts", metavar="N", type=int, default=4,
                            help="tries per request on 429, 5xx, timeouts and broken answers (default 4)")
    model_eval.add_argument("--out", metavar="DIR", default="reports/model-eval", type=_path,
                            help="report directory (default reports/model-eval/)")
    model_eval.add_argument("--junit", metavar="FILE", type=_path, help="where to write JUnit XML (default DIR/junit.xml)")
    model_eval.add_argument("--baseline", metavar="DIR", type=_path,
                            help="judge this run against an earlier run's reports in DIR (its --out): exit 1 on a "
                                 "regression; the verdict is written beside this run's reports")
    model_eval.add_argument("--compare-task", metavar="TASK_ID", action="append", dest="compare_tasks", type=_text,
                            help="with --baseline: compare only this task (repeatable); needed when the two runs' "
                                 "tasks differ")
    model_eval.add_argument("-v", "--verbose", action="store_true", help="one line per trial on stderr")
    model_eval.set_defaults(run=_model_eval)


def _model_eval(args: argparse.Namespace) -> int:
    """Exit 0: every trial ran (and, with --baseline, nothing regressed); 1: some trials ended in an
    infrastructure failure (reports say which), or a regression against the baseline; 2: bad input (tasks,
    lab, model spec, cassette, a replayed request with no recording, report paths, a baseline that cannot
    be read or that ran other tasks)."""
    from .lab.reports import ReportWriteError
    from .lab.settings import ConfigError, configured_lab, lab_source, project_table
    from .modeleval import labglue
    from .modeleval.cassettes import CassetteError, MissingRecording
    from .modeleval.models import ModelSpecError, UrllibTransport
    from .modeleval.runner import DEFAULT_MODEL, run_model_eval
    from .modeleval.tasks import TaskFileError

    lab = None
    try:
        reference, servers, policy, lock = lab_source(project_table(), lab=args.lab, mcp=args.mcp, policy=args.policy,
                                                      lock=args.lock)
        lab = labglue.load_lab_target(reference or labglue.DEFAULT_LAB) if not servers else \
            configured_lab(None, servers, policy, lock)
        transport = UrllibTransport(timeout_s=args.timeout, max_attempts=args.attempts)
        progress = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
        evaluation = run_model_eval(
            lab, args.tasks or labglue.default_tasks(lab), out_dir=args.out, junit_path=args.junit,
            model=args.model or DEFAULT_MODEL, repeats=args.repeats, split=args.split, record=args.record,
            replay=args.replay, transport=transport, progress=progress, baseline=args.baseline,
            compare_tasks=args.compare_tasks)
    except TaskFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except MissingRecording as error:
        print(_model_eval_mask(args, lab).text(f"model-eval: {error}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except ReportWriteError as error:
        print(_model_eval_mask(args, lab).text(f"cannot write the reports: {error}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ConfigError, labglue.LabError, ModelSpecError, CassetteError, ValueError, OSError) as error:
        print(_model_eval_mask(args, lab).text(f"model-eval: {error}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    from .modeleval.reports import source_line

    try:
        _print_model_eval_summary(evaluation, args, source_line(evaluation))
    except BrokenPipeError:  # the reader went away (`| head -1`): the run's verdict still decides the exit code
        _silence_stdout()
    return EXIT_GATE_FAILED if evaluation.infrastructure_failures or evaluation.regressions else EXIT_OK


def _print_model_eval_summary(evaluation: Any, args: argparse.Namespace, source: str) -> None:
    """What the run found, in a few lines masked like its reports (`evaluation.mask`)."""
    mask = evaluation.mask
    print(mask.text(f"answers from: {source}"))
    for surface, splits in evaluation.metrics.items():
        figures = splits["all"]
        success = figures["task_success"]
        pass_k = figures["pass_hat_k"]
        shown = f"pass^{args.repeats} {pass_k[str(args.repeats)]:.4f}" if pass_k else "pass^k n/a"
        print(mask.text(f"{surface}: {success['numerator']}/{success['denominator']} trials succeeded, {shown}, "
                        f"{figures['unsafe_effects']} unsafe effect(s), {figures['infrastructure_failures']} "
                        "infrastructure failure(s)"))
    print(mask.text(f"reports in {args.out}"))
    if evaluation.verdict is not None:
        _print_verdict(evaluation.verdict, mask)
    sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush


def _model_eval_mask(args: argparse.Namespace, lab: Any) -> Any:
    """The mask of a line about a model-eval run that stopped: the key the model spec names (an error
    from below may quote a header) and the secrets of a fresh world of the lab (a missing recording's
    message quotes the conversation; the runner masks the trial's own world already). Best effort: what
    cannot be read (no lab yet, a world that raises) is left out."""
    import os

    from .modeleval.models import ModelSpecError, parse_model_spec
    from .redaction import SecretMask

    secrets: set[str] = set()
    try:
        key_env = parse_model_spec(args.model).key_env if args.model else None
    except ModelSpecError:
        key_env = None
    if key_env and os.environ.get(key_env):
        secrets |= {os.environ[key_env], os.environ[key_env].strip()}
    if lab is not None:
        from .modeleval import labglue

        try:
            secrets.update(labglue.world_secrets(lab, labglue.open_world(lab)))
        except Exception:  # noqa: BLE001 - a lab that cannot say its secrets already failed the run
            pass
    return SecretMask(secrets)


def _print_verdict(verdict: Any, mask: Any) -> None:
    from .modeleval.verdict_reports import summary

    differs = "; ".join(f"{d.what}" for d in verdict.differences) or "nothing"
    print(mask.text(f"verdict against {verdict.baseline_where}: {summary(verdict)} (differs: {differs})"))
    for entry in verdict.regressions:
        print(mask.text(f"regressed: {entry.task_id} on {entry.surface}: {'; '.join(entry.reasons)}"))


def _inspect(args: argparse.Namespace) -> int:
    import json

    from .lab.definition import LabError
    from .lab.inspection import describe_tools, render_tool_table
    from .lab.settings import ConfigError

    try:
        surfaces = _open_surfaces(args, every=True, lock=_source(args).lock)
    except (ConfigError, LabError) as error:
        return _problem(str(error))
    described = []
    for surface in surfaces:
        with surface.registry as registry:
            described.append((surface, describe_tools(registry)))
    if args.json:
        lab = surfaces[0].lab.name if surfaces[0].lab is not None else None
        document = {"lab": lab, "surfaces": [{"name": surface.name, "role": surface.role, "tools": tools}
                                             for surface, tools in described]}
        print(json.dumps(document, indent=2, ensure_ascii=False))
        return EXIT_OK
    tables = []
    for surface, tools in described:
        where = f"lab {surface.lab.name}, {surface.role} {surface.name}" if surface.lab is not None else surface.name
        tables.append(render_tool_table(f"{where}: {len(tools)} tool(s)", tools))
    print("\n\n".join(tables))
    return EXIT_OK


# -- lint and catalog-cost (agent_lab.lint, agent_lab.catalog_cost) ---------------------------------

HOSTS = ["openai", "openai-chat", "anthropic", "mcp"]


def _add_lint_commands(commands: Any) -> None:
    lint = commands.add_parser(
        "lint", help="check a surface's tools against the lint rules (exit 1 on an error-level finding)",
        description="Check each tool's model-facing definition and runtime contract against the lint rules. "
                    "The lab comes from --lab/--registry or [tool.agent-lab] lab, the rules' configuration from "
                    "[tool.agent-lab.lint] in ./pyproject.toml; flags beat both.")
    _add_source_options(lint, surface_default="every candidate of the lab")
    lint.add_argument("--format", choices=["text", "json", "sarif"], default="text", help="output format (default text)")
    lint.add_argument("--host", action="append", choices=HOSTS,
                      help="check per-host rules for this host (repeatable; default: [tool.agent-lab.lint] hosts, "
                           "else all four)")
    lint.add_argument("--select", metavar="RULES", type=_rule_list,
                      help="comma-separated rule ids or prefixes to run, e.g. AL2,AL401 (default: all)")
    lint.add_argument("--ignore", metavar="RULES", type=_rule_list, help="comma-separated rule ids or prefixes to skip")
    lint.add_argument("--output", metavar="FILE", type=_path, help="write the report to FILE instead of stdout")
    lint.add_argument("--lock", metavar="FILE", type=_path,
                      help="report drift from this contract lockfile (written by `lock`) as AL6xx findings "
                           "(default, for servers: [tool.agent-lab] lock)")
    lint.set_defaults(run=_lint)
    lock = commands.add_parser(
        "lock", help="write a contract lockfile: each tool's reviewed model-facing contract and its hash",
        description="Pin each tool's whole model-facing contract (name, title, description, input and output "
                    "schema, annotations) with its SHA-256, so `lint --lock FILE` reports what changed since review "
                    "and a locked registry refuses to call a drifted tool. Surfaces as `lint` takes them; a server's "
                    "tools are locked as the server lists them, its surface named by the server's own name.")
    _add_source_options(lock, surface_default="every candidate of the lab")
    lock.add_argument("--output", metavar="FILE", type=_path,
                      help=f"where to write the lockfile (default: [tool.agent-lab] lock for its servers, else "
                           f"{DEFAULT_LOCKFILE}; written atomically)")
    lock.set_defaults(run=_lock)
    cost = commands.add_parser("catalog-cost", help="bytes and tokens of each tool's definition, per host")
    _add_source_options(cost, surface_default="every candidate of the lab")
    cost.add_argument("--host", action="append", choices=HOSTS, help="a host to measure (repeatable; default: all four)")
    cost.add_argument("--format", choices=["text", "json"], default="text", help="output format (default text)")
    cost.set_defaults(run=_catalog_cost)


def _rule_list(text: str) -> list[str]:
    rules = [part.strip() for part in text.split(",") if part.strip()]
    if not rules:
        raise argparse.ArgumentTypeError("no rule ids")
    return rules


def _surface_label(surface: Any) -> str:
    """How lint reports name a surface: its name in the lab, or a registry's attribute name (the
    reference as given may be an absolute path, which reports never show)."""
    return surface.name if surface.role is not None else surface.name.rpartition(":")[2]


def _lint(args: argparse.Namespace) -> int:
    import contextlib

    from .lab.definition import LabError
    from .lab.settings import ConfigError, lint_config
    from .lint import LintConfigError, lint_surfaces, render_json, render_sarif, render_text
    from .lockfile import Lockfile, LockfileError

    try:
        config = lint_config().with_overrides(select=args.select, ignore=args.ignore, hosts=args.host)
        source = _source(args)
        servers = args.registry is None and bool(source.servers)
        lock_file = args.lock if args.lock is not None else source.lock if servers else None
        lock = Lockfile.load(lock_file) if lock_file is not None else None
        surfaces = _open_surfaces(args, candidates=True)
    except (ConfigError, LabError, LintConfigError, LockfileError) as error:
        return _problem(str(error))
    with contextlib.ExitStack() as opened:
        for surface in surfaces:
            opened.enter_context(surface.registry)
        # Servers named together (--mcp repeated, or the table's mcp list) are one agent's tools: the
        # toxic-flow rules run across them. A lab's surfaces are alternatives, linted one at a time.
        report = lint_surfaces([(_surface_label(surface), surface.registry) for surface in surfaces], config=config,
                               lock=lock, together=servers and len(surfaces) > 1)
    render = {"text": render_text, "json": render_json, "sarif": render_sarif}[args.format]
    read: dict[str | None, str] = {lock_file: "the lockfile this lint checks against",
                                   source.policy: "the policy file this lint reads"}
    if not _emit(render(report), args.output, "lint", read):
        return EXIT_BAD_INPUT
    return EXIT_OK if report.passed else EXIT_GATE_FAILED


DEFAULT_LOCKFILE = "agent-lab.lock.json"


def _lock(args: argparse.Namespace) -> int:
    from .lab.definition import LabError
    from .lab.settings import ConfigError
    from .lockfile import Lockfile

    try:
        source = _source(args)
        servers = args.registry is None and bool(source.servers)
        output = args.output or (source.lock if servers else None) or DEFAULT_LOCKFILE
        surfaces = _open_surfaces(args, candidates=True)  # never checked against the old lock: this replaces it
    except (ConfigError, LabError) as error:
        return _problem(str(error))
    catalogs = []
    for surface in surfaces:
        with surface.registry as registry:
            catalogs.append((_surface_label(surface), [registry.spec(name) for name in registry.names()]))
    try:
        lock = Lockfile.from_surfaces(catalogs)
    except ValueError as error:  # two surfaces with one label
        return _problem(f"lock: {error}")
    if not _emit(lock.dumps(), output, "lock", {source.policy: "the policy file this lock reads"}):
        return EXIT_BAD_INPUT
    tools = sum(len(specs) for _, specs in catalogs)
    print(f"locked {tools} tool(s) of {len(catalogs)} surface(s) in {output}", file=sys.stderr)
    return EXIT_OK


def _emit(text: str, output: str | None, command: str, read: dict[str | None, str] | None = None) -> bool:
    """Print `text`, or write it to `output` atomically (a temporary file, then a rename). `output` is
    refused (False) when it is a file the run reads: pyproject.toml, a loaded module, or one of `read`
    (the command's own input files, each with what it is; a None key is no file)."""
    if output is None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`lint | head -1`): the verdict still decides the exit code
            _silence_stdout()
        return True
    from .atomicfile import write_text
    from .lab.inputs import input_overwritten, run_inputs

    target = Path(output)
    inputs = run_inputs()
    inputs.update((Path(path), what) for path, what in (read or {}).items() if path is not None)
    overwritten = input_overwritten([target], inputs)
    if overwritten is not None:  # pyproject.toml, the lab's module, a lock or policy: never replaced by a report
        print(f"{command}: cannot write {output}: it is {overwritten[1]}", file=sys.stderr)
        return False
    try:
        write_text(target, text, errors="backslashreplace")  # a lone surrogate as its escape, as reports write it
    except OSError as error:
        print(f"{command}: cannot write {output}: {error.strerror or error}", file=sys.stderr)
        return False
    return True


def _catalog_cost(args: argparse.Namespace) -> int:
    import json

    from .catalog_cost import catalog_costs, render_cost_table
    from .lab.definition import LabError
    from .lab.settings import ConfigError

    hosts = args.host or HOSTS
    try:
        surfaces = _open_surfaces(args, candidates=True)
    except (ConfigError, LabError) as error:
        return _problem(str(error))
    measured = []
    for surface in surfaces:
        with surface.registry as registry:
            specs = [registry.spec(tool) for tool in registry.names()]
        measured.append((_surface_label(surface), catalog_costs(specs, dict.fromkeys(hosts))))
    if args.format == "json":
        document = [{"surface": name, "hosts": [cost.to_dict() for cost in costs]} for name, costs in measured]
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print("\n".join(render_cost_table(name, costs) for name, costs in measured), end="")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]) and run one subcommand; returns the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_command_named_first(arguments))
    try:
        args, unknown = parser.parse_known_args(arguments)
        if unknown and not getattr(args, "passes_arguments_through", False):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exit_request:  # argparse's own usage errors (2) and --help (0)
        return int(exit_request.code or 0) if not isinstance(exit_request.code, str) else EXIT_BAD_INPUT
    args.passed_through = unknown
    from .interrupts import tracking_interrupts

    # Ctrl-C is told apart from a KeyboardInterrupt the code under test raises: only Ctrl-C stops the
    # command; a lab's or a handler's own (and its sys.exit) is a broken lab or a failed call.
    with tracking_interrupts():
        try:
            return int(args.run(args))
        except BrokenPipeError:  # the reader went away (`export ... | head`): not our failure, no traceback
            _silence_stdout()
            return EXIT_OK
        except Exception:
            raise  # a bug of ours: its traceback is the report
        except BaseException as error:  # noqa: BLE001 - our commands raise none: the code under test did
            return _stopped_by_code_under_test(args.command, error)


def _stopped_by_code_under_test(command: str, error: BaseException) -> int:
    """A SystemExit, GeneratorExit or KeyboardInterrupt (not Ctrl-C's) that the lab's or registry's code
    raised where no narrower step caught it (a Registry subclass's own method, say): bad input, one
    line. The caller's own Ctrl-C is raised again: it stops the command."""
    from .interrupts import raise_stop_request
    from .lab.definition import describe_exception

    raise_stop_request(error, in_user_code=False)
    return _problem(f"{command}: the lab's or registry's code raised {describe_exception(error)}; "
                    "code under test must not stop the process")


YOUNG_OBJECTS_PER_COLLECTION = 100_000
"""The cycle collector's first threshold in a command's process (CPython's default is 700): a run
allocates many short-lived containers (schemas, results, report rows) that die before a collection
would look at them, and each collection walks every young object (at 20,000, `tool-eval`'s five
collections cost ~6 ms of CPU; at this, a few tenths). Still bounded: at most this many uncollected
young objects at a time."""


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The process's entry point (`run_lab.py`, `python -m agent_lab`, the `agent-lab` script): `main`,
    then exit with its code. Ctrl-C ends it with one line and 130; SIGTERM (a CI runner cancelling the
    job) is taken the same way and ends it with 143, once every `finally` under it has run (temporary
    files removed, each report old or new).

    Process-wide settings for the collector, here and never in `main` (which tests and applications
    call in-process): collections come less often (`YOUNG_OBJECTS_PER_COLLECTION`), and before exiting
    every object still alive is moved out of the collector's sight (`gc.freeze`), because the
    interpreter's shutdown would otherwise walk them all again in its final collections: a tenth of a
    `tool-eval` run's CPU spent on memory the process is about to give back anyway."""
    import gc

    from .interrupts import Terminated, terminating_as_interrupt

    gc.set_threshold(YOUNG_OBJECTS_PER_COLLECTION, *gc.get_threshold()[1:])
    # A character the output's encoding cannot hold (an --out path of undecodable bytes, under a strict
    # locale) is printed escaped, as stderr does already, never a traceback after the work is done.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")
    try:
        with terminating_as_interrupt():
            code = main(argv)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM, let through: everything under it has cleaned up
        terminated = isinstance(stop, Terminated)
        print(f"agent-lab: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        code = EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    gc.freeze()
    raise SystemExit(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise into the closed pipe."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    run()
