"""The real MCP reference servers the tests run against (no tests here).

Each server is installed from its registry (PyPI or npm) and started over stdio. Every test finds the
executables one way: on `MCP_SERVERS_PATH` (folders separated like PATH: a venv's bin/ with
`mcp-server-time`, ..., and an npm folder's node_modules/.bin with `mcp-server-everything`, ...);
`.ci/run` installs them in throwaway folders and sets it. `listing()` reads a server's tools/list
through our client (`agent_lab.mcp_client`); `capture()` reads it through the official MCP Python SDK
client, the way the committed fixtures were written (one interop test checks that both agree).

Run by hand (with the SDK installed) to refresh the fixtures:

    MCP_SERVERS_PATH=/work/venvs/22b/bin:/work/venvs/22b-npm/node_modules/.bin \\
        /work/venv/bin/python tests/mcp_reference_servers.py
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

PATH_VARIABLE = "MCP_SERVERS_PATH"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mcp_servers"
SESSION_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ReferenceServer:
    """One server: its fixture name, the registry package it comes from, and how it is started
    (`{scratch}` in an argument or environment value is a fresh empty folder)."""

    name: str
    registry: str  # "pypi" or "npm"
    package: str
    executable: str
    arguments: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()


SERVERS: tuple[ReferenceServer, ...] = (
    ReferenceServer("time", "pypi", "mcp-server-time", "mcp-server-time", ("--local-timezone", "UTC")),
    ReferenceServer("git", "pypi", "mcp-server-git", "mcp-server-git"),
    ReferenceServer("fetch", "pypi", "mcp-server-fetch", "mcp-server-fetch"),
    ReferenceServer("everything", "npm", "@modelcontextprotocol/server-everything", "mcp-server-everything",
                    ("stdio",)),
    ReferenceServer("filesystem", "npm", "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem",
                    ("{scratch}",)),
    ReferenceServer("memory", "npm", "@modelcontextprotocol/server-memory", "mcp-server-memory",
                    environment=(("MEMORY_FILE_PATH", "{scratch}/memory.jsonl"),)),
    ReferenceServer("sequential-thinking", "npm", "@modelcontextprotocol/server-sequential-thinking",
                    "mcp-server-sequential-thinking"),
)


def named(name: str) -> ReferenceServer:
    """The server of that fixture name."""
    return next(server for server in SERVERS if server.name == name)


def executable(server: ReferenceServer) -> Optional[str]:
    """The server's executable on MCP_SERVERS_PATH, or None."""
    search = os.environ.get(PATH_VARIABLE)
    return shutil.which(server.executable, path=search) if search else None


def missing_reason(server: ReferenceServer, *, sdk: bool = False) -> Optional[str]:
    """Why `server` cannot be started here (or, with `sdk`, read through the official SDK), else None."""
    if sdk:
        try:
            import mcp  # noqa: F401
        except ImportError as error:
            return f"the MCP Python SDK is not importable ({error}); pip install mcp"
    if not os.environ.get(PATH_VARIABLE):
        return (f"{PATH_VARIABLE} is not set: install the reference servers ({server.registry}: {server.package}) "
                f"and set it to the folders holding their executables (.ci/run does)")
    if executable(server) is None:
        return f"{server.executable} ({server.registry}: {server.package}) is not on {PATH_VARIABLE}"
    return None


def command_line(server: ReferenceServer, scratch: str) -> str:
    """The command line our client (and `--mcp`) starts the server with: NAME=VALUE words for its
    environment, then the executable and its arguments, `{scratch}` replaced by `scratch`."""
    command = executable(server)
    if command is None:
        raise RuntimeError(missing_reason(server) or f"{server.executable} not found")
    words = [f"{key}={value.replace('{scratch}', scratch)}" for key, value in server.environment]
    words += [command, *(argument.replace("{scratch}", scratch) for argument in server.arguments)]
    return " ".join(shlex.quote(word) for word in words)


def listing(server: ReferenceServer) -> dict[str, Any]:
    """tools/list (every page) of a reference server through our client, with its name, version and the
    protocol revision agreed, in the fixtures' shape."""
    from agent_lab.mcp_client import connect

    with tempfile.TemporaryDirectory(prefix="mcp-server-") as scratch:
        with connect(command_line(server, scratch), timeout_s=SESSION_TIMEOUT_S, cwd=scratch) as client:
            tools = client.list_tools()
            info = client.server_info
            return {"server": {"name": info.get("name"), "version": info.get("version")},
                    "protocolVersion": client.protocol_version, "tools": tools}


def _wire(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)  # type: ignore[no-any-return]


async def _listing(command: str, arguments: list[str], environment: dict[str, str], scratch: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import PaginatedRequestParams

    parameters = StdioServerParameters(command=command, args=arguments, env={**os.environ, **environment}, cwd=scratch)
    with open(os.devnull, "w") as quiet:  # servers log to stderr; the listing is all we keep
        async with stdio_client(parameters, errlog=quiet) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                initialized = _wire(await session.initialize())
                tools: list[dict[str, Any]] = []
                cursor = None
                while True:
                    page = _wire(await session.list_tools(
                        params=PaginatedRequestParams(cursor=cursor) if cursor else None))
                    tools += page["tools"]
                    cursor = page.get("nextCursor")
                    if cursor is None:
                        break
    return {
        "server": {"name": initialized["serverInfo"]["name"], "version": initialized["serverInfo"]["version"]},
        "protocolVersion": initialized["protocolVersion"],
        "tools": tools,
    }


def capture_command(command: str, arguments: list[str], environment: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """tools/list (every page) of the stdio server `command arguments`, through the official SDK client,
    with the server's name and version from the handshake; `{scratch}` in an argument or environment
    value is a fresh empty folder, also the server's working directory."""
    with tempfile.TemporaryDirectory(prefix="mcp-capture-") as scratch:
        filled = [argument.replace("{scratch}", scratch) for argument in arguments]
        variables = {key: value.replace("{scratch}", scratch) for key, value in (environment or {}).items()}
        return asyncio.run(asyncio.wait_for(_listing(command, filled, variables, scratch), SESSION_TIMEOUT_S))


def capture(server: ReferenceServer) -> dict[str, Any]:
    """A reference server's tools/list, with the registry package it came from."""
    command = executable(server)
    if command is None:
        raise RuntimeError(missing_reason(server, sdk=True) or f"{server.executable} not found")
    captured = capture_command(command, list(server.arguments), dict(server.environment))
    return {**captured, "package": {"registry": server.registry, "name": server.package}}


def fixture_path(server: ReferenceServer) -> Path:
    return FIXTURES / f"{server.name}.json"


def load_fixture(server: ReferenceServer) -> dict[str, Any]:
    return json.loads(fixture_path(server).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def main() -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for server in SERVERS:
        reason = missing_reason(server, sdk=True)
        if reason is not None:
            print(f"{server.name}: skipped: {reason}", file=sys.stderr)
            continue
        captured = capture(server)
        fixture_path(server).write_text(json.dumps(captured, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                                        encoding="utf-8")
        print(f"{server.name}: {captured['server']['name']} {captured['server']['version']}, "
              f"{len(captured['tools'])} tools")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
