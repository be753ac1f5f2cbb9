"""The official MCP Python SDK client can use `python run_lab.py serve-mcp`.

The client spawns the server over stdio, negotiates, lists the tools, and calls them; every contract
of the registry holds on the other side (a read validates against its advertised outputSchema, a write
without approval and bad arguments come back as isError results with our structured error, an unknown
tool is a protocol error). Skipped, with the reason, when the `mcp` package is not importable; the
lead's .ci/run installs it in a throwaway venv so CI always runs these. The official TypeScript client
runs too when MCP_TS_SDK_DIR names a folder where `npm install @modelcontextprotocol/sdk` was run.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
import sys
import unittest
from pathlib import Path
from typing import Any

try:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    MCP_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    MCP_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

REPO_ROOT = Path(__file__).resolve().parent.parent
SESSION_TIMEOUT_S = 60.0  # the whole client session; a hang fails the test instead of CI
READ_TOOL = "get_ticket"
WRITE_TOOL = "record_ticket_followup"
VISIBLE_TICKET = "T-1001"


def wire(model: Any) -> dict[str, Any]:
    """An SDK result as the JSON it came from (camelCase names in SDK 1.x and 2.x alike)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def output_schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """Violations of `schema` by `instance`: python-jsonschema when importable, else our Validator."""
    try:
        import jsonschema
    except ImportError:
        from agent_lab.schema import Validator

        return [violation.message for violation in Validator(schema).errors(instance)]
    validator = jsonschema.Draft202012Validator(schema)
    return [error.message for error in validator.iter_errors(instance)]


async def list_every_tool(session: Any) -> list[dict[str, Any]]:
    """tools/list, following nextCursor (SDK 2.x takes params=, SDK 1.x takes cursor=)."""
    takes_params = "params" in inspect.signature(session.list_tools).parameters
    tools: list[dict[str, Any]] = []
    cursor = None
    while True:
        if cursor is None:
            page = await session.list_tools()
        elif takes_params:
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        else:  # pragma: no cover - SDK 1.x
            page = await session.list_tools(cursor=cursor)
        listing = wire(page)
        tools += listing["tools"]
        cursor = listing.get("nextCursor")
        if cursor is None:
            return tools


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class OfficialClientTest(unittest.TestCase):
    """One client session per test, run with asyncio.run under a timeout so it can never hang CI."""

    def run_session(self, scenario: Any, *, negotiate: str) -> Any:
        async def session_main() -> Any:
            server = StdioServerParameters(
                command=sys.executable, args=["run_lab.py", "serve-mcp"], cwd=str(REPO_ROOT)
            )
            async with stdio_client(server) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream) as session:
                    if negotiate == "initialize":
                        negotiated = wire(await session.initialize())["protocolVersion"]
                    else:
                        negotiated = wire(await session.discover())["supportedVersions"]
                    return negotiated, await scenario(session)

        return asyncio.run(asyncio.wait_for(session_main(), SESSION_TIMEOUT_S))

    def test_the_handshake_negotiates_the_latest_revision(self) -> None:
        async def nothing(session: Any) -> None:
            return None

        negotiated, _ = self.run_session(nothing, negotiate="initialize")
        self.assertEqual(negotiated, "2025-11-25")

    def test_the_listing_shows_the_ticket_tools_with_schemas(self) -> None:
        negotiated, tools = self.run_session(list_every_tool, negotiate="initialize")
        by_name = {tool["name"]: tool for tool in tools}
        self.assertIn(READ_TOOL, by_name)
        self.assertIn(WRITE_TOOL, by_name)
        self.assertEqual(by_name[READ_TOOL]["inputSchema"]["type"], "object")
        self.assertIn("outputSchema", by_name[READ_TOOL])
        self.assertTrue(by_name[READ_TOOL]["annotations"]["readOnlyHint"])
        self.assertFalse(by_name[WRITE_TOOL]["annotations"]["readOnlyHint"])

    def test_a_read_tool_result_validates_against_its_advertised_output_schema(self) -> None:
        async def read(session: Any) -> tuple[dict, dict]:
            tools = {tool["name"]: tool for tool in await list_every_tool(session)}
            result = await session.call_tool(READ_TOOL, {"ticket_id": VISIBLE_TICKET})
            return tools[READ_TOOL], wire(result)

        _, (tool, result) = self.run_session(read, negotiate="initialize")
        self.assertFalse(result.get("isError", False), result)
        self.assertEqual(output_schema_errors(tool["outputSchema"], result["structuredContent"]), [])
        self.assertNotIn("@", str(result))  # the customer's email is redacted before it leaves the process

    def test_a_write_without_approval_is_an_error_result_saying_approval_required(self) -> None:
        async def write(session: Any) -> dict:
            arguments = {
                "ticket_id": VISIBLE_TICKET,
                "note": "Called the customer back.",
                "action_id": "act-00000001",
            }
            return wire(await session.call_tool(WRITE_TOOL, arguments))

        _, result = self.run_session(write, negotiate="initialize")
        self.assertTrue(result["isError"])
        self.assertEqual(structured_error(result)["code"], "approval_required")
        self.assertTrue(result["content"] and result["content"][0]["type"] == "text")

    def test_bad_arguments_are_an_error_result_saying_invalid_arguments(self) -> None:
        async def bad(session: Any) -> dict:
            return wire(await session.call_tool(READ_TOOL, {"ticket_id": 1001}))

        _, result = self.run_session(bad, negotiate="initialize")
        self.assertTrue(result["isError"])
        self.assertEqual(structured_error(result)["code"], "invalid_arguments")

    def test_an_unknown_tool_is_a_protocol_error(self) -> None:
        from mcp.shared import exceptions

        protocol_error = getattr(exceptions, "MCPError", None) or getattr(exceptions, "McpError")  # 2.x / 1.x

        async def unknown(session: Any) -> int | None:
            try:
                await session.call_tool("get_tickets", {"ticket_id": VISIBLE_TICKET})
            except protocol_error as exc:  # raised inside the session, so the task groups stay calm
                return exc.error.code
            return None

        _, code = self.run_session(unknown, negotiate="initialize")
        self.assertEqual(code, -32602)

    def test_the_stateless_revision_serves_the_same_contracts(self) -> None:
        if not hasattr(ClientSession, "discover"):
            self.skipTest(f"mcp {sdk_version()} has no server/discover client (2026-07-28 needs SDK 2.x)")

        async def stateless(session: Any) -> tuple[dict, dict]:
            await list_every_tool(session)
            read = wire(await session.call_tool(READ_TOOL, {"ticket_id": VISIBLE_TICKET}))
            arguments = {"ticket_id": VISIBLE_TICKET, "note": "Called back.", "action_id": "act-00000002"}
            write = wire(await session.call_tool(WRITE_TOOL, arguments))
            return read, write

        supported, (read, write) = self.run_session(stateless, negotiate="discover")
        self.assertEqual(supported, ["2026-07-28"])
        self.assertFalse(read.get("isError", False), read)
        self.assertEqual(structured_error(write)["code"], "approval_required")

    def test_the_sdk_default_client_probes_server_discover_and_speaks_the_stateless_revision(self) -> None:
        import mcp

        if not hasattr(mcp, "Client"):
            self.skipTest(f"mcp {sdk_version()} has no high-level Client with era negotiation (SDK 2.x)")

        async def session_main() -> tuple[str | None, dict]:
            server = StdioServerParameters(
                command=sys.executable, args=["run_lab.py", "serve-mcp"], cwd=str(REPO_ROOT)
            )
            async with mcp.Client(server) as client:
                result = await client.call_tool(READ_TOOL, {"ticket_id": VISIBLE_TICKET})
                return client.session.protocol_version, wire(result)

        negotiated, read = asyncio.run(asyncio.wait_for(session_main(), SESSION_TIMEOUT_S))
        self.assertEqual(negotiated, "2026-07-28")
        self.assertFalse(read.get("isError", False), read)


USER_REGISTRY = ["run_lab.py", "serve-mcp", "--registry", "tests/labs/files_lab.py:registry", "--tenant", "acme"]


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class UserRegistryOfficialClientTest(unittest.TestCase):
    """`serve-mcp --registry MODULE:ATTR` serves a team's own registry (the files lab's) to the official client."""

    def test_the_client_lists_and_calls_a_users_tools_with_every_contract_enforced(self) -> None:
        async def session_main() -> tuple[list[dict[str, Any]], dict, dict]:
            server = StdioServerParameters(command=sys.executable, args=USER_REGISTRY, cwd=str(REPO_ROOT))
            async with stdio_client(server) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream) as session:
                    await session.initialize()
                    tools = await list_every_tool(session)
                    read = wire(await session.call_tool("read_file", {"path": "/acme/readme.txt"}))
                    delete = wire(await session.call_tool("delete_file", {"path": "/acme/readme.txt",
                                                                          "request_id": "req-00000001"}))
                    return tools, read, delete

        tools, read, delete = asyncio.run(asyncio.wait_for(session_main(), SESSION_TIMEOUT_S))
        by_name = {tool["name"]: tool for tool in tools}
        self.assertEqual(sorted(by_name), ["delete_file", "read_file", "write_file"])
        self.assertFalse(read.get("isError", False), read)
        self.assertEqual(output_schema_errors(by_name["read_file"]["outputSchema"], read["structuredContent"]), [])
        self.assertEqual(read["structuredContent"]["share_token"], "[redacted]")
        self.assertEqual(structured_error(delete)["code"], "approval_required")


TYPESCRIPT_CLIENT = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const [python, repo, serverArgs, callsJson] = process.argv.slice(1);
const client = new Client({ name: "agent-lab-interop", version: "0" });
await client.connect(new StdioClientTransport({ command: python, args: JSON.parse(serverArgs), cwd: repo }));
await client.listTools();  // the client caches each tool's outputSchema and checks results against it
const calls = JSON.parse(callsJson);
const results = {};
for (const [key, [name, args]] of Object.entries(calls)) {
  try { results[key] = await client.callTool({ name, arguments: args }); }
  catch (error) { results[key] = { thrown: String(error.message) }; }
}
await client.close();
console.log(JSON.stringify(results));
"""


def typescript_sdk_dir() -> str | None:
    """A folder whose node_modules holds @modelcontextprotocol/sdk (env MCP_TS_SDK_DIR), if node can use it."""
    import os
    import shutil
    import subprocess

    folder = os.environ.get("MCP_TS_SDK_DIR")
    if not folder or shutil.which("node") is None:
        return None
    probe = subprocess.run(["node", "-e", "require.resolve('@modelcontextprotocol/sdk/package.json')"],
                           cwd=folder, capture_output=True, timeout=30)
    return folder if probe.returncode == 0 else None


@unittest.skipUnless(typescript_sdk_dir(), "set MCP_TS_SDK_DIR to a folder with node_modules/@modelcontextprotocol/sdk "
                     "(npm install @modelcontextprotocol/sdk) and put node on PATH")
class TypeScriptClientTest(unittest.TestCase):
    """The official TypeScript client checks structuredContent against the cached outputSchema, also on
    isError results: our tool errors must reach it as results, not as its validation exception."""

    def run_client(self, server_args: list[str], calls: dict[str, Any]) -> dict[str, Any]:
        import subprocess

        process = subprocess.run(
            ["node", "--input-type=module", "-e", TYPESCRIPT_CLIENT, sys.executable, str(REPO_ROOT),
             json.dumps(server_args), json.dumps(calls)],
            cwd=typescript_sdk_dir(), capture_output=True, timeout=SESSION_TIMEOUT_S,
        )
        self.assertEqual(process.returncode, 0, process.stderr.decode(errors="replace"))
        results = json.loads(process.stdout)
        for key in calls:
            self.assertNotIn("thrown", results[key], results[key])
        return results

    def test_reads_writes_and_bad_arguments_come_back_as_results_to_the_typescript_client(self) -> None:
        results = self.run_client(["run_lab.py", "serve-mcp"], {
            "read": ["get_ticket", {"ticket_id": "T-1001"}],
            "bad": ["get_ticket", {"ticket_id": "1001"}],
            "write": ["record_ticket_followup", {"ticket_id": "T-1001", "note": "Called back.", "action_id": "act-00000001"}],
        })
        self.assertFalse(results["read"].get("isError", False))
        self.assertEqual(structured_error(results["bad"])["code"], "invalid_arguments")
        self.assertEqual(structured_error(results["write"])["code"], "approval_required")

    def test_a_users_registry_served_with_registry_works_with_the_typescript_client(self) -> None:
        results = self.run_client(USER_REGISTRY, {
            "read": ["read_file", {"path": "/acme/readme.txt"}],
            "bad": ["read_file", {"path": "readme"}],
            "delete": ["delete_file", {"path": "/acme/readme.txt", "request_id": "req-00000001"}],
        })
        self.assertEqual(results["read"]["structuredContent"]["share_token"], "[redacted]")
        self.assertEqual(structured_error(results["bad"])["code"], "invalid_arguments")
        self.assertEqual(structured_error(results["delete"])["code"], "approval_required")


def structured_error(result: dict[str, Any]) -> dict[str, Any]:
    """Our error inside an isError CallToolResult: its text block is the JSON model view, and there is no
    structuredContent that could break the tool's outputSchema."""
    assert result.get("isError") is True and result.get("structuredContent") is None, result
    return json.loads(result["content"][0]["text"])["error"]


def sdk_version() -> str:
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


if __name__ == "__main__":
    unittest.main()
