"""The official MCP clients use `run_lab.py serve-mcp --http` as they use it over stdio.

The Python SDK client, on the handshake era (a session) and on 2026-07-28 (stateless), lists the ticket
lab's tools and calls them: a read validates against its advertised outputSchema, bad arguments and a
write without approval come back as isError results with our structured error, an unknown tool is a
protocol error. The TypeScript SDK client (MCP_TS_SDK_DIR names a folder whose node_modules holds
@modelcontextprotocol/sdk) does the same over its StreamableHTTPClientTransport, against the lab and
through the gateway, bearer token included. Skipped, with the reason, when a client is not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from tests.mcp_http_support import http_server
from tests.test_interop_mcp import output_schema_errors, structured_error, typescript_sdk_dir

try:
    import mcp
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    MCP_MISSING = None
except ImportError as exc:  # pragma: no cover - depends on the environment
    MCP_MISSING = f"the MCP Python SDK is not importable ({exc}); pip install mcp"

REPO_ROOT = Path(__file__).resolve().parent.parent
SESSION_TIMEOUT_S = 60.0
CALLS = {
    "read": ["get_ticket", {"ticket_id": "T-1001"}],
    "bad": ["get_ticket", {"ticket_id": "1001"}],
    "write": ["record_ticket_followup", {"ticket_id": "T-1001", "note": "Called back.", "action_id": "act-00000001"}],
}


def wire(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


@unittest.skipIf(MCP_MISSING is not None, MCP_MISSING or "")
class PythonClientOverHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        context = http_server([])
        cls.server = context.__enter__()
        cls.addClassCleanup(context.__exit__, None, None, None)

    async def scenario(self, session: Any) -> dict[str, Any]:
        tools = {tool["name"]: tool for tool in wire(await session.list_tools())["tools"]}
        results = {key: wire(await session.call_tool(name, arguments)) for key, (name, arguments) in CALLS.items()}
        from mcp.shared import exceptions

        error_type = getattr(exceptions, "MCPError", None) or getattr(exceptions, "McpError")
        try:
            await session.call_tool("no_such_tool", {})
            results["unknown"] = {}
        except error_type as error:
            results["unknown"] = {"code": error.error.code}
        return {"tools": tools, **results}

    def check(self, seen: dict[str, Any]) -> None:
        self.assertIn("get_ticket", seen["tools"])
        read = seen["read"]
        self.assertFalse(read.get("isError", False), read)
        self.assertEqual(output_schema_errors(seen["tools"]["get_ticket"]["outputSchema"], read["structuredContent"]),
                         [])
        self.assertEqual(structured_error(seen["bad"])["code"], "invalid_arguments")
        self.assertEqual(structured_error(seen["write"])["code"], "approval_required")
        self.assertEqual(seen["unknown"], {"code": -32602})

    def test_the_handshake_era_client_opens_a_session_and_calls_the_lab(self) -> None:
        async def main() -> Any:
            async with streamable_http_client(self.server.url) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream) as session:
                    await session.initialize()
                    return await self.scenario(session)

        self.check(asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S)))

    def test_the_stateless_client_calls_the_lab_without_a_session(self) -> None:
        if not hasattr(mcp, "Client"):
            self.skipTest("this mcp SDK has no 2026-07-28 Client")

        async def main() -> Any:
            async with mcp.Client(self.server.url) as client:
                self.assertEqual(client.session.protocol_version, "2026-07-28")
                return await self.scenario(client)

        self.check(asyncio.run(asyncio.wait_for(main(), SESSION_TIMEOUT_S)))


TYPESCRIPT_CLIENT = r"""
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const [url, token, calls] = [process.argv[1], process.argv[2], JSON.parse(process.argv[3])];
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "agent-lab-interop", version: "0" });
await client.connect(transport);
const results = { sessionId: transport.sessionId ?? null, version: transport.protocolVersion ?? null };
results.tools = (await client.listTools()).tools.map((tool) => tool.name);
for (const [key, [name, args]] of Object.entries(calls)) {
  try { results[key] = await client.callTool({ name, arguments: args }); }
  catch (error) { results[key] = { thrown: String(error.message) }; }
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(results));
"""


@unittest.skipUnless(typescript_sdk_dir(), "set MCP_TS_SDK_DIR to a folder with node_modules/@modelcontextprotocol/sdk "
                     "(npm install @modelcontextprotocol/sdk) and put node on PATH")
class TypeScriptClientOverHttpTest(unittest.TestCase):
    def run_client(self, url: str, calls: dict[str, Any], token: str = "") -> dict[str, Any]:
        process = subprocess.run(["node", "--input-type=module", "-e", TYPESCRIPT_CLIENT, url, token, json.dumps(calls)],
                                 cwd=typescript_sdk_dir(), capture_output=True, timeout=SESSION_TIMEOUT_S)
        self.assertEqual(process.returncode, 0, process.stderr.decode(errors="replace"))
        return json.loads(process.stdout)

    def test_the_typescript_client_lists_and_calls_the_lab_over_http_with_a_token(self) -> None:
        env = dict(os.environ, AGENT_LAB_INTEROP_TOKEN="interop-token-0001")
        with http_server(["--http-token-env", "AGENT_LAB_INTEROP_TOKEN"], env=env) as server:
            results = self.run_client(server.url, CALLS, token="interop-token-0001")
            refused = subprocess.run(["node", "--input-type=module", "-e", TYPESCRIPT_CLIENT, server.url, "wrong",
                                      "{}"], cwd=typescript_sdk_dir(), capture_output=True, timeout=SESSION_TIMEOUT_S)
        self.assertTrue(results["sessionId"])
        self.assertIn("get_ticket", results["tools"])
        for key in CALLS:
            self.assertNotIn("thrown", results[key], results[key])
        self.assertFalse(results["read"].get("isError", False))
        self.assertEqual(results["read"]["structuredContent"]["ticket"]["id"], "T-1001")
        self.assertEqual(structured_error(results["bad"])["code"], "invalid_arguments")
        self.assertEqual(structured_error(results["write"])["code"], "approval_required")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("401", refused.stderr.decode(errors="replace"))

    def test_the_typescript_client_through_the_gateway_over_http(self) -> None:
        with tempfile.TemporaryDirectory(prefix="agent-lab-gw-ts-") as scratch:
            count_file = Path(scratch) / "calls.log"
            upstream = " ".join(shlex.quote(word) for word in
                                (sys.executable, str(REPO_ROOT / "tests" / "mcp_gateway_upstream.py"), str(count_file)))
            args = ["--upstream", upstream, "--policy", str(REPO_ROOT / "tests" / "fixtures" / "gateway" /
                                                             "counting-policy.json"),
                    "--receipts", f"sqlite:{Path(scratch) / 'receipts.db'}"]
            for permission in ("notes:write", "bank:write", "profile:read", "sensor:read"):
                args += ["--permission", permission]
            with http_server(args) as server:
                results = self.run_client(server.url, {
                    "note": ["record_note", {"note": "hi", "request_id": "ts-1"}],
                    "again": ["record_note", {"note": "hi", "request_id": "ts-1"}],
                    "bad": ["record_note", {"note": 5, "request_id": "ts-2"}],
                    "transfer": ["confirm_transfer", {"account": "acc-1", "amount": 1, "request_id": "ts-3"}],
                    "hidden": ["admin_reset", {"confirm": True}],
                })
            calls = count_file.read_text(encoding="utf-8").split() if count_file.exists() else []
        self.assertNotIn("admin_reset", results["tools"])
        self.assertEqual(results["note"]["structuredContent"], {"recorded": "hi"})
        self.assertEqual(results["again"]["structuredContent"], {"recorded": "hi"})
        self.assertEqual(calls.count("record_note"), 1)
        self.assertEqual(structured_error(results["bad"])["code"], "invalid_arguments")
        # the TypeScript client declares no elicitation here: the host gets the approval request
        self.assertEqual(structured_error(results["transfer"])["code"], "approval_required")
        self.assertEqual(calls.count("confirm_transfer"), 0)
        self.assertIn("thrown", results["hidden"])
        self.assertIn("Unknown tool", results["hidden"]["thrown"])


if __name__ == "__main__":
    unittest.main()
